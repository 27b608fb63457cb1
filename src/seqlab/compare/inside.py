"""Inside a language model: the pictures the chapters draw, from the user's own trained model.

For one sample text, read by the model from a line start (`</s>`) and capped at `max_tokens` tokens:

- LSTM: the add (input) gate i_t, forget gate f_t and output gate o_t of every hidden unit at every
  token (SLP eqs. 13.20, 13.23, 13.26), and the context c_t (13.25), one figure per layer;
- GRU: the update gate z_t (in the book's sense: the share of the new candidate) and the reset gate
  r_t (SLP eqs. 9.10-9.11), one figure per layer;
- Elman RNN: the hidden state h_t (SLP eq. 13.1), one figure per layer;
- transformer: one head's causal self-attention weights softmax(q_i k_j / sqrt(d_k)) (SLP eqs.
  9.20-9.21), by default in the last layer, the head whose rows have the lowest mean entropy (the
  most focused one);
- the window FFN has neither gates nor attention: no picture.

The gates come from the textbook cells (`seqlab.nn.cells`, with their `record` hook) run on the model's
own weights, layer by layer: the same function as the fused kernel the model trains and decodes with,
which `recurrent_gates` checks (the recorded h_t = o_t * tanh(c_t) is the fused layer's output), and the
attention weights from the textbook attention (`seqlab.nn.attention.scaled_dot_product_attention`), which
`attention_weights` checks against the model's own (fused) logits. Nothing the model trains with changes.
"""

from __future__ import annotations

import textwrap
import warnings
from pathlib import Path
from typing import Any, TypeAlias

import torch
from torch import Tensor

from seqlab.errors import SeqlabError, SeqlabWarning
from seqlab.fileio import check_writable
from seqlab.nn.inside import attention_kept, float_cpu, kept, recurrent_record, same_outputs
from seqlab.training.plots import save_png

MAX_TOKENS = 40          # beyond this the token labels of a heat map stop being legible
MAX_UNITS = 64           # hidden units shown (the first ones); the rest are said to be left out
Panel: TypeAlias = tuple[Tensor, str, str, float, float]     # (matrix (T, H), label, colour map, vmin, vmax)

# What each picture shows, with the book's names and equations.
GATE_NAMES = {           # key, the book's name, its equation, what 1 means
    "lstm": [("i", "add (input) gate i", "13.23", "1 = add the candidate g"),
             ("f", "forget gate f", "13.20", "1 = keep the context"),
             ("o", "output gate o", "13.26", "1 = show the context in h")],
    "gru": [("z", "update gate z", "9.11", "1 = take the new candidate h~"),
            ("r", "reset gate r", "9.10", "0 = the candidate ignores h_{t-1}")],
}


def sample_ids(trained_lm: Any, text: str, max_tokens: int = MAX_TOKENS) -> list[int]:
    """`</s>` (a line start) + the text's tokens by the model's own tokenizer and vocabulary, at most
    `max_tokens` ids in all (and at most the transformer's context)."""
    if max_tokens < 2:
        raise SeqlabError(f"max_tokens must be at least 2, not {max_tokens}")
    if not text.strip():
        raise SeqlabError("the sample text for the pictures is empty: give a sentence")
    with warnings.catch_warnings():           # words the model never saw are drawn as <unk>, which the labels show
        warnings.simplefilter("ignore", SeqlabWarning)
        ids: list[int] = trained_lm.prompt_ids(text)                     # [</s>, tokens...]
    context = trained_lm.model.context_length
    limit = max_tokens if context is None else min(max_tokens, context)
    return ids[:limit]


def token_labels(trained_lm: Any, ids: list[int]) -> list[str]:
    """Tick labels: each token as text (BPE pieces detokenized), a space as '␣', a line end as </s>."""
    labels = []
    for token in trained_lm.vocab.decode(ids):
        if token.startswith("<") and token.endswith(">"):               # </s>, <unk>
            labels.append(token)
            continue
        text = trained_lm.tokenizer.detokenize([token])
        labels.append("␣" if not text.strip() else text.strip())
    return labels


@torch.no_grad()
def recurrent_gates(trained_lm: Any, ids: list[int], check: bool = True) -> list[dict[str, Tensor]]:
    """Per layer of a recurrent LM, what each token does inside it: {"h": (T, H)} and the gates, each
    (T, H): LSTM "i", "f", "o" and the context "c"; GRU "z" (the book's sense) and "r"; Elman only "h".

    Each layer runs the textbook cell on the layer's own weights from a zero state, its input being the
    layer below's outputs (eval mode: no dropout): `seqlab.nn.inside.recurrent_record`. With `check`, each
    layer's h is compared with the fused layer's output on the same input and a difference above its TOLERANCE
    is an error: the pictures are then of the model that is used, not of a reimplementation."""
    model: Any = float_cpu(trained_lm.model)                                    # a recurrent LM's
    stack = getattr(model, "rnn", None)
    if stack is None:
        raise SeqlabError(f"a {type(model).__name__} has no recurrent layers to look inside")
    if stack.directions != 1:
        raise SeqlabError("the gate pictures are drawn for unidirectional layers only")
    was_training = model.training
    model.eval()
    try:
        x = model.embedding(torch.tensor([ids]))                                 # (1, T, E)
        return [forward for forward, *_ in recurrent_record(stack, x, check)]    # (T, H) each
    finally:
        model.train(was_training)


@torch.no_grad()
def attention_weights(trained_lm: Any, ids: list[int], check: bool = True) -> list[Tensor]:
    """Per block of a transformer LM, its causal self-attention weights (nh, T, T), row i the
    distribution of query i over keys j <= i (SLP eqs. 9.20-9.21).

    The blocks are run once with the textbook attention, which keeps its weights (`seqlab.nn.inside.
    attention_kept`); with `check`, the logits of that pass must equal those of the model's own (fused)
    attention (`seqlab.nn.inside.same_outputs`)."""
    model = float_cpu(trained_lm.model)
    if getattr(model, "blocks", None) is None:
        raise SeqlabError(f"a {type(model).__name__} has no attention to look at")
    tokens = torch.tensor([ids])                                                 # (1, T)
    was_training = model.training
    model.eval()
    try:
        with attention_kept(model) as modules:
            logits, _ = model(tokens)                                            # (1, T, V)
            weights = [w for _, w in kept(modules)]                              # (nh, T, T) each
        if check:
            own, _ = model(tokens)                                               # (1, T, V)
            same_outputs(own, logits, "attention")
        return weights
    finally:
        model.train(was_training)


def entropy(weights: Tensor) -> Tensor:
    """Mean entropy (nats) of each head's attention rows: weights (nh, T, T) -> (nh,). Low = focused."""
    return -(weights * weights.clamp_min(1e-12).log()).sum(-1).mean(-1)       # (nh,)


def pictures(trained_lm: Any, text: str, folder: str | Path, max_tokens: int = MAX_TOKENS,
             max_units: int = MAX_UNITS, layer: int | None = None, head: int | None = None
             ) -> list[tuple[str, Path]]:
    """Draw what the model does inside on `text` as PNGs in `folder`; return (title, path) pairs.

    Recurrent LMs: one figure per layer (LSTM: i, f, o and the context c; GRU: z and r; Elman: h), the
    tokens across, the first `max_units` hidden units down, gates on a fixed 0..1 scale. Transformer: the
    attention weights of `layer` (1-based; default the last) and `head` (1-based; default the head with the
    lowest mean row entropy in that layer). The window FFN: none ([])."""
    arch = trained_lm.config.model.arch
    if arch == "ffn":
        return []
    folder = Path(folder)
    check_writable(folder, "the pictures' folder", folder=True)
    ids = sample_ids(trained_lm, text, max_tokens)
    labels = token_labels(trained_lm, ids)
    if arch == "transformer":
        return [_attention_picture(trained_lm, ids, labels, folder, layer, head)]
    drawn = []
    for l, found in enumerate(recurrent_gates(trained_lm, ids), start=1):
        title, panels = _recurrent_panels(arch, l, found, trained_lm.config.model.activation)
        path = _heat_maps(panels, labels, folder / f"{arch}-layer{l}.png", title, max_units)
        drawn.append((title, path))
    return drawn


def _recurrent_panels(arch: str, layer: int, found: dict[str, Tensor], activation: str) -> tuple[str, list[Panel]]:
    """A figure's title and its panels: (matrix (T, H), label, colour map, vmin, vmax) each."""
    if arch == "rnn":
        top = 1.0 if activation == "tanh" else max(float(found["h"].max()), 1e-6)
        low = -1.0 if activation == "tanh" else 0.0
        return (f"Elman RNN layer {layer}: hidden state h per token (SLP eq. 13.1, g = {activation})",
                [(found["h"], "hidden state h", "RdBu_r" if activation == "tanh" else "viridis", low, top)])
    gates = GATE_NAMES[arch]
    names = ", ".join(gate[1] for gate in gates[:-1]) + " and " + gates[-1][1]
    panels = [(found[key], f"{name} (eq. {eq}): {meaning}", "viridis", 0.0, 1.0) for key, name, eq, meaning in gates]
    if arch == "lstm":
        bound = max(float(found["c"].abs().max()), 1e-6)
        panels.append((found["c"], "context c (eq. 13.25)", "RdBu_r", -bound, bound))
        return f"LSTM layer {layer}: {names}, and the context c, per token (SLP eqs. 13.20-13.27)", panels
    return f"GRU layer {layer}: {names} per token (SLP eqs. 9.10-9.13)", panels


def _heat_maps(panels: list[Panel], labels: list[str], path: Path, title: str, max_units: int) -> Path:
    """Panels stacked in one figure: tokens on x (their text as tick labels), hidden units on y."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    T, H = panels[0][0].shape
    shown = min(H, max_units)
    width = min(max(3 + 0.28 * T, 8), 24)                                     # inches
    fig, axes = plt.subplots(len(panels), 1, figsize=(width, 0.8 + 2.4 * len(panels)), dpi=110, sharex=True,
                             squeeze=False)
    for ax, (values, label, cmap, vmin, vmax) in zip(axes[:, 0], panels, strict=True):
        image = ax.imshow(values[:, :shown].T.numpy(), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto",
                          interpolation="nearest")                            # (units, T)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{int(value) + 1}"))   # units from 1
        ax.set_ylabel(f"hidden unit (1-{shown}" + (f" of {H})" if shown < H else ")"), fontsize=8)
        ax.set_title(label, fontsize=9)
        fig.colorbar(image, ax=ax, fraction=0.03, pad=0.01)
    axes[-1, 0].set_xticks(range(T), labels, rotation=60, ha="right", fontsize=7)
    axes[-1, 0].set_xlabel("token read")
    fig.suptitle(textwrap.fill(title, int(width * 11)), fontsize=10)          # ~11 characters an inch
    fig.tight_layout()
    return save_png(fig, path)


def _attention_picture(trained_lm: Any, ids: list[int], labels: list[str], folder: Path, layer: int | None,
                       head: int | None) -> tuple[str, Path]:
    weights = attention_weights(trained_lm, ids)                            # L x (nh, T, T)
    L, heads = len(weights), weights[0].size(0)
    layer = L if layer is None else layer
    if not 1 <= layer <= L:
        raise SeqlabError(f"the transformer has layers 1 to {L}, not {layer}")
    chosen = weights[layer - 1]                                             # (nh, T, T)
    spread = entropy(chosen)                                                # (nh,)
    if head is None:
        head, why = int(spread.argmin()) + 1, "the most focused: lowest mean entropy"
    elif not 1 <= head <= heads:
        raise SeqlabError(f"the transformer has heads 1 to {heads}, not {head}")
    else:
        why = "chosen"
    title = (f"Transformer layer {layer} of {L}, head {head} of {heads} ({why}, {spread[head - 1]:.2f} nats): "
             "causal self-attention weights (SLP eqs. 9.20-9.21)")
    path = _attention_map(chosen[head - 1], labels, folder / f"transformer-layer{layer}-head{head}.png", title)
    return title, path


def _attention_map(weights: Tensor, labels: list[str], path: Path, title: str) -> Path:
    """One head's weights (T, T) as a heat map: row i the query (the token read), column j the key it attends
    to; above the diagonal the causal mask leaves zeros."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    T = weights.size(0)
    width = min(max(3 + 0.3 * T, 7), 24)                                      # inches
    fig, ax = plt.subplots(figsize=(width, min(max(2 + 0.3 * T, 6), 24)), dpi=110)
    image = ax.imshow(weights.numpy(), cmap="Greys", vmin=0, vmax=1, interpolation="nearest")   # (T, T)
    ax.set_xticks(range(T), labels, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(T), labels, fontsize=7)
    ax.set_xlabel("key j: the token attended to")
    ax.set_ylabel("query i: the token read")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="attention weight")
    ax.set_title(textwrap.fill(title, int(width * 10)), fontsize=9)
    fig.tight_layout()
    return save_png(fig, path)
