"""bfloat16 on a CPU that has it: what `--precision auto` picks for four recipes, how much faster bf16 autocast
trains them than fp32, and whether it is as accurate (final training and valid loss within 0.5% of fp32's at
equal steps, same seed); plus the fused output layer's share of the measured bf16 matmul peak.

Recipes, each shortened to a fixed number of optimizer steps (one thread): the wikitext-2 tied 2 x 200 LSTM
(configs/wikitext2-lstm-tied-fast.yaml), the Tiny Shakespeare transformer (configs/shakespeare-char-transformer.
yaml), the UD English-EWT UPOS BiLSTM tagger (configs/ud-pos-bilstm-char.yaml) and the Multi30k GRU translator
(configs/multi30k-gru-dot.yaml). Each recipe trains with --precision fp32 and --precision auto side by side, the
order flipped every other recipe; where auto picks fp32, --precision bf16 trains too (its speed and accuracy
said, though auto does not use it). Wall and CPU seconds (the child's process time) are both recorded.

    python benchmarks/bf16.py                # full: about 8 minutes on an idle 2-core machine
    python benchmarks/bf16.py --quick        # a few steps of the two LM recipes, to check the script (writes nothing)

Results: benchmarks/results/bf16.json and .md (`speedup` "bf16 autocast / fp32", `tokens_per_s`, `loss` rows per
precision and their relative difference, `mfu` of the precision in use against its measured peak).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from common import device_name, record, write_records  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs"


def split_shakespeare(data: Path, folder: Path) -> tuple[Path, Path]:
    """Tiny Shakespeare's one file cut 90/10 by characters (the split nanoGPT trains and validates on)."""
    text = (data / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8")
    cut = int(0.9 * len(text))
    train, valid = folder / "shakespeare-train.txt", folder / "shakespeare-valid.txt"
    train.write_text(text[:cut], encoding="utf-8")
    valid.write_text(text[cut:], encoding="utf-8")
    return train, valid


def recipes(data: Path, folder: Path, quick: bool) -> list[dict]:
    """(name, dataset, family, options, steps) of every recipe (--quick: a smaller wikitext-2 valid file)."""
    ud, m30k = data / "ud_english_ewt", data / "multi30k" / "tok"
    shakespeare_train, shakespeare_valid = split_shakespeare(data, folder)
    wikitext_valid = data / "wikitext-2" / "valid.txt"
    if quick:
        wikitext_valid = folder / "wikitext-valid-head.txt"
        wikitext_valid.write_text("".join((data / "wikitext-2" / "valid.txt").open().readlines()[:300]))
    return [
        {"name": "wikitext-2 LSTM (tied 2 x 200, batch 20 x 35)", "dataset": "wikitext-2", "arch": "lstm",
         "family": "lm", "steps": 300,
         "options": ["--config", str(CONFIGS / "wikitext2-lstm-tied-fast.yaml"),
                     "--train", str(data / "wikitext-2" / "train.txt"),
                     "--valid", str(wikitext_valid)]},
        {"name": "Tiny Shakespeare transformer (4 x 128, context 64, batch 12)", "dataset": "tinyshakespeare",
         "arch": "transformer", "family": "lm", "steps": 500,
         "options": ["--config", str(CONFIGS / "shakespeare-char-transformer.yaml"),
                     "--train", str(shakespeare_train), "--valid", str(shakespeare_valid)]},
        {"name": "UD English-EWT UPOS BiLSTM tagger (128, char BiLSTM 25)", "dataset": "ud_english_ewt",
         "arch": "bilstm", "family": "tagger", "steps": 200,
         "options": ["--config", str(CONFIGS / "ud-pos-bilstm-char.yaml"),
                     "--train", str(ud / "en_ewt-ud-train.conllu"), "--dev", str(ud / "en_ewt-ud-dev.conllu")]},
        {"name": "Multi30k GRU translator (256, dot attention)", "dataset": "multi30k", "arch": "gru",
         "family": "seq2seq", "steps": 150,
         "options": ["--config", str(CONFIGS / "multi30k-gru-dot.yaml"),
                     "--train-src", str(m30k / "train.lc.norm.tok.de"),
                     "--train-tgt", str(m30k / "train.lc.norm.tok.en"),
                     "--dev-src", str(m30k / "val.lc.norm.tok.de"),
                     "--dev-tgt", str(m30k / "val.lc.norm.tok.en")]},
    ]


def train(recipe: dict, precision: str, steps: int, folder: Path, threads: int) -> dict:
    """One run: tokens/s (median of the log records after the first), final train and valid loss, the choice."""
    run = folder / f"{recipe['arch']}-{precision}"
    command = [sys.executable, "-m", "seqlab", "train", recipe["family"], *recipe["options"],
               "--max-steps", str(steps), "--eval-every", str(steps), "--log-every", str(max(1, steps // 6)),
               "--threads", str(threads), "--precision", precision, "--seed", "1111", "--no-progress",
               "--output", str(run), "--overwrite"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": str(threads)})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    logs = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    valid = [m for m in metrics if m.get("split") == "valid" and "loss" in m]
    chosen = next((line.removeprefix("precision: ") for line in done.stdout.splitlines()
                   if line.startswith("precision: ")), "?")
    speeds = [r["tokens_per_s"] for r in logs[1:]] or [logs[-1]["tokens_per_s"]]
    return {"tokens_per_s": statistics.median(speeds),
            "mfu": statistics.median(r.get("mfu", 0) for r in logs[1:] or logs),
            "train_loss": logs[-1]["loss"], "valid_loss": valid[-1]["loss"] if valid else None, "chosen": chosen,
            "bf16": chosen.startswith("bf16"), "wall_s": wall,
            "cpu_s": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)}


def output_layer_share(threads: int, seconds: float) -> tuple[float, float, float]:
    """The fused output layer (seqlab.training.output_loss.fused_token_loss) of the wikitext-2 LSTM, 700 rows x 200
    x 33,278 words, forward and backward under bf16 autocast: (achieved FLOP/s, bf16 peak FLOP/s, share)."""
    from seqlab.training import flops
    from seqlab.training.output_loss import fused_token_loss

    torch.set_num_threads(threads)
    layer = torch.nn.Linear(200, 33278)
    layer.weight_and_bias = lambda: (layer.weight, layer.bias)
    hidden = torch.randn(20, 35, 200, requires_grad=True)
    targets = torch.randint(4, 33278, (20, 35))

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            total, _ = fused_token_loss(layer, hidden, targets)
        total.backward()
    for _ in range(2):
        step()
    best, deadline = float("inf"), time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        began = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - began)
    achieved = 6 * 700 * 200 * 33278 / best
    peak = flops.measure_peak(torch.device("cpu"), torch.bfloat16)
    return achieved, peak, achieved / peak


def bf16_flags() -> str:
    from seqlab.training.devices import cpu_bf16_flags
    return ", ".join(cpu_bf16_flags()) or "no bf16 flags"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="a few steps of the two LM recipes; writes nothing")
    parser.add_argument("--only", nargs="*", default=None, help="recipe archs to run (lstm transformer bilstm gru)")
    args = parser.parse_args()
    from seqlab.training.devices import cpu_supports_bf16
    if not cpu_supports_bf16():
        print("this CPU has no bfloat16 kernels: --precision auto trains in fp32 here and bf16 is refused; nothing "
              "to compare")
        return
    device = f"{device_name('cpu')}; {bf16_flags()}"
    from seqlab.training.devices import cpu_bf16_flags
    # rows of a CPU with AVX512-BF16 but no AMX (e.g. AMD Zen 4) are kept beside the AMX ones, not over them
    kernels = "" if "amx_bf16" in cpu_bf16_flags() else ", AVX512-BF16 without AMX"
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        chosen = [r for r in recipes(args.data_dir, Path(tmp), args.quick)
                  if args.only is None or r["arch"] in args.only]
        if args.quick:
            chosen = [r for r in chosen if r["family"] == "lm"]
        for i, recipe in enumerate(chosen):
            steps = 12 if args.quick else recipe["steps"]
            order = ("fp32", "auto") if i % 2 == 0 else ("auto", "fp32")
            runs = {precision: train(recipe, precision, steps, Path(tmp), args.threads) for precision in order}
            if not runs["auto"]["bf16"]:
                runs["bf16"] = train(recipe, "bf16", steps, Path(tmp), args.threads)
            bf16 = runs["auto"] if runs["auto"]["bf16"] else runs["bf16"]
            fp32 = runs["fp32"]
            speedup = bf16["tokens_per_s"] / fp32["tokens_per_s"]
            cpu_ratio = fp32["cpu_s"] / bf16["cpu_s"]
            diff = {k: (bf16[k] - fp32[k]) / fp32[k] for k in ("train_loss", "valid_loss") if fp32[k]}
            print(f"{recipe['name']}, {steps} steps: auto -> {runs['auto']['chosen']}\n"
                  f"  fp32 {fp32['tokens_per_s']:,.0f} tok/s, bf16 {bf16['tokens_per_s']:,.0f} tok/s: {speedup:.2f}x "
                  f"(whole runs' CPU seconds {fp32['cpu_s']:.0f} / {bf16['cpu_s']:.0f}: {cpu_ratio:.2f}x)\n"
                  f"  train loss {fp32['train_loss']:.4f} / {bf16['train_loss']:.4f}, valid loss "
                  f"{fp32['valid_loss']} / {bf16['valid_loss']}: relative "
                  f"{', '.join(f'{k} {v:+.2%}' for k, v in diff.items())}",
                  flush=True)
            common = {"task": recipe["family"], "dataset": recipe["dataset"], "split": "train", "arch": recipe["arch"],
                      "device": device, "epochs": None}
            config = f"{recipe['name']}, {steps} steps, 1 thread{kernels}"
            records.append(record(**common, config=f"{config}: bf16 autocast / fp32", metric="speedup",
                                  value=round(speedup, 3), tokens_per_s=round(bf16["tokens_per_s"]),
                                  note=f"auto picks {runs['auto']['chosen']}; CPU-time ratio {cpu_ratio:.2f}"))
            for name, run in (("fp32", fp32), ("bf16 autocast", bf16)):
                records.append(record(**common, config=f"{config}, {name}", metric="tokens_per_s",
                                      value=round(run["tokens_per_s"]), wall_s=round(run["wall_s"], 1)))
                records.append(record(**common, config=f"{config}, {name}", metric="loss",
                                      value=round(run["train_loss"], 5), wall_s=round(run["wall_s"], 1)))
                if run["valid_loss"] is not None:
                    records.append(record(**{**common, "split": "valid"}, config=f"{config}, {name}", metric="loss",
                                          value=round(run["valid_loss"], 5)))
                peak = "bf16" if name != "fp32" else "fp32"
                records.append(record(**common, config=f"{config}, {name}, against the measured {peak} matmul peak "
                                      "(512^3, seqlab bench peak)", metric="mfu", value=run["mfu"]))
            for key, value in diff.items():
                records.append(record(**{**common, "split": key.split("_")[0]},
                                      config=f"{config}: (bf16 autocast - fp32) / fp32 loss, percent",
                                      metric="loss", value=round(100 * value, 3), note="relative difference, %"))
        achieved, peak, share = output_layer_share(args.threads, 1.0 if args.quick else 5.0)
        print(f"output layer 700 x 200 x 33,278 (fused, bf16 autocast, forward + backward): {achieved / 1e9:.1f} "
              f"GFLOP/s = {share:.1%} of the measured bf16 matmul peak {peak / 1e9:.1f} GFLOP/s")
        records.append(record(task="lm", dataset="wikitext-2", split="train", arch="output layer",
                              config="fused output layer 700 x 200 x 33,278, forward + backward, bf16 autocast, "
                                     f"against the measured bf16 matmul peak (512^3), 1 thread{kernels}", metric="mfu",
                              value=round(100 * share, 2), device=device, note=f"peak {peak / 1e9:.1f} GFLOP/s"))
    if not args.quick:
        path = write_records("bf16", records, "bfloat16 autocast against fp32 on the CPU",
                             "From benchmarks/bf16.py: each recipe shortened to a fixed number of steps, fp32 and "
                             "--precision auto side by side (bf16 too where auto keeps fp32), same seed, one thread.")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
