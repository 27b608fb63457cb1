"""A transformer LM's decoding step compiled ahead of time (opt-in): `TransformerLM.compiled_decoder()`.

At batch 1 on a CPU, the eager step of a small transformer is mostly the cost of calling its ~60 small
operations. Here the step is written with fixed shapes, so that it exports once: the KV cache is a fixed
(L, 1, nh, C, hs) buffer, each token's keys and values are written at its position (a tensor), and attention
reads all C slots under the mask `slot <= position`, as explicit operations (scores, masked softmax, weighted
sum: SLP 9.33) that the compiler fuses into its own loops. `torch.export` + AOTInductor turn it into C++ with
no Python between the kernels: one graph for a token, one for the recent half of the window that is re-encoded
when the cache is full (as `TransformerLM.step` slides). The prompt is read through the one-token graph.

The decoder keeps the incremental-decoding contract (`start`, `step`, `reorder_state`), so `generate_ids`
drives it as it drives the model, for one row. Its logits are the model's within float rounding (~1e-7, not to
the last bit: the compiled arithmetic is ordered differently), so a greedy or seeded generation gives the
model's tokens except where two tokens tie within that rounding. Compiling takes tens of seconds; the weights
are those of the model when it was compiled. Measured: `benchmarks/generation_speed.py --compile`.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from seqlab.errors import SeqlabError


class FixedStep(nn.Module):
    """T tokens (T,) at `positions` (T,) over a fixed cache -> the last token's logits (1, V); the tokens'
    keys and values are written into `keys` and `values` (L, 1, nh, C, hs) at their positions."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, tokens: Tensor, positions: Tensor, keys: Tensor, values: Tensor) -> Tensor:
        model = self.model
        T, C = tokens.size(0), model.context_length
        nh, hs = keys.size(2), keys.size(4)
        D = nh * hs
        x = model.embedding(tokens[None]) + model.positions(positions)[None]          # X = E[w] + P, (1, T, D)
        hidden = (torch.arange(C, device=tokens.device)[None, :] > positions[:, None])[None, None]   # (1, 1, T, C)
        for layer, block in enumerate(model.blocks):
            attention = block.attention

            def attend(h: Tensor, layer: int = layer, attention=attention) -> Tensor:
                q, k, v = attention.qkv(h).view(1, T, 3, nh, hs).permute(2, 0, 3, 1, 4).unbind(0)  # (1, nh, T, hs)
                keys[layer].index_copy_(2, positions, k)                                   # (1, nh, C, hs)
                values[layer].index_copy_(2, positions, v)
                scores = (q @ keys[layer].transpose(-2, -1)) * hs ** -0.5                  # (1, nh, T, C)
                y = scores.masked_fill(hidden, float("-inf")).softmax(dim=-1) @ values[layer]  # (1, nh, T, hs)
                return attention.out(y.transpose(1, 2).reshape(1, T, D))                   # (1, T, D)

            if block.pre_norm:
                x = x + attend(block.norm1(x))
                x = x + block.feedforward(block.norm2(x))
            else:
                x = block.norm1(x + attend(x))
                x = block.norm2(x + block.feedforward(x))
        return model.output(model.final_norm(x[:, -1]))                                  # (1, V)


@dataclass
class FixedState:
    """The compiled decoder's state: the fixed caches (L, 1, nh, C, hs), how many positions they hold, and the
    tokens they hold (to re-encode the recent half when they are full)."""

    keys: Tensor
    values: Tensor
    length: int
    history: list[int]


class CompiledTransformerDecoder:
    """`TransformerLM`'s `start` / `step` for one row, on the AOTInductor graphs of `FixedStep`."""

    def __init__(self, model):
        if model.rotary or any(block.attention.q_norm is not None for block in model.blocks):
            raise SeqlabError("the compiled decoding step covers transformers with learned or sinusoidal positions "
                              "and no QK-norm; generate without compiling")
        self.model = model.eval()
        self.context_length = model.context_length
        self.never_generated = tuple(getattr(model, "never_generated", ()))
        C = model.context_length
        self.half = max(1, C // 2)
        step = FixedStep(self.model)
        with torch.inference_mode(False), torch.no_grad():
            self.graphs = {T: export(step, (torch.arange(T), torch.arange(T), *self.caches())) for T in {1, self.half}}
        self.positions = [torch.tensor([n]) for n in range(C)]                     # each step's, made once
        self.window = torch.arange(self.half)

    def caches(self) -> tuple[Tensor, Tensor]:
        model = self.model
        L, nh, D = len(model.blocks), model.num_heads, model.embedding.weight.size(1)
        return torch.zeros(L, 1, nh, model.context_length, D // nh), torch.zeros(L, 1, nh, model.context_length,
                                                                               D // nh)

    def eval(self) -> CompiledTransformerDecoder:
        return self

    def start(self, prompt: Tensor) -> FixedState:
        """The prompt (1, P) but its last token read into fresh caches, one token at a time."""
        if prompt.size(0) != 1 or prompt.device.type != "cpu":
            raise SeqlabError("the compiled decoding step generates one row on the CPU; generate without compiling")
        state = FixedState(*self.caches(), 0, [])
        for token in prompt[0, :-1]:
            self.step(token[None], state)
        return state

    def step(self, tokens: Tensor, state: FixedState, need_weights: bool = False):
        """tokens (1,) -> logits (1, V), the state (written in place), None (no attention weights)."""
        token = int(tokens[0])
        if state.length == self.context_length:          # the cache is full: re-encode the recent half
            keep = (state.history + [token])[-self.half:]
            logits = self.graphs[self.half](torch.tensor(keep), self.window, state.keys, state.values)
            state.length, state.history = self.half, keep
            return logits, state, None
        logits = self.graphs[1](tokens.reshape(1), self.positions[state.length], state.keys, state.values)
        state.length += 1
        state.history.append(token)
        return logits, state, None

    def reorder_state(self, state: FixedState, index: Tensor) -> FixedState:
        if index.tolist() != [0]:
            raise SeqlabError("the compiled decoding step keeps one row; generate without compiling")
        return state


def export(module: nn.Module, example: tuple):
    """`module` exported at the shapes of `example` and compiled by AOTInductor, loaded (the package is written
    to a temporary folder, removed once loaded), as a function of the example's tensors -> the output."""
    try:
        import torch._inductor
        exported = torch.export.export(module, example)
        with tempfile.TemporaryDirectory() as folder:
            path = torch._inductor.aoti_compile_and_package(exported, package_path=str(Path(folder) / "step.pt2"))
            loader = torch._inductor.aoti_load_package(path).loader
    except Exception as error:                            # no C++ compiler, an unsupported operation, ...
        first = str(error).strip().splitlines()[:1] or [type(error).__name__]
        raise SeqlabError(f"could not compile the decoding step ({first[0]}); generate without compiling") from error

    def run(*tensors: Tensor) -> Tensor:
        # the loader itself: the package's __call__ parses its input and output specs at every call (~tens of us)
        return loader.boxed_run(list(tensors))[0]
    return run
