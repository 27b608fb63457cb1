"""Decoding: logits filters, token choice, sampling options, and cached generation == full forward passes."""

from __future__ import annotations

import pytest
import torch

from seqlab.data.vocab import BOS, EOS, PAD, SEP, UNK
from seqlab.decoding import SamplingOptions, choose, filter_logits, generate_ids
from seqlab.errors import SeqlabError
from seqlab.models.lm import LMConfig, build_lm

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


# ------------------------------------------------------------------------------------ filter_logits


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
        torch.testing.assert_close(out[:, allowed], logits[:, allowed] / temperature)
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
    """Stands in for the model in `generate_ids` and keeps the last-position logits of every step."""

    def __init__(self, model):
        self.model, self.logits = model, []
        self.context_length = model.context_length

    def eval(self):
        self.model.eval()
        return self

    def init_state(self, batch_size, device=None):
        return self.model.init_state(batch_size, device)

    def step(self, tokens, state):
        logits, state = self.model.step(tokens, state)
        self.logits.append(logits[0, -1])
        return logits, state


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
    assert len(recorder.logits) == options.max_tokens + 1            # the prompt, then one step per token
    for step, (cached, full) in enumerate(zip(recorder.logits[:-1], expected_logits, strict=True)):
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
