"""CoNLL-U and CoNLL-2003 readers: sentences, label columns, skipped lines, and every malformed line
refused with its file and line."""

from pathlib import Path

import pytest

from seqlab.errors import SeqlabError
from seqlab.families.tagger.conll import read_conll, read_conllu, read_labelled

FIXTURES = Path(__file__).parent / "fixtures"


def test_conllu_reads_sentences_and_skips_comments_ranges_and_empty_nodes():
    sentences = read_conllu(FIXTURES / "tagging.conllu")
    assert [len(s) for s in sentences] == [7, 4, 6, 8, 4]
    assert sentences[0].tokens == ["The", "cat", "sat", "on", "the", "mat", "."]
    assert sentences[0].labels == ["DET", "NOUN", "VERB", "ADP", "DET", "NOUN", "PUNCT"]
    assert sentences[1].tokens == ["Dogs", "bark", "loudly", "."]          # the 2-3 range is skipped
    assert "saw" not in sentences[3].tokens[3:]                             # so is the empty node 5.1
    assert sentences[0].line == 4 and sentences[1].line == 14


def test_conllu_label_column_by_name_or_index():
    by_name = read_conllu(FIXTURES / "tagging.conllu", "xpos")
    by_index = read_conllu(FIXTURES / "tagging.conllu", 4)
    assert by_name == by_index
    assert by_name[0].labels[:3] == ["DT", "NN", "VBD"]
    with pytest.raises(SeqlabError, match="not a CoNLL-U column"):
        read_conllu(FIXTURES / "tagging.conllu", "pos")
    with pytest.raises(SeqlabError, match="columns 0-9"):
        read_conllu(FIXTURES / "tagging.conllu", 12)


def test_conllu_wrong_column_count_names_file_and_line(tmp_path):
    path = tmp_path / "bad.conllu"
    path.write_text("# sent_id = 1\n1\tA\ta\tDET\tDT\t_\t0\tdep\t_\t_\n2\tcat\tcat\tNOUN\n")
    with pytest.raises(SeqlabError, match=r"bad.conllu:3: expected 10 tab-separated CoNLL-U columns, found 4"):
        read_conllu(path)


def test_conllu_bad_id_and_whitespace_token_are_refused(tmp_path):
    path = tmp_path / "bad.conllu"
    path.write_text("x\tA\ta\tDET\tDT\t_\t0\tdep\t_\t_\n")
    with pytest.raises(SeqlabError, match=r"bad.conllu:1: the ID column holds 'x'"):
        read_conllu(path)
    path.write_text("1\tA\ta\tDET\tDT\t_\t0\tdep\t_\t_\n2\t \t_\tX\tX\t_\t0\tdep\t_\t_\n")
    with pytest.raises(SeqlabError, match=r"bad.conllu:2: the token is empty or only whitespace"):
        read_conllu(path)


EXPECTED_ID = "expected a word index (1, 2, ...), a range (1-2) or an empty node (1.1)"


def conllu_rows(*ids: str) -> str:
    """A CoNLL-U sentence after a comment line, one token per ID (line 2 holds the first)."""
    return "# sent_id = 1\n" + "".join(f"{i}\tw{n}\t_\tNOUN\t_\t_\t_\t_\t_\t_\n" for n, i in enumerate(ids))


def test_conllu_ids_restart_in_each_sentence_and_ranges_and_empty_nodes_stay_legal(tmp_path):
    path = tmp_path / "en.conllu"
    path.write_text(conllu_rows("0.1", "1", "2-3", "2", "3", "3.1", "3.2", "4") + "\n" + conllu_rows("1", "2"))
    sentences = read_labelled(path, "conllu")
    assert [s.tokens for s in sentences] == [["w1", "w3", "w4", "w7"], ["w0", "w1"]]


@pytest.mark.parametrize("ids, line, message", [
    (("1", "3"), 3, "token ID 3 after 1: IDs must count 1, 2, 3 within a sentence (expected 2)"),
    (("0", "1"), 2, "token ID 0 at the start of a sentence: IDs must count 1, 2, 3 within a sentence (expected 1)"),
    (("2", "3"), 2, "token ID 2 at the start of a sentence: IDs must count 1, 2, 3 within a sentence (expected 1)"),
    (("1", "2", "2"), 4, "token ID 2 after 2: IDs must count 1, 2, 3 within a sentence (expected 3)"),
    (("1", "2", "0"), 4, "token ID 0 after 2: IDs must count 1, 2, 3 within a sentence (expected 3)"),
    (("1", "2", "1"), 4, "token ID 1 after 2: IDs must count 1, 2, 3 within a sentence (expected 3; is the blank "
                         "line that ends a sentence missing before it?)"),
    (("1", "2-3", "3"), 4, "token ID 3 after 1: IDs must count 1, 2, 3 within a sentence (expected 2)"),
    (("1", "x"), 3, f"the ID column holds 'x', {EXPECTED_ID}"),
    (("1", "2-"), 3, f"the ID column holds '2-', {EXPECTED_ID}"),
    (("1", "2.x"), 3, f"the ID column holds '2.x', {EXPECTED_ID}"),
    (("1", "\u00b2"), 3, f"the ID column holds '\u00b2', {EXPECTED_ID}"),       # a digit to str.isdigit, not an ID
])
def test_conllu_ids_that_do_not_count_up_are_refused_with_their_line(tmp_path, ids, line, message):
    path = tmp_path / "en.conllu"
    path.write_text(conllu_rows("1", "2") + "\n" + conllu_rows(*ids))      # its line `line` is line + 4 of the file
    with pytest.raises(SeqlabError) as refused:
        read_labelled(path, "conllu", what="training file")
    assert str(refused.value) == f"training file {path}:{line + 4}: {message}"      # and no hint of another format


def test_conll_reads_last_column_and_ignores_docstart():
    sentences = read_conll(FIXTURES / "ner.conll")
    assert len(sentences) == 4
    assert sentences[0].tokens == ["EU", "rejects", "German", "call", "."]
    assert sentences[0].labels == ["B-ORG", "O", "B-MISC", "O", "O"]
    assert sentences[0].line == 3
    assert read_conll(FIXTURES / "ner.conll", label_column=1)[0].labels[0] == "NNP"


def test_conll_inconsistent_columns_and_bad_label_column(tmp_path):
    path = tmp_path / "bad.conll"
    path.write_text("EU NNP B-ORG\nrejects O\n")
    with pytest.raises(SeqlabError, match=r"bad.conll:2: 2 columns, but the file's first token line has 3"):
        read_conll(path)
    with pytest.raises(SeqlabError, match=r"--label-column 5 does not exist"):
        read_conll(FIXTURES / "ner.conll", label_column=5)
    path.write_text("EU\nrejects\n")
    with pytest.raises(SeqlabError, match="one column only"):
        read_conll(path)


@pytest.mark.parametrize("content, message", [
    ("", "is empty"),
    ("-DOCSTART- -X- -X- O\n\n", "holds no sentences"),
    ("# only a comment\n", "holds no sentences"),
])
def test_labelled_files_without_sentences_are_refused(tmp_path, content, message):
    path = tmp_path / "f.conllu"
    path.write_text(content)
    fmt = "conll" if "DOCSTART" in content else "conllu"
    with pytest.raises(SeqlabError, match=message):
        read_labelled(path, fmt)


def test_labelled_non_utf8_and_missing_files(tmp_path):
    path = tmp_path / "latin1.conll"
    path.write_bytes("Café NN O\n".encode() + "Zoë NN O\n".encode("latin-1"))
    with pytest.raises(SeqlabError, match=r"latin1.conll:2 is not valid UTF-8"):
        read_labelled(path, "conll")
    with pytest.raises(SeqlabError, match="does not exist"):
        read_labelled(tmp_path / "missing.conllu", "conllu")
    with pytest.raises(SeqlabError, match="--format 'tsv' is not known"):
        read_labelled(FIXTURES / "ner.conll", "tsv")
