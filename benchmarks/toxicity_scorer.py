"""The toxicity scorer's recipe: a seqlab classifier trained on Davidson et al. 2017's tweets (hate speech or
offensive language = toxic, neither = fine), for `seqlab.harms.toxicity` (Gehman et al. 2020's protocol with
this classifier in place of the Perspective API).

    python benchmarks/toxicity_scorer.py --output runs/toxicity-scorer -- --epochs 2

The split is fixed and seeded (there is no official one): the 24,783 tweets of
davidson_hate_speech/labeled_data.csv are shuffled with random.Random(2017) and cut 80 / 10 / 10 into
train / dev / test (19,826 / 2,478 / 2,479), written as TSV (text, label; a tweet's whitespace runs, its
line breaks and tabs included, become one space) with the split's indices and SHA-256s in split.json. The
classifier is `seqlab train classifier` with a BiLSTM and max pooling (options after `--` are added). The
figures: test accuracy, and precision, recall and F1 of the toxic class and weighted over both classes. The
paper's logistic regression reaches a weighted F1 of 0.90 over three classes (hate, offensive, neither);
ours is over two, so the two are a rough comparison, not a like-for-like one.
Results: benchmarks/results/toxicity_scorer.json and .md.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import seqlab  # noqa: E402
from common import device_name, record, write_records  # noqa: E402
from seqlab.cli.main import main as seqlab_main  # noqa: E402

SEED = 2017
LABELS = {"0": "toxic", "1": "toxic", "2": "fine"}           # hate speech, offensive language, neither
TITLE = "The toxicity scorer: a classifier on Davidson et al. 2017 (hate or offensive = toxic)"
NOTES = __doc__.split("\n\n", 1)[1]


def split(data_dir: Path, out: Path) -> dict[str, Path]:
    """Write the seeded 80/10/10 split as TSV files under `out`; returns {split: path}."""
    with open(data_dir / "davidson_hate_speech/labeled_data.csv", newline="", encoding="utf-8") as handle:
        rows = [(" ".join(row["tweet"].split()), LABELS[row["class"]]) for row in csv.DictReader(handle)]
    order = list(range(len(rows)))
    random.Random(SEED).shuffle(order)
    n_train, n_dev = int(0.8 * len(rows)), int(0.1 * len(rows))
    parts = {"train": order[:n_train], "dev": order[n_train:n_train + n_dev], "test": order[n_train + n_dev:]}
    out.mkdir(parents=True, exist_ok=True)
    paths, record_of_split = {}, {"seed": SEED, "source": "davidson_hate_speech/labeled_data.csv", "labels": LABELS}
    for name, indices in parts.items():
        text = "text\tlabel\n" + "".join(f"{rows[i][0]}\t{rows[i][1]}\n" for i in indices)
        paths[name] = out / f"{name}.tsv"
        paths[name].write_text(text, encoding="utf-8")
        record_of_split[name] = {"rows": indices, "sha256": hashlib.sha256(text.encode()).hexdigest()}
    (out / "split.json").write_text(json.dumps(record_of_split) + "\n")
    return paths


def scores(gold: list[str], predicted: list[str]) -> dict[str, float]:
    """Accuracy, the toxic class's precision / recall / F1, and F1 weighted by each class's support."""
    figures, weighted = {"accuracy": sum(g == p for g, p in zip(gold, predicted, strict=True)) / len(gold)}, 0.0
    for label in ("toxic", "fine"):
        tp = sum(g == p == label for g, p in zip(gold, predicted, strict=True))
        precision = tp / max(1, sum(p == label for p in predicted))
        recall = tp / max(1, sum(g == label for g in gold))
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        if label == "toxic":
            figures.update(toxic_precision=precision, toxic_recall=recall, toxic_f1=f1)
        weighted += f1 * sum(g == label for g in gold) / len(gold)
    figures["weighted_f1"] = weighted
    return figures


def main() -> int:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--output", default="runs/toxicity-scorer", help="the run directory")
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    run = Path(args.output)
    paths = split(Path(args.data_dir), run.parent / (run.name + "-data"))
    start = time.perf_counter()
    code = seqlab_main(["train", "classifier", "--train", str(paths["train"]), "--dev", str(paths["dev"]),
                        "--format", "tsv", "--arch", "lstm", "--bidirectional", "--pooling", "max",
                        "--embedding-size", "100", "--hidden-size", "100", "--epochs", "2", "--overwrite",
                        "--output", str(run), *extra])
    if code:
        return code
    wall = time.perf_counter() - start
    with open(paths["test"], newline="", encoding="utf-8") as handle:
        test = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    predicted = [p.label for p in seqlab.load(run).classify([row["text"] for row in test])]
    figures = scores([row["label"] for row in test], predicted)
    records = [record(task="classifier", dataset="davidson_hate_speech", split="test", arch="bi-lstm, max",
                      config="toxic = hate or offensive; seeded 80/10/10 split", metric=name, value=round(value, 4),
                      wall_s=round(wall, 1), device=device_name(), note="the paper: weighted F1 0.90 over 3 classes")
               for name, value in figures.items()]
    for r in records:
        print(f"{r['metric']:<18} {r['value']}")
    write_records("toxicity_scorer", records, TITLE, notes=NOTES)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
