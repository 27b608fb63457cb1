"""The classifier's views of `seqlab explore` (`seqlab.families.classifier.explain`): their numbers are the
classifier's own (classify's probabilities, the textbook cells on its weights, attention distributions), on a run
and on its ONNX export; bad input gets one line."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

import seqlab
from seqlab.contract.views import MAX_TOKENS, explain
from seqlab.errors import SeqlabError
from seqlab.families.classifier import explain as part

FIXTURES = Path(__file__).parent / "fixtures"
SENTIMENT = FIXTURES / "classify" / "sentiment.tsv"
TEXT = "a fine film , warm and funny but the plot is dull"
ARCHS = {"lstm": [],                                                   # left to right, read at its last state
         "bigru": ["--arch", "gru", "--bidirectional", "--layers", "2", "--pooling", "max"],
         "transformer": ["--arch", "transformer", "--heads", "2", "--layers", "2", "--pooling", "cls"],
         "pooled": ["--arch", "pooled", "--ngrams", "2", "--pooling", "max"],
         "features": ["--arch", "features"]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, seqlab.FromRun]:
    """A tiny trained classifier of each kind: {name: the loaded run}."""
    from seqlab.cli.main import main

    folder = tmp_path_factory.mktemp("explain-classifier")
    for name, options in ARCHS.items():
        width = [] if name == "features" else ["--embedding-size", "8"]
        assert main(["train", "classifier", "--train", str(SENTIMENT), "--dev", str(SENTIMENT), "--format", "tsv",
                     "--hidden-size", "8", "--max-steps", "20", "--eval-every", "20", "--lr", "0.05", "--dropout", "0",
                     "--no-progress", "--output", str(folder / name), *width, *options]) == 0
    return {name: seqlab.load(folder / name) for name in ARCHS}


def close(found, expected, tolerance: float) -> bool:
    """Numbers (lists, nested lists or tensors) within `tolerance` of each other, of the same shape."""
    found, expected = torch.as_tensor(found, dtype=torch.float64), torch.as_tensor(expected, dtype=torch.float64)
    return found.shape == expected.shape and bool((found - expected).abs().max() <= tolerance)


def distribution(prediction, labels: list[str]) -> list[float]:
    return [prediction.probabilities[label] for label in labels]


def test_explain_classes_equal_classify(runs):
    for name, trained in runs.items():
        found = trained.explain(TEXT, ["classes"]).view("classes")
        assert found.labels == trained.labels
        assert found.values == pytest.approx(distribution(trained.classify(TEXT), trained.labels), abs=1e-6), name
        assert sum(found.values) == pytest.approx(1.0, abs=1e-6)


def test_explain_prefixes_are_the_classifier_on_each_prefix(runs):
    for name, trained in runs.items():
        found = trained.explain(TEXT, ["prefixes", "classes"])
        tokens, (panel,) = found.tokens, found.view("prefixes").panels
        assert panel.rows == tokens and panel.cols == trained.labels
        assert panel.values[-1] == pytest.approx(found.view("classes").values, abs=1e-6), name
        for t in (0, 3, len(tokens) - 2):
            alone = trained.classify(" ".join(tokens[:t + 1]))
            assert panel.values[t] == pytest.approx(distribution(alone, trained.labels), abs=1e-5), (name, t)
        assert panel.path == [max(range(len(row)), key=row.__getitem__) for row in panel.values]


def test_explain_occlusion_is_the_text_without_each_word(runs):
    for name, trained in runs.items():
        found = trained.explain(TEXT, ["occlusion", "classes"])
        view, full = found.view("occlusion"), found.view("classes").values
        best = max(range(len(full)), key=full.__getitem__)
        assert view.tokens == found.tokens
        for i in range(len(found.tokens)):
            without = trained.classify(" ".join(found.tokens[:i] + found.tokens[i + 1:]))
            p = distribution(without, trained.labels)
            assert view.values[i] == pytest.approx(full[best] - p[best], abs=1e-5), (name, i)
            assert view.details[i]["probability"] == pytest.approx(p[best], abs=1e-5)
            assert dict(view.details[i]["alternatives"]) == pytest.approx(without.probabilities, abs=1e-5)
    unknown = runs["lstm"].explain("a fine zyzzyva", ["occlusion"]).view("occlusion")
    assert [d["unknown"] for d in unknown.details] == [False, False, True]


def lstm_by_hand(layer, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """SLP eqs. 13.20-13.27 written out on a torch.nn.LSTM layer's weights (rows i, f, g, o): x (T, I) ->
    {h, i, f, o, c} (T, H) each."""
    W, U = layer.weight_ih_l0, layer.weight_hh_l0
    b = layer.bias_ih_l0 + layer.bias_hh_l0
    H = U.size(1)
    h, c = torch.zeros(H), torch.zeros(H)
    out: dict[str, list] = {k: [] for k in "hifoc"}
    for x_t in x:
        z = W @ x_t + U @ h + b
        i, f, o = torch.sigmoid(z[:H]), torch.sigmoid(z[H:2 * H]), torch.sigmoid(z[3 * H:])   # 13.23, 13.20, 13.26
        g = torch.tanh(z[2 * H:3 * H])                                                          # 13.22
        c = f * c + i * g
        h = o * torch.tanh(c)
        for key, value in zip("hifoc", (h, i, f, o, c), strict=True):
            out[key].append(value)
    return {key: torch.stack(values) for key, values in out.items()}


def panel_values(view, title: str) -> tuple[list[int], torch.Tensor]:
    (panel,) = [p for p in view.panels if title in p.title]
    return [int(row.split()[1]) for row in panel.rows], torch.tensor(panel.values)


@torch.no_grad()
def test_explain_gates_equal_the_textbook_lstm_cell(runs):
    trained = runs["lstm"]
    view = trained.explain(TEXT, ["gates"], units=8).view("gates")
    words = torch.tensor(trained.vocabulary.word_ids(trained.vocabulary.tokens(TEXT)))
    expected = lstm_by_hand(trained.model.encoder.rnn.layers[0], trained.model.embedding(words))
    assert {p.group for p in view.panels} == {"layer 1 forward"}
    for key, title in (("h", "hidden state h"), ("i", "add (input) gate i"), ("f", "forget gate f"),
                       ("o", "output gate o"), ("c", "context c")):
        units, values = panel_values(view, title)
        assert units == list(range(8))
        assert close(values, expected[key].T[units], 2e-4), key
    fewer = trained.explain(TEXT, ["gates"], units=3).view("gates")
    units, values = panel_values(fewer, "forget gate f")
    assert len(units) == 3 and "the 3 of 8 units" in fewer.note
    assert close(values, expected["f"].T[units], 2e-4)


@torch.no_grad()
def test_explain_gates_each_layer_and_direction_equal_the_fused_gru(runs):
    trained = runs["bigru"]
    view = trained.explain(TEXT, ["gates"], units=8).view("gates")
    assert [p.group for p in view.panels if "hidden state" in p.title] == \
        ["layer 1 forward", "layer 1 backward", "layer 2 forward", "layer 2 backward"]
    words = torch.tensor(trained.vocabulary.word_ids(trained.vocabulary.tokens(TEXT)))
    x = trained.model.embedding(words)[None]                                  # (1, T, E)
    for l, layer in enumerate(trained.model.encoder.rnn.layers):
        x, _ = layer(x)                                                       # (1, T, 2H)
        for d, direction in enumerate(("forward", "backward")):
            units, values = panel_values(view, f"layer {l + 1} {direction}: hidden state h")
            assert close(values, x[0, :, d * 8:(d + 1) * 8].T[units], 2e-4), (l, direction)
    for p in view.panels:
        if "gate" in p.title:
            assert p.range == (0.0, 1.0) and all(0 <= v <= 1 for row in p.values for v in row)


def test_explain_attention_rows_are_distributions(runs):
    trained = runs["transformer"]
    found = trained.explain(TEXT, ["attention"])
    view = found.view("attention")
    assert view.lines and len(view.panels) == 2 * 2                          # layers x heads
    assert {p.group for p in view.panels} == {"layer 1", "layer 2"}
    for p in view.panels:
        assert p.rows == p.cols == ["<s>", *found.tokens]                     # the classification token first
        for row in p.values:
            assert sum(row) == pytest.approx(1.0, abs=1e-3) and min(row) >= 0


def test_explain_pooling_shares_sum_to_one(runs):
    shares = {}
    for name in ("lstm", "bigru", "transformer", "pooled"):
        view = runs[name].explain(TEXT, ["pooling"]).view("pooling")
        assert sum(view.values) == pytest.approx(1.0, abs=1e-6), name
        shares[name] = view
    assert shares["lstm"].values[-1] == 1.0                                   # the last state holds it all
    assert shares["transformer"].tokens[0] == "<s>" and shares["transformer"].values[0] == 1.0
    assert "fine film" in shares["pooled"].tokens                             # the bigrams are pooled too
    assert "max pooling" in shares["bigru"].note
    with pytest.raises(SeqlabError, match="a features model has no view 'pooling'"):
        runs["features"].explain(TEXT, ["pooling"])


def test_explain_views_an_arch_has(runs):
    names = {name: [v.name for v in runs[name].explain(TEXT).views] for name in runs}
    assert names == {"lstm": ["classes", "prefixes", "occlusion", "gates", "pooling"],
                     "bigru": ["classes", "prefixes", "occlusion", "gates", "pooling"],
                     "transformer": ["classes", "prefixes", "occlusion", "attention", "pooling"],
                     "pooled": ["classes", "prefixes", "occlusion", "pooling"],
                     "features": ["classes", "prefixes", "occlusion"]}
    found = runs["lstm"].explain(TEXT)
    assert found.family == "classifier" and found.arch == "lstm" and not found.truncated
    assert found.to_json()["views"][0]["kind"] == "bars"


def test_explain_long_text_is_bounded(runs):
    trained = runs["lstm"]
    words = ("warm funny dull slow " * 200).split()                          # 800 words
    found = trained.explain(" ".join(words), ["prefixes", "occlusion"])
    assert found.truncated and len(found.tokens) == MAX_TOKENS
    (panel,) = found.view("prefixes").panels
    assert len(panel.rows) < MAX_TOKENS and "prefixes, ending at evenly spaced words" in found.view("prefixes").note
    assert panel.values[-1] == pytest.approx(distribution(trained.classify(" ".join(found.tokens)),
                                                          trained.labels), abs=1e-5)
    occluded = found.view("occlusion")
    shown = [v for v in occluded.values if v == v]                          # NaN: not left out
    assert 0 < len(shown) < MAX_TOKENS and "evenly spaced" in occluded.note
    assert found.to_json()["views"][1]["values"].count(None) == MAX_TOKENS - len(shown)


def test_explain_bad_input_gets_one_line(runs):
    trained = runs["lstm"]
    for text, views, options, expect in (("   ", None, {}, "the text to explain is empty"),
                                         ("<br/>", None, {}, "has no tokens this classifier reads"),
                                         (TEXT, ["attention"], {}, "a lstm model has no view 'attention'"),
                                         (TEXT, ["nonsense"], {}, "no view 'nonsense'"),
                                         (TEXT, None, {"units": 0}, "units must be between 1 and 256"),
                                         (TEXT, None, {"top_k": 1000}, "top_k must be between"),
                                         (TEXT, None, {"colour": "red"}, "unknown explain option 'colour'")):
        with pytest.raises(SeqlabError) as error:
            trained.explain(text, views, **options)
        assert expect in str(error.value) and "\n" not in str(error.value), str(error.value)


def test_explain_examples_are_the_dev_texts(runs, tmp_path):
    trained = runs["lstm"]
    lines = SENTIMENT.read_text().splitlines()[1:4]
    assert part.examples(trained, 3) == [line.split("\t")[1] for line in lines]
    gone = dataclasses.replace(trained.config, data=dataclasses.replace(trained.config.data,
                                                                        dev=str(tmp_path / "gone.tsv"), test=""))
    assert part.examples(type(trained)(trained.model, trained.vocabulary, gone, "cpu"), 3) == []


def test_explain_export_gives_the_runs_numbers(classifier_export):
    from seqlab.export.runtime import load_export

    trained, exported = seqlab.load(classifier_export.parent / "run"), load_export(classifier_export)
    names = ["classes", "prefixes", "occlusion"]
    mine, theirs = trained.explain(TEXT, names), exported.explain(TEXT)
    assert [v.name for v in theirs.views] == names and theirs.tokens == mine.tokens
    assert theirs.view("classes").values == pytest.approx(mine.view("classes").values, abs=1e-4)
    assert close(theirs.view("prefixes").panels[0].values, mine.view("prefixes").panels[0].values, 1e-4)
    assert theirs.view("occlusion").values == pytest.approx(mine.view("occlusion").values, abs=1e-4)
    assert exported.config["data"]["dev"] == "sentiment.tsv"       # an export names its files without their folder
    assert part.examples(exported, 2) == [] and len(part.examples(trained, 2)) == 2
    with pytest.raises(SeqlabError, match="an export of a lstm model has no view 'gates'"):
        explain(exported, TEXT, ["gates"])


def test_explain_served_on_a_real_socket(runs):
    import httpx

    from conftest import serving
    from seqlab.serve.app import create_app

    trained = runs["bigru"]
    server, url = serving(create_app([trained.run_dir]))
    try:
        about = httpx.get(f"{url}/v1/explain/bigru", timeout=30).json()
        assert about["family"] == "classifier" and about["arch"] == "gru" and about["runtime"] == "torch"
        assert [v["name"] for v in about["views"]] == ["classes", "prefixes", "occlusion", "gates", "pooling"]
        assert about["examples"][:2] == part.examples(trained, 2)
        answer = httpx.post(f"{url}/v1/explain", json={"model": "bigru", "text": TEXT, "views": ["classes", "gates"],
                                                        "options": {"units": 4}}, timeout=30)
        assert answer.status_code == 200, answer.text
        found = answer.json()
        assert [v["name"] for v in found["views"]] == ["classes", "gates"]
        assert found["views"][0]["values"] == pytest.approx(distribution(trained.classify(TEXT), trained.labels),
                                                            rel=1e-3)     # the server sends 4 significant digits
        assert all(len(panel["rows"]) == 4 for panel in found["views"][1]["panels"])
        wrong = httpx.post(f"{url}/v1/explain", json={"model": "bigru", "text": TEXT, "views": ["attention"]},
                           timeout=30)
        assert wrong.status_code >= 400 and "a gru model has no view 'attention'" in wrong.text
    finally:
        server.should_exit = True
