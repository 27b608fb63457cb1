"""What a network computes inside, recorded on its own forward pass with its own weights, for the views of
`seqlab explore` (`seqlab.contract.views`) and the pictures of `seqlab.compare.inside`; family-neutral.

- `recurrent_record`: a `RecurrentStack`'s every layer and direction run by the textbook cells
  (`seqlab.nn.cells`, their `record` hook) on the layer's own weights: the hidden state h_t and the gates
  (LSTM: add i, forget f, output o and the context c, SLP eqs. 13.20-13.27; GRU: update z, reset r, 9.10-9.13;
  Elman: h alone, 13.1), each checked against the fused layer's output on the same input.
- `attention_kept`: within it, every self-attention (`MultiHeadAttention`) under a module runs its textbook
  path (`scaled_dot_product_attention`, SLP eqs. 9.20-9.21), which keeps its weights, and every cross-attention
  keeps each head's; `kept` reads them after a forward pass, (nh, T, S) per module.

Nothing the model trains or decodes with changes: the textbook paths compute the same function (the checks
say so within `TOLERANCE`), and every switch is put back on leaving.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor, nn

from seqlab.errors import SeqlabError
from seqlab.nn.attention import MultiHeadAttention
from seqlab.nn.cells import Weights, run_cell
from seqlab.nn.cross_attention import CrossAttention
from seqlab.nn.recurrent import RecurrentStack

TOLERANCE = 1e-4         # recorded vs the model's own outputs, float32 on the CPU


def float_cpu(model: nn.Module) -> nn.Module:
    """`model` in float32 on the CPU (a copy, in evaluation mode, when it is elsewhere): a recording reads one
    text, and on a GPU the fused kernels may compute in TF32 or half precision, which the textbook paths'
    checks against them would not match."""
    parameter = next(model.parameters())
    if parameter.device.type == "cpu" and parameter.dtype == torch.float32:
        return model
    return copy.deepcopy(model).float().cpu().eval()


@torch.no_grad()
def recurrent_record(stack: RecurrentStack, x: Tensor, check: bool = True,
                     state=None) -> list[list[dict[str, Tensor]]]:
    """Per layer, per direction (forward, then backward where bidirectional), what each position does inside
    the layer: {"h": (T, H)} and the cell's gates (LSTM i, f, o, c; GRU z, r), each (T, H), position t at row t
    (the backward direction's too). x (1, T, I) is the stack's input; each layer reads the one below's outputs, both
    directions concatenated, from a zero state (or `state`, as `RecurrentStack.forward` takes it: h (L*dirs,
    1, H), or (h, c) for the LSTM; a decoder's h_0^d), without dropout. With `check`, each layer's h must equal
    the fused layer's output on the same input within `TOLERANCE` (a GRU with the book's reset, which has no
    fused kernel, is not checked)."""
    if x.dim() != 3 or x.size(0) != 1:
        raise SeqlabError(f"recurrent_record reads one sequence (1, T, I), not {tuple(x.shape)}")
    options = {"rnn": {"nonlinearity": stack.nonlinearity}, "gru": {"reset": stack.gru_reset},
               "lstm": {}}[stack.cell]
    layers = []
    if state is None:
        state = stack.init_state(1, x.device, x.dtype)                             # (L*dirs, 1, H)
    d = stack.directions
    for l, layer in enumerate(stack.layers):
        found, outputs = [], []
        rows = slice(l * d, (l + 1) * d)                                           # this layer's directions
        layer_state = tuple(s[rows] for s in state) if stack.cell == "lstm" else state[rows]
        for direction, suffix in enumerate(["_l0", "_l0_reverse"][: stack.directions]):
            w = Weights(getattr(layer, "weight_ih" + suffix), getattr(layer, "weight_hh" + suffix),
                        getattr(layer, "bias_ih" + suffix), getattr(layer, "bias_hh" + suffix))
            start = tuple(s[direction] for s in layer_state) if stack.cell == "lstm" else layer_state[direction]
            record: list[dict[str, Tensor]] = []
            extra = {} if stack.cell == "rnn" else {"record": record}
            h, _ = run_cell(stack.cell, x, start, w, reverse=direction == 1, **options, **extra)   # (1, T, H)
            if direction == 1:
                record.reverse()                                                   # recorded from t = T-1 down
            gates = {name: torch.stack([step[name][0] for step in record]) for name in (record[0] if record else {})}
            found.append({"h": h[0], **gates})                                     # (T, H) each
            outputs.append(h)
        output = torch.cat(outputs, dim=-1)                                        # (1, T, dirs*H)
        if check and not (stack.cell == "gru" and stack.gru_reset == "before"):
            fused, _ = layer(x, layer_state)                                       # (1, T, dirs*H)
            gap = (fused - output).abs().max().item()
            if gap > TOLERANCE:
                raise SeqlabError(f"the textbook {stack.cell} cell differs from the fused layer {l + 1} by "
                                  f"{gap:.2g}: what it records would not be this model's")
        layers.append(found)
        x = output
    return layers


@contextmanager
def attention_kept(module: nn.Module) -> Iterator[list[tuple[str, nn.Module]]]:
    """Within: each self-attention under `module` runs its textbook path (keeping its weights) and each
    cross-attention keeps each head's weights. Yields the attention modules, (qualified name, module), in the
    order of `module.named_modules()` (a transformer's blocks in order); `kept` reads their weights after a
    forward pass. Their implementations are restored, and the weights dropped, on leaving."""
    found = [(name, m) for name, m in module.named_modules() if isinstance(m, MultiHeadAttention | CrossAttention)]
    impls = {name: m.impl for name, m in found if isinstance(m, MultiHeadAttention)}
    try:
        for _, m in found:
            if isinstance(m, MultiHeadAttention):
                m.impl = "textbook"
            else:
                m.keep_weights = True
        yield found
    finally:
        for name, m in found:
            if isinstance(m, MultiHeadAttention):
                m.impl = impls[name]
            else:
                m.keep_weights = False
            m.last_weights = None


def kept(modules: list[tuple[str, nn.Module]], row: int = 0) -> list[tuple[str, Tensor]]:
    """The weights each attention module kept on its last call, (nh, T, S) of batch row `row`: each query row a
    distribution over the keys (masked keys 0)."""
    out = []
    for name, m in modules:
        if m.last_weights is None:
            raise SeqlabError(f"the attention {name or 'module'} kept no weights: run the model within "
                              "attention_kept")
        out.append((name, m.last_weights[row].detach()))
    return out


def same_outputs(own: Tensor, recorded: Tensor, what: str) -> None:
    """Refuse (SeqlabError) a recording whose outputs differ from the model's own by more than `TOLERANCE`
    (relative to the largest): what it shows would not be this model's."""
    gap = (own.float() - recorded.float()).abs().max().item() if own.numel() else 0.0
    if gap > TOLERANCE * max(1.0, own.abs().max().item() if own.numel() else 1.0):
        raise SeqlabError(f"the textbook {what} differs from the model's own by {gap:.2g}: what it shows would "
                          "not be this model's")
