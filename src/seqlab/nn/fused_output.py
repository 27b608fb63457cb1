"""The output layer and its cross-entropy loss in one pass, chunk by chunk, never holding the (N, V) logits.

A word LM spends most of its training step in its output layer: the hidden states (N, D) times the output
weight W^T (D, V) give logits z (N, V), the softmax turns each row into a distribution over the vocabulary
(SLP eq. 6.24: z = U h, y = softmax(z); here U = W, plus a bias b) and the loss is the cross-entropy of the
target under it (SLP eq. 6.27: L = -log p_y). For wikitext-2 (V = 33,278, N = 20 x 35) the logits alone
are 93 MB; the plain path writes them, reads them for the log-softmax, writes the log-probabilities, and
streams a gradient of the same size back through memory.

`linear_cross_entropy` computes the same summed loss a chunk of rows at a time, so no (N, V) tensor ever
exists: the idea of Cut Cross-Entropy (Wijmans et al. 2024, "Cut Your Losses in Large-Vocabulary Language
Models", arXiv:2411.09009), which goes further in a GPU kernel (blocks of the vocabulary, the log-sum-exp
on the fly, the logits recomputed in the backward pass). Here, as in Liger Kernel's fused linear
cross-entropy, the gradient is finished in the forward pass instead, because the derivative of the
softmax cross-entropy with respect to the logits is known in closed form once the softmax is there:

    dL/dz = p - (1 - eps) onehot(y) - eps / V          (eps = label smoothing; without it: p - onehot(y))

so while a chunk's gradient G (C, V) is in cache: grad_hidden[chunk] = G W, grad_weight += G^T H[chunk],
grad_bias += sum_rows G. The backward pass only scales them by the incoming gradient. That is the plain
path's three matmuls (logits, grad_hidden, grad_weight: 6 N D V FLOPs) and no recomputation; one chunk's
(C, V) buffers are alive at a time, and what is saved for backward, (N, D) + (V, D) + (V,), is the size of
the inputs. When nothing needs a gradient (torch.no_grad(), evaluation) the forward computes the loss only.

Label smoothing follows F.cross_entropy's definition exactly: per counted row,
L = (1 - eps) (-log p_y) + eps * mean_c (-log p_c); rows whose target is ignore_index (seqlab's PAD)
contribute nothing to the loss, the count or any gradient. bf16/fp16 inputs: the matmuls run in the input
dtype (as under autocast), the log-softmax, the loss and the sums of grad_weight and grad_bias over chunks
in fp32; the loss comes back in fp32 (as `seqlab.families.lm.task.token_loss` gives it) and the gradients in the
inputs' dtypes.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from seqlab.data.vocab import PAD
from seqlab.errors import SeqlabError

MAX_CHUNK_ROWS = 256             # default chunk: 256 rows (benchmarks/output_layer.py) ...
CHUNK_BYTES = 32 * 2 ** 20       # ... or fewer, so that one chunk's fp32 logits stay within 32 MB
FAST_CHUNK_ROWS = 128            # should_fuse: chunks of 128+ rows were as fast as the plain path or faster ...
FUSE_MIN_LOGITS_BYTES = 2 ** 28  # ... and past 256 MB of plain fp32 logits, memory decides even with smaller chunks
MIN_MEASURED_VOCAB = 2000        # should_fuse: the smallest vocabulary measured; smaller ones stay on the plain path


def default_chunk_size(vocab_size: int) -> int:
    """Rows per chunk: 256, or fewer (a multiple of 8, at least 8) where 256 rows of fp32 logits pass 32 MB.

    Measured by benchmarks/output_layer.py (one CPU thread, N = 700, D = 200-256, V = 2,000-33,278): every
    chunk's G^T h adds into the whole (V, D) grad_weight and every chunk reads W twice, so small chunks stream
    (V, D) tensors through memory once per few rows. Against the plain path, chunks of 32 rows ran at
    0.74-0.89x, 64 at 0.97-1.00x, 128 at 1.05-1.12x, 256 at 1.11-1.15x, 512 at 1.11-1.17x (rounds vary by
    ~0.1). "A few MB" of logits per chunk (~24 rows at V = 33,278) is too few rows; 248 rows there are 33 MB
    per (C, V) buffer (the forward holds two, logits and log-probabilities) against the plain path's 93 MB
    each of logits, log-probabilities and their gradient, and the buffers do not grow with N: the heap grew
    by 101 MB over one fused step at that shape (gradients included) and by 456 MB over a plain one.
    """
    rows = min(MAX_CHUNK_ROWS, CHUNK_BYTES // (4 * max(vocab_size, 1)))
    return max(8, rows // 8 * 8)


def should_fuse(num_rows: int, vocab_size: int) -> bool:
    """Whether to train through `linear_cross_entropy` rather than logits + F.cross_entropy, for N rows and a
    V-word vocabulary.

    No below MIN_MEASURED_VOCAB words (a character model's few dozen symbols): the fused path was measured from
    V = 2,000 up, and a small vocabulary's logits are small. Yes when the default chunk has at least
    FAST_CHUNK_ROWS rows (V <= 65,536): in benchmarks/output_layer.py
    (one CPU thread, N = 700, V = 2,000-33,278) chunks of 128-256 rows were 1.05-1.15x the plain path's
    speed, with a fraction of its memory. Yes too, with smaller chunks (larger V), once the plain path's
    fp32 logits would take FUSE_MIN_LOGITS_BYTES (256 MB): chunks of 32 rows measured 0.74-0.89x, a price
    worth paying there for memory. Otherwise no: the logits are small and the plain path is faster.
    """
    if vocab_size < MIN_MEASURED_VOCAB:
        return False
    return (default_chunk_size(vocab_size) >= FAST_CHUNK_ROWS
            or 4 * num_rows * vocab_size >= FUSE_MIN_LOGITS_BYTES)


BF16_CHUNK_BYTES = 64 * 2 ** 20  # bf16: rows per chunk so that one chunk's bf16 gradient stays within 64 MB ...
MAX_BF16_CHUNK_ROWS = 1024       # ... and at most 1,024 rows (the wikitext-2 LSTM's 700 rows: one chunk)
BF16_WIDTH_MULTIPLE = 32         # bf16 matmuls: the inner width padded to a multiple of 32 (AMX tiles)
BF16_MIN_TARGET_PROB = 2.0 ** -120  # below this a target's bf16 probability is recomputed in fp32 (loss > 83 nats)


def default_bf16_chunk_size(vocab_size: int) -> int:
    """Rows per chunk on the bf16 path: 1,024, or fewer (a multiple of 8, at least 8) where their bf16
    gradient would pass 64 MB (1,008 rows at V = 33,278).

    Unlike the fp32 path, where each chunk's grad_weight is added into the fp32 (V, D) sum (a pass over
    memory per chunk), here one chunk takes the whole batch: the three products run at M = 700 rows (AMX's
    efficient sizes) and grad_weight is one product, rounded to bf16 once, as the plain path's is."""
    rows = min(MAX_BF16_CHUNK_ROWS, BF16_CHUNK_BYTES // (2 * max(vocab_size, 1)))
    return max(8, rows // 8 * 8)


def _bf16_loss_and_grads(H: Tensor, W: Tensor, b: Tensor | None, y: Tensor, label_smoothing: float,
                         chunk_size: int, needs_hidden: bool, needs_weight: bool, needs_bias: bool):
    """The bf16 forward: (loss_sum fp32, grad_H (n, D), grad_W (V, D), grad_b (V,) or None each).

    H (n, D), W (V, D), b (V,) or None, all bf16; y (n,) the counted targets. Per chunk of rows, three
    passes over the (C, V) values besides the three products:

      1. z = [h, 1, 0] [W, b, 0]^T: the bias folded into the product as one more column (no separate
         bias pass), the width padded to a multiple of 32 (AMX: K = 200 ran at about half K = 224's speed);
         grad_bias then comes out of grad_weight's product as its bias column (no sum over rows)
      2. softmax(z) in place in the bf16 buffer, in fp32 inside PyTorch's kernel (max, sum of exp): the
         gradient p, with no fp32 (C, V) copy
      3. the loss -log p_y from each target's probability (fp32 arithmetic on the bf16 p_y: relative error
         2^-9, at most 0.002 nats a row, a tenth of the rounding of the bf16 logits themselves); a target
         whose probability underflows has its row's logits recomputed and its log-sum-exp taken in fp32;
         p_y - 1 written at the targets (and - eps / V everywhere with label smoothing)

    then grad_h = G [W, b, 0] and grad_[W, b, 0] = G^T [h, 1, 0], both bf16 products: one chunk (the default
    takes up to 1,024 rows) gives them rounded once, as autocast's plain path does; with more chunks
    grad_weight and grad_bias are summed over chunks in fp32."""
    count, width = H.shape
    vocab_size = W.size(0)
    extra = 0 if b is None else 1
    padded = -(-(width + extra) // BF16_WIDTH_MULTIPLE) * BF16_WIDTH_MULTIPLE
    if padded != width:                                                     # one write each, no zero-fill
        ones = [] if b is None else [H.new_ones(count, 1)]
        W1 = torch.cat([W, *([] if b is None else [b[:, None]]), W.new_zeros(vocab_size, padded - width - extra)],
                       dim=1)                                               # (V, K): [W, b, 0]
        H1 = torch.cat([H, *ones, H.new_zeros(count, padded - width - extra)], dim=1)  # (n, K): [h, 1, 0]
    else:
        W1, H1 = W, H
    chunk = min(chunk_size, count)
    needs_product = needs_weight or needs_bias
    grad_H1 = torch.empty(count, padded, dtype=H.dtype, device=H.device) if needs_hidden else None  # (n, K)
    grad_W1 = None                                                          # (V, K): bf16 (one chunk) or fp32 sum
    row_sums = None
    if label_smoothing:                                                     # sum_c z_c = h . sum_c [W, b]_c
        row_sums = H1.float() @ W1.sum(0, dtype=torch.float32)             # (n,)
    loss_rows = torch.empty(count, dtype=torch.float32, device=H.device)   # -log p_y, a row each
    target_logits = torch.empty(count, 1, dtype=torch.float32, device=H.device)  # z_y, a row each
    buffer = torch.empty(chunk, vocab_size, dtype=H.dtype, device=H.device)  # (C, V) logits, then gradient
    for start in range(0, count, chunk):
        end = min(start + chunk, count)
        h, target = H1[start:end], y[start:end, None]                       # (c, K), (c, 1)
        z = buffer[: end - start]                                           # (c, V)
        torch.mm(h, W1.t(), out=z)                                          # z = h W^T + b (SLP eq. 6.24)
        target_logit = target_logits[start:end]                             # (c, 1)
        target_logit.copy_(z.gather(1, target))
        torch._softmax(z, -1, False, out=z)                                 # p = softmax(z), fp32 inside
        target_prob = z.gather(1, target).float()                           # (c, 1)
        nll = loss_rows[start:end, None]                                    # (c, 1)
        torch.neg(torch.log(target_prob), out=nll)                          # -log p_y  (SLP eq. 6.27)
        small = (target_prob < BF16_MIN_TARGET_PROB).squeeze(1).nonzero().squeeze(1)
        if small.numel():                                                   # underflow: the exact log-sum-exp
            exact = torch.logsumexp((h.index_select(0, small) @ W1.t()).float(), dim=-1, keepdim=True)
            nll.index_copy_(0, small, exact - target_logit.index_select(0, small))
            target_prob.index_copy_(0, small, torch.exp(target_logit.index_select(0, small) - exact))
        if not (needs_hidden or needs_product):
            continue
        # dL/dz = p - (1 - eps) onehot(y) - eps / V, over the bf16 probabilities
        if label_smoothing:
            z.sub_(label_smoothing / vocab_size)
        at_targets = torch.arange(end - start, device=z.device) * vocab_size + target.squeeze(1)  # (c,) flat
        at_target = target_prob.squeeze(1) - (1 - label_smoothing) - label_smoothing / vocab_size     # (c,)
        z.view(-1).index_put_((at_targets,), at_target.to(z.dtype))         # (scatter_ copied all of z)
        if grad_H1 is not None:
            torch.mm(z, W1, out=grad_H1[start:end])                         # dL/dh = G [W, b, 0]       (c, K)
        if needs_product:
            product = z.t() @ h                                             # G^T [h, 1, 0]             (V, K)
            if start == 0 and end == count:
                grad_W1 = product                                           # one chunk: rounded once, bf16
            elif start == 0:
                grad_W1 = product.float()
            else:
                grad_W1.add_(product)
    if label_smoothing:
        # (1 - eps) (-log p_y) + eps mean_c (-log p_c), and -log p_c = lse - z_c with lse = z_y - log p_y
        loss_rows = ((1 - label_smoothing) * loss_rows
                     + label_smoothing * (loss_rows + target_logits.squeeze(1) - row_sums / vocab_size))
    loss_sum = loss_rows.sum()
    grad_H = None if grad_H1 is None else grad_H1[:, :width].contiguous()
    grad_W = None if grad_W1 is None or not needs_weight else grad_W1[:, :width]
    grad_b = None if grad_W1 is None or not needs_bias else grad_W1[:, width]
    return loss_sum, grad_H, grad_W, grad_b


class _LinearCrossEntropy(torch.autograd.Function):
    """The fused forward (loss and, when asked, every gradient) and a backward that only scales."""

    @staticmethod
    def forward(ctx, hidden: Tensor, weight: Tensor, bias: Tensor | None, targets: Tensor, ignore_index: int,
                label_smoothing: float, chunk_size: int, compute_grads: bool):
        vocab_size = weight.size(0)
        # which gradients to work out (needs_input_grad alone does not see torch.no_grad())
        needs_hidden, needs_weight, needs_bias = (compute_grads and needs for needs in ctx.needs_input_grad[:3])
        compute_dtype = torch.promote_types(hidden.dtype, weight.dtype)
        if bias is not None:
            compute_dtype = torch.promote_types(compute_dtype, bias.dtype)
        # softmax and accumulation in at least fp32 (bf16/fp16 inputs)
        accumulate_dtype = torch.promote_types(compute_dtype, torch.float32)
        W = weight.to(compute_dtype)                                        # (V, D)
        b = None if bias is None else bias.to(compute_dtype)                # (V,)

        kept = targets != ignore_index                                      # (N,)
        rows = kept.nonzero().squeeze(1)                                    # (n,) the rows that count
        count = rows.numel()
        all_kept = count == hidden.size(0)
        H = hidden.to(compute_dtype) if all_kept else hidden.index_select(0, rows).to(compute_dtype)  # (n, D)
        y = targets if all_kept else targets.index_select(0, rows)         # (n,)

        if compute_dtype == torch.bfloat16 and count:                       # bf16 (autocast): its own path
            loss_sum, grad_H, grad_W, grad_b = _bf16_loss_and_grads(
                H, W, b, y, label_smoothing, chunk_size or default_bf16_chunk_size(vocab_size),
                compute_grads and needs_hidden, compute_grads and needs_weight, compute_grads and needs_bias)
            return _LinearCrossEntropy._finish(ctx, hidden, weight, bias, rows, all_kept, count, compute_grads,
                                               loss_sum, grad_H, grad_W, grad_b)
        chunk_size = chunk_size or default_chunk_size(vocab_size)
        loss_sum = torch.zeros((), dtype=accumulate_dtype, device=hidden.device)
        if compute_grads:
            allocate = torch.empty if count else torch.zeros                # the first chunk writes them
            grad_H = allocate(H.shape, dtype=compute_dtype, device=H.device) if needs_hidden else None  # (n, D)
            grad_W = allocate(W.shape, dtype=accumulate_dtype, device=W.device) if needs_weight else None  # (V, D)
            grad_b = allocate(vocab_size, dtype=accumulate_dtype, device=W.device) if needs_bias else None  # (V,)
        if count:
            chunk = min(chunk_size, count)
            logits_buffer = torch.empty(chunk, vocab_size, dtype=compute_dtype, device=hidden.device)  # (C, V)
            log_probs_buffer = torch.empty(chunk, vocab_size, dtype=accumulate_dtype, device=hidden.device)
            for start in range(0, count, chunk):
                end = min(start + chunk, count)
                h = H[start:end]                                            # (c, D)
                target = y[start:end, None]                                 # (c, 1)
                logits = logits_buffer[: end - start]                       # (c, V)
                if b is None:
                    torch.mm(h, W.t(), out=logits)                          # SLP eq. 6.24: z = h W^T (c, V)
                else:
                    torch.addmm(b, h, W.t(), out=logits)                    # z = h W^T + b           (c, V)
                log_probs = log_probs_buffer[: end - start]                 # (c, V)
                # log softmax(z) = z - logsumexp(z) (SLP eq. 6.24's softmax, in log space), in fp32 at least
                torch.log_softmax(logits.to(accumulate_dtype), dim=-1, out=log_probs)
                target_log_prob = log_probs.gather(1, target)               # (c, 1)
                if label_smoothing:
                    # F.cross_entropy's smoothing: (1 - eps) (-log p_y) + eps * mean_c (-log p_c)
                    loss_sum -= (1 - label_smoothing) * target_log_prob.sum()
                    loss_sum -= label_smoothing / vocab_size * log_probs.sum()
                else:
                    loss_sum -= target_log_prob.sum()                       # SLP eq. 6.27: -log p_y
                if not compute_grads:
                    continue
                # dL/dz = p - (1 - eps) onehot(y) - eps / V, in place over the log-probabilities
                gradient = log_probs.exp_()                                 # p                        (c, V)
                gradient.scatter_add_(1, target, torch.full_like(target_log_prob, -(1 - label_smoothing)))
                if label_smoothing:
                    gradient.sub_(label_smoothing / vocab_size)
                g = gradient.to(compute_dtype)                              # (c, V)
                if grad_H is not None:
                    torch.mm(g, W, out=grad_H[start:end])                   # dL/dh = G W              (c, D)
                # dL/dW += G^T h, dL/db += sum_rows G: the first chunk writes (no zero-filling of (V, D))
                if grad_W is not None:
                    if accumulate_dtype != compute_dtype:                   # bf16/fp16 product, fp32 sum
                        product = g.t() @ h                                 # (V, D)
                        if start == 0:
                            grad_W.copy_(product)
                        else:
                            grad_W.add_(product)
                    elif start == 0:
                        torch.mm(g.t(), h, out=grad_W)                      # (V, D)
                    else:
                        grad_W.addmm_(g.t(), h)                             # (V, D)
                if grad_b is not None and start == 0:
                    torch.sum(gradient, dim=0, out=grad_b)                  # (V,)
                elif grad_b is not None:
                    grad_b.add_(gradient.sum(dim=0))                        # (V,)

        return _LinearCrossEntropy._finish(ctx, hidden, weight, bias, rows, all_kept, count, compute_grads,
                                           loss_sum, grad_H if compute_grads else None,
                                           grad_W if compute_grads else None, grad_b if compute_grads else None)

    @staticmethod
    def _finish(ctx, hidden: Tensor, weight: Tensor, bias: Tensor | None, rows: Tensor, all_kept: bool, count: int,
                compute_grads: bool, loss_sum: Tensor, grad_H: Tensor | None, grad_W: Tensor | None,
                grad_b: Tensor | None):
        """Save what backward needs; return (loss_sum, count)."""
        ctx.set_materialize_grads(False)
        ctx.hidden_shape, ctx.all_kept = hidden.shape, all_kept
        ctx.dtypes = (hidden.dtype, weight.dtype, None if bias is None else bias.dtype)
        if compute_grads:
            ctx.save_for_backward(grad_H, grad_W, grad_b, rows)
        count_tensor = torch.tensor(count, dtype=torch.int64, device=hidden.device)
        ctx.mark_non_differentiable(count_tensor)
        return loss_sum, count_tensor                                       # fp32 for bf16 inputs

    @staticmethod
    @once_differentiable                 # the stored gradients are constants: no double backward
    def backward(ctx, grad_loss: Tensor | None, grad_count: Tensor | None):
        if grad_loss is None:
            return None, None, None, None, None, None, None, None
        grad_H, grad_W, grad_b, rows = ctx.saved_tensors
        hidden_dtype, weight_dtype, bias_dtype = ctx.dtypes
        # loss_sum.backward() on CPU sends 1: the stored gradients are the answer, no (V, D) multiply
        unit = grad_loss.device.type == "cpu" and grad_loss.numel() == 1 and float(grad_loss) == 1.0

        def scaled(gradient: Tensor, dtype: torch.dtype) -> Tensor:
            return gradient.to(dtype) if unit else (gradient * grad_loss).to(dtype)

        grad_hidden = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_hidden = scaled(grad_H, hidden_dtype)                      # (n, D)
            if not ctx.all_kept:
                grad_hidden = grad_hidden.new_zeros(ctx.hidden_shape).index_copy_(0, rows, grad_hidden)  # (N, D)
        if ctx.needs_input_grad[1]:
            grad_weight = scaled(grad_W, weight_dtype)                      # (V, D)
        if ctx.needs_input_grad[2]:
            grad_bias = scaled(grad_b, bias_dtype)                          # (V,)
        return grad_hidden, grad_weight, grad_bias, None, None, None, None, None


def linear_cross_entropy(hidden: Tensor, weight: Tensor, bias: Tensor | None, targets: Tensor,
                         ignore_index: int = PAD, label_smoothing: float = 0.0,
                         chunk_size: int | None = None) -> tuple[Tensor, Tensor]:
    """Summed cross-entropy of softmax(hidden W^T + b) against targets, and the number of targets counted.

    hidden (N, D) (flatten (B, T, D) first), weight (V, D) (an nn.Linear's or a tied embedding's layout),
    bias (V,) or None, targets (N,) int64 with ignore_index at padding. Returns (loss_sum, count), 0-dim
    tensors, equal to F.cross_entropy(hidden @ weight.T + bias, targets, ignore_index=ignore_index,
    label_smoothing=label_smoothing, reduction="sum") and (targets != ignore_index).sum(), without
    materialising the (N, V) logits or their gradient: rows go through chunk_size at a time
    (default: `default_chunk_size(V)`).
    """
    if hidden.dim() != 2 or weight.dim() != 2 or hidden.size(1) != weight.size(1):
        raise SeqlabError(f"linear_cross_entropy: hidden must be (N, D) and weight (V, D), got "
                          f"{tuple(hidden.shape)} and {tuple(weight.shape)}; flatten (B, T, D) to (B * T, D)")
    if targets.shape != hidden.shape[:1]:
        raise SeqlabError(f"linear_cross_entropy: targets must be (N,) = ({hidden.size(0)},), "
                          f"got {tuple(targets.shape)}")
    if bias is not None and bias.shape != weight.shape[:1]:
        raise SeqlabError(f"linear_cross_entropy: bias must be (V,) = ({weight.size(0)},), got {tuple(bias.shape)}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise SeqlabError(f"linear_cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    if chunk_size is not None and chunk_size < 1:
        raise SeqlabError(f"linear_cross_entropy: chunk_size must be at least 1, got {chunk_size}")
    inputs = (hidden, weight) if bias is None else (hidden, weight, bias)
    compute_grads = torch.is_grad_enabled() and any(t.requires_grad for t in inputs)
    return _LinearCrossEntropy.apply(hidden, weight, bias, targets, ignore_index, float(label_smoothing),
                                     int(chunk_size or 0), compute_grads)
