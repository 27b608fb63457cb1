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
The readers hand on one document at a time from the lines of a `seqlab.data.stream.LineReader`
(`document_reader`, `text_documents`), so that a file of any size is read in bounded memory.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from seqlab.data.sniff import FORMAT, FormatOption, RightFormat, hinted
from seqlab.data.stream import Line, LineReader, refuse_cut
from seqlab.errors import SeqlabError, place

FORMATS = ("tsv", "csv", "jsonl", "labeled-lines", "sst-tree")
# the order in which a refused file is tried in the other formats (`seqlab.data.sniff`): the strictest first,
# as labeled-lines reads nearly any line with a space in it (a JSON record, a tree)
SNIFF_ORDER = ("jsonl", "sst-tree", "tsv", "csv", "labeled-lines")


@dataclass
class Document:
    """A text, its label (None where the file has none) and its numeric feature columns, if asked for."""

    text: str
    label: str | None
    line: int = 0
    features: list[float] | None = None
    cut: bool = False            # its line was too long to read whole: `text` is the part read


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
    read = document_reader(fmt, columns, path, what, labelled, sst_classes, phrases)
    with LineReader(path, what, stdin=False) as lines:
        return list(read(lines))


def document_reader(fmt: str, columns: Columns | None = None, path="", what: str = "file", labelled: bool = True,
                    sst_classes: int = 5, phrases: bool = False, formats: tuple[str, ...] = FORMATS,
                    option: FormatOption | None = FORMAT) -> Callable[[Iterable[Line]], Iterator[Document]]:
    """A function from the lines of a file (a LineReader) to its documents, one at a time; the options
    are checked at once. A refused file that another of `formats` (the family's) reads says so, naming
    `option` (`seqlab.data.sniff`; None: it does not)."""
    if fmt not in FORMATS:
        raise SeqlabError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if fmt == "sst-tree" and sst_classes not in (2, 5):
        raise SeqlabError(f"--sst-classes {sst_classes}: choose 5 (very negative ... very positive) or 2 "
                          "(negative / positive, neutral dropped)")
    columns = columns or Columns()

    def read(lines: Iterable[Line]) -> Iterator[Document]:
        if fmt in ("tsv", "csv"):
            documents = _read_table(lines, path, fmt, columns, what, labelled)
        elif fmt == "jsonl":
            documents = _read_jsonl(lines, path, columns, what, labelled)
        elif fmt == "labeled-lines":
            documents = _read_labeled_lines(lines, path, what)
        else:
            documents = _read_trees(lines, path, what, sst_classes, phrases)
        count = 0
        for document in documents:
            count += 1
            yield document
        if not count:
            raise SeqlabError(f"{place(what, path)} holds no documents")

    def other(name: str) -> Callable[[Iterable[Line]], Iterator[Document]]:
        read_other = document_reader(name, columns, path, what, labelled, sst_classes, option=None)
        return _plain_labels(read_other) if name == "labeled-lines" else read_other
    return hinted(read, fmt, [name for name in SNIFF_ORDER if name in formats], other, path, option)


NOT_IN_A_LABEL = frozenset("\"'{}[](),\t")     # what a "label" taken from a JSON record, a table row or a tree holds


def _plain_labels(read: Callable[[Iterable[Line]], Iterator[Document]]
                  ) -> Callable[[Iterable[Line]], Iterator[Document]]:
    """labeled-lines as a sniff reads it: a label holding a quote, a bracket, a comma or a tab is refused.
    The reader takes the first word of nearly any line for a label (`{"text":` of a JSON record, `0<TAB>a`
    of a TSV row), and a hint must not send a file of another format, or of the right one with a misnamed
    column, to it."""
    def checked(lines: Iterable[Line]) -> Iterator[Document]:
        for document in read(lines):
            if NOT_IN_A_LABEL & set(document.label or ""):
                raise SeqlabError(f"line {document.line}: {document.label!r} is not a plain label")
            if "\t" in document.text:
                raise SeqlabError(f"line {document.line}: a tab-separated row, not 'label text'")
            yield document
    return checked


def read_texts(path: str | Path, what: str = "input file") -> list[Document]:
    """One unlabelled document per line (for `seqlab classify`); a blank line is refused."""
    with LineReader(path, what, stdin=False) as lines:
        return list(text_documents(lines, path, what))


def text_documents(lines: Iterable[Line], path, what: str = "input file") -> Iterator[Document]:
    """One unlabelled document per line, one at a time: blank lines at the end are dropped, one before
    a later text is refused with its line. A Document from a line too long to read whole is `cut`."""
    blank = 0                                   # the first blank line since the last text
    for line in lines:
        if not line.text.strip():
            blank = blank or line.number
            continue
        if blank:
            raise SeqlabError(f"{place(what, path, blank)}: empty line; every line must hold a document")
        yield Document(line.text, None, line.number, cut=line.cut)


def _index_or_name(value: str) -> int | str:
    return int(value) if str(value).lstrip("-").isdigit() else str(value)


def _read_table(lines: Iterable[Line], path, fmt: str, columns: Columns, what: str,
                labelled: bool) -> Iterator[Document]:
    delimiter, other = ("\t", ",") if fmt == "tsv" else (",", "\t")
    wanted = [_index_or_name(c) for c in (columns.text, columns.label, *columns.features)]
    if columns.header not in ("auto", "yes", "no"):
        raise SeqlabError(f"--header {columns.header!r}: choose auto, yes or no")
    if not labelled and columns.header == "no" and isinstance(wanted[1], str):
        wanted[1] = 1 << 30                      # unlabelled input without a header: no label column to name
    named = any(isinstance(c, str) for c in wanted)
    has_header = columns.header == "yes" or (columns.header == "auto" and named)
    if named and not has_header:
        names = ", ".join(str(c) for c in wanted if isinstance(c, str))
        raise SeqlabError(f"{place(what, path)}: columns given by name ({names}) need a header row; drop --header "
                          "no or give 0-based indexes")
    rows = _tsv_rows(lines, path, what) if fmt == "tsv" else _csv_rows(lines, path, what)
    width = None
    positions: list[int] = []
    for number, fields in rows:
        if not any(f.strip() for f in fields):
            continue
        if width is None:
            width = len(fields)
            if has_header:
                header = [f.strip() for f in fields]
                no_label = not labelled and isinstance(wanted[1], str) and wanted[1] not in header
                missing = [c for i, c in enumerate(wanted) if isinstance(c, str) and c not in header
                           and not (i == 1 and no_label)]
                if missing:           # this refuses the file: reading rows ahead to say why loses nothing
                    sample = [fields, *(row for _, row in _rows_ahead(rows, SAMPLE_ROWS))]
                    _refuse_header(sample, missing[0], header, fmt, labelled, place(what, path))
                positions = [len(header) if i == 1 and no_label else _column_position(c, header, path, what)
                             for i, c in enumerate(wanted)]    # unlabelled input may lack the label column
                continue
            for i, c in enumerate(wanted):
                if not labelled and i == 1 and not -width <= c < width:
                    positions = [*wanted[:1], width, *wanted[2:]]          # no label column: read as empty
                    continue
                if not -width <= c < width:
                    raise SeqlabError(f"{place(what, path, number)}: column {c} does not exist; the file has "
                                      f"{width} {_field_word(fmt)} columns")
            positions = positions or list(wanted)
        if len(fields) != width:
            hint = ""
            if len(fields) < width and other in "".join(fields):
                hint = f"; this row seems to use {'tabs' if other == chr(9) else 'commas'} (mixed delimiters?)"
            raise SeqlabError(f"{place(what, path, number)}: expected {width} {_field_word(fmt)} fields (as in "
                              f"the first row), found {len(fields)}{hint}")
        yield _document(fields, positions, columns, path, number, what, labelled)


SAMPLE_ROWS = 50           # rows read to tell a header from data (`_refuse_header`)
LABEL_WORDS = 3            # the most words of a value in a column of labels
LABEL_CHARS = 40           # ... and the most characters


def _rows_ahead(rows: Iterator[tuple[int, list[str]]], count: int) -> list[tuple[int, list[str]]]:
    """Up to `count` more rows, fewer where the file ends or a row cannot be read."""
    ahead = []
    try:
        for row in rows:
            ahead.append(row)
            if len(ahead) >= count:
                break
    except SeqlabError:
        pass
    return ahead


def _refuse_header(sample: list[list[str]], missing: str, header: list[str], fmt: str, labelled: bool,
                   where: str) -> None:
    """The refusal of a table whose first row lacks the column `missing`, naming the options that read it.

    A first row that reads as data, not names, means a file without a header (`text<TAB>label`, the documented
    order, or `label<TAB>text`): its label column is the one of short values (at most LABEL_WORDS words) that
    repeat (fewest distinct values; no quote, bracket or comma: not a piece of JSON or of a row split by the
    wrong delimiter), its text column the one of most words, and the first row is data when
    its text has several words or its label recurs below. Then the message names `--header no` and the two
    columns by index (and no other format is hinted); otherwise it lists the header's names."""
    shown = ", ".join(map(repr, header))
    guess = _headerless_columns(sample)
    if guess is not None and (guess[1] is not None or not labelled):
        text, label = guess
        first = sample[0]
        flags = f"--header no --text-column {text}" + (f" --label-column {label}" if labelled else "")
        raise SeqlabError(f"{where}: no column named {missing!r} in the first row; it reads as data, not a header "
                          f"(the text {first[text].strip()[:60]!r}" + (f" labelled {first[label].strip()!r}"
                                                                       if labelled else "") +
                          f"), so the file has no header row: pass {flags}") from RightFormat()
    raise SeqlabError(f"{where}: no column named {missing!r}; the header has {shown}")


def _headerless_columns(sample: list[list[str]]) -> tuple[int, int | None] | None:
    """(text column, label column or None) of table rows whose first row reads as data (see `_refuse_header`),
    or None when it may be a header."""
    width = len(sample[0])
    rows = [row for row in sample if len(row) == width and any(f.strip() for f in row)]
    values = [[row[j].strip() for row in rows] for j in range(width)]
    words = [sum(len(v.split()) for v in column) / len(column) for column in values]
    text = max(range(width), key=words.__getitem__)
    if words[text] < 2:
        return None                                # no column of documents: names or data, it cannot tell
    short = [j for j in range(width) if j != text and all(len(v.split()) <= LABEL_WORDS and len(v) <= LABEL_CHARS
                                                         and not NOT_IN_A_LABEL & set(v) for v in values[j])]
    label = min(short, key=lambda j: (len(set(values[j])), j)) if short else None
    if label is not None and len(rows) >= 3 and len(set(values[label])) == len(rows):
        label = None                               # no value repeats: not a column of labels
    if width > 1 and label is None:
        return None
    sentence = len(values[text][0].split()) >= LABEL_WORDS
    recurs = label is not None and values[label][0] in values[label][1:]
    return (text, label) if sentence or recurs else None


def _tsv_rows(lines: Iterable[Line], path, what: str) -> Iterator[tuple[int, list[str]]]:
    for line in lines:
        refuse_cut(line, place(what, path, line.number), "TSV")
        yield line.number, line.text.split("\t")


def _csv_rows(lines: Iterable[Line], path, what: str) -> Iterator[tuple[int, list[str]]]:
    """RFC 4180 rows (a quoted field may span lines), each with the number of its last line as the csv
    module counts lines (a lone "\r" ends one, as in a file opened with newline="")."""
    def physical() -> Iterator[str]:
        for line in lines:
            refuse_cut(line, place(what, path, line.number), "CSV")
            yield from io.StringIO(line.text + "\n", newline="")

    reader = csv.reader(physical())
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise SeqlabError(f"{place(what, path, reader.line_num)}: not a CSV row ({error})") from None
        yield reader.line_num, row


def _field_word(fmt: str) -> str:
    return "tab-separated" if fmt == "tsv" else "comma-separated"


def _column_position(column: int | str, header: list[str], path, what: str) -> int:
    if isinstance(column, int):
        if not -len(header) <= column < len(header):
            raise SeqlabError(f"{place(what, path)}: column {column} does not exist; the header has {len(header)} "
                              "columns")
        return column
    if column not in header:
        raise SeqlabError(f"{place(what, path)}: no column named {column!r}; the header has "
                          f"{', '.join(map(repr, header))}")
    return header.index(column)


def _document(fields: list, positions: list[int], columns: Columns, path, number: int, what: str,
              labelled: bool) -> Document:
    text = fields[positions[0]]
    label = fields[positions[1]] if positions[1] < len(fields) else None
    names = (columns.text, columns.label, *columns.features)
    if text is not None and not isinstance(text, str):
        raise SeqlabError(f"{place(what, path, number)}: the text ({names[0]!r}) is {_json_kind(text)}, expected a "
                          "string")
    if text is None or not text.strip():
        raise SeqlabError(f"{place(what, path, number)}: the text ({names[0]!r}) is missing or empty")
    if label is not None and not (isinstance(label, str) or (isinstance(label, int) and not isinstance(label, bool)
                                                              and not columns.label_is_text)):
        expected = "a string" if columns.label_is_text else "a string or an integer"
        raise SeqlabError(f"{place(what, path, number)}: the {'target' if columns.label_is_text else 'label'} "
                          f"({names[1]!r}) is {_json_kind(label)}, expected {expected}")
    if label is None or not str(label).strip():
        if labelled:
            raise SeqlabError(f"{place(what, path, number)}: the label ({names[1]!r}) is missing or empty")
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
                raise SeqlabError(f"{place(what, path, number)}: feature {name!r} is {value!r}, "
                                  "expected a number") from None
            if not math.isfinite(features[-1]):
                raise SeqlabError(f"{place(what, path, number)}: feature {name!r} is {value!r}, expected a finite "
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


def _read_jsonl(lines: Iterable[Line], path, columns: Columns, what: str, labelled: bool) -> Iterator[Document]:
    names = [str(c) for c in (columns.text, columns.label, *columns.features)]
    for line in lines:
        number, text = line.number, line.text
        if not text.strip():
            continue
        refuse_cut(line, place(what, path, number), "JSON-lines")
        try:
            record = json.loads(text)
        except json.JSONDecodeError as error:
            raise SeqlabError(f"{place(what, path, number)} is not valid JSON: {error.msg}") from None
        if not isinstance(record, dict):
            raise SeqlabError(f"{place(what, path, number)}: expected a JSON object, found {type(record).__name__}")
        missing = [n for i, n in enumerate(names) if n not in record and (i != 1 or labelled)]
        if missing:
            raise SeqlabError(f"{place(what, path, number)}: no field {missing[0]!r}; the record has "
                              f"{', '.join(map(repr, record)) or 'no fields'}")
        fields = [record.get(n) for n in names]
        if isinstance(fields[1], float) and fields[1].is_integer() and not columns.label_is_text:
            fields[1] = int(fields[1])                   # 1.0 is the class 1
        yield _document(fields, list(range(len(names))), columns, path, number, what, labelled)


def _read_labeled_lines(lines: Iterable[Line], path, what: str) -> Iterator[Document]:
    for line in lines:
        number, text = line.number, line.text
        if not text.strip():
            continue
        refuse_cut(line, place(what, path, number), "'label text'")
        label, _, body = text.strip().partition(" ")
        label = label.removeprefix("__label__")
        if not body.strip():
            raise SeqlabError(f"{place(what, path, number)}: expected 'label text', found only {label!r} "
                              "(the text is missing or empty)")
        yield Document(body.strip(), label, number)


# ---------------------------------------------------------------------------- SST trees

BRACKETS = {"-LRB-": "(", "-RRB-": ")", "-lrb-": "(", "-rrb-": ")"}


def _read_trees(lines: Iterable[Line], path, what: str, sst_classes: int, phrases: bool) -> Iterator[Document]:
    seen = set()
    for line in lines:
        number = line.number
        if not line.text.strip():
            continue
        refuse_cut(line, place(what, path, number), "SST tree")
        nodes = _parse_tree(line.text.strip(), path, number, what)       # (label, words), root first
        for label, words in nodes if phrases else nodes[:1]:
            if sst_classes == 2:
                if label == 2:
                    continue
                label = 0 if label < 2 else 1
            text = " ".join(BRACKETS.get(w, w) for w in words)
            if phrases:
                if (text, label) in seen:
                    continue
                seen.add((text, label))
            yield Document(text, str(label), number)


def _parse_tree(line: str, path, number: int, what: str) -> list[tuple[int, list[str]]]:
    """Every node of one bracketed tree as (label, its words), in preorder (the root first)."""
    nodes: list[tuple[int, list[str]]] = []
    stack: list[int] = []                # indexes into nodes of the open brackets
    position, n = 0, len(line)

    def fail(message: str):
        raise SeqlabError(f"{place(what, path, number)}: not an SST tree ({message} at character {position + 1})")

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
