"""SLP chapter 6 (neural networks) worked examples, reproduced to the digits the book prints.

Where seqlab has the piece (the FFN LM's activations, the FFN LM itself, the loss) the test uses it;
the rest is plain torch, the point being the book's numbers.
"""

from __future__ import annotations

import math

import pytest
import torch

from seqlab.families.lm.model import LMConfig
from seqlab.families.lm.task import token_loss
from seqlab.models.ffn_lm import ACTIVATIONS, FeedforwardLM

XOR_INPUTS = [(0, 0), (0, 1), (1, 0), (1, 1)]
XOR_HIDDEN = {(0, 0): [0.0, 0.0], (0, 1): [1.0, 0.0], (1, 0): [1.0, 0.0], (1, 1): [2.0, 1.0]}
W = torch.tensor([[1.0, 1.0], [1.0, 1.0]])      # Fig. 6.6: hidden weights
b = torch.tensor([0.0, -1.0])                   # hidden biases
U = torch.tensor([[1.0, -2.0]])                 # output weights, output bias 0


def test_chapter6_sigmoid_unit():
    """Sec. 6.1: w = [0.2, 0.3, 0.9], b = 0.5, x = [0.5, 0.6, 0.1] -> z = .87, y = sigma(z) = .70."""
    w = torch.tensor([0.2, 0.3, 0.9], dtype=torch.float64)
    x = torch.tensor([0.5, 0.6, 0.1], dtype=torch.float64)
    z = torch.dot(w, x) + 0.5
    y = ACTIVATIONS["sigmoid"](z).item()
    assert round(z.item(), 2) == 0.87
    assert round(y, 2) == 0.70
    assert y == pytest.approx(1 / (1 + math.exp(-0.87)), abs=1e-12)


def test_chapter6_softmax_of_eq_6_11():
    """softmax([0.6, 1.1, -1.5, 1.2, 3.2, -1.1]) = [0.055, 0.090, 0.0067, 0.10, 0.74, 0.010]."""
    z = torch.tensor([0.6, 1.1, -1.5, 1.2, 3.2, -1.1], dtype=torch.float64)
    printed = [("0.055", 3), ("0.090", 3), ("0.0067", 4), ("0.10", 2), ("0.74", 2), ("0.010", 3)]
    p = torch.softmax(z, dim=0)
    assert p.sum().item() == pytest.approx(1.0, abs=1e-12)
    for value, (text, decimals) in zip(p.tolist(), printed, strict=True):
        assert round(value, decimals) == float(text), (value, text)
    # seqlab's loss is the cross-entropy of this softmax: -log p(target) for each (non-PAD) target
    targets = torch.arange(1, 6)
    logits = z.expand(1, 5, 6)                                             # (B=1, T=5, V=6)
    loss_sum, count = token_loss(logits, targets[None])
    assert int(count) == 5
    assert loss_sum.item() == pytest.approx(-torch.log(p[1:]).sum().item(), abs=1e-12)


def test_chapter6_xor_network_of_fig_6_6():
    """ReLU units, W = [[1, 1], [1, 1]], b = [0, -1], U = [1, -2]: XOR, with the book's hidden h."""
    relu = ACTIVATIONS["relu"]
    for x1, x2 in XOR_INPUTS:
        x = torch.tensor([float(x1), float(x2)])
        h = relu(W @ x + b)
        assert h.tolist() == XOR_HIDDEN[(x1, x2)]
        y = relu(U @ h)
        assert y.item() == float(x1 ^ x2)
    # the hidden layer makes XOR linearly separable: [0,1] and [1,0] merge into one point
    hidden = {tuple(XOR_HIDDEN[x]) for x in XOR_INPUTS}
    assert hidden == {(0.0, 0.0), (1.0, 0.0), (2.0, 1.0)}


def test_chapter6_xor_network_runs_as_seqlab_window_lm():
    """The FFN LM with Fig. 6.6's weights: window of 2 one-dimensional embeddings E[0] = 0, E[1] = 1.

    The state is the previous token x1 and the input the current token x2, so e = [x1; x2] (eq. 6.24)
    and the first logit is U ReLU(W e + b): XOR of the two tokens.
    """
    model = FeedforwardLM(LMConfig(arch="ffn", vocab_size=2, embedding_size=1, hidden_size=2, context=2,
                                   activation="relu", dropout=0.0)).eval()
    hidden = []                                                            # h = ReLU(W e + b), per call
    model.hidden.register_forward_hook(lambda module, inputs, z: hidden.append(ACTIVATIONS["relu"](z)))
    with torch.no_grad():
        model.embedding.weight.copy_(torch.tensor([[0.0], [1.0]]))
        model.hidden.weight.copy_(W)
        model.hidden.bias.copy_(b)
        model.output.decoder.weight.copy_(torch.cat([U, torch.zeros(1, 2)]))
        model.output.decoder.bias.zero_()
        for x1, x2 in XOR_INPUTS:
            logits, state = model(torch.tensor([[x2]]), torch.tensor([[x1]]))
            assert hidden[-1][0, 0].tolist() == XOR_HIDDEN[(x1, x2)]
            assert logits[0, 0, 0].item() == float(x1 ^ x2)
            assert state.tolist() == [[x2]]                                # the next window's history


def test_chapter6_computation_graph_backward_fig_6_17():
    """L = c(a + 2b) at a = 3, b = 1, c = -2: L = -10; dL/da = -2, dL/db = -4, dL/dc = 5."""
    a = torch.tensor(3.0, requires_grad=True)
    b_ = torch.tensor(1.0, requires_grad=True)
    c = torch.tensor(-2.0, requires_grad=True)
    d = 2 * b_
    e = a + d
    L = c * e
    assert (d.item(), e.item(), L.item()) == (2.0, 5.0, -10.0)
    L.backward()
    assert (a.grad.item(), b_.grad.item(), c.grad.item()) == (-2.0, -4.0, 5.0)
