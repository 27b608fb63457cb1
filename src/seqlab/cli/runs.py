"""The commands about one run directory or this machine: `seqlab info DIR` (what a run holds), `seqlab card
RUN` (its model card, `seqlab.cards`) and `seqlab bench peak` (the matrix-product peak every run's MFU is a
share of)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from seqlab.cli.options import CommandOptions, Commands, add_number, add_runtime_options, run_dir_argument
from seqlab.config import option


@dataclass
class CardOptions:
    """The numeric options of `seqlab card`."""

    resamples: int = option(1000, "bootstrap resamples for the evaluation's 95% intervals (0: no intervals, no "
                                  "prediction pass)", at_least=0)


def add_info_command(commands: Commands) -> None:
    """`seqlab info DIR [--json]`."""
    info = commands.add_parser("info", help="what a run directory holds: task, model, parameters, data files, "
                               "training options and progress, and the command that made it")
    run_dir_argument(info)
    info.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    info.set_defaults(handler=info_command)


def info_command(args: argparse.Namespace) -> int:
    """`seqlab info`: `seqlab.info.run_info`, as text or JSON."""
    from seqlab.info import format_info, run_info

    info = run_info(args.run_dir)
    print(json.dumps(info) if args.json else format_info(info))
    return 0


def add_card_command(commands: Commands) -> None:
    """`seqlab card RUN [--format markdown|json]`."""
    card = commands.add_parser("card", help="write (or rewrite) a trained run's model card, MODEL_CARD.md and "
                               "model_card.json (Mitchell et al. 2019: model details, training data with its "
                               "datasheet, evaluation with bootstrap intervals, intended use, ethical considerations, "
                               "caveats), and print it")
    card.add_argument("run", metavar="RUN", help="the run directory")
    card.add_argument("--format", choices=("markdown", "json"), default="markdown",
                      help="what to print: the Markdown card or its JSON (default: markdown)")
    card.add_argument("--notes", metavar="FILE", help="a Markdown file of your own notes (intended use, data, "
                      "caveats) to copy into the card, replacing the run's earlier notes")
    add_number(card, CardOptions, "resamples")
    add_number(card, CommandOptions, "seed", help="seed of the bootstrap")
    card.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    add_runtime_options(card)
    card.set_defaults(handler=card_command)


def card_command(args: argparse.Namespace) -> int:
    """`seqlab card`: `seqlab.cards.card.make_card` under the run's lock, then the card printed."""
    from seqlab.cards.card import NOTES, make_card, read_card_notes
    from seqlab.cards.markdown import to_markdown
    from seqlab.fileio import atomic_write_text
    from seqlab.runs.directory import RunLock, read_run_json

    read_run_json(args.run)                                    # a run directory, or one line and exit 2
    notes = read_card_notes(args.notes) if args.notes else None
    with RunLock(Path(args.run)):
        if notes is not None:
            atomic_write_text(Path(args.run) / NOTES, notes)
        card, paths = make_card(args.run, intervals=args.resamples > 0, resamples=args.resamples or 1000,
                                seed=args.seed, device=args.device, progress=None if args.progress else False)
    print(json.dumps(card) if args.format == "json" else to_markdown(card))
    print(f"wrote {paths['markdown']} and {paths['json']}", file=sys.stderr)
    return 0


def add_bench_command(commands: Commands) -> None:
    """`seqlab bench peak`: this machine's matrix-product peak, the figure every run's MFU is a share of."""
    bench = commands.add_parser("bench", help="measure this machine: its matrix-product peak (FLOP/s), which the "
                                "model-FLOPs utilisation (MFU) of every run's log and progress bar is a share of")
    kinds = bench.add_subparsers(dest="what", required=True, metavar="WHAT")
    peak = kinds.add_parser("peak", help="time a square fp32 (or bf16) matrix product with the run's threads, "
                            "the best of a second of tries, and cache it for training runs (~/.cache/seqlab/"
                            "peak.json, or $SEQLAB_CACHE_DIR)")
    peak.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto",
                      help="the products' dtype, as train's --precision (auto: bf16 on CUDA and on a CPU with "
                           "bfloat16 kernels, the peak a model that auto trains in bf16 is measured against; fp32 "
                           "elsewhere)")
    peak.add_argument("--refresh", action="store_true", help="measure again even if this machine's figure is cached")
    peak.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    add_runtime_options(peak, "CPU threads, as the training run will use (0: PyTorch's choice)")
    peak.set_defaults(handler=bench_command)


def bench_command(args: argparse.Namespace) -> int:
    """`seqlab bench peak`: `seqlab.training.flops.peak`, measured (or read from the cache) and printed."""
    from seqlab.training import flops
    from seqlab.training.devices import check_precision, resolve_device

    device = resolve_device(args.device)
    check_precision(device, args.precision)
    dtype = flops.precision_dtype(device, args.precision)
    value, measured = flops.peak(device, dtype, refresh=args.refresh)
    key = flops.peak_key(device, dtype)
    if args.json:
        print(json.dumps({"flop_per_s": value, "gflop_per_s": round(value / 1e9, 3), "key": key,
                          "measured_now": measured, "cache": str(flops.cache_dir() / "peak.json")}))
    else:
        print(f"peak: {value / 1e9:,.1f} GFLOP/s ({key}; {'measured now' if measured else 'cached'}, "
              f"{flops.cache_dir() / 'peak.json'})")
    return 0


def add_parser(commands: Commands) -> None:
    """`seqlab info`, `seqlab bench` and `seqlab card`, in the order --help lists them."""
    add_info_command(commands)
    add_bench_command(commands)
    add_card_command(commands)
