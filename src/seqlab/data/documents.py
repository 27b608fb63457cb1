"""Labelled documents for classification, from five kinds of file (any of them may be gzipped):

    tsv            text and label columns by name (first row a header) or 0-based index (no header)
    csv            the same, comma-separated with RFC 4180 quoting ("a, b" is one field)
    jsonl          one JSON object per line; text and label fields by name
    labeled-lines  "label<space>text" per line (fastText's "__label__pos text" is read too)
    sst-tree       the Stanford Sentiment Treebank's bracketed trees, "(3 (2 It) (4 (2 's) ...))": the
                   text is the leaves, the label the root's (5 classes 0-4), or with `sst_classes=2`
                   negative (0-1) -> "0" and positive (3-4) -> "1", neutral (2) dropped; with
                   `phrases=True` every labelled subtree is an example too (training on phrases)

Every malformed row is refused with the file and line: a missing text or label, an empty text, a row
with the wrong number of fields (the usual sign of mixed delimiters), a non-numeric feature.
A document keeps its 1-based line, so later messages (a label training never saw) point at it.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path

from seqlab.errors import SeqlabError, where
from seqlab.fileio import read_text

FORMATS = ("tsv", "csv", "jsonl", "labeled-lines", "sst-tree")


@dataclass
class Document:
    """A text, its label (None where the file has none) and its numeric feature columns, if asked for."""

    text: str
    label: str | None
    line: int = 0
    features: list[float] | None = None


@dataclass
class Columns:
    """Which fields hold what: a name (header row / JSON key) or a 0-based index, as given."""

    text: str = "text"
    label: str = "label"
    features: tuple[str, ...] = ()
    header: str = "auto"             # auto: a header row when the columns are named, none for indexes
    label_is_text: bool = False      # the label is text (a translation), not a class (which may be an integer)


def read_documents(path: str | Path, fmt: str, columns: Columns | None = None, what: str = "file",
                   labelled: bool = True, sst_classes: int = 5, phrases: bool = False) -> list[Document]:
    """The documents of one file. `labelled=False` reads texts only (the label may be absent)."""
    if fmt not in FORMATS:
        raise SeqlabError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    columns = columns or Columns()
    text = read_text(path, what)
    if fmt in ("tsv", "csv"):
        documents = _read_table(text, path, fmt, columns, what, labelled)
    elif fmt == "jsonl":
        documents = _read_jsonl(text, path, columns, what, labelled)
    elif fmt == "labeled-lines":
        documents = _read_labeled_lines(text, path, what, labelled)
    else:
        documents = _read_trees(text, path, what, sst_classes, phrases)
    if not documents:
        raise SeqlabError(f"{what} {path} holds no documents")
    return documents


def read_texts(path: str | Path, what: str = "input file") -> list[Document]:
    """One unlabelled document per line (for `seqlab classify`); a blank line is refused."""
    return [Document(line, None, number) for number, line in enumerate(nonblank_lines(path, what), start=1)]


def nonblank_lines(path: str | Path, what: str = "file") -> list[str]:
    """The lines of a file, every one holding text (blank lines at the end are dropped; one before the
    last text is refused with its file and line)."""
    lines = lines_of(read_text(path, what))
    while lines and not lines[-1].strip():
        lines.pop()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            raise SeqlabError(f"{what} {where(path, number)}: empty line; every line must hold a document")
    return lines


def lines_of(text: str) -> list[str]:
    """The lines of a file, split at "\n" (and "\r\n") only: str.splitlines would also split at
    characters such as U+2028 or U+0085, which a review's text (or a JSON string) may hold."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _index_or_name(value: str) -> int | str:
    return int(value) if str(value).lstrip("-").isdigit() else str(value)


def _read_table(text: str, path, fmt: str, columns: Columns, what: str, labelled: bool) -> list[Document]:
    delimiter, other = ("\t", ",") if fmt == "tsv" else (",", "\t")
    wanted = [_index_or_name(c) for c in (columns.text, columns.label, *columns.features)]
    named = any(isinstance(c, str) for c in wanted)
    if columns.header not in ("auto", "yes", "no"):
        raise SeqlabError(f"--header {columns.header!r}: choose auto, yes or no")
    has_header = columns.header == "yes" or (columns.header == "auto" and named)
    if named and not has_header:
        names = ", ".join(str(c) for c in wanted if isinstance(c, str))
        raise SeqlabError(f"{what} {path}: columns given by name ({names}) need a header row; drop --header no "
                          "or give 0-based indexes")
    if fmt == "tsv":
        rows = ((n, line.split("\t")) for n, line in enumerate(lines_of(text), start=1))
    else:
        reader = csv.reader(io.StringIO(text, newline=""))
        rows = ((reader.line_num, row) for row in reader)
    width = None
    positions: list[int] = []
    documents = []
    for number, fields in rows:
        if not any(f.strip() for f in fields):
            continue
        if width is None:
            width = len(fields)
            if has_header:
                header = [f.strip() for f in fields]
                if not labelled and isinstance(wanted[1], str) and wanted[1] not in header:
                    header.append(wanted[1])              # unlabelled input may lack the label column
                positions = [_column_position(c, header, path, what) for c in wanted]
                continue
            for i, c in enumerate(wanted):
                if not labelled and i == 1 and not -width <= c < width:
                    positions = [*wanted[:1], width, *wanted[2:]]          # no label column: read as empty
                    continue
                if not -width <= c < width:
                    raise SeqlabError(f"{what} {where(path, number)}: column {c} does not exist; the file has "
                                      f"{width} {_field_word(fmt)} columns")
            positions = positions or list(wanted)
        if len(fields) != width:
            hint = ""
            if len(fields) < width and other in "".join(fields):
                hint = f"; this row seems to use {'tabs' if other == chr(9) else 'commas'} (mixed delimiters?)"
            raise SeqlabError(f"{what} {where(path, number)}: expected {width} {_field_word(fmt)} fields (as in the "
                              f"first row), found {len(fields)}{hint}")
        documents.append(_document(fields, positions, columns, path, number, what, labelled))
    return documents


def _field_word(fmt: str) -> str:
    return "tab-separated" if fmt == "tsv" else "comma-separated"


def _column_position(column: int | str, header: list[str], path, what: str) -> int:
    if isinstance(column, int):
        if not -len(header) <= column < len(header):
            raise SeqlabError(f"{what} {path}: column {column} does not exist; the header has {len(header)} columns")
        return column
    if column not in header:
        raise SeqlabError(f"{what} {path}: no column named {column!r}; the header has {', '.join(map(repr, header))}")
    return header.index(column)


def _document(fields: list, positions: list[int], columns: Columns, path, number: int, what: str,
              labelled: bool) -> Document:
    text = fields[positions[0]]
    label = fields[positions[1]] if positions[1] < len(fields) else None
    names = (columns.text, columns.label, *columns.features)
    if text is not None and not isinstance(text, str):
        raise SeqlabError(f"{what} {where(path, number)}: the text ({names[0]!r}) is {_json_kind(text)}, expected a "
                          "string")
    if text is None or not text.strip():
        raise SeqlabError(f"{what} {where(path, number)}: the text ({names[0]!r}) is missing or empty")
    if label is not None and not (isinstance(label, str) or (isinstance(label, int) and not isinstance(label, bool)
                                                              and not columns.label_is_text)):
        expected = "a string" if columns.label_is_text else "a string or an integer"
        raise SeqlabError(f"{what} {where(path, number)}: the {'target' if columns.label_is_text else 'label'} "
                          f"({names[1]!r}) is {_json_kind(label)}, expected {expected}")
    if label is None or not str(label).strip():
        if labelled:
            raise SeqlabError(f"{what} {where(path, number)}: the label ({names[1]!r}) is missing or empty")
        label = None
    features = None
    if columns.features:
        features = []
        for name, position in zip(columns.features, positions[2:], strict=True):
            value = fields[position]
            try:
                if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                    raise TypeError
                features.append(float(value))
            except (TypeError, ValueError):
                raise SeqlabError(f"{what} {where(path, number)}: feature {name!r} is {value!r}, "
                                  "expected a number") from None
            if not math.isfinite(features[-1]):
                raise SeqlabError(f"{what} {where(path, number)}: feature {name!r} is {value!r}, expected a finite "
                                  "number")
    return Document(text, None if label is None else str(label).strip(), number, features)


def _json_kind(value) -> str:
    """How to name a JSON value's type in a message: "a number (5)", "a list", "an object", "true"."""
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, (int, float)):
        return f"a number ({value!r})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _read_jsonl(text: str, path, columns: Columns, what: str, labelled: bool) -> list[Document]:
    names = [str(c) for c in (columns.text, columns.label, *columns.features)]
    documents = []
    for number, line in enumerate(lines_of(text), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise SeqlabError(f"{what} {where(path, number)} is not valid JSON: {error.msg}") from None
        if not isinstance(record, dict):
            raise SeqlabError(f"{what} {where(path, number)}: expected a JSON object, found {type(record).__name__}")
        missing = [n for i, n in enumerate(names) if n not in record and (i != 1 or labelled)]
        if missing:
            raise SeqlabError(f"{what} {where(path, number)}: no field {missing[0]!r}; the record has "
                              f"{', '.join(map(repr, record)) or 'no fields'}")
        fields = [record.get(n) for n in names]
        if isinstance(fields[1], float) and fields[1].is_integer() and not columns.label_is_text:
            fields[1] = int(fields[1])                   # 1.0 is the class 1
        documents.append(_document(fields, list(range(len(names))), columns, path, number, what, labelled))
    return documents


def _read_labeled_lines(text: str, path, what: str, labelled: bool) -> list[Document]:
    documents = []
    for number, line in enumerate(lines_of(text), start=1):
        if not line.strip():
            continue
        label, _, body = line.strip().partition(" ")
        label = label.removeprefix("__label__")
        if not body.strip():
            raise SeqlabError(f"{what} {where(path, number)}: expected 'label text', found only {label!r} "
                              "(the text is missing or empty)")
        documents.append(Document(body.strip(), label, number))
    return documents


# ---------------------------------------------------------------------------- SST trees

BRACKETS = {"-LRB-": "(", "-RRB-": ")", "-lrb-": "(", "-rrb-": ")"}


def _read_trees(text: str, path, what: str, sst_classes: int, phrases: bool) -> list[Document]:
    if sst_classes not in (2, 5):
        raise SeqlabError(f"--sst-classes {sst_classes}: choose 5 (very negative ... very positive) or 2 "
                          "(negative / positive, neutral dropped)")
    documents, seen = [], set()
    for number, line in enumerate(lines_of(text), start=1):
        if not line.strip():
            continue
        nodes = _parse_tree(line.strip(), path, number, what)       # (label, words), root first
        for label, words in nodes if phrases else nodes[:1]:
            if sst_classes == 2:
                if label == 2:
                    continue
                label = 0 if label < 2 else 1
            text_ = " ".join(BRACKETS.get(w, w) for w in words)
            if phrases:
                if (text_, label) in seen:
                    continue
                seen.add((text_, label))
            documents.append(Document(text_, str(label), number))
    return documents


def _parse_tree(line: str, path, number: int, what: str) -> list[tuple[int, list[str]]]:
    """Every node of one bracketed tree as (label, its words), in preorder (the root first)."""
    nodes: list[tuple[int, list[str]]] = []
    stack: list[int] = []                # indexes into nodes of the open brackets
    position, n = 0, len(line)

    def fail(message: str):
        raise SeqlabError(f"{what} {where(path, number)}: not an SST tree ({message} at character {position + 1})")

    while position < n:
        char = line[position]
        if char == "(":
            end = position + 1
            while end < n and line[end] not in " ()":
                end += 1
            label = line[position + 1:end]
            if not label.isdigit() or not 0 <= int(label) <= 4:
                fail(f"expected a label 0-4 after '(', found {label!r}")
            if stack or not nodes:
                nodes.append((int(label), []))
                stack.append(len(nodes) - 1)
            else:
                fail("a second tree on one line")
            position = end
        elif char == ")":
            if not stack:
                fail("unbalanced ')'")
            stack.pop()
            position += 1
        elif char == " ":
            position += 1
        else:
            end = position
            while end < n and line[end] not in " ()":
                end += 1
            if not stack:
                fail("a word outside any bracket")
            word = line[position:end]
            for index in stack:
                nodes[index][1].append(word)
            position = end
    if stack:
        fail("unclosed '('")
    if not nodes or not nodes[0][1]:
        fail("a tree without words")
    return nodes
