"""`seqlab export RUN --format FORMAT --output DIR`: a run's inference graphs as ONNX (`seqlab.export.onnx`),
runnable without PyTorch, or another format a family offers (`Family.exports`; its part of that name exports
and says what it wrote: a transformer LM as a Hugging Face GPT-2 directory, `--format hf`)."""

from __future__ import annotations

import argparse
import json

from seqlab.cli.options import Commands
from seqlab.registry import FAMILIES, run_family, titles


def formats() -> dict[str, list[str]]:
    """{format: the families that export to it}, onnx first."""
    found: dict[str, list[str]] = {"onnx": []}
    for name, family in FAMILIES.items():
        for fmt in family.exports:
            found.setdefault(fmt, []).append(name)
    return found


def add_parser(commands: Commands) -> None:
    """`seqlab export RUN --format onnx|... --output DIR`."""
    others = {fmt: names for fmt, names in formats().items() if fmt != "onnx"}
    export = commands.add_parser("export", help="export a trained run's inference graphs (ONNX), with its vocabulary "
                                 "and labels, to run on onnxruntime without PyTorch (seqlab.export.runtime); or "
                                 + "; or ".join(f"(--format {fmt}) {titles(names)} in that format"
                                                for fmt, names in others.items()))
    export.add_argument("run", metavar="RUN", help="the run directory")
    export.add_argument("--format", choices=tuple(formats()), default="onnx",
                        help="the export format: onnx, or " + ", ".join(
                            f"{fmt} ({titles(names)} only)" for fmt, names in others.items()) + " (default: onnx)")
    export.add_argument("--output", required=True, metavar="DIR", help="the export directory (created)")
    export.add_argument("--overwrite", action="store_true", help="replace an export directory that holds files")
    export.set_defaults(handler=command)


def command(args: argparse.Namespace) -> int:
    """`seqlab export`: write the graphs and files, then say what was written."""
    if args.format != "onnx":
        family = run_family(args.run)
        if args.format not in family.exports:                  # the format's own family refuses it in its words
            family = FAMILIES[formats()[args.format][0]]
        writer = family.part(args.format)
        writer.report(args.run, writer.export(args.run, args.output, args.overwrite))
        return 0
    from seqlab.export.onnx import export_onnx

    manifest = json.loads(export_onnx(args.run, args.output, args.overwrite).read_text())
    graphs = ", ".join(graph["file"] for graph in manifest["graphs"].values())
    print(f"exported the {manifest['arch']} {manifest['task']} of {args.run} to {args.output}/ ({graphs}, "
          "manifest.json, README.md: how to run it with onnxruntime and numpy alone); with seqlab: "
          "seqlab.export.runtime.load_export")
    return 0
