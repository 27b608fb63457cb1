"""A classifier on the command line: `seqlab classify` (documents in, each label and every class's probability
out, written chunk by chunk) and what `seqlab evaluate` prints of one (accuracy, macro-F1, per-class figures and
the confusion matrix, drawn as a PNG)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from seqlab.cli.options import (
    EvaluateOption,
    inference_command,
    require_file,
    write_chunk,
)
from seqlab.data.documents import FORMATS as DOCUMENT_FORMATS
from seqlab.fileio import check_writable

# the options of `seqlab evaluate` of its own (`Family.evaluate_options` names all it takes)
EVALUATE_OPTIONS = (
    EvaluateOption("--format", "the file's format (default: the training files')", choices=DOCUMENT_FORMATS),
    EvaluateOption("--text-column", "the text's column (a header name or 0-based index) or JSON field (default: the "
                   "run's --text-column, as training read its files)", metavar="COLUMN"),
    EvaluateOption("--label-column", "the label's column or JSON field (default: the run's)", metavar="COLUMN"),
    EvaluateOption("--header", "whether the file's first row names its columns (default: the run's --header)",
                   choices=("auto", "yes", "no")),
    EvaluateOption("--confusion-png", "where to draw the confusion matrix (default: DIR/confusion_<file name>.png; "
                   "'none' for no picture)", metavar="PNG"),
)


def add_commands(commands) -> None:
    """`seqlab classify DIR [FILE] [options]`."""
    classify = inference_command(
        commands, "classify", "classify documents with a trained classifier", "one document per line",
        {"--input-format": (("text", *DOCUMENT_FORMATS), "text: one document per line; or a file in a training "
                            "format (its labels, if any, are ignored; the features classifier needs its feature "
                            "columns)"),
         "--output-format": (("tsv", "json"), "tsv: the label, then each class's probability, a header naming the "
                             "columns; json: one object per document")},
        "documents", classify_command)
    classify.add_argument("--text-column", metavar="COLUMN", help="tsv / csv / jsonl input: the text's column (a "
                          "header name or 0-based index) or JSON field (default: the run's --text-column)")
    classify.add_argument("--header", choices=("auto", "yes", "no"), help="tsv / csv input: whether the first row "
                          "names the columns (default: the run's --header)")


def classify_command(args: argparse.Namespace) -> int:
    """`seqlab classify`: each chunk of documents written (and flushed) as soon as it is classified."""
    from seqlab.families.classifier.pipeline import load_classifier

    classifier = load_classifier(args.run_dir, args.device)
    header = args.output_format == "tsv"
    for predictions in classifier.classify_stream(args.file, args.input_format, args.batch_size, args.chunk_size,
                                                  args.max_input_length, args.long_input,
                                                  text_column=args.text_column, header=args.header):
        out = ["\t".join(["label", *(f"p({label})" for label in classifier.labels)]) + "\n"] if header else []
        header = False
        for prediction in predictions:
            if args.output_format == "json":
                out.append(json.dumps({"label": prediction.label, "probability": round(prediction.probability, 6),
                                       "probabilities": {k: round(v, 6) for k, v in prediction.probabilities.items()}},
                                      ensure_ascii=False) + "\n")
            else:
                out.append("\t".join([prediction.label, *(f"{p:.4f}" for p in prediction.probabilities.values())])
                           + "\n")
        write_chunk(out)
    return 0


def report(args: argparse.Namespace, scorer) -> int:
    """`seqlab evaluate` of a classifier; `scorer()` loads it and gives its pipeline's evaluate."""
    require_file(args)
    png = args.confusion_png or str(Path(args.run_dir) / f"confusion_{Path(args.file).name}.png")
    if png != "none":
        check_writable(png, "--confusion-png")
    result = scorer()(args.file, args.format, None if png == "none" else png,
                                      progress=False if args.json else None, chunk_size=args.chunk_size,
                                      max_input_length=args.max_input_length, long_input=args.long_input,
                                      text_column=args.text_column, label_column=args.label_column,
                                      header=args.header)
    result["file"] = args.file
    if png != "none":
        result["confusion_png"] = png
    if args.json:
        print(json.dumps(result))
        return 0
    labels = result["labels"]
    print(f"file:       {args.file}")
    truncated = f" ({result['truncated']:,} truncated)" if result["truncated"] else ""
    print(f"documents:  {result['documents']:,}{truncated}")
    print(f"accuracy:   {result['accuracy']:.2f}%")
    print(f"macro-F1:   {result['macro_f1']:.2f}")
    width = max(8, *(len(label) for label in labels))
    print(f"\n{'class':<{width}}  precision  recall      F1  support")
    for label, figures in result["per_class"].items():
        print(f"{label:<{width}}  {figures['precision']:9.2f}  {figures['recall']:6.2f}  {figures['f1']:6.2f}  "
              f"{figures['support']:7,}")
    cell = max(6, width, *(len(f"{n:,}") for row in result["confusion"] for n in row))
    print(f"\nconfusion matrix (rows: gold, columns: predicted){f'; drawn in {png}' if png != 'none' else ''}")
    print(" " * width + "".join(f"  {label:>{cell}}" for label in labels))
    for label, row in zip(labels, result["confusion"], strict=True):
        print(f"{label:<{width}}" + "".join(f"  {n:>{cell},}" for n in row))
    return 0
