"""A sequence-to-sequence model's model card data (`seqlab.cards`): each split its pairs read as the run read
them (a file of pairs or aligned files; sources and targets compared side by side, by characters for a
character tokenizer), and the per-pair statistics its bootstrap intervals resample (`seqlab.cards.intervals`):
sacrebleu's BLEU and chrF statistics and ROUGE-1/2/L F1."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from seqlab.cards.bootstrap import Items
from seqlab.cards.splits import Split

SHEET_BYTES = 256 << 20         # files of pairs up to this size (together) get the full datasheet (streamed:
#                                 its time, not its memory, grows with the size: minutes at this one)


def training_data(config) -> dict | None:
    """A prepared folder's sheet, from its manifest, for --data or files too big for a datasheet in minutes (None:
    the files, read as every family's)."""
    from seqlab.families.seq2seq.sources import pair_files

    data = config.data
    if data.prepared:
        return prepared_sheet(data.prepared)
    splits = [f for split in ("train", "dev", "test") if (f := pair_files(data, split)) is not None]
    files = [path for f in splits for path in f.files if Path(path).is_file()]
    if sum(Path(path).stat().st_size for path in files) <= SHEET_BYTES:
        return None
    from seqlab.fileio import file_sha256

    sources = {f"{f.split} ({k})" if len(f.files) > 1 else f.split: {
        "path": str(Path(path).resolve()), "bytes": Path(path).stat().st_size, "sha256": file_sha256(path, f.what)}
        for f in splits for k, path in enumerate(f.files)}
    return {"unit": "pairs", "bundled": f"files of pairs of {sum(s['bytes'] for s in sources.values()) / 1e6:,.0f} MB "
                                        f"(over the {SHEET_BYTES >> 20} MB a datasheet reads: no duplicates or "
                                        "contamination figures)",
            "files": {}, "sources": sources, "splits": {}, "contamination": {}, "oov": {}}


def prepared_sheet(folder: str) -> dict:
    """What a prepared folder's manifest says of its data: the sources (path, bytes, SHA-256) and each split's
    pairs and tokens; the pairs themselves are not read again (duplicates and contamination are left out)."""
    import json

    try:
        manifest = json.loads((Path(folder) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = {}
    sources = {(name if len(records) == 1 else f"{name} ({side})"): record
               for name, records in manifest.get("sources", {}).items()
               for side, record in zip(("source", "target"), records, strict=False)}
    options = manifest.get("options", {})
    return {"unit": "pairs", "bundled": f"the prepared folder `{folder}` (`seqlab prepare seq2seq`; "
                                        f"{options.get('tokenizer', '?')} tokens)",
            "files": {}, "sources": sources,
            "splits": {name: {"units": split.get("items", 0),
                              "tokens": sum(split.get("streams", {}).get(side, {}).get("ids", 0)
                                            for side in ("source", "target")), "duplicates": {}}
                       for name, split in manifest.get("splits", {}).items()},
            "contamination": {}, "oov": {}}


def read_split(config, option: str) -> Split | None:
    """A split of the run's data config: its pairs, read one at a time (None when not given)."""
    from seqlab.families.seq2seq.sources import pair_files

    data = config.data
    found = pair_files(data, option)
    if found is None:
        return None
    names = (option, f"{option}_src", f"{option}_tgt")
    files = {name: getattr(data, name) for name in names if getattr(data, name)}
    return Split(option, files, ("source", "target"), lambda: (((p.source, p.target), ()) for p in found.pairs()))


def read_units(path: str | Path, fmt: str = "tsv", fields: tuple[str, str] = ("source", "target"),
               **options) -> dict:
    """A file's units (pairs of `fmt`, `fields` naming the source and target), their texts (the sources), for
    `seqlab.cards.datasheet.read_units`."""
    from seqlab.families.seq2seq.parallel import read_paired

    pairs = read_paired(path, fmt, *fields)
    return {"unit": "pairs", "units": len(pairs), "texts": [p.source for p in pairs], "labels": []}


def side_unit(config, side: str) -> str:
    """"char" where a side's tokenizer reads characters (50-character n-grams), else "word" (13-grams)."""
    return "char" if side in ("source", "target") and config.data.side_tokenizer(side) == "char" else "word"




def evaluation_file(data, option: str) -> tuple[str, dict, list[str]] | None:
    """The file of an evaluation split (a file of pairs, or the sources with the targets as an option), the
    options its evaluation takes, and the files it reads."""
    paired, source, target = getattr(data, option), getattr(data, f"{option}_src"), getattr(data, f"{option}_tgt")
    path, options = (paired, {}) if paired else (source, {"target": target})
    return (path, options, [f for f in (paired, source, target) if f]) if path else None


def interval_items(trained, path, progress, read_options: dict) -> tuple[Items, dict]:
    """One decoding of the file by the model's evaluation (beam 5 unless told), collecting each pair's
    statistics: (the items, the evaluation's own figures)."""
    read_options.setdefault("keep_hypotheses", False)
    items = seq2seq_items(read_options.get("bleu_tokenize", "13a"))
    result = trained.evaluate_files(path, progress=progress, on_predictions=items.collect, **read_options)
    return items, {name: result[name] for name in items.figures}


def seq2seq_items(bleu_tokenize: str = "13a") -> Items:
    """Per pair: sacrebleu's sentence statistics, which its corpus_score sums before computing the
    score (as `seqlab.metrics.CorpusScores` does): BLEU (Papineni et al. 2002) from the hypothesis and
    reference lengths and the clipped n-gram matches and totals, n = 1..4 (brevity penalty
    min(1, exp(1 - r / c)) times the geometric mean of the precisions); chrF (Popovic 2015, beta 2)
    from character n-gram matches and totals; and ROUGE-1/2/L F1 (`rouge-score`, Porter stemming),
    whose corpus figure is the mean over pairs (`seqlab.metrics.rouge`)."""
    from rouge_score import rouge_scorer
    from sacrebleu.metrics import BLEU, CHRF

    bleu, chrf = BLEU(tokenize=bleu_tokenize, force=True), CHRF()
    nb = 2 + 2 * bleu.max_ngram_order                        # lengths, then matches and totals per order
    nc = 3 * (chrf.char_order + chrf.word_order)             # per order: hypothesis, reference, matches
    kinds = ("rouge1", "rouge2", "rougeL")
    scorer = rouge_scorer.RougeScorer(list(kinds), use_stemmer=True)
    items = Items("pairs", [*(f"bleu/{i}" for i in range(nb)), *(f"chrf/{i}" for i in range(nc)), *kinds, "pairs"])

    def from_stats(metric, part: np.ndarray) -> np.ndarray:
        return np.array([metric._compute_score_from_stats([int(x) for x in row]).score for row in part])

    items.figures["bleu"] = lambda s: from_stats(bleu, s[:, :nb])
    items.figures["chrf"] = lambda s: from_stats(chrf, s[:, nb:nb + nc])
    for k, kind in enumerate(kinds):
        items.figures[kind] = lambda s, k=k: 100.0 * s[:, nb + nc + k] / np.maximum(items.column(s, "pairs"), 1)

    def collect(references: list[str], hypotheses: list[str]) -> None:
        if not hypotheses:
            return
        b = bleu._extract_corpus_statistics(hypotheses, [references])
        c = chrf._extract_corpus_statistics(hypotheses, [references])
        rows = []
        for hypothesis, reference, bs, cs in zip(hypotheses, references, b, c, strict=True):
            scores = scorer.score(reference, hypothesis)
            rows.append([*bs, *cs, *(scores[kind].fmeasure for kind in kinds), 1])
        items.add(rows)
    items.collect = collect
    return items
