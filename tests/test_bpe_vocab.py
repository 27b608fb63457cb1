"""A BPE vocabulary is the BPE model's own: trained on ASCII text, a language model and a seq2seq model
read any UTF-8 text (emoji, CJK, accented letters) without one `<unk>` and give it back exactly; runs
saved when the vocabulary held only the pieces seen in training still load and decode as they did."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from tokenizers.pre_tokenizers import ByteLevel

import seqlab
from conftest import TRAIN, tiny_config
from seqlab.cli.main import main
from seqlab.data.readers import read_lines
from seqlab.data.tokenizers import BPETokenizer, CharTokenizer, WordTokenizer
from seqlab.data.vocab import SPECIALS, UNK
from seqlab.decoding.search import SearchOptions
from seqlab.errors import SeqlabError
from seqlab.families.seq2seq.parallel import Pair

FIXTURES = Path(__file__).parent / "fixtures"
PAIRS = FIXTURES / "seq2seq"
OLD_RUNS = FIXTURES / "old_runs"
UNSEEN = ["café naïve Ærø — Zoë's façade", "🙂🚀 emoji", "日本語のテキスト", "Привет, мир", "tab\tand  spaces "]


def test_bpe_vocab_is_every_piece_of_the_model_in_its_order():
    tokenizer = BPETokenizer(vocab_size=300)
    tokenizer.fit(read_lines(TRAIN))
    hf = tokenizer.hf.get_vocab()
    vocab = tokenizer.vocabulary(tokenizer.tokenize_lines(read_lines(TRAIN)[:5]), min_freq=1000)  # min_freq ignored
    assert len(vocab) == len(SPECIALS) + tokenizer.hf.get_vocab_size() == len(SPECIALS) + len(hf)
    assert vocab.tokens[:5] == list(SPECIALS)
    assert vocab.tokens[5:] == sorted(hf, key=hf.__getitem__)                  # the model's id order
    assert set(vocab.tokens[5:261]) == set(ByteLevel.alphabet())                # the 256 byte symbols first
    again = BPETokenizer(vocab_size=300)
    again.fit(read_lines(TRAIN))
    assert again.vocabulary([]).tokens == vocab.tokens                          # deterministic


def test_bpe_vocab_word_and_char_vocabularies_still_come_from_the_tokens_seen():
    lines = [["the", "cat", "the"], ["a", "cat", "the"]]
    assert WordTokenizer().vocabulary(lines).tokens == [*SPECIALS, "the", "cat", "a"]
    assert WordTokenizer().vocabulary(lines, min_freq=2).tokens == [*SPECIALS, "the", "cat"]
    assert WordTokenizer().vocabulary(lines, max_size=6).tokens == [*SPECIALS, "the"]
    assert CharTokenizer().vocabulary([list("abca")]).tokens == [*SPECIALS, "a", "b", "c"]


@pytest.fixture(scope="module")
def bpe_lm(tmp_path_factory):
    run = tmp_path_factory.mktemp("bpe") / "lm"
    config = tiny_config(run, "lstm", tokenizer="bpe", max_steps=4)
    config.data.bpe_vocab_size = 300
    seqlab.train_lm(config)
    return seqlab.load(run)


def test_bpe_vocab_lm_reads_unseen_characters_without_unknowns(bpe_lm):
    assert all(ord(c) < 128 for c in TRAIN.read_text())                       # trained on ASCII only
    assert len(bpe_lm.vocab) == len(SPECIALS) + bpe_lm.tokenizer.hf.get_vocab_size()
    assert bpe_lm.config.model.vocab_size == len(bpe_lm.vocab)
    text = "\n".join(UNSEEN)
    ids = bpe_lm.encode(text)
    assert UNK not in ids.tolist()
    assert bpe_lm.detokenize(ids.tolist()) == text + "\n"                     # one </s> per line: a break each
    figures = bpe_lm.evaluate_text(text)
    assert figures["unknown"] == 0 and figures["characters"] == len(text) + 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")                                        # no unknown-token warning
        assert UNK not in bpe_lm.prompt_ids("🙂 日本語")


def test_bpe_vocab_lm_refuses_max_vocab_and_ignores_min_freq(tmp_path):
    config = tiny_config(tmp_path / "capped", "lstm", tokenizer="bpe", max_steps=1)
    config.data.bpe_vocab_size, config.data.max_vocab = 300, 100
    with pytest.raises(SeqlabError, match="--max-vocab 100: a BPE vocabulary .* --bpe-vocab-size"):
        seqlab.train_lm(config)
    config = tiny_config(tmp_path / "rare", "lstm", tokenizer="bpe", max_steps=1, eval_every=1)
    config.data.bpe_vocab_size, config.data.min_freq = 300, 50
    seqlab.train_lm(config)
    lm = seqlab.load(tmp_path / "rare")
    assert len(lm.vocab) == len(SPECIALS) + lm.tokenizer.hf.get_vocab_size()


@pytest.mark.slow
def test_bpe_vocab_seq2seq_reads_unseen_characters_without_unknowns(tmp_path):
    aligned = [f"--{split}-{side}={PAIRS / f'{split}.{ext}'}" for split in ("train", "dev")
               for side, ext in (("src", "src"), ("tgt", "tgt"))]
    small = ["--embedding-size", "16", "--hidden-size", "16", "--epochs", "1", "--no-progress", "--tokenizer", "bpe",
             "--bpe-vocab-size", "300", "--min-freq", "5"]
    assert main(["train", "seq2seq", *aligned, "--output", str(tmp_path / "separate"), *small]) == 0
    assert main(["train", "seq2seq", *aligned, "--output", str(tmp_path / "shared"), "--shared-vocab", *small]) == 0
    for name in ("separate", "shared"):
        model = seqlab.load(tmp_path / name)
        vocabulary = model.vocabulary
        for tokenizer, vocab in ((vocabulary.source_tokenizer, vocabulary.source_vocab),
                                 (vocabulary.target_tokenizer, vocabulary.target_vocab)):
            assert len(vocab) == len(SPECIALS) + tokenizer.hf.get_vocab_size()
            for line in UNSEEN:
                tokens = tokenizer.tokenize(line)
                ids = vocab.encode(tokens)
                assert UNK not in ids
                assert tokenizer.detokenize(vocab.decode(ids)) == line
        evaluation = model.evaluate_pairs([Pair(line, line, 1) for line in UNSEEN], SearchOptions(beam=1))
        assert evaluation["unknown_source_tokens"] == 0
    assert main(["train", "seq2seq", *aligned, "--output", str(tmp_path / "capped"), "--max-vocab", "100",
                 *small]) == 2
    mixed = ["--source-tokenizer", "word", "--max-vocab", "20"]                 # applies to the word side
    assert main(["train", "seq2seq", *aligned, "--output", str(tmp_path / "mixed"), *small, *mixed]) == 0
    model = seqlab.load(tmp_path / "mixed")
    assert len(model.vocabulary.source_vocab) == 20
    assert len(model.vocabulary.target_vocab) == len(SPECIALS) + model.vocabulary.target_tokenizer.hf.get_vocab_size()


def test_bpe_vocab_old_lm_run_loads_and_decodes_as_before():
    """tests/fixtures/old_runs/lm-bpe was written by the seqlab of commit 4d3b1c8 (make_old_runs.py): its
    vocabulary is the 100 pieces training used, not the model's 300, and it keeps reading the text so."""
    run = OLD_RUNS / "lm-bpe"
    lm = seqlab.load(run)
    assert lm.vocab.tokens == json.loads((run / "vocab.json").read_text())["tokens"]
    assert len(lm.vocab) == 105 and lm.tokenizer.hf.get_vocab_size() == 300
    text = "First Citizen: café 🙂"
    assert lm.encode(text).tolist() == [5, 76, 54, 35, 66, 25, 8, 84, 29, 28, 45, 10, 41, 1, 1, 5, 1, 1, 1, 1, 3]
    assert lm.generate("First Citizen:", max_tokens=30, seed=1) == "\nT Wh he:\n\n\nwsueouinou;\nIy\n\nsntrlan"
    assert lm.evaluate_text(text)["loss"] == pytest.approx(4.923346746535528, rel=1e-6)


def test_bpe_vocab_old_seq2seq_run_loads_and_decodes_as_before():
    run = OLD_RUNS / "seq2seq-bpe"
    model = seqlab.load(run)
    assert len(model.vocabulary.source_vocab) == 63 and model.vocabulary.source_vocab is model.vocabulary.target_vocab
    assert model.vocabulary.source_vocab.tokens == json.loads((run / "vocab.json").read_text())["source"]
    tokens = model.vocabulary.source_tokenizer.tokenize("der hund café 🙂")
    assert model.vocabulary.source_vocab.encode(tokens) == [7, 19, 51, 22, 17, 18, 1, 1, 1, 5, 1, 1, 1, 1]
    assert model.translate(["der hund sieht .", "der mann klein der auto mag ."], beam=2) == [
        "b likesnuldurourourourourourourourourourourou", "b likesnuronuoelduldulduldulduldulduldulduldulduldulduo"]
