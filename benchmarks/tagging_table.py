"""The tagger architecture tables: every encoder, uni- vs bidirectional, softmax vs CRF, with and without
character features, on UD English-EWT UPOS and CoNLL-2003 NER.

    python benchmarks/tagging_table.py --dataset ud_english_ewt
    python benchmarks/tagging_table.py --dataset conll2003

Each row is one `benchmarks/tagging_quality.py` run (20 epochs, Adam with cosine decay, the best dev
epoch kept), varying the dataset's shipped config one factor at a time:
- the BiLSTM with character features, softmax and CRF (the reference pair);
- the same without character features, and unidirectional;
- rnn, gru, transformer (2 layers) and window encoders, with character features and the dataset's usual
  output layer (softmax for POS, CRF for NER).
Rows already in benchmarks/results/tagging_table_<dataset>.json are skipped unless --rerun, so an
interrupted table resumes. A full factorial (5 encoders x 2 x 2 x 2) would be 32 runs of ~5 minutes per
dataset on 2 CPU cores; one factor at a time is 10.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
CONFIGS = {"ud_english_ewt": ("configs/ud-pos-bilstm-char.yaml", "--no-crf"),
           "conll2003": ("configs/conll2003-ner-bilstm-crf-char.yaml", "--crf")}
CHAR = ["--char-features", "lstm"]
TRANSFORMER = ["--encoder", "transformer", "--layers", "2", "--heads", "4", "--dropout", "0.3", "--lr", "0.001",
               "--warmup-steps", "500"]


def variants(usual_output: str) -> dict[str, list[str]]:
    return {
        "bilstm-char-softmax": ["--encoder", "lstm", "--bidirectional", *CHAR, "--no-crf"],
        "bilstm-char-crf": ["--encoder", "lstm", "--bidirectional", *CHAR, "--crf"],
        "bilstm-softmax": ["--encoder", "lstm", "--bidirectional", "--char-features", "none", "--no-crf"],
        "bilstm-crf": ["--encoder", "lstm", "--bidirectional", "--char-features", "none", "--crf"],
        "unilstm-char-softmax": ["--encoder", "lstm", "--no-bidirectional", *CHAR, "--no-crf"],
        "unilstm-char-crf": ["--encoder", "lstm", "--no-bidirectional", *CHAR, "--crf"],
        "birnn-char": ["--encoder", "rnn", "--bidirectional", *CHAR, usual_output],
        "bigru-char": ["--encoder", "gru", "--bidirectional", *CHAR, usual_output],
        "transformer-char": [*TRANSFORMER, *CHAR, usual_output],
        "window-char": ["--encoder", "window", *CHAR, usual_output],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", required=True, choices=list(CONFIGS))
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--only", nargs="*", help="run only these variants")
    parser.add_argument("--rerun", action="store_true", help="run variants that already have results")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    config, usual = CONFIGS[args.dataset]
    results = f"tagging_table_{args.dataset}"
    path = RESULTS / f"{results}.json"
    for name, options in variants(usual).items():
        if args.only and name not in args.only:
            continue
        done = path.exists() and any(r["config"] == name for r in json.loads(path.read_text()))
        if done and not args.rerun:
            print(f"{name}: already measured, skipped")
            continue
        command = [sys.executable, str(Path(__file__).parent / "tagging_quality.py"), "--dataset", args.dataset,
                   "--config", config, "--name", name, "--data-dir", args.data_dir, "--results", results,
                   "--output", f"runs/bench/table-{args.dataset}-{name}",
                   "--title", f"Tagger architectures on {args.dataset} (one factor at a time)",
                   "--", *options, "--threads", str(args.threads), "--no-progress"]
        print(f"{name}: {' '.join(command[1:])}", flush=True)
        code = subprocess.call(command)
        if code:
            print(f"{name}: failed with exit code {code}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
