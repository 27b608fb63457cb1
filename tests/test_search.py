"""Decoding sequence-to-sequence models (seqlab.decoding.search): greedy, beam search and sampling.

A scripted model whose next-token probabilities depend only on the prefix written so far gives outputs
and scores known by hand (greedy misses the best output, beam search finds it; length normalisation
changes the winner). Tiny models of every architecture check the search's bookkeeping: beam 1 ==
greedy, a padded batch == one sentence at a time, every hypothesis's score (and attention) == the
model's own log probability (and weights) of its tokens, length limits, n-best lists and sampling.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from seqlab.data.vocab import BOS, EOS, PAD, SEP, UNK
from seqlab.decoding.processors import NEVER_GENERATED, BlockTokens
from seqlab.decoding.search import Hypothesis, SearchOptions, beam_search, decode, greedy, greedy_steps
from seqlab.errors import SeqlabError
from seqlab.families.seq2seq.model import ATTENTIONS, RECURRENT, Seq2SeqConfig, build_model

# ------------------------------------------------------------------------------------ a scripted model

A, B, C, D = 5, 6, 7, 8          # ordinary tokens of the scripted model's vocabulary
SCRIPTED_VOCAB = 10              # producible: <unk>, </s> and 5-9, i.e. 7 tokens

# greedy takes A (0.6), but every continuation of A is poor; B (0.4) then </s> (1.0) is the best output
GREEDY_TRAP = {
    (): {A: 0.6, B: 0.4},
    (A,): {A: 0.4, C: 0.35, EOS: 0.25},
    (A, A): {EOS: 1.0},
    (A, C): {EOS: 1.0},
    (B,): {EOS: 1.0},
}
# [A] </s> has the larger sum (log 0.55 > log 0.45); [B, C, D] </s> the larger mean per token
LENGTH_TRAP = {
    (): {A: 0.55, B: 0.45},
    (A,): {EOS: 1.0},
    (B,): {C: 1.0},
    (B, C): {D: 1.0},
    (B, C, D): {EOS: 1.0},
}
NO_EOS = {A: 0.5, B: 0.3, C: 0.2}


class ScriptedModel:
    """The decoding contract (`seqlab.models.base.IncrementalDecoder`, started as a seq2seq model) without a
    network: sentence b reads the table `tables[source[b, 0]]`, which maps the prefix written so far (a tuple
    of ids) to the next token's probabilities ({id: p}); prefixes it does not list get `default`. The state is
    the table of each row and the tokens fed so far (B, t), so reordering it is checked as strictly as a real
    decoder state."""

    start_token = BOS
    attends = False
    training = False

    def __init__(self, tables: dict[int, dict], default: dict[int, float] | None = None,
                 vocab_size: int = SCRIPTED_VOCAB):
        self.tables, self.default, self.vocab_size = tables, default or {EOS: 1.0}, vocab_size

    def eval(self):
        return self

    def train(self, mode: bool = True):
        return self

    def target_room(self, lengths) -> None:
        return None

    def start(self, source: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return source[:, 0].clone(), torch.zeros(source.size(0), 0, dtype=torch.long)   # (B,), (B, 0)

    def reorder_state(self, state, index: torch.Tensor):
        tables, fed = state
        return tables.index_select(0, index), fed.index_select(0, index)

    def step(self, tokens: torch.Tensor, state, need_weights: bool = False):
        tables, fed = state
        fed = torch.cat([fed, tokens[:, None]], dim=1)                          # (B, t + 1)
        logits = torch.full((tokens.size(0), self.vocab_size), float("-inf"))   # (B, V)
        for b, table in enumerate(tables.tolist()):
            prefix = tuple(fed[b, 1:].tolist())                                 # without the start token
            for token, p in self.tables[table].get(prefix, self.default).items():
                logits[b, token] = math.log(p)
        return logits, (tables, fed), None


def scripted_source(*tables: int, lengths: list[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """A right-padded batch whose sentence b reads table `tables[b]`."""
    lengths = lengths or [3] * len(tables)
    source = torch.zeros(len(tables), max(lengths), dtype=torch.long)
    for b, (table, length) in enumerate(zip(tables, lengths, strict=True)):
        source[b, :length] = torch.tensor([table] + [A] * (length - 1))
    return source, torch.tensor(lengths)


def only(hypotheses: list[list[Hypothesis]]) -> list[Hypothesis]:
    assert all(len(h) == 1 for h in hypotheses)
    return [h[0] for h in hypotheses]


def test_search_beam_finds_the_output_greedy_misses():
    model = ScriptedModel({0: GREEDY_TRAP})
    source, lengths = scripted_source(0)
    (best,) = only(decode(model, source, lengths, SearchOptions(beam=1)))
    assert (best.tokens, best.finished) == ([A, A], True)
    assert best.score == pytest.approx(math.log(0.6 * 0.4 * 1.0))
    assert best.normalized == pytest.approx(math.log(0.24) / 3)                 # A A </s>: 3 tokens
    for alpha in (0.0, 1.0):
        (best,) = only(decode(model, source, lengths, SearchOptions(beam=2, length_penalty=alpha)))
        assert (best.tokens, best.finished) == ([B], True)
        assert best.score == pytest.approx(math.log(0.4))
        assert best.normalized == pytest.approx(math.log(0.4) / 2 ** alpha)


def test_search_length_penalty_chooses_between_short_and_long():
    model = ScriptedModel({0: LENGTH_TRAP})
    source, lengths = scripted_source(0)
    (raw,) = only(decode(model, source, lengths, SearchOptions(beam=2, length_penalty=0.0)))
    assert (raw.tokens, raw.score, raw.normalized) == ([A], pytest.approx(math.log(0.55)),
                                                       pytest.approx(math.log(0.55)))
    (mean,) = only(decode(model, source, lengths, SearchOptions(beam=2, length_penalty=1.0)))
    assert (mean.tokens, mean.finished) == ([B, C, D], True)
    assert mean.score == pytest.approx(math.log(0.45))
    assert mean.normalized == pytest.approx(math.log(0.45) / 4)                 # B C D </s>
    both = decode(model, source, lengths, SearchOptions(beam=2, nbest=2, length_penalty=1.0))[0]
    assert [h.tokens for h in both] == [[B, C, D], [A]]
    assert both[1].normalized == pytest.approx(math.log(0.55) / 2)


def test_search_scripted_batch_equals_each_sentence_alone():
    """Sentences that finish at different steps leave the batch; the others' beams must not move."""
    model = ScriptedModel({0: GREEDY_TRAP, 1: LENGTH_TRAP, 2: {}}, default=NO_EOS)
    source, lengths = scripted_source(1, 0, 2, 0, lengths=[4, 2, 1, 3])
    for options in (SearchOptions(beam=1), SearchOptions(beam=2, nbest=2), SearchOptions(beam=3, nbest=3)):
        batch = decode(model, source, lengths, options)
        for b in range(4):
            alone = decode(model, source[b:b + 1, :int(lengths[b])], lengths[b:b + 1], options)[0]
            assert [(h.tokens, h.finished) for h in batch[b]] == [(h.tokens, h.finished) for h in alone]
            assert [h.score for h in batch[b]] == pytest.approx([h.score for h in alone])
    best = only(decode(model, source, lengths, SearchOptions(beam=2)))
    assert [h.tokens for h in best] == [[B, C, D], [B], [A] * 12, [B]]          # sentence 2: 2 x 1 + 10 tokens


# ------------------------------------------------------------------------------------ tiny real models

RNN_ARCHS = [(arch, attention, bidirectional) for arch in RECURRENT for attention in ATTENTIONS
             for bidirectional in (False, True)]
ALL_ARCHS = RNN_ARCHS + [("transformer", "none", False), ("lm", "none", False)]
ATTENDING = [(arch, attention, bi) for arch, attention, bi in ALL_ARCHS if attention != "none" or arch == "transformer"]
NOT_ATTENDING = [(arch, attention, bi) for arch, attention, bi in ALL_ARCHS if (arch, attention, bi) not in ATTENDING]
VOCAB = 20
LENGTHS = torch.tensor([7, 4, 2])


def arch_id(spec) -> str:
    arch, attention, bidirectional = spec
    return f"{arch}-{attention}" + ("-bi" if bidirectional else "")


def tiny_model(arch: str, attention: str = "none", bidirectional: bool = False, eos_bias: float = 0.0,
               **overrides):
    """A seeded tiny model; `eos_bias` is added to the output layer's </s> bias, so that untrained models
    end their outputs at mixed lengths (some finished, some cut at the length limit)."""
    options = dict(arch=arch, attention=attention, bidirectional=bidirectional, embedding_size=16, hidden_size=8,
                   num_layers=2, num_heads=2, ff_size=32, max_positions=64, source_vocab_size=VOCAB,
                   target_vocab_size=VOCAB, dropout=0.0)
    options.update(overrides)
    torch.manual_seed(0)
    model = build_model(Seq2SeqConfig(**options)).eval()
    with torch.no_grad():
        model.output.decoder.bias[EOS] += eos_bias
    return model


def padded_sources(lengths: torch.Tensor = LENGTHS) -> torch.Tensor:
    """Right-padded sources (B, S) of ordinary tokens, 0 beyond each length."""
    source = torch.randint(5, VOCAB, (len(lengths), int(lengths.max())), generator=torch.Generator().manual_seed(0))
    return source.masked_fill(torch.arange(source.size(1))[None, :] >= lengths[:, None], PAD)   # (B, S)


def rescore(model, source: torch.Tensor, hypothesis: Hypothesis):
    """Feed one sentence's hypothesis back through the model one token at a time: its log probability
    (with </s> when it finished) and, for attending models, the weights of each step (n, S)."""
    state = model.start(source[None], torch.tensor([source.size(0)]))
    fed = [model.start_token] + hypothesis.tokens
    wanted = hypothesis.tokens + [EOS] * hypothesis.finished
    total, weights = 0.0, []
    with torch.no_grad():
        for token, target in zip(fed[:len(wanted)], wanted, strict=True):
            logits, state, w = model.step(torch.tensor([token]), state, model.attends)
            logits = logits.float().clone()
            logits[:, list(NEVER_GENERATED)] = float("-inf")
            total += float(torch.log_softmax(logits, dim=-1)[0, target])
            weights.append(w)
    return total, torch.cat(weights) if model.attends and weights else None


@pytest.mark.parametrize("eos_bias", [0.0, 0.4])
@pytest.mark.parametrize("spec", ALL_ARCHS, ids=arch_id)
def test_search_beam_one_equals_greedy(spec, eos_bias):
    model = tiny_model(*spec, eos_bias=eos_bias)
    source = padded_sources()
    options = SearchOptions(beam=1)
    with torch.no_grad():                      # decode() runs them without gradients too
        expected = greedy(model, source, LENGTHS, options)
        found = [hyps[0] for hyps in beam_search(model, source, LENGTHS, options)]
    assert [(h.tokens, h.finished) for h in found] == [(h.tokens, h.finished) for h in expected]
    assert [h.score for h in found] == pytest.approx([h.score for h in expected], abs=1e-4)
    assert [h.normalized for h in found] == pytest.approx([h.normalized for h in expected], abs=1e-4)


@pytest.mark.parametrize("eos_bias", [0.0, 0.4])
@pytest.mark.parametrize("spec", ALL_ARCHS, ids=arch_id)
def test_search_batch_equals_one_sentence_at_a_time(spec, eos_bias):
    model = tiny_model(*spec, eos_bias=eos_bias)
    source = padded_sources()
    for options in (SearchOptions(beam=1), SearchOptions(beam=3, nbest=3)):
        batch = decode(model, source, LENGTHS, options)
        for b, length in enumerate(LENGTHS.tolist()):
            alone = decode(model, source[b:b + 1, :length], LENGTHS[b:b + 1], options)[0]
            assert [(h.tokens, h.finished) for h in batch[b]] == [(h.tokens, h.finished) for h in alone]
            assert [h.score for h in batch[b]] == pytest.approx([h.score for h in alone], abs=1e-4)


@pytest.mark.parametrize("eos_bias", [0.0, 0.4])
@pytest.mark.parametrize("spec", ALL_ARCHS, ids=arch_id)
def test_search_scores_and_attention_are_the_models_own(spec, eos_bias):
    """Every hypothesis of a batched beam search, fed back one token at a time, has the log probability
    it was scored with, the normalised score log p / n^α, and (attending models) the same attention."""
    model = tiny_model(*spec, eos_bias=eos_bias)
    source = padded_sources()
    alpha = 0.7
    for options in (SearchOptions(beam=1, length_penalty=alpha), SearchOptions(beam=3, nbest=3, length_penalty=alpha)):
        for b, hypotheses in enumerate(decode(model, source, LENGTHS, options, need_weights=True)):
            for h in hypotheses:
                score, weights = rescore(model, source[b, :int(LENGTHS[b])], h)
                n = len(h.tokens) + h.finished
                assert h.score == pytest.approx(score, abs=1e-4)
                assert h.normalized == pytest.approx(score / n ** alpha, abs=1e-4)
                if model.attends:
                    torch.testing.assert_close(h.attention, weights, atol=1e-5, rtol=1e-4)


# ------------------------------------------------------------------------------------ length limits


def test_search_scripted_model_without_eos_stops_at_the_limit():
    model = ScriptedModel({0: {}}, default=NO_EOS)
    source, lengths = scripted_source(0, 0, lengths=[3, 1])
    for beam in (1, 2):
        for h in only(decode(model, source, lengths, SearchOptions(beam=beam, max_length=5))):
            assert (h.tokens, h.finished) == ([A] * 5, False)
            assert h.score == pytest.approx(5 * math.log(0.5))
        hypotheses = decode(model, source, lengths, SearchOptions(beam=beam, nbest=beam))
        assert [[len(h.tokens) for h in hyps] for hyps in hypotheses] == [[16] * beam, [12] * beam]   # 2 x S + 10
        assert not any(h.finished for hyps in hypotheses for h in hyps)


def test_search_impossible_hypotheses_are_never_returned():
    """Only one output has any probability: the beam's other slots hold log p = -inf extensions, which
    must neither finish (by </s> or at the limit) nor be listed."""
    model = ScriptedModel({0: {}}, default={A: 1.0})
    source, lengths = scripted_source(0)
    for options in (SearchOptions(beam=2, nbest=2, max_length=3), SearchOptions(beam=4, nbest=4, max_length=3)):
        (hypotheses,) = decode(model, source, lengths, options)
        assert [(h.tokens, h.score, h.finished) for h in hypotheses] == [([A] * 3, 0.0, False)]


def without_eos(model):
    with torch.no_grad():
        model.output.decoder.bias[EOS] = float("-inf")
    return model


@pytest.mark.parametrize("spec", [("lstm", "dot", True), ("transformer", "none", False), ("lm", "none", False)],
                         ids=arch_id)
@pytest.mark.parametrize("beam", [1, 3])
def test_search_model_without_eos_stops_at_the_limit(spec, beam):
    model = without_eos(tiny_model(*spec))
    source = padded_sources()
    for options, expected in ((SearchOptions(beam=beam, nbest=beam, max_length=5), [5, 5, 5]),
                              (SearchOptions(beam=beam, nbest=beam), [24, 18, 14])):     # 2 x S + 10
        hypotheses = decode(model, source, LENGTHS, options)
        assert [[len(h.tokens) for h in hyps] for hyps in hypotheses] == [[n] * beam for n in expected]
        assert not any(h.finished for hyps in hypotheses for h in hyps)


@pytest.mark.parametrize("arch, room", [("transformer", lambda n: 16), ("lm", lambda n: 16 - n)],
                         ids=["transformer", "lm"])
@pytest.mark.parametrize("beam", [1, 3])
def test_search_limit_stays_within_what_the_decoder_holds(arch, room, beam):
    """max_positions 16: the transformer decoder holds 16 outputs, the lm 16 minus the source; 2 x S + 10
    would ask for more than either holds (they raise past it)."""
    model = without_eos(tiny_model(arch, max_positions=16))
    source = padded_sources()
    for b, n in enumerate(LENGTHS.tolist()):
        (best,) = only(decode(model, source[b:b + 1, :n], LENGTHS[b:b + 1], SearchOptions(beam=beam)))
        assert len(best.tokens) == min(room(n), 2 * n + 10)


def test_search_lm_limit_does_not_depend_on_the_other_sentences_of_the_batch():
    model = without_eos(tiny_model("lm", max_positions=16))
    source = padded_sources()
    batch = only(decode(model, source, LENGTHS))
    alone = [only(decode(model, source[b:b + 1, :n], LENGTHS[b:b + 1]))[0] for b, n in enumerate(LENGTHS.tolist())]
    assert [len(h.tokens) for h in batch] == [len(h.tokens) for h in alone] == [9, 12, 14]


# ------------------------------------------------------------------------------------ options and n-best


def test_search_beam_larger_than_the_producible_tokens_is_refused():
    source, lengths = scripted_source(0)
    model = ScriptedModel({0: GREEDY_TRAP})
    producible = SCRIPTED_VOCAB - len(NEVER_GENERATED)
    assert len(only(decode(model, source, lengths, SearchOptions(beam=producible)))) == 1
    with pytest.raises(SeqlabError, match="beam"):
        decode(model, source, lengths, SearchOptions(beam=producible + 1))
    real = tiny_model("gru")
    assert len(decode(real, padded_sources(), LENGTHS, SearchOptions(beam=VOCAB - 3))) == 3
    with pytest.raises(SeqlabError, match="beam"):
        decode(real, padded_sources(), LENGTHS, SearchOptions(beam=VOCAB - 2))


@pytest.mark.parametrize("options", [dict(beam=0), dict(beam=2, nbest=3), dict(nbest=0), dict(sample=True, beam=2),
                                     dict(max_length=-1), dict(temperature=0.0), dict(top_k=-1), dict(top_p=0.0)],
                         ids=str)
def test_search_invalid_options_are_refused(options):
    with pytest.raises(SeqlabError):
        SearchOptions(**options)


@pytest.mark.parametrize("spec", [("lstm", "additive", False), ("transformer", "none", False), ("lm", "none", False)],
                         ids=arch_id)
def test_search_nbest_lists_distinct_hypotheses_best_first(spec):
    model = tiny_model(*spec, eos_bias=0.4)
    source = padded_sources()
    best = only(decode(model, source, LENGTHS, SearchOptions(beam=4)))
    for b, hypotheses in enumerate(decode(model, source, LENGTHS, SearchOptions(beam=4, nbest=3))):
        assert len(hypotheses) == 3
        normalized = [h.normalized for h in hypotheses]
        assert normalized == sorted(normalized, reverse=True)
        assert len({(tuple(h.tokens), h.finished) for h in hypotheses}) == 3
        assert (hypotheses[0].tokens, hypotheses[0].score) == (best[b].tokens, pytest.approx(best[b].score))
        assert not any(set(h.tokens) & {PAD, BOS, SEP, EOS} for h in hypotheses)


# ------------------------------------------------------------------------------------ attention


@pytest.mark.parametrize("spec", ATTENDING, ids=arch_id)
def test_search_attention_covers_each_output_step_and_real_source_position(spec):
    model = tiny_model(*spec, eos_bias=0.4)
    source = padded_sources()
    for options in (SearchOptions(beam=1), SearchOptions(beam=3, nbest=3)):
        weighted = decode(model, source, LENGTHS, options, need_weights=True)
        for b, hypotheses in enumerate(weighted):
            for h in hypotheses:
                assert h.attention.shape == (len(h.tokens) + h.finished, int(LENGTHS[b]))
                torch.testing.assert_close(h.attention.sum(dim=-1), torch.ones(h.attention.size(0)),
                                           atol=1e-5, rtol=0)
                assert (h.attention >= 0).all()
        without = decode(model, source, LENGTHS, options)        # asking for the weights changes no output
        assert [[h.tokens for h in hyps] for hyps in without] == [[h.tokens for h in hyps] for hyps in weighted]


@pytest.mark.parametrize("spec", NOT_ATTENDING, ids=arch_id)
def test_search_models_without_attention_return_none(spec):
    model = tiny_model(*spec, eos_bias=0.4)
    for options in (SearchOptions(beam=1), SearchOptions(beam=3, nbest=3)):
        hypotheses = decode(model, padded_sources(), LENGTHS, options, need_weights=True)
        assert all(h.attention is None for hyps in hypotheses for h in hyps)


# ------------------------------------------------------------------------------------ sampling


@pytest.mark.parametrize("spec", [("gru", "dot", True), ("transformer", "none", False), ("lm", "none", False)],
                         ids=arch_id)
def test_search_sampling_is_reproducible_and_top_k_one_is_greedy(spec):
    model = tiny_model(*spec, eos_bias=0.4)
    source = padded_sources()

    def tokens(options: SearchOptions) -> list[list[int]]:
        return [h.tokens for h in only(decode(model, source, LENGTHS, options))]

    draws = [tokens(SearchOptions(sample=True, seed=seed)) for seed in range(5)]
    assert draws == [tokens(SearchOptions(sample=True, seed=seed)) for seed in range(5)]
    assert len({str(d) for d in draws}) > 1                                    # the seed matters
    expected = only(decode(model, source, LENGTHS, SearchOptions()))
    for temperature in (1.0, 3.0):
        found = only(decode(model, source, LENGTHS, SearchOptions(sample=True, top_k=1, temperature=temperature,
                                                                  seed=1)))
        assert [h.tokens for h in found] == [h.tokens for h in expected]
        assert [h.score for h in found] == pytest.approx([h.score for h in expected])


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_search_sampling_draws_from_the_models_distribution(temperature):
    model = ScriptedModel({0: GREEDY_TRAP})
    source, lengths = scripted_source(*[0] * 2000)
    options = SearchOptions(sample=True, seed=0, temperature=temperature)
    outputs = [tuple(h.tokens) for h in only(decode(model, source, lengths, options))]
    share = {output: outputs.count(output) / len(outputs) for output in set(outputs)}
    assert set(share) == {(A, A), (A, C), (A,), (B,)}
    assert UNK not in {t for output in outputs for t in output}
    first_a = 0.6 ** (1 / temperature) / (0.6 ** (1 / temperature) + 0.4 ** (1 / temperature))   # softmax(log p / T)
    assert share[(B,)] == pytest.approx(1 - first_a, abs=0.04)
    if temperature == 1.0:
        expected = {(A, A): 0.6 * 0.4, (A, C): 0.6 * 0.35, (A,): 0.6 * 0.25, (B,): 0.4}
        for output, p in expected.items():
            assert share[output] == pytest.approx(p, abs=0.04)


@pytest.mark.parametrize("spec", ALL_ARCHS, ids=arch_id)
def test_search_reordered_state_equals_each_sentence_alone(spec):
    """reorder_state(index) reorders the decoder's state and the encoder's memory together: greedy steps
    on a permuted, repeated batch give each sentence's own logits."""
    model = tiny_model(*spec, eos_bias=0.4)
    source, index = padded_sources(), torch.tensor([2, 0, 2, 1])
    block = [BlockTokens()]

    def stepped(source, lengths, reorder=None):
        state = model.start(source, lengths)
        tokens = torch.full((source.size(0),), model.start_token)
        if reorder is not None:
            state, tokens = model.reorder_state(state, reorder), tokens[reorder]
        return [(t, lp) for t, lp, _ in itertools.islice(greedy_steps(model, state, tokens, block), 6)]

    with torch.no_grad():
        batch = stepped(source, LENGTHS, index)
        for row, b in enumerate(index.tolist()):
            n = int(LENGTHS[b])
            alone = stepped(source[b:b + 1, :n], LENGTHS[b:b + 1])
            assert [int(t[row]) for t, _ in batch] == [int(t[0]) for t, _ in alone]
            torch.testing.assert_close(torch.stack([lp[row] for _, lp in batch]),
                                       torch.stack([lp[0] for _, lp in alone]), atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------------------------ the beam's tree (trace)


@pytest.mark.parametrize("spec", [("gru", "dot", True), ("transformer", "none", False), ("lm", "none", False)],
                         ids=arch_id)
def test_search_trace_is_the_beams_tree(spec):
    """`decode(..., trace=[])` keeps the tree `seqlab explore` draws: each node's score is its parent's plus the
    log probability of its token after the parent's prefix (the prefix fed back through the model); each step
    of a live sentence keeps K candidates; each finished entry's chain of nodes spells its hypothesis (with the
    </s> that ended it), and ranked by the normalised score the entries are the n-best `decode` returns."""
    model = tiny_model(*spec, eos_bias=0.4)
    source = padded_sources()
    K = 3
    options = SearchOptions(beam=K, nbest=K, max_length=6, length_penalty=0.7)
    trace: list[dict] = []
    found = decode(model, source, LENGTHS, options, trace=trace)
    assert [[(h.tokens, h.score) for h in hyps] for hyps in found] == \
        [[(h.tokens, h.score) for h in hyps] for hyps in decode(model, source, LENGTHS, options)]   # unchanged
    nodes = {entry["id"]: entry for entry in trace if "id" in entry}

    def chain(node: dict) -> list[int]:
        ids = []
        while node is not None:
            ids.append(node["token"])
            node = nodes.get(node["parent"]) if node["parent"] is not None else None
        return ids[::-1]

    for node in nodes.values():
        b, ids = node["sentence"], chain(node)
        assert len(ids) == node["step"] + 1 and EOS not in ids[:-1]
        ended = ids[-1] == EOS
        prefix = Hypothesis(ids[:-1] if ended else ids, 0.0, 0.0, ended)
        score, _ = rescore(model, source[b, :int(LENGTHS[b])], prefix)
        assert node["score"] == pytest.approx(score, abs=1e-4)
        assert node["status"] in ("kept", "ended", "dropped", "late")
        assert node["status"] != "kept" if ended else node["status"] not in ("ended", "late")   # </s> ends, or drops
    steps: dict[tuple[int, int], int] = {}
    for node in nodes.values():
        steps[node["sentence"], node["step"]] = steps.get((node["sentence"], node["step"]), 0) + \
            (node["status"] == "kept")
    assert set(steps.values()) == {K}
    for b, hypotheses in enumerate(found):
        entries = sorted((e for e in trace if "finished" in e and e["sentence"] == b), key=lambda e: -e["normalized"])
        assert len(entries) == K
        for entry, h in zip(entries, hypotheses, strict=True):
            assert chain(nodes[entry["finished"]]) == h.tokens + [EOS] * h.finished
            assert (entry["score"], entry["normalized"], entry["ended"]) == (h.score, h.normalized, h.finished)


def test_search_trace_of_a_beam_of_one_is_greedy_decoding():
    """A trace asks for the beam's bookkeeping even at width 1: the output is greedy decoding's."""
    model = tiny_model("gru", "dot", eos_bias=0.4)
    source = padded_sources()
    trace: list[dict] = []
    traced = decode(model, source, LENGTHS, SearchOptions(beam=1), trace=trace)
    greedy_ones = decode(model, source, LENGTHS, SearchOptions(beam=1))
    assert [h[0].tokens for h in traced] == [h[0].tokens for h in greedy_ones]
    assert sum("finished" in e for e in trace) == len(LENGTHS)
