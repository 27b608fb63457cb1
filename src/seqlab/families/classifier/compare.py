"""`seqlab compare classifier`: the recipe of each architecture (benchmarks/classification_table.py) and what
the report shows of classifiers: each one's confusion matrix on the development set."""

from __future__ import annotations

from pathlib import Path

from seqlab.compare.pages import DAMAGED_RUN, Figure, Section, one_line, safe_name
from seqlab.runs.records import read_records
from seqlab.training.plots import plot_confusion

# each architecture's model options at size "small" (`seqlab.compare.run.recipe` sizes them)
RECIPES = {
    "pooled": {"arch": "pooled", "embedding_size": 128, "hidden_size": 128},
    "rnn": {"arch": "rnn", "embedding_size": 128, "hidden_size": 128},
    "lstm": {"arch": "lstm", "embedding_size": 128, "hidden_size": 128},
    "bilstm": {"arch": "lstm", "bidirectional": True, "pooling": "max", "embedding_size": 128, "hidden_size": 128},
    "gru": {"arch": "gru", "embedding_size": 128, "hidden_size": 128},
    "transformer": {"arch": "transformer", "num_layers": 2, "num_heads": 4, "embedding_size": 128,
                    "hidden_size": 128},
}
# the training options every recipe shares (AdamW with a cosine decay over the budget)
TRAIN = {"optimizer": "adamw", "lr": 0.001, "batch_size": 32, "warmup_steps": 100}
# the options `seqlab tune` searches (seqlab.tuning.space; the width is added there)
SPACE = {"lr": {"low": 3e-4, "high": 1e-2, "log": True}, "dropout": {"low": 0.0, "high": 0.6},
         "weight_decay": [0.0, 1e-4, 1e-3, 1e-2, 0.1]}
ARCH_SPACE: dict[str, dict] = {}


def resize(options: dict, size: str) -> dict:
    """A recipe's options at `size` after the shared sizing: nothing more for a classifier."""
    return options


def sections(spec: dict, rows: list[dict], models: dict, winner, figures: Path) -> list[Section]:
    """Each classifier's confusion matrix on the development set: its final valid record's (the table's
    figures), else the development file evaluated again."""
    section = Section("Confusion matrices", grid=True)
    for row in rows:
        arch, matrix = row["arch"], None
        final = [r for r in read_records(Path(row["run_dir"]) / "metrics.jsonl")
                 if r.get("final") and r.get("split") == "valid"] if row["status"] == "finished" else []
        if final and isinstance(final[-1].get("confusion"), list) and isinstance(final[-1].get("labels"), list):
            matrix, labels = final[-1]["confusion"], final[-1]["labels"]
        elif arch in models and models[arch].config.data.dev:
            try:
                result = models[arch].evaluate_file(models[arch].config.data.dev)
                matrix, labels = result["confusion"], result["labels"]
            except DAMAGED_RUN as error:
                section.text(f"{arch}: no confusion matrix ({one_line(error)})")
        if matrix is None:
            continue
        try:
            png = plot_confusion(matrix, [str(label) for label in labels], figures / f"confusion-{safe_name(arch)}.png",
                                 f"{arch}{' (winner)' if row['winner'] else ''}: development set")
        except DAMAGED_RUN as error:
            section.text(f"{arch}: no confusion matrix ({one_line(error)})")
            continue
        section.figure(Figure(f"{arch}{' (the winner)' if row['winner'] else ''}", png))
    if not section.blocks:
        section.text("No run has a confusion matrix yet.")
    return [section]
