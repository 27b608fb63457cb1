"""`seqlab export --format onnx`: onnxruntime runs each exported graph as PyTorch does (1e-4, ragged batches
of several sizes, padding included), and the whole task on the export (`seqlab.export.runtime`) gives the
tags, labels, greedy continuations and greedy translations of `seqlab.load(run)`."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="seqlab export needs onnxruntime (pip install 'seqlab[export]')")
pytest.importorskip("onnx", reason="seqlab export needs onnx (pip install 'seqlab[export]')")
import torch  # noqa: E402
from test_export_readme import check_example, check_graphs  # noqa: E402

import seqlab  # noqa: E402
from conftest import FIXTURES, tiny_config  # noqa: E402
from seqlab.cli.main import main  # noqa: E402
from seqlab.errors import SeqlabError  # noqa: E402
from seqlab.export.onnx import export_onnx  # noqa: E402
from seqlab.export.runtime import load_export  # noqa: E402
from seqlab.families.lm.pipeline import train_lm  # noqa: E402
from seqlab.info import run_info  # noqa: E402
from seqlab.models.base import EncoderDecoderState  # noqa: E402

# every exported graph against PyTorch: its module fixture trains every family (~25 s on a 2-core CPU), so the
# module runs with the slow tests (`make test-slow`, which CI runs too)
pytestmark = pytest.mark.slow

PAIRS = FIXTURES / "seq2seq"
QUIET = ["--no-progress", "--dropout", "0", "--max-steps", "20"]
SENTIMENT = str(FIXTURES / "classify" / "sentiment.tsv")
NER = str(FIXTURES / "ner.conll")
PAIRED = ["--train-src", str(PAIRS / "train.src"), "--train-tgt", str(PAIRS / "train.tgt"), "--dev-src",
          str(PAIRS / "dev.src"), "--dev-tgt", str(PAIRS / "dev.tgt"), "--embedding-size", "16"]
SEQ2SEQ = [*PAIRED, "--hidden-size", "16"]
TRANSFORMER = [*PAIRED, "--num-heads", "2", "--ff-size", "32", "--max-positions", "32"]
# run name -> the `seqlab train` arguments (the LMs train through the API, below)
TRAINED = {
    "clf-lstm": ["classifier", "--train", SENTIMENT, "--dev", SENTIMENT, "--format", "tsv", "--arch", "lstm",
                 "--bidirectional", "--embedding-size", "8", "--hidden-size", "8"],
    "clf-transformer": ["classifier", "--train", SENTIMENT, "--dev", SENTIMENT, "--format", "tsv", "--arch",
                        "transformer", "--embedding-size", "8", "--hidden-size", "8", "--heads", "2"],
    "clf-features": ["classifier", "--train", SENTIMENT, "--dev", SENTIMENT, "--format", "tsv", "--arch", "features",
                     "--hidden-size", "8"],
    "ner-crf": ["tagger", "--train", NER, "--dev", NER, "--format", "conll", "--embedding-size", "8", "--hidden-size",
                "8", "--crf"],
    "ner-transformer": ["tagger", "--train", NER, "--dev", NER, "--format", "conll", "--encoder", "transformer",
                        "--embedding-size", "8", "--hidden-size", "8", "--heads", "2", "--char-features", "cnn"],
    "s2s-lstm-dot": ["seq2seq", *SEQ2SEQ, "--arch", "lstm", "--attention", "dot", "--bidirectional"],
    "s2s-gru": ["seq2seq", *SEQ2SEQ, "--arch", "gru", "--num-layers", "2"],
    "s2s-transformer": ["seq2seq", *TRANSFORMER, "--arch", "transformer", "--num-layers", "2", "--lr", "0.005"],
    "s2s-lm": ["seq2seq", *TRANSFORMER, "--arch", "lm", "--shared-vocab"],
}
SEQ2SEQS = ("s2s-lstm-dot", "s2s-gru", "s2s-transformer", "s2s-lm")
LMS = ("lstm", "gru", "ffn", "transformer")
TEXTS = ["a warm and funny film", "a dull mess", "bad", "the best film of the year , warm and funny and sad"]
SENTENCES = [s.split() for s in ["John lives in Paris .", "EU rejects German call to boycott British lamb .", "a",
                                 "Peter Blackburn"]]
SOURCES = ["der hund sieht .", "der mann mag der katze .", "katze", "ein kleiner hund sieht den großen mann ."]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Tiny runs of each exportable family, and their exports."""
    folder = tmp_path_factory.mktemp("export")
    for name, args in TRAINED.items():
        assert main(["train", *args, "--output", str(folder / name), *QUIET]) == 0
    for arch in LMS:
        train_lm(tiny_config(folder / f"lm-{arch}", arch=arch, tokenizer="char"))
    names = [*TRAINED, *(f"lm-{arch}" for arch in LMS)]
    for name in names:
        export_onnx(folder / name, folder / "exports" / name)
    return {name: folder / name for name in names}


def exported(runs, name: str):
    return load_export(runs[name].parent / "exports" / name)


def ragged(vocab_size: int, B: int, T: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids (B, T) with lengths from T down to 1."""
    g = torch.Generator().manual_seed(seed)
    words = torch.randint(5, vocab_size, (B, T), generator=g)
    lengths = torch.tensor([max(1, T - b * T // B) for b in range(B)])
    words[torch.arange(T)[None, :] >= lengths[:, None]] = 0
    return words, lengths


SHAPES = [(1, 1), (3, 4), (5, 9)]


@pytest.mark.parametrize("name", ["clf-lstm", "clf-transformer", "clf-features"])
def test_export_classifier_scores_equal_pytorch(runs, name):
    trained, onnx = seqlab.load(runs[name]), exported(runs, name)
    c = trained.config.model
    for seed, (B, T) in enumerate(SHAPES):
        if c.arch == "features":
            features = torch.randn(B, c.num_features, generator=torch.Generator().manual_seed(seed))
            expected = trained.model(None, None, features)
            got = onnx.run("classifier", {"features": features.numpy()})["scores"]
        else:
            words, lengths = ragged(c.vocab_size, B, T, seed)
            expected = trained.model(words, lengths)
            got = onnx.run("classifier", {"words": words.numpy(), "lengths": lengths.numpy()})["scores"]
        np.testing.assert_allclose(got, expected.detach().numpy(), atol=1e-4)


@pytest.mark.parametrize("name", ["ner-crf", "ner-transformer"])
def test_export_tagger_emissions_equal_pytorch(runs, name):
    trained, onnx = seqlab.load(runs[name]), exported(runs, name)
    c = trained.config.model
    for seed, (B, T) in enumerate(SHAPES):
        words, lengths = ragged(c.vocab_size, B, T, seed)
        chars = torch.randint(5, c.char_vocab_size, (B, T, 3 + seed), generator=torch.Generator().manual_seed(seed))
        expected = trained.model(words, lengths, chars).detach().numpy()
        got = onnx.run("tagger", {"words": words.numpy(), "lengths": lengths.numpy(), "chars": chars.numpy()})
        real = (torch.arange(T)[None, :] < lengths[:, None]).numpy()
        np.testing.assert_allclose(got["emissions"][real], expected[real], atol=1e-4)


@pytest.mark.parametrize("arch", LMS)
def test_export_lm_step_equals_pytorch(runs, arch):
    trained, onnx = seqlab.load(runs[f"lm-{arch}"]), exported(runs, f"lm-{arch}")
    model = trained.model
    for B in (1, 3):
        prompt = torch.randint(5, model.embedding.num_embeddings, (B, 6), generator=torch.Generator().manual_seed(B))
        state = model.start(prompt)
        values = onnx.start(B)
        for token in prompt[:, :-1].T:
            _, values = onnx.step(token.numpy(), values)
        tokens = prompt[:, -1]
        for _ in range(3):
            expected, state, _ = model.step(tokens, state)
            got, values = onnx.step(tokens.numpy(), values)
            np.testing.assert_allclose(got, expected.detach().numpy(), atol=1e-4)
            tokens = expected.argmax(-1)


@pytest.mark.parametrize("name", ["s2s-lstm-dot", "s2s-gru"])
def test_export_seq2seq_encoder_and_decoder_step_equal_pytorch(runs, name):
    trained, onnx = seqlab.load(runs[name]), exported(runs, name)
    model = trained.model
    for seed, (B, S) in enumerate(SHAPES):
        source, lengths = ragged(model.config.source_vocab_size, B, S, seed)
        memory = model.encode(source, lengths)
        got = onnx.run("encoder", {"source": source.numpy(), "lengths": lengths.numpy()})
        real = (torch.arange(S)[None, :] < lengths[:, None]).numpy()
        np.testing.assert_allclose(got["outputs"][real], memory["outputs"].detach().numpy()[real], atol=1e-4)
        np.testing.assert_allclose(got["h0"], memory["h0"].detach().numpy(), atol=1e-4)
        state = EncoderDecoderState(memory, model.init_state(memory))
        values = {**got, "mask": real, "h": got["h0"]}                              # batch-first (B, L, D)
        if "c0" in got:
            values["c"] = got["c0"]
        tokens = torch.full((B,), 2)
        for _ in range(3):
            expected, state, weights = model.step(tokens, state, need_weights=True)
            out = onnx.run("decoder_step", {"tokens": tokens.numpy(), **values})
            np.testing.assert_allclose(out["logits"], expected.detach().numpy(), atol=1e-4)
            assert ("weights" in out) == model.attends
            if model.attends:
                np.testing.assert_allclose(out["weights"], weights.detach().numpy(), atol=1e-4)
            values.update({name: out[f"next_{name}"] for name in ("h", "c") if f"next_{name}" in out})
            tokens = expected.argmax(-1)


@pytest.mark.parametrize("name", SEQ2SEQS)
def test_export_seq2seq_steps_equal_pytorch(runs, name):
    """The runtime's encode / start / step (the graphs of every arch) against the model's start / step."""
    trained, onnx = seqlab.load(runs[name]), exported(runs, name)
    model = trained.model
    for seed, (B, S) in enumerate(SHAPES):
        source, lengths = ragged(model.config.source_vocab_size, B, S, seed)
        state = model.start(source, lengths)
        memory = onnx.encode([row[:n] for row, n in zip(source.tolist(), lengths.tolist(), strict=True)])
        np.testing.assert_array_equal(memory["mask"], state.memory["mask"].numpy())
        values = onnx.start(memory)
        tokens = torch.full((B,), model.start_token)
        for _ in range(4):
            expected, state, weights = model.step(tokens, state, need_weights=True)
            got, got_weights, values = onnx.step(tokens.numpy(), memory, values)
            np.testing.assert_allclose(got, expected.detach().numpy(), atol=1e-4)
            assert (got_weights is None) == (weights is None) == (not model.attends)
            if weights is not None:
                np.testing.assert_allclose(got_weights, weights.detach().numpy(), atol=1e-4)
            tokens = expected.argmax(-1)


@pytest.mark.parametrize("name", SEQ2SEQS)
def test_export_seq2seq_greedy_weights_equal_pytorch(runs, name):
    trained, onnx = seqlab.load(runs[name]), exported(runs, name)
    expected = trained.generate(SOURCES, beam=1, attention=True)
    got = onnx.greedy(onnx.source_ids(SOURCES), attention=True)
    for e, g in zip(expected, got, strict=True):
        assert onnx.target_text(g.ids) == e.text and g.finished == e.finished
        if e.attention is None:
            assert g.attention is None and not onnx.attends
        else:
            np.testing.assert_allclose(g.attention, np.array(e.attention), atol=1e-4)
    ids = onnx.source_ids(SOURCES[:1])[0]
    assert onnx.source_tokens(ids) == expected[0].source_tokens


INDEX = np.array([2, 0, 3, 1, 1])       # a permutation of 4 rows, one repeated (a beam keeps a row twice)


@pytest.mark.parametrize("name", SEQ2SEQS)
def test_export_seq2seq_reorder_then_step_equals_the_reordered_batch(runs, name):
    onnx = exported(runs, name)
    sources = onnx.source_ids(SOURCES)
    first, second = np.array([2, 5, 6, 7]), np.array([8, 9, 10, 11, 12])
    memory = onnx.encode(sources)
    _, _, state = onnx.step(first, memory, onnx.start(memory))
    memory, state = onnx.reorder(memory, state, INDEX)
    got, got_weights, _ = onnx.step(second, memory, state)
    memory = onnx.encode([sources[i] for i in INDEX])
    _, _, state = onnx.step(first[INDEX], memory, onnx.start(memory))
    expected, weights, _ = onnx.step(second, memory, state)
    np.testing.assert_allclose(got, expected, atol=1e-5)
    if weights is not None:
        np.testing.assert_allclose(got_weights, weights, atol=1e-5)


@pytest.mark.parametrize("arch", LMS)
def test_export_lm_reorder_then_step_equals_the_reordered_batch(runs, arch):
    onnx = exported(runs, f"lm-{arch}")
    prompt = np.random.default_rng(0).integers(5, 12, (4, 5))
    state = onnx.start(4)
    for tokens in prompt.T:
        _, state = onnx.step(tokens, state)
    got, _ = onnx.step(np.array([5, 6, 7, 8, 9]), onnx.reorder(state, INDEX))
    state = onnx.start(5)
    for tokens in prompt[INDEX].T:
        _, state = onnx.step(tokens, state)
    expected, _ = onnx.step(np.array([5, 6, 7, 8, 9]), state)
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_export_runtime_does_each_task_as_the_pytorch_api(runs):
    for name in ("clf-lstm", "clf-transformer", "clf-features"):
        expected, got = seqlab.load(runs[name]).classify(TEXTS), exported(runs, name).classify(TEXTS)
        assert [p.label for p in got] == [p.label for p in expected]
        assert [p.probability for p in got] == pytest.approx([p.probability for p in expected], abs=1e-4)
    for name in ("ner-crf", "ner-transformer"):
        expected, got = seqlab.load(runs[name]).tag_sentences(SENTENCES), exported(runs, name).tag_sentences(SENTENCES)
        assert [[t for t, _ in s] for s in got] == [[t for t, _ in s] for s in expected]
        assert [p for s in got for _, p in s] == pytest.approx([p for s in expected for _, p in s], abs=1e-4)
    for arch in LMS:                       # 40 tokens: past the transformer's context of 16, so its window slides
        lm, onnx = seqlab.load(runs[f"lm-{arch}"]), exported(runs, f"lm-{arch}")
        assert onnx.generate("ROMEO:", max_tokens=40) == lm.generate("ROMEO:", max_tokens=40, greedy=True)
    # a long source besides short ones: the lm's short rows decode past the long row's room (its positions
    # are clamped to the last one, as PyTorch does)
    sources = [*SOURCES, " ".join(["der großen mann sieht den kleinen hund ."] * 3)]
    for name in SEQ2SEQS:                  # the lm's window leaves 23 source tokens: both truncate, and say so
        with pytest.warns(UserWarning, match="truncated 1 of 5") if name == "s2s-lm" else contextlib.nullcontext():
            expected = seqlab.load(runs[name]).translate(sources, beam=1)
        with pytest.warns(UserWarning, match="truncated 1 of 5") if name == "s2s-lm" else contextlib.nullcontext():
            got = exported(runs, name).translate(sources)
        assert got == expected and any(expected)


@pytest.mark.parametrize("name", [*TRAINED, *(f"lm-{arch}" for arch in LMS)])
def test_export_readme_example_prints_what_the_runtime_gives(runs, name):
    """Each export's README.md: its numpy and onnxruntime example (tests/test_export_readme.py) prints the runtime's
    output; its graphs describe themselves and pass the ONNX checker."""
    check_example(runs[name].parent / "exports" / name)
    check_graphs(runs[name].parent / "exports" / name)


TORCH_FREE = """
import sys
from seqlab.export.runtime import load_export
exports, texts, sentence, sources = sys.argv[1], sys.argv[2:6], sys.argv[6].split(), sys.argv[7:]
load_export(f"{exports}/clf-lstm").classify(texts)
load_export(f"{exports}/clf-features").classify(texts)
load_export(f"{exports}/ner-crf").tag(sentence)
for arch in ("lstm", "transformer"):
    load_export(f"{exports}/lm-{arch}").generate("ROMEO:", max_tokens=5)
for name in ("s2s-lstm-dot", "s2s-transformer", "s2s-lm"):
    load_export(f"{exports}/{name}").translate(sources)
assert "torch" not in sys.modules, sorted(m for m in sys.modules if m.split(".")[0] == "torch")[:5]
"""


def test_export_runtime_runs_without_importing_torch(runs):
    """A process that loads exports of every family and runs their tasks never imports torch."""
    env = {**os.environ, "PYTHONPATH": str(Path(seqlab.__file__).resolve().parent.parent)}
    done = subprocess.run([sys.executable, "-c", TORCH_FREE, str(runs["clf-lstm"].parent / "exports"), *TEXTS,
                           " ".join(SENTENCES[0]), *SOURCES], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def test_export_cli_end_to_end(runs, tmp_path, capsys):
    out = tmp_path / "ner"
    assert main(["export", str(runs["ner-crf"]), "--format", "onnx", "--output", str(out)]) == 0
    assert "tagger.onnx" in capsys.readouterr().out
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["task"], manifest["arch"], manifest["crf"]) == ("tagger", "lstm", True)
    assert manifest["graphs"]["tagger"]["inputs"] == ["words", "lengths", "chars"]
    assert {"seqlab/vocab.json", "seqlab/labels.json", "seqlab/chars.json", "config.json", "crf.json", "README.md",
            "vocab.txt", "labels.txt", "chars.txt"} <= set(manifest["files"])
    moved = shutil.move(str(out), str(tmp_path / "moved"))            # usable without the run directory
    sentence = ["John", "lives", "in", "Paris", "."]
    expected = [t for t, _ in seqlab.load(runs["ner-crf"]).tag(sentence)]
    assert [t for t, _ in load_export(moved).tag(sentence)] == expected
    assert main(["export", str(runs["ner-crf"]), "--output", str(moved)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main(["export", str(runs["ner-crf"]), "--output", str(moved), "--overwrite"]) == 0


def test_export_errors_are_one_line(runs, tmp_path, capsys):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    old = tmp_path / "old"                               # an export of another format
    shutil.copytree(runs["clf-lstm"].parent / "exports" / "clf-lstm", old)
    manifest = json.loads((old / "manifest.json").read_text())
    (old / "manifest.json").write_text(json.dumps({**manifest, "format_version": 1}))
    damaged = tmp_path / "damaged"
    shutil.copytree(runs["clf-lstm"], damaged)
    (damaged / "model.safetensors").write_bytes(b"not weights")
    cases = [([str(runs["clf-lstm"]), "--output", str(a_file / "out")], "cannot write there"),
             ([str(runs["clf-lstm"]), "--output", str(a_file)], "is a file"),
             ([str(damaged), "--output", str(tmp_path / "d")], "damaged"),
             ([str(tmp_path / "nowhere"), "--output", str(tmp_path / "n")], "not a directory")]
    for args, message in cases:
        assert main(["export", *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith("seqlab: error:") and message in err and len(err.strip().splitlines()) == 1, err
    with pytest.raises(SeqlabError, match="not a seqlab export"):
        load_export(tmp_path)
    with pytest.raises(SeqlabError, match="export the run again"):
        load_export(old)


def test_export_parameters_counted_from_the_graphs_equal_the_manifest_s(runs, tmp_path):
    """The manifest records the run's parameters; an export made before it did has them counted from its graphs'
    float initializers (`seqlab.export.protobuf`, without the onnx package), each shared weight once, the CRF's
    scores added: the same number, for every family and architecture."""
    for name, run in runs.items():
        export = Path(shutil.copytree(run.parent / "exports" / name, tmp_path / name))
        manifest = json.loads((export / "manifest.json").read_text())
        recorded = manifest.pop("parameters")
        assert recorded == run_info(run)["parameters"] > 0, name                       # what `seqlab info` says
        (export / "manifest.json").write_text(json.dumps(manifest))
        assert load_export(export).parameters == recorded, name
