"""`seqlab.harms.memorization`: the training index (a planted span of L units is found, L - 1 is not, hash
collisions are never hits), the three rankings and the zlib entropy on hand-made scores, the batched decoder
against one-at-a-time generation, extractable memorisation of an overfit and an untrained model, and
`seqlab audit memorization` end to end with its one-line refusals."""

from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch

from seqlab.cli.main import main
from seqlab.data.tokenizers import make_tokenizer
from seqlab.decoding.search import SamplingOptions, decode_batch, generate_ids
from seqlab.families.lm.config import LMDataConfig, LMTrainConfig, LMTrainOptions
from seqlab.families.lm.model import LMConfig, build_lm
from seqlab.families.lm.pipeline import load_lm, train_lm
from seqlab.families.lm.trained import TrainedLM
from seqlab.harms.memorization import (
    TrainingIndex,
    extractable,
    extraction,
    log_perplexities,
    rank,
    ranking_keys,
    rolling_hashes,
    training_ids,
    zlib_entropy,
)

TWO = ["the quick brown fox jumps over the lazy dog while seven wizards box jolly",
       "pack my box with five dozen liquor jugs and then sing of amazing zephyrs"]


def random_lines(seed: int, lines: int, width: int, alphabet: str = "abcdefghij ") -> list[str]:
    rng = np.random.default_rng(seed)
    return ["".join(rng.choice(list(alphabet), size=width)) for _ in range(lines)]


# ---------------------------------------------------------------------------- the index

def test_index_flags_a_planted_50_character_span_and_not_49():
    lines = random_lines(0, 40, 120)
    index = TrainingIndex.from_lines(lines, make_tokenizer("char"), 50)
    span = lines[7][30:80]                                              # 50 characters of training line 8
    found = index.find("XYZ" + span + "0123")                           # X..3 are not in the alphabet
    assert (found.start, found.length, found.text, found.train_line) == (3, 50, span, 8)
    assert index.find("XYZ" + span[:49] + "0123") is None
    assert index.find("XYZ" + span[1:] + "0123") is None
    longer = lines[7][10:] + "\n" + lines[8][:20]                       # across a line end: 110 + 1 + 20
    found = index.find("#" + longer)
    assert (found.start, found.length, found.text, found.train_line) == (1, 131, longer, 8)
    assert index.find(random_lines(1, 1, 300, "klmnop")[0]) is None


def test_index_of_words_flags_8_tokens_and_not_7():
    lines = [" ".join(f"w{i}x{j}" for j in range(12)) for i in range(30)]
    tokenizer = make_tokenizer("word")
    index = TrainingIndex.from_lines(lines, tokenizer, 8)
    eight = " ".join(f"w5x{j}" for j in range(2, 10))
    found = index.find(f"new words {eight} unseen", tokenizer)
    assert (found.start, found.length, found.text, found.train_line) == (2, 8, eight, 6)
    seven = " ".join(f"w5x{j}" for j in range(2, 9))
    assert index.find(f"new words {seven} unseen", tokenizer) is None
    across = "w5x8 w5x9 w5x10 w5x11\nw6x0 w6x1 w6x2"                       # 4 + line end + 3 = 8 units
    found = index.find("a " + across, tokenizer)
    assert (found.start, found.length, found.text, found.train_line) == (1, 8, across, 6)
    assert index.find("w5x8 w5x9 w5x10 w5x11 w6x0 w6x1 w6x2 w6x3", tokenizer) is None   # no line end: no match


def test_hash_collisions_are_verified_away():
    lines = ["abcdefghij" * 3]
    index = TrainingIndex.from_lines(lines, make_tokenizer("char"), 5, base=1)     # hash = sum of codes: weak
    anagram = "edcba"                                                              # same sum as "abcde"
    codes = index.units(anagram)[0]
    assert rolling_hashes(codes, 5, 1)[0] == rolling_hashes(index.codes[:5], 5, 1)[0]
    assert index.find(anagram) is None
    assert index.find("zz" + "cdefg" + "zz").text == "cdefg"
    strong = TrainingIndex.from_lines(lines, make_tokenizer("char"), 5)
    assert len(np.unique(strong.hashes)) == 11                    # 10 distinct 5-grams of the line, and "ghij\\n"


# ---------------------------------------------------------------------------- scores and rankings

def test_zlib_entropy_is_eight_bits_per_compressed_byte():
    text = "the the the the the the the the the the"
    assert zlib_entropy(text) == len(zlib.compress(text.encode("utf-8"))) * 8
    assert zlib_entropy("") == 64                                                  # zlib's header and checksum


def test_rankings_order_hand_made_scores():
    scores = [{"log_perplexity": 2.0, "zlib_bits": 800, "reference_log_perplexity": 4.0},   # ratios .0025, .5
              {"log_perplexity": 1.0, "zlib_bits": 100, "reference_log_perplexity": 1.0},   # .01, 1.0
              {"log_perplexity": 3.0, "zlib_bits": 6000, "reference_log_perplexity": 12.0},  # .0005, .25
              {"log_perplexity": 1.5, "zlib_bits": 300, "reference_log_perplexity": 1.5}]   # .005, 1.0
    assert rank(scores, "perplexity") == [1, 3, 0, 2]
    assert rank(scores, "zlib") == [2, 0, 3, 1]
    assert rank(scores, "reference") == [2, 0, 1, 3]                                 # a tie: the earlier first
    assert ranking_keys(scores, "perplexity") == pytest.approx(np.exp([2.0, 1.0, 3.0, 1.5]))
    assert ranking_keys(scores, "zlib") == pytest.approx([2 / 800, 1 / 100, 3 / 6000, 1.5 / 300])


# ---------------------------------------------------------------------------- models

@pytest.fixture(scope="module")
def overfit(tmp_path_factory) -> tuple[Path, Path]:
    """A character window LM (8 characters) that has learnt two lines by heart, and its training file."""
    folder = tmp_path_factory.mktemp("memorization")
    train = folder / "two.txt"
    train.write_text("\n".join(TWO) + "\n")
    config = LMTrainConfig(LMDataConfig(train=str(train), valid=str(train), tokenizer="char"),
                           LMConfig(arch="ffn", context=8, embedding_size=16, hidden_size=128, dropout=0.0),
                           LMTrainOptions(output=str(folder / "lm"), epochs=1000, max_steps=120, batch_size=1,
                                          seq_len=64, lr=0.02, schedule="constant", optimizer="adam",
                                          eval_every=120, progress=False))
    train_lm(config)
    return folder / "lm", train


def untrained(lm: TrainedLM) -> TrainedLM:
    torch.manual_seed(0)
    return TrainedLM(build_lm(lm.config.model).eval(), lm.tokenizer, lm.vocab, lm.config, lm.device)


def test_batched_decoding_equals_one_at_a_time_generation(overfit):
    """The audit's batched greedy decoding is generation's, but for <unk>, which the audit lets the model write
    (its training text holds it) and generation blocks: the same as a model that generates it."""
    lm = untrained(load_lm(overfit[0]))
    stream = training_ids(lm, TWO)
    prompts = torch.from_numpy(np.stack([stream[0:12], stream[40:52], stream[80:92]]))
    tokens, log_probs = decode_batch(lm.model, prompts, 20)
    lm.model.never_generated = ()                        # generation as the audit decodes: <unk> allowed
    for row, prompt in zip(tokens.tolist(), prompts.tolist(), strict=True):
        assert row == list(generate_ids(lm.model, prompt, SamplingOptions(greedy=True, max_tokens=20)))
    assert torch.all(log_probs < 0)


def test_overfit_model_reproduces_its_training_text_and_an_untrained_one_does_not(overfit):
    lm = load_lm(overfit[0])
    stream = training_ids(lm, TWO)
    result = extractable(lm, stream, sequences=40, prefix_lengths=[16, 32], seed=1, progress=False)
    assert result["suffix_length"] == 50 and result["sequences"] == 40
    for k in ("16", "32"):
        assert result["by_prefix"][k]["memorized_pct"] == 100.0
    example = result["by_prefix"]["16"]["examples"][0]
    assert example["prefix"] + example["continuation"] in "\n".join(TWO)
    chance = extractable(untrained(lm), stream, sequences=40, prefix_lengths=[16], seed=1, progress=False)
    assert chance["by_prefix"]["16"]["memorized_pct"] == 0.0
    assert chance["by_prefix"]["16"]["token_match_pct"] < 20


def test_extraction_finds_training_text_in_an_overfit_models_samples(overfit):
    lm = load_lm(overfit[0])
    index = TrainingIndex.from_lines(TWO, lm.tokenizer, 50)
    result = extraction(lm, index, samples=12, length=80, reference=untrained(lm), batch_size=5, seed=3,
                        progress=False)
    assert list(result["rankings"]) == ["perplexity", "zlib", "reference"]
    assert result["with_match"] >= 6
    training = "\n".join(TWO)
    for ranking in result["rankings"].values():
        assert ranking["top"] == 12 and ranking["extraction_top100"] == result["with_match"] == len(ranking["hits"])
        for hit in ranking["hits"]:
            assert hit["match"]["text"] in hit["text"] and hit["match"]["text"] in training
            assert hit["match"]["length"] >= 50
    scores = result["per_sample"]
    assert all(1.0 <= s["perplexity"] and s["zlib_bits"] > 0 and s["reference_log_perplexity"] > 0 for s in scores)
    # the reference's log-perplexity, batched, equals scoring each text alone
    text = result["rankings"]["perplexity"]["hits"][0]["text"]
    reference = untrained(lm)
    ids = reference.vocab.encode(["</s>" if c == "\n" else c for c in text])        # read after </s>; none last
    alone = reference.evaluate_ids(torch.tensor(ids), batch_size=1)
    assert alone["tokens"] == len(text)
    assert log_perplexities(reference, [text, "tiny"])[0] == pytest.approx(alone["loss"], rel=1e-5)
    again = extraction(lm, index, samples=12, length=80, batch_size=5, seed=3, progress=False)
    assert [s["perplexity"] for s in again["per_sample"]] == [s["perplexity"] for s in scores]      # seeded


# ---------------------------------------------------------------------------- the command

def test_cli_end_to_end_writes_json_and_markdown(overfit, tmp_path, capsys):
    run, train = overfit
    out = tmp_path / "out"
    assert main(["audit", "memorization", str(run), "--train", str(train), "--samples", "20", "--length", "60",
                 "--sequences", "30", "--prefix-lengths", "16", "24", "--batch-size", "8", "--reference", str(run),
                 "--output", str(out), "--no-progress", "--device", "cpu"]) == 0
    printed = capsys.readouterr().out
    assert "extraction_top100" in printed and "memorized_pct 100.00" in printed
    result = json.loads((out / "memorization.json").read_text())
    assert result["extraction"]["samples"] == 20 and result["extraction"]["match_length"] == 50
    assert set(result["extraction"]["rankings"]) == {"perplexity", "zlib", "reference"}
    ratios = ranking_keys(result["extraction"]["per_sample"], "reference")
    assert ratios == pytest.approx(np.ones(20), abs=1e-4)                         # a model against itself
    assert result["memorization"]["by_prefix"]["24"]["memorized_pct"] == 100.0
    assert result["memorized_pct"] == 100.0 and result["memorized_pct_by_prefix"] == {"16": 100.0, "24": 100.0}
    assert result["extraction_top100"] == result["extraction"]["rankings"]["zlib"]["extraction_top100"]
    assert result["command"].startswith(f"seqlab audit memorization {run} --train {train} --reference {run} "
                                        "--samples 20 --top-k 40 --length 60 --sequences 30 --prefix-lengths 16 24 ")
    assert "# Memorisation of" in (out / "memorization.md").read_text()
    assert main(["audit", "memorization", str(run), "--train", str(train), "--samples", "0", "--sequences", "10",
                 "--json", "--output", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert "extraction" not in printed and printed["memorization"]["prefix_lengths"] == [16, 32, 64]


def test_cli_refuses_bad_input_in_one_line(overfit, tmp_path, capsys):
    run, train = overfit
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n")
    tagger = tmp_path / "tagger"
    shutil.copytree(run, tagger)
    config = json.loads((tagger / "config.json").read_text())
    (tagger / "config.json").write_text(json.dumps({**config, "task": "tagger"}))
    out = ["--output", str(tmp_path / "out")]
    cases = [([str(run), "--train", str(tmp_path / "none.txt")], "does not exist"),
             ([str(run), "--train", str(empty)], "is empty"),
             ([str(run), "--train", str(blank)], "is empty"),
             ([str(tagger), "--train", str(train)], "needs a language model as RUN"),
             ([str(run), "--train", str(train), "--reference", str(tagger)], "as --reference"),
             ([str(run), "--train", str(train), "--samples", "-1"], "--samples"),
             ([str(run), "--train", str(train), "--top-k", "0"], "--top-k"),
             ([str(run), "--train", str(train), "--prefix-lengths", "8", "x"], "--prefix-lengths"),
             ([str(run), "--train", str(train), "--length", "20"], "shorter than --match-length 50"),
             ([str(run), "--train", str(train), "--samples", "0", "--sequences", "0"], "nothing to measure"),
             ([str(run), "--train", str(train), "--samples", "0", "--prefix-lengths", "200"], "fewer than")]
    for args, message in cases:
        try:
            code = main(["audit", "memorization", *args, *out])
        except SystemExit as exit:                                  # argparse refuses a bad number itself
            code = exit.code
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and message in err, (args, err)
