"""The textbook cells (SLP 9.2, 9.3.2, 13.5) compute what PyTorch's fused kernels compute.

One `RecurrentStack` holds the parameters; `set_impl` switches between the fused kernel and the
cells of `seqlab.nn.cells`, so forward values, final states and every gradient must agree. The
book's GRU (reset gate before U, eq. 9.12 as printed) has no fused kernel; it is checked against a
reference written here from the printed equations.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from seqlab.errors import SeqlabError
from seqlab.nn.cells import Weights, elman_cell, gru_cell, lstm_cell
from seqlab.nn.recurrent import RecurrentStack

B, T, I, H = 3, 5, 6, 7
CELL_CASES = [("rnn", "tanh"), ("rnn", "relu"), ("lstm", "tanh"), ("gru", "tanh")]


def random_state(cell: str, layers: int, generator: torch.Generator):
    """A non-zero initial state in PyTorch's layout, (L*dirs, B, H), or (h, c) for the LSTM."""
    h = torch.randn(layers, B, H, dtype=torch.float64, generator=generator)
    if cell == "lstm":
        return (h, torch.randn(layers, B, H, dtype=torch.float64, generator=generator))
    return h


def run_with_grads(stack: RecurrentStack, x: torch.Tensor, state, impl: str):
    """Outputs, final states and the gradients of a fixed random function of all of them."""
    stack.set_impl(impl)
    stack.zero_grad()
    x = x.clone().requires_grad_(True)
    output, final = stack(x, state)
    finals = final if isinstance(final, tuple) else (final,)
    g = torch.Generator().manual_seed(99)                     # the same projection for both impls
    loss = (output * torch.randn(output.shape, dtype=torch.float64, generator=g)).sum()
    for f in finals:
        loss = loss + (f * torch.randn(f.shape, dtype=torch.float64, generator=g)).sum()
    loss.backward()
    grads = {name: p.grad.clone() for name, p in stack.named_parameters()}
    grads["input"] = x.grad.clone()
    return output.detach(), tuple(f.detach() for f in finals), grads


@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize(("cell", "nonlinearity"), CELL_CASES, ids=["rnn-tanh", "rnn-relu", "lstm", "gru"])
def test_cells_textbook_equals_fused_values_states_and_gradients(cell, nonlinearity, bidirectional):
    torch.manual_seed(0)
    stack = RecurrentStack(cell, I, H, num_layers=2, impl="fused", nonlinearity=nonlinearity,
                           bidirectional=bidirectional).double()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(B, T, I, dtype=torch.float64, generator=g)
    state = random_state(cell, 2 * stack.directions, g)

    fused = run_with_grads(stack, x, state, "fused")
    textbook = run_with_grads(stack, x, state, "textbook")

    assert fused[0].shape == (B, T, stack.directions * H)
    torch.testing.assert_close(textbook[0], fused[0], rtol=0, atol=1e-5)
    assert len(textbook[1]) == len(fused[1]) == (2 if cell == "lstm" else 1)
    for mine, theirs in zip(textbook[1], fused[1], strict=True):
        assert mine.shape == (2 * stack.directions, B, H)
        torch.testing.assert_close(mine, theirs, rtol=0, atol=1e-5)
    assert set(textbook[2]) == set(fused[2])
    assert len(fused[2]) == 1 + 2 * 4 * stack.directions        # input + 4 tensors per layer and direction
    for name in fused[2]:
        assert fused[2][name].abs().sum() > 0, name               # every gradient is exercised
        torch.testing.assert_close(textbook[2][name], fused[2][name], rtol=0, atol=1e-5, msg=name)


def test_cells_textbook_agrees_with_fused_at_double_precision():
    """The paths differ only by rounding: far below the 1e-5 the tests above allow."""
    torch.manual_seed(0)
    stack = RecurrentStack("lstm", I, H, num_layers=2, bidirectional=True).double()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(B, T, I, dtype=torch.float64, generator=g)
    state = random_state("lstm", 4, g)
    fused = run_with_grads(stack, x, state, "fused")
    textbook = run_with_grads(stack, x, state, "textbook")
    assert (textbook[0] - fused[0]).abs().max() < 1e-10
    assert max((textbook[2][n] - fused[2][n]).abs().max() for n in fused[2]) < 1e-10


def test_cells_gru_reset_before_refused_by_fused():
    with pytest.raises(SeqlabError, match="textbook"):
        RecurrentStack("gru", I, H, impl="fused", gru_reset="before")
    stack = RecurrentStack("gru", I, H, impl="textbook", gru_reset="before")
    with pytest.raises(SeqlabError, match="textbook"):
        stack.set_impl("fused")
    assert stack.impl == "textbook"


def book_gru_layer(x, h, W_ih, W_hh, b_ih, b_hh):
    """SLP eqs. 9.10-9.13 exactly as printed, one direction of one layer: x (B, T, I), h (B, H).

        r = sigma(U_r h + W_r x)             z = sigma(U_z h + W_z x)     (book's z)
        h~ = tanh(U_h (r * h) + W_h x)       h_t = (1 - z) h_{t-1} + z h~

    with both biases kept. PyTorch stores the gates as (r, z, n) and its z is the share *kept*
    from h_{t-1}, so the book's z is 1 - sigma(PyTorch's z pre-activation).
    """
    W_r, W_z, W_h = W_ih.chunk(3)
    U_r, U_z, U_h = W_hh.chunk(3)
    bW_r, bW_z, bW_h = b_ih.chunk(3)
    bU_r, bU_z, bU_h = b_hh.chunk(3)
    outputs = []
    for t in range(x.size(1)):
        x_t = x[:, t]
        r = torch.sigmoid(h @ U_r.T + bU_r + x_t @ W_r.T + bW_r)
        z_book = 1 - torch.sigmoid(h @ U_z.T + bU_z + x_t @ W_z.T + bW_z)
        h_tilde = torch.tanh((r * h) @ U_h.T + bU_h + x_t @ W_h.T + bW_h)
        h = (1 - z_book) * h + z_book * h_tilde
        outputs.append(h)
    return torch.stack(outputs, dim=1)


@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
def test_cells_gru_reset_before_matches_book_equations(bidirectional):
    torch.manual_seed(0)
    stack = RecurrentStack("gru", I, H, num_layers=2, impl="textbook", gru_reset="before",
                           bidirectional=bidirectional).double()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(B, T, I, dtype=torch.float64, generator=g)
    dirs = stack.directions
    h0 = torch.randn(2 * dirs, B, H, dtype=torch.float64, generator=g)
    with torch.no_grad():
        output, final = stack(x, h0)

        layer_input, finals = x, []
        for l, layer in enumerate(stack.layers):
            outs = []
            for d, suffix in enumerate(["_l0", "_l0_reverse"][:dirs]):
                params = [getattr(layer, name + suffix) for name in
                          ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
                seq = layer_input.flip(1) if d == 1 else layer_input
                out = book_gru_layer(seq, h0[l * dirs + d], *params)
                out = out.flip(1) if d == 1 else out
                finals.append(out[:, 0] if d == 1 else out[:, -1])
                outs.append(out)
            layer_input = torch.cat(outs, dim=-1)

    torch.testing.assert_close(output, layer_input, rtol=0, atol=1e-12)
    torch.testing.assert_close(final, torch.stack(finals), rtol=0, atol=1e-12)


def test_cells_gru_reset_before_differs_from_after():
    torch.manual_seed(0)
    stack = RecurrentStack("gru", I, H, num_layers=2, impl="textbook", gru_reset="before").double()
    x = torch.randn(B, T, I, dtype=torch.float64)
    h0 = torch.randn(2, B, H, dtype=torch.float64)
    with torch.no_grad():
        before, _ = stack(x, h0)
        stack.gru_reset = "after"
        after, _ = stack(x, h0)
        stack.set_impl("fused")
        fused, _ = stack(x, h0)
    assert (before - after).abs().max() > 1e-3
    torch.testing.assert_close(after, fused, rtol=0, atol=1e-10)


def cell_weights(cell: nn.Module) -> Weights:
    return Weights(cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)


def test_cells_gru_cell_step_equals_torch_gru_cell():
    torch.manual_seed(0)
    reference = nn.GRUCell(I, H).double()
    x, h = torch.randn(B, I, dtype=torch.float64), torch.randn(B, H, dtype=torch.float64)
    w = cell_weights(reference)
    with torch.no_grad():
        mine = gru_cell(x @ w.W.T + w.b_W, h, w, reset="after")
        torch.testing.assert_close(mine, reference(x, h), rtol=0, atol=1e-12)


def test_cells_gru_book_z_is_share_of_new_candidate():
    """h_t = (1 - z) h_{t-1} + z h~ with z_book = 1 - sigma(PyTorch's z pre-activation).

    Driving PyTorch's z gate to 1 (bias +50) makes z_book = 0: the state is kept unchanged.
    Driving it to 0 makes z_book = 1: the state is the candidate h~ alone.
    """
    torch.manual_seed(0)
    reference = nn.GRUCell(I, H).double()
    x, h = torch.randn(B, I, dtype=torch.float64), torch.randn(B, H, dtype=torch.float64)
    w = cell_weights(reference)
    with torch.no_grad():
        for reset in ("after", "before"):
            b_U = w.b_U.clone()
            b_U[H:2 * H] = 50.0
            kept = gru_cell(x @ w.W.T + w.b_W, h, w._replace(b_U=b_U), reset=reset)
            torch.testing.assert_close(kept, h, rtol=0, atol=1e-12)

            b_U[H:2 * H] = -50.0
            replaced = gru_cell(x @ w.W.T + w.b_W, h, w._replace(b_U=b_U), reset=reset)
            U_r, _, U_h = w.U.chunk(3)
            W_r, _, W_h = w.W.chunk(3)
            r = torch.sigmoid(h @ U_r.T + b_U[:H] + x @ W_r.T + w.b_W[:H])
            if reset == "before":
                h_tilde = torch.tanh((r * h) @ U_h.T + b_U[2 * H:] + x @ W_h.T + w.b_W[2 * H:])
            else:
                h_tilde = torch.tanh(r * (h @ U_h.T + b_U[2 * H:]) + x @ W_h.T + w.b_W[2 * H:])
            torch.testing.assert_close(replaced, h_tilde, rtol=0, atol=1e-12)
            assert (replaced - h).abs().max() > 1e-2


def test_cells_lstm_cell_step_equals_torch_lstm_cell():
    torch.manual_seed(0)
    reference = nn.LSTMCell(I, H).double()
    x = torch.randn(B, I, dtype=torch.float64)
    h, c = torch.randn(B, H, dtype=torch.float64), torch.randn(B, H, dtype=torch.float64)
    w = cell_weights(reference)
    with torch.no_grad():
        h_mine, c_mine = lstm_cell(x @ w.W.T + w.b_W, (h, c), w)
        h_ref, c_ref = reference(x, (h, c))
    torch.testing.assert_close(h_mine, h_ref, rtol=0, atol=1e-12)
    torch.testing.assert_close(c_mine, c_ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_cells_elman_cell_step_equals_torch_rnn_cell(nonlinearity):
    torch.manual_seed(0)
    reference = nn.RNNCell(I, H, nonlinearity=nonlinearity).double()
    x, h = torch.randn(B, I, dtype=torch.float64), torch.randn(B, H, dtype=torch.float64)
    w = cell_weights(reference)
    with torch.no_grad():
        mine = elman_cell(x @ w.W.T + w.b_W, h, w, nonlinearity)
        expected = reference(x, h)
    torch.testing.assert_close(mine, expected, rtol=0, atol=1e-12)
    if nonlinearity == "relu":
        assert (expected == 0).any() and (expected > 0).any()   # both sides of the ReLU are exercised


def flat_state(state):
    return torch.cat([s.flatten() for s in state]) if isinstance(state, tuple) else state.flatten()


@pytest.mark.parametrize("cell", ["rnn", "lstm", "gru"])
@pytest.mark.parametrize("impl", ["fused", "textbook"])
def test_cells_padded_batch_equals_each_sequence_alone(cell, impl):
    torch.manual_seed(0)
    stack = RecurrentStack(cell, 4, 6, num_layers=2, bidirectional=True, impl=impl).double()
    lengths = torch.tensor([5, 3, 1])
    x = torch.randn(3, 5, 4, dtype=torch.float64)
    outputs, state = stack(x, lengths=lengths)                            # (B, T, 2H)
    for b, length in enumerate(lengths.tolist()):
        alone, alone_state = stack(x[b:b + 1, :length])
        torch.testing.assert_close(outputs[b:b + 1, :length], alone, rtol=0, atol=1e-12)
        assert outputs[b, length:].eq(0).all()
        mine = tuple(s[:, b:b + 1] for s in state) if isinstance(state, tuple) else state[:, b:b + 1]
        torch.testing.assert_close(flat_state(mine), flat_state(alone_state), rtol=0, atol=1e-12)


@pytest.mark.parametrize("cell", ["rnn", "lstm", "gru"])
def test_cells_textbook_equals_fused_on_padded_batches(cell):
    torch.manual_seed(1)
    stack = RecurrentStack(cell, 4, 6, num_layers=2, bidirectional=True).double()
    lengths = torch.tensor([2, 5, 4])
    x = torch.randn(3, 5, 4, dtype=torch.float64, requires_grad=True)
    fused, fused_state = stack(x, lengths=lengths)
    (grad_fused,) = torch.autograd.grad(fused.sum(), x)
    stack.set_impl("textbook")
    textbook, textbook_state = stack(x, lengths=lengths)
    (grad_textbook,) = torch.autograd.grad(textbook.sum(), x)
    torch.testing.assert_close(textbook, fused, rtol=0, atol=1e-10)
    torch.testing.assert_close(flat_state(textbook_state), flat_state(fused_state), rtol=0, atol=1e-10)
    torch.testing.assert_close(grad_textbook, grad_fused, rtol=0, atol=1e-10)


@pytest.mark.parametrize(("cell", "nonlinearity"), CELL_CASES, ids=["rnn-tanh", "rnn-relu", "lstm", "gru"])
def test_cells_stack_step_equals_forward_of_one_position(cell, nonlinearity):
    """`RecurrentStack.step` (torch's single-step cells, what generation runs) gives `forward`'s output and
    state for a one-token sequence, step after step; where it does not use the cells (training, the
    textbook impl, a bidirectional stack) it is `forward` itself."""
    torch.manual_seed(0)
    stack = RecurrentStack(cell, I, H, num_layers=2, nonlinearity=nonlinearity).eval()
    xs = torch.randn(B, T, I)
    stepped_state = forward_state = random_state(cell, 2, torch.Generator().manual_seed(1))
    if cell == "lstm":
        stepped_state = forward_state = tuple(s.float() for s in stepped_state)
    else:
        stepped_state = forward_state = stepped_state.float()
    with torch.no_grad():
        for t in range(T):
            out, stepped_state = stack.step(xs[:, t], stepped_state)                       # (B, H)
            expected, forward_state = stack(xs[:, t:t + 1], forward_state)                 # (B, 1, H)
            torch.testing.assert_close(out, expected[:, 0], rtol=1e-5, atol=1e-6)
            for got, want in zip(stepped_state if cell == "lstm" else (stepped_state,),
                                 forward_state if cell == "lstm" else (forward_state,), strict=True):
                torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        assert stack.step(xs[:, 0])[0].shape == (B, H)                                     # no state: zeros
        for other in (RecurrentStack(cell, I, H, 2, nonlinearity=nonlinearity, impl="textbook").eval(),
                      RecurrentStack(cell, I, H, 2, nonlinearity=nonlinearity, bidirectional=True).eval(),
                      RecurrentStack(cell, I, H, 2, nonlinearity=nonlinearity).train()):
            torch.manual_seed(2)
            out, _ = other.step(xs[:, 0])
            torch.manual_seed(2)
            assert torch.equal(out, other(xs[:, :1])[0][:, 0])
