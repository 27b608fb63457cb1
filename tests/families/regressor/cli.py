"""A regressor on the command line: `seqlab regress RUN [FILE]` (a text a line in, its number out) and what
`seqlab evaluate` prints of one (the mean squared and absolute errors)."""

from __future__ import annotations

import argparse
import json
import sys

from seqlab.cli.options import inference_command, require_file

EVALUATE_OPTIONS = ()          # `seqlab evaluate` options of its own: none (the Family's evaluate_options is empty)


def add_commands(commands) -> None:
    """`seqlab regress DIR [FILE]`."""
    inference_command(commands, "regress", "predict each text's number with a trained regressor", "one text per line",
                      {}, "texts", regress_command)


def regress_command(args: argparse.Namespace) -> int:
    from seqlab.registry import load

    regressor = load(args.run_dir, args.device)
    source = sys.stdin if args.file == "-" else open(args.file, encoding="utf-8")   # noqa: SIM115
    with source:
        texts = [line.rstrip("\n") for line in source if line.strip()]
    for value in regressor.predict(texts, args.batch_size or 64):
        print(f"{value:.4f}")
    return 0


def report(args: argparse.Namespace, scorer) -> int:
    """`seqlab evaluate` of a regressor; `scorer()` loads it and gives its pipeline's evaluate."""
    require_file(args)
    result = scorer()(args.file)
    del result["errors"]
    result["file"] = args.file
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"file:   {args.file}")
    print(f"texts:  {result['items']:,}")
    print(f"mse:    {result['mse']:.4f}")
    print(f"mae:    {result['mae']:.4f}")
    return 0
