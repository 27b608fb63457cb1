"""`seqlab evaluate DIR [FILE] [options]`: score a trained model on a file, whatever its family. Each family
declares the options it takes: their names (`Family.evaluate_options`) and, for its own, their argparse spec
(its `cli` part's `EVALUATE_OPTIONS`); the parser is built from every family's, each flag once, its help saying
whom it acts on. The others are refused in one line, and the family's `cli` part scores the file and prints the
figures (`report(args, scorer)`)."""

from __future__ import annotations

import argparse
import functools

from seqlab.cli.options import (
    Commands,
    EvaluateOption,
    add_input_options,
    add_number,
    add_runtime_options,
    add_search_options,
    merged_help,
    run_dir_argument,
)
from seqlab.contract import INPUT_OPTIONS, SEARCH_OPTIONS
from seqlab.errors import SeqlabError
from seqlab.registry import FAMILIES, load, run_family, titles


def acting_on(option_name: str) -> list[str]:
    """The families whose runs `option_name` acts on."""
    return [name for name, found in FAMILIES.items() if option_name in found.evaluate_options]


def only(option_name: str, text: str) -> str:
    """An option's help, with whom it acts on."""
    return f"{text} ({titles(acting_on(option_name))} only)"


def declared() -> dict[str, list[EvaluateOption]]:
    """{flag: each family's declaration of it}, in the order the families (in the registry's order) declare them."""
    found: dict[str, list[EvaluateOption]] = {}
    for family in FAMILIES.values():
        for declaration in family.part("cli").EVALUATE_OPTIONS:
            found.setdefault(declaration.flag, []).append(declaration)
    return found


def add_family_option(parser: argparse.ArgumentParser, options: list[EvaluateOption]) -> None:
    """One flag from the families' declarations of it (`EvaluateOption`): the first gives its kind, value name
    and default; the choices are every family's."""
    first = options[0]
    text = only(first.flag, merged_help(options))
    if first.number is not None:
        add_number(parser, first.number, first.flag[2:].replace("-", "_"), help=text, metavar=first.metavar)
        return
    choices = tuple(dict.fromkeys(choice for option in options for choice in option.choices)) or None
    parser.add_argument(first.flag, metavar=first.metavar, choices=choices, default=first.value, help=text)


def add_parser(commands: Commands) -> None:
    evaluate = commands.add_parser("evaluate", allow_abbrev=False,      # options are checked by name
                                   help="score a trained model on a file: a language model's perplexity, a tagger's "
                                   "accuracy and entity F1, a classifier's accuracy, per-class F1 and confusion "
                                   "matrix, a sequence-to-sequence model's BLEU, chrF, ROUGE and perplexity")
    run_dir_argument(evaluate)
    evaluate.add_argument("file", metavar="FILE", nargs="?", help="the file to score: text for a language model, a "
                          "labelled file in the format the run trained on, or a file of pairs (or --src and --tgt)")
    for options in declared().values():
        add_family_option(evaluate, options)
    if acting_on(SEARCH_OPTIONS[0]):
        add_search_options(evaluate, f"decoding ({titles(acting_on(SEARCH_OPTIONS[0]))} only)")
    evaluate.add_argument("--json", action="store_true", help="print one JSON object with the figures")
    if acting_on(INPUT_OPTIONS[0]):
        add_input_options(evaluate, f"{titles(acting_on(INPUT_OPTIONS[0]))} only: ", long_source=True)
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
