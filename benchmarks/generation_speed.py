"""Generation speed at batch 1, one thread: tokens/s of `seqlab.decoding.search.generate_ids`, one source tree against
another (today's code against a baseline commit's), and against a plain-PyTorch sampler doing the same work, side by
side in one run.

Models (random weights: the speed of a step does not depend on what the weights learned, except top-p's
nucleus, which is wide for an untrained model):
- transformer: the character transformer of nanoGPT's CPU Shakespeare setting (4 layers, 4 heads, width 128,
  context 64, pre-LN, GELU, V = 65: 818,241 parameters); 512 new tokens pass its context, so the window
  slides (the recent half is re-encoded once every 32 tokens);
- char-lstm: a character LSTM of Tiny Shakespeare (no shipped config: 2 x 256, embedding 128, untied, V = 65:
  874,561 parameters, 3.5 MB of float32 weights, every one read at each token);
- lstm: the word LM of wikitext-2, 2 x 200 LSTM, tied, V = 33,278 (7.33M parameters, 6.66M of them the
  embedding matrix that is also the output layer);
- lstm-10k: `benchmarks/lm_speed.py`'s LSTM, 2 x 200, untied, V = 10,003 (4.65M parameters).
Each generates 512 new tokens after a 4-token prompt, greedy and sampled (top-p 0.9, seed 0), one thread.

Contenders, each in its own subprocess, one per (model, decoding, round): `new` (this tree's `generate_ids`),
`baseline` (`--baseline-src`: another tree's), and `plain` (`--no-plain` leaves it out): the loop a competent
PyTorch user writes, in this file, on the same weights copied out of seqlab's model: for the transformer a
nanoGPT-style module with a preallocated KV cache, `F.scaled_dot_product_attention`, the same sliding window
(the recent half re-encoded when the cache is full); for the LSTMs `nn.LSTM` carrying (h, c); both block the ids
seqlab never generates and draw with `torch.multinomial` from the top-p set (sort, cumulative sum, scatter back).
A worker builds the model from seed 0, warms up on 32 tokens, then times three generations (wall clock and
process CPU time) and reports the fastest (timeit's rule: the others were slowed by something else) and the ids.
Rounds alternate the contenders (the order reversed every other round); each figure is the median of the rounds,
and `speedup` is the ratio of the medians. These machines are shared, so the wall clock of a round is noisy; the
CPU-time figures leave out the time a busy machine kept the process waiting.

    git worktree add /tmp/seqlab-base-47 0e3032e         # the code before issue 47's generation work
    python benchmarks/generation_speed.py --baseline-src /tmp/seqlab-base-47/src --rounds 5
    python benchmarks/generation_speed.py --rounds 0 --compile   # only the compiled steps (~10 minutes)
    python benchmarks/generation_speed.py --quick       # tiny, to check the script runs (writes nothing)

`--compile` measures whether a compiled decoding step pays at batch 1 on one thread (`--rounds 0 --compile`: only
that). The step is written with fixed shapes: the transformer's over a fixed-size KV cache (attention over all C
slots under a mask, the position a tensor, so it compiles once; C tokens, the window does not slide), the
LSTM's on the cells with the state updated in place. Each variant (`--compile-variants`: torch.compile; with
the inductor's C++ wrapper, which replaces the Python code that calls the kernels; with weight freezing (weights
as constants, prepacked for MKL/oneDNN); max-autotune-no-cudagraphs; AOTInductor from torch.export, with and
without freezing; top-p sampling compiled into the graph) runs in its own process with a cold compile cache (a
user's first compile, whose seconds are recorded), then the compiled step, the same step eager and this tree's
`generate_ids` run side by side in alternating rounds: per-token process CPU time (median of 5 rounds), the
greedy ids compared and the logits' largest difference. Two variants run the transformer's whole generation
(512 tokens: the prompt, the steps, the window slides): the AOTInductor graphs in a plain loop (with the
attention kernel, or attention as explicit operations), and `TransformerLM.compiled_decoder()` (the opt-in the
library offers) through `generate_ids`, greedy and top-p, with the ids it must share with `generate_ids`.

Results: benchmarks/results/generation_speed.json and .md (`common.write_records`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
NEW_SRC = HERE.parent / "src"
PROMPT = [3, 10, 11, 12]
MODELS = {
    "transformer": dict(arch="transformer", vocab_size=65, embedding_size=128, num_layers=4, num_heads=4, context=64,
                        dropout=0.0, norm_position="pre", activation="gelu"),
    "lstm": dict(arch="lstm", vocab_size=33278, embedding_size=200, hidden_size=200, num_layers=2, tie_weights=True),
    "lstm-10k": dict(arch="lstm", vocab_size=10003, embedding_size=200, hidden_size=200, num_layers=2),
    "char-lstm": dict(arch="lstm", vocab_size=65, embedding_size=128, hidden_size=256, num_layers=2),
}
REPEATS = 3                 # generations timed per process: its figure is the fastest (timeit's rule)
DECODINGS = {"greedy": dict(greedy=True), "top-p 0.9": dict(greedy=False, top_p=0.9, seed=0)}
NOTES = ("Batch 1, one thread, 512 new tokens after a 4-token prompt, random weights (seed 0). `baseline` is "
         "commit 0e3032e (before issue 47's generation work), `new` this tree, `plain` a plain-PyTorch sampler "
         "written in the benchmark (nanoGPT-style KV-cached transformer / nn.LSTM, the same weights, the same "
         "blocked ids, top-p by sort + cumsum, torch.multinomial); each contender runs in its own process, whose "
         "figure is the fastest of 3 generations; the rounds alternate the contenders, and every figure is a median "
         "of rounds. `speedup` rows: median(new) / median(other), wall clock (the `rounds` field holds the "
         "round-by-round ratios) and, in the `cpu time` rows, by process CPU time (what the process used, without "
         "the time it waited on a machine shared with other jobs). `same ids`: the two generations are the same "
         "tokens. The compile rows (`--compile`): a fixed-shape decoding step (transformer: a fixed-size KV cache over "
         "the 64 positions of its context; char-lstm: 512 tokens) compiled as the row names it, from a cold cache "
         "(the compile seconds in `wall_s` and the note), against the same step eager and against `generate_ids`, "
         "side by side in one process, per-token process CPU time, median of 5 alternating rounds.")
CONTEXT = "generation, 1 thread"   # in every tokens_per_s and speedup row's config


# ------------------------------------------------------------------ one contender, in its own process

def build(name: str):
    import torch

    from seqlab.families.lm.model import LMConfig, build_lm
    torch.manual_seed(0)
    return build_lm(LMConfig(**MODELS[name])).eval()


def worker(name: str, decoding: str, new_tokens: int, plain: bool = False) -> dict:
    """Build the model, warm up, time generations: tokens/s (wall, CPU) of the fastest and the ids (`plain`: the
    plain-PyTorch sampler on the same weights, in place of `generate_ids`)."""
    import torch

    from seqlab.decoding.search import SamplingOptions, blocked_tokens, generate_ids
    torch.set_num_threads(1)
    model = build(name)
    options = SamplingOptions(max_tokens=new_tokens, stop_at_eos=False, **DECODINGS[decoding])
    if plain:
        sampler = PlainSampler(model, blocked_tokens(model).ids)
        generate = lambda tokens: sampler.generate(PROMPT, tokens, options)                    # noqa: E731
    else:
        generate = lambda tokens: list(generate_ids(model, PROMPT, SamplingOptions(             # noqa: E731
            max_tokens=tokens, stop_at_eos=False, **DECODINGS[decoding])))
    generate(32)
    walls, cpus = [], []
    for _ in range(REPEATS):
        wall, cpu = time.perf_counter(), time.process_time()
        ids = generate(new_tokens)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return {"wall": new_tokens / min(walls), "cpu": new_tokens / min(cpus), "ids": ids,
            "params": sum(p.numel() for p in model.parameters())}


def run_worker(src: Path, name: str, decoding: str, new_tokens: int, plain: bool = False) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, __file__, "--worker", name, decoding, "--new-tokens", str(new_tokens)]
    out = subprocess.run(command + (["--plain-worker"] if plain else []), env=env, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ the plain-PyTorch sampler

class PlainSampler:
    """What a competent PyTorch user writes to sample from these models, on seqlab's weights (copied): nanoGPT's
    transformer with a preallocated KV cache and `F.scaled_dot_product_attention`, or `nn.LSTM` carrying (h, c);
    the ids seqlab never generates blocked; greedy, or top-p (sort, softmax, cumulative sum, the tokens past p
    at -inf, scattered back) and `torch.multinomial`; one `.item()` per token, as a streamed token needs."""

    def __init__(self, model, blocked: tuple[int, ...]):
        import torch
        from torch import nn
        self.blocked = torch.tensor(blocked)
        output = model.output
        assert output.projection is None, "the plain sampler has no tied projection"
        V, D = output.decoder.weight.shape
        self.head = nn.Linear(D, V)
        self.head.weight.data.copy_(output.decoder.weight)
        self.head.bias.data.copy_(output.decoder.bias)
        self.embedding = nn.Embedding.from_pretrained(model.embedding.weight.detach().clone())
        self.transformer = hasattr(model, "blocks")
        if self.transformer:
            self.context, self.heads = model.context_length, model.num_heads
            self.positions = model.positions.table.weight.detach().clone()                    # (C, D)
            self.blocks = [PlainBlock(block, self.heads) for block in model.blocks]
            self.final = nn.LayerNorm(D)
            self.final.load_state_dict(model.final_norm.state_dict())
        else:
            layers = model.rnn.layers
            self.lstm = nn.LSTM(layers[0].input_size, layers[0].hidden_size, len(layers), batch_first=True)
            for l, layer in enumerate(layers):
                for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                    getattr(self.lstm, f"{kind}_l{l}").data.copy_(getattr(layer, f"{kind}_l0"))
        self.eval_modules()

    def eval_modules(self) -> None:
        for module in vars(self).values():
            if hasattr(module, "eval"):
                module.eval()

    def choose(self, logits, options, generator):
        import torch
        logits[:, self.blocked] = float("-inf")                                            # (1, V)
        if options.greedy:
            return logits.argmax(-1)
        if options.top_p < 1.0:
            ordered, order = logits.sort(dim=-1, descending=True)
            probs = ordered.softmax(dim=-1)
            ordered[probs.cumsum(dim=-1) - probs >= options.top_p] = float("-inf")           # mass before >= p
            logits = logits.scatter(-1, order, ordered)
        return torch.multinomial(logits.softmax(dim=-1), 1, generator=generator)[:, 0]

    def generate(self, prompt: list[int], new_tokens: int, options) -> list[int]:
        import torch
        with torch.inference_mode():
            generator = torch.Generator().manual_seed(options.seed or 0)
            run = self.transformer_run if self.transformer else self.lstm_run
            return run(torch.tensor([prompt]), new_tokens, options, generator)

    def transformer_run(self, prompt, new_tokens: int, options, generator) -> list[int]:
        import torch
        C, L, D = self.context, len(self.blocks), self.positions.size(1)
        keys = torch.zeros(L, 1, self.heads, C, D // self.heads)                               # (L, 1, nh, C, hs)
        values = torch.zeros_like(keys)
        history = prompt[0].tolist()
        self.transformer_forward(prompt[:, :-1], 0, keys, values)
        length, token, ids = prompt.size(1) - 1, prompt[:, -1:], []
        for _ in range(new_tokens):
            if length == C:                                          # the cache is full: re-encode the recent half
                window = torch.tensor([history[-(C // 2):]])
                logits, length = self.transformer_forward(window, 0, keys, values)[:, -1], C // 2
            else:
                logits = self.transformer_forward(token, length, keys, values)[:, -1]
                length += 1
            token = self.choose(logits, options, generator)[:, None]                              # (1, 1)
            ids.append(token.item())
            history.append(ids[-1])
        return ids

    def transformer_forward(self, tokens, start: int, keys, values):
        T = tokens.size(1)
        x = self.embedding(tokens) + self.positions[start:start + T]                              # (1, T, D)
        for layer, block in enumerate(self.blocks):
            x = block(x, start, keys[layer], values[layer])
        return self.head(self.final(x))                                                           # (1, T, V)

    def lstm_run(self, prompt, new_tokens: int, options, generator) -> list[int]:
        state = None
        if prompt.size(1) > 1:
            _, state = self.lstm(self.embedding(prompt[:, :-1]), state)
        token, ids = prompt[:, -1:], []
        for _ in range(new_tokens):
            out, state = self.lstm(self.embedding(token), state)                                  # (1, 1, H)
            token = self.choose(self.head(out[:, -1]), options, generator)[:, None]
            ids.append(token.item())
        return ids


class PlainBlock:
    """nanoGPT's pre-LN block on seqlab's weights, writing its keys and values into a preallocated cache."""

    def __init__(self, block, heads: int):
        import copy
        self.norm1, self.norm2 = copy.deepcopy(block.norm1), copy.deepcopy(block.norm2)
        self.qkv, self.out = copy.deepcopy(block.attention.qkv), copy.deepcopy(block.attention.out)
        self.fc, self.proj = copy.deepcopy(block.feedforward[0]), copy.deepcopy(block.feedforward[2])
        self.heads = heads

    def __call__(self, x, start: int, keys, values):
        import torch.nn.functional as F
        B, T, D = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(D, dim=2)                                        # (B, T, D) each
        q, k, v = (t.view(B, T, self.heads, D // self.heads).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
        keys[:, :, start:start + T] = k
        values[:, :, start:start + T] = v
        y = F.scaled_dot_product_attention(q, keys[:, :, :start + T], values[:, :, :start + T], is_causal=T > 1)
        x = x + self.out(y.transpose(1, 2).reshape(B, T, D))
        return x + self.proj(F.gelu(self.fc(self.norm2(x))))


# ------------------------------------------------------------------ compiled decoding steps (this tree)

COMPILE_MODELS = ("transformer", "char-lstm")
COMPILE_VARIANTS = {        # key -> (what the records call it, how `compile_step` builds it)
    "compile": ("torch.compile", dict()),
    "cpp-wrapper": ("torch.compile + cpp_wrapper", dict(cpp_wrapper=True)),
    "cpp-wrapper-freezing": ("torch.compile + cpp_wrapper + freezing", dict(cpp_wrapper=True, freezing=True)),
    "max-autotune": ("torch.compile max-autotune-no-cudagraphs + cpp_wrapper + freezing",
                     dict(cpp_wrapper=True, freezing=True, mode="max-autotune-no-cudagraphs")),
    "aoti": ("AOTInductor (torch.export)", dict(aoti=True)),
    "aoti-freezing": ("AOTInductor (torch.export) + freezing", dict(aoti=True, freezing=True)),
    "sampling": ("torch.compile + cpp_wrapper, top-p sampling in the graph", dict(cpp_wrapper=True, sample=True)),
    "aoti-sliding": ("AOTInductor (torch.export), the whole generation (prompt, steps, window slides)",
                     dict(sliding=True)),                                   # the transformer only
    "decoder-greedy": ("TransformerLM.compiled_decoder() through generate_ids (AOTInductor)",
                       dict(decoder=True, decoding="greedy")),                      # the transformer only
    "decoder-top-p": ("TransformerLM.compiled_decoder() through generate_ids (AOTInductor)",
                      dict(decoder=True, decoding="top-p 0.9")),
    "aoti-sliding-explicit": ("AOTInductor (torch.export), the whole generation, attention as explicit operations",
                              dict(sliding=True, attention="explicit")),
}
PROBE_ROUNDS = 5


def compile_step(step, example: tuple, variant: dict):
    """`step` compiled as `variant` says (fullgraph, static shapes; the inductor's C++ wrapper and weight
    freezing where asked; or torch.export + AOTInductor), called once on `example` so that it is built."""
    import torch
    import torch._inductor.config as inductor
    inductor.cpp_wrapper = variant.get("cpp_wrapper", False)
    inductor.freezing = variant.get("freezing", False)
    if variant.get("aoti"):
        class Step(torch.nn.Module):
            def forward(self, *args):
                return step(*args)
        exported = torch.export.export(Step(), example)
        with tempfile.TemporaryDirectory() as folder:                              # the package, loaded
            runner = torch._inductor.aoti_load_package(torch._inductor.aoti_compile_and_package(
                exported, package_path=str(Path(folder) / "step.pt2")))
        compiled = lambda *args: runner(*args)                                      # noqa: E731
    else:
        compiled = torch.compile(step, fullgraph=True, dynamic=False, mode=variant.get("mode"))
    compiled(*example)
    return compiled


def compile_probe(name: str, new_tokens: int, variant_name: str) -> dict:
    """Eager against compiled, side by side in this process: a fixed-shape decoding step (and, for the
    sampling variant, the sampler with it), its compile time, its per-token time (process CPU time and wall
    clock, median of alternating rounds), and this tree's `generate_ids` on the same model beside both."""
    import torch

    from seqlab.decoding.search import SamplingOptions, blocked_tokens, generate_ids
    torch.set_num_threads(1)
    label, variant = COMPILE_VARIANTS[variant_name]
    if variant.get("sliding"):
        return sliding_probe(new_tokens, label, variant.get("attention", "sdpa"))
    if variant.get("decoder"):
        return decoder_probe(new_tokens, label, variant["decoding"])
    sample = variant.get("sample", False)
    model = build(name)
    step, state = (static_transformer_step(model) if name == "transformer" else recurrent_step(model))
    decoding = "top-p 0.9" if sample else "greedy"
    if sample:
        step = sampled_step(step, blocked_tokens(model).ids, model.output.decoder.weight.size(0), top_p=0.9)

    def generate(fn, logits_out: list | None = None) -> list[int]:
        s, ids, token = state(), [], torch.tensor([PROMPT[-1]])
        generator = torch.Generator().manual_seed(0)
        for position in range(new_tokens):
            if sample:
                q = torch.empty(1, model.output.decoder.weight.size(0)).exponential_(generator=generator)
                token = fn(token, torch.tensor([position]), *s, q)                              # (1,)
            else:
                logits = fn(token, torch.tensor([position]), *s)                                # (1, V)
                if logits_out is not None:
                    logits_out.append(logits.clone())
                token = logits.argmax(-1)
            ids.append(token.item())
        return ids

    def seqlab(_) -> list[int]:
        return list(generate_ids(model, PROMPT, SamplingOptions(max_tokens=new_tokens, stop_at_eos=False,
                                                                **DECODINGS[decoding])))

    with torch.no_grad():
        example = (torch.tensor([PROMPT[-1]]), torch.tensor([0]), *state())
        example += (torch.ones(1, model.output.decoder.weight.size(0)),) if sample else ()
        start = time.perf_counter()
        compiled = compile_step(step, example, variant)
        compile_s = time.perf_counter() - start
        contenders = {"eager": lambda: generate(step), "compiled": lambda: generate(compiled),
                      "generate_ids": lambda: seqlab(None)}
        times, _ = side_by_side(contenders, new_tokens)
        eager_logits, compiled_logits = [], []
        eager_ids = generate(step, eager_logits)
        compiled_ids = generate(compiled, compiled_logits)
    difference = (float((torch.stack(eager_logits) - torch.stack(compiled_logits)).abs().max())
                  if eager_logits else None)
    return {"model": name, "variant": label, "decoding": decoding, "tokens": new_tokens,
            "compile_s": compile_s, "same": eager_ids == compiled_ids,
            "max_logit_difference": difference,
            **{f"{who}_us_{clock}": statistics.median(t[clock]) for who, t in times.items() for clock in t}}


def sampled_step(step, blocked: tuple[int, ...], V: int, top_p: float):
    """`step` followed by the sampler, one function to compile: the never-generated ids blocked, top-p (sort,
    cumulative sum, the tokens whose mass before reaches p out) and the exponential race argmax(p / q) with
    q ~ Exp(1) drawn outside (a generator does not enter a compiled graph)."""
    import torch
    block = torch.zeros(V)
    block[list(blocked)] = float("-inf")

    def run(token, position, *rest):
        *s, q = rest
        logits = step(token, position, *s) + block                                  # (1, V)
        ordered, order = logits.sort(dim=-1, descending=True)
        probs = ordered.softmax(dim=-1)
        ordered = ordered.masked_fill(probs.cumsum(dim=-1) - probs >= top_p, float("-inf"))
        probs = logits.scatter(-1, order, ordered).softmax(dim=-1)                  # (1, V)
        return (probs / q).argmax(dim=-1)                                           # (1,)
    return run


def static_transformer_step(model, attention: str = "sdpa"):
    """A TransformerLM step over a fixed-size cache (L, 1, nh, C, hs): the T tokens (T,) are written at
    `positions` (T,) and attention reads all C slots under the mask `slot <= position`; the logits (1, V) are
    the last token's. T = 1 is a decoding step; T = C/2 at positions 0.. re-encodes the recent half when the
    window slides (the slots past it are masked), as `TransformerLM.step` does. `attention`: "sdpa"
    (`F.scaled_dot_product_attention` under the mask, an opaque kernel to the compiler) or "explicit" (scores,
    masked softmax, weighted sum: operations the compiler fuses into its own loops)."""
    import torch
    import torch.nn.functional as F
    L, C, D = len(model.blocks), model.context_length, model.embedding.weight.size(1)
    nh = model.num_heads
    hs = D // nh
    explicit = attention == "explicit"

    def step(tokens, positions, keys, values):                # tokens (T,), positions (T,)
        T = tokens.size(0)
        x = model.embedding(tokens[None]) + model.positions(positions)[None]       # (1, T, D)
        visible = (torch.arange(C)[None, :] <= positions[:, None])[None, None]     # (1, 1, T, C)
        for layer, block in enumerate(model.blocks):
            block_attention = block.attention
            q, k, v = block_attention.qkv(block.norm1(x)).view(1, T, 3, nh, hs).permute(2, 0, 3, 1, 4).unbind(0)
            keys[layer].index_copy_(2, positions, k)                               # (1, nh, C, hs)
            values[layer].index_copy_(2, positions, v)
            if explicit:                                                           # SLP 9.33: softmax(QK^T/sqrt d)V
                scores = (q @ keys[layer].transpose(-2, -1)) * hs ** -0.5          # (1, nh, T, C)
                y = scores.masked_fill(~visible, float("-inf")).softmax(dim=-1) @ values[layer]  # (1, nh, T, hs)
            else:
                y = F.scaled_dot_product_attention(q, keys[layer], values[layer], attn_mask=visible)
            x = x + block_attention.out(y.transpose(1, 2).reshape(1, T, D))
            x = x + block.feedforward(block.norm2(x))
        return model.output(model.final_norm(x[:, -1]))                            # (1, V)

    def state():
        return torch.zeros(L, 1, nh, C, hs), torch.zeros(L, 1, nh, C, hs)
    return step, state


def sliding_probe(new_tokens: int, label: str, attention: str) -> dict:
    """The transformer's whole generation (greedy, `new_tokens` past its context) on AOTInductor graphs: the
    prompt, each step and each re-encoded half window are `static_transformer_step` exported at their fixed
    sizes; against the same loop eager and `generate_ids`, whose ids it must give (blocked ids included)."""
    import torch

    from seqlab.decoding.search import SamplingOptions, blocked_tokens, generate_ids
    torch.set_num_threads(1)
    model = build("transformer")
    step, state = static_transformer_step(model, attention)
    C, V = model.context_length, model.output.decoder.weight.size(0)
    block = torch.zeros(V)
    block[list(blocked_tokens(model).ids)] = float("-inf")
    sizes = (1, C // 2, len(PROMPT) - 1)

    def generate(fns: dict) -> list[int]:
        keys, values = state()
        history, length, token, ids = list(PROMPT), len(PROMPT) - 1, PROMPT[-1], []
        fns[length](torch.tensor(PROMPT[:-1]), torch.arange(length), keys, values)
        for _ in range(new_tokens):
            if length == C:                                          # the cache is full: re-encode the recent half
                logits = fns[C // 2](torch.tensor(history[-(C // 2):]), torch.arange(C // 2), keys, values)
                length = C // 2
            else:
                logits = fns[1](torch.tensor([token]), torch.tensor([length]), keys, values)
                length += 1
            token = (logits + block).argmax(-1).item()
            ids.append(token)
            history.append(token)
        return ids

    with torch.no_grad():
        start = time.perf_counter()
        compiled = {T: compile_step(step, (torch.arange(T), torch.arange(T), *state()), dict(aoti=True))
                    for T in sizes}
        compile_s = time.perf_counter() - start
        contenders = {"eager": lambda: generate(dict.fromkeys(sizes, step)), "compiled": lambda: generate(compiled),
                      "generate_ids": lambda: list(generate_ids(model, PROMPT, SamplingOptions(
                          max_tokens=new_tokens, stop_at_eos=False, greedy=True)))}
        times, ids = side_by_side(contenders, new_tokens)
    return {"model": "transformer", "variant": label, "decoding": "greedy", "tokens": new_tokens,
            "compile_s": compile_s, "same": ids["compiled"] == ids["generate_ids"] == ids["eager"],
            "max_logit_difference": None,
            **{f"{who}_us_{clock}": statistics.median(t[clock]) for who, t in times.items() for clock in t}}


def decoder_probe(new_tokens: int, label: str, decoding: str) -> dict:
    """What a user gets: `generate_ids` on `TransformerLM.compiled_decoder()` against `generate_ids` on the model
    (the whole generation: the prompt, the steps, the window slides, the processors and the draws)."""
    import torch

    from seqlab.decoding.search import SamplingOptions, generate_ids
    torch.set_num_threads(1)
    model = build("transformer")
    start = time.perf_counter()
    decoder = model.compiled_decoder()
    compile_s = time.perf_counter() - start
    options = SamplingOptions(max_tokens=new_tokens, stop_at_eos=False, **DECODINGS[decoding])
    contenders = {"compiled": lambda: list(generate_ids(decoder, PROMPT, options)),
                  "generate_ids": lambda: list(generate_ids(model, PROMPT, options))}
    times, ids = side_by_side(contenders, new_tokens)
    return {"model": "transformer", "variant": label, "decoding": decoding, "tokens": new_tokens,
            "compile_s": compile_s, "same": ids["compiled"] == ids["generate_ids"], "max_logit_difference": None,
            **{f"{who}_us_{clock}": statistics.median(t[clock]) for who, t in times.items() for clock in t}}


def side_by_side(contenders: dict, new_tokens: int) -> tuple[dict, dict]:
    """Each contender warmed up, then PROBE_ROUNDS alternating rounds (the order reversed every other round):
    the per-token wall and CPU microseconds of each round, and each contender's last ids."""
    ids = {who: run() for who, run in contenders.items()}                          # warm up
    times = {who: {"wall": [], "cpu": []} for who in contenders}
    for round_ in range(PROBE_ROUNDS):
        for who, run in list(contenders.items())[:: -1 if round_ % 2 else 1]:
            wall, cpu = time.perf_counter(), time.process_time()
            ids[who] = run()
            times[who]["wall"].append((time.perf_counter() - wall) / new_tokens * 1e6)
            times[who]["cpu"].append((time.process_time() - cpu) / new_tokens * 1e6)
    return times, ids


def recurrent_step(model):
    """The LSTM LM's step (`RecurrentStack.step`'s cells) with the state as two tensors (L, 1, H) updated in
    place. Dynamo refuses to trace an nn.LSTM module ("Attempted to wrap RNN, GRU, or LSTM"), so the cells
    take each layer's weights, read out of the modules once."""
    import torch
    weights = [list(layer._flat_weights) for layer in model.rnn.layers]

    def step(token, position, h, c):
        x = model.embedding(token)                                                  # (1, E)
        for layer, w in enumerate(weights):
            x, c_layer = torch.lstm_cell(x, (h[layer], c[layer]), *w)               # (1, H)
            h[layer].copy_(x)
            c[layer].copy_(c_layer)
        return model.output(x)                                                      # (1, V)

    def state():
        return model.init_state(1)
    return step, state


# ------------------------------------------------------------------ the run

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline-src", help="the `src` directory of the baseline tree (a git worktree)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--new-tokens", type=int, default=512)
    parser.add_argument("--models", nargs="+", choices=tuple(MODELS), default=list(MODELS))
    parser.add_argument("--compile", action="store_true", help="also eager against compiled decoding steps")
    parser.add_argument("--compile-variants", nargs="+", choices=tuple(COMPILE_VARIANTS),
                        default=list(COMPILE_VARIANTS), help="the compiled variants --compile measures")
    parser.add_argument("--no-plain", action="store_true", help="leave out the plain-PyTorch sampler")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, to check the script runs")
    parser.add_argument("--worker", nargs=2, metavar=("MODEL", "DECODING"), help=argparse.SUPPRESS)
    parser.add_argument("--plain-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--probe", metavar="MODEL", help=argparse.SUPPRESS)
    parser.add_argument("--probe-variant", choices=tuple(COMPILE_VARIANTS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(*args.worker, args.new_tokens, args.plain_worker)))
        return 0
    if args.probe:
        print(json.dumps(compile_probe(args.probe, args.new_tokens, args.probe_variant)))
        return 0
    if args.quick:
        args.rounds, args.new_tokens = 1, 16
    sys.path.insert(0, str(HERE))
    import torch
    torch.set_num_threads(1)
    from common import device_name, record, write_records
    common = {"task": "lm", "device": f"{device_name('cpu')}, {cpu_flags()}"}
    contenders = {"new": NEW_SRC} | ({"baseline": Path(args.baseline_src)} if args.baseline_src else {})
    if not args.no_plain:
        contenders["plain"] = NEW_SRC
    records = []
    for name in args.models:
        for decoding in DECODINGS:
            runs = {who: [] for who in contenders}
            for round_ in range(args.rounds):                     # --rounds 0: only the compile probe
                for who, src in list(contenders.items())[:: -1 if round_ % 2 else 1]:
                    runs[who].append(run_worker(src, name, decoding, args.new_tokens, plain=who == "plain"))
            if args.rounds:
                records += summarize(name, decoding, runs, args.new_tokens, common, record)
    if args.compile:
        records += compile_rows(args, common, record)
    if not args.quick:
        write_records("generation_speed", records, "Generation speed at batch 1 (side by side, one run)", NOTES)
    return 0


def compile_rows(args, common: dict, record) -> list[dict]:
    """Each compiled variant of each model's step in its own process with a cold compile cache (a user's first
    compile): per-token figures of the compiled step, the same step eager and `generate_ids`, and their ratios."""
    records = []
    for name in (m for m in COMPILE_MODELS if m in args.models):
        for key in args.compile_variants:
            whole = any(COMPILE_VARIANTS[key][1].get(k) for k in ("sliding", "decoder"))
            if whole and name != "transformer":
                continue
            tokens = (args.new_tokens if whole                                      # the step alone: no window slide
                      else min(args.new_tokens, MODELS[name].get("context", args.new_tokens)))
            env = {**os.environ, "PYTHONPATH": str(NEW_SRC), "OMP_NUM_THREADS": "1",
                   "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}
            command = [sys.executable, __file__, "--probe", name, "--probe-variant", key, "--new-tokens", str(tokens)]
            out = subprocess.run(command, env=env, capture_output=True, text=True)
            if out.returncode:
                print(f"compile {name}, {key}: failed: {out.stderr.strip().splitlines()[-1:]}", flush=True)
                continue
            probe = json.loads(out.stdout.strip().splitlines()[-1])
            what = f"{name}, {probe['decoding']}, {tokens} tokens, fixed-shape step, {CONTEXT}: {probe['variant']}"
            difference = probe["max_logit_difference"]
            against = ("generate_ids'" + (" and the eager loop's" if "eager_us_cpu" in probe else "") if whole
                       else "the eager step's")
            note = (f"compile {probe['compile_s']:.1f} s; ids {'same as' if probe['same'] else 'DIFFER from'} "
                    f"{against}" + (f"; logits within {difference:.1e}" if difference is not None else ""))
            us = {who: probe.get(f"{who}_us_cpu") for who in ("compiled", "eager", "generate_ids")}
            records += [record(**common, arch=name, config=f"{what}: compiled", metric="tokens_per_s",
                               value=1e6 / us["compiled"], tokens_per_s=1e6 / us["compiled"],
                               wall_s=probe["compile_s"], note=note,
                               wall_tokens_per_s=1e6 / probe["compiled_us_wall"])]
            if us["eager"]:
                records.append(record(**common, arch=name, config=f"{what}: compiled / eager step, cpu time",
                                      metric="speedup", value=us["eager"] / us["compiled"], note=note))
            records += [record(**common, arch=name, config=f"{what}: compiled / generate_ids, cpu time",
                               metric="speedup", value=us["generate_ids"] / us["compiled"], note=note)]
            eager = f", eager step {us['eager']:.0f}" if us["eager"] else ""
            print(f"compile {name}, {probe['variant']}, {probe['decoding']}: us/token (cpu) compiled "
                  f"{us['compiled']:.0f}{eager}, generate_ids {us['generate_ids']:.0f}; {note}", flush=True)
    return records


def cpu_flags() -> str:
    """The CPU's bfloat16 and AVX-512 capability, from /proc/cpuinfo's flags (what the records' device names)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "flags unknown"
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    named = [f for f in ("avx512f", "avx512_bf16", "amx_bf16", "amx_tile") if f in flags]
    return ", ".join(named) if named else "no avx512/bf16 flags"


def summarize(name: str, decoding: str, runs: dict, new_tokens: int, common: dict, record) -> list[dict]:
    params = runs["new"][0]["params"]
    what = f"{name}, {decoding}, {new_tokens} tokens, batch 1, {CONTEXT}"
    records = []
    for who, rounds in runs.items():
        wall = [r["wall"] for r in rounds]
        records.append(record(**common, arch=name, config=f"{what}: {who}", metric="tokens_per_s",
                              value=statistics.median(wall), tokens_per_s=statistics.median(wall), params=params,
                              rounds=wall, cpu_tokens_per_s=statistics.median(r["cpu"] for r in rounds)))
    line = f"{name}, {decoding}: " + ", ".join(
        f"{who} {statistics.median(r['wall'] for r in rounds):,.0f} tok/s "
        f"(cpu {statistics.median(r['cpu'] for r in rounds):,.0f})" for who, rounds in runs.items())
    for other in ("baseline", "plain"):
        if other not in runs:
            continue
        same = all(a["ids"] == b["ids"] for a, b in zip(runs["new"], runs[other], strict=True))
        note = "same ids" if same else "ids differ" if other == "plain" else "IDS DIFFER"
        for clock in ("wall", "cpu"):
            new = [r[clock] for r in runs["new"]]
            old = [r[clock] for r in runs[other]]
            ratios = [a / b for a, b in zip(new, old, strict=True)]
            ratio = statistics.median(new) / statistics.median(old)
            label = f"new / {other}" + (", cpu time" if clock == "cpu" else "")
            records.append(record(**common, arch=name, config=f"{what}: {label}", metric="speedup", value=ratio,
                                  rounds=ratios, params=params, note=note,
                                  stdev=statistics.stdev(ratios) if len(ratios) > 1 else None))
            line += f"; {label} {ratio:.2f}"
        line += f" ({other}: {note})"
    print(line, flush=True)
    return records


if __name__ == "__main__":
    raise SystemExit(main())
