"""An ONNX export describes itself: its README's example, run with numpy and onnxruntime alone (no seqlab import),
prints what seqlab's runtime gives; its tokenizer.json (the `tokenizers` library) gives the graph's ids; its graphs
carry a doc_string, seqlab as producer and metadata, and pass the ONNX checker; config.json and manifest.json hold
no local paths; a manifest that names a file outside the folder is refused; an export of the previous layout
(format 2) still loads. The default suite exports a BPE transformer LM and a classifier; the slow suite every
other variant of the examples (tests/test_export.py runs them on its exports of every family too)."""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import io
import json
import os
import re
import shutil
import warnings
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime", reason="seqlab export needs onnxruntime (pip install 'seqlab[export]')")
onnx = pytest.importorskip("onnx", reason="seqlab export needs onnx (pip install 'seqlab[export]')")
from tokenizers import Tokenizer  # noqa: E402

from conftest import FIXTURES, tiny_config  # noqa: E402
from seqlab.cli.main import main  # noqa: E402
from seqlab.errors import SeqlabError  # noqa: E402
from seqlab.export.onnx import export_onnx  # noqa: E402
from seqlab.export.runtime import load_export  # noqa: E402
from seqlab.export.tokens import read_tokens  # noqa: E402
from seqlab.families.lm.pipeline import train_lm  # noqa: E402
from seqlab.training import trainer  # noqa: E402

SENTIMENT = str(FIXTURES / "classify" / "sentiment.tsv")
PAIRS = FIXTURES / "seq2seq"
QUIET = ["--no-progress", "--dropout", "0"]
# texts whose ids the BPE tokenizer.json must give as seqlab does: line breaks, empty lines, spaces at either end,
# the specials' spellings read as text, characters outside the training data
TEXTS = ["To be, or not to be: that is the question.", "ROMEO:\nBut, soft! what light through yonder window breaks?\n",
         "\n\nfirst line empty\n\n", "", " ", "  two leading spaces", "trailing space \n x", "a\n \n  b\n\n\n",
         "<pad> <unk> </s> <s> <sep> read as text", "déjà vu, naïve café: 東京!", "a\r\nb"]


# ---------------------------------------------------------------------------- the README's example

def example(export: Path) -> str:
    """The README's Python program."""
    found = re.search(r"```python\n(.*?)```", (export / "README.md").read_text(encoding="utf-8"), re.S)
    assert found, "README.md has no Python example"
    return found.group(1)


def run_example(export: Path) -> str:
    """What the README's example prints, run in the export folder with imports of seqlab and torch refused."""
    def guarded(name, *args, **kwargs):
        if name.split(".")[0] in ("seqlab", "torch"):
            raise ImportError(f"the README's example imports {name}")
        return builtins.__import__(name, *args, **kwargs)

    code = compile(example(export), str(export / "README.md"), "exec")
    printed, here = io.StringIO(), os.getcwd()
    os.chdir(export)
    try:
        with contextlib.redirect_stdout(printed):
            exec(code, {"__name__": "__main__", "__builtins__": {**vars(builtins), "__import__": guarded}})
    finally:
        os.chdir(here)
    return printed.getvalue()


def runtime_output(export: Path) -> str:
    """What the README's example must print, from seqlab's runtime (`load_export`) on the same inputs."""
    runtime = load_export(export)
    task = runtime.manifest["task"]
    if task == "lm":
        from seqlab.families.lm.graphs import NEW_TOKENS, PROMPT

        ids = runtime.prompt_ids(PROMPT)
        generated = runtime.generate_ids(ids, NEW_TOKENS)
        return f"{generated}\n{runtime.detokenize(ids[1:] + generated)}\n"
    if task == "tagger":
        from seqlab.families.tagger.graphs import SENTENCE

        return " ".join(tag for tag, _ in runtime.tag(SENTENCE)) + "\n"
    if task == "classifier":
        from seqlab.families.classifier.graphs import TEXTS as CLASSIFIED

        return "".join(f"{p.label} {round(p.probability, 4)}\n" for p in runtime.classify(CLASSIFIED))
    source = json.loads(re.search(r"^text = (.*)$", example(export), re.M).group(1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                      # a source over the model's limit is cut, as the example
        (decoded,) = runtime.greedy(runtime.source_ids([source]))
    return f"{decoded.ids}\n{runtime.target_text(decoded.ids)}\n"


def check_example(export: Path) -> None:
    expected = runtime_output(export)
    assert run_example(export) == expected
    assert len(expected.strip()) > 2                     # something was decoded


def check_graphs(export: Path) -> None:
    """Every graph: full_check passes; seqlab is its producer; its doc_string and metadata say what it is."""
    manifest = json.loads((export / "manifest.json").read_text())
    for name, graph in manifest["graphs"].items():
        model = onnx.load(str(export / graph["file"]))
        onnx.checker.check_model(model, full_check=True)
        props = {p.key: p.value for p in model.metadata_props}
        assert (model.producer_name, props["family"], props["arch"], props["graph"]) == (
            "seqlab", manifest["task"], manifest["arch"], name)
        assert model.producer_version == manifest["seqlab_version"] and "README.md" in model.doc_string
        assert json.loads(props["special_ids"]) == {"<pad>": 0, "<unk>": 1, "<s>": 2, "</s>": 3, "<sep>": 4}


# ---------------------------------------------------------------------------- the default suite: two exports

@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> dict[str, Path]:
    """A BPE transformer LM and a classifier over words, trained a few steps, and their exports."""
    folder = tmp_path_factory.mktemp("readme")
    config = tiny_config(folder / "lm-bpe", arch="transformer", tokenizer="bpe", max_steps=2, eval_every=2)
    config.data.bpe_vocab_size, config.data.test = 300, ""
    config = dataclasses.replace(config, model=dataclasses.replace(config.model, context=64))    # TEXTS fit
    with pytest.MonkeyPatch.context() as patch:          # no curves.png after each evaluation: most of the time
        patch.setattr(trainer, "plot_curves", lambda run_dir: None)
        train_lm(config)
        assert main(["train", "classifier", "--train", SENTIMENT, "--dev", SENTIMENT, "--format", "tsv", "--arch",
                     "lstm", "--embedding-size", "8", "--hidden-size", "8", "--max-steps", "4", "--output",
                     str(folder / "sentiment"), *QUIET]) == 0
    for name in ("lm-bpe", "sentiment"):
        export_onnx(folder / name, folder / "exports" / name)
    return {name: folder / "exports" / name for name in ("lm-bpe", "sentiment")}


@pytest.mark.parametrize("name", ["lm-bpe", "sentiment"])
def test_export_readme_example_prints_what_seqlab_gives(exports, name):
    check_example(exports[name])
    readme = (exports[name] / "README.md").read_text()
    for part in ("## Files", "## Graphs", "## What the scores are", "## Tokenizing text", "| input | `",
                 "| output | `"):
        assert part in readme


def test_export_readme_names_each_graphs_inputs_outputs_dtypes_and_shapes(exports):
    readme = (exports["lm-bpe"] / "README.md").read_text()
    assert "| input | `window` | int64 | (B, n) |" in readme
    assert "| output | `logits` | float32 | (B, 305) |" in readme                 # 300 BPE pieces + 5 specials
    readme = (exports["sentiment"] / "README.md").read_text()
    assert "| input | `words` | int64 | (B, T) |" in readme and "| input | `lengths` | int64 | (B,) |" in readme
    assert "| output | `scores` | float32 | (B, 2) |" in readme and "softmax" in readme


@pytest.mark.parametrize("name", ["lm-bpe", "sentiment"])
def test_export_graphs_carry_their_description_and_pass_the_checker(exports, name):
    check_graphs(exports[name])


def test_export_bpe_tokenizer_json_gives_the_graphs_ids(exports):
    """tokenizers' own Tokenizer reads tokenizer.json and gives the ids seqlab feeds the graph (the BPE model's own
    ids are 5 lower), </s> first and at every line break; decode gives the text back."""
    runtime = load_export(exports["lm-bpe"])
    tokenizer = Tokenizer.from_file(str(exports["lm-bpe"] / "tokenizer.json"))
    for text in TEXTS:
        ids = runtime.prompt_ids(text)
        assert tokenizer.encode(text).ids == ids, text
        assert tokenizer.encode(text, add_special_tokens=False).ids == ids[1:], text
        assert tokenizer.decode(ids[1:]) == runtime.detokenize(ids[1:]) == text, text      # byte-level: all back
    inner = Tokenizer.from_str(json.dumps(json.loads((exports["lm-bpe"] / "seqlab" / "tokenizer.json").read_text())
                                          ["state"]))
    assert [i + 5 for i in inner.encode(" To be").ids] == tokenizer.encode("To be", add_special_tokens=False).ids


def test_export_plain_vocabulary_and_label_files(exports):
    runtime = load_export(exports["sentiment"])
    assert read_tokens(exports["sentiment"] / "vocab.txt") == runtime.vocabulary.words.tokens
    assert read_tokens(exports["sentiment"] / "labels.txt") == runtime.vocabulary.labels
    assert (exports["sentiment"] / "vocab.txt").read_text().splitlines()[:5] == ["<pad>", "<unk>", "<s>", "</s>",
                                                                                 "<sep>"]


def strings(value):
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)
    elif isinstance(value, str):
        yield value


@pytest.mark.parametrize("name", ["lm-bpe", "sentiment"])
def test_export_config_and_manifest_hold_no_local_paths(exports, name, tmp_path_factory):
    export = exports[name]
    temporary = str(tmp_path_factory.getbasetemp())
    run_config = json.loads((export.parent.parent / name / "config.json").read_text())
    assert any(s.startswith("/") for s in strings(run_config))                       # the run's own config has them
    for file in ("config.json", "manifest.json"):
        found = [s for s in strings(json.loads((export / file).read_text())) if s.startswith("/") or temporary in s
                 or str(FIXTURES) in s]
        assert not found, (file, found)
    manifest = json.loads((export / "manifest.json").read_text())
    assert manifest["source_run"] == name
    config = json.loads((export / "config.json").read_text())
    assert config["data"]["train"] == Path(run_config["data"]["train"]).name
    assert config["model"] == run_config["model"]                                  # the rest as it was


def copy(export: Path, folder: Path, name: str) -> Path:
    return Path(shutil.copytree(export, folder / name, symlinks=True))


def rewrite_manifest(export: Path, change) -> None:
    manifest = json.loads((export / "manifest.json").read_text())
    change(manifest)
    (export / "manifest.json").write_text(json.dumps(manifest))


def test_export_manifest_cannot_reach_outside_its_folder(exports, tmp_path):
    outside = tmp_path / "outside.onnx"
    shutil.copyfile(exports["sentiment"] / "classifier.onnx", outside)
    cases = {}
    cases["parent"] = copy(exports["sentiment"], tmp_path, "parent")
    rewrite_manifest(cases["parent"], lambda m: m["graphs"]["classifier"].update(file="../outside.onnx"))
    cases["absolute"] = copy(exports["sentiment"], tmp_path, "absolute")
    rewrite_manifest(cases["absolute"], lambda m: m["graphs"]["classifier"].update(file=str(outside)))
    cases["listed"] = copy(exports["sentiment"], tmp_path, "listed")
    rewrite_manifest(cases["listed"], lambda m: m["files"].append("../outside.onnx"))
    cases["graph link"] = copy(exports["sentiment"], tmp_path, "graph-link")
    (cases["graph link"] / "classifier.onnx").unlink()
    (cases["graph link"] / "classifier.onnx").symlink_to(outside)
    cases["vocabulary link"] = copy(exports["sentiment"], tmp_path, "vocabulary-link")
    (tmp_path / "vocab.json").write_text((exports["sentiment"] / "seqlab" / "vocab.json").read_text())
    (cases["vocabulary link"] / "seqlab" / "vocab.json").unlink()
    (cases["vocabulary link"] / "seqlab" / "vocab.json").symlink_to(tmp_path / "vocab.json")
    cases["folder link"] = copy(exports["sentiment"], tmp_path, "folder-link")
    shutil.rmtree(cases["folder link"] / "seqlab")
    (cases["folder link"] / "seqlab").symlink_to(exports["sentiment"] / "seqlab", target_is_directory=True)
    for case, export in cases.items():
        with pytest.raises(SeqlabError) as error:
            load_export(export)
        message = str(error.value)
        assert "outside the export folder" in message and "\n" not in message, (case, message)
    inside = copy(exports["sentiment"], tmp_path, "inside")                   # a link that stays inside is fine
    (inside / "labels-link.txt").symlink_to(inside / "labels.txt")
    assert load_export(inside).classify(["fine"])


def test_export_serve_refuses_an_export_that_reaches_outside(exports, tmp_path):
    pytest.importorskip("fastapi")
    from seqlab.serve.onnx import load_exports

    export = copy(exports["sentiment"], tmp_path, "escape")
    rewrite_manifest(export, lambda m: m["graphs"]["classifier"].update(file="/etc/hostname"))
    with pytest.raises(SeqlabError, match="names '/etc/hostname', outside the export folder"):
        load_exports([export])


def test_export_of_the_previous_layout_still_loads(exports, tmp_path):
    """Format 2 kept seqlab's own files beside the graphs; its exports load and answer as before."""
    old = copy(exports["lm-bpe"], tmp_path, "format-2")
    for path in (old / "seqlab").iterdir():
        shutil.move(str(path), old / path.name)                     # seqlab's tokenizer.json over the plain one
    (old / "seqlab").rmdir()
    rewrite_manifest(old, lambda m: m.update(format_version=2, files=sorted(p.name for p in old.iterdir())))
    assert load_export(old).generate("To be", max_tokens=12) == load_export(exports["lm-bpe"]).generate(
        "To be", max_tokens=12)


# ---------------------------------------------------------------------------- slow: the other variants

VARIANTS = {
    "clf-pooled": ["classifier", "--train", SENTIMENT, "--dev", SENTIMENT, "--format", "tsv", "--arch", "pooled",
                   "--ngrams", "2", "--max-length", "5", "--truncate", "tail", "--output-layer", "sigmoid",
                   "--embedding-size", "8"],
    "s2s-bpe-char": ["seq2seq", "--train-src", str(PAIRS / "train.src"), "--train-tgt", str(PAIRS / "train.tgt"),
                     "--dev-src", str(PAIRS / "dev.src"), "--dev-tgt", str(PAIRS / "dev.tgt"), "--arch", "gru",
                     "--tokenizer", "bpe", "--bpe-vocab-size", "300", "--target-tokenizer", "char",
                     "--embedding-size", "16", "--hidden-size", "16"],
    "s2s-lm-bpe": ["seq2seq", "--train-src", str(PAIRS / "train.src"), "--train-tgt", str(PAIRS / "train.tgt"),
                   "--dev-src", str(PAIRS / "dev.src"), "--dev-tgt", str(PAIRS / "dev.tgt"), "--arch", "lm",
                   "--shared-vocab", "--tokenizer", "bpe", "--bpe-vocab-size", "300", "--embedding-size", "16",
                   "--num-heads", "2", "--ff-size", "32", "--max-positions", "32"],
}


@pytest.fixture(scope="module")
def variants(tmp_path_factory) -> dict[str, Path]:
    """Exports of what the default suite and tests/test_export.py leave out: a word-level window LM, a pooled
    n-gram classifier with one sigmoid output and cut documents, a BPE -> character translator, a separator LM
    over one BPE vocabulary."""
    folder = tmp_path_factory.mktemp("variants")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(trainer, "plot_curves", lambda run_dir: None)
        train_lm(tiny_config(folder / "lm-ffn-word", arch="ffn", tokenizer="word", max_steps=2))
        for name, args in VARIANTS.items():
            assert main(["train", *args, "--max-steps", "10", "--output", str(folder / name), *QUIET]) == 0
    for name in ("lm-ffn-word", *VARIANTS):
        export_onnx(folder / name, folder / "exports" / name)
    return {name: folder / "exports" / name for name in ("lm-ffn-word", *VARIANTS)}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["lm-ffn-word", *VARIANTS])
def test_export_readme_example_of_each_variant(variants, name):
    check_example(variants[name])
    check_graphs(variants[name])


@pytest.mark.slow
def test_export_seq2seq_bpe_tokenizer_json_gives_the_source_ids(variants):
    runtime = load_export(variants["s2s-bpe-char"])
    tokenizer = Tokenizer.from_file(str(variants["s2s-bpe-char"] / "source_tokenizer.json"))
    texts = ["der hund sieht .", " zwei  Leerzeichen ", "déjà vu <unk> </s>", "x"]
    assert [tokenizer.encode(t).ids for t in texts] == runtime.source_ids(texts)
    target = read_tokens(variants["s2s-bpe-char"] / "target_vocab.txt")
    assert target == runtime.vocabulary.target_vocab.tokens
