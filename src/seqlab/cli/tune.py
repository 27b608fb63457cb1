"""`seqlab tune TASK --arch ARCH ... --output DIR`: the options of one architecture searched on the user's data
with Optuna (`seqlab.tuning.study`), the data and any fixed option given as `seqlab train` takes them."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from seqlab.cli.options import Commands, add_number, add_options
from seqlab.compare.recipes import SIZES, recipes
from seqlab.config import option
from seqlab.registry import FAMILIES


@dataclass
class Limits:
    """The numeric options of `seqlab tune` (times are durations: 90s, 5m, 1.5h)."""

    trials: int = option(12, "trials at most (the first is the recipe itself)", at_least=1)
    study_tokens: int | None = option(None, "stop starting trials once the trials have trained on this many "
                                            "tokens in all", at_least=1)
    budget_tokens: int | None = option(None, "each trial's budget in training tokens (what the loss is summed "
                                             "over: documents for a classifier)", at_least=1)
    budget_epochs: int | None = option(None, "each trial's budget in passes over the training data (the default, "
                                             "1, when no budget is given)", at_least=1)
    tune_budget_tokens: int | None = option(None, "each tuning trial's budget in training tokens (default: the "
                                                  "comparison's budget)", at_least=1)
    tune_budget_epochs: int | None = option(None, "each tuning trial's budget in passes over the training data "
                                                  "(default: the comparison's budget)", at_least=1)
    evaluations: int = option(4, "evaluations per trial, evenly spaced: the pruner reads each (0: at epoch ends)",
                              at_least=0)
    tune_evaluations: int = option(4, "evaluations per tuning trial, evenly spaced: the pruner reads each (0: at "
                                      "epoch ends)", at_least=0)
    tune_trials: int | None = option(None, "tune each architecture first: this many trials of seqlab tune, every "
                                           "architecture the same (then its best options are trained)", at_least=1)
    seeds: int | None = option(None, "train each model with this many seeds (--seed, --seed + 1, ...): the report "
                                     "gives their mean, spread and a bootstrap interval", at_least=1, at_most=100)


def add_budget(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    """--budget TIME | --budget-tokens N | --budget-epochs N (with `prefix`: --tune-budget ...)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(f"--{prefix}budget", metavar="TIME", dest=f"{prefix.replace('-', '_')}budget",
                       help="each trial's budget in wall time, evaluation included: 90s, 5m, 1.5h (its step count "
                            "fixed once from the measured speed)")
    for name in ("budget_tokens", "budget_epochs"):
        add_number(group, Limits, prefix.replace("-", "_") + name, metavar="N")


def add_search(parser: argparse.ArgumentParser, evaluations: str = "evaluations") -> None:
    """The options `seqlab tune` and `seqlab compare --tune-trials` share: the space and the pruner."""
    parser.add_argument("--space", metavar="FILE", help="a YAML search space of your own: 'lr: {low: 1.0e-4, high: "
                        "1.0e-2, log: true}', 'hidden_size: [128, 256]', 'weight_decay: null' (leave out), an "
                        "architecture's name for entries of its own (default: the family's space)")
    parser.add_argument("--pruner", choices=("median", "none"), default="median",
                        help="stop a trial whose valid figure is worse than the median of the earlier trials' at "
                             "the same step (default: median)")
    add_number(parser, Limits, evaluations, metavar="N")


def add_parser(commands: Commands) -> None:
    tune = commands.add_parser("tune", help="search an architecture's options on your data with Optuna (TPE, "
                               "pruning, resumable in SQLite), then write the best as a config for seqlab train")
    kinds = tune.add_subparsers(dest="task", metavar="TASK")
    for name, family in FAMILIES.items():
        pipeline = family.pipeline
        task = kinds.add_parser(name, help=f"tune {family.title}: {', '.join(recipes(name))}")
        task.add_argument("--output", required=True, metavar="DIR", help="the study's folder: study.db (SQLite), "
                          "trials/NNNN (one run per trial), tune.json, tune.md, history.png, best.yaml")
        task.add_argument("--arch", required=True, choices=tuple(recipes(name)), metavar="ARCH",
                          help=f"the architecture whose compare recipe the search starts from: "
                               f"{', '.join(recipes(name))}")
        task.add_argument("--size", choices=SIZES, default="small", help="the recipe's widths (default: small)")
        add_number(task, Limits, "trials", metavar="N")
        task.add_argument("--study-time", metavar="TIME", help="stop starting trials once the trials have taken "
                          "this long in all: 30m, 2h")
        add_number(task, Limits, "study_tokens", metavar="N")
        add_budget(task)
        add_search(task)
        task.add_argument("--objective", metavar="FIGURE", help=f"the valid figure to optimise (default: "
                          f"{family.metric})")
        task.add_argument("--fixed-width", action="store_true", help="keep the recipe's width (do not search it)")
        add_options(task, pipeline.groups["data"], "data (every trial)")
        add_options(task, pipeline.groups["model"], "model (fixed for every trial; leaves the option out of the "
                    "search)", skip=(*pipeline.derived, family.arch_option))
        add_options(task, pipeline.groups["train"], "training (fixed for every trial)",
                    skip=("output", "max_time", "max_tokens", "time_schedule", "resume", "evaluations"),
                    defaults={})
    tune.set_defaults(handler=command)


def command(args: argparse.Namespace) -> int:
    from seqlab.compare.run import parse_budget
    from seqlab.errors import SeqlabError
    from seqlab.tuning.space import read_space
    from seqlab.tuning.study import tune

    if not args.task:
        raise SeqlabError(f"seqlab tune needs a task ({', '.join(FAMILIES)})")
    groups = FAMILIES[args.task].pipeline.option_groups
    given = {k: v for k, v in vars(args).items() if k in groups and k not in ("output", "evaluations")}
    tune(args.task, args.output, given, args.arch, trials=args.trials,
         study_time=parse_budget(args.study_time, "--study-time") if args.study_time else None,
         study_tokens=args.study_tokens,
         budget_s=parse_budget(args.budget) if args.budget else None, budget_tokens=args.budget_tokens,
         budget_epochs=args.budget_epochs, size=args.size, space=read_space(args.space) if args.space else None,
         metric=args.objective, pruner=args.pruner, evaluations=args.evaluations, width=not args.fixed_width,
         command="seqlab " + " ".join(sys.argv[1:]))
    print(f"wrote {Path(args.output) / 'best.yaml'} and {Path(args.output) / 'tune.md'}")
    return 0
