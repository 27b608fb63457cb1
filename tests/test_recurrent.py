"""`seqlab.nn.recurrent.RecurrentStack` read in windows of time steps on a server's inference thread
(`RecurrentStack.windowed`): the states and final states of the one pass."""

from __future__ import annotations

import pytest
import torch

from seqlab.decoding import core
from seqlab.nn.recurrent import RecurrentStack


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_recurrent_windows_give_the_one_pass(cell, bidirectional):
    torch.manual_seed(0)
    stack = RecurrentStack(cell, 12, 24, 2, bidirectional=bidirectional).eval()
    x = torch.randn(7, 50, 12)                                              # (B, T, I)
    lengths = torch.tensor([50, 3, 17, 1, 50, 29, 8])
    stops = []
    with torch.no_grad():
        for given in (None, lengths):
            whole, whole_final = stack(x, lengths=given)
            core.set_checkpoint(lambda: stops.append(None))
            core.set_slice_seconds(1e-9, first=1)                           # the smallest windows
            try:
                cut, cut_final = stack(x, lengths=given)
            finally:
                core.set_checkpoint(None)
                core.set_slice_seconds(0)
            finals = zip(whole_final, cut_final, strict=True) if cell == "lstm" else [(whole_final, cut_final)]
            if given is None:              # the same rows at every step: equal (MKL's AVX2 path, an AMD CPU's,
                assert torch.allclose(whole, cut, atol=1e-6, rtol=0)       # rounds W x by the steps' count)
                assert all(torch.allclose(a, b, atol=1e-6, rtol=0) for a, b in finals)
            else:                                                           # packed: rounding (the fused kernel
                assert torch.allclose(whole, cut, atol=1e-6)                # takes steps of few rows another way)
                assert all(torch.allclose(a, b, atol=1e-6) for a, b in finals)
                assert cut[1, 3:].eq(0).all()                               # padding stays zero
    assert len(stops) > 50                                                  # window by window
