"""`seqlab compare seq2seq`: the recipe of each architecture (configs/multi30k-*.yaml) and what the report
shows of sequence-to-sequence models: the same development sources translated by each, and the winner's
attention heat map (Bahdanau et al. 2015, Fig. 3)."""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path

from seqlab.compare.pages import DAMAGED_RUN, Figure, Section, one_line, safe_name

# each architecture's model options at size "small" (`seqlab.compare.run.recipe` sizes them)
RECIPES = {
    "rnn": {"arch": "rnn", "embedding_size": 256, "hidden_size": 256},
    "lstm": {"arch": "lstm", "embedding_size": 256, "hidden_size": 256},
    "gru": {"arch": "gru", "embedding_size": 256, "hidden_size": 256},
    "gru-attention": {"arch": "gru", "attention": "dot", "bidirectional": True, "embedding_size": 256,
                      "hidden_size": 256},
    "transformer": {"arch": "transformer", "embedding_size": 256, "num_layers": 3, "num_heads": 4, "ff_size": 1024},
}
# the training options every recipe shares (AdamW with a cosine decay over the budget), and raw_text: like
# configs/multi30k-*.yaml, the recipes read tokenised text with --tokenizer word; raw text is refused, naming the
# options that read it (--tokenizer moses, or bpe --shared-vocab), rather than compared as a field of <unk>
TRAIN = {"optimizer": "adamw", "lr": 0.001, "batch_size": 64, "warmup_steps": 100, "raw_text": "refuse"}
# the options `seqlab tune` searches (seqlab.tuning.space; the width is added there)
SPACE = {"lr": {"low": 1e-4, "high": 3e-3, "log": True}, "dropout": {"low": 0.0, "high": 0.5},
         "label_smoothing": {"low": 0.0, "high": 0.2}}
ARCH_SPACE: dict[str, dict] = {}
SOURCES_SHOWN = 3             # development sources each model translates


def resize(options: dict, size: str) -> dict:
    """A recipe's options at `size` after the shared sizing: nothing more for a sequence-to-sequence model."""
    return options


def sections(spec: dict, rows: list[dict], models: dict, winner, figures: Path) -> list[Section]:
    """The first development sources translated by each model (beam 5), and the winner's attention over
    the first one, when its model attends."""
    section = Section("Translations")
    pairs = []
    for trained in models.values():
        try:
            pairs = first_pairs(trained.config.data, SOURCES_SHOWN)
        except DAMAGED_RUN as error:
            section.text(f"The development pairs cannot be read: {one_line(error)}")
            return [section]
        if pairs:
            break
    if not pairs:
        section.text("No development file to translate.")
        return [section]
    outputs = {}
    for arch, trained in models.items():
        attend = winner is not None and arch == winner["arch"] and trained.model.attends
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                outputs[arch] = trained.generate([p.source for p in pairs], beam=5, attention=attend)
        except DAMAGED_RUN as error:
            section.text(f"{arch}: no translations ({one_line(error)})")
    for k, pair in enumerate(pairs):
        table = [[arch + (" (winner)" if winner is not None and arch == winner["arch"] else ""), out[k].text]
                 for arch, out in outputs.items()]
        if pair.target is not None:
            table.append(["reference", pair.target])
        section.blocks.append(("table", ["source " + str(k + 1), pair.source], table))
    if winner is not None and winner["arch"] in outputs:
        first = outputs[winner["arch"]][0]
        if first.attention is not None:
            png = models[winner["arch"]].plot_attention(first, figures / f"attention-{safe_name(winner['arch'])}.png",
                                                        f"{winner['arch']}: source 1")
            section.figure(Figure(f"{winner['arch']} (the winner): attention over source 1", png))
        else:
            section.text(f"The winner, {winner['arch']}, has no attention to draw.")
    return [section]


def first_pairs(data, count: int) -> list:
    """The first `count` development pairs of a seq2seq run's data (aligned files or a file of pairs)."""
    from seqlab.data.stream import LineReader
    from seqlab.families.seq2seq.parallel import aligned_pairs, paired_reader

    if data.dev_src:
        with LineReader(data.dev_src, "development source", stdin=False) as sources:
            if data.dev_tgt:
                with LineReader(data.dev_tgt, "development target", stdin=False) as targets:
                    return list(itertools.islice(aligned_pairs(sources, targets, data.dev_src, data.dev_tgt), count))
            return list(itertools.islice(aligned_pairs(sources, None, data.dev_src, None), count))
    if data.dev:
        with LineReader(data.dev, "development file", stdin=False) as lines:
            read = paired_reader(data.format, data.source_field, data.target_field, data.dev, "development file")
            return list(itertools.islice(read(lines), count))
    return []
