"""Fingerprints of tiny trained models, one per family and architecture: the SHA-256 of every state_dict tensor
(names, dtypes, shapes and bytes, in name order) and the final evaluation's figures, for a fixed seed.

Moving code (issue 45: the family model configs into their families) must leave them bit for bit the same: the
same module construction order gives the same random init, the same float operations the same training. Run it on
the code before and after and compare the two files:

    PYTHONPATH=$BEFORE/src python benchmarks/init_hashes.py --out /tmp/before.json
    PYTHONPATH=src python benchmarks/init_hashes.py --out /tmp/after.json
    cmp /tmp/before.json /tmp/after.json

It trains through the command line's `main` (the same on both sides of a move), in this process, one thread.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
PAIRS = FIXTURES / "seq2seq"
COMMON = ["--no-progress", "--seed", "7", "--max-steps", "6", "--eval-every", "3", "--batch-size", "4"]
LM = ["--train", str(FIXTURES / "shakespeare_train.txt"), "--dev", str(FIXTURES / "shakespeare_valid.txt"),
      "--embedding-size", "16", "--seq-len", "8"]
TAGGER = ["--train", str(FIXTURES / "ner.conll"), "--dev", str(FIXTURES / "ner.conll"), "--format", "conll",
          "--embedding-size", "8", "--hidden-size", "8"]
CLASSIFIER = ["--train", str(FIXTURES / "classify" / "sentiment.tsv"), "--dev",
              str(FIXTURES / "classify" / "sentiment.tsv"), "--format", "tsv", "--embedding-size", "8",
              "--hidden-size", "8"]
SEQ2SEQ = ["--train-src", str(PAIRS / "train.src"), "--train-tgt", str(PAIRS / "train.tgt"), "--dev-src",
           str(PAIRS / "dev.src"), "--dev-tgt", str(PAIRS / "dev.tgt"), "--embedding-size", "16"]
LAYERS, HEADS = ["--layers", "2"], ["--heads", "2"]
RNN_S2S, TRANSFORMER_S2S = ["--hidden-size", "16"], ["--num-heads", "2", "--ff-size", "32", "--max-positions", "96"]

RUNS = {
    "lm-ffn": ["lm", *LM, "--arch", "ffn", "--hidden-size", "24"],
    **{f"lm-{arch}": ["lm", *LM, "--arch", arch, "--hidden-size", "24", *LAYERS] for arch in ("rnn", "lstm", "gru")},
    "lm-transformer": ["lm", *LM, "--arch", "transformer", *LAYERS, *HEADS],
    "lm-lstm-adaptive": ["lm", *LM, "--arch", "lstm", "--hidden-size", "24", "--output-layer", "adaptive",
                         "--cutoffs", "20"],
    "lm-transformer-rotary-swiglu-tied": ["lm", *LM, "--arch", "transformer", *LAYERS, *HEADS, "--positions",
                                          "rotary", "--activation", "swiglu", "--tied", "--norm", "rmsnorm"],
    **{f"tagger-{encoder}": ["tagger", *TAGGER, "--encoder", encoder] for encoder in ("rnn", "lstm", "gru", "window")},
    "tagger-transformer": ["tagger", *TAGGER, "--encoder", "transformer", *HEADS],
    "tagger-gru-crf-cnn": ["tagger", *TAGGER, "--encoder", "gru", "--crf", "--char-features", "cnn"],
    **{f"classifier-{arch}": ["classifier", *CLASSIFIER, "--arch", arch] for arch in ("pooled", "rnn", "lstm", "gru")},
    "classifier-transformer": ["classifier", *CLASSIFIER, "--arch", "transformer", *HEADS],
    "classifier-lstm-bi-max-head": ["classifier", *CLASSIFIER, "--arch", "lstm", "--bidirectional", "--pooling",
                                    "max", "--head-size", "8"],
    **{f"seq2seq-{arch}": ["seq2seq", *SEQ2SEQ, "--arch", arch, *RNN_S2S] for arch in ("rnn", "lstm", "gru")},
    "seq2seq-transformer": ["seq2seq", *SEQ2SEQ, "--arch", "transformer", *TRANSFORMER_S2S],
    "seq2seq-gru-bi-attention-tied": ["seq2seq", *SEQ2SEQ, "--arch", "gru", *RNN_S2S, "--bidirectional",
                                      "--attention", "bilinear", "--tie-embeddings", "--init-range", "0.1"],
    "seq2seq-lstm-copy-coverage": ["seq2seq", *SEQ2SEQ, "--arch", "lstm", *RNN_S2S, "--attention", "additive",
                                   "--copy", "--coverage"],
    "seq2seq-lm": ["seq2seq", *SEQ2SEQ, "--arch", "lm", *TRANSFORMER_S2S, "--shared-vocab"],
}
TIMES = ("elapsed", "time", "per_s", "wall", "mfu", "flops", "memory", "date", "lr")


def weights_hash(path: Path) -> str:
    from safetensors.torch import load_file

    digest = hashlib.sha256()
    for name, tensor in sorted(load_file(str(path)).items()):
        digest.update(f"{name} {tensor.dtype} {tuple(tensor.shape)}".encode())
        digest.update(tensor.contiguous().view(-1).view(dtype=__import__("torch").uint8).numpy().tobytes())
    return digest.hexdigest()


def final_figures(run: Path) -> dict:
    """The last evaluation's figures (times left out)."""
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines() if line]
    last = [line for line in lines if line.get("split") in ("valid", "dev", "test")][-1]
    return {key: value for key, value in sorted(last.items())
            if isinstance(value, (int, float)) and not any(word in key for word in TIMES)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the JSON file to write")
    parser.add_argument("--only", nargs="*", default=None, help="these runs only (default: all)")
    args = parser.parse_args(argv)
    os.environ.setdefault("SEQLAB_CACHE_DIR", tempfile.mkdtemp(prefix="seqlab-hash-cache-"))
    import torch

    try:
        from seqlab.cli.main import main as seqlab
    except ImportError:                         # the code before issue 45 kept main in seqlab/cli/__init__
        from seqlab.cli import main as seqlab

    torch.set_num_threads(1)
    results = {}
    with tempfile.TemporaryDirectory(prefix="seqlab-hashes-") as folder:
        for name, argv_run in RUNS.items():
            if args.only and name not in args.only:
                continue
            run = Path(folder) / name
            code = seqlab(["train", *argv_run, *COMMON, "--output", str(run)])
            if code != 0:
                results[name] = {"exit": code}
                continue
            weights = {str(path.relative_to(run)): weights_hash(path) for path in sorted(run.rglob("*.safetensors"))}
            results[name] = {"weights": weights, "figures": final_figures(run)}
            print(name, results[name], file=sys.stderr)
    Path(args.out).write_text(json.dumps(results, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
