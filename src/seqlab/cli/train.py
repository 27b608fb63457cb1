"""`seqlab train FAMILY [options]`: one subcommand per family, its options generated from the family's config
dataclasses (`seqlab.config.option`), so that the command line, config files and config.json share one set
of names; then `seqlab.api.train` (the family's pipeline trains, then the run's model card is written)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from seqlab.cli.options import Commands, add_options
from seqlab.config import config_task
from seqlab.errors import SeqlabError
from seqlab.registry import FAMILIES, family


def add_parser(commands: Commands) -> None:
    train = commands.add_parser("train", help="train a model")
    tasks = train.add_subparsers(dest="task", required=True, metavar="TASK")
    for name, found in FAMILIES.items():
        pipeline = found.pipeline
        task = tasks.add_parser(name, help=found.summary)
        task.add_argument("--config", help="YAML or TOML file of options; the command line overrides it (a file "
                          "that names its family, 'task: " + name + "', as best.yaml of seqlab tune does, also "
                          "trains with seqlab train --config FILE)")
        task.add_argument("--resume", action="store_true",
                          help="continue the run in --output from its last checkpoint, exactly")
        task.add_argument("--overwrite", action="store_true", help="replace a run already in --output")
        add_options(task, pipeline.groups["data"], "data")
        add_options(task, pipeline.groups["model"], "model", skip=pipeline.derived)
        add_options(task, pipeline.groups["train"], "training", defaults=pipeline.train_defaults)
    train.set_defaults(handler=command)


def with_family(argv: list[str]) -> list[str]:
    """`seqlab train --config FILE ...` without a family: the family the file names (`task: classifier`, as
    best.yaml of `seqlab tune` does) put after `train`; a file that names none is one line naming the command."""
    if argv[:1] != ["train"] or len(argv) < 2 or not argv[1].startswith("-") or argv[1] in ("-h", "--help"):
        return argv
    config = next((argv[i + 1] if token == "--config" else token.removeprefix("--config=")
                   for i, token in enumerate(argv[:-1] if argv[-1] == "--config" else argv)
                   if token == "--config" or token.startswith("--config=")), None)
    if config is None:
        return argv                          # argparse names the missing TASK
    task = config_task(config)
    families = "|".join(FAMILIES)
    if task is None:
        raise SeqlabError(f"seqlab train needs the family before the options: seqlab train {families} --config "
                          f"{config} ({config} names none; 'task: FAMILY' in it would)")
    if task not in FAMILIES:
        raise SeqlabError(f"config file {config}: task {task!r} is not a family seqlab trains; choose one of "
                          f"{', '.join(FAMILIES)}")
    return ["train", task, *argv[1:]]


def check_config_task(config: str | None, task: str) -> None:
    """A config file that names another family (`task: tagger` given to `seqlab train classifier`) is refused."""
    named = config_task(config) if config else None
    if named is not None and named != task:
        raise SeqlabError(f"config file {config} is for seqlab train {named} (task: {named}), not {task}: run "
                          f"seqlab train {named} --config {config}")


def command(args: argparse.Namespace) -> int:
    """`seqlab train TASK`: `seqlab.api.train` (the pipeline trains, then the run's model card is written)."""
    from seqlab.api import train
    from seqlab.runs.directory import RESUME_OR_OVERWRITE
    from seqlab.runs.records import finished_run

    found = family(args.task)
    pipeline = found.pipeline
    check_config_task(args.config, found.name)
    overrides = {k: v for k, v in vars(args).items() if k in pipeline.option_groups}
    if args.resume and args.overwrite:
        raise SeqlabError(RESUME_OR_OVERWRITE)
    config = pipeline.resolve(args.config, overrides, resume=args.resume)
    finished = finished_run(config.train.output, config.train) if args.resume else None
    if finished is not None:                  # nothing to train: weights, metrics and card stay as they are
        if int(os.environ.get("RANK", 0)) == 0:
            print(finished, file=sys.stderr)
        return 0
    train(found.name, config, resume=args.resume, overwrite=args.overwrite)
    output = config.train.output
    if int(os.environ.get("RANK", 0)) == 0:
        card = ", MODEL_CARD.md" if (Path(output) / "MODEL_CARD.md").exists() else ""
        print(f"saved to {output}/ (model.safetensors, metrics.jsonl, curves.png{card}); try:\n" +
              "\n".join("  " + step.format(output=output) for step in pipeline.next_steps), file=sys.stderr)
    return 0
