"""The Python API: perplexity = exp(mean NLL) by brute force, score, generate (sampled, greedy, beam), load."""

from __future__ import annotations

import json
import math

import pytest
import torch

import seqlab
from conftest import TEST, TRAIN, VALID, tiny_config
from seqlab.data.batching import StreamBatches, sliding_windows
from seqlab.data.vocab import EOS
from seqlab.decoding.search import SamplingOptions, blocked_tokens, generate_ids, lm_beam_search
from seqlab.errors import SeqlabError, SeqlabWarning
from seqlab.families.lm.model import LMConfig, build_lm
from seqlab.families.lm.task import LanguageModelingTask, evaluate_lm, summarize


def brute_force_nll(model, ids: torch.Tensor) -> float:
    """-log P(w_t | </s> w_1 .. w_{t-1}) for every t, each from a fresh full pass over the prefix."""
    total = 0.0
    with torch.no_grad():
        for t in range(len(ids)):
            prefix = torch.cat([torch.tensor([EOS]), ids[:t]])[None]
            state = None if model.context_length else model.init_state(1)
            logits, _ = model(prefix, state)
            total -= torch.log_softmax(logits[0, -1].double(), -1)[ids[t]].item()
    return total / len(ids)


@pytest.mark.parametrize("arch", ["ffn", "lstm", "gru", "transformer"])
def test_lm_perplexity_is_exp_mean_nll_by_brute_force(arch):
    torch.manual_seed(0)
    model = build_lm(LMConfig(arch=arch, vocab_size=30, embedding_size=8, hidden_size=8, num_layers=2,
                              num_heads=2, context=64 if arch == "transformer" else 0)).double().eval()
    ids = torch.randint(3, 30, (40,))
    if model.context_length:
        batches = sliding_windows(ids, 1, model.context_length, model.context_length)
    else:
        batches = list(StreamBatches(ids, 1, 7, exact=True))   # segments of 7, state carried across
    stats = evaluate_lm(model, batches, model.context_length is None, "cpu")
    figures = summarize(stats["loss_sum"], stats["tokens"])
    expected = brute_force_nll(model, ids)
    assert figures["tokens"] == 40
    assert figures["loss"] == pytest.approx(expected, rel=1e-9)
    assert figures["perplexity"] == pytest.approx(math.exp(expected), rel=1e-9)
    assert figures["bits_per_token"] == pytest.approx(expected / math.log(2), rel=1e-9)


def test_lm_sliding_window_scores_every_token_with_context(tmp_path):
    """A transformer evaluated with stride < context scores each token once (count = tokens)."""
    torch.manual_seed(0)
    model = build_lm(LMConfig(arch="transformer", vocab_size=30, embedding_size=8, num_layers=1,
                              num_heads=2, context=8)).eval()
    ids = torch.randint(3, 30, (50,))
    for stride in (1, 3, 8):
        stats = evaluate_lm(model, sliding_windows(ids, 4, 8, stride), False, "cpu")
        assert stats["tokens"] == 50


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    run = tmp_path_factory.mktemp("api") / "run"
    seqlab.train_lm(tiny_config(run, "lstm", max_steps=6, eval_every=3))
    return run


def test_lm_api_score_perplexity_and_evaluate_agree(trained):
    lm = seqlab.load(trained)
    text = "First Citizen:\nWe are accounted poor citizens"
    scores = lm.score(text)
    assert [t for t, _ in scores] == ["First", "Citizen:", "</s>", "We", "are", "accounted", "poor",
                                      "citizens", "</s>"]
    mean_nll = -sum(lp for _, lp in scores) / len(scores)
    assert lm.perplexity(text) == pytest.approx(math.exp(mean_nll), rel=1e-5)
    figures = lm.evaluate_file(VALID, batch_size=1)
    lines = VALID.read_text().splitlines()
    assert figures["tokens"] == sum(len(line.split()) + 1 for line in lines)
    assert figures["perplexity"] == pytest.approx(lm.perplexity(VALID.read_text()), rel=1e-5)
    assert figures["unit"] == "word"


def test_lm_api_textbook_cells_give_the_same_perplexity(trained):
    fused = seqlab.load(trained).evaluate_file(VALID)
    textbook = seqlab.load(trained, rnn_impl="textbook").evaluate_file(VALID)
    assert textbook["loss"] == pytest.approx(fused["loss"], rel=1e-5)


def greedy_by_full_passes(model, context: list[int], count: int) -> list[int]:
    """Greedy continuation, each token the argmax of a fresh full pass over everything so far."""
    history = list(context)
    with torch.no_grad():
        for _ in range(count):
            state = None if model.context_length else model.init_state(1)
            logits = blocked_tokens(model)(model(torch.tensor([history]), state)[0][:, -1])
            history.append(int(logits.argmax()))
    return history[len(context):]


def test_lm_api_generate_is_the_models_continuation_and_warns_on_unknown_prompt_tokens(trained):
    lm = seqlab.load(trained)
    context = lm.prompt_ids("We are")
    expected = greedy_by_full_passes(lm.model, context, 12)
    body = lm.detokenize(context[1:])
    assert lm.generate("We are", max_tokens=12, greedy=True) == lm.detokenize(context[1:] + expected)[len(body):]
    first = lm.generate("We are", max_tokens=12, seed=3, stop_at_eos=False)
    assert first.startswith(" ") and len(first.split()) + first.count("\n") == 12
    assert first == lm.generate("We are", max_tokens=12, seed=3, stop_at_eos=False)          # the seed decides
    assert any(lm.generate("We are", max_tokens=12, seed=seed) != first for seed in (4, 5, 6))
    with pytest.warns(SeqlabWarning, match="zyzzyva"):
        lm.generate("zyzzyva citizens", max_tokens=3, seed=1)


def test_lm_api_streams_one_piece_per_token(trained):
    """Sampling streams each token's text as soon as it is drawn: 10 tokens, 10 pieces, which add up to the
    detokenized ids that the search draws with the same seed."""
    lm = seqlab.load(trained)
    pieces = list(lm.stream("We are", max_tokens=10, seed=5, stop_at_eos=False))
    context = lm.prompt_ids("We are")
    ids = list(generate_ids(lm.model, context, SamplingOptions(max_tokens=10, seed=5)))
    assert len(pieces) == 10 and all(pieces)
    assert "".join(pieces) == lm.detokenize(context[1:] + ids)[len(lm.detokenize(context[1:])):]


def test_lm_api_beam_search_continuation(trained):
    """beam=3 streams the best hypothesis once, at the end; its log probability is at least greedy's."""
    lm = seqlab.load(trained)
    context = lm.prompt_ids("We are")
    pieces = list(lm.stream("We are", max_tokens=6, beam=3))
    (best,) = lm_beam_search(lm.model, context, SamplingOptions(max_tokens=6, beam=3))
    body = lm.detokenize(context[1:])
    assert pieces == [lm.detokenize(context[1:] + best.tokens)[len(body):]]
    assert lm.generate("We are", max_tokens=6, beam=3) == pieces[0] and len(best.tokens) == 6

    def log_prob(tokens: list[int]) -> float:
        with torch.no_grad():
            logits, _ = lm.model(torch.tensor([context + tokens]), lm.model.init_state(1))
        log_probs = torch.log_softmax(blocked_tokens(lm.model)(logits[0]), dim=-1)
        return sum(float(log_probs[len(context) - 1 + i, t]) for i, t in enumerate(tokens))

    greedy = greedy_by_full_passes(lm.model, context, 6)
    assert best.score == pytest.approx(log_prob(best.tokens), abs=1e-4)
    assert best.score >= log_prob(greedy) - 1e-5
    with pytest.raises(SeqlabError, match="--beam 3 searches"):
        lm.generate("We are", beam=3, temperature=0.5)


def test_lm_api_bits_per_char_is_the_total_in_bits_over_the_characters(trained):
    """Word model: bits per character = (summed loss in bits) / (characters of each line + one per line)."""
    lm = seqlab.load(trained)
    figures = lm.evaluate_file(VALID)
    lines = VALID.read_text().splitlines()
    characters = sum(len(line) + 1 for line in lines)
    assert figures["characters"] == characters
    total_bits = figures["loss"] * figures["tokens"] / math.log(2)
    assert figures["bits_per_char"] == pytest.approx(total_bits / characters, rel=1e-12)
    text = "First Citizen:\nWe are accounted poor citizens"
    assert lm.evaluate_text(text)["characters"] == len(text) + 1                  # the last line's break counted
    assert lm.evaluate_text(text + "\n")["bits_per_char"] == lm.evaluate_text(text)["bits_per_char"]
    ids = lm.encode(text)                               # 'citizens' is not in the tiny vocabulary: read as <unk>
    assert lm.evaluate_ids(ids, batch_size=1)["characters"] == len(text.replace("citizens", "<unk>")) + 1
    assert lm.evaluate_ids(ids, batch_size=1, characters=len(text) + 1) == lm.evaluate_text(text)


def test_lm_api_bits_per_char_equals_bits_per_token_for_characters(tmp_path):
    """A character model scores one token per character and one </s> per line break: the two are the same figure,
    during training (metrics.jsonl, valid and test) and in evaluation."""
    run = tmp_path / "chars"
    seqlab.train_lm(tiny_config(run, "gru", tokenizer="char", max_steps=4, eval_every=2))
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert {r["split"] for r in records} == {"valid", "test"} and len(records) == 4
    for record in records:
        assert record["bits_per_char"] == record["bits_per_token"]
        assert record["characters"] == record["tokens"]
    lm = seqlab.load(run)
    for path in (VALID, TEST):
        figures = lm.evaluate_file(path)
        assert figures["bits_per_char"] == figures["bits_per_token"]
        assert figures["characters"] == figures["tokens"] == len(path.read_text())   # the file ends with a newline


def test_lm_task_reports_the_characters_once_across_processes():
    """Under DDP each process scores some rows and the trainer adds their figures: only the process holding the
    first rows reports the split's characters."""
    torch.manual_seed(0)
    model = build_lm(LMConfig(arch="lstm", vocab_size=30, embedding_size=8, hidden_size=8, num_layers=1)).eval()
    ids = torch.randint(3, 30, (80,))
    task = LanguageModelingTask(model, ids, ids[:40], ids[40:], batch_size=2, seq_len=5, eval_batch_size=4,
                                eval_stride=0, seed=0, valid_characters=123, test_characters=77)
    first, second = (task.evaluate(model, task.valid_data, "cpu", rows) for rows in (slice(0, 2), slice(2, 4)))
    assert (first["characters"], second["characters"]) == (123, 0)
    assert task.evaluate(model, task.test_data, "cpu")["characters"] == 77
    added = {k: first[k] + second[k] for k in first}
    whole = task.evaluate(model, task.valid_data, "cpu")
    assert task.summarize(added)["bits_per_char"] == pytest.approx(task.summarize(whole)["bits_per_char"], rel=1e-9)
    assert task.summarize(whole)["bits_per_char"] == pytest.approx(whole["loss_sum"] / 123 / math.log(2))


def test_lm_api_generation_goes_past_line_ends_unless_asked_to_stop(trained):
    """A word model's </s> is a line break: by default generation writes it and goes on, so hard-wrapped
    prose does not end after one line; stop_at_eos=True stops at the first one."""
    lm = seqlab.load(trained)
    with torch.no_grad():
        lm.model.output.decoder.bias[EOS] += 100.0                              # always predicts </s>
    assert lm.generate("We are", max_tokens=5, greedy=True) == "\n" * 5
    assert lm.generate("We are", max_tokens=5, seed=1) == "\n" * 5
    assert lm.generate("We are", max_tokens=5, greedy=True, stop_at_eos=True) == ""
    assert list(lm.stream("We are", max_tokens=3, greedy=True)) == ["\n", "\n", "\n"]


def test_lm_api_evaluate_reads_json_lines_by_the_runs_text_column(tmp_path, capsys):
    """An LM trained on JSON lines (--text-column body) is evaluated on JSON lines as it trained: the text of
    each record's field, not the raw records; the figures are those of the same text as a plain file, and
    the valid figure training recorded. --text-column names another field; on a plain file it is refused."""
    from seqlab.cli.main import main

    def records_file(source, name: str):
        path = tmp_path / name
        path.write_text("".join(json.dumps({"id": k, "body": line, "note": "the king"}) + "\n"
                                for k, line in enumerate(source.read_text().splitlines())))
        return path

    train, valid = records_file(TRAIN, "train.jsonl"), records_file(VALID, "valid.jsonl")
    config = tiny_config(tmp_path / "run")
    config.data.train, config.data.valid, config.data.test, config.data.text_column = str(train), str(valid), "", "body"
    seqlab.train_lm(config)
    lm = seqlab.load(tmp_path / "run")
    as_records = lm.evaluate_file(valid)
    assert as_records == lm.evaluate_file(VALID)                           # the text, not the JSON around it
    final = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
             if json.loads(line).get("final")][0]
    assert as_records["perplexity"] == pytest.approx(final["perplexity"], rel=1e-6)
    assert lm.evaluate_file(valid, text_column="note")["tokens"] == 3 * len(VALID.read_text().splitlines())
    assert main(["evaluate", str(tmp_path / "run"), str(VALID), "--text-column", "body"]) == 2
    assert "is plain text (one text per line)" in capsys.readouterr().err
    assert main(["evaluate", str(tmp_path / "run"), str(valid), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["perplexity"] == as_records["perplexity"]
