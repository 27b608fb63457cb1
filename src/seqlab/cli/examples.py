"""`seqlab examples TASK DIR [--size tiny|small] [--seed N] [--overwrite]`: write the small example dataset of a
task (`seqlab.examples.write`), print its files and the `seqlab train` command that trains a first model on them;
`seqlab examples --list` (or no TASK) lists the tasks."""

from __future__ import annotations

import argparse

from seqlab.cli.options import Commands, Number
from seqlab.errors import SeqlabError
from seqlab.examples import SIZES, TASKS, write
from seqlab.examples import command as train_command


def add_parser(commands: Commands) -> None:
    parser = commands.add_parser("examples", help="write a small example dataset of a task, and the command that "
                                 "trains on it")
    parser.add_argument("task", metavar="TASK", nargs="?", help=f"the task: {', '.join(TASKS)}")
    parser.add_argument("directory", metavar="DIR", nargs="?", help="the folder to write its files in (created "
                        "if missing)")
    parser.add_argument("--size", choices=SIZES, default="small",
                        help="tiny: a few hundred examples, trained in seconds; small: a few thousand, trained "
                        "to a good score in minutes on a CPU (default: small)")
    parser.add_argument("--seed", type=Number(int, at_least=0), default=0,
                        help="the seed of the generated examples: the same seed writes the same files (default: 0)")
    parser.add_argument("--overwrite", action="store_true", help="replace the task's files already in DIR")
    parser.add_argument("--list", action="store_true", help="list the tasks and what each dataset is")
    parser.set_defaults(handler=command)


def command(args: argparse.Namespace) -> int:
    if args.list or args.task is None:
        width = max(map(len, TASKS))
        print("\n".join(f"{name:<{width}}  {text}" for name, text in TASKS.items()))
        return 0
    if args.directory is None:
        raise SeqlabError(f"seqlab examples {args.task} DIR: the folder to write the files in is missing")
    paths = write(args.task, args.directory, size=args.size, seed=args.seed, overwrite=args.overwrite)
    print("\n".join(f"wrote {path}" for path in paths.values()))
    print(f"train a first model on them:\n  {train_command(args.task, args.directory)}")
    return 0
