"""Generation speed at batch 1: tokens/s of `seqlab.decoding.search.generate_ids`, one source tree against another
(today's code against a baseline commit's), side by side in one run.

Models (random weights: the speed of a step does not depend on what the weights learned, except top-p's
nucleus, which is wide for an untrained model):
- transformer: the character transformer of nanoGPT's CPU Shakespeare setting (4 layers, 4 heads, width 128,
  context 64, pre-LN, GELU, V = 65: 818,241 parameters); 512 new tokens pass its context, so the window
  slides (the recent half is re-encoded once every 32 tokens);
- lstm: the word LM of wikitext-2, 2 x 200 LSTM, tied, V = 33,278 (7.33M parameters, 6.66M of them the
  embedding matrix that is also the output layer);
- lstm-10k: `benchmarks/lm_speed.py`'s LSTM, 2 x 200, untied, V = 10,003 (4.65M parameters).
Each generates 512 new tokens after a 4-token prompt, greedy and sampled (top-p 0.9, seed 0), one thread.

Each contender runs in its own subprocess (PYTHONPATH = its `src`), one per (model, decoding, round): it builds
the model from seed 0, warms up on 32 tokens, then times three generations (wall clock and process CPU time) and
reports the fastest (timeit's rule: the others were slowed by something else) and the ids. Rounds alternate
the contenders (ABAB..., the order reversed every other round); each figure is the median of the rounds, and
`speedup` is the ratio of the medians. These machines are shared, so the wall clock of a round is noisy; the
CPU-time figures leave out the time a busy machine kept the process waiting.

    git worktree add /tmp/seqlab-base 4c31fb6          # today's code before this work
    python benchmarks/generation_speed.py --baseline-src /tmp/seqlab-base/src --rounds 5
    python benchmarks/generation_speed.py --compile     # also: a static-cache step, eager against torch.compile
    python benchmarks/generation_speed.py --quick       # tiny, to check the script runs (writes nothing)

`--compile` measures, in this process, one transformer decoding step written with a fixed-size KV cache
(attention over all C slots under a mask, the position a tensor: the same shapes at every step, so it compiles
once) and the LSTM's step, eager against `torch.compile(fullgraph=True, dynamic=False)`: the compile time and
the per-token time of each (tokens identical to eager's is checked).

Results: benchmarks/results/generation_speed.json and .md (`common.write_records`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
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
}
REPEATS = 3                 # generations timed per process: its figure is the fastest (timeit's rule)
DECODINGS = {"greedy": dict(greedy=True), "top-p 0.9": dict(greedy=False, top_p=0.9, seed=0)}
NOTES = ("Batch 1, one thread, 512 new tokens after a 4-token prompt, random weights (seed 0). `baseline` is "
         "commit 4c31fb6 (before the per-token work of issue 19), `new` this tree; each contender runs in its own "
         "process, whose figure is the fastest of 3 generations; the rounds alternate the contenders, and every "
         "figure is a median of rounds. `speedup` rows: "
         "median(new) / median(baseline), wall clock (the `rounds` field holds the round-by-round ratios) and, in "
         "the `cpu time` rows, by process CPU time (what the process used, without the time it waited on a "
         "machine shared with other jobs). `same ids`: the baseline and new generations are the same tokens. "
         "The compile rows: one decoding step with a fixed-size KV cache (transformer) or the LSTM step, "
         "`torch.compile` against eager, in one process.")


# ------------------------------------------------------------------ one contender, in its own process

def build(name: str):
    import torch

    from seqlab.models.lm import LMConfig, build_lm
    torch.manual_seed(0)
    return build_lm(LMConfig(**MODELS[name])).eval()


def worker(name: str, decoding: str, new_tokens: int) -> dict:
    """Build the model, warm up, time one generation: tokens/s (wall, CPU) and the ids."""
    import torch

    from seqlab.decoding.search import SamplingOptions, generate_ids
    torch.set_num_threads(1)
    model = build(name)
    options = SamplingOptions(max_tokens=new_tokens, stop_at_eos=False, **DECODINGS[decoding])
    warm = SamplingOptions(max_tokens=32, stop_at_eos=False, **DECODINGS[decoding])
    list(generate_ids(model, PROMPT, warm))
    walls, cpus = [], []
    for _ in range(REPEATS):
        wall, cpu = time.perf_counter(), time.process_time()
        ids = list(generate_ids(model, PROMPT, options))
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return {"wall": new_tokens / min(walls), "cpu": new_tokens / min(cpus), "ids": ids,
            "params": sum(p.numel() for p in model.parameters())}


def run_worker(src: Path, name: str, decoding: str, new_tokens: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, __file__, "--worker", name, decoding, "--new-tokens", str(new_tokens)],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ torch.compile of the step (this tree)

def compile_probe(name: str, new_tokens: int) -> dict:
    """Eager against compiled: a fixed-shape decoding step, its compile time and its per-token time."""
    import torch
    torch.set_num_threads(1)
    model = build(name)
    step, state = (static_transformer_step(model) if name == "transformer" else recurrent_step(model))

    def generate(fn) -> tuple[float, list[int]]:
        s, ids, token = state(), [], torch.tensor([PROMPT[-1]])
        start = time.perf_counter()
        for position in range(new_tokens):
            logits = fn(token, torch.tensor([position]), *s)                       # (1, V)
            token = logits.argmax(-1)
            ids.append(token.item())
        return new_tokens / (time.perf_counter() - start), ids

    with torch.inference_mode():
        compiled = torch.compile(step, fullgraph=True, dynamic=False)
        start = time.perf_counter()
        compiled(torch.tensor([PROMPT[-1]]), torch.tensor([0]), *state())         # compiles here
        compile_s = time.perf_counter() - start
        generate(step)
        eager, compiled_speed = [], []
        for _ in range(3):
            speed, eager_ids = generate(step)
            eager.append(speed)
            speed, compiled_ids = generate(compiled)
            compiled_speed.append(speed)
    return {"compile_s": compile_s, "eager": statistics.median(eager), "compiled": statistics.median(compiled_speed),
            "same": eager_ids == compiled_ids, "tokens": new_tokens}


def static_transformer_step(model):
    """A TransformerLM step over a fixed-size cache (L, 1, nh, C, hs): the token is written at `position` (a
    tensor) and attention reads all C slots under the mask `slot <= position`. Positions stay below C (the
    probe does not slide the window)."""
    import torch
    import torch.nn.functional as F
    L, C, D = len(model.blocks), model.context_length, model.embedding.weight.size(1)
    nh = model.num_heads
    hs = D // nh

    def step(token, position, keys, values):                  # token (1,), position (1,)
        x = model.embedding(token[:, None]) + model.positions(position)            # (1, 1, D)
        visible = (torch.arange(C) <= position)[None, None, None, :]             # (1, 1, 1, C)
        for layer, block in enumerate(model.blocks):
            attention = block.attention
            q, k, v = attention.qkv(block.norm1(x)).view(1, 1, 3, nh, hs).permute(2, 0, 3, 1, 4).unbind(0)
            keys[layer].index_copy_(2, position, k)                                # (1, nh, C, hs)
            values[layer].index_copy_(2, position, v)
            y = F.scaled_dot_product_attention(q, keys[layer], values[layer], attn_mask=visible)  # (1, nh, 1, hs)
            x = x + attention.out(y.transpose(1, 2).reshape(1, 1, D))
            x = x + block.feedforward(block.norm2(x))
        return model.output(model.final_norm(x))[:, 0]                             # (1, V)

    def state():
        return torch.zeros(L, 1, nh, C, hs), torch.zeros(L, 1, nh, C, hs)
    return step, state


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
    parser.add_argument("--compile", action="store_true", help="also eager against torch.compile of a step")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, to check the script runs")
    parser.add_argument("--worker", nargs=2, metavar=("MODEL", "DECODING"), help=argparse.SUPPRESS)
    parser.add_argument("--probe", metavar="MODEL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(*args.worker, args.new_tokens)))
        return 0
    if args.probe:
        print(json.dumps(compile_probe(args.probe, args.new_tokens)))
        return 0
    if args.quick:
        args.rounds, args.new_tokens = 1, 16
    sys.path.insert(0, str(HERE))
    import torch
    torch.set_num_threads(1)
    from common import device_name, record, write_records
    common = {"task": "lm", "device": device_name("cpu")}
    contenders = {"new": NEW_SRC} | ({"baseline": Path(args.baseline_src)} if args.baseline_src else {})
    records = []
    for name in args.models:
        for decoding in DECODINGS:
            runs = {who: [] for who in contenders}
            for round_ in range(args.rounds):
                for who, src in list(contenders.items())[:: -1 if round_ % 2 else 1]:
                    runs[who].append(run_worker(src, name, decoding, args.new_tokens))
            records += summarize(name, decoding, runs, args.new_tokens, common, record)
    if args.compile:
        for name in ("transformer", "lstm"):
            env = {**os.environ, "PYTHONPATH": str(NEW_SRC), "OMP_NUM_THREADS": "1",
                   "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}                  # a cold compile, as a user's first
            tokens = min(args.new_tokens, MODELS[name].get("context", args.new_tokens))
            out = subprocess.run([sys.executable, __file__, "--probe", name, "--new-tokens", str(tokens)], env=env,
                                 capture_output=True, text=True, check=True)
            probe = json.loads(out.stdout.strip().splitlines()[-1])
            what = f"{name}, {probe['tokens']} tokens greedy, fixed-shape step (torch.compile probe)"
            note = f"compile {probe['compile_s']:.1f} s; " + ("same ids" if probe["same"] else "IDS DIFFER")
            records += [record(**common, arch=name, config=f"{what}: eager", metric="tokens_per_s",
                               value=probe["eager"], tokens_per_s=probe["eager"]),
                        record(**common, arch=name, config=f"{what}: compiled", metric="tokens_per_s",
                               value=probe["compiled"], tokens_per_s=probe["compiled"], wall_s=probe["compile_s"],
                               note=note),
                        record(**common, arch=name, config=f"{what}: compiled / eager", metric="speedup",
                               value=probe["compiled"] / probe["eager"], note=note)]
            print(f"compile {name}: eager {probe['eager']:,.0f} tok/s, compiled {probe['compiled']:,.0f} tok/s, "
                  f"{note}", flush=True)
    if not args.quick:
        write_records("generation_speed", records, "Generation speed at batch 1 (side by side, one run)", NOTES)
    return 0


def summarize(name: str, decoding: str, runs: dict, new_tokens: int, common: dict, record) -> list[dict]:
    params = runs["new"][0]["params"]
    what = f"{name}, {decoding}, {new_tokens} tokens, batch 1"
    records = []
    for who, rounds in runs.items():
        wall = [r["wall"] for r in rounds]
        records.append(record(**common, arch=name, config=f"{what}: {who}", metric="tokens_per_s",
                              value=statistics.median(wall), tokens_per_s=statistics.median(wall), params=params,
                              rounds=wall, cpu_tokens_per_s=statistics.median(r["cpu"] for r in rounds)))
    line = f"{what}: " + ", ".join(f"{who} {statistics.median(r['wall'] for r in rounds):,.0f} tok/s"
                                   for who, rounds in runs.items())
    if "baseline" in runs:
        same = all(a["ids"] == b["ids"] for a, b in zip(runs["new"], runs["baseline"], strict=True))
        note = "same ids" if same else "IDS DIFFER"
        for clock in ("wall", "cpu"):
            new = [r[clock] for r in runs["new"]]
            old = [r[clock] for r in runs["baseline"]]
            ratios = [a / b for a, b in zip(new, old, strict=True)]
            ratio = statistics.median(new) / statistics.median(old)
            label = "new / baseline" + (", cpu time" if clock == "cpu" else "")
            records.append(record(**common, arch=name, config=f"{what}: {label}", metric="speedup", value=ratio,
                                  target=2.0, rounds=ratios, params=params, note=note,
                                  stdev=statistics.stdev(ratios) if len(ratios) > 1 else None))
            line += f"; {label} {ratio:.2f}"
        line += f"; {note}"
    print(line, flush=True)
    return records


if __name__ == "__main__":
    raise SystemExit(main())
