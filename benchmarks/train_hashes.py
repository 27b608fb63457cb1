"""Tiny training runs of every family, hashed: proof that a refactoring of the training path changed nothing.

    PYTHONPATH=$BEFORE/src python benchmarks/train_hashes.py --out before.json  # BEFORE: a checkout of the code before
    PYTHONPATH=src python benchmarks/train_hashes.py --out after.json
    diff before.json after.json                                                          # nothing

Each run (`seqlab train ...` on the test fixtures, fixed seed, one thread, CPU, a few steps) is started as
`sys.executable -m seqlab`, so the code trained is the one PYTHONPATH names. The runs: a character LSTM LM
(its files prepared into the run's cache), a word transformer LM from a `seqlab prepare lm` folder (--data:
the streaming path), a BiLSTM tagger with a CRF, an LSTM classifier (development set held out), and a GRU
seq2seq with dot attention and copying. For each: the SHA-256 of model.safetensors, of metrics.jsonl and
train_log.jsonl without their timings, of every JSON file of the run, the run directory's file list, and
the log lines (stderr) with their timings masked. The output is a JSON object by run name.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
VOLATILE = {"elapsed_s", "tokens_per_s", "gflop_per_s", "mfu", "time", "date", "wall_s", "seconds",
            "peak_memory_mb", "memory_mb", "eta_s", "step_s"}
MACHINE = {"environment.json", "model_card.json"}     # the machine, the date and the session's times
COMMON = ["--seed", "3", "--threads", "1", "--device", "cpu", "--no-progress"]
S2S = FIXTURES / "seq2seq"


def runs(work: Path) -> dict[str, list[list[str]]]:
    """{name: the commands (after `seqlab`) that make the run in work/name}."""
    shakespeare = [f"--{split}" for split in ("train", "dev", "test")]
    files = [str(FIXTURES / f"shakespeare_{name}.txt") for name in ("train", "valid", "test")]
    text = [x for pair in zip(shakespeare, files, strict=True) for x in pair]
    return {
        "lm-char-lstm": [["train", "lm", *text, "--arch", "lstm", "--embedding-size", "16", "--hidden-size", "16",
                          "--batch-size", "4", "--seq-len", "16", "--max-steps", "12", "--eval-every", "6"]],
        "lm-prepared-transformer": [
            ["prepare", "lm", *text, "--tokenizer", "word", "--output", str(work / "lm-prepared-data"),
             "--workers", "1", "--no-progress"],
            ["train", "lm", "--data", str(work / "lm-prepared-data"), "--arch", "transformer",
             "--embedding-size", "16", "--heads", "2", "--layers", "1", "--ff-size", "32", "--context", "16",
             "--batch-size", "4", "--seq-len", "16", "--max-steps", "12", "--eval-every", "6"]],
        "tagger-crf": [["train", "tagger", "--train", str(FIXTURES / "ner.conll"), "--dev",
                        str(FIXTURES / "ner.conll"), "--format", "conll", "--crf", "--encoder", "lstm",
                        "--embedding-size", "16", "--hidden-size", "16", "--batch-size", "4", "--max-steps", "12",
                        "--eval-every", "6"]],
        "classifier-lstm": [["train", "classifier", "--train", str(FIXTURES / "classify" / "sentiment.tsv"),
                             "--dev-fraction", "0.25", "--format", "tsv", "--arch", "lstm", "--embedding-size", "16",
                             "--hidden-size", "16", "--batch-size", "4", "--max-steps", "12", "--eval-every", "6"]],
        "seq2seq-copy": [["train", "seq2seq", "--train-src", str(S2S / "train.src"), "--train-tgt",
                          str(S2S / "train.tgt"), "--dev-src", str(S2S / "dev.src"), "--dev-tgt", str(S2S / "dev.tgt"),
                          "--test-src", str(S2S / "test.src"), "--test-tgt", str(S2S / "test.tgt"), "--arch", "gru",
                          "--attention", "dot", "--copy", "--embedding-size", "16", "--hidden-size", "16",
                          "--batch-size", "8", "--max-steps", "12", "--eval-every", "6"]],
    }


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def records(path: Path) -> bytes:
    """A JSON-lines file without its timings."""
    if not path.is_file():
        return b""
    lines = [{k: v for k, v in json.loads(line).items() if k not in VOLATILE}
             for line in path.read_text().splitlines() if line.strip()]
    return json.dumps(lines, sort_keys=True).encode()


TIMING = re.compile(r"\d+(\.\d+)?\s*(s|ms|min|h|tokens/s|it/s|[a-z]+/s)\b|\d+:\d\d(:\d\d)?")


def hashes(run: Path, log: str) -> dict:
    files = sorted(str(p.relative_to(run)) for p in run.rglob("*") if p.is_file())
    found = {"files": files,
             "model.safetensors": sha((run / "model.safetensors").read_bytes()),
             "metrics.jsonl": sha(records(run / "metrics.jsonl")),
             "train_log.jsonl": sha(records(run / "train_log.jsonl")),
             "log": sha(TIMING.sub("#", log.replace(str(run.parent), "WORK")).encode())}
    for name in files:
        if name.endswith(".json") and not name.startswith("prepared/") and name not in MACHINE:
            found[name] = sha((run / name).read_bytes())
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path, help="the JSON file of hashes to write")
    parser.add_argument("--only", nargs="*", default=None, help="these runs alone")
    parser.add_argument("--keep", type=Path, default=None, help="keep the runs in this folder (default: a temp one)")
    args = parser.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("SEQLAB_CACHE_DIR", None)
    results = {}
    # one fixed path for every code version: config.json records --output
    work = args.keep or Path(tempfile.gettempdir()) / "seqlab-train-hashes"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for name, commands in runs(work).items():
        if args.only and name not in args.only:
            continue
        log = ""
        for command in commands:
            if command[0] == "train":
                command = [*command, *COMMON, "--output", str(work / name)]
            done = subprocess.run([sys.executable, "-m", "seqlab", *command], env=env, capture_output=True,
                                  text=True, cwd=work)
            if done.returncode:
                sys.exit(f"{name}: {' '.join(command)} failed:\n{done.stderr}")
            log += done.stdout + done.stderr
        results[name] = hashes(work / name, log)
        print(name, results[name]["model.safetensors"], results[name]["metrics.jsonl"], flush=True)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    args.out.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
