"""Decoding language models: the logits processors (== the filter_logits they replaced), token choice, sampling
options, the decoding contract of every LM (step == forward, reorder_state), generation == full forward passes,
and beam search (== exhaustive search on a tiny model, beam 1 == greedy, never worse than greedy)."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from seqlab.data.vocab import BOS, EOS, PAD, SEP, UNK
from seqlab.decoding.processors import BlockTokens, Temperature, TopK, TopP, process, processors_for
from seqlab.decoding.search import (
    Sampling,
    SamplingOptions,
    blocked_tokens,
    choose,
    generate_ids,
    greedy_steps,
    lm_beam_search,
    sample_ids,
)
from seqlab.errors import SeqlabError
from seqlab.families.lm.model import LMConfig, build_lm

VOCAB = 23
NEVER = [PAD, BOS, SEP]
INF = float("-inf")


def known_distribution(probs: list[float], ids: list[int], vocab: int = 10) -> torch.Tensor:
    """Logits (1, V) whose softmax puts `probs` on `ids` and nothing elsewhere."""
    logits = torch.full((1, vocab), INF)
    logits[0, ids] = torch.tensor(probs).log()
    return logits


def kept(logits: torch.Tensor) -> set[int]:
    return set(torch.isfinite(logits[0]).nonzero().flatten().tolist())


# ------------------------------------------------------------------------------------- processors


def reference_filter_logits(logits: torch.Tensor, temperature: float = 1.0, top_k: int = 0,
                            top_p: float = 1.0) -> torch.Tensor:
    """seqlab.decoding.filter_logits as it was before the processors replaced it (the reference), but for the
    temperature, since applied to logits shifted to a row maximum of 0 (softmax(z / T) unchanged, and any
    positive finite T kept finite: tests/test_strict_inputs.py)."""
    logits = logits.float().clone()
    logits[:, NEVER] = INF
    if temperature != 1.0:
        logits = (logits - logits.max(dim=-1, keepdim=True).values) / temperature
    if top_k and top_k < logits.size(-1):
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, INF)
    if top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        probs = sorted_logits.softmax(dim=-1)
        before = probs.cumsum(dim=-1) - probs
        sorted_logits = sorted_logits.masked_fill(before >= top_p, INF)
        logits = torch.full_like(logits, INF).scatter(-1, order, sorted_logits)
    return logits


def filter_logits(logits: torch.Tensor, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0):
    """What sampling applies: the processors built from the options."""
    return process(logits, processors_for(Sampling(temperature=temperature, top_k=top_k, top_p=top_p), sample=True))


@pytest.mark.parametrize("temperature", [0.3, 1.0, 2.5])
@pytest.mark.parametrize("top_k", [0, 1, 4, VOCAB])
@pytest.mark.parametrize("top_p", [0.2, 0.9, 1.0])
def test_decoding_processors_equal_the_old_filter_logits(temperature, top_k, top_p):
    logits = 3 * torch.randn(5, VOCAB, generator=torch.Generator().manual_seed(top_k))
    logits[:, NEVER] = 10.0
    expected = reference_filter_logits(logits, temperature, top_k, top_p)
    assert torch.equal(filter_logits(logits, temperature, top_k, top_p), expected)
    composed = [BlockTokens(), *[Temperature(temperature)] * (temperature != 1.0), TopK(top_k or VOCAB)] + \
        [TopP(top_p)] * (top_p < 1)                       # a temperature of 1 shifts the row only: not applied
    torch.testing.assert_close(process(logits, composed), expected, rtol=1e-6, atol=0)


def test_decoding_greedy_and_beam_only_block():
    options = Sampling(temperature=0.5, top_k=3, top_p=0.5)
    assert processors_for(options, sample=False) == [BlockTokens()]
    assert processors_for(options, sample=True) == [BlockTokens(), Temperature(0.5), TopK(3), TopP(0.5)]
    assert processors_for(Sampling(), sample=True) == [BlockTokens()]             # the defaults change nothing


def test_decoding_top_k_keeps_exactly_the_k_largest():
    logits = torch.randn(4, VOCAB, generator=torch.Generator().manual_seed(0))
    logits[:, NEVER] = 50.0                                            # the largest, yet never kept
    for k in (1, 3, 7):
        out = filter_logits(logits, top_k=k)
        allowed = logits.clone()
        allowed[:, NEVER] = INF
        for row in range(4):
            expected = set(allowed[row].topk(k).indices.tolist())
            assert set(torch.isfinite(out[row]).nonzero().flatten().tolist()) == expected
            assert torch.equal(out[row, list(expected)], logits[row, list(expected)])   # values unchanged
    assert torch.isfinite(filter_logits(logits, top_k=0)).sum(dim=1).tolist() == [VOCAB - 3] * 4
    assert torch.isfinite(filter_logits(logits, top_k=VOCAB + 5)).sum(dim=1).tolist() == [VOCAB - 3] * 4


@pytest.mark.parametrize("top_p, expected", [(0.3, 1), (0.5, 1), (0.6, 2), (0.8, 2), (0.81, 3), (0.9, 3),
                                             (0.96, 4), (1.0, 4)])
@pytest.mark.parametrize("ids", [[5, 6, 7, 8], [9, 3, 1, 6]])
def test_decoding_top_p_keeps_the_smallest_prefix_reaching_p(top_p, expected, ids):
    logits = known_distribution([0.5, 0.3, 0.15, 0.05], ids)
    out = filter_logits(logits, top_p=top_p)
    assert kept(out) == set(ids[:expected])
    assert torch.equal(out[0, ids[:expected]], logits[0, ids[:expected]])


def test_decoding_top_p_matches_a_brute_force_nucleus():
    generator = torch.Generator().manual_seed(1)
    for _ in range(50):
        logits = 3 * torch.randn(1, VOCAB, generator=generator)
        top_p = float(torch.rand(1, generator=generator)) * 0.98 + 0.01
        probs = logits.double().clone()
        probs[0, NEVER] = INF
        probs = probs.softmax(-1)[0]
        order = probs.argsort(descending=True).tolist()
        mass, nucleus = 0.0, set()
        for token in order:                                            # smallest prefix reaching p
            if mass >= top_p:
                break
            nucleus.add(token)
            mass += float(probs[token])
        if abs(mass - top_p) < 1e-5 or abs(mass - float(probs[order[len(nucleus) - 1]]) - top_p) < 1e-5:
            continue                                                   # too close to call in float32
        assert kept(filter_logits(logits, top_p=top_p)) == nucleus


def test_decoding_temperature_divides_logits():
    logits = torch.randn(2, VOCAB, generator=torch.Generator().manual_seed(2))
    allowed = [i for i in range(VOCAB) if i not in NEVER]
    for temperature in (0.5, 1.0, 2.0):
        out = filter_logits(logits, temperature=temperature)
        top = logits[:, allowed].max(dim=-1, keepdim=True).values if temperature != 1.0 else 0   # shifted
        torch.testing.assert_close(out[:, allowed], (logits[:, allowed] - top) / temperature)
        torch.testing.assert_close(out.softmax(dim=-1)[:, allowed], (logits[:, allowed] / temperature).softmax(-1))
    original = torch.randn(2, VOCAB, generator=torch.Generator().manual_seed(2))
    assert torch.equal(logits, original)                                 # not modified in place


def test_decoding_top_p_applies_to_the_tempered_distribution():
    logits = known_distribution([0.5, 0.3, 0.15, 0.05], [5, 6, 7, 8])
    assert len(kept(filter_logits(logits, temperature=1.0, top_p=0.8))) == 2
    assert len(kept(filter_logits(logits, temperature=100.0, top_p=0.8))) == 4    # nearly uniform
    assert len(kept(filter_logits(logits, temperature=0.1, top_p=0.8))) == 1      # nearly one-hot


def test_decoding_never_generates_pad_bos_sep():
    logits = torch.zeros(3, VOCAB)
    logits[:, NEVER] = 100.0
    out = filter_logits(logits)
    assert torch.isinf(out[:, NEVER]).all()
    assert torch.isfinite(out[:, [UNK, EOS]]).all()                   # </s> and <unk> can be generated
    assert set(choose(logits, SamplingOptions(greedy=True)).tolist()).isdisjoint(NEVER)
    samples = choose(logits.repeat(200, 1), SamplingOptions(), torch.Generator().manual_seed(0))
    assert set(samples.tolist()).isdisjoint(NEVER)
    assert len(set(samples.tolist())) > 10                            # the rest is reachable


# ------------------------------------------------------------------------------------------- choose


def test_decoding_choose_greedy_returns_argmax():
    logits = torch.randn(6, VOCAB, generator=torch.Generator().manual_seed(3))
    logits[:, NEVER] = -100.0
    assert torch.equal(choose(logits, SamplingOptions(greedy=True)), logits.argmax(dim=-1))
    assert torch.equal(choose(logits, SamplingOptions(greedy=True, temperature=0.01, top_k=1)),
                       logits.argmax(dim=-1))


def test_decoding_choose_sampling_is_reproducible_with_a_seeded_generator():
    logits = torch.randn(64, VOCAB, generator=torch.Generator().manual_seed(4))
    options = SamplingOptions(temperature=1.5)
    first = choose(logits, options, torch.Generator().manual_seed(7))
    assert torch.equal(choose(logits, options, torch.Generator().manual_seed(7)), first)
    assert not torch.equal(choose(logits, options, torch.Generator().manual_seed(8)), first)


def test_decoding_choose_samples_from_the_filtered_distribution():
    logits = known_distribution([0.5, 0.3, 0.15, 0.05], [5, 6, 7, 8]).repeat(4000, 1)
    samples = choose(logits, SamplingOptions(top_p=0.8), torch.Generator().manual_seed(5))
    assert set(samples.tolist()) == {5, 6}
    share = float((samples == 5).float().mean())
    assert abs(share - 0.5 / 0.8) < 0.03                              # renormalised over the nucleus
    samples = choose(logits, SamplingOptions(top_k=3), torch.Generator().manual_seed(5))
    assert set(samples.tolist()) == {5, 6, 7}


# --------------------------------------------------------------------------------- SamplingOptions


@pytest.mark.parametrize("options, message", [({"temperature": 0}, "--temperature"),
                                              ({"temperature": -1.0}, "--temperature"),
                                              ({"top_p": 0}, "--top-p"), ({"top_p": 1.01}, "--top-p"),
                                              ({"top_p": -0.5}, "--top-p"), ({"top_k": -1}, "--top-k"),
                                              ({"max_tokens": -1}, "--max-tokens")])
def test_decoding_sampling_options_refuse_bad_values(options, message):
    with pytest.raises(SeqlabError, match=message):
        SamplingOptions(**options)


def test_decoding_sampling_options_accept_the_boundaries():
    options = SamplingOptions(max_tokens=0, top_p=1.0, top_k=0, temperature=1e-3)
    assert options.top_p == 1.0 and options.max_tokens == 0


# ------------------------------------------------------------------------------------- generate_ids

ARCHS = [("ffn", {}), ("lstm", {}), ("gru", {}), ("transformer", {}),
         ("transformer", {"attention_impl": "textbook", "norm_position": "pre"})]


def tiny_lm(arch: str, context: int = 16, **overrides):
    """An untrained model with weights large enough that its greedy choices depend on the context."""
    torch.manual_seed(0)
    options = dict(arch=arch, vocab_size=VOCAB, embedding_size=8, hidden_size=12, num_layers=2, dropout=0.1,
                   num_heads=2, context=context if arch in ("ffn", "transformer") else 0)
    if arch == "ffn":
        options["context"] = 4
    options.update(overrides)
    model = build_lm(LMConfig(**options))
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(0.0, 0.5) if not name.endswith("bias") else p.zero_()
    return model


class Recorder:
    """Stands in for the model in `generate_ids` (the decoding contract) and keeps the logits of every step."""

    def __init__(self, model):
        self.model, self.logits = model, []
        self.context_length = model.context_length

    def eval(self):
        self.model.eval()
        return self

    def start(self, prompt):
        return self.model.start(prompt)

    def step(self, tokens, state, need_weights=False):
        logits, state, weights = self.model.step(tokens, state, need_weights)
        self.logits.append(logits[0])
        return logits, state, weights

    def reorder_state(self, state, index):
        return self.model.reorder_state(state, index)


@torch.no_grad()
def full_forward_decode(model, prompt: list[int],
                        options: SamplingOptions) -> tuple[list[int], list[torch.Tensor]]:
    """Decoding by a full forward pass from scratch over the visible prefix at every step.

    Greedy is the argmax over the tokens a language model may generate; sampling draws with `choose`
    from a generator seeded as `generate_ids` seeds its own. A transformer sees at most its context:
    when the prefix outgrows it, the most recent half is kept (what `generate_ids` documents); other
    models see the whole prefix.
    """
    model.eval()
    window = model.context_length
    generator = torch.Generator().manual_seed(options.seed) if options.seed is not None else None
    visible, tokens, all_logits = list(prompt), [], []
    for _ in range(options.max_tokens):
        logits, _ = model(torch.tensor([visible]))                    # (1, T, V), no state: from scratch
        logits = logits[0, -1]
        all_logits.append(logits)
        if options.greedy:
            masked = logits.clone()
            masked[NEVER] = INF
            token = int(masked.argmax())
        else:
            token = int(choose(logits[None], options, generator))
        tokens.append(token)
        visible.append(token)
        if window is not None and len(visible) > window:
            visible = visible[-(window // 2):]
    return tokens, all_logits


def assert_cached_equals_full(model, prompt: list[int], options: SamplingOptions) -> list[int]:
    recorder = Recorder(model)
    tokens = list(generate_ids(recorder, prompt, options))
    expected, expected_logits = full_forward_decode(model, prompt, options)
    assert len(tokens) == options.max_tokens
    assert tokens == expected
    assert not model.training
    assert len(recorder.logits) == options.max_tokens                # one step per token, the prompt's last first
    for step, (cached, full) in enumerate(zip(recorder.logits, expected_logits, strict=True)):
        torch.testing.assert_close(cached, full, atol=1e-5, rtol=1e-5, msg=f"step {step}")
    assert not torch.allclose(expected_logits[0], expected_logits[-1])   # the outputs depend on the prefix
    return tokens


@pytest.mark.parametrize("arch, overrides", ARCHS)
def test_decoding_generate_greedy_equals_full_forward(arch, overrides):
    model = tiny_lm(arch, context=16, **overrides)
    prompt = [EOS, 7, 9, 11, 5]
    count = 16 - len(prompt) if arch == "transformer" else 25        # within the transformer's context
    options = SamplingOptions(max_tokens=count, greedy=True, stop_at_eos=False)
    assert_cached_equals_full(model, prompt, options)


@pytest.mark.parametrize("arch, overrides", ARCHS)
def test_decoding_generate_sampled_equals_full_forward(arch, overrides):
    model = tiny_lm(arch, context=16, **overrides)
    prompt = [EOS, 7, 9, 11, 5]
    count = 16 - len(prompt) if arch == "transformer" else 25
    options = SamplingOptions(max_tokens=count, seed=11, top_k=10, temperature=1.3, stop_at_eos=False)
    tokens = assert_cached_equals_full(model, prompt, options)
    assert len(set(tokens)) > 3                                        # a varied sequence, not one token


@pytest.mark.parametrize("overrides", [{}, {"attention_impl": "textbook"}])
@pytest.mark.parametrize("prompt", [[EOS, 7, 9], [EOS, 7, 9, 11, 5, 6, 8, 10]])
def test_decoding_transformer_generates_past_its_context(overrides, prompt):
    """Context 8, 30 tokens: the cache fills and is refreshed with the recent half several times."""
    model = tiny_lm("transformer", context=8, **overrides)
    assert_cached_equals_full(model, prompt, SamplingOptions(max_tokens=30, greedy=True, stop_at_eos=False))
    options = SamplingOptions(max_tokens=30, seed=2, stop_at_eos=False)
    tokens = assert_cached_equals_full(model, prompt, options)
    assert len(set(tokens)) > 3


def test_decoding_transformer_refuses_a_prompt_longer_than_its_context():
    model = tiny_lm("transformer", context=8)
    with pytest.raises(SeqlabError, match="the prompt is 9 tokens.*context of 8"):
        list(generate_ids(model, [EOS] + [7] * 8, SamplingOptions(max_tokens=3, greedy=True)))
    assert len(list(generate_ids(model, [EOS] + [7] * 7, SamplingOptions(max_tokens=3, greedy=True)))) == 3


@pytest.mark.parametrize("arch, overrides", ARCHS)
def test_decoding_generate_goes_past_eos_unless_asked_to_stop(arch, overrides):
    """</s> is a line end: by default generation writes it and goes on to max_tokens; stop_at_eos stops there."""
    model = tiny_lm(arch, **overrides)
    with torch.no_grad():
        model.output.decoder.bias[EOS] = 100.0                          # always predicts </s>
    prompt = [EOS, 7, 9]
    assert list(generate_ids(model, prompt, SamplingOptions(max_tokens=10, greedy=True))) == [EOS] * 10
    assert list(generate_ids(model, prompt, SamplingOptions(max_tokens=10, seed=1))) == [EOS] * 10
    assert list(generate_ids(model, prompt, SamplingOptions(max_tokens=10, greedy=True,
                                                            stop_at_eos=True))) == [EOS]
    assert list(generate_ids(model, prompt, SamplingOptions(max_tokens=10, seed=1, stop_at_eos=True))) == [EOS]
    assert list(generate_ids(model, prompt, SamplingOptions(max_tokens=0, greedy=True))) == []


@pytest.mark.parametrize("arch", ["lstm", "transformer"])
def test_decoding_generate_sampling_is_reproducible_with_a_seed(arch):
    model = tiny_lm(arch)
    options = SamplingOptions(max_tokens=10, seed=3, stop_at_eos=False)
    first = list(generate_ids(model, [EOS, 7], options))
    assert list(generate_ids(model, [EOS, 7], options)) == first
    other_seed = SamplingOptions(max_tokens=10, seed=4, stop_at_eos=False)
    assert list(generate_ids(model, [EOS, 7], other_seed)) != first
    assert set(first).isdisjoint(NEVER)


# ------------------------------------------------------------------------- the decoding contract


LM_ARCHS = [("ffn", {}), ("rnn", {}), ("lstm", {}), ("gru", {}), ("transformer", {}),
            ("transformer", {"norm_position": "pre", "positions": "sinusoidal"})]


@pytest.mark.parametrize("arch, overrides", LM_ARCHS)
def test_decoding_lm_step_by_step_equals_forward(arch, overrides):
    """start(prompt) reads all prompt tokens but the last; each step then gives the next position's
    logits of `forward` over the whole sequence (B = 3 rows at once)."""
    model = tiny_lm(arch, context=16, **overrides).eval()
    sequence = torch.randint(5, VOCAB, (3, 12), generator=torch.Generator().manual_seed(0))
    sequence[:, 0] = EOS
    with torch.no_grad():
        state = None if model.context_length else model.init_state(3)
        full, _ = model(sequence, state)                                        # (B, T, V)
        for prompt_length in (1, 4):
            state, stepped = model.start(sequence[:, :prompt_length]), []
            for t in range(prompt_length - 1, 12):
                logits, state, weights = model.step(sequence[:, t], state)     # (B, V)
                assert weights is None
                stepped.append(logits)
            torch.testing.assert_close(torch.stack(stepped, 1), full[:, prompt_length - 1:], atol=1e-5, rtol=1e-5)


def test_decoding_transformer_lm_steps_past_its_context_as_re_encoding_the_window():
    """Context 8: when the cache is full, `step` re-encodes the recent 4 tokens; each step's logits equal
    a fresh forward pass over the tokens its window holds."""
    model = tiny_lm("transformer", context=8).eval()
    sequence = torch.randint(5, VOCAB, (2, 30), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        state, window = model.start(sequence[:, :3]), sequence[:, :2]
        for t in range(2, 30):
            logits, state, _ = model.step(sequence[:, t], state)
            window = torch.cat([window, sequence[:, t:t + 1]], 1)
            if window.size(1) > 8:
                window = window[:, -4:]
            expected, _ = model(window)                                          # no state: from scratch
            torch.testing.assert_close(logits, expected[:, -1], atol=1e-5, rtol=1e-5)
            assert torch.equal(state.tokens, window)
    assert state.cache.length < 30


@pytest.mark.parametrize("arch, overrides", LM_ARCHS)
def test_decoding_lm_reordered_batch_equals_each_row_alone(arch, overrides):
    """reorder_state(index) makes the state that of rows `index`: decoding a permuted, repeated batch
    greedily (past the transformer's context of 8) gives each row's own decoding."""
    model = tiny_lm(arch, context=8, **overrides).eval()
    prompts = torch.randint(5, VOCAB, (3, 4), generator=torch.Generator().manual_seed(2))
    index = torch.tensor([2, 0, 2, 1])
    block = [BlockTokens()]

    def decoded(prompt: torch.Tensor, reorder: torch.Tensor | None = None) -> list:
        state, tokens = model.start(prompt), prompt[:, -1]
        if reorder is not None:
            state, tokens = model.reorder_state(state, reorder), tokens[reorder]
        steps = itertools.islice(greedy_steps(model, state, tokens, block), 15)
        return [(t.tolist(), lp) for t, lp, _ in steps]

    with torch.no_grad():
        batch = decoded(prompts, index)
        for row, b in enumerate(index.tolist()):
            alone = decoded(prompts[b:b + 1])
            assert [tokens[row] for tokens, _ in batch] == [tokens[0] for tokens, _ in alone]
            torch.testing.assert_close(torch.stack([lp[row] for _, lp in batch]),
                                       torch.stack([lp[0] for _, lp in alone]), atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------------------- beam search


def log_prob(model, context: list[int], tokens: list[int]) -> float:
    """log P(tokens | context) from one forward pass, over the tokens a language model may generate."""
    sequence = torch.tensor([context + tokens])
    with torch.no_grad():
        state = None if model.context_length else model.init_state(1)
        logits, _ = model(sequence, state)                                     # (1, T, V)
    log_probs = torch.log_softmax(blocked_tokens(model)(logits[0]), dim=-1)    # (T, V)
    return sum(float(log_probs[len(context) - 1 + i, token]) for i, token in enumerate(tokens))


@pytest.mark.parametrize("arch", ["ffn", "gru", "transformer"])
def test_decoding_lm_beam_search_finds_the_best_sequence_of_an_exhaustive_search(arch):
    """V = 7 (3 producible tokens: </s>, 5, 6; a language model never generates <unk>), 3 new tokens: a beam of 9
    keeps every prefix of 2, so it finds the most likely of the 27 continuations; greedy finds one no better."""
    torch.manual_seed(3)
    config = dict(arch=arch, vocab_size=7, embedding_size=8, hidden_size=8, num_layers=1, num_heads=2, dropout=0.0,
                  context=4 if arch == "ffn" else 16 if arch == "transformer" else 0)
    model = build_lm(LMConfig(**config)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(0.0, 1.0) if not name.endswith("bias") else p.zero_()
    context = [EOS, 5, UNK]
    scored = {seq: log_prob(model, context, list(seq)) for seq in itertools.product([EOS, 5, 6], repeat=3)}
    best = max(scored, key=scored.get)
    options = SamplingOptions(max_tokens=3, beam=9, stop_at_eos=False)
    (found,) = lm_beam_search(model, context, options)
    assert tuple(found.tokens) == best and not found.finished
    assert found.score == pytest.approx(scored[best], abs=1e-5)
    assert found.normalized == pytest.approx(scored[best] / 3, abs=1e-5)
    assert list(generate_ids(model, context, options)) == list(best)
    greedy = list(generate_ids(model, context, SamplingOptions(max_tokens=3, greedy=True)))
    assert found.score >= scored[tuple(greedy)] - 1e-6
    for beam in (2, 3):
        (narrow,) = lm_beam_search(model, context, SamplingOptions(max_tokens=3, beam=beam))
        assert narrow.score >= scored[tuple(greedy)] - 1e-6
    assert sorted(scored.values(), reverse=True)[0] > sorted(scored.values(), reverse=True)[-1]


@pytest.mark.parametrize("arch, overrides", ARCHS)
def test_decoding_lm_beam_one_equals_greedy(arch, overrides):
    model = tiny_lm(arch, context=8, **overrides)
    prompt = [EOS, 7, 9, 11]
    greedy = list(generate_ids(model, prompt, SamplingOptions(max_tokens=20, greedy=True)))
    (beam,) = lm_beam_search(model, prompt, SamplingOptions(max_tokens=20, beam=1))
    assert beam.tokens == greedy and len(greedy) == 20
    assert beam.score == pytest.approx(log_prob_stepped(model, prompt, greedy), abs=1e-4)
    # a wider beam (not exact: on the window LM a beam of 4 ends below greedy, which 5 passes)
    wider = lm_beam_search(model, prompt, SamplingOptions(max_tokens=20, beam=5, length_penalty=0.0))[0]
    assert wider.score >= beam.score - 1e-5


def log_prob_stepped(model, context: list[int], tokens: list[int]) -> float:
    """The summed log probability of tokens after context, fed one `step` at a time (past any window)."""
    with torch.no_grad():
        state, total, fed = model.start(torch.tensor([context])), 0.0, context[-1]
        for token in tokens:
            logits, state, _ = model.step(torch.tensor([fed]), state)
            total += float(torch.log_softmax(blocked_tokens(model)(logits), dim=-1)[0, token])
            fed = token
    return total


class NumpyStep:
    """A PyTorch language model as the numpy searches' decoder (`seqlab.decoding.numpy_search`), as an ONNX export's
    runtime is one: its logits as arrays, and the ids it never generates (`ExportedLM`'s decoder adds <unk>)."""

    never_generated = (UNK,)

    def __init__(self, model):
        self.model = model

    def step(self, tokens, state):
        logits, state, _ = self.model.step(torch.from_numpy(tokens), state)
        return logits.numpy(), state, None

    def reorder(self, state, index):
        return self.model.reorder_state(state, torch.from_numpy(index))


@pytest.mark.parametrize("arch", ["lstm", "transformer"])
def test_decoding_lm_never_generates_unk_even_where_it_is_the_most_likely(arch):
    """<unk> is no text: no search of a language model chooses it (greedy, sampled, beam search, n samples at once,
    and the numpy searches of the ONNX runtime), though the model makes it the most likely token at every step;
    its scores keep it (the model's probability)."""
    from seqlab.decoding import numpy_search

    model = tiny_lm(arch).eval()
    with torch.no_grad():
        model.output.decoder.bias[UNK] = 6.0                                   # <unk> first after any context
        prompt = torch.tensor([[EOS, 7, 9, 11]])
        logits, _, _ = model.step(prompt[:, -1], model.start(prompt))
    assert int(BlockTokens()(logits).argmax()) == UNK                          # what a search without the block takes
    assert float(torch.log_softmax(logits, dim=-1)[0, UNK]) > math.log(0.5)
    context = prompt[0].tolist()
    made = [list(generate_ids(model, context, SamplingOptions(max_tokens=30, greedy=True))),
            *[list(generate_ids(model, context, SamplingOptions(max_tokens=30, seed=seed, temperature=2.0)))
              for seed in range(3)],
            lm_beam_search(model, context, SamplingOptions(max_tokens=8, beam=3))[0].tokens,
            *sample_ids(model, context, SamplingOptions(max_tokens=30, seed=1, temperature=2.0), 4)]
    with torch.no_grad():
        for options in (SamplingOptions(max_tokens=30, greedy=True), SamplingOptions(max_tokens=30, seed=2),
                        SamplingOptions(max_tokens=8, beam=3)):
            made.append(list(numpy_search.generate_ids(NumpyStep(model), model.start(prompt), context[-1], options)))
    assert all(ids and UNK not in ids for ids in made), made
    assert made[-3] == made[0]                                                 # numpy's greedy is PyTorch's


@pytest.mark.parametrize("arch", ["lstm", "transformer"])
def test_decoding_lm_beam_search_stops_at_eos_only_when_asked(arch):
    model = tiny_lm(arch)
    with torch.no_grad():
        model.output.decoder.bias[EOS] = 100.0                                 # always predicts </s>
    (going_on,) = lm_beam_search(model, [EOS, 7], SamplingOptions(max_tokens=6, beam=3))
    assert going_on.tokens == [EOS] * 6 and not going_on.finished
    (stopped,) = lm_beam_search(model, [EOS, 7], SamplingOptions(max_tokens=6, beam=3, stop_at_eos=True))
    assert stopped.tokens == [] and stopped.finished
    assert list(generate_ids(model, [EOS, 7], SamplingOptions(max_tokens=6, beam=3, stop_at_eos=True))) == [EOS]


def test_decoding_beam_refuses_sampling_options():
    """No option is silently ignored: beam search samples nothing, and only beam search ranks by length."""
    for sampling in ({"temperature": 0.7}, {"top_k": 5}, {"top_p": 0.9}, {"seed": 1}, {"greedy": True}):
        with pytest.raises(SeqlabError, match="--beam 2 searches for the most likely continuation"):
            SamplingOptions(beam=2, **sampling)
    with pytest.raises(SeqlabError, match="--length-penalty ranks the hypotheses of beam search"):
        SamplingOptions(beam=1, length_penalty=0.5)
    assert SamplingOptions(beam=2, length_penalty=0.5).length_penalty == 0.5
    assert math.isclose(SamplingOptions(beam=1, temperature=0.7).temperature, 0.7)


# ------------------------------------------------------------------------- per-token work (issue 19)


@pytest.mark.parametrize("arch", ["rnn", "lstm", "gru"])
def test_decoding_rnn_lm_step_on_cells_equals_the_sequence_kernel(arch):
    """The RNN LMs step on torch's single-step cells; the logits and state equal those of `forward` over one
    position (the sequence kernel, `LanguageModel.step`) at every step, and greedy generation chooses the same
    tokens as a loop over that reference step."""
    from seqlab.models.base import LanguageModel
    model = tiny_lm(arch).eval()
    prompt = torch.tensor([[EOS, 7, 9, 11]])
    block = [blocked_tokens(model)]
    with torch.no_grad():
        state, reference = model.start(prompt), model.start(prompt)
        tokens, expected = prompt[:, -1], []
        for _ in range(40):
            logits, state, _ = model.step(tokens, state)                                  # (1, V)
            want, reference, _ = LanguageModel.step(model, tokens, reference)
            torch.testing.assert_close(logits, want, rtol=1e-5, atol=1e-6)
            tokens = process(want, block).argmax(-1)
            expected.append(int(tokens))
    options = SamplingOptions(max_tokens=40, greedy=True, stop_at_eos=False)
    assert list(generate_ids(model, [EOS, 7, 9, 11], options)) == expected


def test_decoding_block_tokens_leaves_its_input_and_equals_an_indexed_write():
    logits = torch.randn(3, VOCAB, generator=torch.Generator().manual_seed(5))
    original = logits.clone()
    blocked = BlockTokens()(logits)
    expected = logits.clone()
    expected[:, NEVER] = INF
    assert torch.equal(blocked, expected)
    assert torch.equal(logits, original)
    assert BlockTokens()(logits.double()).dtype == torch.float32


@pytest.mark.parametrize("sample", [False, True])
def test_decoding_greedy_steps_without_scores_chooses_the_same_tokens(sample):
    """`scores=False` (generate_ids) skips the log-softmax and yields None for it, nothing else changes."""
    model = tiny_lm("transformer", context=8).eval()
    options = SamplingOptions(temperature=1.3, top_k=10, top_p=0.9)
    processors = processors_for(options, sample)

    def run(scores: bool):
        generator = torch.Generator().manual_seed(3)
        prompt = torch.tensor([[EOS, 7, 9]])
        steps = greedy_steps(model, model.start(prompt), prompt[:, -1], processors, sample, generator, scores=scores)
        return [(int(t), lp) for t, lp, _ in itertools.islice(steps, 20)]

    with torch.no_grad():
        with_scores, without = run(True), run(False)
    assert [t for t, _ in with_scores] == [t for t, _ in without]
    assert all(lp is None for _, lp in without) and all(lp is not None for _, lp in with_scores)


@pytest.mark.parametrize("norm_position", ["post", "pre"])
@pytest.mark.parametrize("activation, bias, impl", [("relu", True, "sdpa"), ("gelu", False, "sdpa"),
                                                    ("gelu", True, "textbook")])
def test_decoding_transformer_step_equals_forward_of_one_token(norm_position, activation, bias, impl):
    """`TransformerLM.step` runs the blocks' `step` (functions and weights gathered once, not the modules):
    every step's logits are those of `forward` of the same token after the same cache, to the last bit, and
    the cache holds the same keys and values; in training mode `step` is `forward` (dropout included)."""
    model = tiny_lm("transformer", context=8, norm_position=norm_position, activation=activation, bias=bias,
                    attention_impl=impl).eval()
    tokens = torch.randint(5, VOCAB, (3, 12), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        state, reference = model.start(tokens[:, :2]), model.start(tokens[:, :2]).cache
        for t in range(1, 8):                        # until the cache is full (the sliding window: tested above)
            logits, state, _ = model.step(tokens[:, t], state)                           # (B, V)
            want, reference = model(tokens[:, t:t + 1], reference)                         # (B, 1, V)
            assert torch.equal(logits, want[:, 0]), t
            assert torch.equal(state.cache.keys, reference.keys) and torch.equal(state.cache.values, reference.values)
        model.train()
        torch.manual_seed(5)
        stepped, _, _ = model.step(tokens[:, 2], model.start(tokens[:, :2]))
        torch.manual_seed(5)
        forward, _ = model(tokens[:, 2:3], model.start(tokens[:, :2]).cache)
        assert torch.equal(stepped, forward[:, 0])


def test_decoding_text_pieces_detokenize_only_the_current_line():
    """`core.text_pieces` detokenizes the line an id joins, not the whole prompt and continuation: the pieces (and
    the text of a whole beam output) are those of detokenizing everything again for each id, line breaks, half
    characters of byte-level BPE and stop_at_eos included."""
    import random

    from seqlab.decoding import core

    def detokenize(ids: list[int]) -> str:
        # 10 + k: the word "wk"; 7 then 8: one character, "é", from two byte tokens (7 alone: "\ufffd")
        lines, words = [], []
        for i in [*ids, EOS]:
            if i == EOS:
                lines.append(" ".join(words).replace("\x07 \x08", "é").replace("\x07", "\ufffd").replace("\x08", ""))
                words = []
            else:
                words.append({7: "\x07", 8: "\x08"}.get(i, f"w{i - 10}"))
        return "\n".join(lines)

    def reference(ids, body, stop_at_eos, whole):
        shown, generated, out = len(detokenize(body)) if body else 0, [], []
        for token in ids:
            if stop_at_eos and token == EOS:
                break
            generated.append(token)
            text = detokenize(body + generated)
            if not whole and not text.endswith("\ufffd") and text[shown:]:
                out.append(text[shown:])
                shown = len(text)
        if whole and generated:
            kept = len(generated)
            while detokenize(body + generated[:kept]).endswith("\ufffd") and kept:   # no half character at the end
                kept -= 1
            out.append(detokenize(body + generated[:kept])[shown:])
        return out

    rng = random.Random(0)
    for _ in range(300):
        body = [rng.choice([EOS, 7, 8, 10, 11, 12]) for _ in range(rng.randint(0, 8))]
        ids = [rng.choice([EOS, 7, 8, 10, 11, 12, 13]) for _ in range(rng.randint(0, 10))]
        for stop_at_eos, whole in itertools.product([False, True], [False, True]):
            got = list(core.text_pieces(ids, body, detokenize, stop_at_eos, whole))
            assert got == reference(ids, body, stop_at_eos, whole), (body, ids, stop_at_eos, whole)


# ------------------------------------------------------------------------- per-token work (issue 47)


def reference_top_p(logits: torch.Tensor, p: float) -> torch.Tensor:
    """TopP as it was written before issue 47: the kept logits of the sorted row, scattered into a row of -inf."""
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = sorted_logits.softmax(dim=-1)
    before = probs.cumsum(dim=-1) - probs
    sorted_logits = sorted_logits.masked_fill(before >= p, INF)
    return torch.full_like(logits, INF).scatter(-1, order, sorted_logits)


@pytest.mark.parametrize("p", [1e-9, 0.3, 0.9, 0.999])
def test_decoding_top_p_masks_in_place_as_the_scatter_of_the_sorted_row(p):
    """TopP marks the dropped tokens in sorted order and masks the row where it stands: the same tensor, bit for
    bit, as scattering the kept sorted logits into a row of -inf, with ties, blocked ids and rows of one token."""
    generator = torch.Generator().manual_seed(7)
    logits = torch.randn(5, VOCAB, generator=generator) * 3
    logits[1] = logits[1].round()                                # ties
    logits[2, NEVER] = INF                                       # blocked ids
    logits[3] = INF
    logits[3, 5] = 1.0                                           # one token left
    assert torch.equal(TopP(p)(logits), reference_top_p(logits, p))


@pytest.mark.parametrize("shape", [(1, VOCAB), (4, VOCAB), (2, 5000)])
def test_decoding_multinomial_draw_equals_torch_multinomial(shape):
    """`multinomial_draw` (the exponential race, without torch.multinomial's check and sync) makes the draws
    torch.multinomial makes from the same generator, draw after draw, rows with zeros included."""
    from seqlab.decoding.sampling import multinomial_draw
    probs = torch.randn(*shape, generator=torch.Generator().manual_seed(1)).mul(2).softmax(dim=-1)
    probs[:, :3] = 0.0
    ours, theirs = torch.Generator().manual_seed(11), torch.Generator().manual_seed(11)
    for _ in range(50):
        expected = torch.multinomial(probs, 1, generator=theirs)[:, 0]
        assert torch.equal(multinomial_draw(probs.clone(), ours), expected)
    assert torch.equal(ours.get_state(), theirs.get_state())


@pytest.mark.parametrize("arch, overrides", [("lstm", {}), ("transformer", {"norm_position": "pre",
                                                                             "activation": "gelu"})])
@pytest.mark.parametrize("options", [dict(greedy=True), dict(top_p=0.9, seed=0),
                                     dict(temperature=0.7, top_k=9, top_p=0.8, seed=3)])
def test_decoding_generate_ids_equal_a_reference_sampler(arch, overrides, options):
    """generate_ids gives the ids of a plain reference loop over `forward` (no step, no cache: the whole window
    re-read for every token, as the sliding window keeps it) with the processors as written before issue 47 and
    torch.multinomial: the per-token work changes nothing that is chosen or drawn, past the context too."""
    model = tiny_lm(arch, context=8, **overrides).eval()
    sampling = SamplingOptions(max_tokens=30, stop_at_eos=False, **options)
    prompt = [EOS, 7, 9]
    blocked = list(blocked_tokens(model).ids)
    generator = torch.Generator().manual_seed(sampling.seed) if sampling.seed is not None else None
    sequence, window, expected = list(prompt), list(prompt[:-1]), []
    with torch.no_grad():
        for _ in range(30):
            window.append(sequence[-1])
            if model.context_length and len(window) > model.context_length:
                window = window[-(model.context_length // 2):]            # what the decoding state keeps
            logits, _ = model(torch.tensor([window if model.context_length else sequence]))
            logits = logits[:, -1].float().clone()                         # (1, V)
            logits[:, blocked] = INF
            if sampling.greedy:
                token = int(logits.argmax(-1))
            else:
                logits = process(logits, [Temperature(sampling.temperature)] if sampling.temperature != 1 else [])
                logits = process(logits, [TopK(sampling.top_k)] if sampling.top_k else [])
                logits = reference_top_p(logits, sampling.top_p)
                token = int(torch.multinomial(logits.softmax(-1), 1, generator=generator))
            expected.append(token)
            sequence.append(token)
    assert list(generate_ids(model, prompt, sampling)) == expected
