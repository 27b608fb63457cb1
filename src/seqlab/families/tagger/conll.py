"""Labelled sentences from CoNLL files: CoNLL-U (UD treebanks) and CoNLL-2003-style columns.

    CoNLL-U (10 tab-separated columns)            CoNLL-2003 (whitespace-separated columns)
    # sent_id = 1                                 -DOCSTART- -X- -X- O
    1-2   Don't  _     _     ...   <- skipped     <blank>
    1     Do     do    AUX   ...                  EU       NNP  B-NP  B-ORG
    2     n't    not   PART  ...                  rejects  VBZ  B-VP  O
    2.1   _      ...               <- skipped     <blank>  ends the sentence
    <blank> ends the sentence

Every malformed line is refused with the file and line number, among them word IDs that do not count
1, 2, 3, ... within a sentence (a gap, a repeat, an ID 0: often a lost line, or a lost blank line
between two sentences). A sentence remembers the line of its first token, so later messages (an
invalid tag sequence, an unknown tag) can point at it. The readers work on the lines of a
`seqlab.data.stream.LineReader` and hand on one sentence at a time (`conllu_sentences`,
`conll_sentences`), so that a file of any size is read in bounded memory; `read_conllu` and friends
collect them into a list.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from seqlab.data.sniff import FORMAT, FormatOption, hinted
from seqlab.data.stream import Line, LineReader, refuse_cut
from seqlab.errors import SeqlabError, place

CONLLU_COLUMNS = ("id", "form", "lemma", "upos", "xpos", "feats", "head", "deprel", "deps", "misc")
WORD_ID = re.compile(r"[0-9]+")                             # 1, 2, 3, ...: the words, in order
SKIPPED_ID = re.compile(r"[0-9]+-[0-9]+|[0-9]+\.[0-9]+")    # a multiword range (1-2), an empty node (1.1)
FORMATS = ("conllu", "conll")


@dataclass
class Sentence:
    """Tokens and their labels (one per token); `line` is the 1-based line of the first token."""

    tokens: list[str]
    labels: list[str]
    line: int = 0
    dropped: int = 0            # tokens after the ones kept, read and checked but not kept (a reader's cap)
    token_lines: list[int] | None = None       # each kept token's 1-based line, where the reader knows it

    def __len__(self) -> int:
        return len(self.tokens)

    def line_of(self, index: int) -> int:
        """The line of token `index` (counted from the first token's line when lines are not known)."""
        return self.token_lines[index] if self.token_lines else self.line + index


def conllu_column(label_column: str | int) -> int:
    """The index of a CoNLL-U column given by name (`upos`, `xpos`, ...) or by 0-based index."""
    if isinstance(label_column, int) or str(label_column).isdigit():
        index = int(label_column)
        if not 0 <= index < len(CONLLU_COLUMNS):
            raise SeqlabError(f"--label-column {label_column}: CoNLL-U has columns 0-9 "
                              f"({', '.join(CONLLU_COLUMNS)})")
        return index
    if label_column not in CONLLU_COLUMNS:
        raise SeqlabError(f"--label-column {label_column!r} is not a CoNLL-U column; use one of "
                          f"{', '.join(CONLLU_COLUMNS)} or an index 0-9")
    return CONLLU_COLUMNS.index(label_column)


def read_conllu(path: str | Path, label_column: str | int = "upos", what: str = "file") -> list[Sentence]:
    """The sentences of a CoNLL-U file, labelled from one column; comments, multiword-token ranges
    (`1-2`) and empty nodes (`1.1`) are skipped."""
    column = conllu_column(label_column)
    with LineReader(path, what, stdin=False) as lines:
        return list(conllu_sentences(lines, column, path, what))


def read_conll(path: str | Path, label_column: int = -1, token_column: int = 0,
               what: str = "file") -> list[Sentence]:
    """The sentences of a CoNLL-2003-style file: whitespace-separated columns, a blank line between
    sentences, `-DOCSTART-` lines ignored, the label in column `label_column` (default: the last)."""
    with LineReader(path, what, stdin=False) as lines:
        return list(conll_sentences(lines, label_column, token_column, path, what))


def read_labelled(path: str | Path, fmt: str, label_column: str | int | None = None,
                  what: str = "file") -> list[Sentence]:
    """Either reader, by format name (`conllu` or `conll`); `label_column` None means the default."""
    sentences = labelled_sentences(None, fmt, label_column, path, what)       # checks the options first
    with LineReader(path, what, stdin=False) as lines:
        return list(sentences(lines))


def labelled_sentences(lines: Iterable[Line] | None, fmt: str, label_column: str | int | None, path, what: str,
                       keep_tokens: int = 0, option: FormatOption | None = FORMAT):
    """The sentences of `lines` (a LineReader) in either format, one at a time; with lines None, a
    function of the lines (the options are checked at once). `keep_tokens` > 0: a sentence keeps its
    first `keep_tokens` tokens, and counts the others, checked, in `Sentence.dropped`. A refused file
    that the other format reads says so, naming `option` (`seqlab.data.sniff`; None: it does not)."""
    if fmt == "conllu":
        column = conllu_column("upos" if label_column is None else label_column)
        read = lambda lines: conllu_sentences(lines, column, path, what, keep_tokens)       # noqa: E731
    elif fmt == "conll":
        if label_column is not None and not str(label_column).lstrip("-").isdigit():
            raise SeqlabError(f"--label-column {label_column!r}: CoNLL columns are chosen by index "
                              "(0 the first, -1 the last)")
        index = -1 if label_column is None else int(label_column)
        read = lambda lines: conll_sentences(lines, index, 0, path, what, keep_tokens)      # noqa: E731
    else:
        raise SeqlabError(f"--format {fmt!r} is not known; use one of {', '.join(FORMATS)}")

    def other(name: str):
        read_other = labelled_sentences(None, name, None, path, what, option=None)
        return _not_conllu(read_other) if name == "conll" else read_other
    read = hinted(read, fmt, FORMATS, other, path, option)
    return read if lines is None else read(lines)


def _not_conllu(read):
    """conll as a sniff reads a file's first lines: refused when the first token line holds 10 tab-separated
    fields. That is CoNLL-U's shape, which the CoNLL reader reads too (as 10 whitespace-separated columns),
    and a hint must not send a CoNLL-U file with one bad line (an ID out of order) to it."""
    def checked(lines: Iterable[Line]) -> Iterator[Sentence]:
        lines = list(lines)                                 # a sniff's few lines
        first = next((line for line in lines if line.text.strip() and not line.text.startswith(("#", "-DOCSTART-"))),
                     None)
        if first is not None and len(first.text.split("\t")) == len(CONLLU_COLUMNS):
            raise SeqlabError(f"line {first.number}: 10 tab-separated columns, as in CoNLL-U")
        yield from read(lines)
    return checked


def conllu_sentences(lines: Iterable[Line], column: int, path, what: str, keep_tokens: int = 0) -> Iterator[Sentence]:
    """The sentences of CoNLL-U lines, labelled from `column` (see `read_conllu`), one at a time."""
    sentence = _Builder(keep_tokens)
    count = previous = 0                                    # previous: the sentence's last word ID
    for line in lines:
        number, text = line.number, line.text.rstrip("\r")
        refuse_cut(line, place(what, path, number), "CoNLL-U")
        if not text.strip():
            previous = 0
            if sentence.tokens:
                yield sentence.done()
                count += 1
            continue
        if text.startswith("#"):
            continue
        fields = text.split("\t")
        if len(fields) != len(CONLLU_COLUMNS):
            raise SeqlabError(f"{place(what, path, number)}: expected 10 tab-separated CoNLL-U columns, "
                              f"found {len(fields)} in {_excerpt(text)}")
        token_id = fields[0]
        if SKIPPED_ID.fullmatch(token_id):                 # multiword range or empty node
            continue
        if not WORD_ID.fullmatch(token_id):
            raise SeqlabError(f"{place(what, path, number)}: the ID column holds {token_id!r}, expected "
                              "a word index (1, 2, ...), a range (1-2) or an empty node (1.1)")
        previous = _next_id(int(token_id), previous, path, number, what)
        form, label = fields[1], fields[column]
        _check_token(form, path, number, what)
        if not label.strip():
            raise SeqlabError(f"{place(what, path, number)}: the {CONLLU_COLUMNS[column]} column is empty")
        sentence.add(form, label, number)
    if sentence.tokens:
        yield sentence.done()
        count += 1
    _nonempty(count, path, what)


def conll_sentences(lines: Iterable[Line], label_column: int = -1, token_column: int = 0, path="",
                    what: str = "file", keep_tokens: int = 0) -> Iterator[Sentence]:
    """The sentences of CoNLL-2003-style lines (see `read_conll`), one at a time."""
    sentence = _Builder(keep_tokens)
    count, width = 0, None
    for line in lines:
        number, raw = line.number, line.text
        refuse_cut(line, place(what, path, number), "CoNLL")
        fields = raw.split()
        if not fields:
            if sentence.tokens:
                yield sentence.done()
                count += 1
            continue
        if fields[0] == "-DOCSTART-":
            continue
        if width is None:
            width = len(fields)
            for name, index in (("--label-column", label_column), ("--token-column", token_column)):
                if not -width <= index < width:
                    raise SeqlabError(f"{place(what, path, number)}: {name} {index} does not exist in a file "
                                      f"of {width} columns")
            if width < 2:
                raise SeqlabError(f"{place(what, path, number)}: one column only; expected a token and a "
                                  f"label separated by whitespace in {_excerpt(raw)}")
        elif len(fields) != width:
            raise SeqlabError(f"{place(what, path, number)}: {len(fields)} columns, but the file's first "
                              f"token line has {width}: {_excerpt(raw)}")
        sentence.add(fields[token_column], fields[label_column], number)
    if sentence.tokens:
        yield sentence.done()
        count += 1
    _nonempty(count, path, what)


class _Builder:
    """The sentence being read: its first `keep` tokens (all with keep 0), and how many more."""

    def __init__(self, keep: int = 0):
        self.keep = keep
        self.tokens: list[str] = []
        self.labels: list[str] = []
        self.numbers: list[int] = []
        self.first = self.dropped = 0

    def add(self, token: str, label: str, number: int) -> None:
        if not self.tokens:
            self.first = number
        if self.keep and len(self.tokens) >= self.keep:
            self.dropped += 1
            return
        self.tokens.append(token)
        self.labels.append(label)
        self.numbers.append(number)

    def done(self) -> Sentence:
        sentence = Sentence(self.tokens, self.labels, self.first, self.dropped, self.numbers)
        self.tokens, self.labels, self.numbers, self.dropped = [], [], [], 0
        return sentence


def _next_id(token_id: int, previous: int, path, number: int, what: str) -> int:
    """`token_id` when it follows `previous` (0 at a sentence's start): word IDs count 1, 2, 3, ..."""
    if token_id == previous + 1:
        return token_id
    after = f"after {previous}" if previous else "at the start of a sentence"
    lost_blank = "; is the blank line that ends a sentence missing before it?" if token_id == 1 else ""
    raise SeqlabError(f"{place(what, path, number)}: token ID {token_id} {after}: IDs must count 1, 2, 3 within "
                      f"a sentence (expected {previous + 1}{lost_blank})")


def _check_token(form: str, path, number: int, what: str) -> None:
    if not form.strip():
        raise SeqlabError(f"{place(what, path, number)}: the token is empty or only whitespace")


def _nonempty(count: int, path, what: str) -> None:
    if not count:
        raise SeqlabError(f"{place(what, path)} holds no sentences (only comments, -DOCSTART- or blank lines)")


def _excerpt(line: str, limit: int = 60) -> str:
    return repr(line if len(line) <= limit else line[:limit] + "...")
