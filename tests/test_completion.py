"""Batched completions (`seqlab.families.lm.completion`): prompts of different lengths decoded in one batch give,
row by row, what each prompt gives alone (`TrainedLM.generate`): greedy, seeded sampling, beam search, stop at
</s>; for the RNNs, the window LM and the transformer (learned, sinusoidal and rotary positions, its rows at
their own positions in one KV cache)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

import seqlab
from conftest import bytes_lm_run, tiny_config
from seqlab.data.vocab import EOS
from seqlab.decoding.options import SamplingOptions
from seqlab.decoding.search import blocked_tokens
from seqlab.families.lm.completion import complete, complete_stream, prompt_logprobs, score_texts, spell
from seqlab.families.lm.pipeline import train_lm

PROMPTS = ["ROMEO :", "", "JULIET : O Romeo , Romeo", "the", "First Citizen :\nBefore we proceed"]


def trained_lm(tmp_path, arch: str, tokenizer: str = "word", **model):
    config = tiny_config(tmp_path / arch, arch, tokenizer, max_steps=6)
    if model:
        config = dataclasses.replace(config, model=dataclasses.replace(config.model, **model))
    train_lm(config)
    return seqlab.load(config.train.output)


@pytest.fixture(scope="module", params=["lstm", "gru", "ffn", "transformer", "rotary"])
def lm(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    if request.param == "rotary":
        return trained_lm(folder, "transformer", positions="rotary")
    return trained_lm(folder, request.param)


def alone(lm, prompt: str, options: SamplingOptions) -> str:
    return lm.generate(prompt, **{f.name: getattr(options, f.name) for f in dataclasses.fields(options)})


def test_a_batch_of_ragged_prompts_gives_what_each_prompt_gives_alone(lm):
    options = [SamplingOptions(max_tokens=6, greedy=True), SamplingOptions(max_tokens=3, seed=7),
               SamplingOptions(max_tokens=5, seed=11, temperature=0.7, top_k=5),
               SamplingOptions(max_tokens=4, greedy=True, stop_at_eos=True),
               SamplingOptions(max_tokens=6, seed=3, top_p=0.8)]
    batch = complete(lm, PROMPTS, options)
    for prompt, option, completion in zip(PROMPTS, options, batch, strict=True):
        assert completion.text == alone(lm, prompt, option)
        assert len(completion.ids) == len(completion.logprobs) <= option.max_tokens
        assert all(lp <= 0 and math.isfinite(lp) for lp in completion.logprobs)
        assert completion.finish_reason == ("stop" if completion.ids[-1:] == [EOS] and option.stop_at_eos
                                            else "length")


def test_greedy_log_probabilities_match_the_score_of_the_text(lm):
    (one,) = complete(lm, ["ROMEO :"], SamplingOptions(max_tokens=5, greedy=True), top_logprobs=3)
    (again,) = complete(lm, ["ROMEO :", "the"], SamplingOptions(max_tokens=5, greedy=True), top_logprobs=3)[:1]
    assert one.ids == again.ids
    assert one.logprobs == pytest.approx(again.logprobs, abs=1e-5)
    for lp, top, token in zip(one.logprobs, one.top_logprobs, one.tokens, strict=True):
        assert max(top.values()) == pytest.approx(lp, abs=1e-6) and top[token] == pytest.approx(lp, abs=1e-6)


def test_beam_searches_of_ragged_prompts_run_together_and_find_what_each_finds_alone(lm):
    options = [SamplingOptions(max_tokens=4, beam=3), SamplingOptions(max_tokens=2, beam=3),
               SamplingOptions(max_tokens=5, beam=3, stop_at_eos=True), SamplingOptions(max_tokens=3, beam=2),
               SamplingOptions(max_tokens=4, greedy=True)]
    prompts = ["ROMEO :", "the", "JULIET : O", "", "KING"]
    for prompt, option, completion in zip(prompts, options, complete(lm, prompts, options), strict=True):
        assert completion.text == alone(lm, prompt, option)
        assert len(completion.logprobs) == len(completion.ids)


def test_the_stream_gives_the_whole_completion_piece_by_piece(lm):
    option = SamplingOptions(max_tokens=7, seed=5)
    pieces = list(complete_stream(lm, "JULIET :", option))
    (whole,) = complete(lm, ["JULIET :"], option)
    assert "".join(p.text for p in pieces) == whole.text
    assert [i for p in pieces for i in p.ids] == whole.ids
    assert pieces[-1].finish_reason == "length" and all(p.finish_reason == "" for p in pieces[:-1])


def test_completion_prompt_log_probabilities_are_the_scores_of_the_text(lm):
    """One definition of a log probability: a prompt's (echo) are its scores (`score_texts`, /v1/score's), to the
    last bit, without the </s> the score ends its last line with (kept when the prompt ends a line)."""
    for prompt in ("ROMEO : O", "First Citizen :\nBefore we", "the king\n", ""):
        tokens, logprobs = prompt_logprobs(lm, prompt)
        (scored,) = score_texts(lm, [prompt])
        cut = len(scored.tokens) - (not prompt.endswith("\n"))
        assert (tokens, logprobs) == (scored.tokens[:cut], scored.logprobs[:cut])
        assert logprobs == pytest.approx([p for _, p in lm.score(prompt)][:cut], abs=1e-4)


def test_completion_log_probabilities_are_the_model_s_and_the_top_ones_the_choosable(lm):
    """A generated token's log probability is the model's over every id (as the prompt's), not renormalised
    without the ids the search blocks; the top ones list only ids the search could choose."""
    (made,) = complete(lm, ["ROMEO :"], SamplingOptions(max_tokens=4, greedy=True), top_logprobs=5)
    context = lm.prompt_ids("ROMEO :")
    with torch.no_grad():
        logits, _ = lm.model(torch.tensor([context + made.ids[:-1]]), lm.model.init_state(1)
                             if lm.model.context_length is None else None)
    expected = torch.log_softmax(logits[0, len(context) - 1:], dim=-1)                   # (4, V): every id
    assert made.logprobs == pytest.approx([float(expected[i, t]) for i, t in enumerate(made.ids)], abs=1e-4)
    never = {lm.vocab.tokens[i] for i in blocked_tokens(lm.model).ids}
    assert all(top and not never & set(top) for top in made.top_logprobs)


@pytest.fixture(scope="module")
def bytes_lm(tmp_path_factory):
    return seqlab.load(bytes_lm_run(tmp_path_factory.mktemp("bytes")))


def test_completion_stream_never_sends_half_a_character(bytes_lm):
    """A byte-level BPE model's pieces hold a character's bytes back until it is whole, and one the continuation
    ends in (cut by max_tokens) is never sent: the stream joined is the whole completion's text, seed by seed."""
    lm = bytes_lm
    cut = 0
    for seed in range(4):
        for max_tokens in range(1, 10):
            option = SamplingOptions(max_tokens=max_tokens, seed=seed, temperature=1.5)
            pieces = list(complete_stream(lm, "ROMEO: ô", option))
            (whole,) = complete(lm, ["ROMEO: ô"], option)
            assert "".join(p.text for p in pieces) == whole.text and [i for p in pieces for i in p.ids] == whole.ids
            assert not any(p.text.endswith("\ufffd") for p in pieces) and not whole.text.endswith("\ufffd")
            cut += lm.detokenize(whole.prompt_ids[1:] + whole.ids).endswith("\ufffd")    # ids ending mid-character
    assert cut >= 3
    (beam,) = complete(lm, ["ROMEO: ô"], SamplingOptions(max_tokens=5, beam=2))       # whole at once: the same rule
    assert not beam.text.endswith("\ufffd") and beam.text == lm.generate("ROMEO: ô", max_tokens=5, beam=2)


def test_completion_spell_gives_each_piece_s_text_and_the_bytes_of_part_characters(bytes_lm):
    """`spell` (OpenAI's logprobs.tokens): a piece that holds whole characters is the text it adds (the line's first
    without the space seqlab reads before it), so that such pieces join to the text; a piece of part of a character
    is `bytes:\\xNN...`, and the character's pieces' bytes are its UTF-8."""
    lm = bytes_lm

    def raw(piece: str) -> bytes:
        if not piece.startswith("bytes:"):
            return piece.encode()
        return bytes(int(h, 16) for h in piece.removeprefix("bytes:").split("\\x")[1:])

    text = "ROMEO: ô mon âme, 東京 😀"
    texts, offsets, _ = spell(lm, lm.tokenizer.tokenize(text), [])
    parts = [t for t in texts if t.startswith("bytes:")]
    assert parts and len(parts) < len(texts) and not any("Ġ" in t for t in texts)      # both kinds, no Ġ
    assert b"".join(raw(t) for t in texts).decode() == text
    assert all(text[at:at + len(t)] == t for at, t in zip(offsets, texts, strict=True) if t not in parts)
    ascii_text = "ROMEO: and you"
    assert "".join(spell(lm, lm.tokenizer.tokenize(ascii_text), [])[0]) == ascii_text    # whole: joined, the text


def test_transformer_rows_that_would_slide_are_decoded_alone(tmp_path):
    lm = trained_lm(tmp_path, "transformer")                   # context 16
    long = " ".join(["the"] * 12)
    options = SamplingOptions(max_tokens=9, greedy=True)        # 13 + 9 > 17: slides, so alone
    batch = complete(lm, [long, "ROMEO :"], options)
    assert [c.text for c in batch] == [alone(lm, long, options), alone(lm, "ROMEO :", options)]


def test_unknown_prompt_tokens_are_told_not_printed(lm, recwarn):
    (completion,) = complete(lm, ["zzqx unheard"], SamplingOptions(max_tokens=2, greedy=True))
    assert completion.warnings and "zzqx" in completion.warnings[0]
    assert not [w for w in recwarn if "zzqx" in str(w.message)]


def test_merged_states_step_as_each_row_alone():
    torch.manual_seed(0)
    from seqlab.families.lm.config import LMConfig
    from seqlab.families.lm.model import build_lm
    for arch in ("lstm", "transformer"):
        model = build_lm(LMConfig(arch=arch, vocab_size=30, embedding_size=8, hidden_size=8, num_layers=2,
                                  num_heads=2, context=12 if arch == "transformer" else 0)).eval()
        prompts = [torch.tensor([ids]) for ids in ([2, 5, 6, 7, 8], [2, 9], [2], [2, 4, 4])]
        merged = model.start_rows([p[0] for p in prompts], room=3)     # LSTM: one packed pass; transformer: merged
        fed = torch.tensor([p[0, -1] for p in prompts])
        batch_logits = []
        for _ in range(3):
            logits, merged, _ = model.step(fed, merged)
            batch_logits.append(logits)
            fed = logits.argmax(-1)
        for b, p in enumerate(prompts):
            state, fed = model.start(p), p[:, -1]
            for t in range(3):
                logits, state, _ = model.step(fed, state)
                assert torch.allclose(logits[0], batch_logits[t][b], atol=1e-5), (arch, b, t)
                fed = logits.argmax(-1)


def test_prompts_are_read_on_the_read_threads_and_give_the_same_completions(lm, monkeypatch):
    """The server's inference thread reads a batch's prompts on every core (`core.set_read_threads`): the steps keep
    the thread count they had, and every completion is the same as on one thread."""
    from seqlab.decoding import core
    options = [SamplingOptions(max_tokens=4, seed=3), SamplingOptions(max_tokens=4, greedy=True),
               SamplingOptions(max_tokens=3, beam=2), SamplingOptions(max_tokens=3, beam=2)]
    prompts = ["ROMEO : O", "the king", "JULIET :", "First Citizen"]
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        one = complete(lm, prompts, options)
        seen = []
        start_rows = type(lm.model).start_rows
        monkeypatch.setattr(type(lm.model), "start_rows",
                            lambda self, *a, **k: seen.append(torch.get_num_threads()) or start_rows(self, *a, **k))
        core.set_read_threads(2)
        two = complete(lm, prompts, options)
        assert torch.get_num_threads() == 1
    finally:
        core.set_read_threads(0)
        torch.set_num_threads(before)
    assert seen == [2, 2]                                   # the sampled/greedy batch and the beam batch
    for a, b in zip(one, two, strict=True):
        assert (a.ids, a.text) == (b.ids, b.text)
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-6)


def test_a_batch_of_texts_scores_as_each_text_alone(lm):
    from seqlab.families.lm.completion import score_texts
    texts = ["ROMEO : O", "the king", "First Citizen :\nBefore we proceed any further", "x", " ".join(["the"] * 30)]
    for text, scored in zip(texts, score_texts(lm, texts), strict=True):
        alone_pairs = lm.score(text)
        assert scored.tokens == [t for t, _ in alone_pairs]
        assert scored.logprobs == pytest.approx([p for _, p in alone_pairs], abs=1e-4)
        figures = lm.evaluate_text(text)
        assert scored.figures["perplexity"] == pytest.approx(figures["perplexity"], rel=1e-4)
        assert scored.figures["bits_per_char"] == pytest.approx(figures["bits_per_char"], rel=1e-4)


def test_completion_sliced_scores_are_the_unsliced_ones(lm):
    """On a server's thread `score_texts` reads the batch in slices (a window of time steps of every text with the
    state carried, or a few texts of a transformer): its figures are the one pass's (bit for bit with MKL's AVX-512
    kernels; within float rounding on its AVX2 path, an AMD CPU's, whose products round by the rows' count)."""
    from seqlab.decoding import core
    from seqlab.families.lm.completion import score_texts
    texts = ["ROMEO : O", "the king", "First Citizen :\nBefore we proceed any further", "x", " ".join(["the"] * 30),
             "a b c d"]
    whole = score_texts(lm, texts)
    core.set_slice_seconds(1e-9, first=1)                    # the smallest slices
    try:
        sliced = score_texts(lm, texts)
    finally:
        core.set_slice_seconds(0)
    for a, b in zip(whole, sliced, strict=True):
        assert a.tokens == b.tokens
        assert b.logprobs == pytest.approx(a.logprobs, rel=1e-6, abs=1e-6)
        assert b.figures == pytest.approx(a.figures, rel=1e-6, abs=1e-6)
