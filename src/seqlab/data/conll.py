"""Labelled sentences from CoNLL files: CoNLL-U (UD treebanks) and CoNLL-2003-style columns.

    CoNLL-U (10 tab-separated columns)            CoNLL-2003 (whitespace-separated columns)
    # sent_id = 1                                 -DOCSTART- -X- -X- O
    1-2   Don't  _     _     ...   <- skipped     <blank>
    1     Do     do    AUX   ...                  EU       NNP  B-NP  B-ORG
    2     n't    not   PART  ...                  rejects  VBZ  B-VP  O
    2.1   _      ...               <- skipped     <blank>  ends the sentence
    <blank> ends the sentence

Every malformed line is refused with the file and line number. A sentence remembers the line of its
first token, so later messages (an invalid tag sequence, an unknown tag) can point at it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from seqlab.errors import SeqlabError, where
from seqlab.fileio import read_text

CONLLU_COLUMNS = ("id", "form", "lemma", "upos", "xpos", "feats", "head", "deprel", "deps", "misc")
FORMATS = ("conllu", "conll")


@dataclass
class Sentence:
    """Tokens and their labels (one per token); `line` is the 1-based line of the first token."""

    tokens: list[str]
    labels: list[str]
    line: int = 0
    token_lines: list[int] | None = None       # each token's 1-based line, where the reader knows it

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
    sentences: list[Sentence] = []
    tokens: list[str] = []
    labels: list[str] = []
    first, numbers = 0, []
    lines = read_text(path, what).split("\n")
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r")
        if not line.strip():
            if tokens:
                sentences.append(Sentence(tokens, labels, first, numbers))
            tokens, labels, numbers = [], [], []
            continue
        if line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != len(CONLLU_COLUMNS):
            raise SeqlabError(f"{what} {where(path, number)}: expected 10 tab-separated CoNLL-U columns, "
                              f"found {len(fields)} in {_excerpt(line)}")
        token_id = fields[0]
        if "-" in token_id or "." in token_id:              # multiword range or empty node
            continue
        if not token_id.isdigit():
            raise SeqlabError(f"{what} {where(path, number)}: the ID column holds {token_id!r}, expected "
                              "a word index (1, 2, ...), a range (1-2) or an empty node (1.1)")
        form, label = fields[1], fields[column]
        _check_token(form, path, number, what)
        if not label.strip():
            raise SeqlabError(f"{what} {where(path, number)}: the {CONLLU_COLUMNS[column]} column is empty")
        if not tokens:
            first = number
        tokens.append(form)
        labels.append(label)
        numbers.append(number)
    if tokens:
        sentences.append(Sentence(tokens, labels, first, numbers))
    return _nonempty(sentences, path, what)


def read_conll(path: str | Path, label_column: int = -1, token_column: int = 0,
               what: str = "file") -> list[Sentence]:
    """The sentences of a CoNLL-2003-style file: whitespace-separated columns, a blank line between
    sentences, `-DOCSTART-` lines ignored, the label in column `label_column` (default: the last)."""
    sentences: list[Sentence] = []
    tokens: list[str] = []
    labels: list[str] = []
    first, width = 0, None
    for number, raw in enumerate(read_text(path, what).split("\n"), start=1):
        fields = raw.split()
        if not fields:
            if tokens:
                sentences.append(Sentence(tokens, labels, first))
            tokens, labels = [], []
            continue
        if fields[0] == "-DOCSTART-":
            continue
        if width is None:
            width = len(fields)
            for name, index in (("--label-column", label_column), ("--token-column", token_column)):
                if not -width <= index < width:
                    raise SeqlabError(f"{what} {where(path, number)}: {name} {index} does not exist in a file "
                                      f"of {width} columns")
            if width < 2:
                raise SeqlabError(f"{what} {where(path, number)}: one column only; expected a token and a "
                                  f"label separated by whitespace in {_excerpt(raw)}")
        elif len(fields) != width:
            raise SeqlabError(f"{what} {where(path, number)}: {len(fields)} columns, but the file's first "
                              f"token line has {width}: {_excerpt(raw)}")
        if not tokens:
            first = number
        tokens.append(fields[token_column])
        labels.append(fields[label_column])
    if tokens:
        sentences.append(Sentence(tokens, labels, first))
    return _nonempty(sentences, path, what)


def read_labelled(path: str | Path, fmt: str, label_column: str | int | None = None,
                  what: str = "file") -> list[Sentence]:
    """Either reader, by format name (`conllu` or `conll`); `label_column` None means the default."""
    if fmt == "conllu":
        return read_conllu(path, "upos" if label_column is None else label_column, what)
    if fmt == "conll":
        if label_column is not None and not str(label_column).lstrip("-").isdigit():
            raise SeqlabError(f"--label-column {label_column!r}: CoNLL columns are chosen by index "
                              "(0 the first, -1 the last)")
        return read_conll(path, -1 if label_column is None else int(label_column), what=what)
    raise SeqlabError(f"--format {fmt!r} is not known; use one of {', '.join(FORMATS)}")


def _check_token(form: str, path, number: int, what: str) -> None:
    if not form.strip():
        raise SeqlabError(f"{what} {where(path, number)}: the token is empty or only whitespace")


def _nonempty(sentences: list[Sentence], path, what: str) -> list[Sentence]:
    if not sentences:
        raise SeqlabError(f"{what} {path} holds no sentences (only comments, -DOCSTART- or blank lines)")
    return sentences


def _excerpt(line: str, limit: int = 60) -> str:
    return repr(line if len(line) <= limit else line[:limit] + "...")
