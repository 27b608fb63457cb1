"""Classification speed on CPU, in documents per second, for trained runs.

    python benchmarks/classification_speed.py --run runs/bench/sst2-phrases-bilstm-max \
        --file ../shared/data/sst2/sentence_level/stsa.binary.test --format labeled-lines --dataset sst2

For each run, measured side by side in one process (so the ratios hold on a noisy machine):
  - `classify`: `TrainedClassifier.classify_documents` over the whole file in batches of --batch-size,
    everything included (tokenizing, encoding, batching, the forward pass, the probabilities) except
    reading the file;
  - the same documents one at a time (batch size 1);
  - a plain PyTorch loop over the same batches, already encoded: only `model(...)` and the softmax.
    `classify` / plain is the cost of our text pipeline.
Each figure is the best of --repeats runs. Records go to results/classification_speed.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from classification_quality import describe  # noqa: E402

import seqlab  # noqa: E402
from common import device_name, record, write_records  # noqa: E402
from seqlab.families.classifier.pipeline import read_split  # noqa: E402
from seqlab.families.classifier.task import document_batches, probabilities  # noqa: E402


def best_time(work, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def measure(run: str, args) -> list[dict]:
    """The records of one run."""
    classifier = seqlab.load(run)
    documents = read_split(args.file, classifier.config.data, "file", labelled=False, fmt=args.format)
    n = len(documents)
    single = documents[:args.single]
    encoded = classifier.vocabulary.encode_all([dataclasses.replace(d, label=None) for d in documents])
    batches = document_batches(encoded, classifier.vocabulary, args.batch_size, None)
    model = classifier.model

    @torch.no_grad()
    def plain():
        for batch in batches:
            probabilities(model, model(batch.words, batch.lengths, batch.features))

    timings = {
        "classify": best_time(lambda: classifier.classify_documents(documents, args.batch_size), args.repeats),
        "plain": best_time(plain, args.repeats),
        "single": best_time(lambda: classifier.classify_documents(single, 1), 1),
    }
    speeds = {"classify": n / timings["classify"], "plain": n / timings["plain"],
              "single": len(single) / timings["single"]}
    common = {"task": "classification", "dataset": args.dataset, "split": "test",
              "arch": describe(classifier.config),
              "params": model.num_parameters(), "device": device_name("cpu"), "documents": n,
              "batch_size": args.batch_size}
    records = [
        record(**common, config=Path(run).name, metric="documents_per_s", value=round(speeds["classify"], 1),
               wall_s=round(timings["classify"], 3), note="classify_documents, everything but reading the file"),
        record(**common, config=f"{Path(run).name} (plain loop)", metric="documents_per_s",
               value=round(speeds["plain"], 1), wall_s=round(timings["plain"], 3),
               note="model forward + softmax over pre-encoded batches"),
        record(**common, config=f"{Path(run).name} (one at a time)", metric="documents_per_s",
               value=round(speeds["single"], 1), wall_s=round(timings["single"], 3),
               note=f"classify_documents with batch size 1, first {len(single)} documents"),
        record(**common, config=Path(run).name, metric="speedup",
               value=round(speeds["classify"] / speeds["single"], 2),
               note="batched over one at a time"),
        record(**common, config=f"{Path(run).name} (plain loop)", metric="speedup",
               value=round(speeds["classify"] / speeds["plain"], 3),
               note="classify over the plain loop (below 1: the text pipeline's cost)"),
    ]
    print(json.dumps({k: round(v, 1) for k, v in speeds.items()}), run, file=sys.stderr)
    return records


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, action="append", help="run directory (repeatable)")
    parser.add_argument("--file", required=True, help="documents to classify (their labels are ignored)")
    parser.add_argument("--format", required=True, help="the file's format (tsv, csv, jsonl, labeled-lines, sst-tree)")
    parser.add_argument("--dataset", required=True, help="the dataset's folder name, for the records")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--single", type=int, default=500, help="documents timed one at a time")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    records = [r for run in args.run for r in measure(run, args)]
    write_records("classification_speed", records, "Classification speed (CPU)",
                  notes="`documents_per_s`: documents classified per second; `speedup`: a ratio measured side "
                        "by side in one process. The best of several timings each.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
