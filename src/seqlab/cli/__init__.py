"""`seqlab <command>`: the command line (`main.py`: the parser and `main`, the console script's entry point),
one module per command; `options.py` is what the commands and the families' `cli` parts build on. This file
imports nothing, so that a family's `cli` part importing `seqlab.cli.options` does not run the command line."""
