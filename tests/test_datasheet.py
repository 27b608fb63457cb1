"""seqlab.cards.datasheet on hand-counted fixtures."""
import hashlib

import pytest

from seqlab.cards.data import read_units
from seqlab.cards.datasheet import (
    character_classes,
    contamination,
    datasheet,
    file_sheet,
    label_distribution,
    normalise,
    to_markdown,
)

# 4 non-blank lines (one blank line between), the first repeated once (the repeat has extra spaces)
TEXT = "the cat sat .\n\nthe dog ran 2 km !\n  the   cat sat .  \ncafé ünd é\n"
WORDS = [f"w{i}" for i in range(40)]


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def test_datasheet_file_sheet_counts(tmp_path):
    path = write(tmp_path, "train.txt", TEXT)
    sheet = file_sheet(path, "train")
    assert sheet["name"] == "train"
    assert sheet["sha256"] == hashlib.sha256(TEXT.encode("utf-8")).hexdigest()
    assert sheet["bytes"] == len(TEXT.encode("utf-8")) == len(TEXT) + 3   # é, ü, é take 2 bytes each
    assert sheet["lines"] == 4
    assert sheet["units"] == 4 and sheet["unit"] == "lines"
    assert sheet["tokens"] == 4 + 6 + 4 + 3
    # the cat sat . dog ran 2 km ! café ünd é
    assert sheet["types"] == 12
    assert sheet["duplicates"] == {"count": 1, "share": 0.25}
    assert file_sheet(path, "train", unit="sentences", units=7)["units"] == 7


def test_datasheet_character_classes():
    summary = character_classes("Ab1 ,\n\x07ééü")
    assert summary["characters"] == 10
    assert summary["classes"] == {"ascii_letters": 2, "digits": 1, "whitespace": 2, "punctuation": 1,
                                  "other_ascii": 1, "non_ascii": 3}
    assert summary["top_non_ascii"] == [{"char": "é", "codepoint": "U+00E9", "count": 2},
                                        {"char": "ü", "codepoint": "U+00FC", "count": 1}]


def test_datasheet_file_sheet_charset(tmp_path):
    classes = file_sheet(write(tmp_path, "a.txt", TEXT), "a")["charset"]["classes"]
    assert classes["non_ascii"] == 3   # é ü é
    assert classes["digits"] == 1
    assert classes["punctuation"] == 3
    assert sum(classes.values()) == len(TEXT)


def test_datasheet_duplicates_counted_once_each(tmp_path):
    sheet = file_sheet(write(tmp_path, "d.txt", "a b\nc\na b\na b\n"), "d")
    assert sheet["duplicates"]["count"] == 2
    assert sheet["duplicates"]["share"] == pytest.approx(0.5)


def test_datasheet_label_distribution_order():
    assert list(label_distribution(["O", "B-PER", "O", "I-PER", "O", "B-PER"]).items()) == [
        ("O", 3), ("B-PER", 2), ("I-PER", 1)]


def test_datasheet_contamination_13_gram_found_12_not():
    train = [" ".join(WORDS[:20])]
    found = " ".join(["x", "y", *WORDS[3:16], "z"])        # shares words 3..15: 13 words
    missed = " ".join(["x", "y", *WORDS[3:15], "z"])       # shares 12 words
    result = contamination(train, [found, missed])
    assert result["n"] == 13 and result["eval_lines"] == 2
    assert result["ngram"] == 1 and result["ngram_share"] == 0.5
    assert result["verbatim"] == 0
    assert result["long_ngram"] == 1 and result["long_ngram_share"] == 0.5
    assert contamination(train, [missed])["ngram"] == 0


def test_datasheet_contamination_verbatim_and_short_lines():
    train = ["a  b c", " ".join(WORDS[:20])]
    # verbatim after normalisation; a short line inside a train line; a blank line (not a line)
    result = contamination(train, ["  a b   c ", "b c", "   ", " ".join(WORDS[:20])])
    assert result["eval_lines"] == 3
    assert result["verbatim"] == 2 and result["verbatim_share"] == pytest.approx(2 / 3)
    assert result["short_lines"] == 2
    assert result["ngram"] == 2   # "b c" is short and not verbatim: clean
    assert result["long_ngram"] == 1 and result["long_ngram_share"] == 1.0


def test_datasheet_contamination_char_unit_50():
    train = ["".join(chr(ord("a") + i % 26) for i in range(80))]
    found = "#" + train[0][10:60] + "#"     # 50 shared characters
    missed = "#" + train[0][10:59] + "#"    # 49
    result = contamination(train, [found, missed], unit="char")
    assert result["n"] == 50 and result["unit"] == "char"
    assert result["ngram"] == 1
    with pytest.raises(ValueError):
        contamination(train, [found], unit="byte")


def test_datasheet_ties_together_and_markdown(tmp_path):
    train = write(tmp_path, "train.txt", " ".join(WORDS[:20]) + "\nsome other line\n")
    valid = write(tmp_path, "valid.txt", "some other line\n" + " ".join(WORDS[5:18]) + "\nfresh words\n")
    sheet = datasheet({"train": train, "valid": valid}, unit_name="sentences",
                      labels={"train": ["pos", "neg", "pos"]})
    assert set(sheet["files"]) == {"train", "valid"}
    assert sheet["files"]["train"]["labels"] == {"pos": 2, "neg": 1}
    check = sheet["contamination"]["valid"]
    assert (check["eval_lines"], check["verbatim"], check["ngram"]) == (3, 1, 2)
    assert "train" not in sheet["contamination"]
    markdown = to_markdown(sheet)
    assert sheet["files"]["train"]["sha256"] in markdown
    assert "| units (sentences) | 2 |" in markdown
    assert "| tokens | 23 |" in markdown
    assert "| pos | 2 |" in markdown
    assert "| valid | 3 | 2 | 1 (33.33%) | 2 (66.67%) | 1 (100.00%) |" in markdown
    assert normalise("  a \t b\n") == "a b"


def test_datasheet_read_units_with_seqlab_readers(tmp_path):
    conll = write(tmp_path, "train.conll", "John B-PER\nran O\n\nMary B-PER\n")
    tagged = read_units(conll, "tagger", "conll")
    assert tagged["units"] == 2 and tagged["unit"] == "sentences"
    assert label_distribution(tagged["labels"]) == {"B-PER": 2, "O": 1}
    assert tagged["texts"] == ["John ran", "Mary"]
    lm = read_units(write(tmp_path, "lm.txt", "a b\n\nc\n"), "lm")
    assert lm["units"] == 2
    with pytest.raises(ValueError):
        read_units(conll, "parser")


def test_datasheet_read_units_classifier_and_seq2seq(tmp_path):
    from seqlab.data.documents import Columns
    tsv = write(tmp_path, "train.tsv", "sentence\tlabel\ngood film\t1\nbad\t0\nfine\t1\n")
    documents = read_units(tsv, "classifier", "tsv", columns=Columns(text="sentence"))
    assert documents["units"] == 3 and documents["unit"] == "documents"
    assert label_distribution(documents["labels"]) == {"1": 2, "0": 1}
    pairs = read_units(write(tmp_path, "p.tsv", "src\ttgt\nein Hund\ta dog\n"), "seq2seq", "tsv",
                       fields=("src", "tgt"))
    assert (pairs["unit"], pairs["units"], pairs["texts"]) == ("pairs", 1, ["ein Hund"])
