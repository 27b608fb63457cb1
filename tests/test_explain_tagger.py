"""The tagger's views of `seqlab explore` (seqlab.families.tagger.explain): each one's numbers are the model's own.
The tags and their probabilities are `tag`'s, the probabilities sum to 1, the lattice is Viterbi's (its v_t
recomputed here from the emissions and the CRF's scores, its path the tags), the transitions are the CRF's
parameters, the gates are the textbook LSTM / GRU cells' (written out here) on the layers' own weights, the
attention rows are distributions; an export gives the same views from its graph; bad input is one SeqlabError;
a real server offers each model the views its architecture has."""

from __future__ import annotations

import json
import shutil
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import torch

import seqlab
from conftest import FIXTURES, serving
from seqlab.contract.views import MAX_TOKENS
from seqlab.data.tags import spans
from seqlab.errors import SeqlabError
from seqlab.families.tagger.conll import Sentence
from seqlab.families.tagger.pipeline import resolve_tagger_config, train_tagger

TINY = {"embedding_size": 8, "hidden_size": 8, "dropout": 0.0, "batch_size": 2, "lr": 0.05, "progress": False,
        "eval_every": 1000, "log_every": 1000, "max_steps": 30, "epochs": 1000, "format": "conll"}
RUNS = {"crf": {"encoder": "lstm", "crf": True, "num_layers": 2},                 # bidirectional, char BiLSTM
        "soft": {"encoder": "gru", "crf": False, "char_features": "none"},
        "transformer": {"encoder": "transformer", "crf": False, "num_heads": 2, "max_positions": 8,
                        "char_features": "cnn"},
        "window": {"encoder": "window", "crf": True, "window": 1, "char_features": "none"}}   # feedforward + CRF
SENTENCE = "Peter Blackburn visited Zorgland in New York ."


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Tiny NER taggers (trained on a copy of the fixture, so a test may remove their dev file): {name: run}."""
    folder = tmp_path_factory.mktemp("explain-tagger")
    ner = folder / "ner.conll"
    shutil.copy(FIXTURES / "ner.conll", ner)
    for name, options in RUNS.items():
        train_tagger(resolve_tagger_config(overrides={**TINY, "train": str(ner), "dev": str(ner),
                                                      "output": str(folder / name), **options}))
    return {name: folder / name for name in RUNS}


@pytest.fixture(scope="module")
def taggers(runs):
    return {name: seqlab.load(run) for name, run in runs.items()}


def matrix(view, panel: int = 0) -> np.ndarray:
    """A panel's values as floats, the blank cells (null in JSON: NaN, infinities) NaN."""
    values = np.array(view.panels[panel].values, np.float64)
    return np.where(np.isfinite(values), values, np.nan)


@pytest.mark.parametrize("name", list(RUNS))
def test_explain_tagger_tags_are_tag_output_and_probabilities_sum_to_one(taggers, name):
    tagger = taggers[name]
    found = tagger.explain(SENTENCE, top_k=3)
    words = SENTENCE.split()[:8]
    tagged = tagger.tag(words)
    view = found.view("tags")
    assert found.tokens == view.tokens == words and not found.truncated
    assert [d["tag"] for d in view.details] == [t for t, _ in tagged]
    assert view.values == pytest.approx([p for _, p in tagged], rel=1e-5)
    assert [d["unknown"] for d in view.details][3] is True                  # Zorgland is <unk>
    for detail in view.details:                          # with a CRF, Viterbi's tag need not be the likeliest one
        assert len(detail["alternatives"]) == 3 and detail["alternatives"][0][1] >= detail["probability"]
        assert detail["alternatives"][0][0] == detail["tag"] or tagger.model.crf is not None
    probabilities = matrix(found.view("label-scores"), 1)                   # (T, K)
    assert probabilities.sum(axis=1) == pytest.approx(np.ones(len(words)), abs=1e-5)
    assert found.view("label-scores").panels[1].path == found.view("label-scores").panels[0].path
    labels = tagger.vocabulary.labels
    assert [labels[k] for k in found.view("label-scores").panels[0].path] == [t for t, _ in tagged]
    found_spans = {(e["type"], e["start"], e["end"]) for d in view.details if (e := d["entity"])}
    assert found_spans == set(spans([t for t, _ in tagged]))
    json.dumps(found.to_json(), allow_nan=False)                            # plain JSON, NaN and inf as null


def test_explain_tagger_emissions_are_the_models_scores(taggers):
    tagger = taggers["soft"]
    found = tagger.explain(SENTENCE, "label-scores")
    batch = tagger.vocabulary.batch([Sentence(SENTENCE.split(), ["O"] * 8)])
    with torch.no_grad():
        scores = tagger.model(batch.words, batch.lengths, batch.chars)[0]   # (T, K)
    assert matrix(found.view("label-scores")) == pytest.approx(scores.numpy(), rel=1e-5, abs=1e-6)
    assert matrix(found.view("label-scores"), 1) == pytest.approx(torch.softmax(scores, -1).numpy(), abs=1e-6)


def test_explain_tagger_lattice_is_viterbi_and_transitions_the_crf_parameters(taggers):
    tagger = taggers["crf"]
    found = tagger.explain(SENTENCE, ["lattice", "transitions", "label-scores", "tags"])
    crf = tagger.model.crf
    emissions = matrix(found.view("label-scores"))                          # (T, K)
    allowed = (crf.transition_penalty == 0).numpy()
    transitions = matrix(found.view("transitions"))                         # (K+1, K+1): <start> row, <end> column
    K = crf.num_tags
    assert transitions[1:, :K][allowed] == pytest.approx(crf.transitions.detach().numpy()[allowed], abs=1e-5)
    assert np.isnan(transitions[1:, :K][~allowed]).all()                  # forbidden: blank
    start_ok, end_ok = (crf.start_penalty == 0).numpy(), (crf.end_penalty == 0).numpy()
    assert transitions[0, :K][start_ok] == pytest.approx(crf.start.detach().numpy()[start_ok], abs=1e-5)
    assert transitions[1:, K][end_ok] == pytest.approx(crf.end.detach().numpy()[end_ok], abs=1e-5)
    assert np.isnan(transitions[0, :K][~start_ok]).all() and np.isnan(transitions[0, K])
    # v_t(j) = max_i v_{t-1}(i) + A[i, j] + e_t(j) by hand, forbidden moves left out
    A = np.where(allowed, crf.transitions.detach().numpy(), -np.inf)
    v = [np.where(start_ok, crf.start.detach().numpy(), -np.inf) + emissions[0]]
    for e in emissions[1:]:
        v.append((v[-1][:, None] + A).max(axis=0) + e)
    lattice = matrix(found.view("lattice"))
    reached = np.isfinite(np.array(v))
    assert lattice[reached] == pytest.approx(np.array(v)[reached], rel=1e-4, abs=1e-4)
    assert np.isnan(lattice[~reached]).all()
    path = found.view("lattice").panels[0].path
    end = np.where(end_ok, crf.end.detach().numpy(), -np.inf)
    assert path[-1] == int(np.argmax(v[-1] + end))
    assert [tagger.vocabulary.labels[k] for k in path] == [t for t, _ in tagger.tag(SENTENCE.split())]


def lstm_by_hand(x: torch.Tensor, layer: torch.nn.LSTM, suffix: str, reverse: bool) -> dict[str, torch.Tensor]:
    """SLP 13.20-13.27 written out over x (T, I), PyTorch's weight layout (i, f, g, o): {"h", "i", "f", "o", "c"}."""
    W, U = getattr(layer, "weight_ih" + suffix), getattr(layer, "weight_hh" + suffix)
    b = getattr(layer, "bias_ih" + suffix) + getattr(layer, "bias_hh" + suffix)
    H = U.size(1)
    h, c, out = torch.zeros(H), torch.zeros(H), {k: [None] * len(x) for k in "hifoc"}
    for t in (range(len(x) - 1, -1, -1) if reverse else range(len(x))):
        z = W @ x[t] + U @ h + b
        i, f, g, o = torch.sigmoid(z[:H]), torch.sigmoid(z[H:2 * H]), torch.tanh(z[2 * H:3 * H]), \
            torch.sigmoid(z[3 * H:])
        c = f * c + i * g
        h = o * torch.tanh(c)
        for key, value in zip("hifoc", (h, i, f, o, c), strict=True):
            out[key][t] = value
    return {key: torch.stack(values) for key, values in out.items()}      # (T, H) each


def test_explain_tagger_gates_equal_the_textbook_lstm_on_the_layers_weights(taggers):
    tagger = taggers["crf"]
    model = tagger.model
    found = tagger.explain(SENTENCE, "gates", units=8)
    view = found.view("gates")
    words = SENTENCE.split()
    batch = tagger.vocabulary.batch([Sentence(words, ["O"] * len(words))])
    with torch.no_grad():
        spelled = model.chars(batch.chars.reshape(len(words), -1))                        # (T, Fc)
        x = torch.cat([model.embedding(batch.words)[0], spelled], dim=-1)                   # (T, E + Fc)
        panels = {p.title: np.array(p.values) for p in view.panels}
        for l, layer in enumerate(model.encoder.rnn.layers):
            outputs = []
            for d, (suffix, group) in enumerate([("_l0", "forward"), ("_l0_reverse", "backward")]):
                ours = lstm_by_hand(x, layer, suffix, reverse=d == 1)
                outputs.append(ours["h"])
                prefix = f"layer {l + 1} {group}"
                assert [p.group for p in view.panels].count(prefix) == 5            # h, i, f, o, c
                assert panels[f"{prefix}: hidden state h (13.27)"] == pytest.approx(ours["h"].T.numpy(), abs=1e-5)
                for key, name in (("i", "add (input) gate i (13.23)"), ("f", "forget gate f (13.20)"),
                                  ("o", "output gate o (13.26)"), ("c", "context c (13.25)")):
                    assert panels[f"{prefix}: {name}"] == pytest.approx(ours[key].T.numpy(), abs=1e-5)
            x = torch.cat(outputs, dim=-1)                                                  # (T, 2H): the next input
    assert view.panels[0].rows == [f"unit {u}" for u in range(8)] and view.panels[0].cols == words


def test_explain_tagger_gates_keep_the_units_that_vary_most(taggers):
    view = taggers["soft"].explain(SENTENCE, "gates", units=3).view("gates")
    assert [p.title.split(": ")[1] for p in view.panels[:3]] == ["hidden state h (9.13)", "update gate z (9.11)",
                                                             "reset gate r (9.10)"]
    every = taggers["soft"].explain(SENTENCE, "gates", units=8).view("gates").panels[0]
    spread = np.array(every.values).std(axis=1)
    kept = sorted(np.argsort(-spread)[:3].tolist())
    assert view.panels[0].rows == [f"unit {u}" for u in kept] and "the 3 of 8 units" in view.note
    assert np.array(view.panels[1].values) == pytest.approx(
        np.array(taggers["soft"].explain(SENTENCE, "gates", units=8).view("gates").panels[1].values)[kept])
    assert all(0 <= v <= 1 for p in view.panels if "gate" in p.title for row in p.values for v in row)


def test_explain_tagger_attention_rows_are_distributions_and_long_texts_are_cut(taggers):
    tagger = taggers["transformer"]
    found = tagger.explain(SENTENCE + " And more words .", "attention")
    assert found.truncated and found.tokens == (SENTENCE + " And more words .").split()[:8]   # its 8 positions
    view = found.view("attention")
    assert view.lines and [p.group for p in view.panels] == ["layer 1", "layer 1"]          # 2 heads
    for panel in view.panels:
        assert np.array(panel.values).sum(axis=1) == pytest.approx(np.ones(8), abs=1e-5)
    long = taggers["soft"].explain(" ".join(["word"] * (MAX_TOKENS + 3)), "tags")
    assert long.truncated and len(long.tokens) == MAX_TOKENS


def test_explain_tagger_window_encoder_has_the_crf_views_and_no_inside_ones(taggers):
    """The feedforward window encoder (under a CRF here) has no recurrence and no attention:
    its views are the tags, the scores, the transitions and the lattice, the lattice's path its tags."""
    tagger = taggers["window"]
    found = tagger.explain(SENTENCE)
    assert [v.name for v in found.views] == ["tags", "label-scores", "transitions", "lattice"]
    labels = tagger.vocabulary.labels
    assert [labels[k] for k in found.view("lattice").panels[0].path] == [t for t, _ in tagger.tag(SENTENCE.split())]
    with pytest.raises(SeqlabError, match="no view 'gates'"):
        tagger.explain(SENTENCE, "gates")


def test_explain_tagger_refuses_bad_input_in_one_line(taggers):
    with pytest.raises(SeqlabError, match="empty"):
        taggers["crf"].explain("   \n ")
    with pytest.raises(SeqlabError, match="a gru model has no view 'lattice': choose from tags, label-scores, gates"):
        taggers["soft"].explain(SENTENCE, "lattice")
    with pytest.raises(SeqlabError, match="no view 'gates'"):
        taggers["transformer"].explain(SENTENCE, "gates")
    with pytest.raises(SeqlabError, match="top_k must be between"):
        taggers["crf"].explain(SENTENCE, top_k=0)


def test_explain_tagger_examples_are_dev_sentences_or_none(taggers, runs):
    part = seqlab.families.tagger.FAMILY.part("explain")
    texts = part.examples(taggers["crf"], 3)
    assert texts == ["EU rejects German call .", "Peter Blackburn visited New York .",
                     "Acme Corp hired Anna Smith in Berlin ."]
    gone = seqlab.load(runs["soft"])
    Path(gone.config.data.dev).rename(Path(gone.config.data.dev).with_suffix(".moved"))
    try:
        assert part.examples(gone, 3) == []
    finally:
        Path(gone.config.data.dev).with_suffix(".moved").rename(gone.config.data.dev)


@pytest.fixture(scope="module")
def exports(runs, tmp_path_factory) -> dict[str, Path]:
    pytest.importorskip("onnxruntime", reason="an export's views need onnxruntime (pip install 'seqlab[export]')")
    pytest.importorskip("onnx", reason="seqlab export needs onnx (pip install 'seqlab[export]')")
    from seqlab.export.onnx import export_onnx

    folder = tmp_path_factory.mktemp("explain-tagger-exports")
    return {name: export_onnx(runs[name], folder / name).parent for name in ("crf", "soft")}


@pytest.mark.parametrize("name", ["crf", "soft"])
def test_explain_tagger_export_equals_pytorch(taggers, exports, name):
    from seqlab.export.runtime import load_export

    exported = load_export(exports[name])
    ours, theirs = taggers[name].explain(SENTENCE), exported.explain(SENTENCE)
    assert theirs.arch == ours.arch and [v.name for v in theirs.views] == [v.name for v in ours.views
                                                                           if v.name != "gates"]
    for view in theirs.views:
        expected = ours.view(view.name)
        if view.kind == "tokens":
            assert [d["tag"] for d in view.details] == [d["tag"] for d in expected.details]
            assert [d.get("entity") for d in view.details] == [d.get("entity") for d in expected.details]
            assert view.values == pytest.approx(expected.values, abs=1e-4)
        for got, want in zip(view.panels, expected.panels, strict=True):
            assert (got.title, got.rows, got.cols, got.path) == (want.title, want.rows, want.cols, want.path)
            assert np.nan_to_num(matrix(view, view.panels.index(got))) == pytest.approx(
                np.nan_to_num(matrix(expected, expected.panels.index(want))), abs=1e-4)
    with pytest.raises(SeqlabError, match="an export of a .* has no view 'gates'"):
        exported.explain(SENTENCE, "gates")


def test_explain_tagger_served_offers_the_views_each_model_has(runs):
    from seqlab.serve.app import create_app

    server, url = serving(create_app([runs["crf"], runs["soft"]]))
    try:
        def call(path: str, body: dict | None = None) -> dict:
            data = None if body is None else json.dumps(body).encode()
            request = urllib.request.Request(url + path, data, {"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=30) as answer:
                return json.load(answer)

        crf, soft = call("/v1/explain/crf"), call("/v1/explain/soft")
        assert (crf["arch"], [v["name"] for v in crf["views"]]) == \
            ("lstm+crf", ["tags", "label-scores", "transitions", "lattice", "gates"])
        assert (soft["arch"], [v["name"] for v in soft["views"]]) == ("gru", ["tags", "label-scores", "gates"])
        assert crf["examples"][0] == "EU rejects German call ."
        found = call("/v1/explain", {"model": "crf", "text": SENTENCE, "views": ["tags", "lattice"]})
        assert [v["name"] for v in found["views"]] == ["tags", "lattice"]
        assert [d["tag"] for d in found["views"][0]["details"]] == \
            [t for t, _ in seqlab.load(runs["crf"]).tag(SENTENCE.split())]
    finally:
        server.should_exit = True
