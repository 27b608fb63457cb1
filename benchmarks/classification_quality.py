"""Train a classifier on a standard dataset and record its accuracy and macro-F1.

    python benchmarks/classification_quality.py --dataset sst2 --name bilstm-max -- \
        --arch lstm --bidirectional --pooling max
    python benchmarks/classification_quality.py --dataset sst2-phrases --name bilstm-max --target 84.0 -- ...
    python benchmarks/classification_quality.py --dataset sst --name lstm -- --arch lstm
    python benchmarks/classification_quality.py --dataset imdb --name pooled-bigrams --target 88.0 -- \
        --arch pooled --ngrams 2

Datasets (files under --data-dir):
    sst2           sst2/sentence_level/stsa.binary.{train,dev,test}: 6,920 / 872 / 1,821 sentences
    sst2-phrases   trained on every labelled phrase of the SST training trees (sst/train.txt, binary,
                   neutral dropped), dev on the dev trees' sentences; the test figure is measured on
                   sst2/sentence_level/stsa.binary.test (the same sentences as the test trees')
    sst            sst/{train,dev,test}.txt, 5 classes, the root labels: 8,544 / 1,101 / 2,210
    imdb           imdb/train.jsonl.gz, 10% held out as the development set (--dev-fraction 0.1), and
                   imdb/test.jsonl.gz: 22,500 / 2,500 / 25,000 reviews

Runs `seqlab train classifier` (the command line, as a user would), then records dev and test accuracy
and macro-F1, parameters, training documents/s (median over the logging windows) and wall time in
benchmarks/results/<results>.json and .md.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import seqlab  # noqa: E402
from common import device_name, record, write_records  # noqa: E402
from seqlab.cli.main import main as seqlab_main  # noqa: E402

DATASETS = {  # folder/train, folder/dev (or None), folder/test, options
    "sst2": ("sst2/sentence_level/stsa.binary.train", "sst2/sentence_level/stsa.binary.dev",
             "sst2/sentence_level/stsa.binary.test", ["--format", "labeled-lines", "--tokenizer", "whitespace"]),
    "sst2-phrases": ("sst/train.txt", "sst/dev.txt", "sst/test.txt",
                     ["--format", "sst-tree", "--sst-classes", "2", "--phrases", "--tokenizer", "whitespace"]),
    "sst": ("sst/train.txt", "sst/dev.txt", "sst/test.txt", ["--format", "sst-tree", "--tokenizer", "whitespace"]),
    "imdb": ("imdb/train.jsonl.gz", None, "imdb/test.jsonl.gz", ["--format", "jsonl", "--dev-fraction", "0.1"]),
}
RESULT_DATASET = {"sst2": "sst2", "sst2-phrases": "sst2", "sst": "sst", "imdb": "imdb"}


def describe(config) -> str:
    """The model in a few words, e.g. `bi-lstm, max` or `pooled (mean), 1-2-grams`."""
    model, data = config.model, config.data
    if model.arch in ("rnn", "lstm", "gru"):
        arch = ("bi-" if model.bidirectional else "uni-") + model.arch
        pooling = model.document_pooling
        if pooling == "last" and model.bidirectional:
            pooling = f"final states ({model.combine})"
        arch += (f" x{model.num_layers}" if model.num_layers > 1 else "") + f", {pooling}"
    elif model.arch == "transformer":
        arch = f"transformer x{model.num_layers}, {model.document_pooling}"
    elif model.arch == "pooled":
        arch = f"pooled embeddings, {model.document_pooling}" + (f", 1-{data.ngrams}-grams" if data.ngrams > 1 else "")
    else:
        arch = f"features ({data.features})"
    if model.output_layer == "sigmoid":
        arch += ", sigmoid"
    if data.lm_features:
        arch += ", +char-LM features" + (" (fwd+bwd)" if len(data.lm_features) == 2 else " (fwd)")
    return arch


def run(dataset: str, name: str, options: list[str], data_dir: str, output: Path | None = None) -> dict:
    """Train one classifier; return its figures: dev and test accuracy / macro-F1, params, speed, wall."""
    train, dev, test, data_options = DATASETS[dataset]
    folder = Path(data_dir)
    output = output or Path(f"runs/bench/{dataset}-{name}")
    command = ["train", "classifier", "--train", str(folder / train), "--test", str(folder / test),
               *(["--dev", str(folder / dev)] if dev else []), *data_options, "--output", str(output),
               "--overwrite", *options]
    start = time.time()
    code = seqlab_main(command)
    if code:
        raise SystemExit(code)
    return result_of(dataset, output, data_dir, time.time() - start)


def result_of(dataset: str, output: Path, data_dir: str, wall: float | None = None) -> dict:
    """The figures of a trained classifier's run directory (`wall`: seconds, default the card's training wall
    time): dev and test accuracy / macro-F1, params, speed, wall."""
    folder = Path(data_dir)
    if wall is None:
        wall = json.loads((output / "model_card.json").read_text())["model_details"]["wall_time_s"]
    metrics = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    log = [json.loads(line) for line in (output / "train_log.jsonl").read_text().splitlines()]
    classifier = seqlab.load(output)
    final = {m["split"]: m for m in metrics if m.get("final")}
    if dataset == "sst2-phrases":        # the test sentences as the sentence-level SST-2 file has them
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            seqlab_main(["evaluate", str(output), str(folder / DATASETS["sst2"][2]), "--format", "labeled-lines",
                         "--json", "--confusion-png", str(output / "confusion_stsa.binary.test.png")])
        final["test"] = json.loads(buffer.getvalue())
    periodic = [m for m in metrics if not m.get("final")]
    return {"arch": describe(classifier.config), "params": classifier.model.num_parameters(),
            "docs_per_s": statistics.median(r["tokens_per_s"] for r in log) if log else None,
            "wall_s": round(wall, 1), "epochs": periodic[-1]["epoch"] if periodic else None,
            "final": final, "output": str(output),
            "device": device_name("cpu" if classifier.config.train.device in ("auto", "cpu") else
                                  classifier.config.train.device)}


def records_of(dataset: str, name: str, result: dict, target: float | None = None, note: str = "") -> list[dict]:
    common = {"task": "classification", "dataset": RESULT_DATASET[dataset], "arch": result["arch"], "config": name,
              "params": result["params"], "wall_s": result["wall_s"], "device": result["device"],
              "epochs": result["epochs"], "docs_per_s_training": result["docs_per_s"]}
    if note:
        common["note"] = note
    rows = []
    for split, figures in result["final"].items():
        for metric in ("accuracy", "macro_f1"):
            rows.append(record(**common, split=split, metric=metric, value=round(figures[metric], 2),
                               target=target if split == "test" and metric == "accuracy" else None))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", required=True, choices=list(DATASETS))
    parser.add_argument("--name", required=True, help="the row's config name")
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--output", help="run directory (default: runs/bench/<dataset>-<name>)")
    parser.add_argument("--results", default="classification_quality", help="results file under benchmarks/results")
    parser.add_argument("--target", type=float, help="the test accuracy the issue asks for")
    parser.add_argument("--title", default="Classification quality", help="the Markdown table's title")
    parser.add_argument("--note", default="", help="a remark stored with the records")
    parser.add_argument("seqlab_options", nargs=argparse.REMAINDER,
                        help="`seqlab train classifier` options after --, e.g. -- --arch lstm --epochs 5")
    args = parser.parse_args()
    options = [a for a in args.seqlab_options if a != "--"]
    result = run(args.dataset, args.name, options, args.data_dir, Path(args.output) if args.output else None)
    records = records_of(args.dataset, args.name, result, args.target, args.note)
    write_records(args.results, records, args.title,
                  notes="`accuracy` and `macro_f1` in percent; `valid` is the development set (IMDB: 10% of the "
                        "training reviews held out). `target`: the test accuracy the issue asks for. No pretrained "
                        "embeddings anywhere. Rows run with `--dataset sst2-phrases` (every sst2 row here) trained on "
                        "the phrases of the SST training trees and take their test figure from "
                        "`sst2/sentence_level/stsa.binary.test`; each row's command is in the JSON.")
    for r in records:
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
