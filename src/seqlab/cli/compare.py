"""`seqlab compare TASK ... --output DIR`: every architecture of a family (its compare recipes) trained on the
user's data under one budget, then one report (`seqlab.compare`); `seqlab compare --report DIR` rebuilds the
report of a comparison from its runs."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from seqlab.cli.options import Commands, add_number, add_options
from seqlab.cli.tune import Limits, add_budget, add_search
from seqlab.compare.recipes import SIZES, recipes
from seqlab.config import option
from seqlab.errors import SeqlabError
from seqlab.registry import FAMILIES


@dataclass
class Budget:
    """The numeric budgets of `seqlab compare` (the time budget, --budget, is a duration: 90s, 5m, 1.5h)."""

    budget_tokens: int | None = option(None, "training tokens per architecture (what the loss is summed over: "
                                             "documents for a classifier)", at_least=1)
    budget_epochs: int | None = option(None, "passes over the training data per architecture, each with its own "
                                             "schedule", at_least=1)


def add_parser(commands: Commands) -> None:
    """`seqlab compare TASK ... --output DIR` and `seqlab compare --report DIR`."""
    compare = commands.add_parser("compare", help="train every architecture of the chapters on your data under one "
                                  "budget (wall time or tokens), each into a run directory, then write one report "
                                  "(report.html, report.md): table, curves, speed against quality, samples, "
                                  "confusions, what the gates and attention do")
    compare.add_argument("--report", metavar="DIR", help="rebuild the report of the comparison in DIR from its "
                         "finished runs (no training)")
    kinds = compare.add_subparsers(dest="task", metavar="TASK")
    for name, family in FAMILIES.items():
        pipeline = family.pipeline
        task = kinds.add_parser(name, help=f"compare architectures of {family.title}: "
                                f"{', '.join(recipes(name))}")
        task.add_argument("--output", required=True, metavar="DIR", help="the comparison's folder: compare.json, "
                          "runs/ARCH (one run directory per architecture), report.html, report.md")
        task.add_argument("--archs", nargs="+", metavar="ARCH", choices=tuple(recipes(name)),
                          help=f"the architectures (default: all: {' '.join(recipes(name))})")
        budget = task.add_mutually_exclusive_group()
        budget.add_argument("--budget", metavar="TIME", help="wall time per architecture, evaluation included: "
                            "90s, 5m, 1.5h (default: 3m)")
        for option_name in ("budget_tokens", "budget_epochs"):
            add_number(budget, Budget, option_name, metavar="N")
        task.add_argument("--variants", metavar="FILE", help="variants of your own, compared beside --archs (or "
                          "alone): a YAML mapping from a name to options, e.g. 'bilstm-crf: {recipe: bilstm, "
                          "crf: true}' (option names as in a config file; without a recipe, seqlab train's "
                          "defaults)")
        add_number(task, Limits, "seeds", metavar="K")
        add_number(task, Limits, "tune_trials", metavar="N")
        add_budget(task, "tune-")
        add_search(task, "tune_evaluations")
        task.add_argument("--size", choices=SIZES, default="small",
                          help="model widths: tiny (16 units, for a try), small (the tables' recipes, ~2-3M "
                               "parameters for a 10k-word LM) or medium (twice as wide) (default: small)")
        if family.compare_prompt:
            task.add_argument("--prompt", help="the prompt every language model continues in the report "
                              "(default: the start of the validation file)")
        add_options(task, pipeline.groups["data"], "data (every architecture)")
        add_options(task, pipeline.groups["model"], "model (every architecture it acts on)",
                    skip=(*pipeline.derived, family.arch_option))
        add_options(task, pipeline.groups["train"], "training (every architecture)",
                    skip=("output", "max_time", "max_tokens", "time_schedule", "resume"),
                    defaults=pipeline.train_defaults)
    compare.set_defaults(handler=command)


def command(args: argparse.Namespace) -> int:
    """`seqlab compare`: `seqlab.compare.run.compare` (or, with --report, `seqlab.compare.report.build_report`)."""
    from seqlab.compare.report import build_report
    from seqlab.compare.run import compare, parse_budget, read_variants

    if args.report:
        if args.task:
            raise SeqlabError("--report DIR rebuilds a comparison's report; give it alone, without a task")
        paths = build_report(args.report)
        print(f"wrote {paths['html']} and {paths['markdown']}")
        return 0
    if not args.task:
        raise SeqlabError(f"seqlab compare needs a task ({', '.join(FAMILIES)}) or --report DIR")
    given = {k: v for k, v in vars(args).items() if k in FAMILIES[args.task].pipeline.option_groups and k != "output"}
    variants = read_variants(args.variants) if args.variants else None
    from seqlab.tuning.space import read_space

    tune_budget = {"budget_s": parse_budget(args.tune_budget, "--tune-budget") if args.tune_budget else None,
                   "budget_tokens": args.tune_budget_tokens, "budget_epochs": args.tune_budget_epochs}
    plan = compare(args.task, args.output, given, args.archs or (),
                   parse_budget(args.budget) if args.budget else None, args.budget_tokens, args.size,
                   getattr(args, "prompt", None), "seqlab " + " ".join(sys.argv[1:]), variants=variants,
                   budget_epochs=args.budget_epochs, seeds=args.seeds, tune_trials=args.tune_trials,
                   tune_budget={k: v for k, v in tune_budget.items() if v is not None} or None,
                   space=read_space(args.space) if args.space else None, pruner=args.pruner,
                   tune_evaluations=args.tune_evaluations)
    print(f"compared {', '.join(plan['archs'])}: {Path(args.output) / 'report.html'} and report.md")
    return 0
