"""`seqlab.compare.inside`: the gate and attention pictures of a trained LM. Tiny LSTM, GRU, Elman, transformer
and FFN LMs trained a few steps on the Shakespeare fixtures; the recorded gates are probabilities of shape
(tokens, hidden) that reproduce the model's own (fused) hidden states and logits, the attention rows are causal
distributions equal to the fused attention's output, every picture is a valid PNG, and the FFN draws none."""

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import seqlab
from seqlab.cli.main import main
from seqlab.compare.inside import (
    MAX_TOKENS,
    attention_weights,
    entropy,
    pictures,
    recurrent_gates,
    sample_ids,
    token_labels,
)
from seqlab.errors import SeqlabError
from seqlab.nn.cells import Weights, gru_cell, lstm_cell, run_cell

FIXTURES = Path(__file__).parent / "fixtures"
TEXT = "To be, or not to be: that is the question."
PNG = b"\x89PNG\r\n\x1a\n"
HIDDEN = 12


@pytest.fixture(scope="module")
def lms(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inside-runs")
    loaded = {}
    for arch in ("lstm", "gru", "rnn", "transformer", "ffn"):
        sizes = {"transformer": ["--heads", "2", "--context", "24", "--layers", "2"],
                 "ffn": ["--hidden-size", str(HIDDEN)]}.get(arch, ["--hidden-size", str(HIDDEN), "--layers", "2"])
        assert main(["train", "lm", "--train", str(FIXTURES / "shakespeare_train.txt"),
                     "--valid", str(FIXTURES / "shakespeare_valid.txt"), "--arch", arch, "--embedding-size", "8",
                     *sizes, "--max-steps", "2", "--batch-size", "4", "--seq-len", "8",
                     "--lr", "0.01", "--no-progress", "--dropout", "0", "--output", str(folder / arch)]) == 0
        loaded[arch] = seqlab.load(folder / arch)
    return loaded


def is_png(path: Path) -> bool:
    return path.exists() and path.read_bytes()[:8] == PNG


@pytest.mark.parametrize("arch, names", [("lstm", ["LSTM", "input) gate i", "forget gate f", "output gate o", "13.20"]),
                                         ("gru", ["GRU", "update gate z", "reset gate r", "9.10"]),
                                         ("rnn", ["Elman RNN", "hidden state h", "13.1"])])
def test_compare_inside_recurrent_pictures_one_png_per_layer(lms, tmp_path, arch, names):
    drawn = pictures(lms[arch], TEXT, tmp_path / "pictures")
    assert [path.name for _, path in drawn] == [f"{arch}-layer1.png", f"{arch}-layer2.png"]
    for layer, (title, path) in enumerate(drawn, start=1):
        assert is_png(path)
        assert f"layer {layer}:" in title and all(name in title for name in names)


def test_compare_inside_lstm_gates_reproduce_the_fused_model(lms):
    lm = lms["lstm"]
    ids = sample_ids(lm, TEXT)
    layers = recurrent_gates(lm, ids, check=False)
    T = len(ids)
    assert len(layers) == 2
    for found in layers:
        assert set(found) == {"i", "f", "o", "c", "h"}
        for name in ("i", "f", "o", "c", "h"):
            assert found[name].shape == (T, HIDDEN)
        for gate in ("i", "f", "o"):
            assert 0 <= found[gate].min() and found[gate].max() <= 1
        torch.testing.assert_close(found["o"] * torch.tanh(found["c"]), found["h"], atol=1e-6, rtol=0)  # 13.27
    model = lm.model
    with torch.no_grad():
        x = model.embedding(torch.tensor([ids]))                              # (1, T, E)
        below, _ = model.rnn.layers[0](x)                                     # the fused kernel, layer 1
        top, _ = model.rnn(x)                                                 # the fused stack: layer 2's output
        logits, _ = model(torch.tensor([ids]))                                # (1, T, V)
    torch.testing.assert_close(layers[0]["h"], below[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(layers[1]["h"], top[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(model.output(layers[1]["h"][None]), logits, atol=1e-5, rtol=0)


def test_compare_inside_gru_gates_reproduce_the_fused_model(lms):
    lm = lms["gru"]
    ids = sample_ids(lm, TEXT)
    layers = recurrent_gates(lm, ids)
    for found in layers:
        assert set(found) == {"z", "r", "h"}
        for gate in ("z", "r"):
            assert found[gate].shape == (len(ids), HIDDEN)
            assert 0 <= found[gate].min() and found[gate].max() <= 1
    with torch.no_grad():
        top, _ = lm.model.rnn(lm.model.embedding(torch.tensor([ids])))        # (1, T, H), fused
    torch.testing.assert_close(layers[-1]["h"], top[0], atol=1e-5, rtol=0)
    # z in the book's sense (SLP 9.11): the share of the new candidate, 1 - PyTorch's z
    layer = lm.model.rnn.layers[0]
    with torch.no_grad():
        x = lm.model.embedding(torch.tensor([ids[:1]]))[0]                    # (1, E), the first token, h_0 = 0
        torch_z = torch.sigmoid(x @ layer.weight_ih_l0[HIDDEN:2 * HIDDEN].T + layer.bias_ih_l0[HIDDEN:2 * HIDDEN]
                                + layer.bias_hh_l0[HIDDEN:2 * HIDDEN])
    torch.testing.assert_close(layers[0]["z"][0], 1 - torch_z[0], atol=1e-6, rtol=0)


def test_compare_inside_elman_records_only_its_hidden_state(lms):
    lm = lms["rnn"]
    ids = sample_ids(lm, TEXT)
    layers = recurrent_gates(lm, ids)
    assert [set(found) for found in layers] == [{"h"}, {"h"}]
    with torch.no_grad():
        top, _ = lm.model.rnn(lm.model.embedding(torch.tensor([ids])))
    torch.testing.assert_close(layers[-1]["h"], top[0], atol=1e-5, rtol=0)


def test_compare_inside_attention_is_causal_and_equals_the_fused_attention(lms):
    lm = lms["transformer"]
    ids = sample_ids(lm, TEXT)
    T = len(ids)
    assert T == 24                                                            # capped at the context
    model = lm.model
    inputs = []
    hooks = [block.attention.register_forward_hook(lambda module, args, out: inputs.append(args[0]))
             for block in model.blocks]
    try:
        weights = attention_weights(lm, ids)                                  # checks the logits itself
    finally:
        for hook in hooks:
            hook.remove()
    assert len(weights) == 2
    for layer, w in enumerate(weights):
        assert w.shape == (2, T, T)
        torch.testing.assert_close(w.sum(-1), torch.ones(2, T), atol=1e-6, rtol=0)
        assert (w.triu(diagonal=1) == 0).all()                                # no query sees the future
        attention = model.blocks[layer].attention
        with torch.no_grad():
            q, k, v = attention.qkv(inputs[layer]).split(8, dim=-1)           # (1, T, D) each
            q, k, v = (t.view(1, T, 2, 4).transpose(1, 2) for t in (q, k, v))  # (1, nh, T, hs)
            fused = F.scaled_dot_product_attention(q, k, v, is_causal=True)   # (1, nh, T, hs)
        torch.testing.assert_close(w[None] @ v, fused, atol=1e-5, rtol=0)
    assert all(block.attention.impl == "sdpa" and block.attention.last_weights is None for block in model.blocks)
    assert not model.training


def test_compare_inside_attention_head_is_the_most_focused_or_the_one_asked(lms, tmp_path):
    lm = lms["transformer"]
    weights = attention_weights(lm, sample_ids(lm, TEXT))
    spread = entropy(weights[-1])                                             # (nh,) mean nats per row
    by_hand = sum(-sum(p * math.log(p) for p in row.tolist() if p > 0) for row in weights[-1][0]) / 24
    assert math.isclose(spread[0], by_hand, rel_tol=1e-5)
    best = int(spread.argmin()) + 1
    [(title, path)] = pictures(lm, TEXT, tmp_path)
    assert path.name == f"transformer-layer2-head{best}.png" and is_png(path)
    assert f"layer 2 of 2, head {best} of 2" in title and "lowest mean entropy" in title and "9.20" in title
    [(title, path)] = pictures(lm, TEXT, tmp_path, layer=1, head=2)
    assert path.name == "transformer-layer1-head2.png" and is_png(path) and "head 2 of 2 (chosen" in title
    for bad in ({"layer": 3}, {"head": 0}):
        with pytest.raises(SeqlabError, match="has (layers|heads) 1 to 2"):
            pictures(lm, TEXT, tmp_path, **bad)


def test_compare_inside_refuses_pictures_that_are_not_the_models(lms, monkeypatch):
    monkeypatch.setattr("seqlab.nn.inside.TOLERANCE", -1.0)                 # any difference at all is too much
    with pytest.raises(SeqlabError, match="textbook lstm cell differs from the fused layer 1"):
        recurrent_gates(lms["lstm"], sample_ids(lms["lstm"], TEXT))
    with pytest.raises(SeqlabError, match="textbook attention differs from the model's own"):
        attention_weights(lms["transformer"], sample_ids(lms["transformer"], TEXT))
    assert all(block.attention.impl == "sdpa" for block in lms["transformer"].model.blocks)   # restored


def test_compare_inside_book_gru_on_the_textbook_path(tmp_path):
    """--gru-reset before has no fused kernel: the gates are those of the model's own textbook stack."""
    assert main(["train", "lm", "--train", str(FIXTURES / "shakespeare_train.txt"), "--valid",
                 str(FIXTURES / "shakespeare_valid.txt"), "--arch", "gru", "--gru-reset", "before", "--rnn-impl",
                 "textbook", "--embedding-size", "8", "--hidden-size", "6", "--layers", "1", "--max-steps", "1",
                 "--batch-size", "2", "--seq-len", "4", "--no-progress", "--output", str(tmp_path / "run")]) == 0
    lm = seqlab.load(tmp_path / "run")
    ids = sample_ids(lm, TEXT, max_tokens=10)
    [found] = recurrent_gates(lm, ids)
    with torch.no_grad():
        own, _ = lm.model.rnn(lm.model.embedding(torch.tensor([ids])))
    torch.testing.assert_close(found["h"], own[0], atol=1e-6, rtol=0)
    [(title, path)] = pictures(lm, TEXT, tmp_path / "pictures")
    assert is_png(path) and "update gate z" in title


def test_compare_inside_ffn_draws_nothing(lms, tmp_path):
    assert pictures(lms["ffn"], TEXT, tmp_path / "none") == []
    assert not (tmp_path / "none").exists()


def test_compare_inside_sample_is_capped_and_labelled(lms):
    lm = lms["lstm"]
    ids = sample_ids(lm, TEXT * 3)
    assert len(ids) == MAX_TOKENS and ids[0] == lm.vocab.encode(["</s>"])[0]
    labels = token_labels(lm, ids)
    assert labels[:4] == ["</s>", "T", "o", "␣"]
    assert len(sample_ids(lm, TEXT, max_tokens=5)) == 5
    for text in ("", "  \n"):
        with pytest.raises(SeqlabError, match="empty"):
            pictures(lm, text, Path("unused"))


def test_compare_inside_cells_record_changes_nothing():
    torch.manual_seed(0)
    for cell, module, gates in (("lstm", torch.nn.LSTM(5, 4, batch_first=True), {"i", "f", "o", "c"}),
                                ("gru", torch.nn.GRU(5, 4, batch_first=True), {"r", "z"})):
        w = Weights(module.weight_ih_l0, module.weight_hh_l0, module.bias_ih_l0, module.bias_hh_l0)
        x, h0 = torch.randn(3, 6, 5), torch.zeros(3, 4)
        state = (h0, h0) if cell == "lstm" else h0
        record = []
        plain, _ = run_cell(cell, x, state, w)
        recorded, _ = run_cell(cell, x, state, w, record=record)
        assert torch.equal(plain, recorded) and len(record) == 6 and set(record[0]) == gates
    zeros = Weights(torch.zeros(16, 5), torch.zeros(16, 4), torch.zeros(16), torch.zeros(16))   # an LSTM, H = 4
    step = []
    h, c = lstm_cell(torch.randn(2, 16), (torch.zeros(2, 4), torch.zeros(2, 4)), zeros, record=step)
    torch.testing.assert_close(h, step[0]["o"] * torch.tanh(step[0]["c"]))                  # SLP 13.27
    torch.testing.assert_close(c, step[0]["c"])
    gru = Weights(torch.zeros(12, 5), torch.zeros(12, 4), torch.zeros(12), torch.zeros(12))   # a GRU, H = 4
    step = []
    h_prev = torch.randn(2, 4)
    h = gru_cell(torch.zeros(2, 12), h_prev, gru, record=step)
    torch.testing.assert_close(step[0]["z"], torch.full((2, 4), 0.5))                          # 1 - sigmoid(0)
    torch.testing.assert_close(h, 0.5 * h_prev)                                             # SLP 9.13, h~ = 0


@pytest.mark.slow
def test_compare_inside_draws_a_model_elsewhere_on_a_float32_cpu_copy(lms, tmp_path):
    """A model on a GPU or in another precision is drawn from a float32 copy on the CPU (here: float64)."""
    lm = lms["lstm"]
    ids = sample_ids(lm, TEXT)
    expected = recurrent_gates(lm, ids)
    lm.model.double()
    try:
        found = recurrent_gates(lm, ids)
        assert next(lm.model.parameters()).dtype == torch.float64                # the user's model untouched
        assert is_png(pictures(lm, TEXT, tmp_path)[0][1])
    finally:
        lm.model.float()
    for before, after in zip(expected, found, strict=True):
        for name in before:
            assert after[name].dtype == torch.float32
            torch.testing.assert_close(after[name], before[name], atol=1e-6, rtol=0)
