"""A classifier's model card data (`seqlab.cards`): each split a file of documents read as the run read it
(texts and labels), and the per-document statistics its bootstrap intervals resample
(`seqlab.cards.intervals`): each document's cell of the confusion matrix (accuracy, macro-F1, per-class F1)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from seqlab.cards.bootstrap import Items, f1, ratio
from seqlab.cards.splits import Split
from seqlab.cards.splits import no_own_sheet as training_data  # noqa: F401  (the cards contract)
from seqlab.cards.splits import one_file as evaluation_file  # noqa: F401
from seqlab.cards.splits import word_units as side_unit  # noqa: F401


def read_split(config, option: str) -> Split | None:
    """A split of the run's data config: its documents, read one at a time (None when not given)."""
    from seqlab.families.classifier.config import iter_split

    path = getattr(config.data, option)
    if not path:
        return None
    return Split(option, {option: path}, ("text",), lambda: (((d.text,), () if d.label is None else (d.label,))
                                                             for d in iter_split(path, config.data,
                                                                                 f"{option} file")))


def read_units(path: str | Path, fmt: str = "tsv", columns=None, **options) -> dict:
    """A file's units (documents of `fmt`, its columns as `columns` says), their texts and labels, for
    `seqlab.cards.datasheet.read_units`."""
    from seqlab.data.documents import read_documents

    documents = read_documents(path, fmt, columns)
    return {"unit": "documents", "units": len(documents), "texts": [d.text for d in documents],
            "labels": [d.label for d in documents if d.label is not None]}


def interval_items(trained, path, progress, read_options: dict) -> tuple[Items, dict]:
    """One pass of the classifier's evaluation over the file, collecting each document's cell: (the items, the
    evaluation's own figures)."""
    items = classifier_items(trained.labels)
    result = trained.evaluate_file(path, progress=progress, on_predictions=items.collect, **read_options)
    return items, {"accuracy": result["accuracy"], "macro_f1": result["macro_f1"],
                   **{f"f1/{label}": result["per_class"][label]["f1"] for label in trained.labels}}


def classifier_items(labels: list[str]) -> Items:
    """Per document: a one in its cell (gold i, predicted j) of the K x K confusion matrix. From the
    summed matrix C (`seqlab.metrics.classification_scores`): accuracy = trace C / sum C; per class c,
    P = C_cc / sum_i C_ic, R = C_cc / sum_j C_cj, F1 = 2PR / (P + R); macro-F1 = the mean of the K F1."""
    K = len(labels)
    items = Items("documents", [f"confusion/{i}/{j}" for i in range(K) for j in range(K)])

    def per_class(s):
        matrix = s.reshape(-1, K, K)                                          # (B, K, K)
        right = np.diagonal(matrix, axis1=1, axis2=2)                         # (B, K)
        precision, recall = ratio(right, matrix.sum(axis=1)), ratio(right, matrix.sum(axis=2))
        return f1(precision, recall)                                          # (B, K)

    items.figures["accuracy"] = lambda s: ratio(np.trace(s.reshape(-1, K, K), axis1=1, axis2=2), s.sum(axis=1))
    items.figures["macro_f1"] = lambda s: per_class(s).sum(axis=1) / max(K, 1)
    for c, label in enumerate(labels):
        items.figures[f"f1/{label}"] = lambda s, c=c: per_class(s)[:, c]

    def collect(golds: list[int], predictions: list[int]) -> None:
        rows = np.zeros((len(golds), K * K))
        rows[np.arange(len(golds)), np.asarray(golds, dtype=int) * K + np.asarray(predictions, dtype=int)] = 1
        items.add(rows)
    items.collect = collect
    return items
