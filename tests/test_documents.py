"""Reading labelled documents: every format, and every malformed row refused with its file and line."""

import gzip
from pathlib import Path

import pytest

from seqlab.data.documents import Columns, read_documents, read_texts
from seqlab.data.words import tokenize, with_ngrams
from seqlab.errors import SeqlabError
from seqlab.families.classifier.features import FeatureExtractor, derive_lexicon, read_lexicon

FIXTURES = Path(__file__).parent / "fixtures" / "classify"


@pytest.mark.parametrize("fmt, name, columns", [
    ("tsv", "sentiment.tsv", Columns("text", "label")),
    ("csv", "sentiment.csv", Columns("text", "label")),
    ("jsonl", "sentiment.jsonl", Columns("review", "sentiment")),
    ("labeled-lines", "sentiment.txt", None)])
def test_documents_every_format_reads_the_same_documents(fmt, name, columns):
    documents = read_documents(FIXTURES / name, fmt, columns)
    assert len(documents) == 24
    assert (documents[0].text, documents[0].label) == ("a fine film , warm and funny", "pos")
    assert (documents[1].text, documents[1].label) == ("a dull , lifeless mess", "neg")
    assert documents[1].line == (2 if fmt in ("jsonl", "labeled-lines") else 3)


def test_documents_tsv_by_index_without_header_and_feature_columns(tmp_path):
    path = tmp_path / "plain.tsv"
    path.write_text("pos\tgood film\t1.5\nneg\tbad film\t-2\n")
    documents = read_documents(path, "tsv", Columns("1", "0", ("2",)))
    assert [(d.text, d.label, d.features) for d in documents] == [("good film", "pos", [1.5]),
                                                                  ("bad film", "neg", [-2.0])]
    with_header = read_documents(FIXTURES / "sentiment.tsv", "tsv", Columns("text", "label", ("exclaims",)))
    assert with_header[0].features == [3.0]


def test_documents_unlabelled_tables_may_lack_the_label_column(tmp_path):
    named = tmp_path / "named.tsv"
    named.write_text("id\ttext\n1\tgood film\n")
    assert [(d.text, d.label) for d in read_documents(named, "tsv", labelled=False)] == [("good film", None)]
    with pytest.raises(SeqlabError, match="no column named 'label'"):
        read_documents(named, "tsv")
    plain = tmp_path / "plain.tsv"
    plain.write_text("good film\n")
    assert read_documents(plain, "tsv", Columns("0", "1"), labelled=False)[0].text == "good film"


def headerless(tmp_path: Path, order: str, fmt: str = "tsv") -> Path:
    """The fixture's reviews without a header row: text then label ("text-label", the documented order), or
    label then text."""
    documents = read_documents(FIXTURES / "sentiment.tsv", "tsv")
    delimiter = "\t" if fmt == "tsv" else ","
    rows = [(d.text.replace(",", ";"), d.label) if order == "text-label" else (d.label, d.text.replace(",", ";"))
            for d in documents]
    path = tmp_path / f"{order}.{fmt}"
    path.write_text("".join(delimiter.join(row) + "\n" for row in rows))
    return path


@pytest.mark.parametrize("fmt", ["tsv", "csv"])
@pytest.mark.parametrize("order, text, label", [("text-label", "0", "1"), ("label-text", "1", "0")])
def test_documents_a_headerless_table_is_refused_naming_the_options_that_read_it(tmp_path, fmt, order, text, label):
    path = headerless(tmp_path, order, fmt)
    with pytest.raises(SeqlabError) as refused:
        read_documents(path, fmt)
    message = str(refused.value)
    assert f"{path}: no column named 'text' in the first row; it reads as data, not a header" in message
    assert message.endswith(f"so the file has no header row: pass --header no --text-column {text} "
                            f"--label-column {label}")
    assert "this looks like" not in message                  # labeled-lines is not offered for a table
    documents = read_documents(path, fmt, Columns(text, label, header="no"))   # the options named: every row read
    assert len(documents) == 24 and (documents[0].text, documents[0].label) == ("a fine film ; warm and funny", "pos")
    with pytest.raises(SeqlabError, match=f"pass --header no --text-column {text}$"):
        read_documents(path, fmt, labelled=False)           # unlabelled input: no label column to name
    named = tmp_path / "named.tsv"                          # a real header with other names: listed, no guess
    named.write_text("sentence\tsentiment\ngood film\tpos\nbad\tneg\n")
    with pytest.raises(SeqlabError, match="no column named 'text'; the header has 'sentence', 'sentiment'$"):
        read_documents(named, "tsv")


def test_documents_csv_quoted_commas_and_gzip(tmp_path):
    path = tmp_path / "quoted.csv.gz"
    path.write_bytes(gzip.compress(b'text,label\n"one, two, three",a\n"say ""hi""",b\n'))
    documents = read_documents(path, "csv")
    assert [(d.text, d.label) for d in documents] == [("one, two, three", "a"), ('say "hi"', "b")]


def test_documents_lines_break_at_newlines_only(tmp_path):
    """A text may hold U+2028 or U+0085 (IMDB reviews do); only "\n" ends a line."""
    path = tmp_path / "odd.jsonl"
    path.write_text('{"text": "one\u2028two\x85three", "label": 1}\r\n{"text": "four", "label": 0}\n', encoding="utf-8")
    documents = read_documents(path, "jsonl")
    assert [(d.text, d.label, d.line) for d in documents] == [("one\u2028two\x85three", "1", 1), ("four", "0", 2)]
    tsv = tmp_path / "odd.tsv"
    tsv.write_text("text\tlabel\nfive\x0csix\tb\n", encoding="utf-8")
    assert read_documents(tsv, "tsv")[0].text == "five\x0csix"


def test_documents_sst_trees_five_classes_binary_and_phrases():
    five = read_documents(FIXTURES / "sst.txt", "sst-tree")
    assert [d.label for d in five] == ["4", "0", "2", "3", "1", "4", "0", "2", "3", "1"]
    assert five[0].text == "a fine film , warm and funny"
    binary = read_documents(FIXTURES / "sst.txt", "sst-tree", sst_classes=2)
    assert [d.label for d in binary] == ["1", "0", "1", "0", "1", "0", "1", "0"]      # the 2s dropped
    assert [d.line for d in binary][:3] == [1, 2, 4]
    phrases = read_documents(FIXTURES / "sst.txt", "sst-tree", phrases=True)
    texts = {(d.text, d.label) for d in phrases}
    assert ("fine film", "3") in texts and ("lifeless mess", "0") in texts and ("loved", "4") in texts
    assert len(texts) == len(phrases)                                                  # no duplicates


@pytest.mark.parametrize("fmt, content, message", [
    ("tsv", "text\tlabel\ngood film\tpos\nbad film\t\n", "bad.tsv:3: the label ('label') is missing or empty"),
    ("tsv", "text\tlabel\ngood film\tpos\n \tneg\n", "bad.tsv:3: the text ('text') is missing or empty"),
    ("tsv", "text\tlabel\ngood film\tpos\nbad film,neg\n", "bad.tsv:3: expected 2 tab-separated fields (as in the "
     "first row), found 1; this row seems to use commas (mixed delimiters?)"),
    ("csv", "text,label\ngood film,pos\nbad film\tneg\n", "bad.csv:3: expected 2 comma-separated fields (as in "
     "the first row), found 1; this row seems to use tabs (mixed delimiters?)"),
    ("tsv", "words\tlabel\ngood\tpos\n", "no column named 'text'; the header has 'words', 'label'"),
    ("jsonl", '{"text": "good", "label": 1}\n{"text": "bad"\n', "bad.jsonl:2 is not valid JSON"),
    ("jsonl", '{"text": "good", "label": 1}\n{"text": "bad"}\n', "bad.jsonl:2: no field 'label'"),
    ("jsonl", '{"text": "", "label": 1}\n', "bad.jsonl:1: the text ('text') is missing or empty"),
    ("labeled-lines", "pos good film\nneg\n", "bad.labeled-lines:2: expected 'label text', found only 'neg'"),
    ("sst-tree", "(3 (2 good) (3 film)\n", "bad.sst-tree:1: not an SST tree (unclosed '('"),
    ("sst-tree", "(7 (2 good))\n", "bad.sst-tree:1: not an SST tree (expected a label 0-4 after '(', found '7'"),
])
def test_documents_malformed_rows_name_file_and_line(tmp_path, fmt, content, message):
    path = tmp_path / f"bad.{fmt}"
    path.write_text(content)
    with pytest.raises(SeqlabError, match=message.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
        read_documents(path, fmt)


def test_documents_missing_and_empty_files(tmp_path):
    with pytest.raises(SeqlabError, match="does not exist"):
        read_documents(tmp_path / "none.tsv", "tsv")
    (tmp_path / "empty.tsv").write_text("\n")
    with pytest.raises(SeqlabError, match="is empty"):
        read_documents(tmp_path / "empty.tsv", "tsv")
    (tmp_path / "header-only.tsv").write_text("text\tlabel\n")
    with pytest.raises(SeqlabError, match="holds no documents"):
        read_documents(tmp_path / "header-only.tsv", "tsv")


def test_documents_unlabelled_texts_refuse_an_empty_line(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("good film\nbad film\n\n")
    assert [d.text for d in read_texts(path)] == ["good film", "bad film"]
    path.write_text("good film\n\nbad film\n")
    with pytest.raises(SeqlabError, match="in.txt:2: empty line"):
        read_texts(path)


def test_text_features_tokenizer_ngrams_lexicon_and_book_features(tmp_path):
    assert tokenize("I didn't LOVE it!<br /><br />A re-imagining, 's") == \
        ["i", "didn't", "love", "it", "!", "a", "re-imagining", ",", "'s"]
    assert tokenize("Keep As IS", "whitespace", lowercase=False) == ["Keep", "As", "IS"]
    assert with_ngrams(["a", "fine", "film"], 3) == ["a", "fine", "film", "a fine", "fine film", "a fine film"]
    docs = [["great", "film"], ["great", "fun"], ["dull", "film"], ["dull", "plot"]] * 3
    lexicon = derive_lexicon(docs, ["pos", "pos", "neg", "neg"] * 3, size=5, min_count=2)
    assert lexicon == {"great": "pos", "fun": "pos", "dull": "neg", "plot": "neg"}
    path = tmp_path / "lexicon.txt"
    path.write_text("# word class\nGood positive\nbad negative\n")
    assert read_lexicon(path) == {"good": "positive", "bad": "negative"}
    path.write_text("good\n")
    with pytest.raises(SeqlabError, match="lexicon.txt:1: expected 'word class'"):
        read_lexicon(path)
    extractor = FeatureExtractor({"good": "positive", "bad": "negative"})
    # SLP Fig. 5.2: lexicon counts, negation, 1st/2nd person pronouns, "!", ln(word count)
    tokens = ["i", "do", "not", "like", "this", "bad", ",", "bad", "film", "!"]
    assert extractor.raw(tokens, None)[:5] == [2.0, 0.0, 1.0, 1.0, 1.0]
    assert extractor.raw(tokens, None)[5] == pytest.approx(2.302585, abs=1e-6)
    assert extractor.names == ["lexicon:negative", "lexicon:positive", "negation", "pronouns", "exclamation",
                               "log_length"]
    extractor.fit([extractor.raw(tokens, None), extractor.raw(["good"], None)])
    standardised = extractor([extractor.raw(tokens, None), extractor.raw(["good"], None)])
    assert standardised.mean(0).abs().max() < 1e-6
