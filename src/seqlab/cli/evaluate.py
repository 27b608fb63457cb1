"""`seqlab evaluate DIR [FILE] [options]`: score a trained model on a file, whatever its family. The options
are declared here once each; a family lists those that act on its runs (`Family.evaluate_options`), the
others are refused in one line, and the family's `cli` part scores the file and prints the figures
(`report(args, scorer)`)."""

from __future__ import annotations

import argparse
import dataclasses
import functools
from dataclasses import dataclass

from seqlab.cli.options import add_input_options, add_number, add_runtime_options, add_search_options, run_dir_argument
from seqlab.config import option
from seqlab.data.documents import FORMATS as DOCUMENT_FORMATS
from seqlab.errors import SeqlabError
from seqlab.registry import FAMILIES, load, run_family, titles


@dataclass
class EvaluateOptions:
    """The numeric options of `seqlab evaluate` (the decoding ones are `SearchOptions`')."""

    batch_size: int | None = option(None, "parallel streams of a text, or sentences decoded at once (default: 10 "
                                          "streams, 64 sentences)", at_least=1)
    stride: int = option(0, "a transformer's sliding-window stride (0: its context / 2)", at_least=0)
    confusions: int = option(10, "list this many of the most confused tag pairs", at_least=0)


def acting_on(option_name: str) -> list[str]:
    """The families whose runs `option_name` acts on."""
    return [name for name, found in FAMILIES.items() if option_name in found.evaluate_options]


def only(option_name: str, text: str) -> str:
    """An option's help, with whom it acts on."""
    return f"{text} ({titles(acting_on(option_name))} only)"


def add_parser(commands) -> None:
    evaluate = commands.add_parser("evaluate", allow_abbrev=False,      # options are checked by name
                                   help="score a trained model on a file: a language model's perplexity, a tagger's "
                                   "accuracy and entity F1, a classifier's accuracy, per-class F1 and confusion "
                                   "matrix, a sequence-to-sequence model's BLEU, chrF, ROUGE and perplexity")
    run_dir_argument(evaluate)
    evaluate.add_argument("file", metavar="FILE", nargs="?", help="the file to score: text for a language model, a "
                          "labelled file in the format the run trained on, or a file of pairs (or --src and --tgt)")
    evaluate.add_argument("--src", metavar="FILE", help=only("--src", "the sources, one per line"))
    evaluate.add_argument("--tgt", metavar="FILE", help=only("--tgt", "the reference targets, aligned with --src"))
    evaluate.add_argument("--bleu-tokenize", default="13a", choices=("13a", "none", "intl", "char"),
                          help=only("--bleu-tokenize", "sacrebleu's tokenizer for BLEU; none for text tokenised "
                                    "already (default: 13a)"))
    evaluate.add_argument("--hypotheses", metavar="FILE", help=only("--hypotheses", "write the decoded outputs here"))
    add_search_options(evaluate, f"decoding ({titles(acting_on('--beam'))} only)")
    evaluate.add_argument("--json", action="store_true", help="print one JSON object with the figures")
    evaluate.add_argument("--format", choices=("conllu", "conll", *DOCUMENT_FORMATS),
                          help=only("--format", "the file's format (default: the training files')"))
    evaluate.add_argument("--text-column", metavar="COLUMN",
                          help=only("--text-column", "the text's column (a header name or 0-based index) or JSON "
                                    "field (default: the run's --text-column, as training read its files)"))
    evaluate.add_argument("--label-column", metavar="COLUMN",
                          help=only("--label-column", "the label's column or JSON field (default: the run's)"))
    evaluate.add_argument("--header", choices=("auto", "yes", "no"),
                          help=only("--header", "whether the file's first row names its columns (default: the "
                                    "run's --header)"))
    evaluate.add_argument("--confusion-png", metavar="PNG",
                          help=only("--confusion-png", "where to draw the confusion matrix (default: "
                                    "DIR/confusion_<file name>.png; 'none' for no picture)"))
    for name in ("confusions", "batch_size", "stride"):
        field = {f.name: f for f in dataclasses.fields(EvaluateOptions)}[name]
        add_number(evaluate, EvaluateOptions, name, help=only(f"--{name.replace('_', '-')}", field.metadata["help"]))
    add_input_options(evaluate, f"{titles(acting_on('--chunk-size'))} only: ", long_source=True)
    add_runtime_options(evaluate)
    evaluate.add_argument("--rnn-impl", choices=("fused", "textbook"),
                          help="run the recurrent layers (any family's) on the fused kernels or the textbook "
                          "cells, whatever the model trained with (refused for a model without recurrent layers)")
    evaluate.set_defaults(handler=command)


def refuse_inapplicable(given: set[str], name: str) -> None:
    """One line for an option given on the command line that does nothing for this run's family: an option
    some family lists (`Family.evaluate_options`) acts on those families only."""
    for given_option in sorted(given):
        families = acting_on(given_option)
        if families and name not in families:
            raise SeqlabError(f"seqlab evaluate: {given_option} does not apply to {FAMILIES[name].title} (it acts on "
                              f"{titles(families)} only); leave it out")


def command(args: argparse.Namespace) -> int:
    """`seqlab evaluate`: the run's family scores the file (`report(args, scorer)`, where `scorer()` loads the
    model and gives its pipeline's evaluate)."""
    found = run_family(args.run_dir)
    refuse_inapplicable(args.given_options, found.name)
    evaluate = found.pipeline.evaluate
    return found.part("cli").report(args, lambda: functools.partial(evaluate, load(args.run_dir, args.device,
                                                                                 args.rnn_impl)))
