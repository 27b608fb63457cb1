"""The "Training data" section of a model card, computed from what the data files hold.

After Gebru et al. (2018), "Datasheets for Datasets" (arXiv:1803.09010): for each file its identity
(name, SHA-256, bytes), its size (lines, units, tokens, types), its character set, its exact
duplicates, the distribution of its labels, and how much of each evaluation split also occurs in the
training split.

Contamination follows Brown et al. (2020), "Language Models are Few-Shot Learners" (GPT-3),
appendix C: an evaluation example is "dirty" when it shares an n-gram of N = 13 words with the
training data. Here the example is an evaluation line; for character models the unit is the
character and N = 50. `TrainIndex` keeps the training n-grams as a set of hashes (lines in memory);
`EvalIndex` keeps the evaluation lines' instead and streams the training text past them, which gives
the same figures with memory in the size of the evaluation splits, not of the training text.

Everything a model card reads from files is streamed: `file_sheet` reads a file in blocks of 1 MB,
duplicates are counted from 8-byte hashes of the lines (`DuplicateCount`), and the splits' units come
one at a time from the family's readers (`seqlab.cards.data`), so the card of a run on a corpus of any
size holds its vocabulary, 8 bytes per line and the evaluation splits' n-grams, never the text.

Rules this module follows (each a choice; the tests pin them down):

- a line is compared after whitespace normalisation: strip, then collapse every run of whitespace
  to one space (`normalise`); blank lines are not lines (they are neither counted nor compared);
- duplicates are lines whose normalised text repeats an earlier line of the same file: a line
  seen three times counts as two duplicates;
- an evaluation line shorter than N units has no N-gram of its own. GPT-3 then uses the line's
  full length as its N; we take the simpler, stricter-to-state rule that such a line counts as
  n-gram-contaminated only when it occurs verbatim as a whole training line. Short lines are
  counted separately (`short_lines`) so a reader sees how many were judged that way.

The module is task-agnostic: the caller gives files (and, if it wants, pre-counted units and the
labels it read); reading units and labels of each task's formats belongs to an adapter.
"""
from __future__ import annotations

import codecs
import hashlib
import string
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

WORD_N = 13   # GPT-3 appendix C: 13-gram overlap with the training data
CHAR_N = 50   # the same test for character models, on 50 characters
UNITS = ("word", "char")
TOP_NON_ASCII = 10
CHARACTER_CLASSES = ("ascii_letters", "digits", "whitespace", "punctuation", "other_ascii", "non_ascii")


def normalise(line: str) -> str:
    """The line stripped and with every run of whitespace collapsed to one space."""
    return " ".join(line.split())


def read_lines(path: str | Path) -> list[str]:
    """The file's non-blank lines, normalised (UTF-8; undecodable bytes replaced)."""
    return list(iter_lines(path))


def iter_lines(path: str | Path) -> Iterator[str]:
    """`read_lines`, one line at a time."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            text = normalise(line)
            if text:
                yield text


def character_classes(text: str) -> dict[str, Any]:
    """Counts of characters by class and the most frequent non-ASCII characters.

    ASCII characters fall into letters, digits, whitespace (space, tab, newline, CR, VT, FF),
    punctuation (`string.punctuation`) or other ASCII (control characters); every character above
    U+007F is non-ASCII, whatever its Unicode category.
    """
    return classes_of(Counter(text), len(text))


def classes_of(counts: Counter[str], characters: int) -> dict[str, Any]:
    """`character_classes` of a text whose characters `counts` counts (`characters` in all)."""
    classes = dict.fromkeys(CHARACTER_CLASSES, 0)
    non_ascii: Counter[str] = Counter()
    for char, count in counts.items():
        if ord(char) > 127:
            classes["non_ascii"] += count
            non_ascii[char] = count
        elif char in string.ascii_letters:
            classes["ascii_letters"] += count
        elif char in string.digits:
            classes["digits"] += count
        elif char in string.whitespace:
            classes["whitespace"] += count
        elif char in string.punctuation:
            classes["punctuation"] += count
        else:
            classes["other_ascii"] += count
    top = sorted(non_ascii.items(), key=lambda item: (-item[1], item[0]))[:TOP_NON_ASCII]
    return {"characters": characters, "classes": classes,
            "top_non_ascii": [{"char": char, "codepoint": f"U+{ord(char):04X}", "count": count}
                              for char, count in top]}


def duplicate_lines(lines: Iterable[str]) -> dict[str, Any]:
    """Lines (already normalised, non-blank) that repeat an earlier line, and their share."""
    seen: set[str] = set()
    total = duplicates = 0
    for line in lines:
        total += 1
        if line in seen:
            duplicates += 1
        else:
            seen.add(line)
    return {"count": duplicates, "share": duplicates / total if total else 0.0}


class DuplicateCount:
    """`duplicate_lines`, streamed: each line is kept as an 8-byte hash (Python's, salted per process and never
    written out), and the duplicates are the hashes seen before once all are in. Two different lines with the
    same 64-bit hash would count as one duplicate: about n^2 / 2^65 of them among n lines (1e-7 at 2M)."""

    def __init__(self) -> None:
        self.hashes = array("q")

    def add(self, line: str) -> None:
        self.hashes.append(hash(line))

    def result(self) -> dict[str, Any]:
        hashes = np.array(self.hashes, dtype=np.int64)      # (lines,): sorted in place, equal ones side by side
        hashes.sort()
        total = len(hashes)
        duplicates = int(np.count_nonzero(hashes[1:] == hashes[:-1]))
        return {"count": duplicates, "share": duplicates / total if total else 0.0}


BLOCK = 1 << 20                                   # bytes a file sheet reads at a time
LINE_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")   # where str.splitlines splits


def file_sheet(path: str | Path, name: str, unit: str = "lines", units: int | None = None,
               tokenize: Callable[[str], list[str]] = str.split) -> dict[str, Any]:
    """One data file's datasheet figures, read in blocks (memory: the types, 8 bytes a line, one block).

    `unit` names what one example of the task is (sentences, documents, pairs, lines); `units` is
    their number when the caller has counted them (a CoNLL file's sentences), else the number of
    non-blank lines. Lines are those of `str.splitlines` of the text decoded as UTF-8 (undecodable
    bytes replaced); tokens and types come from `tokenize` applied to each line.
    """
    path = Path(path)
    digest, size, characters, counts = hashlib.sha256(), 0, 0, Counter[str]()
    lines = tokens = 0
    types: set[str] = set()
    duplicates = DuplicateCount()
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    rest = ""                                     # a line not yet ended at the end of a block

    def take(text: str, final: bool) -> str:
        nonlocal lines, tokens, characters
        counts.update(text)
        characters += len(text)
        pieces = (rest + text).splitlines(keepends=True)
        left = pieces.pop() if pieces and not final and pieces[-1][-1] not in LINE_BREAKS else ""
        for piece in pieces:              # a "\r\n" cut between blocks is a blank line more: never counted
            line = normalise(piece)
            if line:
                lines += 1
                line_tokens = tokenize(line)
                tokens += len(line_tokens)
                types.update(line_tokens)
                duplicates.add(line)
        return left

    with open(path, "rb") as handle:
        while block := handle.read(BLOCK):
            digest.update(block)
            size += len(block)
            rest = take(decoder.decode(block), final=False)
    take(decoder.decode(b"", final=True), final=True)
    return {"name": name, "path": str(path), "sha256": digest.hexdigest(), "bytes": size,
            "lines": lines, "unit": unit, "units": lines if units is None else units,
            "tokens": tokens, "types": len(types), "charset": classes_of(counts, characters),
            "duplicates": duplicates.result()}


def label_distribution(labels: Iterable[str] | Counter[str]) -> dict[str, int]:
    """{label: count}, most frequent first (ties in label order), for tags or class labels (or their Counter)."""
    counts = labels if isinstance(labels, Counter) else Counter(labels)
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def _units(line: str, unit: str) -> list[str] | str:
    return line.split(" ") if unit == "word" else line


def _ngram_hashes(units: list[str] | str, n: int, unit: str) -> Iterable[int]:
    if unit == "word":
        return (hash(tuple(units[start:start + n])) for start in range(len(units) - n + 1))
    return (hash(units[start:start + n]) for start in range(len(units) - n + 1))


class TrainIndex:
    """The training lines as a set of normalised texts and a set of hashed n-grams, built once."""

    def __init__(self, train_lines: Iterable[str], n: int | None = None, unit: str = "word"):
        if unit not in UNITS:
            raise ValueError(f"unit must be one of {', '.join(UNITS)}, not {unit!r}")
        self.n = (WORD_N if unit == "word" else CHAR_N) if n is None else n
        if self.n < 1:
            raise ValueError(f"n must be at least 1, not {self.n}")
        self.unit = unit
        self.texts: set[str] = set()
        self.ngrams: set[int] = set()   # Python's hash(): salted per process, never written out
        for line in train_lines:
            text = normalise(line)
            if text:
                self.texts.add(text)
                self.ngrams.update(_ngram_hashes(_units(text, unit), self.n, unit))

    def check(self, eval_lines: Iterable[str]) -> dict[str, Any]:
        """Contamination of the eval lines against this index (see `contamination`)."""
        tally = Tally(self.n, self.unit)
        for line in eval_lines:
            tally.add(line, self.texts, self.ngrams)
        return tally.result()


class Tally:
    """The contamination figures of evaluation lines, added one at a time, against the training lines'
    normalised texts and n-gram hashes (those of `TrainIndex`, or the ones `EvalIndex` found)."""

    def __init__(self, n: int, unit: str):
        self.n, self.unit = n, unit
        self.total = self.verbatim = self.ngram = self.short = self.long_ngram = 0

    def add(self, line: str, texts: set[str], ngrams: set[int]) -> None:
        text = normalise(line)
        if not text:
            return
        self.total += 1
        is_verbatim = text in texts
        self.verbatim += is_verbatim
        units = _units(text, self.unit)
        if len(units) < self.n:
            self.short += 1
            self.ngram += is_verbatim
        else:
            overlaps = is_verbatim or any(h in ngrams for h in _ngram_hashes(units, self.n, self.unit))
            self.ngram += overlaps
            self.long_ngram += overlaps

    def result(self) -> dict[str, Any]:
        total, short = self.total, self.short
        return {"n": self.n, "unit": self.unit, "eval_lines": total, "short_lines": short,
                "verbatim": self.verbatim, "verbatim_share": self.verbatim / total if total else 0.0,
                "ngram": self.ngram, "ngram_share": self.ngram / total if total else 0.0,
                "long_ngram": self.long_ngram,
                "long_ngram_share": self.long_ngram / (total - short) if total > short else 0.0}


class EvalIndex:
    """`TrainIndex` turned around, for training text too big to hold: the evaluation lines' normalised texts
    and n-gram hashes are indexed (`want`), the training lines stream past them once (`scan`) keeping those
    they contain, and `check` then gives each evaluation split's figures as `TrainIndex.check` does, exactly
    (an evaluation line's text or n-gram is among the training ones iff the scan found it)."""

    def __init__(self, n: int | None = None, unit: str = "word"):
        if unit not in UNITS:
            raise ValueError(f"unit must be one of {', '.join(UNITS)}, not {unit!r}")
        self.n = (WORD_N if unit == "word" else CHAR_N) if n is None else n
        self.unit = unit
        self.wanted_texts: set[str] = set()
        self.wanted_ngrams: set[int] = set()
        self.texts: set[str] = set()              # found in the training lines
        self.ngrams: set[int] = set()

    def want(self, line: str) -> None:
        """An evaluation line to look for."""
        text = normalise(line)
        if text:
            self.wanted_texts.add(text)
            units = _units(text, self.unit)
            if len(units) >= self.n:
                self.wanted_ngrams.update(_ngram_hashes(units, self.n, self.unit))

    def scan(self, line: str) -> None:
        """A training line: keep what of it an evaluation line holds."""
        text = normalise(line)
        if not text:
            return
        if text in self.wanted_texts:
            self.texts.add(text)
        if self.wanted_ngrams:
            found = self.wanted_ngrams.intersection(_ngram_hashes(_units(text, self.unit), self.n, self.unit))
            if found:
                self.ngrams.update(found)

    def tally(self) -> Tally:
        """A tally of one evaluation split's lines (`Tally.add(line, index.texts, index.ngrams)`)."""
        return Tally(self.n, self.unit)


def contamination(train_lines: Iterable[str], eval_lines: Iterable[str], n: int | None = None,
                  unit: str = "word") -> dict[str, Any]:
    """GPT-3's contamination check (Brown et al. 2020, appendix C) of eval lines against train.

    `verbatim`: eval lines whose normalised text is a whole train line. `ngram`: eval lines that
    share an n-gram (n = 13 words, or 50 characters with unit="char") with any train line; an eval
    line shorter than n counts here only when it is verbatim (see the module docstring). Shares are
    over the non-blank eval lines. `long_ngram` counts the n-gram hits among the lines of at least
    n units alone (its share is over those lines): short verbatim lines are often headings.
    """
    return TrainIndex(train_lines, n, unit).check(eval_lines)


def datasheet(files: dict[str, str | Path], train: str = "train", unit_name: str = "lines",
              units: dict[str, int] | None = None, labels: dict[str, Iterable[str]] | None = None,
              tokenize: Callable[[str], list[str]] = str.split, n: int | None = None,
              unit: str = "word") -> dict[str, Any]:
    """The training-data section: a sheet per file, label distributions, and contamination.

    `files` maps split names to paths; `train` names the training split, against which every
    other split's lines are checked. `units` and `labels` map split names to what the caller read
    (a count of units; the labels or tags in order). Without a train split there is no
    contamination entry.
    """
    units = units or {}
    labels = labels or {}
    sheets = {name: file_sheet(path, name, unit_name, units.get(name), tokenize) for name, path in files.items()}
    for name, split_labels in labels.items():
        if name in sheets:
            sheets[name]["labels"] = label_distribution(split_labels)
    checks = {}
    if train in files:
        index = TrainIndex(read_lines(files[train]), n, unit)
        checks = {name: index.check(read_lines(path))
                  for name, path in files.items() if name != train}
    return {"train": train if train in files else None, "files": sheets, "contamination": checks}


def _table(header: tuple[str, str], rows: Iterable[tuple[str, str]]) -> list[str]:
    return [f"| {header[0]} | {header[1]} |", "| --- | ---: |", *(f"| {key} | {value} |" for key, value in rows)]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")


def to_markdown(sheet: dict[str, Any]) -> str:
    """The section as Markdown: a table per file, its labels, then contamination against train."""
    out = ["## Training data", ""]
    for name, file in sheet["files"].items():
        classes = file["charset"]["classes"]
        out += [f"### {name}", "", f"`{file['path']}`", ""]
        out += _table(("figure", "value"), [
            ("SHA-256", f"`{file['sha256']}`"), ("bytes", f"{file['bytes']:,}"),
            ("lines (non-blank)", f"{file['lines']:,}"), (f"units ({file['unit']})", f"{file['units']:,}"),
            ("tokens", f"{file['tokens']:,}"), ("types", f"{file['types']:,}"),
            ("duplicate lines", f"{file['duplicates']['count']:,} ({file['duplicates']['share']:.2%})"),
            *((f"characters: {key.replace('_', ' ')}", f"{value:,}") for key, value in classes.items())])
        top = file["charset"]["top_non_ascii"]
        if top:
            out += ["", "Most frequent non-ASCII characters: "
                    + ", ".join(f"`{_cell(entry['char'])}` {entry['codepoint']} ({entry['count']:,})" for entry in top)]
        if "labels" in file:
            out += ["", *_table(("label", "count"), ((_cell(label), f"{count:,}")
                                                      for label, count in file["labels"].items()))]
        out.append("")
    if sheet["contamination"]:
        first = next(iter(sheet["contamination"].values()))
        out += [f"### Contamination against {sheet['train']} (Brown et al. 2020, app. C)", "",
                f"Lines found verbatim in {sheet['train']}, and lines sharing a {first['n']}-{first['unit']} "
                f"n-gram with it (lines shorter than that count only when verbatim).", "",
                "| split | lines | shorter than n | verbatim | n-gram overlap | n-gram overlap, lines >= n |",
                "| --- | ---: | ---: | ---: | ---: | ---: |"]
        out += [f"| {name} | {check['eval_lines']:,} | {check['short_lines']:,} | "
                f"{check['verbatim']:,} ({check['verbatim_share']:.2%}) | "
                f"{check['ngram']:,} ({check['ngram_share']:.2%}) | "
                f"{check['long_ngram']:,} ({check['long_ngram_share']:.2%}) |"
                for name, check in sheet["contamination"].items()]
        out.append("")
    return "\n".join(out)
