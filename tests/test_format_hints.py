"""A file refused in one format names the format that would have read it (`seqlab.data.sniff`).

For each family with several formats, every file in format A is given to the reader of every other format
B: where B refuses it, the refusal is B's own message followed by "(this looks like A: pass --format A, or
format="A" in Python)". A file no reader reads, a file right for its format but for one line, and a line
past the sniffed first lines get B's message unchanged.
"""

from __future__ import annotations

import pytest

from seqlab.data.documents import Columns, document_reader
from seqlab.data.sniff import EVALUATED, FORMAT, SNIFF_BYTES, SNIFF_LINES, first_lines
from seqlab.data.stream import LineReader
from seqlab.errors import SeqlabError
from seqlab.families.seq2seq.parallel import paired_reader
from seqlab.families.tagger.conll import labelled_sentences

# one tiny file per format, by family
FILES = {
    "tagger": {
        "conllu": "# sent_id = 1\n1\tEU\teu\tPROPN\tNNP\t_\t2\tnsubj\t_\t_\n"
                  "2\trejects\treject\tVERB\tVBZ\t_\t0\troot\t_\t_\n\n",
        "conll": "-DOCSTART- -X- -X- O\n\nMelbourne NP B-LOC\nrejects VBZ O\n\n",
    },
    "classifier": {
        "tsv": "text\tlabel\na fine film\tpos\na dull plot\tneg\n",
        "csv": 'text,label\n"a fine, warm film",pos\na dull plot,neg\n',
        "jsonl": '{"text": "a fine film", "label": "pos"}\n{"text": "a dull plot", "label": "neg"}\n',
        "labeled-lines": "pos a fine film\n__label__neg a dull plot\n",
        "sst-tree": "(3 (2 a) (3 (3 fine) (2 film)))\n(1 (2 a) (1 (1 dull) (2 plot)))\n",
    },
    "seq2seq": {
        "tsv": "source\ttarget\nein haus\ta house\nein hund\ta dog\n",
        "jsonl": '{"source": "ein haus", "target": "a house"}\n{"source": "ein hund", "target": "a dog"}\n',
    },
}
# (family, file's format, reader's format) where the reader reads the other format's file: labeled-lines
# takes the first word of a JSON record or a tree for its label
READ_ANYWAY = {("classifier", "jsonl", "labeled-lines"), ("classifier", "sst-tree", "labeled-lines")}


def read(family: str, path, fmt: str, option=FORMAT, columns: Columns | None = None) -> list:
    """Everything the family's reader of `fmt` reads from `path`, as training reads it."""
    if family == "tagger":
        reader = labelled_sentences(None, fmt, None, path, "training file", option=option)
    elif family == "classifier":
        reader = document_reader(fmt, columns, path, "training file", option=option)
    else:
        reader = paired_reader(fmt, path=path, what="training file", option=option)
    with LineReader(path, "training file", stdin=False) as lines:
        return list(reader(lines))


def refusal(family: str, path, fmt: str, **options) -> str:
    with pytest.raises(SeqlabError) as caught:
        read(family, path, fmt, **options)
    return str(caught.value)


PAIRS = [(family, a, b) for family, files in FILES.items() for a in files for b in files if a != b]


@pytest.mark.parametrize(("family", "written", "given"), PAIRS, ids=["-".join(p) for p in PAIRS])
def test_format_hints_name_the_format_that_reads_the_file(tmp_path, family, written, given):
    path = tmp_path / f"train.{written}"
    path.write_text(FILES[family][written], encoding="utf-8")
    assert read(family, path, written)                       # the file is right for its own format
    if (family, written, given) in READ_ANYWAY:
        assert read(family, path, given)
        return
    plain = refusal(family, path, given, option=None)
    assert "this looks like" not in plain and str(path) in plain
    assert refusal(family, path, given) == f'{plain} (this looks like {written}: pass --format {written}, or ' \
                                           f'format="{written}" in Python)'


@pytest.mark.parametrize(("family", "text"), [("tagger", "EU\nrejects\n\n"),
                                              ("classifier", "justoneword\nanother\n"),
                                              ("seq2seq", "justoneword\nanother\n")])
def test_format_hints_none_when_no_reader_reads_the_file(tmp_path, family, text):
    path = tmp_path / "train.txt"
    path.write_text(text, encoding="utf-8")
    for fmt in FILES[family]:
        assert refusal(family, path, fmt) == refusal(family, path, fmt, option=None)
        assert "this looks like" not in refusal(family, path, fmt)


def test_format_hints_none_for_a_right_format_with_one_bad_line(tmp_path):
    """A CoNLL-U file without comments whose second ID is wrong reads as CoNLL (10 whitespace columns), and a
    JSON-lines file with other field names as labeled-lines ('{"review":' the label): neither is a wrong
    --format, so neither names one."""
    conllu = tmp_path / "bad.conllu"
    conllu.write_text("1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_\nx\tdog\tdog\tNOUN\tNN\t_\t0\troot\t_\t_\n\n")
    assert refusal("tagger", conllu, "conllu") == refusal("tagger", conllu, "conllu", option=None)
    assert "the ID column holds 'x'" in refusal("tagger", conllu, "conllu")
    jsonl = tmp_path / "reviews.jsonl"
    jsonl.write_text('{"review": "a fine film", "stars": "5"}\n')
    for fmt in ("jsonl", "tsv", "csv"):
        assert "this looks like" not in refusal("classifier", jsonl, fmt)


def test_format_hints_use_the_columns_given(tmp_path):
    """The other readers read with the options given: JSON-lines with --text-column review is jsonl."""
    path = tmp_path / "reviews.jsonl"
    path.write_text('{"review": "a fine film", "stars": "5"}\n{"review": "a dull plot", "stars": "1"}\n')
    columns = Columns("review", "stars")
    assert refusal("classifier", path, "tsv", columns=columns).endswith(
        '(this looks like jsonl: pass --format jsonl, or format="jsonl" in Python)')


def test_format_hints_only_for_a_refusal_within_the_sniffed_lines(tmp_path):
    """Headerless TSV rows read as labeled-lines ("pos\\ta" the label) up to a row without a space: refused
    within the first SNIFF_LINES lines, the file is named TSV; refused past them, it is not (the sniff never
    reads as far as the refusal, and a file right for that long is more likely wrong in one line)."""
    columns = Columns("1", "0", header="no")
    for rows, hinted in ((10, True), (SNIFF_LINES + 10, False)):
        path = tmp_path / f"rows{rows}.tsv"
        path.write_text("pos\ta fine film\n" * rows + "neg\tdull\n")
        assert len(read("classifier", path, "tsv", columns=columns)) == rows + 1
        message = refusal("classifier", path, "labeled-lines", columns=columns)
        assert f":{rows + 1}: expected 'label text'" in message
        assert message.endswith('(this looks like tsv: pass --format tsv, or format="tsv" in Python)') == hinted


def test_format_hints_sniff_a_bounded_start(tmp_path):
    short = tmp_path / "short.txt"
    short.write_text("a b\n" * (SNIFF_LINES * 4))
    assert [line.number for line in first_lines(short)] == list(range(1, SNIFF_LINES + 1))
    wide = tmp_path / "wide.txt"
    wide.write_text(("x" * 4000 + "\n") * 40)             # the 17th line starts past SNIFF_BYTES
    assert len(first_lines(wide)) == -(-SNIFF_BYTES // 4001)
    huge = tmp_path / "huge.txt"
    huge.write_text("x" * (4 * SNIFF_BYTES) + "\na b\n")  # a first line longer than the sniff reads
    assert first_lines(huge) == []


def test_format_hints_name_the_evaluation_keyword():
    assert EVALUATED.hint("conll") == ' (this looks like conll: pass --format conll, or fmt="conll" in Python)'


def test_format_hints_through_the_command_line(tmp_path, capsys):
    from seqlab.cli.main import main

    path = tmp_path / "ner.txt"
    path.write_text("Melbourne NP B-LOC\nis VBZ O\n\n", encoding="utf-8")
    code = main(["train", "tagger", "--train", str(path), "--dev", str(path), "--output", str(tmp_path / "run"),
                 "--no-progress"])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and "Traceback" not in err
    assert lines[-1] == (f"seqlab: error: training file {path}:1: expected 10 tab-separated CoNLL-U columns, found 1 "
                         "in 'Melbourne NP B-LOC' (this looks like conll: pass --format conll, or format=\"conll\" "
                         "in Python)")
    assert sum("error" in line for line in lines) == 1


def test_format_hints_through_the_python_api(tmp_path):
    import seqlab

    path = tmp_path / "reviews.txt"
    path.write_text(FILES["classifier"]["labeled-lines"], encoding="utf-8")
    with pytest.raises(SeqlabError, match=r"no column named 'text'.*\(this looks like labeled-lines: pass --format "
                                          r"labeled-lines, or format=\"labeled-lines\" in Python\)$"):
        seqlab.prepare("classifier", tmp_path / "prepared", train=str(path), dev=str(path), progress=False)


@pytest.mark.slow
def test_format_hints_when_evaluating(serve_runs, tmp_path, capsys):
    """seqlab evaluate and Trained*.evaluate_file(path, fmt=...) name --format and fmt=."""
    import seqlab
    from seqlab.cli.main import main

    cases = [("ner", FILES["tagger"]["conllu"], "conll", "conllu"),
             ("sentiment", FILES["classifier"]["labeled-lines"], "tsv", "labeled-lines"),
             ("de-en", FILES["seq2seq"]["jsonl"], "tsv", "jsonl")]
    for run, text, given, written in cases:
        path = tmp_path / f"{run}.{written}"
        path.write_text(text, encoding="utf-8")
        hint = f'(this looks like {written}: pass --format {written}, or fmt="{written}" in Python)'
        assert main(["evaluate", str(serve_runs[run]), str(path), "--format", given]) == 2
        assert capsys.readouterr().err.strip().splitlines()[-1].endswith(hint)
        model = seqlab.load(serve_runs[run])
        evaluate = model.evaluate_files if run == "de-en" else model.evaluate_file
        with pytest.raises(SeqlabError) as caught:
            evaluate(path, fmt=given)
        assert str(caught.value).endswith(hint)
