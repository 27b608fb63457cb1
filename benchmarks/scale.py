"""Data bigger than memory: `seqlab prepare` and training from prepared shards at 10M, 100M and 1B word tokens.

    python benchmarks/scale.py                                   # 10M, 100M, 1B (about 40 minutes on 2 cores)
    python benchmarks/scale.py --sizes 10M --before dd00fc9      # and the in-memory path of that commit, at 10M

Corpora: wikitext-2's training text repeated to the size (the content does not matter here), written once into
--work-dir. For each size:
  prepare     `seqlab prepare lm --tokenizer word` with 1 and 2 --workers (1B: 2 only, unless --all-workers);
              char and BPE at the sizes of --other-tokenizers: prepare_tokens_per_s (ids per second),
              prepared_bytes, peak_rss_mb (the prepare's processes together: the workers' RSS added)
  train       the 2x200 word LSTM (`--arch lstm --layers 2 --embedding-size 200 --hidden-size 200`, batch
              20 x 35, --threads 1) from the prepared folder for --steps steps: seconds_to_first_step (launch
              to the first record of train_log.jsonl, written after step 1), peak_rss_mb, tokens_per_s (steady:
              the mean of the per-step records after the first 5)
  before      with --before COMMIT, the same training from the plain files on that commit's code (its
              in-memory path) at 10M, alternated with ours --rounds times for the tokens/s ratio
  ddp         with --ddp, 2 processes under torchrun (gloo, --threads 1 each) at the largest size: the
              two processes' peak RSS added, against 2 x one process's + 300 MB

Peak RSS is sampled from /proc every 50 ms over the process tree (the launcher excluded under torchrun).
Writes results/scale.json and .md (one row per figure: dataset corpus-10M / -100M / -1B, split train).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from memory_streaming import cpu_model, extract  # noqa: E402

from common import record, write_records  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SIZES = {"10M": 10_000_000, "100M": 100_000_000, "1B": 1_000_000_000, "2M": 2_000_000}      # 2M: a smoke test
LSTM = ["--arch", "lstm", "--layers", "2", "--embedding-size", "200", "--hidden-size", "200", "--batch-size", "20",
        "--seq-len", "35", "--log-every", "1", "--threads", "1", "--no-progress", "--eval-every", "0"]


class TreeSampler:
    """The peak of the summed resident memory of a process and its descendants (Linux /proc), sampled."""

    def __init__(self, pid: int, exclude_root: bool = False, interval: float = 0.05):
        self.pid, self.exclude_root, self.interval = pid, exclude_root, interval
        self.peak = 0.0
        self.per_pid: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _children(self) -> dict[int, int]:
        parents = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                    parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
                except (OSError, ValueError, IndexError):
                    pass
        tree, frontier = {self.pid}, [self.pid]
        while frontier:
            parent = frontier.pop()
            for pid, ppid in parents.items():
                if ppid == parent and pid not in tree:
                    tree.add(pid)
                    frontier.append(pid)
        return tree

    def _run(self) -> None:
        while not self._stop.is_set():
            total = 0.0
            for pid in self._children():
                if self.exclude_root and pid == self.pid:
                    continue
                try:
                    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                        if line.startswith("VmRSS:"):
                            mb = int(line.split()[1]) / 1024
                            total += mb
                            self.per_pid[pid] = max(self.per_pid.get(pid, 0.0), mb)
                except OSError:
                    pass
            self.peak = max(self.peak, total)
            time.sleep(self.interval)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak


def run(argv: list[str], env: dict | None = None, log: Path | None = None, exclude_root: bool = False,
        watch: Path | None = None) -> dict:
    """Run a command; its wall time, peak RSS (MB) and, with `watch`, the seconds until that file has a line."""
    start = time.time()
    process = subprocess.Popen(argv, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL,
                               stderr=open(log, "w") if log else subprocess.DEVNULL)   # noqa: SIM115
    sampler = TreeSampler(process.pid, exclude_root)
    first = None
    while process.poll() is None:
        if watch is not None and first is None and watch.exists() and watch.read_text().strip():
            first = time.time() - start
        time.sleep(0.02)
    peak = sampler.stop()
    if process.returncode != 0:
        tail = log.read_text()[-2000:] if log else ""
        raise SystemExit(f"{' '.join(argv)} failed ({process.returncode}):\n{tail}")
    if watch is not None and first is None:
        first = time.time() - start
    return {"wall_s": time.time() - start, "peak_rss_mb": peak, "first_s": first, "per_pid": sampler.per_pid}


def corpus(work: Path, data_dir: Path, size: str) -> tuple[Path, int]:
    """wikitext-2's training text repeated to at least the size in tokens (words and </s>)."""
    source = data_dir / "wikitext-2" / "train.txt"
    text = source.read_bytes()
    per_copy = sum(len(line.split()) + 1 for line in text.decode("utf-8").split("\n")[:-1])
    copies = math.ceil(SIZES[size] / per_copy)
    path = work / f"corpus-{size}.txt"
    if not path.exists() or path.stat().st_size != copies * len(text):
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as out:
            for _ in range(copies):
                out.write(text)
        tmp.replace(path)
    return path, copies * per_copy


def seqlab(*args: str) -> list[str]:
    return [sys.executable, "-m", "seqlab", *args]


def prepare(work: Path, data_dir: Path, size: str, path: Path, tokenizer: str, workers: int) -> tuple[Path, dict]:
    out = work / f"prepared-{size}-{tokenizer}-{workers}"
    valid = data_dir / "wikitext-2" / "valid.txt"
    figures = run(seqlab("prepare", "lm", "--train", str(path), "--valid", str(valid), "--tokenizer", tokenizer,
                         "--output", str(out), "--workers", str(workers), "--overwrite", "--no-progress"),
                  log=work / f"prepare-{size}-{tokenizer}-{workers}.log")
    manifest = json.loads((out / "manifest.json").read_text())
    figures["ids"] = manifest["splits"]["train"]["ids"] + manifest["splits"]["valid"]["ids"]
    figures["bytes"] = sum(f.stat().st_size for f in out.iterdir())
    return out, figures


def train(work: Path, name: str, argv: list[str], env: dict | None = None, exclude_root: bool = False) -> dict:
    output = work / f"run-{name}"
    shutil.rmtree(output, ignore_errors=True)
    figures = run([*argv, "--output", str(output)], env=env, log=work / f"train-{name}.log",
                  exclude_root=exclude_root, watch=output / "train_log.jsonl")
    records = [json.loads(line) for line in (output / "train_log.jsonl").read_text().splitlines()]
    speeds = [r["tokens_per_s"] for r in records[5:]] or [r["tokens_per_s"] for r in records]
    figures["tokens_per_s"] = sum(speeds) / len(speeds)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/data", type=Path)
    parser.add_argument("--work-dir", default="runs/bench/scale", type=Path)
    parser.add_argument("--sizes", nargs="+", default=["10M", "100M", "1B"], choices=list(SIZES))
    parser.add_argument("--other-tokenizers", nargs="*", default=["10M"], help="sizes that also get char and BPE")
    parser.add_argument("--all-workers", action="store_true", help="1 and 2 workers at 1B too")
    parser.add_argument("--steps", type=int, default=60, help="training steps per run")
    parser.add_argument("--before", metavar="COMMIT", help="the in-memory path of this commit, at 10M")
    parser.add_argument("--rounds", type=int, default=2, help="alternations of ours and --before for tokens/s")
    parser.add_argument("--ddp", action="store_true", help="2 processes under torchrun at the largest size")
    parser.add_argument("--keep", action="store_true", help="keep the corpora and prepared folders")
    args = parser.parse_args()
    work = args.work_dir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    data_dir = args.data_dir.resolve()
    valid = data_dir / "wikitext-2" / "valid.txt"
    env = {"SEQLAB_CACHE_DIR": str(work / "cache")}             # the FLOP peak, measured once, not per run
    device = f"{cpu_model()}, {os.cpu_count()} cores"
    rows = []
    subprocess.run(seqlab("bench", "peak", "--threads", "1"), check=True, env={**os.environ, **env},
                   stdout=subprocess.DEVNULL)                   # measured once now, not inside the first timed run

    def add(size, config, metric, value, **extra):
        rows.append(record(task="lm", dataset=f"corpus-{size}", split="train", arch="lstm 2x200" if "train" in config
                           or "DDP" in config else None, config=config, metric=metric, value=value,
                           device=device, **extra))
        print(f"corpus-{size:>4}  {config:<42} {metric:<22} {value:,.2f}", flush=True)

    for size in args.sizes:
        path, tokens = corpus(work, data_dir, size)
        print(f"corpus-{size}: {path} ({path.stat().st_size / 1e9:.2f} GB, {tokens:,} word tokens)", flush=True)
        tokenizers = ["word"] + (["char", "bpe"] if size in args.other_tokenizers else [])
        folder = None
        for tokenizer in tokenizers:
            workers = [1, 2] if (size != "1B" or args.all_workers) else [2]
            for n in workers:
                out, figures = prepare(work, data_dir, size, path, tokenizer, n)
                config = f"prepare {tokenizer}, {n} worker{'s' * (n > 1)}"
                add(size, config, "prepare_tokens_per_s", figures["ids"] / figures["wall_s"],
                    wall_s=round(figures["wall_s"], 1), ids=figures["ids"],
                    word_tokens_per_s=round((tokens + 217_646) / figures["wall_s"]))
                add(size, config, "peak_rss_mb", figures["peak_rss_mb"])
                add(size, config, "prepared_bytes", figures["bytes"])
                if tokenizer == "word" and n == max(workers):
                    folder = out
                elif not args.keep:
                    shutil.rmtree(out)
        ours = seqlab("train", "lm", "--data", str(folder), *LSTM, "--max-steps", str(args.steps))
        new = train(work, f"{size}-prepared", ours, env)
        add(size, "train from prepared shards", "seconds_to_first_step", new["first_s"])
        add(size, "train from prepared shards", "peak_rss_mb", new["peak_rss_mb"])
        add(size, "train from prepared shards", "tokens_per_s", new["tokens_per_s"])
        if args.before and size in ("10M", "2M"):
            with tempfile.TemporaryDirectory() as scratch:
                old_src = extract(args.before, Path(scratch))
                old = seqlab("train", "lm", "--train", str(path), "--valid", str(valid), "--tokenizer", "word",
                             *LSTM, "--max-steps", str(args.steps))
                speeds = {"ours": [], "before": []}
                first = None
                for k in range(args.rounds):
                    before = train(work, f"{size}-before-{k}", old, {**env, "PYTHONPATH": str(old_src)})
                    again = new if k == 0 else train(work, f"{size}-prepared-{k}", ours, env)
                    speeds["before"].append(before["tokens_per_s"])
                    speeds["ours"].append(again["tokens_per_s"])
                    first = first or before
                config = f"train in memory ({args.before}, from the text file)"
                add(size, config, "seconds_to_first_step", first["first_s"])
                add(size, config, "peak_rss_mb", first["peak_rss_mb"])
                add(size, config, "tokens_per_s", sum(speeds["before"]) / len(speeds["before"]),
                    values=speeds["before"])
                ratio = (sum(speeds["ours"]) / len(speeds["ours"])) / (sum(speeds["before"]) / len(speeds["before"]))
                add(size, "train from prepared shards / in memory", "tokens_per_s_ratio", ratio,
                    values=speeds["ours"], note=f"{args.rounds} alternated rounds of each")
        if args.ddp and size == args.sizes[-1]:
            one = new["peak_rss_mb"]
            ddp = train(work, f"{size}-ddp", [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                                              "-m", "seqlab", "train", "lm", "--data", str(folder), *LSTM,
                                              "--max-steps", str(args.steps)], env, exclude_root=True)
            add(size, "train DDP 2 processes", "peak_rss_mb", ddp["peak_rss_mb"],
                note=f"budget 2 x {one:,.0f} + 300 = {2 * one + 300:,.0f} MB (one process's peak)")
            add(size, "train DDP 2 processes", "tokens_per_s", ddp["tokens_per_s"])
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
            path.unlink()
    write_records("scale", rows, "Data bigger than memory: prepare and train at 10M, 100M and 1B word tokens",
                  notes="benchmarks/scale.py; peak RSS of the process tree, sampled every 50 ms")


if __name__ == "__main__":
    main()
