"""How much of each shared dataset's evaluation splits is already in its training split (`seqlab.cards.datasheet`).

    python benchmarks/contamination.py --data-dir ../shared/data

For every dataset of --data-dir, each evaluation split's units are checked against the training split's
(Brown et al. 2020, GPT-3, appendix C): `verbatim_pct` is the share of units whose whitespace-normalised text
is a whole training unit; `contamination_pct` the share that shares an n-gram of 13 words (50 characters for
character data) with some training unit, a unit shorter than n counting only when verbatim; `long_pct` the
same share among the units of at least n words alone (short units are often headings or one-word answers).
`train_duplicates_pct`: the training units whose text repeats an earlier training unit (a unit seen three times
is two duplicates). Units are read by seqlab's own readers (`datasheet.read_units`): LM lines (wikitext-2,
PTB; blank lines dropped), tagger sentences (UD English-EWT conllu, CoNLL-2003 conll, -DOCSTART- ignored; the
text is the tokens joined by spaces), classifier documents (SST-2 labelled lines and GLUE TSVs, SST root
sentences, IMDB reviews, the Davidson tweets), seq2seq pairs (AESLC emails; Multi30k captions, each side's
line-aligned file read as lines: the German source and the English target). N-grams never cross units.

Splits that are not files: Tiny Shakespeare is one file, split as seqlab's LM default does
(`seqlab.data.readers.default_corpus`: the first lines up to 90% of the characters are train, the rest
test) and checked two ways with 50-character n-grams: by line (most lines are shorter than 50 characters,
so are judged verbatim only) and by speech (the blank-line-separated blocks of each part, lines joined by a
space). Davidson et al.'s tweets have no official split; they are cut by benchmarks/toxicity_scorer.py's
seeded 80/10/10 split (random.Random(2017)). GLUE SST-2's test split is unlabelled and read as texts.
Each dataset's wall_s counts its reading, indexing and checking; total_wall_s every dataset (single thread).

Reading the figures (measured 2026-11-25, looking at the most frequent shared 13-grams): most short-unit
hits are headings and formulaic lines (wikitext-2's section headings such as `= = History = =`, Shakespeare's
speaker names, CoNLL-2003's sports tables such as `W L PCT GB`, EWT's email sign-offs such as `Thanks`), so
`long_pct` is the better guide. Among long units the shared 13-grams are mostly boilerplate, not leaked
examples: AESLC's emails share mass mailings and signatures (the same Lexis-Nexis notice or IT instructions
in several inboxes), PTB's share financial formulae (`$ N million or $ N a share on sales of $ N`), IMDB's
reviewers' sign-offs and rating keys, the Davidson tweets' retweets and quote-tweets of one tweet and
repeated spam ads. Verbatim long units are the real leaks: 123 IMDB test reviews (0.49%) are whole train
reviews.
Results: benchmarks/results/contamination.json and .md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from common import RESULTS, device_name, record, write_records  # noqa: E402
from seqlab.cards.data import read_units
from seqlab.cards.datasheet import TrainIndex, duplicate_lines, normalise  # noqa: E402
from seqlab.data.documents import Columns, read_documents  # noqa: E402

TITLE = "Contamination of evaluation splits by their training split (Brown et al. 2020, app. C)"
NOTES = __doc__.split("\n\n", 1)[1]


def units(path: Path, task: str, fmt: str = "text", **options) -> list[str]:
    """The unit texts of one split, by `read_units` (seqlab's readers for the task's format)."""
    return read_units(path, task, fmt, **options)["texts"]


def shakespeare(path: Path) -> dict[str, dict[str, list[str]]]:
    """Tiny Shakespeare split as `default_corpus` splits it (train: the first lines holding 90% of the
    characters), as lines and as speeches (blank-line-separated blocks)."""
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")[:-1]
    target, seen, cut = 0.9 * len(text), 0, 0
    while seen < target:                                     # default_corpus's rule, on --data-dir's copy
        seen += len(lines[cut]) + 1
        cut += 1
    parts = {"train": lines[:cut], "test": lines[cut:]}

    def speeches(part: list[str]) -> list[str]:
        return [" ".join(block.split("\n")) for block in "\n".join(part).split("\n\n") if block.strip()]

    return {"lines": parts, "speeches": {name: speeches(part) for name, part in parts.items()}}


def davidson(data_dir: Path, folder: Path) -> dict[str, list[str]]:
    from toxicity_scorer import split  # the scorer's own seeded 80/10/10 split

    return {name: units(path, "classifier", "tsv") for name, path in split(data_dir, folder).items()}


def datasets(data_dir: Path, scratch: Path):
    """(dataset, config, unit, n-gram unit, {split: unit texts}) for each dataset, train first."""
    d = data_dir
    yield "wikitext-2", "lines", "lines", "word", {s: units(d / f"wikitext-2/{s}.txt", "lm")
                                                   for s in ("train", "valid", "test")}
    yield "ptb", "lines", "sentences", "word", {s: units(d / f"ptb/ptb.{s}.txt", "lm")
                                                for s in ("train", "valid", "test")}
    for config, parts in shakespeare(d / "tinyshakespeare/input.txt").items():
        yield "tinyshakespeare", f"90/10 by characters, {config}", config, "char", parts
    yield "ud_english_ewt", "conllu", "sentences", "word", {
        s: units(d / f"ud_english_ewt/en_ewt-ud-{s}.conllu", "tagger", "conllu") for s in ("train", "dev", "test")}
    yield "conll2003", "conll", "sentences", "word", {s: units(d / f"conll2003/{s}.txt", "tagger", "conll")
                                                      for s in ("train", "valid", "test")}
    yield "sst2", "sentence_level (stsa.binary)", "sentences", "word", {
        s: units(d / f"sst2/sentence_level/stsa.binary.{s}", "classifier", "labeled-lines")
        for s in ("train", "dev", "test")}
    glue = {s: units(d / f"sst2/glue/{s}.tsv", "classifier", "tsv", columns=Columns("sentence"))
            for s in ("train", "dev")}
    glue["test"] = [doc.text for doc in read_documents(d / "sst2/glue/test.tsv", "tsv", Columns("sentence"),
                                                       labelled=False)]
    yield "sst2", "glue (train: phrases)", "sentences", "word", glue
    yield "sst", "sst-tree roots", "sentences", "word", {s: units(d / f"sst/{s}.txt", "classifier", "sst-tree")
                                                         for s in ("train", "dev", "test")}
    yield "imdb", "jsonl", "documents", "word", {s: units(d / f"imdb/{s}.jsonl.gz", "classifier", "jsonl")
                                                 for s in ("train", "test")}
    tok = "multi30k/tok/{}.lc.norm.tok.{}"
    splits = ("train", "val", "test_2016_flickr", "test_2017_flickr", "test_2017_mscoco", "test_2018_flickr")
    for lang, side in (("de", "source"), ("en", "target")):
        yield "multi30k", f"tok, {lang} ({side})", "sentences", "word", {
            s: units(d / tok.format(s, lang), "lm") for s in splits}
    yield "aeslc", "jsonl, emails", "documents", "word", {
        s: units(d / f"aeslc/{s}.jsonl", "seq2seq", "jsonl", fields=("email", "subject"))
        for s in ("train", "dev", "test")}
    yield "davidson_hate_speech", "seeded 80/10/10 (toxicity_scorer.py)", "tweets", "word", davidson(d, scratch)


def pct(share: float) -> float:
    return round(100 * share, 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    data_dir = Path(args.data_dir)
    start = time.perf_counter()
    rows, records = [], []
    began = start
    with tempfile.TemporaryDirectory() as scratch:
        for dataset, config, unit_name, unit, parts in datasets(data_dir, Path(scratch)):
            train = [text for text in (normalise(t) for t in parts["train"]) if text]
            index = TrainIndex(train, unit=unit)
            n = index.n
            duplicates = duplicate_lines(train)
            long_train = [t for t in train if len(t.split(" ") if unit == "word" else t) >= n]
            long_duplicates = duplicate_lines(long_train)
            checks = {name: index.check(texts) for name, texts in parts.items() if name != "train"}
            wall = round(time.perf_counter() - began, 1)                # reading (the generator), indexing, checking
            common = dict(task="contamination", dataset=dataset, arch=None, config=config, wall_s=wall,
                          device=device_name(), unit=unit_name, n=n, ngram_unit=unit)
            records.append(record(**common, split="train", metric="train_duplicates_pct",
                                  value=pct(duplicates["share"]), units=len(train), duplicates=duplicates["count"],
                                  long_units=len(long_train), long_duplicates=long_duplicates["count"],
                                  long_duplicates_pct=pct(long_duplicates["share"])))
            for name, check in checks.items():
                fields = dict(units=check["eval_lines"], short_units=check["short_lines"],
                              verbatim=check["verbatim"], ngram=check["ngram"], long_ngram=check["long_ngram"],
                              verbatim_pct=pct(check["verbatim_share"]), long_pct=pct(check["long_ngram_share"]))
                records.append(record(**common, split=name, metric="contamination_pct",
                                      value=pct(check["ngram_share"]), **fields))
                records.append(record(**common, split=name, metric="verbatim_pct",
                                      value=pct(check["verbatim_share"]), **fields))
                rows.append((dataset, config, name, unit_name, n, unit, check, len(train), duplicates,
                             long_duplicates, len(long_train)))
            began = time.perf_counter()
            print(f"{dataset:<22} {config:<36} {wall:6.1f} s  "
                  + "  ".join(f"{name} {pct(c['ngram_share'])}%" for name, c in checks.items()), flush=True)
    total = round(time.perf_counter() - start, 1)
    for r in records:
        r["total_wall_s"] = total
    write_records("contamination", records, TITLE, notes=NOTES)
    write_markdown(rows, total)
    print(f"{total} s in all; written to {RESULTS}/contamination.json and .md")
    return 0


def write_markdown(rows: list, total: float) -> None:
    """A readable table in place of the generic one (the JSON holds every figure)."""
    lines = [f"# {TITLE}", "", "Generated from `contamination.json` (every row's command is in the JSON).", "",
             NOTES.strip(), "",
             f"Measured {record()['date']} on {device_name()}; {total:.0f} s for every dataset, data read "
             "included.", "",
             "| dataset | units | split | eval units | shorter than n | verbatim in train | shares an n-gram "
             "(contamination) | n-gram, units >= n only | train units | duplicates within train "
             "(units >= n) |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for dataset, config, name, unit_name, n, unit, check, n_train, dup, long_dup, n_long in rows:
        lines.append(
            f"| {dataset} ({config}) | {unit_name}, {n}-{unit} n-grams | {name} | {check['eval_lines']:,} | "
            f"{check['short_lines']:,} | {check['verbatim']:,} ({pct(check['verbatim_share'])}%) | "
            f"{check['ngram']:,} ({pct(check['ngram_share'])}%) | {check['long_ngram']:,} of "
            f"{check['eval_lines'] - check['short_lines']:,} ({pct(check['long_ngram_share'])}%) | {n_train:,} | "
            f"{dup['count']:,} ({pct(dup['share'])}%; {long_dup['count']:,} of {n_long:,}, "
            f"{pct(long_dup['share'])}%) |")
    lines += ["", f"Command: `{record()['command']}`", ""]
    (RESULTS / "contamination.md").write_text("\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())
