"""The fused output layer + cross-entropy (seqlab.nn.fused_output) equals the plain path: F.cross_entropy on
hidden @ W^T + b, summed, with its count; and it never holds an (N, V) tensor."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from seqlab.data.vocab import PAD
from seqlab.errors import SeqlabError
from seqlab.nn.fused_output import default_chunk_size, linear_cross_entropy, should_fuse
from seqlab.training.devices import cpu_supports_bf16

N, D, V = 37, 16, 101
TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}


def problem(rows: int = N, width: int = D, vocab_size: int = V, padding: int = 0, bias: bool = True,
            dtype=torch.float32, seed: int = 0):
    """Well-scaled random inputs: hidden (N, D), weight (V, D), bias (V,) or None, targets (N,) with
    `padding` rows set to PAD."""
    generator = torch.Generator().manual_seed(seed)
    hidden = torch.randn(rows, width, generator=generator, dtype=dtype)                        # (N, D)
    weight = torch.randn(vocab_size, width, generator=generator, dtype=dtype) / width ** 0.5   # (V, D)
    bias_ = torch.randn(vocab_size, generator=generator, dtype=dtype) * 0.1 if bias else None  # (V,)
    targets = torch.randint(1, vocab_size, (rows,), generator=generator)                       # (N,)
    targets[torch.randperm(rows, generator=generator)[:padding]] = PAD
    return hidden, weight, bias_, targets


def run(fused: bool, hidden, weight, bias, targets, **options):
    """(loss_sum, count, grads of hidden, weight and bias) of one path, on fresh leaf copies of the inputs."""
    leaves = [t.detach().clone().requires_grad_() if t is not None else None for t in (hidden, weight, bias)]
    h, w, b = leaves
    if fused:
        loss_sum, count = linear_cross_entropy(h, w, b, targets, **options)
    else:
        chunk_size = options.pop("chunk_size", None)
        assert chunk_size is None or chunk_size > 0
        ignore_index = options.pop("ignore_index", PAD)
        logits = h @ w.T + (b if b is not None else 0)                                        # (N, V)
        loss_sum = F.cross_entropy(logits, targets, ignore_index=ignore_index, reduction="sum", **options)
        count = (targets != ignore_index).sum()
    loss_sum.backward()
    return loss_sum.detach(), count, [t.grad if t is not None else None for t in leaves]


def assert_same(fused, plain):
    (loss_f, count_f, grads_f), (loss_p, count_p, grads_p) = fused, plain
    torch.testing.assert_close(loss_f, loss_p, **TOLERANCE)
    assert count_f.dtype == torch.int64 and count_f.dim() == 0 and int(count_f) == int(count_p)
    for grad_f, grad_p in zip(grads_f, grads_p, strict=True):
        if grad_p is None:
            assert grad_f is None
        else:
            torch.testing.assert_close(grad_f, grad_p, **TOLERANCE)


@pytest.mark.parametrize("chunk_size", [1, 5, 8, 16, N - 1, N, N + 20, None])
def test_fused_output_equals_plain_at_chunk_sizes(chunk_size):
    inputs = problem()
    assert_same(run(True, *inputs, chunk_size=chunk_size), run(False, *inputs))


@pytest.mark.parametrize("chunk_size", [4, 64])
def test_fused_output_ignores_padding_rows(chunk_size):
    inputs = problem(padding=11)
    fused = run(True, *inputs, chunk_size=chunk_size)
    assert_same(fused, run(False, *inputs))
    assert int(fused[1]) == N - 11
    padded = inputs[3] == PAD
    assert torch.equal(fused[2][0][padded], torch.zeros(11, D))            # no gradient into padding rows


def test_fused_output_other_ignore_index():
    hidden, weight, bias, targets = problem()
    targets[:6] = -100
    inputs = (hidden, weight, bias, targets)
    assert_same(run(True, *inputs, ignore_index=-100, chunk_size=8), run(False, *inputs, ignore_index=-100))


def test_fused_output_all_rows_ignored():
    inputs = problem(padding=N)
    fused = run(True, *inputs, chunk_size=8)
    assert_same(fused, run(False, *inputs))
    loss_sum, count, grads = fused
    assert float(loss_sum) == 0.0 and int(count) == 0
    assert all(torch.count_nonzero(grad) == 0 for grad in grads)


@pytest.mark.parametrize("chunk_size", [6, None])
def test_fused_output_label_smoothing(chunk_size):
    inputs = problem(padding=5)
    assert_same(run(True, *inputs, label_smoothing=0.1, chunk_size=chunk_size),
                run(False, *inputs, label_smoothing=0.1))


def test_fused_output_without_bias():
    inputs = problem(bias=False, padding=3)
    assert_same(run(True, *inputs, chunk_size=10), run(False, *inputs))


def test_fused_output_tied_weight_gets_both_gradients():
    """An nn.Embedding's weight as the output weight: its gradient sums the input and the output use."""
    hidden, _, bias, targets = problem(padding=4)
    grads = []
    for fused in (False, True):
        torch.manual_seed(0)
        embedding = torch.nn.Embedding(V, D, padding_idx=PAD)
        inputs = torch.randint(1, V, (N,), generator=torch.Generator().manual_seed(1))        # (N,)
        states = torch.tanh(embedding(inputs) + hidden)                                     # (N, D)
        if fused:
            loss_sum, _ = linear_cross_entropy(states, embedding.weight, bias, targets, chunk_size=9)
        else:
            loss_sum = F.cross_entropy(states @ embedding.weight.T + bias, targets, ignore_index=PAD,
                                       reduction="sum")
        loss_sum.backward()
        grads.append(embedding.weight.grad)
    torch.testing.assert_close(grads[1], grads[0], **TOLERANCE)


def test_fused_output_gradcheck_fp64():
    hidden, weight, bias, targets = problem(rows=7, width=3, vocab_size=5, padding=2, dtype=torch.float64)
    inputs = [t.requires_grad_() for t in (hidden, weight, bias)]
    for smoothing in (0.0, 0.2):
        assert torch.autograd.gradcheck(
            lambda h, w, b, smoothing=smoothing: linear_cross_entropy(h, w, b, targets, label_smoothing=smoothing,
                                                                      chunk_size=3)[0], inputs)


def test_fused_output_scales_by_the_incoming_gradient():
    """loss_sum / count and 3 * loss_sum: the stored gradients are scaled, not returned as they are."""
    inputs = problem(padding=2)
    for scale in (lambda loss, count: loss / count, lambda loss, count: 3.0 * loss):
        grads = []
        for fused in (False, True):
            leaves = [t.detach().clone().requires_grad_() for t in inputs[:3]]
            if fused:
                loss_sum, count = linear_cross_entropy(*leaves, inputs[3], chunk_size=8)
            else:
                loss_sum = F.cross_entropy(leaves[0] @ leaves[1].T + leaves[2], inputs[3], ignore_index=PAD,
                                           reduction="sum")
                count = (inputs[3] != PAD).sum()
            scale(loss_sum, count).backward()
            grads.append([t.grad for t in leaves])
        for grad_f, grad_p in zip(grads[1], grads[0], strict=True):
            torch.testing.assert_close(grad_f, grad_p, **TOLERANCE)


def test_fused_output_backward_twice_with_retain_graph():
    hidden, weight, bias, targets = problem()
    grads = []
    for fused in (False, True):
        leaves = [t.detach().clone().requires_grad_() for t in (hidden, weight, bias)]
        if fused:
            loss_sum, _ = linear_cross_entropy(*leaves, targets, chunk_size=8)
        else:
            loss_sum = F.cross_entropy(leaves[0] @ leaves[1].T + leaves[2], targets, ignore_index=PAD,
                                       reduction="sum")
        for _ in range(3):
            loss_sum.backward(retain_graph=True)
        grads.append([t.grad for t in leaves])
    for grad_f, grad_p in zip(grads[1], grads[0], strict=True):
        torch.testing.assert_close(grad_f, grad_p, **TOLERANCE)


class OpRecorder(TorchDispatchMode):
    """Records every op's name and the sizes of the tensors it returns."""

    def __init__(self):
        super().__init__()
        self.ops: list[tuple[str, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        results = out if isinstance(out, (tuple, list)) else (out,)
        for result in results:
            if isinstance(result, torch.Tensor):
                self.ops.append((func.overloadpacket.__name__, result.numel()))
        return out


def test_fused_output_no_grad_computes_the_loss_only():
    hidden, weight, bias, targets = problem(padding=3)
    for t in (hidden, weight, bias):
        t.requires_grad_()
    with torch.no_grad():
        plain = F.cross_entropy(hidden @ weight.T + bias, targets, ignore_index=PAD, reduction="sum")
        with OpRecorder() as recorder:
            loss_sum, count = linear_cross_entropy(hidden, weight, bias, targets, chunk_size=8)
    torch.testing.assert_close(loss_sum, plain, **TOLERANCE)
    assert int(count) == N - 3 and loss_sum.grad_fn is None and not loss_sum.requires_grad
    matmuls = [name for name, _ in recorder.ops if name in ("mm", "addmm", "addmm_")]
    assert len(matmuls) == -(-(N - 3) // 8)                                # one per chunk: the logits only
    assert not any(name in ("exp", "exp_", "scatter_add_") for name, _ in recorder.ops)


def test_fused_output_never_holds_full_logits():
    """N = 512, V = 20,000: no op of the forward or the backward returns a tensor of N x V elements (the
    plain path does), and what the Function saves for backward is no larger than the inputs."""
    rows, vocab_size = 512, 20000
    hidden, weight, bias, targets = problem(rows=rows, width=8, vocab_size=vocab_size, padding=20)
    for t in (hidden, weight, bias):
        t.requires_grad_()
    with OpRecorder() as fused_ops:
        loss_sum, _ = linear_cross_entropy(hidden, weight, bias, targets, chunk_size=64)
        saved = loss_sum.grad_fn.saved_tensors
        loss_sum.backward()
    assert max(size for _, size in fused_ops.ops) < rows * vocab_size
    assert max(size for _, size in fused_ops.ops) <= max(64 * vocab_size, weight.numel())
    assert max(t.numel() for t in saved if t is not None) <= weight.numel()
    with OpRecorder() as plain_ops:                                        # the recorder sees the plain path's logits
        F.cross_entropy(hidden @ weight.T + bias, targets, ignore_index=PAD, reduction="sum").backward()
    assert max(size for _, size in plain_ops.ops) == rows * vocab_size


def test_fused_output_bfloat16_accumulates_in_fp32():
    hidden, weight, bias, targets = problem(padding=4, dtype=torch.bfloat16)
    loss_f, count_f, grads_f = run(True, hidden, weight, bias, targets, chunk_size=8)
    loss_p, count_p, grads_p = run(False, *(t.float() for t in (hidden, weight, bias)), targets)
    assert loss_f.dtype == torch.float32 and int(count_f) == int(count_p)
    torch.testing.assert_close(loss_f, loss_p, rtol=1e-2, atol=1e-2)
    for grad_f, grad_p in zip(grads_f, grads_p, strict=True):
        assert grad_f.dtype == torch.bfloat16
        torch.testing.assert_close(grad_f.float(), grad_p, rtol=2e-2, atol=2e-2)


def test_fused_output_default_chunk_size_and_should_fuse():
    assert default_chunk_size(10000) == 256
    assert default_chunk_size(33278) == 248                                # 248 rows x 33,278 x 4 bytes <= 32 MB
    assert default_chunk_size(10 ** 7) == 8
    assert all(default_chunk_size(v) % 8 == 0 for v in (65, 8000, 33278, 50257, 262144))
    assert should_fuse(700, 33278) and should_fuse(700, 2000) and should_fuse(20, 65536)   # chunks of 128+ rows
    assert not should_fuse(100, 131072)                                    # 64-row chunks, 52 MB of logits
    assert not should_fuse(768, 65) and not should_fuse(700, 1999)         # below the measured vocabularies
    assert should_fuse(700, 131072) and should_fuse(700, 10 ** 6)          # 367 MB and 2.8 GB of logits


def test_fused_output_rejects_bad_shapes():
    hidden, weight, bias, targets = problem()
    with pytest.raises(SeqlabError, match="flatten"):
        linear_cross_entropy(hidden[None], weight, bias, targets)
    with pytest.raises(SeqlabError, match="targets"):
        linear_cross_entropy(hidden, weight, bias, targets[:-1])
    with pytest.raises(SeqlabError, match="bias"):
        linear_cross_entropy(hidden, weight, bias[:-1], targets)
    with pytest.raises(SeqlabError, match="chunk_size"):
        linear_cross_entropy(hidden, weight, bias, targets, chunk_size=0)


@pytest.mark.parametrize("frozen", ["hidden", "weight"])
def test_fused_output_frozen_inputs_get_no_gradient(frozen):
    """Only the inputs that require grad get one (and the others' matmul is skipped), still equal to plain."""
    inputs = problem(padding=3)
    grads = []
    for fused in (False, True):
        leaves = [t.detach().clone().requires_grad_(name != frozen)
                  for name, t in zip(("hidden", "weight", "bias"), inputs[:3], strict=True)]
        if fused:
            loss_sum, _ = linear_cross_entropy(*leaves, inputs[3], chunk_size=8)
        else:
            loss_sum = F.cross_entropy(leaves[0] @ leaves[1].T + leaves[2], inputs[3], ignore_index=PAD,
                                       reduction="sum")
        loss_sum.backward()
        grads.append([t.grad for t in leaves])
    for grad_f, grad_p in zip(grads[1], grads[0], strict=True):
        if grad_p is None:
            assert grad_f is None
        else:
            torch.testing.assert_close(grad_f, grad_p, **TOLERANCE)


def autocast_paths(hidden, weight, bias, targets, label_smoothing=0.0, chunk_size=None):
    """(loss, grads) of the fused layer as training calls it under bf16 autocast (inputs cast to bf16, as
    seqlab.training.output_loss.fused_token_loss does) and of the plain autocast path (nn.Linear's bf16
    logits, F.cross_entropy in fp32), on fp32 leaves."""
    results = []
    for fused in (True, False):
        leaves = [t.detach().clone().requires_grad_() if t is not None else None for t in (hidden, weight, bias)]
        h, w, b = leaves
        with torch.autocast("cpu", dtype=torch.bfloat16):
            if fused:
                with torch.autocast("cpu", enabled=False):
                    loss, _ = linear_cross_entropy(h.bfloat16(), w.bfloat16(), None if b is None else b.bfloat16(),
                                                   targets, label_smoothing=label_smoothing, chunk_size=chunk_size)
            else:
                loss = F.cross_entropy(F.linear(h, w, b), targets, ignore_index=PAD, reduction="sum",
                                       label_smoothing=label_smoothing)
        loss.backward()
        results.append((loss.detach(), [t.grad if t is not None else None for t in leaves]))
    return results


@pytest.mark.skipif(not cpu_supports_bf16(), reason="this CPU has no bfloat16 kernels")
@pytest.mark.parametrize("bias,label_smoothing,chunk_size", [(True, 0.0, None), (False, 0.0, None),
                                                             (True, 0.1, None), (True, 0.0, 64)])
def test_fused_output_bf16_matches_the_plain_autocast_path(bias, label_smoothing, chunk_size):
    """The bf16 path (bias folded into the product, softmax in place in bf16, the loss from each target's
    probability) against autocast's plain path on one fixed batch of 300 rows x 200 x 5,000 words: the summed
    loss within 5e-5 relative (measured 5e-6 to 8e-6), every gradient within 1% of its largest entry
    (measured at most 0.55%: bf16 rounding of the same products); fp32 loss, fp32 gradients on fp32 leaves."""
    inputs = problem(rows=300, width=200, vocab_size=5000, padding=20, bias=bias)
    (loss, grads), (want_loss, want_grads) = autocast_paths(*inputs, label_smoothing=label_smoothing,
                                                            chunk_size=chunk_size)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, want_loss, rtol=5e-5, atol=0)
    for grad, want in zip(grads, want_grads, strict=True):
        if want is None:
            assert grad is None
            continue
        assert grad.dtype == torch.float32
        assert float((grad - want).abs().max()) <= 0.01 * float(want.abs().max())


@pytest.mark.skipif(not cpu_supports_bf16(), reason="this CPU has no bfloat16 kernels")
def test_fused_output_bf16_underflowing_target_probability_gets_the_exact_loss():
    """A target 300 nats below its row's best logit: its bf16 probability is 0, the fused path recomputes that
    row's log-sum-exp in fp32 and the loss stays finite and equal to the plain path's."""
    hidden, weight, bias, targets = problem(rows=40, width=200, vocab_size=3000)
    weight[7] = -hidden[3] * 300 / float(hidden[3].pow(2).sum())        # z_7 = -300 on row 3 ...
    targets[3] = 7                                                      # ... and row 3's target is word 7
    (loss, _), (want_loss, _) = autocast_paths(hidden, weight, bias, targets)
    assert want_loss > 300 and torch.isfinite(loss)
    torch.testing.assert_close(loss, want_loss, rtol=5e-5, atol=0)
