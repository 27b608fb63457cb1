"""Viterbi, one rule (`seqlab.decoding.viterbi`): the PyTorch CRF, the numpy runtime of the ONNX export and the
program in an export's README give the same paths and the same scores, bit for bit, on random lattices with
ties, one-token sentences, padding and forbidden transitions; the path is the best by enumeration."""

import itertools
import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from seqlab.decoding.viterbi import NUMPY, viterbi
from seqlab.families.tagger.graphs import example
from seqlab.nn.crf import CRF, FORBIDDEN, TorchLattice


def lattices(count: int, seed: int = 0):
    """Random (emissions (B, T, K), lengths (B,), transitions, start, end) in float64: every other one of small
    integers (ties everywhere), some with forbidden transitions; the first sentence fills T, others are padded."""
    rng = np.random.default_rng(seed)
    for case in range(count):
        K, B, T = int(rng.integers(1, 6)), int(rng.integers(1, 5)), int(rng.integers(1, 8))
        if case % 2 == 0:
            def draw(*shape):
                return rng.integers(0, 3, shape).astype(np.float64)
        else:
            def draw(*shape):
                return rng.standard_normal(shape)
        emissions, transitions, start, end = draw(B, T, K), draw(K, K), draw(K), draw(K)
        if case % 3 == 0:
            transitions[rng.random((K, K)) < 0.3] += FORBIDDEN
        lengths = rng.integers(1, T + 1, B)
        lengths[0] = T
        yield emissions, lengths, transitions, start, end


def readme_viterbi(tmp_path, emissions: np.ndarray, transitions, start, end) -> tuple[list[int], float]:
    """The Viterbi lines of a CRF tagger's README program, run on one sentence's emissions (T, K) with crf.json
    written beside it: its tags and the best path's score."""
    (tmp_path / "crf.json").write_text(json.dumps({"transitions": transitions.tolist(), "start": start.tolist(),
                                                   "end": end.tolist()}))
    lines = example(SimpleNamespace(lowercase_fallback=False, chars=None, max_word_chars=0), crf=True).splitlines()
    first = next(k for k, line in enumerate(lines) if line.startswith("crf = "))
    last = lines.index("tags.reverse()")
    program = "\n".join(lines[first:last + 1]).replace('open("crf.json")', f"open({str(tmp_path / 'crf.json')!r})")
    scope = {"np": np, "json": json, "emissions": emissions}
    exec(program, scope)
    return scope["tags"], float((scope["score"] + scope["crf"]["end"]).max())


def test_viterbi_torch_numpy_and_readme_program_agree_on_random_lattices(tmp_path):
    for emissions, lengths, transitions, start, end in lattices(120):
        B, T, K = emissions.shape
        mask = np.arange(T)[None, :] < lengths[:, None]                          # (B, T)
        crf = CRF(K).double()
        with torch.no_grad():
            for parameter, value in ((crf.transitions, transitions), (crf.start, start), (crf.end, end)):
                parameter.copy_(torch.from_numpy(value))
        decoded = crf.decode(torch.from_numpy(emissions), torch.from_numpy(mask)).numpy()
        tensors = [torch.from_numpy(x) for x in (emissions, mask, transitions, start, end)]
        torch_path, torch_score = viterbi(*tensors, TorchLattice(torch.device("cpu")))
        numpy_path, numpy_score = viterbi(emissions, mask, transitions, start, end, NUMPY)
        assert np.array_equal(decoded, numpy_path) and np.array_equal(torch_path.numpy(), numpy_path)
        assert np.array_equal(torch_score.numpy(), numpy_score)                # bit for bit
        assert not numpy_path[~mask].any()                                       # padding holds 0
        for b, n in enumerate(lengths.tolist()):
            alone, alone_score = viterbi(emissions[b:b + 1, :n], np.ones((1, n), bool), transitions, start, end,
                                         NUMPY)
            assert alone[0].tolist() == numpy_path[b, :n].tolist() and alone_score[0] == numpy_score[b]
            tags, score = readme_viterbi(tmp_path, emissions[b, :n], transitions, start, end)
            assert tags == numpy_path[b, :n].tolist() and score == numpy_score[b]


def test_viterbi_path_is_the_best_by_enumeration():
    for emissions, lengths, transitions, start, end in lattices(25, seed=1):
        K = emissions.shape[2]
        mask = np.arange(emissions.shape[1])[None, :] < lengths[:, None]
        paths, scores = viterbi(emissions, mask, transitions, start, end, NUMPY)
        for b, n in enumerate(lengths.tolist()):
            def total(tags, e=emissions[b], A=transitions, first=start, last=end):
                return (first[tags[0]] + sum(e[t, k] for t, k in enumerate(tags))
                        + sum(A[i, j] for i, j in itertools.pairwise(tags)) + last[tags[-1]])
            best = max(total(tags) for tags in itertools.product(range(K), repeat=n))
            assert total(paths[b, :n].tolist()) == pytest.approx(best, abs=1e-9)
            assert scores[b] == pytest.approx(best, abs=1e-9)


def test_viterbi_in_windows_gives_the_same_paths():
    """Cut into windows of steps (`core.slices`, as on a server's inference thread), the same paths and scores."""
    from seqlab.decoding import core
    rng = np.random.default_rng(5)
    emissions, lengths = rng.standard_normal((3, 30, 4)), np.array([30, 1, 17])
    transitions, start, end = rng.standard_normal((4, 4)), rng.standard_normal(4), rng.standard_normal(4)
    mask = np.arange(30)[None, :] < lengths[:, None]
    whole = viterbi(emissions, mask, transitions, start, end, NUMPY)
    stops = []
    core.set_checkpoint(lambda: stops.append(None))
    core.set_slice_seconds(1e-9, first=1)
    try:
        windowed = viterbi(emissions, mask, transitions, start, end, NUMPY, pace="test")
    finally:
        core.set_checkpoint(None)
        core.set_slice_seconds(0)
    assert len(stops) > 20
    assert np.array_equal(whole[0], windowed[0]) and np.array_equal(whole[1], windowed[1])
