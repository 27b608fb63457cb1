"""The malformed-input suite: every reader, every command, every numeric option, every output path,
damaged run directories. Each case must end as a user error: exit status 2, one line on stderr that
starts with "seqlab", no traceback, and (where it says so) the file, line or option at fault.

The numeric options are found by walking the command-line parser, so an option added later is tested
without a new line here; their bad values come from the range each option declares.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import pickle
import shutil
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from seqlab import config as config_module
from seqlab.cli.main import build_parser, main
from seqlab.cli.options import Number
from seqlab.training import devices

FIXTURES = Path(__file__).parent / "fixtures"
SHAKESPEARE = FIXTURES / "shakespeare_train.txt"
VALID = FIXTURES / "shakespeare_valid.txt"
NER = FIXTURES / "ner.conll"
POS = FIXTURES / "tagging.conllu"
TSV = FIXTURES / "classify" / "sentiment.tsv"
PAIRS = FIXTURES / "seq2seq"


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    """Run `seqlab argv` in this process; an exception other than the exit of a user error escapes (a
    traceback fails the test)."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def assert_user_error(code: int, err: str, expect: str = "") -> str:
    """Exit 2 and the error as one line, the last on stderr (progress lines a command printed before it
    found the problem, such as the vocabulary size, may precede it), with no traceback."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, f"exit {code}: {err}"
    errors = [line for line in lines if "error:" in line.lower() or "traceback" in line.lower()]
    assert len(errors) == 1 and errors[0] == lines[-1], f"expected one error line, last, got:\n{err}"
    assert lines[-1].startswith("seqlab") and "Traceback" not in err and "\r" not in lines[-1]
    if expect:
        assert expect in lines[-1], f"{expect!r} not in {lines[-1]!r}"
    return lines[-1]


# ----------------------------------------------------------------------------------------- trained runs

TINY_TRAIN = ["--max-steps", "2", "--eval-every", "2", "--no-progress", "--batch-size", "2", "--eval-batch-size", "4"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """One tiny trained run of each task (seconds in all)."""
    folder = tmp_path_factory.mktemp("runs")
    commands = {
        "lm": ["train", "lm", "--train", SHAKESPEARE, "--valid", VALID, "--tokenizer", "word", "--arch", "lstm",
               "--embedding-size", "8", "--hidden-size", "8", "--layers", "1", "--seq-len", "8"],
        "tagger": ["train", "tagger", "--train", NER, "--dev", NER, "--format", "conll", "--embedding-size", "8",
                   "--hidden-size", "8"],
        "classifier": ["train", "classifier", "--train", TSV, "--dev", TSV, "--arch", "pooled",
                       "--embedding-size", "8"],
        "seq2seq": ["train", "seq2seq", "--train-src", PAIRS / "train.src", "--train-tgt", PAIRS / "train.tgt",
                    "--dev-src", PAIRS / "dev.src", "--dev-tgt", PAIRS / "dev.tgt", "--arch", "gru", "--attention",
                    "dot", "--embedding-size", "8", "--hidden-size", "8"],
    }
    runs = {}
    for task, argv in commands.items():
        runs[task] = folder / task
        assert main([str(a) for a in [*argv, "--output", runs[task], *TINY_TRAIN]]) == 0, task
    return runs


def damaged_copy(runs, task: str, tmp_path: Path) -> Path:
    copy = tmp_path / f"damaged-{task}"
    shutil.copytree(runs[task], copy)
    return copy


# ------------------------------------------------------------------- every numeric option, from the parser


def subparsers(parser: argparse.ArgumentParser, prefix=()):
    """(command words, parser) for every leaf command."""
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not actions:
        yield prefix, parser
        return
    for name, sub in actions[0].choices.items():
        yield from subparsers(sub, (*prefix, name))


def bad_values(number: Number) -> list[str]:
    """Values the option's type must refuse: nan and inf (floats), a fraction (ints), just outside each bound."""
    values = ["nan", "inf"] if number.kind is float else ["1.5"]
    bounds = number.bounds
    if bounds.get("at_least") is not None:
        low = bounds["at_least"]
        values.append(str(int(low) - 1) if number.kind is int else repr(low - max(1e-9, abs(low) * 1e-6)))
    if bounds.get("above") is not None:
        values.append(repr(number.kind(bounds["above"])))
    if bounds.get("at_most") is not None:
        high = bounds["at_most"]
        values.append(str(int(high) + 1) if number.kind is int else repr(high + max(1e-9, abs(high) * 1e-6)))
    if bounds.get("below") is not None:
        values.append(repr(number.kind(bounds["below"])))
    return values


POSITIONALS = {"compare": ["--output", "DIR"], "tune": ["--output", "DIR", "--arch", "lstm"],
               "evaluate": ["DIR", "FILE"], "generate": ["DIR"], "tag": ["DIR"],
               "classify": ["DIR"], "translate": ["DIR"], "summarize": ["DIR"], "serve": ["DIR"], "card": ["DIR"],
               "audit toxicity": ["DIR", "--scorer", "DIR", "--prompts", "FILE"],
               "audit bias": ["DIR", "--pairs", "FILE"], "audit exposure": ["DIR"],
               "audit memorization": ["DIR", "--train", "FILE"], "exercises": ["feedforward", "1"]}


def numeric_cases():
    """Every numeric option of every command with each of its bad values; the training options that the
    four `train` commands share are tried under `train lm` only."""
    from seqlab.training.config import TrainConfig

    shared = {f.name for f in config_module.dataclasses.fields(TrainConfig)}
    cases = []
    for words, parser in subparsers(build_parser()):
        numbers = [a for a in parser._actions if isinstance(a.type, Number)]
        for action in numbers:
            if not action.option_strings:                # a numeric positional (exercises N): its command's tests
                continue
            if words[0] in ("train", "compare", "tune") and (words[0], words[1]) != ("train", "lm") and \
                    action.dest in shared:
                continue
            for value in bad_values(action.type) + (["abc"] if action is numbers[0] else []):
                positionals = POSITIONALS.get(" ".join(words), POSITIONALS.get(words[0], []))
                cases.append(pytest.param([*words, *positionals, action.option_strings[-1],
                                           value], id=f"{' '.join(words)} {action.option_strings[-1]} {value}"))
    return cases


NUMERIC = numeric_cases()


def test_errors_every_command_has_numeric_options_under_test():
    commands = {case.values[0][0] if case.values[0][0] not in ("train", "audit", "compare", "bench", "tune")
                else " ".join(case.values[0][:2]) for case in NUMERIC}
    assert commands == {"train lm", "train tagger", "train classifier", "train seq2seq", "evaluate", "generate",
                        "tag", "classify", "translate", "summarize", "serve", "card", "audit toxicity", "audit bias",
                        "audit exposure", "audit memorization", "compare lm", "compare tagger", "compare classifier",
                        "compare seq2seq", "bench peak", "prepare", "tune lm", "tune tagger", "tune classifier",
                        "tune seq2seq", "examples", "exercises", "explore"}
    assert len(NUMERIC) > 200


@pytest.mark.parametrize("argv", NUMERIC)
def test_errors_numeric_option_out_of_range_or_not_finite(argv, capsys):
    code, _, err = run_cli(argv, capsys)
    assert_user_error(code, err, argv[-2])


# ------------------------------------------------------------------- the same values in a config file

def config_numeric_cases():
    from seqlab.families.lm.model import LMConfig
    from seqlab.training.config import TrainConfig

    cases = []
    for cls, group in ((TrainConfig, "train"), (LMConfig, "model")):
        for f in config_module.dataclasses.fields(cls):
            kind = config_module.field_type(cls, f)
            if kind not in (int, float) or not any(f.metadata.get(k) is not None for k in ("at_least", "above")):
                continue
            number = Number.of(cls, f.name)
            for value in bad_values(number)[1 if kind is float else 2:]:
                cases.append(pytest.param(group, f.name, value, id=f"{group}.{f.name}={value}"))
    return cases


@pytest.mark.parametrize("group, name, value", config_numeric_cases())
def test_errors_config_file_value_out_of_range_or_not_finite(group, name, value, tmp_path, capsys):
    yaml_value = {"nan": ".nan", "inf": ".inf", "-inf": "-.inf"}.get(value, value)
    path = tmp_path / "run.yaml"
    path.write_text(f"{group}:\n  {name}: {yaml_value}\n", encoding="utf-8")
    code, _, err = run_cli(["train", "lm", "--config", path, "--output", tmp_path / "run"], capsys)
    assert_user_error(code, err, f"config file {path}: option {name!r}")
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------- files, options and run directories

@dataclass
class Case:
    """argv with {placeholders}: {tmp} the test's folder, {lm} {tagger} {classifier} {seq2seq} the runs,
    {damaged} a copy of `damage`'s run after `damage` was applied; `files` are written into {tmp} first."""

    id: str
    argv: list[str]
    expect: str = ""
    files: dict[str, bytes | str] = field(default_factory=dict)
    damage: tuple[str, str, bytes | str | None] | None = None       # (task, file, new content; None: a folder)


LM = ["train", "lm", "--tokenizer", "word", "--hidden-size", "8", "--embedding-size", "8", *TINY_TRAIN]
LM_DATA = ["--train", SHAKESPEARE, "--valid", VALID]
TAGGER = ["train", "tagger", "--hidden-size", "8", "--embedding-size", "8", *TINY_TRAIN]
CLASSIFIER = ["train", "classifier", "--hidden-size", "8", "--embedding-size", "8", *TINY_TRAIN]
SEQ2SEQ = ["train", "seq2seq", "--embedding-size", "8", *TINY_TRAIN]
FEATURES = ["train", "classifier", "--arch", "features", "--hidden-size", "8", *TINY_TRAIN]
ALIGNED = ["--train-src", PAIRS / "train.src", "--train-tgt", PAIRS / "train.tgt", "--dev-src", PAIRS / "dev.src",
           "--dev-tgt", PAIRS / "dev.tgt"]
OUT = ["--output", "{tmp}/run"]
NER_TEXT = NER.read_text(encoding="utf-8")
TSV_TEXT = TSV.read_text(encoding="utf-8")
PICKLE = pickle.dumps({"weight": [1.0, 2.0]}, protocol=4)


def zip_bytes() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("archive/data.pkl", PICKLE)
    return buffer.getvalue()


CASES = [
    # ---- language-model training data
    Case("lm train missing", [*LM, "--train", "{tmp}/nope.txt", "--valid", VALID, *OUT], "nope.txt does not exist"),
    Case("lm train empty", [*LM, "--train", "{tmp}/empty.txt", "--valid", VALID, *OUT], "is empty",
         {"empty.txt": "\n\n  \n"}),
    Case("lm train only a BOM", [*LM, "--train", "{tmp}/bom.txt", "--valid", VALID, *OUT], "is empty",
         {"bom.txt": b"\xef\xbb\xbf\n"}),
    Case("lm train is a folder", [*LM, "--train", "{tmp}", "--valid", VALID, *OUT], "is a directory"),
    Case("lm train binary", [*LM, "--train", "{tmp}/bin.txt", "--valid", VALID, *OUT], "bin.txt:2 holds a NUL byte",
         {"bin.txt": b"fine line\n\x00\x01\x02\n"}),
    Case("lm train latin-1", [*LM, "--train", "{tmp}/latin.txt", "--valid", VALID, *OUT],
         "latin.txt:3 is not valid UTF-8", {"latin.txt": b"one\ntwo\ncaf\xe9\n"}),
    Case("lm train bad gzip", [*LM, "--train", "{tmp}/t.txt.gz", "--valid", VALID, *OUT], "not a readable gzip",
         {"t.txt.gz": b"not gzip at all"}),
    Case("lm train gzip of binary", [*LM, "--train", "{tmp}/b.txt.gz", "--valid", VALID, *OUT], "NUL byte",
         {"b.txt.gz": gzip.compress(b"a\x00b\n")}),
    Case("lm train without valid", [*LM, "--train", SHAKESPEARE, *OUT], "--train needs --valid"),
    Case("lm valid without train", [*LM, "--valid", VALID, *OUT], "--valid needs --train"),
    Case("lm valid all unknown", [*LM, "--train", SHAKESPEARE, "--valid", "{tmp}/alien.txt", *OUT],
         "all 4 tokens are unknown", {"alien.txt": "zzq xxv wwk yyj\n"}),
    Case("lm test missing", [*LM, *LM_DATA, "--test", "{tmp}/none.txt", *OUT], "none.txt does not exist"),
    Case("lm data too small for a batch", [*LM, "--train", "{tmp}/tiny.txt", "--valid", "{tmp}/tiny.txt",
                                          "--batch-size", "64", "--seq-len", "64", *OUT], "too small",
         {"tiny.txt": "a b c\n"}),
    # ---- options that only fail together, or by their text
    Case("lm unknown option", [*LM, *LM_DATA, "--hiden-size", "3", *OUT], "unknown option --hiden-size; did you "
         "mean --hidden-size? (see seqlab train lm --help)"),
    Case("lm bad choice", [*LM, *LM_DATA, "--arch", "cnn", *OUT], "invalid choice"),
    Case("lm fused-output not a choice", [*LM, *LM_DATA, "--fused-output", "maybe", *OUT],
         "argument --fused-output: invalid choice: 'maybe'"),
    Case("tagger fused-output on", [*TAGGER, "--train", NER, "--dev", NER, "--format", "conll", "--fused-output",
                                    "on", *OUT], "--fused-output on is for language models"),
    Case("classifier fused-output off", [*CLASSIFIER, "--train", TSV, "--dev", TSV, "--fused-output", "off", *OUT],
         "a classifier scores a few labels: leave it out"),
    Case("lm no task", ["train"], "required"),
    Case("no command", [], "required"),
    Case("lm min-lr above lr", [*LM, *LM_DATA, "--lr", "0.001", "--min-lr", "0.01", *OUT], "--min-lr 0.01 is above"),
    Case("lm momentum with adam", [*LM, *LM_DATA, "--momentum", "0.9", *OUT], "--momentum is for --optimizer sgd"),
    Case("lm device nonsense", [*LM, *LM_DATA, "--device", "gpu0", *OUT], "is not a device"),
    Case("lm device cuda without cuda", [*LM, *LM_DATA, "--device", "cuda", *OUT], "CUDA is not available"),
    Case("lm heads do not divide", [*LM, *LM_DATA, "--arch", "transformer", "--embedding-size", "10", "--heads", "4",
                                    *OUT], "multiple of --heads"),
    Case("lm activation for another arch", [*LM, *LM_DATA, "--activation", "relu", *OUT], "does not apply"),
    Case("lm no-bias for lstm", [*LM, *LM_DATA, "--no-bias", *OUT], "--no-bias applies to --arch transformer"),
    Case("lm gru before fused", [*LM, *LM_DATA, "--arch", "gru", "--gru-reset", "before", *OUT], "--rnn-impl textbook"),
    Case("lm resume and overwrite", [*LM, *LM_DATA, "--resume", "--overwrite", *OUT], "choose one"),
    Case("lm resume nothing", [*LM, *LM_DATA, "--resume", *OUT], "no checkpoint.safetensors"),
    Case("lm existing run", [*LM, *LM_DATA, "--output", "{lm}"], "already holds a run"),
    Case("lm resume changes the model", ["train", "lm", "--output", "{damaged}", "--resume", "--hidden-size", "9"],
         "--hidden-size cannot change", damage=("lm", "unused", "")),
    Case("lm output is a file", [*LM, *LM_DATA, "--output", "{tmp}/file"], "is a file, not a directory",
         {"file": "x"}),
    Case("lm output under a file", [*LM, *LM_DATA, "--output", "{tmp}/file/run"], "not a directory",
         {"file": "x"}),
    # ---- config files
    Case("config missing", [*LM, "--config", "{tmp}/none.yaml", *OUT], "none.yaml does not exist"),
    Case("config json suffix", [*LM, "--config", "{tmp}/c.json", *OUT], "expected a .yaml",
         {"c.json": '{"lr": 1}'}),
    Case("config is a list", [*LM, "--config", "{tmp}/c.yaml", *OUT], "expected a mapping", {"c.yaml": "- lr\n- 1\n"}),
    Case("config integer key", [*LM, "--config", "{tmp}/c.yaml", *OUT], "the key 1 is not an option name",
         {"c.yaml": "1: 2\n"}),
    Case("config unknown group", [*LM, "--config", "{tmp}/c.yaml", *OUT], "unknown group 'optim'",
         {"c.yaml": "optim:\n  lr: 0.1\n"}),
    Case("config option in the wrong group", [*LM, "--config", "{tmp}/c.yaml", *OUT],
         "'lr' belongs to the group 'train', not 'model'", {"c.yaml": "model:\n  lr: 0.1\n"}),
    Case("config unknown option", [*LM, "--config", "{tmp}/c.yaml", *OUT], "unknown option 'hiden_size'",
         {"c.yaml": "hiden_size: 3\n"}),
    Case("config option twice", [*LM, "--config", "{tmp}/c.yaml", *OUT], "'lr' is given twice",
         {"c.yaml": "lr: 0.1\ntrain:\n  lr: 0.2\n"}),
    Case("config lr text", [*LM, "--config", "{tmp}/c.yaml", *OUT], "option 'lr' expects float",
         {"c.yaml": "lr: fast\n"}),
    Case("config lr null", [*LM, *LM_DATA, "--config", "{tmp}/c.yaml", *OUT], "--lr needs a value",
         {"c.yaml": "lr: null\n"}),
    Case("config epochs fraction", [*LM, "--config", "{tmp}/c.yaml", *OUT], "option 'epochs' expects int",
         {"c.yaml": "epochs: 2.5\n"}),
    Case("config bool text", [*LM, "--config", "{tmp}/c.yaml", *OUT], "option 'compile' expects bool",
         {"c.yaml": "compile: maybe\n"}),
    Case("config list value", [*LM, "--config", "{tmp}/c.yaml", *OUT], "option 'hidden_size' expects int",
         {"c.yaml": "hidden_size: [3]\n"}),
    Case("config bad choice", [*LM, *LM_DATA, "--config", "{tmp}/c.yaml", *OUT], "c.yaml: option 'arch' must be one of",
         {"c.yaml": "arch: cnn\n"}),
    Case("config fused-output not a choice", [*LM, *LM_DATA, "--config", "{tmp}/c.yaml", *OUT],
         "c.yaml: option 'fused_output' must be one of auto, on, off, got 'maybe'",
         {"c.yaml": "fused_output: maybe\n"}),
    Case("config of another family", [*LM, "--config", "{tmp}/c.yaml", *OUT],
         "c.yaml is for seqlab train tagger (task: tagger), not lm: run seqlab train tagger --config",
         {"c.yaml": "task: tagger\n"}),
    Case("config without a family", ["train", "--config", "{tmp}/c.yaml", *OUT],
         "seqlab train needs the family before the options: seqlab train lm|tagger|classifier|seq2seq --config",
         {"c.yaml": "lr: 0.1\n"}),
    Case("config task not a family", ["train", "--config", "{tmp}/c.yaml", *OUT],
         "c.yaml: task 'parser' is not a family seqlab trains", {"c.yaml": "task: parser\n"}),
    Case("config yaml syntax", [*LM, "--config", "{tmp}/c.yaml", *OUT], "c.yaml:3 is not valid YAML",
         {"c.yaml": "lr: 0.1\nepochs: 2\nhidden_size: 3: 4\n"}),
    Case("config toml syntax", [*LM, "--config", "{tmp}/c.toml", *OUT], "is not valid TOML",
         {"c.toml": "lr = \n"}),
    Case("config not utf-8", [*LM, "--config", "{tmp}/c.yaml", *OUT], "c.yaml:1 is not valid UTF-8",
         {"c.yaml": b"lr: \xff\n"}),
    # ---- tagger data
    Case("tagger without dev", [*TAGGER, "--train", NER, "--format", "conll", *OUT], "needs --train and --dev"),
    Case("tagger conllu columns", [*TAGGER, "--train", "{tmp}/bad.conllu", "--dev", POS, *OUT],
         "bad.conllu:2: expected 10 tab-separated", {"bad.conllu": "# c\n1\tThe\tthe\tDET\n"}),
    Case("tagger conllu id", [*TAGGER, "--train", "{tmp}/bad.conllu", "--dev", POS, *OUT],
         "bad.conllu:1: the ID column", {"bad.conllu": "x\tThe\tthe\tDET\tDT\t_\t0\tdep\t_\t_\n"}),
    Case("tagger conllu empty label", [*TAGGER, "--train", "{tmp}/bad.conllu", "--dev", POS, *OUT],
         "bad.conllu:1: the upos column is empty", {"bad.conllu": "1\tThe\tthe\t \tDT\t_\t0\tdep\t_\t_\n"}),
    Case("tagger conll stray I-", [*TAGGER, "--train", "{tmp}/ner.conll", "--dev", NER, "--format", "conll", *OUT],
         "ner.conll:6: the tag 'I-' fits no entity scheme",
         {"ner.conll": NER_TEXT.replace("call NN O O", "call NN O I-")}),
    Case("tagger conll stray X-PER", [*TAGGER, "--train", NER, "--dev", "{tmp}/ner.conll", "--format", "conll", *OUT],
         "development file", {"ner.conll": NER_TEXT.replace("Peter NNP O B-PER", "Peter NNP O X-PER")}),
    Case("tagger scheme on pos", [*TAGGER, "--train", POS, "--dev", POS, "--scheme", "iob2", *OUT],
         "are not entity tags"),
    Case("tagger label column name", [*TAGGER, "--train", POS, "--dev", POS, "--label-column", "nope", *OUT],
         "is not a CoNLL-U column"),
    Case("tagger label column index", [*TAGGER, "--train", POS, "--dev", POS, "--label-column", "12", *OUT],
         "CoNLL-U has columns 0-9"),
    Case("tagger conll one column", [*TAGGER, "--train", "{tmp}/one.conll", "--dev", NER, "--format", "conll", *OUT],
         "one column only", {"one.conll": "EU\nrejects\n"}),
    Case("tagger conll ragged", [*TAGGER, "--train", "{tmp}/r.conll", "--dev", NER, "--format", "conll", *OUT],
         "r.conll:2: 2 columns", {"r.conll": "EU NNP O B-ORG\nrejects O\n"}),
    Case("tagger conll named column", [*TAGGER, "--train", NER, "--dev", NER, "--format", "conll", "--label-column",
                                       "ner", *OUT], "chosen by index"),
    Case("tagger only comments", [*TAGGER, "--train", "{tmp}/c.conllu", "--dev", POS, *OUT], "holds no sentences",
         {"c.conllu": "# just a comment\n"}),
    Case("tagger vectors missing", [*TAGGER, "--train", POS, "--dev", POS, "--vectors", "{tmp}/v.txt", *OUT],
         "v.txt does not exist"),
    # ---- classifier data
    Case("classifier mixed delimiters", [*CLASSIFIER, "--train", "{tmp}/m.tsv", "--dev", TSV, *OUT],
         "m.tsv:3: expected 2 tab-separated fields", {"m.tsv": "text\tlabel\ngood\tpos\nbad,neg\n"}),
    Case("classifier no such column", [*CLASSIFIER, "--train", TSV, "--dev", TSV, "--label-column", "stars", *OUT],
         "no column named 'stars'"),
    Case("classifier headerless tsv", [*CLASSIFIER, "--train", "{tmp}/h.tsv", "--dev", TSV, *OUT],
         "so the file has no header row: pass --header no --text-column 0 --label-column 1",
         {"h.tsv": "a fine film , warm and funny\tpos\na dull , lifeless mess\tneg\nthe acting is good\tpos\n"}),
    Case("classifier headerless label first", [*CLASSIFIER, "--train", "{tmp}/h.tsv", "--dev", TSV, *OUT],
         "so the file has no header row: pass --header no --text-column 1 --label-column 0",
         {"h.tsv": "pos\ta fine film , warm and funny\nneg\ta dull , lifeless mess\npos\tthe acting is good\n"}),
    Case("classifier jsonl number text", [*CLASSIFIER, "--train", "{tmp}/d.jsonl", "--dev", TSV, "--format",
                                          "jsonl", *OUT], "d.jsonl:2: the text ('text') is a number (5)",
         {"d.jsonl": '{"text": "good", "label": "pos"}\n{"text": 5, "label": "neg"}\n'}),
    Case("classifier jsonl list text", [*CLASSIFIER, "--train", "{tmp}/d.jsonl", "--dev", TSV, "--format", "jsonl",
                                        *OUT], "d.jsonl:1: the text ('text') is a list",
         {"d.jsonl": '{"text": ["a", "b"], "label": "pos"}\n'}),
    Case("classifier jsonl object label", [*CLASSIFIER, "--train", "{tmp}/d.jsonl", "--dev", TSV, "--format",
                                           "jsonl", *OUT], "d.jsonl:1: the label ('label') is an object",
         {"d.jsonl": '{"text": "good", "label": {"x": 1}}\n'}),
    Case("classifier jsonl boolean label", [*CLASSIFIER, "--train", "{tmp}/d.jsonl", "--dev", TSV, "--format",
                                            "jsonl", *OUT], "is true (a boolean)",
         {"d.jsonl": '{"text": "good", "label": true}\n'}),
    Case("classifier jsonl fractional label", [*CLASSIFIER, "--train", "{tmp}/d.jsonl", "--dev", TSV, "--format",
                                               "jsonl", *OUT], "is a number (0.5)",
         {"d.jsonl": '{"text": "good", "label": 0.5}\n'}),
    Case("classifier jsonl not an object", [*CLASSIFIER, "--train", "{tmp}/d.jsonl", "--dev", TSV, "--format",
                                            "jsonl", *OUT], "d.jsonl:1: expected a JSON object, found list",
         {"d.jsonl": '["good", "pos"]\n'}),
    Case("classifier jsonl syntax", [*CLASSIFIER, "--train", "{tmp}/d.jsonl", "--dev", TSV, "--format", "jsonl",
                                     *OUT], "d.jsonl:2 is not valid JSON",
         {"d.jsonl": '{"text": "good", "label": "pos"}\n{"text": "bad", \n'}),
    Case("classifier jsonl missing field", [*CLASSIFIER, "--train", "{tmp}/d.jsonl", "--dev", TSV, "--format",
                                            "jsonl", *OUT], "no field 'label'", {"d.jsonl": '{"text": "good"}\n'}),
    Case("classifier jsonl nan feature", [*FEATURES, "--train", "{tmp}/d.jsonl", "--dev", TSV, "--format", "jsonl",
                                          "--features", "columns", "--feature-columns", "n",
                                          *OUT], "feature 'n' is nan",
         {"d.jsonl": '{"text": "good", "label": "pos", "n": NaN}\n'}),
    Case("classifier one class", [*CLASSIFIER, "--train", "{tmp}/one.tsv", "--dev", TSV, *OUT],
         "needs at least two classes", {"one.tsv": "text\tlabel\ngood\tpos\nfine\tpos\n"}),
    Case("classifier labels option", [*CLASSIFIER, "--train", TSV, "--dev", TSV, "--labels", "pos,neg,mixed", *OUT],
         "class 'mixed' has no training examples"),
    Case("classifier feature not a number", [*FEATURES, "--train", "{tmp}/f.tsv", "--dev", TSV,
                                             "--features", "columns", "--feature-columns", "n", *OUT],
         "f.tsv:3: feature 'n' is 'many'", {"f.tsv": "text\tlabel\tn\ngood\tpos\t1\nbad\tneg\tmany\n"}),
    Case("classifier features without columns", [*FEATURES, "--train", TSV, "--dev", TSV,
                                                 "--features", "columns", *OUT], "needs --feature-columns"),
    Case("classifier ngrams with lstm", [*CLASSIFIER, "--train", TSV, "--dev", TSV, "--ngrams", "2", *OUT],
         "--ngrams is for --arch pooled"),
    Case("classifier sst tree", [*CLASSIFIER, "--train", "{tmp}/t.txt", "--dev", "{tmp}/t.txt", "--format",
                                 "sst-tree", *OUT], "t.txt:1: not an SST tree", {"t.txt": "(3 (2 good) (4 film)\n"}),
    Case("classifier labeled-lines", [*CLASSIFIER, "--train", "{tmp}/l.txt", "--dev", TSV, "--format",
                                      "labeled-lines", *OUT], "l.txt:2: expected 'label text'",
         {"l.txt": "pos a fine film\nneg\n"}),
    Case("classifier no dev", [*CLASSIFIER, "--train", TSV, *OUT], "needs --train and --dev"),
    Case("classifier header no with names", [*CLASSIFIER, "--train", TSV, "--dev", TSV, "--header", "no", *OUT],
         "need a header row"),
    # ---- seq2seq data
    Case("seq2seq line counts", [*SEQ2SEQ, "--train-src", "{tmp}/a.src", "--train-tgt", "{tmp}/a.tgt",
                                 "--dev-src", PAIRS / "dev.src", "--dev-tgt", PAIRS / "dev.tgt", *OUT],
         "a.src has 2 lines but", {"a.src": "ein\nzwei\n", "a.tgt": "one\n"}),
    Case("seq2seq empty source line", [*SEQ2SEQ, "--train-src", "{tmp}/a.src", "--train-tgt", "{tmp}/a.tgt",
                                       "--dev-src", PAIRS / "dev.src", "--dev-tgt", PAIRS / "dev.tgt", *OUT],
         "a.src:2: empty line", {"a.src": "ein\n\ndrei\n", "a.tgt": "one\ntwo\nthree\n"}),
    Case("seq2seq both kinds of file", [*SEQ2SEQ, *ALIGNED, "--train", PAIRS / "train.jsonl", *OUT],
         "not both"),
    Case("seq2seq half a pair", [*SEQ2SEQ, "--train-src", PAIRS / "train.src", "--dev-src", PAIRS / "dev.src",
                                 "--dev-tgt", PAIRS / "dev.tgt", *OUT], "go together"),
    Case("seq2seq no dev", [*SEQ2SEQ, "--train-src", PAIRS / "train.src", "--train-tgt", PAIRS / "train.tgt", *OUT],
         "needs development pairs"),
    Case("seq2seq lm without shared vocab", [*SEQ2SEQ, *ALIGNED, "--arch", "lm", *OUT], "add --shared-vocab"),
    Case("seq2seq attention on transformer", [*SEQ2SEQ, *ALIGNED, "--arch", "transformer", "--attention", "dot",
                                              *OUT], "attends by its own design"),
    Case("seq2seq jsonl number target", [*SEQ2SEQ, "--train", "{tmp}/p.jsonl", "--dev", "{tmp}/p.jsonl", *OUT],
         "p.jsonl:1: the target ('target') is a number (7)", {"p.jsonl": '{"source": "sieben", "target": 7}\n'}),
    Case("seq2seq tsv no such column", [*SEQ2SEQ, "--train", PAIRS / "train.tsv", "--dev", PAIRS / "dev.tsv",
                                        "--format", "tsv", "--target-field", "english", *OUT],
         "no column named 'english'"),
    # ---- inference commands on the trained runs
    Case("evaluate no run", ["evaluate", "{tmp}/nope", SHAKESPEARE], "is not a directory"),
    Case("evaluate not a run", ["evaluate", "{tmp}", SHAKESPEARE], "has no config.json"),
    Case("evaluate lm missing file", ["evaluate", "{lm}", "{tmp}/none.txt"], "none.txt does not exist"),
    Case("evaluate lm no file", ["evaluate", "{lm}"], "the file to score is missing"),
    Case("evaluate lm text column of a text file", ["evaluate", "{lm}", SHAKESPEARE, "--text-column", "body"],
         "is plain text (one text per line)"),
    Case("evaluate lm jsonl without the field", ["evaluate", "{lm}", "{tmp}/r.jsonl"], "r.jsonl:1: no text field "
         "'text' in the record", {"r.jsonl": '{"body": "a b"}\n'}),
    Case("evaluate lm label column", ["evaluate", "{lm}", SHAKESPEARE, "--label-column", "x"],
         "--label-column does not apply to a language model"),
    Case("evaluate lm all unknown", ["evaluate", "{lm}", "{tmp}/alien.txt"], "are unknown to the vocabulary",
         {"alien.txt": "zzq xxv\n"}),
    Case("evaluate tagger stray tag", ["evaluate", "{tagger}", "{tmp}/ner.conll"], "evaluation file",
         {"ner.conll": NER_TEXT.replace("German JJ O B-MISC", "German JJ O B-")}),
    Case("evaluate tagger wrong format", ["evaluate", "{tagger}", POS, "--format", "conll"], "columns"),
    Case("evaluate classifier unseen label", ["evaluate", "{classifier}", "{tmp}/u.tsv"], "label 'neutral'",
         {"u.tsv": TSV_TEXT + "99\tso so\tneutral\t0\n"}),
    Case("evaluate classifier png is a folder", ["evaluate", "{classifier}", TSV, "--confusion-png", "{tmp}"],
         "is a folder: give a file name"),
    Case("evaluate classifier png under a file", ["evaluate", "{classifier}", TSV, "--confusion-png",
                                                  "{tmp}/file/c.png"], "cannot write --confusion-png", {"file": "x"}),
    Case("evaluate seq2seq src only", ["evaluate", "{seq2seq}", "--src", PAIRS / "dev.src"], "go together"),
    Case("evaluate seq2seq nothing", ["evaluate", "{seq2seq}"], "needs --src FILE --tgt FILE"),
    Case("evaluate seq2seq hypotheses folder", ["evaluate", "{seq2seq}", "--src", PAIRS / "dev.src", "--tgt",
                                                PAIRS / "dev.tgt", "--hypotheses", "{tmp}"], "is a folder"),
    Case("evaluate seq2seq hypotheses under a file", ["evaluate", "{seq2seq}", "--src", PAIRS / "dev.src", "--tgt",
                                                      PAIRS / "dev.tgt", "--hypotheses", "{tmp}/file/h.txt"],
         "cannot write --hypotheses", {"file": "x"}),
    Case("evaluate seq2seq wrong format", ["evaluate", "{seq2seq}", PAIRS / "dev.tsv", "--format", "jsonl"],
         "is not valid JSON"),
    Case("generate on a tagger", ["generate", "{tagger}", "--prompt", "a"], "not a language model"),
    Case("tag on a classifier", ["tag", "{classifier}", "{tmp}/in.txt"], "not a tagger", {"in.txt": "a b\n"}),
    Case("tag missing input", ["tag", "{tagger}", "{tmp}/none.txt"], "none.txt does not exist"),
    Case("tag binary input", ["tag", "{tagger}", "{tmp}/b.txt"], "NUL byte", {"b.txt": b"a\x00\n"}),
    Case("tag conllu bad input", ["tag", "{tagger}", "{tmp}/b.conllu", "--input-format", "conllu"],
         "b.conllu:1: expected 10 tab-separated", {"b.conllu": "1\tThe\n"}),
    Case("classify on a tagger", ["classify", "{tagger}", "{tmp}/in.txt"], "not a classifier", {"in.txt": "a b\n"}),
    Case("classify empty line", ["classify", "{classifier}", "{tmp}/in.txt"], "in.txt:2: empty line",
         {"in.txt": "good\n\nbad\n"}),
    Case("classify latin-1", ["classify", "{classifier}", "{tmp}/in.txt"], "in.txt:1 is not valid UTF-8",
         {"in.txt": b"caf\xe9\n"}),
    Case("classify text column of text input", ["classify", "{classifier}", "{tmp}/in.txt", "--text-column", "1"],
         "--text-column names a column of tsv, csv or jsonl input", {"in.txt": "good\n"}),
    Case("classify tsv without its column", ["classify", "{classifier}", "{tmp}/in.tsv"],
         "in.tsv: no column named 'text'; the header has 'review'", {"in.tsv": "review\ngood film\n"}),
    Case("classify jsonl wrong type", ["classify", "{classifier}", "{tmp}/in.jsonl", "--input-format", "jsonl"],
         "in.jsonl:1: the text ('text') is a number", {"in.jsonl": '{"text": 3}\n'}),
    Case("translate on an lm", ["translate", "{lm}", "{tmp}/in.txt"], "not a sequence-to-sequence model",
         {"in.txt": "der hund\n"}),
    Case("translate sample with beam", ["translate", "{seq2seq}", "{tmp}/in.txt", "--sample", "--beam", "3"],
         "use --beam 1 with --sample", {"in.txt": "der hund\n"}),
    Case("translate attention dir is a file", ["translate", "{seq2seq}", "{tmp}/in.txt", "--attention-dir",
                                               "{tmp}/in.txt"], "is a file, not a folder", {"in.txt": "der hund\n"}),
    Case("summarize empty line", ["summarize", "{seq2seq}", "{tmp}/in.txt"], "in.txt:1: empty line",
         {"in.txt": "\nder hund\n"}),
    Case("summarize tsv missing column", ["summarize", "{seq2seq}", "{tmp}/in.tsv", "--input-format", "tsv"],
         "no column named 'source'", {"in.tsv": "text\nder hund\n"}),
    # ---- damaged run directories
    *[Case(f"damaged {task} config list", ["evaluate", "{damaged}", SHAKESPEARE], "config.json is damaged",
           damage=(task, "config.json", "[1, 2]")) for task in ("lm", "tagger", "classifier", "seq2seq")],
    *[Case(f"damaged {task} config group", ["evaluate", "{damaged}", SHAKESPEARE],
           "its 'model' group is missing", damage=(task, "config.json", "drop model"))
      for task in ("lm", "tagger", "classifier", "seq2seq")],
    Case("damaged config version", ["evaluate", "{damaged}", SHAKESPEARE], "format version 99",
         damage=("lm", "config.json", "version 99")),
    Case("damaged config syntax", ["evaluate", "{damaged}", SHAKESPEARE], "config.json:1 is not valid JSON",
         damage=("lm", "config.json", "{not json")),
    Case("damaged config value", ["evaluate", "{damaged}", SHAKESPEARE], "option 'hidden_size' expects int",
         damage=("lm", "config.json", "hidden_size text")),
    Case("damaged config empty", ["evaluate", "{damaged}", SHAKESPEARE], "config.json is empty",
         damage=("lm", "config.json", "")),
    Case("damaged lm vocab short", ["evaluate", "{damaged}", SHAKESPEARE], "vocab.json lists 7 entries",
         damage=("lm", "vocab.json", json.dumps({"tokens": ["<pad>", "<unk>", "<s>", "</s>", "<sep>", "a", "b"]}))),
    Case("damaged lm vocab numbers", ["evaluate", "{damaged}", SHAKESPEARE], "lists tokens as strings",
         damage=("lm", "vocab.json", json.dumps({"tokens": ["<pad>", "<unk>", "<s>", "</s>", "<sep>", 5]}))),
    Case("damaged lm tokenizer list", ["evaluate", "{damaged}", SHAKESPEARE], "tokenizer.json or vocab.json is damaged",
         damage=("lm", "tokenizer.json", "[]")),
    Case("damaged lm tokenizer kind", ["evaluate", "{damaged}", SHAKESPEARE], "unknown tokenizer kind 'sentencepiece'",
         damage=("lm", "tokenizer.json", '{"kind": "sentencepiece"}')),
    Case("damaged lm bpe state", ["evaluate", "{damaged}", SHAKESPEARE], "the saved BPE tokenizer cannot be read",
         damage=("lm", "tokenizer.json", '{"kind": "bpe", "vocab_size": 10, "min_frequency": 2, "state": {"x": 1}}')),
    Case("damaged tagger vocab short", ["tag", "{damaged}", "{tmp}/in.txt"], "vocab.json lists 6 entries",
         {"in.txt": "a b\n"}, damage=("tagger", "vocab.json", json.dumps({"tokens": ["<pad>", "<unk>", "<s>", "</s>",
                                                                                     "<sep>", "EU"]}))),
    Case("damaged tagger labels", ["tag", "{damaged}", "{tmp}/in.txt"], "labels.json", {"in.txt": "a b\n"},
         damage=("tagger", "labels.json", "[]")),
    Case("damaged tagger labels short", ["tag", "{damaged}", "{tmp}/in.txt"], "labels.json lists 2 entries",
         {"in.txt": "a b\n"}, damage=("tagger", "labels.json", '{"labels": ["O", "B-PER"], "scheme": "iob2"}')),
    Case("damaged classifier vocab short", ["classify", "{damaged}", "{tmp}/in.txt"], "vocab.json lists 5 entries",
         {"in.txt": "good\n"}, damage=("classifier", "vocab.json", json.dumps({"tokens": ["<pad>", "<unk>", "<s>",
                                                                                          "</s>", "<sep>"]}))),
    Case("damaged classifier labels", ["classify", "{damaged}", "{tmp}/in.txt"], "labels.json", {"in.txt": "good\n"},
         damage=("classifier", "labels.json", '"pos"')),
    Case("damaged seq2seq vocab", ["translate", "{damaged}", "{tmp}/in.txt"], "vocab.json (target) lists 6 entries",
         {"in.txt": "der hund\n"}, damage=("seq2seq", "vocab.json", "short target")),
    Case("damaged seq2seq tokenizer", ["translate", "{damaged}", "{tmp}/in.txt"], "tokenizer.json or vocab.json",
         {"in.txt": "der hund\n"}, damage=("seq2seq", "tokenizer.json", '{"shared": false}')),
    *[Case(f"damaged {task} weights folder", ["evaluate", "{damaged}", SHAKESPEARE], "is not a file (a directory?)",
           damage=(task, "model.safetensors", None)) for task in ("lm", "tagger", "classifier", "seq2seq")],
    *[Case(f"damaged {task} weights pickle", ["evaluate", "{damaged}", SHAKESPEARE], "it is a Python pickle",
           damage=(task, "model.safetensors", PICKLE)) for task in ("lm", "classifier")],
    Case("damaged weights torch.save zip", ["generate", "{damaged}"], "a zip archive (the format of torch.save)",
         damage=("lm", "model.safetensors", zip_bytes())),
    Case("damaged weights truncated", ["generate", "{damaged}"], "is truncated or corrupted",
         damage=("lm", "model.safetensors", "truncate")),
    Case("damaged weights flipped", ["generate", "{damaged}"], "do not match the checksum",
         damage=("lm", "model.safetensors", "flip")),
    Case("damaged weights missing", ["generate", "{damaged}"], "has no model.safetensors",
         damage=("lm", "model.safetensors", "delete")),
    Case("damaged weights empty", ["generate", "{damaged}"], "is truncated or corrupted",
         damage=("lm", "model.safetensors", b"")),
    Case("damaged checkpoint on resume", ["train", "lm", "--output", "{damaged}", "--resume", "--max-steps", "4"],
         "checkpoint.safetensors is truncated or corrupted", damage=("lm", "checkpoint.safetensors", "truncate")),
    Case("damaged checkpoint pickle on resume", ["train", "lm", "--output", "{damaged}", "--resume", "--max-steps",
                                                 "4"], "it is a Python pickle",
         damage=("lm", "checkpoint.safetensors", PICKLE)),
    Case("damaged task", ["evaluate", "{damaged}", SHAKESPEARE], "names the task 'parser'",
         damage=("lm", "config.json", "task parser")),
]


def write(path: Path, content: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))


def apply_damage(run: Path, file: str, content) -> None:
    path = run / file
    if content is None:
        path.unlink()
        path.mkdir()
    elif file == "config.json" and isinstance(content, str) and content.split()[:1] in (["drop"], ["version"],
                                                                                         ["hidden_size"], ["task"]):
        config = json.loads(path.read_text())
        word, value = content.split()
        if word == "drop":
            del config[value]
        elif word == "version":
            config["format_version"] = int(value)
        elif word == "task":
            config["task"] = value
        else:
            config["model"]["hidden_size"] = value
        path.write_text(json.dumps(config))
    elif file == "vocab.json" and content == "short target":
        vocab = json.loads(path.read_text())
        vocab["target"] = vocab["target"][:6]
        path.write_text(json.dumps(vocab))
    elif content == "truncate":
        path.write_bytes(path.read_bytes()[:100])
    elif content == "flip":
        data = bytearray(path.read_bytes())
        data[-3] ^= 0xFF
        path.write_bytes(bytes(data))
    elif content == "delete":
        path.unlink()
    elif file != "unused":
        write(path, content)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_errors_malformed_input(case: Case, runs, tmp_path, capsys):
    for name, content in case.files.items():
        write(tmp_path / name, content)
    places = {"tmp": str(tmp_path), **{task: str(path) for task, path in runs.items()}}
    if case.damage:
        task, file, content = case.damage
        places["damaged"] = str(damaged_copy(runs, task, tmp_path))
        apply_damage(Path(places["damaged"]), file, content)
    argv = [str(a).format(**places) for a in case.argv]
    code, _, err = run_cli(argv, capsys)
    assert_user_error(code, err, case.expect.format(**places))


def test_errors_the_suite_is_large_enough():
    assert len(CASES) + len(NUMERIC) + len(config_numeric_cases()) >= 150
    assert len(CASES) >= 120


def test_errors_bf16_on_a_cpu_without_it_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(devices, "cpu_supports_bf16", lambda: False)
    code, _, err = run_cli([*LM, *LM_DATA, "--precision", "bf16", "--output", tmp_path / "run"], capsys)
    assert_user_error(code, err, "--precision bf16: this CPU has no bfloat16 kernels")
    assert not (tmp_path / "run" / "config.json").exists()


def test_errors_a_bom_is_read_as_nothing(tmp_path, capsys):
    """A UTF-8 byte-order mark (Windows editors) before a TSV header or a CoNLL-U file is dropped."""
    tsv, conllu = tmp_path / "bom.tsv", tmp_path / "bom.conllu"
    tsv.write_bytes(b"\xef\xbb\xbf" + TSV.read_bytes())
    conllu.write_bytes(b"\xef\xbb\xbf" + POS.read_bytes())
    assert main(["train", "classifier", "--train", str(tsv), "--dev", str(tsv), "--output", str(tmp_path / "c"),
                 *map(str, TINY_TRAIN)]) == 0
    assert main(["train", "tagger", "--train", str(conllu), "--dev", str(conllu), "--output", str(tmp_path / "t"),
                 *map(str, TINY_TRAIN)]) == 0
    capsys.readouterr()


if sys.platform != "linux":                                   # pragma: no cover
    pytestmark = pytest.mark.skip("the suite's file cases assume Linux")
