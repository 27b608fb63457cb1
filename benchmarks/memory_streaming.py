"""Peak memory and time to the first output line of `seqlab classify`, `tag` and `translate` as the
input grows: 1k to 300k lines, and one line of 50 MB. Streaming should make both flat.

    python benchmarks/memory_streaming.py                         # this code
    python benchmarks/memory_streaming.py --before 4d3b1c8        # and the code of a commit, for comparison
    python benchmarks/memory_streaming.py --replot                # the table and figure again, from the JSON

Models: small ones (embeddings 64, states 128; a BiLSTM tagger, a BiLSTM classifier with max pooling,
a GRU encoder-decoder with dot attention) trained for a few steps on tests/fixtures into --work-dir
(their size, not their quality, is what matters here). Inputs: sentences of --data-dir, cycled to the
number of lines (classify: SST-2 training sentences; tag: UD English-EWT training sentences, tokens
separated by spaces; translate: Multi30k German training sentences), and one line of the same words
--single-mb MB long.

Each run is one process, `python -m seqlab COMMAND RUN - --threads 1`, its input written into a pipe
as fast as it reads. Figures (metric names):
  peak_rss_mb     the process's peak resident memory (ru_maxrss of os.wait4 on that process), MB (2^20 B)
  first_output_s  seconds from the process's start to its first output line: Python, PyTorch and the
                  model's loading (the same for every input) included; what grows, if anything, is the
                  time the command waits for its input before answering
`--before COMMIT` measures the code of that commit too (git archive; the line counts only: the issue
reports 8-12 GB and a kill for one 50 MB line). Writes results/memory_streaming.json, .md and .png.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import RESULTS, command_line, record, today, write_records  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
SIZE = ["--embedding-size", "64", "--hidden-size", "128", "--dropout", "0", "--no-progress", "--threads", "1"]
MODELS = {  # command: (run name, training options, the dataset its inputs come from)
    "tag": ("bilstm-tagger", ["tagger", "--train", FIXTURES / "tagging.conllu", "--dev", FIXTURES / "tagging.conllu",
                       "--encoder", "lstm", "--bidirectional", "--max-steps", "50", "--batch-size", "2"],
            "ud_english_ewt"),
    "classify": ("bilstm-max-classifier", ["classifier", "--train", FIXTURES / "classify" / "sentiment.tsv", "--dev",
                                FIXTURES / "classify" / "sentiment.tsv", "--arch", "lstm", "--bidirectional",
                                "--pooling", "max", "--max-steps", "50", "--batch-size", "4"], "sst2"),
    "translate": ("gru-dot-translator", ["seq2seq", *(x for split in ("train", "dev") for side in ("src", "tgt")
                                                      for x in (f"--{split}-{side}", FIXTURES / "seq2seq" /
                                                                f"{split}.{side}")),
                                         "--arch", "gru", "--attention", "dot", "--max-steps", "50", "--batch-size",
                                         "16"], "multi30k"),
}
OPTIONS = {"tag": [], "classify": [], "translate": ["--beam", "1"]}


def sentences(command: str, data: Path) -> list[str]:
    """The lines an input is made of."""
    if command == "classify":
        path = data / "sst2" / "sentence_level" / "stsa.binary.train"
        return [line.split(" ", 1)[1] for line in path.read_text(encoding="utf-8").splitlines()]
    if command == "translate":
        return (data / "multi30k" / "tok" / "train.lc.norm.tok.de").read_text(encoding="utf-8").splitlines()
    out, tokens = [], []
    for line in (data / "ud_english_ewt" / "en_ewt-ud-train.conllu").read_text(encoding="utf-8").splitlines():
        fields = line.split("\t")
        if len(fields) == 10 and fields[0].isdigit():
            tokens.append(fields[1])
        elif not line.strip() and tokens:
            out.append(" ".join(tokens))
            tokens = []
    return out


def write_inputs(command: str, data: Path, folder: Path, sizes: list[int], single_mb: int) -> dict:
    """{label: (path, lines, words)}: the cycled sentences, and the one long line."""
    pool = sentences(command, data)
    inputs = {}
    for n in sizes:
        path = folder / f"{command}-{n}.txt"
        with open(path, "w", encoding="utf-8") as out:
            out.writelines(pool[i % len(pool)] + "\n" for i in range(n))
        inputs[f"{n:,} lines"] = (path, n, sum(len(pool[i % len(pool)].split()) for i in range(n)))
    path, rng, size, words = folder / f"{command}-single.txt", random.Random(0), 0, 0
    vocabulary = sorted({w for line in pool[:5000] for w in line.split()})
    with open(path, "w", encoding="utf-8") as out:
        while size < single_mb * 2 ** 20:
            piece = " ".join(rng.choices(vocabulary, k=1000)) + " "
            out.write(piece)
            size, words = size + len(piece.encode()), words + 1000
        out.write("\n")
    inputs[f"one line of {single_mb} MB"] = (path, 1, words)
    return inputs


# Run in a small helper process: Linux counts the memory of the process a command was forked from
# (this one, with PyTorch loaded) in the command's ru_maxrss, so the command is started from a process
# that holds only the standard library.
MEASURE = r"""
import json, os, subprocess, sys, threading, time
argv, source = json.loads(sys.argv[1]), sys.argv[2]
start = time.perf_counter()
process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
def feed():
    try:
        with open(source, "rb") as handle:
            while block := handle.read(1 << 20):
                process.stdin.write(block)
        process.stdin.close()
    except OSError:
        pass
errors = []
threads = [threading.Thread(target=feed), threading.Thread(target=lambda: errors.append(process.stderr.read()))]
for thread in threads:
    thread.start()
first, lines = None, 0
for _ in process.stdout:
    if first is None:
        first = time.perf_counter() - start
    lines += 1
_, status, usage = os.wait4(process.pid, 0)
process.returncode = os.waitstatus_to_exitcode(status)
wall = time.perf_counter() - start
for thread in threads:
    thread.join()
print(json.dumps({"peak_rss_mb": usage.ru_maxrss / 1024, "first_output_s": first, "wall_s": wall,
                  "output_lines": lines, "status": process.returncode, "stderr": errors[0].decode()[-2000:]}))
"""


def measure(argv: list[str], source: Path, src: Path) -> dict:
    """Run one command with `source` fed through a pipe; its peak RSS, first-output time and wall time."""
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", MEASURE, json.dumps([sys.executable, "-m", "seqlab", *argv]),
                           str(source)], env=env, capture_output=True, text=True, check=True)
    figures = json.loads(done.stdout)
    if figures["status"] != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({figures['status']}): {figures['stderr']}")
    return figures


def train(work: Path, src: Path) -> dict[str, Path]:
    runs = {}
    for command, (name, options, _) in MODELS.items():
        run = work / name
        if not (run / "model.safetensors").exists():
            subprocess.run([sys.executable, "-m", "seqlab", "train", *map(str, options), *SIZE, "--output", str(run),
                            "--overwrite"], check=True, env={**os.environ, "PYTHONPATH": str(src)},
                           stdout=subprocess.DEVNULL)
        runs[command] = run
    return runs


def parameters(run: Path) -> int:
    from safetensors.torch import load_file

    return sum(t.numel() for t in load_file(str(run / "model.safetensors")).values())


def extract(commit: str, folder: Path) -> Path:
    """The src/ folder of `commit`, extracted with git archive."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "src"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return folder / "src"


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        return next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name"))
    except (OSError, subprocess.CalledProcessError, StopIteration):
        return "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/data", type=Path)
    parser.add_argument("--work-dir", default="runs/bench/memory", type=Path, help="models and inputs go here")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000, 300_000])
    parser.add_argument("--single-mb", type=int, default=50, help="the one long line, in MB")
    parser.add_argument("--commands", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--before", metavar="COMMIT", help="also measure this commit's code (line counts only)")
    parser.add_argument("--replot", action="store_true", help="only write the table and figure again from the JSON")
    args = parser.parse_args()
    if args.replot:
        rows = json.loads((RESULTS / "memory_streaming.json").read_text())
        write_table(rows)
        plot(rows)
        return
    args.work_dir.mkdir(parents=True, exist_ok=True)
    src = ROOT / "src"
    runs = train(args.work_dir, src)
    device = f"CPU: {cpu_model()}, 2 cores, 1 PyTorch thread; {os.cpu_count()} CPUs visible"
    variants = {"streaming": src}
    with tempfile.TemporaryDirectory() as scratch:
        if args.before:
            variants[f"before ({args.before})"] = extract(args.before, Path(scratch))
        records = []
        for command in args.commands:
            name, _, dataset = MODELS[command]
            inputs = write_inputs(command, args.data_dir, args.work_dir, args.sizes, args.single_mb)
            for variant, code in variants.items():
                for label, (path, lines, words) in inputs.items():
                    if variant != "streaming" and lines == 1:
                        continue                      # the old code takes 8-12 GB on it (issue 14)
                    argv = [command, str(runs[command]), "-", "--threads", "1", *OPTIONS[command]]
                    figures = measure(argv, path, code)
                    print(f"{command:9} {variant:22} {label:18} {figures['peak_rss_mb']:8.1f} MB  first output "
                          f"{figures['first_output_s']:6.2f} s  wall {figures['wall_s']:7.1f} s", flush=True)
                    shown = " ".join(["seqlab", *argv[:1], name, "-", *argv[3:]])
                    config = (f"{label} through a pipe ({words:,} words); {variant}; {' '.join(argv[3:])}; "
                              f"{figures['output_lines']:,} output lines")
                    for metric in ("peak_rss_mb", "first_output_s"):
                        records.append(record(task=command, dataset=dataset, split="train", arch=name,
                                              config=config, metric=metric, value=round(figures[metric], 3),
                                              params=parameters(runs[command]),
                                              tokens_per_s=round(words / figures["wall_s"]),
                                              wall_s=round(figures["wall_s"], 2), device=device,
                                              command=f"{command_line()}  # runs: {shown}", date=today(),
                                              input=label, lines=lines, variant=variant))
    merged = write_records("memory_streaming", records, "Memory and first output of streaming inference")
    rows = json.loads(merged.read_text())
    write_table(rows)
    plot(rows)


def write_table(rows: list[dict]) -> None:
    """results/memory_streaming.md: one row per command and input, streaming beside the earlier code."""
    variants = sorted({r["variant"] for r in rows}, key=lambda v: v != "streaming")
    figure = {(r["task"], r["input"], r["variant"], r["metric"]): r["value"] for r in rows}
    inputs = sorted({(r["task"], r["lines"], r["input"]) for r in rows},
                    key=lambda t: (list(MODELS).index(t[0]), t[1] == 1, t[1]))
    head = " | ".join(f"peak RSS, MB: {v}" for v in variants) + " | " + " | ".join(
        f"first output, s: {v}" for v in variants)
    lines = ["# Memory and first output of streaming inference", "",
             "Generated by `benchmarks/memory_streaming.py` from `memory_streaming.json` (every figure's command and "
             "configuration are there). Each command ran as its own process, its input written into a pipe as fast "
             "as it read it; peak RSS is the process's `ru_maxrss` (os.wait4); first output is seconds from the "
             "process's start (Python, PyTorch and the model's loading included) to its first output line.", "",
             f"Device: {rows[0]['device']}. Date: {max(r['date'] for r in rows)}.", "",
             f"| command | input | {head} |", "|" + "---|" * (2 + 2 * len(variants))]
    for task, _, label in inputs:
        cells = [figure.get((task, label, v, m)) for m in ("peak_rss_mb", "first_output_s") for v in variants]
        lines.append(f"| {task} | {label} | " + " | ".join("" if c is None else f"{c:,.1f}" if c >= 10 else
                                                            f"{c:.2f}" for c in cells) + " |")
    commands = sorted({r["command"] for r in rows})
    lines += ["", "Commands:", "", *(f"- `{c}`" for c in commands)]
    (RESULTS / "memory_streaming.md").write_text("\n".join(lines) + "\n")


def plot(rows: list[dict]) -> None:
    """results/memory_streaming.png: peak RSS (top) and time to the first output line (bottom) against
    the input's lines, one column per command; the one long line is drawn at 1 line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = [t for t in MODELS if any(r["task"] == t for r in rows)]
    metrics = (("peak_rss_mb", "peak RSS, MB"), ("first_output_s", "first output line, s"))
    fig, axes = plt.subplots(2, len(tasks), figsize=(4.2 * len(tasks), 6.4), sharey="row", squeeze=False)
    for column, task in enumerate(tasks):
        for row, (metric, label) in enumerate(metrics):
            ax = axes[row][column]
            for variant in sorted({r["variant"] for r in rows}, key=lambda v: v != "streaming"):
                points = sorted((r["lines"], r["value"]) for r in rows if r["task"] == task and r["variant"] == variant
                                and r["metric"] == metric and r["lines"] > 1)
                if points:
                    ax.plot(*zip(*points, strict=True), marker="o", linestyle="-" if variant == "streaming" else "--",
                            label=variant)
            for r in rows:
                if r["task"] == task and r["lines"] == 1 and r["metric"] == metric:
                    ax.scatter([1], [r["value"]], marker="*", s=140, color="black", zorder=3,
                               label=f"{r['input']} ({r['variant']})")
            ax.set_xscale("log")
            ax.grid(alpha=0.3)
            if row == 0:
                ax.set_title(f"seqlab {task}")
            else:
                ax.set_xlabel("input lines")
            if column == 0:
                ax.set_ylabel(label)
    for row, (metric, _) in enumerate(metrics):                 # shared by the row: from 0 to the highest point
        axes[row][0].set_ylim(0, 1.08 * max(r["value"] for r in rows if r["metric"] == metric))
    axes[0][-1].legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(RESULTS / "memory_streaming.png", dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
