"""Adaptive softmax (`--output-layer adaptive`, Grave et al. 2017) against the full softmax on wikitext-2, for the
untied 2 x 200 LSTM word LM (batch 20 x 35): speed of a training step, and quality for the same wall-clock time.

(a) speed: forward + backward of one training step of the whole model (embedding, LSTM, output layer, loss)
    on the same real wikitext-2 batch, in one process, for three output layers: the full softmax on the plain
    path (logits + F.cross_entropy) and on the fused path (`--fused-output`'s linear_cross_entropy), and the
    adaptive softmax (its loss: the head and only the clusters the targets fall in). Rounds alternate the
    contenders (the order reversed every other round) after warm-up; each figure is the median of the rounds,
    and the ratios are median(softmax time) / median(adaptive time).
(b) quality: `seqlab train lm` for the same --max-time with each output layer, one after the other (never in
    parallel), on the recipe of configs/wikitext2-lstm-tied-short.yaml (SGD lr 20 with the cosine schedule
    decaying over the time budget, gradient clipping 0.25, dropout 0.2, U(-0.1, 0.1) init) untied (--no-tied:
    the adaptive softmax has no tied form); valid and test perplexity with the weights at the end (the best
    valid), training tokens/s (the median of the logging windows).

    python benchmarks/adaptive_softmax.py --threads 1                   # ~35 minutes: 2 x 12 min of training
    python benchmarks/adaptive_softmax.py --quick                       # a few rounds and 20 s runs; writes nothing

Results: benchmarks/results/adaptive_softmax.json and .md (`common.write_records`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

import seqlab

sys.path.insert(0, str(Path(__file__).parent))
from output_layer import run_rounds  # noqa: E402

from common import device_name, record, write_records  # noqa: E402
from seqlab.cli.main import main as seqlab_main  # noqa: E402
from seqlab.data.batching import StreamBatches  # noqa: E402
from seqlab.data.readers import encode_lines, read_lines  # noqa: E402
from seqlab.data.tokenizers import make_tokenizer  # noqa: E402
from seqlab.families.lm.model import LMConfig, build_lm  # noqa: E402
from seqlab.families.lm.task import token_loss  # noqa: E402
from seqlab.training.memory import keep_freed_memory  # noqa: E402
from seqlab.training.output_loss import fused_token_loss  # noqa: E402

CONFIG = Path(__file__).parent.parent / "configs" / "wikitext2-lstm-tied-short.yaml"
BATCH, SEQ_LEN = 20, 35
VARIANTS = {                     # name: the `seqlab train lm` options beyond the recipe
    "softmax": ["--output-layer", "softmax"],                # --fused-output auto picks the path
    "adaptive": ["--output-layer", "adaptive"],              # the default cutoffs
}


def wikitext_batch(train: Path):
    """The wikitext-2 vocabulary (as `seqlab train lm --tokenizer word` builds it), the training ids, and a
    training batch (B, T) from the middle of the stream."""
    tokenizer = make_tokenizer("word")
    lines = read_lines(str(train), "training file")
    tokenizer.fit(lines)
    tokens = tokenizer.tokenize_lines(lines)
    vocab = tokenizer.vocabulary(tokens)
    ids = encode_lines(tokens, vocab)
    batches = StreamBatches(ids, BATCH, SEQ_LEN)
    return vocab, ids, batches[len(batches) // 2]


def step_function(model, batch, loss_path: str):
    """One training step's forward + backward (no optimizer update), timed."""
    def run() -> float:
        model.zero_grad(set_to_none=True)
        start = time.perf_counter()
        state = model.init_state(BATCH)
        if loss_path == "plain":
            logits, _ = model(batch.inputs, state)                              # (B, T, V)
            loss_sum, count = token_loss(logits, batch.targets)
        elif loss_path == "fused":
            hidden, _ = model(batch.inputs, state, output="hidden")             # (B, T, D)
            loss_sum, count = fused_token_loss(model.output, hidden, batch.targets)
        else:
            hidden, _ = model(batch.inputs, state, output="hidden")             # (B, T, D)
            loss_sum, count = model.output.loss(hidden, batch.targets)
        (loss_sum / count).backward()
        return time.perf_counter() - start
    return run


def speed(train: Path, rounds: int, warmup: int, device: str) -> list[dict]:
    vocab, ids, batch = wikitext_batch(train)
    common = {"task": "lm", "dataset": "wikitext-2", "split": "train", "arch": "lstm 2x200 untied", "device": device}
    models, functions = {}, {}
    for name, output_layer, path in (("softmax plain", "softmax", "plain"), ("softmax fused", "softmax", "fused"),
                                     ("adaptive", "adaptive", "adaptive")):
        torch.manual_seed(0)
        config = LMConfig(arch="lstm", vocab_size=len(vocab), embedding_size=200, hidden_size=200, num_layers=2,
                          dropout=0.2, output_layer=output_layer)
        model = build_lm(config)
        if output_layer == "adaptive":
            model.output.order_by_frequency(torch.bincount(ids, minlength=len(vocab)))
        models[name], functions[name] = model, step_function(model, batch, path)
    samples = run_rounds(functions, rounds, warmup)
    medians = {name: statistics.median(seconds) for name, seconds in samples.items()}
    cutoffs = ",".join(map(str, models["adaptive"].output.cutoffs[:-1]))
    shape = f"N={BATCH * SEQ_LEN} ({BATCH}x{SEQ_LEN}), V={len(vocab):,}, fp32, forward+backward of the whole model"
    records = []
    for name, seconds in medians.items():
        what = name + (f" (cutoffs {cutoffs}, div_value 4)" if name == "adaptive" else "")
        records.append(record(**common, config=f"{what}: {shape}", metric="step_ms", value=seconds * 1e3,
                              params=models[name].num_parameters(), tokens_per_s=BATCH * SEQ_LEN / seconds,
                              rounds=samples[name]))
        print(f"  {name:>14}: {seconds * 1e3:7.1f} ms a step, {BATCH * SEQ_LEN / seconds:8,.0f} tokens/s, "
              f"{models[name].num_parameters():,} parameters", flush=True)
    for name in ("softmax plain", "softmax fused"):
        ratios = [s / a for s, a in zip(samples[name], samples["adaptive"], strict=True)]
        ratio = medians[name] / medians["adaptive"]
        records.append(record(**common, config=f"{name} / adaptive: {shape}", metric="speedup", value=ratio,
                              stdev=statistics.stdev(ratios) if len(ratios) > 1 else None, rounds=ratios))
        print(f"  adaptive is {ratio:.2f}x faster than {name}", flush=True)
    return records


def quality(data_dir: Path, max_time: float, threads: int, runs: Path, device: str) -> list[dict]:
    train, valid, test = (data_dir / "wikitext-2" / f"{split}.txt" for split in ("train", "valid", "test"))
    records = []
    for name, options in VARIANTS.items():
        output = runs / name
        command = ["train", "lm", "--config", str(CONFIG), "--train", str(train), "--valid", str(valid), "--test",
                   str(test), "--output", str(output), "--overwrite", "--no-tied", "--epochs", "100",
                   "--max-time", str(max_time), "--threads", str(threads), "--no-progress", *options]
        print(f"seqlab {' '.join(command)}", flush=True)
        start = time.time()
        if seqlab_main(command):
            raise SystemExit(f"the {name} run failed")
        wall = time.time() - start
        metrics = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
        log = [json.loads(line) for line in (output / "train_log.jsonl").read_text().splitlines()]
        config = json.loads((output / "config.json").read_text())
        model = config["model"]
        what = name + (f" (cutoffs {model['cutoffs']}, div_value {model['div_value']:g})" if name == "adaptive"
                       else f" (--fused-output {config['train']['fused_output']})")
        params = seqlab.load(output).model.num_parameters()
        common = {"task": "lm", "dataset": "wikitext-2", "arch": "lstm 2x200 untied", "device": device,
                  "config": f"{what}, --max-time {max_time:g}", "params": params, "wall_s": round(wall, 1),
                  "tokens_per_s": statistics.median(r["tokens_per_s"] for r in log),
                  "steps": log[-1]["step"], "epochs": round(log[-1]["step"] * BATCH * SEQ_LEN / 2_088_628, 3),
                  "seqlab_command": "seqlab " + " ".join(command)}
        for m in metrics:
            if m.get("final"):
                records.append(record(**common, split=m["split"], metric="perplexity", value=m["perplexity"]))
                print(f"  {name} {m['split']}: perplexity {m['perplexity']:.2f}", flush=True)
    return records


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=15, help="timed rounds of the speed comparison")
    parser.add_argument("--warmup", type=int, default=3, help="untimed rounds first")
    parser.add_argument("--max-time", type=float, default=720, help="seconds of training for each output layer")
    parser.add_argument("--runs", default="", help="where the training runs go (default: a temporary folder)")
    parser.add_argument("--skip", choices=("speed", "quality"), help="leave out one of the two parts")
    parser.add_argument("--quick", action="store_true", help="3 rounds, 20 s runs; writes nothing")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.quick:
        args.rounds, args.warmup, args.max_time = 3, 1, 20
    keep_freed_memory()
    data_dir = Path(args.data_dir)
    device = device_name("cpu")
    records = []
    if args.skip != "speed":
        print("speed: one training step, forward + backward", flush=True)
        records += speed(data_dir / "wikitext-2" / "train.txt", args.rounds, args.warmup, device)
    if args.skip != "quality":
        runs = Path(args.runs or tempfile.mkdtemp(prefix="seqlab-adaptive-"))
        records += quality(data_dir, args.max_time, args.threads, runs, device)
    if not args.quick:
        write_records("adaptive_softmax", records, "Adaptive softmax against the full softmax: wikitext-2, 2x200 LSTM",
                      notes=f"One process, {args.threads} thread(s). `step_ms`: the median over {args.rounds} "
                            f"rounds (after {args.warmup} warm-up rounds, contenders alternating) of one training "
                            "step's forward + backward on the same wikitext-2 batch; `speedup` = median(softmax "
                            "time) / median(adaptive time). `perplexity`: `seqlab train lm` for the same --max-time "
                            "with each output layer, run one after the other, on configs/wikitext2-lstm-tied-short"
                            ".yaml's recipe untied (SGD lr 20, cosine over the time budget, clip 0.25, dropout 0.2); "
                            "`tokens_per_s` is the median training throughput, `epochs` the share of the training "
                            "split seen. The machine's 2 cores were shared with other engineers' jobs.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
