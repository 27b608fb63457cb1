"""`seqlab prepare FAMILY --train F --valid F ... --output DIR`: a family's training, validation and test files
tokenized once into a prepared folder of memory-mapped shards (`seqlab.data.prepared`), for `seqlab train FAMILY
--data DIR`. Its options are the family's data options that shape the ids (generated from its data config), and
how to write the folder."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from seqlab.cli.options import Number, add_options
from seqlab.registry import FAMILIES, family


def add_parser(commands) -> None:
    prepare = commands.add_parser("prepare", help="tokenize training data once into memory-mapped shards")
    tasks = prepare.add_subparsers(dest="task", required=True, metavar="TASK")
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

    found = family(args.task)
    fields = {f.name for f in dataclasses.fields(found.pipeline.groups["data"])}
    options = {k: v for k, v in vars(args).items() if k in fields}
    folder = prepare(found.name, args.output, workers=args.workers, overwrite=args.overwrite,
                     progress=args.progress, **options)
    print(f"prepared {folder}/; train from it: seqlab train {found.name} --data {folder} ...", file=sys.stderr)
    return 0
