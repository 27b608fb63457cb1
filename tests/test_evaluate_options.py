"""`seqlab evaluate`'s options come from the families: each family's `cli` part declares its own
(`EVALUATE_OPTIONS`, with their argparse spec), `Family.evaluate_options` names all it takes, and the parser holds
each flag once with every family's choices and whom it acts on; a family defined here, outside seqlab, adds its
options, choices and help without an edit to src/."""

from __future__ import annotations

import argparse
import dataclasses
import textwrap

import pytest

from seqlab.cli import evaluate
from seqlab.cli.main import build_parser
from seqlab.cli.options import EvaluateOption, Parser, merged_help
from seqlab.contract import INPUT_OPTIONS, SEARCH_OPTIONS, Family
from seqlab.errors import SeqlabError
from seqlab.registry import FAMILIES


def evaluate_parser() -> argparse.ArgumentParser:
    return build_parser()._subparsers._group_actions[0].choices["evaluate"]


def actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {flag: action for action in parser._actions for flag in action.option_strings}


def test_evaluate_options_are_each_familys_own_declarations():
    """Every option a family names is in the parser; the ones it declares are among those it names, and the rest
    are the shared input and decoding options; families declaring one flag agree on its kind."""
    declared = actions(evaluate_parser())
    for family in FAMILIES.values():
        own = {option.flag for option in family.part("cli").EVALUATE_OPTIONS}
        assert own <= set(family.evaluate_options), family.name
        assert set(family.evaluate_options) - own <= {*INPUT_OPTIONS, *SEARCH_OPTIONS}, family.name
        assert set(family.evaluate_options) <= set(declared), family.name
    for flag, options in evaluate.declared().items():
        assert len({(kind(option), option.metavar, option.value) for option in options}) == 1, flag


def kind(option: EvaluateOption) -> tuple | None:
    """A numeric option's type, default and range, from its config field."""
    if option.number is None:
        return None
    field = {f.name: f for f in dataclasses.fields(option.number)}[option.flag[2:].replace("-", "_")]
    return (field.type, field.default, *(field.metadata.get(k) for k in ("at_least", "above", "at_most", "below")))


def test_evaluate_options_keep_their_help_choices_and_defaults():
    """The flags several families take, merged as before the families declared them: --format's choices in the
    families' order, --batch-size's help joining each family's meaning and default."""
    declared = actions(evaluate_parser())
    assert declared["--format"].choices == ("conllu", "conll", "tsv", "csv", "jsonl", "labeled-lines", "sst-tree")
    assert declared["--format"].help == ("the file's format (default: the training files') (a tagger, a classifier "
                                         "and a sequence-to-sequence model only)")
    assert declared["--batch-size"].help == (
        "parallel streams of a text, or sentences decoded at once (default: 10 streams, 64 sentences) (a language "
        "model and a sequence-to-sequence model only) (at least 1)")
    assert declared["--batch-size"].default is None and declared["--batch-size"].type("3") == 3
    assert declared["--confusions"].default == 10 and declared["--stride"].default == 0
    assert declared["--bleu-tokenize"].default == "13a" and declared["--header"].choices == ("auto", "yes", "no")
    assert declared["--text-column"].help.endswith("(a language model and a classifier only)")
    assert declared["--src"].metavar == "FILE" and declared["--long-input"].help.startswith(
        "a tagger, a classifier and a sequence-to-sequence model only: ")


def test_evaluate_options_of_a_family_defined_outside_seqlab(tmp_path, monkeypatch):
    """A fifth family (a package under tmp_path) declares a flag of its own, a --format value and its meaning of
    --batch-size: the parser takes them, each help naming it, and refuses its flag for another family's run."""
    package = tmp_path / "toyfamily"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "cli.py").write_text(textwrap.dedent('''
        from dataclasses import dataclass

        from seqlab.cli.options import EvaluateOption
        from seqlab.config import option


        @dataclass
        class ToyOptions:
            batch_size: int | None = option(None, "toys counted at once", at_least=1)


        EVALUATE_OPTIONS = (
            EvaluateOption("--toy-depth", "how deep the toy counts", metavar="N"),
            EvaluateOption("--format", "the file's format (default: the training files')", choices=("toy", "tsv")),
            EvaluateOption("--batch-size", default="3 toys", number=ToyOptions),
        )
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    some = next(iter(FAMILIES.values()))
    toy = dataclasses.replace(some, name="toy", title="a toy", package="toyfamily",
                              evaluate_options=("--toy-depth", "--format", "--batch-size"))
    assert isinstance(toy, Family)
    monkeypatch.setitem(FAMILIES, "toy", toy)
    commands = Parser(prog="seqlab").add_subparsers(dest="command")
    evaluate.add_parser(commands)
    declared = actions(commands.choices["evaluate"])
    assert declared["--toy-depth"].help == "how deep the toy counts (a toy only)"
    assert declared["--format"].choices[-1] == "toy" and declared["--format"].help.endswith(
        "(a tagger, a classifier, a sequence-to-sequence model and a toy only)")
    assert declared["--batch-size"].help.startswith("parallel streams of a text, or sentences decoded at once, or "
                                                    "toys counted at once (default: 10 streams, 64 sentences, 3 toys)")
    args = commands.choices["evaluate"].parse_args(["run", "--toy-depth", "2", "--format", "toy"])
    assert (args.toy_depth, args.format) == ("2", "toy")
    with pytest.raises(SeqlabError) as refused:            # the CLI's one line
        evaluate.refuse_inapplicable({"--toy-depth"}, "lm")
    assert str(refused.value) == ("seqlab evaluate: --toy-depth does not apply to a language model (it acts on a "
                                  "toy only); leave it out")
    evaluate.refuse_inapplicable({"--toy-depth", "--batch-size"}, "toy")


def test_evaluate_options_declaration_merges_helps_once():
    same = [EvaluateOption("--x", "the same"), EvaluateOption("--x", "the same")]
    assert merged_help(same) == "the same"
