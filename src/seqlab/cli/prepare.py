"""`seqlab prepare FAMILY --train F --valid F ... --output DIR`: a family's training, validation and test files
tokenized once into a prepared folder of memory-mapped shards (`seqlab.data.prepared`), for `seqlab train FAMILY
--data DIR`. Its options are the family's data options that shape the ids (generated from its data config), and
how to write the folder. `seqlab prepare --verify DIR` hashes every file of a prepared folder again
(`seqlab.api.verify_prepared`)."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from seqlab.cli.options import Commands, Number, add_options
from seqlab.registry import FAMILIES, family


def add_parser(commands: Commands) -> None:
    prepare = commands.add_parser("prepare", help="tokenize training data once into memory-mapped shards")
    prepare.add_argument("--verify", metavar="DIR", default="", help="check a prepared folder instead: hash every "
                         "file again and compare it with the SHA-256 its manifest lists (a run hashes only the files "
                         "whose size or times changed since the last check)")
    tasks = prepare.add_subparsers(dest="task", required=False, metavar="TASK")
    for name, found in FAMILIES.items():
        if not found.prepares:
            continue
        task = tasks.add_parser(name, help=f"prepare the data of {found.title}")
        task.add_argument("--output", required=True, help="the prepared folder to write (written under a hidden "
                          "name and renamed into place when complete)")
        task.add_argument("--workers", type=Number(int, at_least=0), default=0,
                          help="processes that tokenize (default 0: one per core)")
        task.add_argument("--overwrite", action="store_true", help="replace a prepared folder already in --output")
        task.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                          help="show a progress bar (default: on)")
        add_options(task, found.pipeline.groups["data"], "data", skip=found.part("prepare").SKIP)
    prepare.set_defaults(handler=command)


def command(args: argparse.Namespace) -> int:
    from seqlab.api import prepare

    if args.verify or not args.task:
        return verify(args)
    found = family(args.task)
    fields = {f.name for f in dataclasses.fields(found.pipeline.groups["data"])}
    options = {k: v for k, v in vars(args).items() if k in fields}
    folder = prepare(found.name, args.output, workers=args.workers, overwrite=args.overwrite,
                     progress=args.progress, **options)
    print(f"prepared {folder}/; train from it: seqlab train {found.name} --data {folder} ...", file=sys.stderr)
    return 0


def verify(args: argparse.Namespace) -> int:
    from seqlab.api import verify_prepared
    from seqlab.errors import SeqlabError
    from seqlab.progress import size_text

    if not args.verify:
        raise SeqlabError(f"seqlab prepare needs a task ({', '.join(n for n, f in FAMILIES.items() if f.prepares)}) "
                          "or --verify DIR")
    if args.task:
        raise SeqlabError(f"seqlab prepare --verify DIR checks a prepared folder; it prepares nothing: leave out "
                          f"{args.task} and its options")
    checked = verify_prepared(args.verify)
    print(f"{args.verify}: the {checked['files']:,} files ({size_text(checked['bytes'])}) hold what its manifest "
          f"lists (every SHA-256 checked in {checked['seconds']:.1f} s)", file=sys.stderr)
    return 0
