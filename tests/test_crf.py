"""CRF: forward-algorithm log Z and Viterbi equal to brute-force enumeration; padding invariance;
constrained transitions never decode an invalid IOB sequence; the loss trains."""

import itertools

import pytest
import torch

from seqlab.data.tags import allowed_transitions, convert, invalid_positions
from seqlab.nn.crf import CRF


def random_crf(num_tags, seed=0, **constraints):
    torch.manual_seed(seed)
    crf = CRF(num_tags, **constraints).double()
    with torch.no_grad():
        for p in (crf.transitions, crf.start, crf.end):
            p.normal_()
    return crf


@torch.no_grad()
def brute_force(crf, emissions, length):
    """Every tag sequence's score, enumerated: (log Z, best sequence)."""
    scores = {}
    mask = torch.ones(1, length, dtype=torch.bool)
    for tags in itertools.product(range(crf.num_tags), repeat=length):
        scores[tags] = float(crf.score(emissions[None, :length], torch.tensor([tags]), mask))
    log_z = torch.logsumexp(torch.tensor(list(scores.values()), dtype=torch.float64), 0)
    return float(log_z), list(max(scores, key=scores.get))


def test_crf_log_partition_and_viterbi_equal_brute_force():
    crf = random_crf(3)
    emissions = torch.randn(3, 5, 3, dtype=torch.float64)
    lengths = torch.tensor([5, 3, 1])
    mask = torch.arange(5)[None, :] < lengths[:, None]
    log_z = crf.log_partition(emissions, mask).detach()
    paths = crf.decode(emissions, mask)
    for b, length in enumerate(lengths.tolist()):
        expected_z, expected_path = brute_force(crf, emissions[b], length)
        assert float(log_z[b]) == pytest.approx(expected_z, abs=1e-9)
        assert paths[b, :length].tolist() == expected_path
        assert paths[b, length:].eq(0).all()


@torch.no_grad()
def test_crf_marginals_equal_brute_force_and_sum_to_one():
    crf = random_crf(3, seed=2)
    emissions = torch.randn(2, 4, 3, dtype=torch.float64)
    lengths = torch.tensor([4, 2])
    mask = torch.arange(4)[None, :] < lengths[:, None]
    marginals = crf.marginals(emissions, mask)                              # (B, T, K)
    for b, length in enumerate(lengths.tolist()):
        expected = torch.zeros(length, 3, dtype=torch.float64)
        log_z, _ = brute_force(crf, emissions[b], length)
        for tags in itertools.product(range(3), repeat=length):
            s = crf.score(emissions[None, b, :length], torch.tensor([tags]), torch.ones(1, length, dtype=torch.bool))
            for t, k in enumerate(tags):
                expected[t, k] += torch.exp(s[0] - log_z)
        assert torch.allclose(marginals[b, :length], expected, atol=1e-9)
        assert torch.allclose(marginals[b, :length].sum(-1), torch.ones(length, dtype=torch.float64))
        assert marginals[b, length:].eq(0).all()


def test_crf_padding_never_changes_a_sentence():
    crf = random_crf(4, seed=1)
    emissions = torch.randn(1, 4, 4, dtype=torch.float64)
    tags = torch.tensor([[1, 2, 0, 3]])
    short = crf.nll(emissions, tags, torch.ones(1, 4, dtype=torch.bool))
    padded_emissions = torch.cat([emissions, torch.randn(1, 3, 4, dtype=torch.float64)], 1)
    padded_tags = torch.cat([tags, torch.tensor([[2, 2, 1]])], 1)
    mask = torch.tensor([[True] * 4 + [False] * 3])
    assert crf.nll(padded_emissions, padded_tags, mask).item() == pytest.approx(short.item(), abs=1e-12)
    assert crf.decode(padded_emissions, mask)[0, :4].tolist() == crf.decode(emissions, mask[:, :4])[0].tolist()


@pytest.mark.parametrize("scheme", ["iob1", "iob2", "bioes"])
def test_crf_constraints_never_decode_an_invalid_sequence(scheme):
    labels = sorted({tag for tags in ([
        convert(["B-PER", "I-PER", "O", "B-LOC"], scheme), convert(["B-LOC", "I-LOC", "I-LOC", "B-LOC"], scheme),
        convert(["B-PER", "B-PER", "O", "B-PER"], scheme)]) for tag in tags} | {"O"})
    allowed, start, end = allowed_transitions(labels, scheme)
    crf = random_crf(len(labels), seed=2, allowed=torch.tensor(allowed), allowed_start=torch.tensor(start),
                     allowed_end=torch.tensor(end))
    torch.manual_seed(3)
    emissions = 3 * torch.randn(64, 7, len(labels), dtype=torch.float64)    # strong, random evidence
    paths = crf.decode(emissions, torch.ones(64, 7, dtype=torch.bool))
    for path in paths.tolist():
        assert invalid_positions([labels[i] for i in path], scheme) == []


def test_crf_nll_trains_to_the_gold_tags():
    torch.manual_seed(0)
    crf = CRF(3)
    emissions = torch.randn(2, 6, 3, requires_grad=True)
    tags = torch.tensor([[0, 1, 1, 2, 0, 0], [2, 2, 1, 0, 0, 0]])
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    optimizer = torch.optim.Adam([emissions, *crf.parameters()], lr=0.1)
    for _ in range(200):
        optimizer.zero_grad()
        loss = crf.nll(emissions, tags, mask).sum()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.05
    assert torch.equal(crf.decode(emissions, mask) * mask, tags * mask)


def test_crf_in_windows_on_a_server_thread_gives_the_same_tags_and_marginals():
    """On a server's inference thread the recursions run a window of time steps at a time (`core.slices`), a
    checkpoint between two: the same arithmetic, so the same figures exactly."""
    from seqlab.decoding import core
    torch.manual_seed(3)
    crf = CRF(5)
    with torch.no_grad():
        for p in crf.parameters():
            p.normal_()
    emissions = torch.randn(3, 40, 5)
    mask = torch.arange(40)[None, :] < torch.tensor([40, 7, 23])[:, None]
    whole = crf.decode(emissions, mask), crf.marginals(emissions, mask)
    stops = []
    core.set_checkpoint(lambda: stops.append(None))
    core.set_slice_seconds(1e-9, first=1)
    try:
        sliced = crf.decode(emissions, mask), crf.marginals(emissions, mask)
    finally:
        core.set_checkpoint(None)
        core.set_slice_seconds(0)
    assert len(stops) > 30                                   # it did yield, window by window
    assert torch.equal(whole[0], sliced[0]) and torch.equal(whole[1], sliced[1])
