"""A tagger's model card data (`seqlab.cards`): each split a CoNLL file read as the run read it (sentences,
their tokens and tags), and the per-sentence statistics its bootstrap intervals resample
(`seqlab.cards.intervals`): tokens right and tokens (accuracy); with entity tags, the conlleval spans found
correctly, predicted and in gold, overall and per type (micro precision, recall and F1)."""

from __future__ import annotations

from pathlib import Path

from seqlab.cards.bootstrap import Items, f1, ratio
from seqlab.cards.splits import Split
from seqlab.cards.splits import no_own_sheet as training_data  # noqa: F401  (the cards contract)
from seqlab.cards.splits import one_file as evaluation_file  # noqa: F401
from seqlab.cards.splits import word_units as side_unit  # noqa: F401
from seqlab.data.tags import split_tag
from seqlab.metrics import span_scores
from seqlab.progress import progress_bar


def read_split(config, option: str) -> Split | None:
    """A split of the run's data config: its sentences, read one at a time (None when not given)."""
    from seqlab.families.tagger.config import iter_sentences

    path = getattr(config.data, option)
    if not path:
        return None
    return Split(option, {option: path}, ("text",), lambda: (((" ".join(s.tokens),), s.labels)
                                                             for s in iter_sentences(path, config.data,
                                                                                     f"{option} file")))


def read_units(path: str | Path, fmt: str = "conllu", **options) -> dict:
    """A file's units (sentences of a `conll` / `conllu` file), their texts and tags, for
    `seqlab.cards.datasheet.read_units`."""
    from seqlab.families.tagger.conll import read_labelled

    sentences = read_labelled(path, fmt)
    return {"unit": "sentences", "units": len(sentences), "texts": [" ".join(s.tokens) for s in sentences],
            "labels": [label for sentence in sentences for label in sentence.labels]}


def interval_items(trained, path, progress, read_options: dict) -> tuple[Items, dict]:
    """One pass of the tagger's evaluation over the file, collecting each sentence's statistics: (the items,
    the evaluation's own figures)."""
    items = tagger_items(trained, entity_types(trained))
    bar = progress_bar(None, progress, desc="scoring", unit="sentence", leave=False)
    with bar:
        def collect(golds, predictions):
            items.collect(golds, predictions)
            bar.update(len(golds))
        result = trained.evaluate_file(path, on_predictions=collect, **read_options)
    return items, {name: figure(result, name) for name in items.figures}


def tagger_items(trained, types: list[str] | None = None) -> Items:
    """Per sentence: tokens right and tokens (accuracy); with entity tags, the conlleval spans found
    correctly, predicted and in gold (`seqlab.metrics.span_scores`), overall and per type: micro
    P = correct / predicted, R = correct / gold, F1 = 2PR / (P + R) of the summed counts."""
    entity = trained.vocabulary.entity_tags
    types = list(types or [])
    groups = ["", *(f"/{t}" for t in types)] if entity else []
    items = Items("sentences", ["correct", "tokens", *(f"spans_{w}{g}" for g in groups
                                                        for w in ("correct", "predicted", "gold"))])
    items.figures["accuracy"] = lambda s: ratio(items.column(s, "correct"), items.column(s, "tokens"))
    for group in groups:
        def prf(s, group=group):
            correct = items.column(s, f"spans_correct{group}")
            precision = ratio(correct, items.column(s, f"spans_predicted{group}"))
            recall = ratio(correct, items.column(s, f"spans_gold{group}"))
            return precision, recall, f1(precision, recall)
        name = group.lstrip("/")
        for k, figure in enumerate(("precision", "recall", "f1")):
            items.figures[f"{figure}/{name}" if name else figure] = lambda s, prf=prf, k=k: prf(s)[k]

    def collect(golds: list[list[str]], predictions: list[list[str]]) -> None:
        rows = []
        for gold, predicted in zip(golds, predictions, strict=True):
            row = [sum(g == p for g, p in zip(gold, predicted, strict=True)), len(gold)]
            if entity:
                scores = span_scores([gold], [predicted])
                for part in [scores.overall, *(scores.by_type.get(t) for t in types)]:
                    row += [0, 0, 0] if part is None else [part.correct, part.predicted, part.gold]
            rows.append(row)
        items.add(rows)
    items.collect = collect
    return items


def entity_types(trained) -> list[str]:
    """The entity types of a tagger's tags (those its evaluation reports by type)."""
    if not trained.vocabulary.entity_tags:
        return []
    return sorted({split_tag(label)[1] for label in trained.vocabulary.labels} - {""})


def figure(result: dict, name: str) -> float:
    figure, _, kind = name.partition("/")
    return result["by_type"][kind][figure] if kind else result[figure]
