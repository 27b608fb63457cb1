"""`seqlab compare tagger`: the recipe of each architecture (benchmarks/tagging_table.py: one factor at a time
around the BiLSTM) and what the report shows of taggers: the tag pairs each confuses most on the development
file, and the winner's confusion heat map."""

from __future__ import annotations

import warnings
from collections import Counter
from pathlib import Path

from seqlab.compare.pages import DAMAGED_RUN, Figure, Section, one_line, safe_name
from seqlab.training.plots import plot_confusion

# each architecture's model options at size "small" (`seqlab.compare.run.recipe` sizes them)
RECIPES = {
    "window": {"encoder": "window", "window": 2, "hidden_size": 128},
    "rnn": {"encoder": "rnn", "bidirectional": False, "hidden_size": 128},
    "lstm": {"encoder": "lstm", "bidirectional": False, "hidden_size": 128},
    "bilstm": {"encoder": "lstm", "bidirectional": True, "hidden_size": 128},
    "gru": {"encoder": "gru", "bidirectional": False, "hidden_size": 128},
    "transformer": {"encoder": "transformer", "num_layers": 2, "num_heads": 4, "hidden_size": 128},
}
# the training options every recipe shares (AdamW with a cosine decay over the budget)
TRAIN = {"optimizer": "adamw", "lr": 0.001, "batch_size": 32, "warmup_steps": 100}
# the options `seqlab tune` searches (seqlab.tuning.space; the width is added there)
SPACE = {"lr": {"low": 3e-4, "high": 1e-2, "log": True}, "dropout": {"low": 0.0, "high": 0.6},
         "weight_decay": [0.0, 1e-4, 1e-3, 1e-2, 0.1]}
ARCH_SPACE: dict[str, dict] = {}
TOP_CONFUSIONS = 5            # tag pairs shown per tagger


def resize(options: dict, size: str) -> dict:
    """A recipe's options at `size` after the shared sizing: nothing more for a tagger."""
    return options


def sections(spec: dict, rows: list[dict], models: dict, winner, figures: Path) -> list[Section]:
    """The tag pairs each tagger confuses most on the development file, and the winner's confusion heat map."""
    section = Section("Confusions")
    dev = next((m.config.data.dev for m in models.values() if m.config.data.dev), "")
    if not dev:
        section.text("No development file to tag.")
        return [section]
    section.text(f"The tag pairs each model confuses most on {Path(dev).name} (gold → predicted, count).")
    table, counts = [], {}
    for arch, trained in models.items():
        pairs: Counter = Counter()

        def collect(gold, predicted, pairs=pairs):
            pairs.update((g, p) for gs, ps in zip(gold, predicted, strict=True) for g, p in zip(gs, ps, strict=True))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = trained.evaluate_file(dev, top_confusions=TOP_CONFUSIONS, on_predictions=collect)
        except DAMAGED_RUN as error:
            table.append([arch, f"not tagged: {one_line(error)}"])
            continue
        counts[arch] = pairs
        table.append([arch, ", ".join(f"{c['gold']} → {c['predicted']} ({c['count']:,})"
                                      for c in result["confusions"]) or "no mistakes"])
    section.blocks.append(("table", ["model", "most confused tag pairs"], table))
    if winner is not None and winner["arch"] in counts:
        pairs = counts[winner["arch"]]
        gold = Counter()
        for (g, _), n in pairs.items():
            gold[g] += n
        labels = sorted({t for pair in pairs for t in pair}, key=lambda t: (-gold[t], t))
        matrix = [[pairs[(g, p)] for p in labels] for g in labels]
        section.figure(Figure(f"{winner['arch']} (the winner): confusion on {Path(dev).name}",
                              plot_confusion(matrix, labels, figures / f"confusion-{safe_name(winner['arch'])}.png",
                                             f"{winner['arch']}: {Path(dev).name}")))
    return [section]
