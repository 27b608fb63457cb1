from seqlab.cli import main

raise SystemExit(main())
