"""The language model's `explain` part (`seqlab.families.lm.explain`, `seqlab explore`'s views): tiny LSTM, GRU,
transformer and window LMs trained a few steps; each view's numbers are the model's own: the next-token
probabilities are `score`'s and sum to 1 over the vocabulary, the gates are the textbook cells' on the layers'
weights, the attention rows are causal distributions, the generation tree ends where `generate` (greedy, seeded
sampling) and the LM's beam search end; an ONNX export gives the same next-token view."""

from __future__ import annotations

import json
import math

import pytest
import torch

import seqlab
from conftest import FIXTURES, tiny_config
from seqlab.cli.main import main
from seqlab.contract.views import MAX_TOKENS
from seqlab.data.vocab import EOS
from seqlab.decoding.options import SamplingOptions
from seqlab.decoding.search import lm_beam_search
from seqlab.errors import SeqlabError
from seqlab.families.lm import explain as lm_explain
from seqlab.families.lm import views as lm_views
from seqlab.families.lm.completion import prompt_logprobs
from seqlab.families.lm.pipeline import train_lm
from seqlab.nn.cells import Weights, run_cell

TEXT = "To be, or not to be: that is the question."


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("explain-lm")
    found = {}
    for arch, tokenizer in (("lstm", "char"), ("gru", "word"), ("transformer", "char"), ("ffn", "char")):
        train_lm(tiny_config(folder / arch, arch=arch, tokenizer=tokenizer))
        found[arch] = folder / arch
    return found


@pytest.fixture(scope="module")
def lms(runs) -> dict:
    return {arch: seqlab.load(run) for arch, run in runs.items()}


@pytest.mark.parametrize("arch", ["lstm", "gru", "transformer", "ffn"])
def test_explain_lm_next_token_is_the_models_distribution(lms, arch):
    """Each position's probability is `score`'s (the transformer's text is longer than its context of 16: its
    windows), its rank and alternatives those of the model's whole softmax, which sums to 1."""
    lm = lms[arch]
    text = TEXT + "\nWhether 'tis nobler in the mind"
    view = lm.explain(text, views=["next-token"], top_k=3).view("next-token")
    scored = lm.score(text)[:-1]                       # the text's last line has no end: its </s> is not read
    expected = [lp for _, lp in scored]
    assert len(view.details) == len(expected) == len(view.tokens)
    for detail, logprob, value in zip(view.details, expected, view.values, strict=True):
        assert abs(detail["logprob"] - logprob) < 1e-5
        assert value == pytest.approx(-logprob / math.log(2), abs=1e-4)
    if arch != "transformer":                          # a prompt longer than the context is refused there
        assert max(abs(a - b) for a, b in zip(prompt_logprobs(lm, text)[1], expected, strict=True)) < 1e-5
    # the whole distribution, from the model's forward pass over the same ids
    stream = lm.encode(text)[:len(expected)]
    assert stream.tolist() == lm.vocab.encode([t for t, _ in scored])
    with torch.no_grad():
        distributions = torch.cat([lp for lp, _ in lm.distributions(stream)]).exp()       # (n, V)
    torch.testing.assert_close(distributions.sum(-1), torch.ones(len(expected)), atol=1e-5, rtol=0)
    for p, detail in enumerate(view.details):
        probs = distributions[p]
        actual = probs[stream[p]]
        assert detail["rank"] == int((probs > actual).sum()) + 1
        best = probs.topk(3)
        assert [q for _, q in detail["alternatives"]] == pytest.approx(best.values.tolist(), rel=1e-4)
        if detail["rank"] == 1:
            assert int(probs.argmax()) == stream[p]
            assert detail["alternatives"][0][0] == detail["token"]


def test_explain_lm_gates_are_the_textbook_cells_on_the_layers_weights(lms):
    lm = lms["lstm"]
    view = lm.explain(TEXT, views=["gates"], units=7).view("gates")
    model = lm.model
    ids = [EOS, *lm.vocab.encode(list(TEXT))]
    T = len(ids)
    groups = [p.group for p in view.panels]
    assert groups == ["layer 1 forward"] * 5 + ["layer 2 forward"] * 5
    assert "7 of 24 units" in view.note
    x = model.embedding(torch.tensor([ids]))                                   # (1, T, E)
    with torch.no_grad():
        fused, _ = model.rnn(x)                                               # (1, T, H): the fused stack
    for layer in range(2):
        h, i, f, o, c = view.panels[5 * layer:5 * layer + 5]
        assert ["hidden state h" in h.title, "gate i" in i.title, "gate f" in f.title, "gate o" in o.title,
                "context c" in c.title] == [True] * 5
        units = [int(row.split()[1]) for row in h.rows]
        assert len(units) == 7 and h.cols[0] == "</s>" and len(h.cols) == T
        rnn = model.rnn.layers[layer]
        w = Weights(rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0, rnn.bias_hh_l0)
        record: list = []
        zeros = torch.zeros(1, 24)
        with torch.no_grad():
            own, _ = run_cell("lstm", x, (zeros, zeros), w, record=record)    # (1, T, H)
        for panel, key in ((i, "i"), (f, "f"), (o, "o"), (c, "c")):
            expected = torch.stack([step[key][0] for step in record])[:, units].T    # (U, T)
            torch.testing.assert_close(torch.tensor(panel.values), expected, atol=1e-3, rtol=1e-3)
            if key != "c":
                assert panel.range == (0.0, 1.0)
        torch.testing.assert_close(torch.tensor(h.values), own[0][:, units].T, atol=1e-3, rtol=1e-3)
        x = own
    torch.testing.assert_close(x, fused, atol=1e-5, rtol=0)                   # layer 2's h is the model's


def test_explain_lm_gru_gates_and_attention_views_by_arch(lms):
    gru = lms["gru"].explain(TEXT, views=["gates"]).view("gates")
    assert [p.title.split(": ")[1].split(" (")[0] for p in gru.panels[:3]] == \
        ["hidden state h", "update gate z", "reset gate r"]
    assert gru.note == "" and all(len(p.rows) == 24 for p in gru.panels)    # every unit
    assert [v.name for v in lms["ffn"].explain(TEXT).views] == ["next-token", "generation"]
    assert [v.name for v in lms["transformer"].explain(TEXT).views] == ["next-token", "generation", "attention"]


def test_explain_lm_attention_rows_are_causal_distributions(lms):
    lm = lms["transformer"]
    view = lm.explain(TEXT, views=["attention"]).view("attention")
    assert view.lines and "first 16 tokens" in view.note
    assert [p.group for p in view.panels] == ["layer 1", "layer 1", "layer 2", "layer 2"]
    for panel in view.panels:
        weights = torch.tensor(panel.values)                                  # (T, T)
        assert weights.shape == (16, 16) and panel.rows == panel.cols and panel.rows[0] == "</s>"
        torch.testing.assert_close(weights.sum(-1), torch.ones(16), atol=1e-3, rtol=0)
        assert (weights.triu(diagonal=1) == 0).all()
    assert all(block.attention.impl == "sdpa" and block.attention.last_weights is None for block in lm.model.blocks)


@pytest.mark.parametrize("arch", ["lstm", "transformer"])
def test_explain_lm_greedy_generation_is_generates(lms, runs, arch, capsys):
    lm = lms[arch]
    prompt = "ROMEO: my"
    view = lm.explain(prompt, views=["generation"], max_tokens=10, top_k=4).view("generation")
    (done,) = view.finished
    assert done["text"] == lm.generate(prompt, max_tokens=10, greedy=True, stop_at_eos=True)
    capsys.readouterr()
    assert main(["generate", str(runs[arch]), "--prompt", prompt, "--max-tokens", "10", "--greedy",
                 "--stop-at-eos"]) == 0
    assert capsys.readouterr().out == prompt + done["text"] + "\n"             # `seqlab generate`'s line
    kept = [n for n in view.nodes if n["status"] in ("kept", "ended")]
    assert "".join(n["token"] for n in kept).replace("␣", " ").replace("</s>", "") == done["text"]
    for step, node in enumerate(kept):                                        # the argmax of its step
        others = [n for n in view.nodes if n["step"] == step and n["status"] == "dropped"]
        assert len(others) == 3 and all(n["score"] <= node["score"] for n in others)
        assert node["parent"] == (kept[step - 1]["id"] if step else None)


def test_explain_lm_sampling_is_seeded_as_generate_samples(lms):
    lm = lms["lstm"]
    options = {"strategy": "sample", "temperature": 0.7, "top_k": 8, "top_p": 0.9, "seed": 11, "max_tokens": 20}
    first = lm.explain("ROMEO:", views=["generation"], **options).view("generation")
    again = lm.explain("ROMEO:", views=["generation"], **options).view("generation")
    assert first.nodes == again.nodes
    expected = lm.generate("ROMEO:", max_tokens=20, temperature=0.7, top_k=8, top_p=0.9, seed=11, stop_at_eos=True)
    assert first.finished[0]["text"] == expected
    for step in range(len(first.finished[0]["tokens"])):
        shown = [n["score"] for n in first.nodes if n["step"] == step]
        assert len(shown) <= 8 and sum(shown) <= 1 + 1e-4                     # after top-k and top-p


def test_explain_lm_beam_tree_ends_as_the_lms_beam_search(lms):
    lm = lms["lstm"]
    view = lm.explain("ROMEO:", views=["generation"], strategy="beam", beam=3, max_tokens=8,
                      length_penalty=0.6).view("generation")
    context = lm.prompt_ids("ROMEO:")
    best = lm_beam_search(lm.model, context, SamplingOptions(beam=3, max_tokens=8, length_penalty=0.6,
                                                             stop_at_eos=True), nbest=3)
    assert [f["rank"] for f in view.finished] == list(range(1, len(view.finished) + 1))
    for found, hypothesis in zip(view.finished, best, strict=False):
        assert found["normalized"] == pytest.approx(hypothesis.normalized, abs=1e-6)
        assert found["tokens"] == lm_views.spell(lm, hypothesis.tokens + ([EOS] if hypothesis.finished else []))
    assert view.finished[0]["text"] == lm.generate("ROMEO:", beam=3, max_tokens=8, length_penalty=0.6,
                                                   stop_at_eos=True)
    statuses = {n["status"] for n in view.nodes}
    assert {"kept", "dropped"} <= statuses
    ids = {n["id"] for n in view.nodes}
    assert all(n["parent"] is None or n["parent"] in ids for n in view.nodes)
    assert all(f["node"] in ids for f in view.finished)


@pytest.mark.parametrize("text, views, options, message", [
    ("  \n", None, {}, "the text to explain is empty"),
    (TEXT, ["attention"], {}, "a lstm model has no view 'attention': choose from next-token, generation, gates"),
    (TEXT, None, {"top_k": 0}, "top_k must be between 1 and 50, not 0"),
    (TEXT, None, {"max_tokens": 65}, "max_tokens must be between 1 and 64, not 65"),
    (TEXT, None, {"strategy": "nucleus"}, "strategy must be greedy, sample or beam, not 'nucleus'"),
    (TEXT, None, {"colour": 1}, "unknown explain option 'colour'"),
])
def test_explain_lm_bad_inputs_are_one_line_errors(lms, text, views, options, message):
    with pytest.raises(SeqlabError) as error:
        lms["lstm"].explain(text, views=views, **options)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_explain_lm_long_text_is_cut_and_unknown_words_noted(lms):
    lm = lms["gru"]                                                           # a word model of the fixture's words
    long = " ".join(["the king"] * (MAX_TOKENS))
    found = lm.explain(long + " zyzzyva", views=["next-token"])
    assert found.truncated and len(found.tokens) == MAX_TOKENS
    assert f"first {MAX_TOKENS} tokens" in found.view("next-token").note
    noted = lm.explain("the zyzzyva king", views=["next-token"]).view("next-token")
    assert noted.tokens[1] == "<unk>" and "read as <unk>" in noted.note


def test_explain_lm_load_explain_is_json_and_examples_are_the_dev_lines(lms, runs):
    found = seqlab.load(runs["lstm"]).explain(TEXT)
    payload = json.loads(json.dumps(found.to_json()))
    assert payload["family"] == "lm" and payload["arch"] == "lstm" and payload["model"] == "lstm"
    assert [v["name"] for v in payload["views"]] == ["next-token", "generation", "gates"]
    lines = [line.strip() for line in (FIXTURES / "shakespeare_valid.txt").read_text().splitlines() if line.strip()]
    assert lm_explain.examples(lms["lstm"], 4) == lines[:4]
    assert lm_explain.examples(lms["lstm"], 0) == []


def test_explain_lm_export_gives_the_same_next_tokens_and_generation(lms, runs, tmp_path):
    pytest.importorskip("onnxruntime", reason="an export's explanation needs onnxruntime")
    pytest.importorskip("onnx", reason="seqlab export needs onnx")
    from seqlab.export.onnx import export_onnx
    from seqlab.export.runtime import load_export

    for arch in ("lstm", "transformer"):
        exported = load_export(export_onnx(runs[arch], tmp_path / arch).parent)
        text = TEXT + "\nWhether 'tis nobler"
        mine = exported.explain(text, top_k=4)
        theirs = lms[arch].explain(text, views=["next-token", "generation"], top_k=4)
        assert [v.name for v in mine.views] == ["next-token", "generation"] and mine.tokens == theirs.tokens
        a, b = mine.view("next-token"), theirs.view("next-token")
        assert max(abs(x["logprob"] - y["logprob"]) for x, y in zip(a.details, b.details, strict=True)) < 1e-4
        assert [x["rank"] for x in a.details] == [y["rank"] for y in b.details]
        assert mine.view("generation").finished[0]["text"] == theirs.view("generation").finished[0]["text"]
        beam = {"views": ["generation"], "strategy": "beam", "beam": 3, "max_tokens": 6}
        assert exported.explain("ROMEO:", **beam).view("generation").finished[0]["tokens"] == \
            lms[arch].explain("ROMEO:", **beam).view("generation").finished[0]["tokens"]
        with pytest.raises(SeqlabError, match="an export of a .* model has no view 'gates'"):
            exported.explain(text, views=["gates"])
