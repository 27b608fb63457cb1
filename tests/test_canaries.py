"""Canaries and exposure (Carlini et al. 2019): template parsing and its refusals, seeded insertion recorded
in canaries.json and kept on --resume, the trie enumeration against brute force, the exposure of a
memorised and of an unmemorised secret, the skew-normal approximation against exact ranks, and
`seqlab audit exposure` end to end."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import tiny_config
from seqlab.cli.main import main
from seqlab.data.canaries import draw, insert, parse_template
from seqlab.data.tokenizers import WordTokenizer
from seqlab.data.vocab import SPECIALS, Vocab
from seqlab.errors import SeqlabError
from seqlab.families.lm.config import LMDataConfig, LMTrainConfig
from seqlab.families.lm.model import LMConfig, build_lm
from seqlab.families.lm.pipeline import train_lm
from seqlab.families.lm.trained import TrainedLM
from seqlab.harms.exposure import (
    Candidates,
    audit_exposure,
    enumerate_scores,
    exposure_approximate,
    exposure_exact,
    measure_exposure,
    rank_of,
    teacher_forced_scores,
)

WORDS = "the cat sat on a mat and dog ran to big red house my pin is".split()


def corpus(folder: Path, lines: int = 60, seed: int = 0) -> tuple[Path, Path]:
    rng = np.random.default_rng(seed)
    train, valid = folder / "train.txt", folder / "valid.txt"
    for path, count in ((train, lines), (valid, 10)):
        path.write_text("\n".join(" ".join(rng.choice(WORDS[:13], 6)) for _ in range(count)) + "\n")
    return train, valid


def untrained_lm(arch: str, seed: int = 0) -> TrainedLM:
    """A random-init word model over the corpus words and the ten digits."""
    torch.manual_seed(seed)
    vocab = Vocab(list(SPECIALS) + WORDS + list("0123456789"))
    config = LMConfig(arch=arch, vocab_size=len(vocab), embedding_size=16, hidden_size=24, num_layers=2,
                      dropout=0.0, num_heads=2, context=16 if arch == "transformer" else 0)
    model = build_lm(config).eval()
    return TrainedLM(model, WordTokenizer(), vocab, LMTrainConfig(model=config), torch.device("cpu"))


# ---------------------------------------------------------------------------- templates and their refusals

def test_template_parsing():
    t = parse_template("my pin is {digits:6}")
    assert (t.before, t.kind, t.length, t.after, t.space) == ("my pin is ", "digits", 6, "", 10 ** 6)
    assert t.render("314159", "word") == "my pin is 3 1 4 1 5 9"
    assert t.render("314159", "char") == "my pin is 314159"
    assert parse_template("code {letters:2} ok").space == 26 ** 2
    assert [t.index(t.filling(i)) for i in (0, 7, 999_999)] == [0, 7, 999_999]


@pytest.mark.parametrize("argv, message", [
    (["--canary", "my pin"], "has no slot"),
    (["--canary", "pin {digit:3}"], "unknown slot"),
    (["--canary", "pin {digits:0}"], "must be in [1, 20]"),
    (["--canary", "pin {digits:21}"], "must be in [1, 20]"),
    (["--canary", "{digits:2} {digits:2}"], "exactly one"),
    (["--canary", "pin {digits:3}", "--canary-repeats", "4", "0"], "at least 1"),
    (["--canary-repeats", "4"], "--canary-repeats needs --canary"),
])
def test_bad_canary_options_are_one_line_exit_2(tmp_path, capsys, argv, message):
    train, valid = corpus(tmp_path)
    try:
        code = main(["train", "lm", "--train", str(train), "--valid", str(valid), "--output", str(tmp_path / "run"),
                     *argv])
    except SystemExit as stop:                       # argparse's own refusals (a number out of range)
        code = stop.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "run" / "canaries.json").exists()


def test_canary_is_an_lm_option_only(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["train", "tagger", "--canary", "pin {digits:3}"])
    error = capsys.readouterr().err
    assert stop.value.code == 2 and "unknown option --canary (see seqlab train tagger --help)" in error


def test_list_options_from_a_config_file(tmp_path):
    from seqlab.families.lm.config import resolve_lm_config

    train, valid = corpus(tmp_path)
    (tmp_path / "c.yaml").write_text(f"data:\n  train: {train}\n  valid: {valid}\n  canary: 'pin {{digits:3}}'\n"
                                     "  canary_repeats: [1, 4, 16, 64]\n")
    assert resolve_lm_config(tmp_path / "c.yaml").data.canary_repeats == [1, 4, 16, 64]
    (tmp_path / "d.yaml").write_text("canary: 'pin {digits:3}'\ncanary_repeats: [2, -1]\n")
    with pytest.raises(SeqlabError, match="at least 1"):
        resolve_lm_config(tmp_path / "d.yaml")
    assert LMDataConfig(canary="pin {digits:3}").canary_repeats == [1, 4, 16, 64]      # the default counts
    from seqlab.info import train_command
    from seqlab.registry import family

    config = LMTrainConfig(data=LMDataConfig(canary="pin {digits:3}", canary_repeats=[2, 5]))
    assert "--canary 'pin {digits:3}' --canary-repeats 2 5" in train_command(family("lm"), config)
    config = LMTrainConfig(data=LMDataConfig(canary="pin {digits:3}"))
    assert "--canary-repeats" not in train_command(family("lm"), config)          # the default: left out


# ---------------------------------------------------------------------------- insertion

def test_insertion_is_seeded_and_exact():
    template = parse_template("my pin is {digits:3}")
    lines = [f"line {k}" for k in range(100)]
    record = draw(template, [1, 4, 16], seed=7, lines=len(lines), tokenizer="word")
    assert record == draw(template, [1, 4, 16], seed=7, lines=len(lines), tokenizer="word")
    assert record["secrets"] != draw(template, [1, 4, 16], seed=8, lines=100, tokenizer="word")["secrets"]
    planted = insert(lines, record)
    assert len(planted) == 100 + 21 and [x for x in planted if x.startswith("line")] == lines    # order kept
    assert len({s["filling"] for s in record["secrets"]}) == 3
    for secret in record["secrets"]:
        assert planted.count(secret["text"]) == secret["repeats"] == len(secret["inserted_at"])
        assert all(planted[k] == secret["text"] for k in secret["inserted_at"])
        assert secret["text"] == "my pin is " + " ".join(secret["filling"])


def test_a_run_records_its_canaries_and_resume_keeps_them(tmp_path):
    train, valid = corpus(tmp_path)
    config = tiny_config(tmp_path / "run", max_steps=2, eval_every=2)
    config = dataclasses.replace(config, data=LMDataConfig(train=str(train), valid=str(valid), tokenizer="word",
                                                           canary="my pin is {digits:3}", canary_repeats=[1, 3]))
    train_lm(config)
    path = tmp_path / "run" / "canaries.json"
    record = json.loads(path.read_text())
    assert (record["template"], record["space"], record["seed"]) == ("my pin is {digits:3}", 1000, config.train.seed)
    assert [s["repeats"] for s in record["secrets"]] == [1, 3] and record["training_lines"] == 60
    vocab = json.loads((tmp_path / "run" / "vocab.json").read_text())
    tokens = vocab["tokens"] if isinstance(vocab, dict) else vocab
    assert set("0123456789") <= set(tokens)                    # every digit is a token, seen or not
    before = path.read_bytes()
    train_lm(dataclasses.replace(config, train=dataclasses.replace(config.train, max_steps=4)), resume=True)
    assert path.read_bytes() == before                          # never drawn again
    train_lm(dataclasses.replace(config, train=dataclasses.replace(config.train, seed=5)), overwrite=True)
    assert path.exists() and json.loads(path.read_text())["seed"] == 5     # the new run's own secrets, kept
    train_lm(dataclasses.replace(config, data=LMDataConfig(train=str(train), valid=str(valid), tokenizer="word")),
             overwrite=True)
    assert not path.exists()                                    # an overwritten run's secrets are gone


# ---------------------------------------------------------------------------- enumeration and exposure

@pytest.mark.parametrize("arch", ["lstm", "transformer", "ffn"])
def test_trie_enumeration_equals_brute_force(arch):
    lm = untrained_lm(arch)
    template = parse_template("my pin is {digits:3}")
    candidates = Candidates(lm, template, " ")
    trie = enumerate_scores(lm, candidates, chunk=37)           # chunks that cut the levels unevenly
    brute = teacher_forced_scores(lm, candidates, [template.filling(i) for i in range(1000)])
    np.testing.assert_allclose(trie, brute, atol=1e-4)
    for index in (0, 123, 999):
        assert rank_of(trie, trie[index]) == rank_of(brute, brute[index])


def test_an_unmemorised_secret_averages_about_one_and_a_half_bits():
    """A secret at a uniform random rank: E[exposure] = log2 |R| - E[log2 rank] -> 1/ln 2 = 1.44."""
    lm = untrained_lm("lstm", seed=3)
    template = parse_template("my pin is {digits:3}")
    scores = enumerate_scores(lm, Candidates(lm, template, " "))
    exposures = [exposure_exact(1000, rank_of(scores, s)) for s in scores]
    assert 1.0 < np.mean(exposures) < 2.0
    assert exposure_exact(1000, 1) == pytest.approx(math.log2(1000))


def test_approximation_agrees_with_exact_ranks():
    lm = untrained_lm("lstm", seed=1)
    template = parse_template("my pin is {digits:4}")
    candidates = Candidates(lm, template, " ")
    scores = enumerate_scores(lm, candidates)
    rng = np.random.default_rng(0)
    sample = teacher_forced_scores(lm, candidates, [template.filling(int(i)) for i in rng.integers(0, 10 ** 4, 2000)])
    order = np.sort(scores)[::-1]
    for rank in (10, 100, 1000):
        exact = exposure_exact(10 ** 4, rank_of(scores, order[rank - 1]))
        approximate, _ = exposure_approximate(sample, float(order[rank - 1]))
        assert abs(approximate - exact) < 1.0, (rank, exact, approximate)


@pytest.mark.slow
def test_a_planted_canary_is_exposed_and_the_cli_reports_it(tmp_path, capsys):
    """An overfit tiny model ranks its 64-times canary first (exposure ~ log2 |R|); `seqlab audit exposure`
    writes the table, the JSON and the plot, exact and approximate."""
    train, valid = corpus(tmp_path, lines=30)
    run = tmp_path / "run"
    assert main(["train", "lm", "--train", str(train), "--valid", str(valid), "--output", str(run),
                 "--tokenizer", "word", "--canary", "my pin is {digits:3}", "--canary-repeats", "1", "64",
                 "--embedding-size", "32", "--hidden-size", "48", "--layers", "1", "--dropout", "0",
                 "--epochs", "12", "--batch-size", "4", "--seq-len", "16", "--lr", "0.01", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["audit", "exposure", str(run)]) == 0
    out = capsys.readouterr().out
    assert "|R| = 1,000" in out and "exposure.png" in out
    result = json.loads((run / "audits" / "exposure.json").read_text())
    planted = {s["repeats"]: s for s in result["secrets"]}
    assert planted[64]["exposure"] > math.log2(1000) - 1, result["secrets"]
    assert result["method"] == "exact" and (run / "audits" / "exposure.md").read_text().count("\n| ") == 3
    assert (run / "audits" / "exposure.png").stat().st_size > 1000
    assert main(["audit", "exposure", str(run), "--method", "approximate", "--samples", "500", "--json",
                 "--output", str(tmp_path / "approx")]) == 0
    approx = json.loads(capsys.readouterr().out)
    assert approx["method"] == "approximate" and approx["candidates_scored"] == 500
    result_api, paths = audit_exposure(run, tmp_path / "api")
    assert [s["rank"] for s in result_api["secrets"]] == [s["rank"] for s in result["secrets"]]
    assert set(paths) == {"json", "markdown", "png"}


def test_audit_refuses_runs_without_canaries(tmp_path, capsys):
    train, valid = corpus(tmp_path)
    run = tmp_path / "plain"
    train_lm(dataclasses.replace(tiny_config(run, max_steps=2, eval_every=2),
                                 data=LMDataConfig(train=str(train), valid=str(valid), tokenizer="word")))
    capsys.readouterr()
    assert main(["audit", "exposure", str(run)]) == 2
    err = capsys.readouterr().err
    assert "no canaries.json" in err and len(err.strip().splitlines()) == 1
    assert main(["audit", "exposure", str(tmp_path / "nowhere")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    (tmp_path / "tagger").mkdir()
    (tmp_path / "tagger" / "config.json").write_text('{"task": "tagger", "format_version": 1}')
    assert main(["audit", "exposure", str(tmp_path / "tagger")]) == 2
    err = capsys.readouterr().err
    assert "needs a language model" in err and len(err.strip().splitlines()) == 1


def test_bpe_pieces_of_several_tokens(tmp_path):
    """Byte-level BPE reads a digit training never merged with its space as two tokens (`Ġ` `7`): the
    recurrent enumeration reads such pieces on from the node's state and still equals brute force; the
    transformer's exact enumeration refuses them, and the approximation scores them."""
    from seqlab.registry import load

    train, valid = corpus(tmp_path)
    run = tmp_path / "bpe"
    config = tiny_config(run, max_steps=2, eval_every=2)
    train_lm(dataclasses.replace(config, data=LMDataConfig(
        train=str(train), valid=str(valid), tokenizer="bpe", bpe_vocab_size=300,
        canary="my pin is {digits:3}", canary_repeats=[2, 5])))
    lm = load(run)
    record = json.loads((run / "canaries.json").read_text())
    template = parse_template(record["template"])
    candidates = Candidates(lm, template, record["separator"])
    assert not candidates.single and {len(p) for p in candidates.symbols[0]} == {1, 2}
    trie = enumerate_scores(lm, candidates, chunk=37)
    brute = teacher_forced_scores(lm, candidates, [template.filling(i) for i in range(1000)])
    np.testing.assert_allclose(trie, brute, atol=1e-4)
    lm.model = build_lm(LMConfig(arch="transformer", vocab_size=len(lm.vocab), embedding_size=16, num_layers=1,
                                 num_heads=2, context=16, dropout=0.0)).eval()
    with pytest.raises(SeqlabError, match="method approximate"):
        measure_exposure(lm, record, "exact")
    approx = measure_exposure(lm, record, "approximate", samples=200)
    assert all(0 <= s["exposure"] for s in approx["secrets"])
