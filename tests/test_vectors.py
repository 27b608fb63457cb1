"""Pretrained word vectors: word2vec and GloVe text files read (and refused) precisely, and a tagger
initialised from them: vectors in place, frozen when asked, their words in the vocabulary."""

import gzip
from pathlib import Path

import pytest
import torch

import seqlab
from seqlab.data.vectors import lookup, read_vectors, write_vectors
from seqlab.data.vocab import PAD, UNK
from seqlab.errors import SeqlabError
from seqlab.families.tagger.pipeline import resolve_tagger_config, train_tagger

FIXTURES = Path(__file__).parent / "fixtures"


def test_word2vec_with_header_and_glove_without_read_the_same(tmp_path):
    (tmp_path / "w2v.txt").write_text("3 2\nthe 0.1 0.2\ncat -1 2.5\nsat 3e-1 0\n")
    (tmp_path / "glove.txt").write_text("the 0.1 0.2\ncat -1 2.5\nsat 3e-1 0\n")
    for name in ("w2v.txt", "glove.txt"):
        words, vectors = read_vectors(tmp_path / name)
        assert words == ["the", "cat", "sat"]
        assert torch.allclose(vectors, torch.tensor([[0.1, 0.2], [-1.0, 2.5], [0.3, 0.0]]))


def test_vectors_gz_spaces_in_words_duplicates_and_limit(tmp_path):
    with gzip.open(tmp_path / "v.txt.gz", "wt", encoding="utf-8") as handle:
        handle.write("the 1 1\n. . . 2 2\nthe 9 9\ncafé 3 3\nlast 4 4\n")
    words, vectors = read_vectors(tmp_path / "v.txt.gz")
    assert words == ["the", ". . .", "café", "last"]                  # the first "the" kept
    assert vectors[0].tolist() == [1.0, 1.0]
    words, _ = read_vectors(tmp_path / "v.txt.gz", limit=3)
    assert words == ["the", ". . ."]                                  # 3 lines read, "the" twice


def test_write_then_read_round_trip(tmp_path):
    words, vectors = ["a", "b", "ünï"], torch.randn(3, 5)
    write_vectors(tmp_path / "v.txt", words, vectors)
    read, back = read_vectors(tmp_path / "v.txt")
    assert read == words and torch.allclose(back, vectors, atol=1e-5)


@pytest.mark.parametrize("text, message", [
    ("the 0.1 0.2\ncat 0.3\n", r"v\.txt:2: expected a word and 2 numbers, got 1"),
    ("the 0.1 0.2\ncat 0.3 x\n", r"v\.txt:2: the vector of 'cat' holds something that is not a number"),
    ("2 2\nthe 0.1 nan\n", r"v\.txt:2: the vector of 'the' is not finite"),
    ("\n\n", "holds no vectors"),
])
def test_malformed_vectors_files_are_refused_with_their_line(tmp_path, text, message):
    (tmp_path / "v.txt").write_text(text)
    with pytest.raises(SeqlabError, match=message):
        read_vectors(tmp_path / "v.txt")


def test_missing_and_mixed_encoding_vectors_files(tmp_path):
    with pytest.raises(SeqlabError, match="does not exist"):
        read_vectors(tmp_path / "nope.txt")
    (tmp_path / "v.txt").write_bytes("the 1 2\ncafé 1 2\n".encode() + "naïve 1 2\n".encode("latin-1"))
    with pytest.raises(SeqlabError, match=r"v\.txt:3 is not valid UTF-8"):
        read_vectors(tmp_path / "v.txt")


def test_lookup_falls_back_to_the_lowercase_form():
    vectors, found = lookup(["Paris", "the", "Zyx"], ["paris", "the"], torch.tensor([[1.0], [2.0]]))
    assert found.tolist() == [True, True, False]
    assert vectors[:, 0].tolist() == [1.0, 2.0, 0.0]


@pytest.mark.slow
def test_tagger_with_frozen_vectors_keeps_them_and_knows_their_words(tmp_path):
    # every training word of the fixture with a vector, plus one word training never saw ("kitten")
    words = ["the", "cat", "sat", "on", "mat", ".", "dogs", "kitten"]
    table = torch.randn(len(words), 8)
    write_vectors(tmp_path / "v.txt", words, table)
    pos = str(FIXTURES / "tagging.conllu")
    config = resolve_tagger_config(overrides={
        "train": pos, "dev": pos, "vectors": str(tmp_path / "v.txt"), "freeze_embeddings": True,
        "embedding_size": 50, "hidden_size": 16, "dropout": 0.0, "batch_size": 2, "lr": 0.02,
        "schedule": "constant", "progress": False, "max_steps": 40, "epochs": 100,
        "output": str(tmp_path / "run")})
    train_tagger(config)
    tagger = seqlab.load(tmp_path / "run")
    assert tagger.config.model.embedding_size == 8                    # the vectors' width, not 50
    vocab = tagger.vocabulary.words
    assert "kitten" in vocab                                          # the file's words join the vocabulary
    weight = tagger.model.embedding.weight
    for word, vector in zip(words, table, strict=True):
        assert torch.allclose(weight[vocab.index[word]], vector, atol=1e-5), word   # frozen: unchanged
    assert weight[PAD].abs().sum() == 0
    ids = tagger.vocabulary.word_ids(["The", "Kitten", "Zyxwv"])        # lowercase fallback, then <unk>
    assert ids == [vocab.index["The"] if "The" in vocab else vocab.index["the"], vocab.index["kitten"], UNK]
    assert len(tagger.tag(["The", "kitten", "sat", "."])) == 4


def test_tagger_fine_tunes_vectors_unless_frozen(tmp_path):
    write_vectors(tmp_path / "v.txt", ["the", "cat"], torch.randn(2, 8))
    pos = str(FIXTURES / "tagging.conllu")
    config = resolve_tagger_config(overrides={
        "train": pos, "dev": pos, "vectors": str(tmp_path / "v.txt"), "hidden_size": 16, "dropout": 0.0,
        "batch_size": 2, "lr": 0.02, "schedule": "constant", "progress": False, "max_steps": 10, "epochs": 100,
        "output": str(tmp_path / "run")})
    train_tagger(config)
    tagger = seqlab.load(tmp_path / "run")
    _, table = read_vectors(tmp_path / "v.txt")
    assert not torch.allclose(tagger.model.embedding.weight[tagger.vocabulary.words.index["the"]], table[0])
