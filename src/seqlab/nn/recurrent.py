"""Stacked (and bidirectional) recurrent layers, run on PyTorch's fused kernels or the textbook cells.

Each layer is one single-layer `nn.RNN` / `nn.LSTM` / `nn.GRU`, so both paths share the same
parameters and a checkpoint runs either way: `impl="fused"` calls the kernel (oneDNN on CPU, cuDNN
on GPU), `impl="textbook"` unrolls `seqlab.nn.cells` over time. Keeping one module per layer (not one
multi-layer module) lets us apply our own dropout between layers, including variational dropout
(one mask for every time step of a sequence, Gal & Ghahramani 2016), at no measurable cost in speed.

Dropout applies between layers only; the model applies it to the embeddings and the top layer's
output. Dropout on the recurrent connection h_{t-1} -> h_t is not offered: the fused kernels
cannot apply it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from seqlab.decoding import core
from seqlab.decoding.search import work_threads
from seqlab.errors import SeqlabError
from seqlab.nn.cells import Weights, run_cell

CELLS = {"rnn": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}
IMPLS = ("fused", "textbook")


def dropout(x: Tensor, p: float, training: bool, variational: bool = False) -> Tensor:
    """Standard dropout, or with variational=True the same mask at every time step. x (B, T, D)."""
    if not training or p == 0:
        return x
    if not variational:
        return F.dropout(x, p, training=True)
    mask = x.new_empty(x.size(0), 1, x.size(2)).bernoulli_(1 - p) / (1 - p)   # (B, 1, D)
    return x * mask


class RecurrentStack(nn.Module):
    """L layers of one cell type: x (B, T, I) -> outputs (B, T, dirs*H), final state.

    The state is h (L*dirs, B, H), or (h, c) for the LSTM: the layout of PyTorch's modules.
    """

    def __init__(self, cell: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 dropout: float = 0.0, variational: bool = False, bidirectional: bool = False,
                 impl: str = "fused", nonlinearity: str = "tanh", gru_reset: str = "after"):
        super().__init__()
        if cell not in CELLS:
            raise SeqlabError(f"unknown recurrent cell {cell!r}: choose one of {', '.join(CELLS)}")
        if nonlinearity not in ("tanh", "relu"):
            raise SeqlabError(f"unknown Elman nonlinearity {nonlinearity!r}: choose tanh or relu")
        if gru_reset not in ("after", "before"):
            raise SeqlabError(f"unknown GRU reset variant {gru_reset!r}: choose after or before")
        self.cell, self.hidden_size, self.num_layers = cell, hidden_size, num_layers
        self.directions = 2 if bidirectional else 1
        self.dropout, self.variational = dropout, variational
        self.nonlinearity, self.gru_reset = nonlinearity, gru_reset
        extra = {"nonlinearity": nonlinearity} if cell == "rnn" else {}
        self.layers = nn.ModuleList(
            CELLS[cell](input_size if l == 0 else hidden_size * self.directions, hidden_size, 1,
                        batch_first=True, bidirectional=bidirectional, **extra)
            for l in range(num_layers))
        self.impl = impl
        self.set_impl(impl)

    def set_impl(self, impl: str) -> None:
        if impl not in IMPLS:
            raise SeqlabError(f"unknown recurrent implementation {impl!r}: choose fused or textbook")
        if impl == "fused" and self.cell == "gru" and self.gru_reset == "before":
            raise SeqlabError("the fused GRU kernel applies the reset gate after U (r * (U h + b)); "
                              "the book's variant (U (r * h)) needs --rnn-impl textbook")
        self.impl = impl

    def init_state(self, batch_size: int, device=None, dtype=None):
        h = torch.zeros(self.num_layers * self.directions, batch_size, self.hidden_size,
                        device=device, dtype=dtype)                       # (L*dirs, B, H)
        return (h, torch.zeros_like(h)) if self.cell == "lstm" else h

    def forward(self, x: Tensor, state=None, lengths: Tensor | None = None):
        """x (B, T, I); with `lengths` (B,) the rows are right-padded sequences, run as packed ones:
        padding never reaches a real position (in either direction), padded outputs are zero, and the
        final state is each sequence's own. On a server's inference thread a long input is read in windows
        of time steps (`windowed`)."""
        if state is None:
            state = self.init_state(x.size(0), x.device, x.dtype)
        if self.windows_needed(x, lengths):
            with work_threads():                                # a long read leaves the event loop its core
                return self.windowed(x, state, lengths)
        d = self.directions
        final = []
        for l, layer in enumerate(self.layers):
            if l > 0:
                x = dropout(x, self.dropout, self.training, self.variational)
            if self.cell == "lstm":
                layer_state = (state[0][l * d:(l + 1) * d], state[1][l * d:(l + 1) * d])
            else:
                layer_state = state[l * d:(l + 1) * d]
            if self.impl == "fused" and lengths is not None:
                packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
                packed, layer_state = layer(packed, layer_state)
                x, _ = pad_packed_sequence(packed, batch_first=True, total_length=x.size(1))  # (B, T, dirs*H)
            elif self.impl == "fused":
                x, layer_state = layer(x, layer_state)                   # (B, T, dirs*H)
            else:
                x, layer_state = self._textbook_layer(layer, x, layer_state, lengths)
            final.append(layer_state)
        if self.cell == "lstm":
            return x, (torch.cat([s[0] for s in final]), torch.cat([s[1] for s in final]))
        return x, torch.cat(final)                                        # (L*dirs, B, H)

    # ---- long inputs in windows, on a server's inference thread

    def windows_needed(self, x: Tensor, lengths: Tensor | None) -> bool:
        """Whether this pass is cut into windows: in evaluation, on the fused kernels, on a thread that slices
        its work (`core.slice_budget`: a server's inference thread), when the pass is more than one slice."""
        if self.training or self.impl != "fused" or torch.jit.is_tracing() or torch.onnx.is_in_onnx_export():
            return False
        budget = core.slice_budget((id(self), "read"))
        if budget is None:
            return False
        steps = int(lengths.sum()) if lengths is not None else x.size(0) * x.size(1)
        return steps * self.num_layers * self.directions > budget

    def windowed(self, x: Tensor, state, lengths: Tensor | None):
        """`forward` a window of time steps at a time (`core.slices`, a checkpoint between two), each direction
        of each layer in turn, the state carried from window to window: a window runs the rows still inside it,
        packed; the backward direction reads each row from its last real step back. The same states as the one
        pass within float rounding (exactly, without lengths)."""
        B, T, _ = x.shape
        lengths = torch.full((B,), T, dtype=torch.long) if lengths is None else lengths.cpu()
        h0 = state[0] if self.cell == "lstm" else state                    # (L*dirs, B, H)
        c0 = state[1] if self.cell == "lstm" else None
        finals_h, finals_c = [], []
        for l in range(self.num_layers):
            out = x.new_empty(B, T, self.directions * self.hidden_size)     # (B, T, dirs*H), filled window by
            for direction in range(self.directions):                         # window (zeros: all at once, 1.5 GB
                k = l * self.directions + direction                          # for 50 prompts of 20,000 tokens)
                h, c = self.read_direction(l, direction, x, lengths, out, h0[k], None if c0 is None else c0[k])
                finals_h.append(h)
                finals_c.append(c)
            for b in (lengths < T).nonzero()[:, 0].tolist():               # the padding: zeros
                out[b, int(lengths[b]):] = 0
            x = out
        if self.cell == "lstm":
            return x, (torch.stack(finals_h), torch.stack(finals_c))      # (L*dirs, B, H) each
        return x, torch.stack(finals_h)

    def read_direction(self, l: int, direction: int, x: Tensor, lengths: Tensor, out: Tensor, h: Tensor,
                       c: Tensor | None):
        """One direction of layer `l` over x (B, T, I), window by window (the backward one: step p of a row is
        its position length - 1 - p), its outputs written into its half of `out` (B, T, dirs*H): each row's
        final h (and c) (B, H)."""
        B, T, _ = x.shape
        one = self.one_direction(l, direction)
        H = self.hidden_size
        h, c = h.clone(), None if c is None else c.clone()
        active = (lengths[None, :] > torch.arange(T)[:, None]).sum(1).tolist()   # rows inside each step
        for part in core.slices(active, (id(self), "read"), core.least_items(B)):
            start, stop = part.start, part.stop
            rows = (lengths > start).nonzero()[:, 0]                       # (R,)
            if not len(rows):
                break
            within = (lengths[rows] - start).clamp(max=stop - start)        # (R,)
            steps = torch.arange(start, stop)[None, :]                      # (1, w)
            times = steps.expand(len(rows), -1) if direction == 0 else (lengths[rows, None] - 1 - steps).clamp(min=0)
            # (R, w): the positions read
            index, times = rows.to(x.device)[:, None], times.to(x.device)
            packed = pack_padded_sequence(x[index, times], within, batch_first=True, enforce_sorted=False)
            s = (h[None, rows], c[None, rows]) if c is not None else h[None, rows]
            packed, s = one(packed, s)
            y, _ = pad_packed_sequence(packed, batch_first=True, total_length=stop - start)   # (R, w, H)
            inside = (steps - start).to(x.device) < within.to(x.device)[:, None]   # (R, w): real steps
            row_of = index.expand_as(times)
            out[row_of[inside], times[inside], direction * H:(direction + 1) * H] = y[inside]
            if c is not None:
                h[rows], c[rows] = s[0][0], s[1][0]
            else:
                h[rows] = s[0]
        return h, c

    def one_direction(self, l: int, direction: int) -> nn.Module:
        """A one-direction, one-layer module of the cell over layer `l`'s weights of `direction` (the same
        tensors, not copies), kept outside the module's parameters."""
        cache = self.__dict__.setdefault("_directions", {})
        if (l, direction) not in cache:
            layer = self.layers[l]
            extra = {"nonlinearity": self.nonlinearity} if self.cell == "rnn" else {}
            one = CELLS[self.cell](layer.input_size, self.hidden_size, 1, batch_first=True, **extra)
            suffix = "_l0_reverse" if direction else "_l0"
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                setattr(one, name + "_l0", getattr(layer, name + suffix))
            cache[(l, direction)] = one.eval()
        return cache[(l, direction)]

    def step(self, x: Tensor, state=None):
        """One time step, x (B, I) -> the top layer's output (B, H) and the new state: `forward` of a
        one-token sequence (what generation feeds), on PyTorch's single-step cells (`torch.lstm_cell`, ...)
        with each layer's own weights. The sequence kernels set up a whole sequence per call (oneDNN's,
        about 0.2 ms per layer on CPU), which is most of a small model's step when the sequence is one
        token. Training, the textbook cells, bidirectional stacks and export (whose graphs keep the sequence
        operators) go through `forward`."""
        exporting = torch.jit.is_tracing() or torch.onnx.is_in_onnx_export() or torch.compiler.is_exporting()
        if self.training or self.impl != "fused" or self.directions != 1 or exporting:
            out, state = self(x[:, None], state)
            return out[:, 0], state
        if state is None:
            state = self.init_state(x.size(0), x.device, x.dtype)
        if self.cell == "lstm":
            hs, cs = [], []
            for l, layer in enumerate(self.layers):   # SLP 13.20-13.27, the fused gates of one step
                x, c = torch.lstm_cell(x, (state[0][l], state[1][l]), *layer._flat_weights)   # (B, H)
                hs.append(x)
                cs.append(c)
            return x, (torch.stack(hs), torch.stack(cs))                  # (B, H), (L, B, H) each
        cell = {"gru": torch.gru_cell, "rnn": torch.rnn_tanh_cell if self.nonlinearity == "tanh"
                else torch.rnn_relu_cell}[self.cell]
        hs = []
        for l, layer in enumerate(self.layers):
            x = cell(x, state[l], *layer._flat_weights)                    # (B, H)
            hs.append(x)
        return x, torch.stack(hs)                                          # (B, H), (L, B, H)

    def _textbook_layer(self, layer: nn.Module, x: Tensor, state, lengths: Tensor | None = None):
        options = {"rnn": {"nonlinearity": self.nonlinearity}, "gru": {"reset": self.gru_reset},
                   "lstm": {}}[self.cell]
        outputs, finals = [], []
        for direction, suffix in enumerate(["_l0", "_l0_reverse"][: self.directions]):
            w = Weights(getattr(layer, "weight_ih" + suffix), getattr(layer, "weight_hh" + suffix),
                        getattr(layer, "bias_ih" + suffix), getattr(layer, "bias_hh" + suffix))
            s = (state[0][direction], state[1][direction]) if self.cell == "lstm" else state[direction]
            mask = None if lengths is None else \
                torch.arange(x.size(1), device=x.device)[None, :] < lengths.to(x.device)[:, None]   # (B, T)
            out, s = run_cell(self.cell, x, s, w, reverse=direction == 1, mask=mask, **options)
            outputs.append(out)
            finals.append(s)
        output = torch.cat(outputs, dim=-1)                                # (B, T, dirs*H)
        if self.cell == "lstm":
            return output, (torch.stack([s[0] for s in finals]), torch.stack([s[1] for s in finals]))
        return output, torch.stack(finals)                                 # (dirs, B, H)


