"""Exercises of the tutorial "The transformer LM, sampling and beam search" (docs/tutorials/transformer-lm.md):
attention without its mask, the size of a block, what attention knows of order, the nucleus of top-p, the length
penalty of beam search, and causal self-attention written from eqs. 9.20-9.21."""

from __future__ import annotations

from seqlab.exercises import Exercise, choice, function, number, numbers_close, one_paragraph

# the page's three positions (section "Self-attention, by hand")
Q = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
K = [[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]]
V = [[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]]


def _floats(text: str) -> list[float]:
    """Numbers typed on the command line: "0.8 0.8" or "0.8,0.8" or "[0.8, 0.8]"."""
    return [float(x) for x in text.strip("[]() ").replace(",", " ").split()]


def _unmasked_first_output() -> list[float]:
    """a_1 without the causal mask, by seqlab's scaled_dot_product_attention."""
    import torch

    from seqlab.nn.attention import scaled_dot_product_attention

    q, k, v = (torch.tensor(m)[None, None] for m in (Q, K, V))            # (B=1, heads=1, T=3, d_k=2)
    out, _ = scaled_dot_product_attention(q, k, v, mask=None)
    return [round(x, 4) for x in out[0, 0, 0].tolist()]


D, HEADS, FF = 64, 4, 256       # the page's model: width 64, 4 heads, the default feedforward width 4 * 64


def _block_parameters() -> int:
    from seqlab.nn.transformer import TransformerBlock

    return sum(p.numel() for p in TransformerBlock(D, HEADS, ff_size=FF, norm_position="post").parameters())


def _last_position_after_swap() -> str:
    """Swap the first two inputs of a causal MultiHeadAttention (no positions): does the last output move?"""
    import torch

    from seqlab.nn.attention import MultiHeadAttention

    torch.manual_seed(0)
    attention = MultiHeadAttention(8, 2, causal=True, impl="textbook").eval()
    x = torch.randn(1, 5, 8)                                              # (B, T, D)
    swapped = x[:, [1, 0, 2, 3, 4]]
    with torch.no_grad():
        moved = (attention(swapped)[0, -1] - attention(x)[0, -1]).abs().max().item()
    return "unchanged" if moved < 1e-5 else "changed"


P = [0.45, 0.25, 0.15, 0.10, 0.05]      # a next-token distribution (exercise 4)


def _nucleus_size() -> int:
    import torch

    from seqlab.decoding.processors import TopP

    kept = TopP(0.8)(torch.tensor([P]).log())                            # (1, V): -inf where dropped
    return int(torch.isfinite(kept).sum())


def _ranked_first() -> str:
    from seqlab.decoding.core import normalized

    a, b = normalized(-6.0, 10, 0.6), normalized(-4.0, 5, 0.6)
    return "A" if a > b else "B"


def _reference_attention():
    """Causal single-head attention by seqlab: Q, K, V (T, d) -> (T, d)."""
    from seqlab.nn.attention import causal_mask, scaled_dot_product_attention

    def attend(Q, K, V):
        T = Q.size(0)
        out, _ = scaled_dot_product_attention(Q[None, None], K[None, None], V[None, None], causal_mask(T, T))
        return out[0, 0]
    return attend


def _attention_cases():
    import torch

    generator = torch.Generator().manual_seed(9)
    cases = [tuple(torch.tensor(m) for m in (Q, K, V))]
    for T, d in ((1, 4), (6, 8), (10, 3)):
        cases.append(tuple(torch.randn(T, d, generator=generator) for _ in range(3)))
    return cases


def _attention_without_scale(Q, K, V):
    """The wrong answer of exercise 6: causal attention that forgets to divide by sqrt(d_k)."""
    import torch

    T = Q.size(0)
    scores = (Q @ K.T).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(scores, dim=-1) @ V


EXERCISES = [
    Exercise(
        number=1, title="Attention without the causal mask", kind="compute",
        prompt=one_paragraph(r"""
Take the page's three positions ($q_1 = (1, 0)$, $k_1 = (1, 0)$, $k_2 = (1, 1)$, $k_3 = (0, 2)$, $v_1 = (1, 0)$,
$v_2 = (0, 1)$, $v_3 = (2, 2)$, $d_k = 2$) and **drop the causal mask**, as a bidirectional encoder does. What is
the output $a_1$ of the first query now (eqs. 9.20-9.21)? Give its two numbers, e.g. `answer = [0.1, 0.2]`.
"""),
        hints=(
            "Query 1 now scores all three keys: $q_1 \\cdot k_j / \\sqrt 2$ for $j = 1, 2, 3$.",
            "The scores are $1/\\sqrt 2, 1/\\sqrt 2, 0$; their softmax gives the weights, and $a_1 = \\sum_j "
            "\\alpha_{1j} v_j$.",
        ),
        solution=r"""
The scores are $q_1 \cdot k_j / \sqrt 2 = (0.7071, 0.7071, 0)$. Their softmax: $e^{0.7071} = 2.028$, so
$\alpha_1 = (2.028, 2.028, 1) / 5.056 = (0.401, 0.401, 0.198)$, and
$a_1 = 0.401\,(1, 0) + 0.401\,(0, 1) + 0.198\,(2, 2) = (0.797, 0.797)$. With the mask the answer was $v_1 = (1, 0)$:
the first position of a causal model sees only itself. In code:
`scaled_dot_product_attention(q, k, v, mask=None)`.
""",
        answer=_unmasked_first_output, checker=numbers_close(rel=1e-2, abs=2e-3), wrong=[1.0, 0.0],
        parse=_floats),
    Exercise(
        number=2, title="The parameters of one block", kind="derive",
        prompt=one_paragraph(r"""
How many parameters has one post-LN transformer block of the page's model: width $d = 64$, $h = 4$ heads, a
feedforward layer of width $4d = 256$? Count $W^Q, W^K, W^V, W^O$ with their biases, the FFN's $W_1, b_1, W_2,
b_2$, and the gain and bias of each of the two layer norms.
"""),
        hints=(
            "Each head projects $d$ to $d/h$. How many columns do the $h$ heads' $W^Q$ have together?",
            "Together the heads' $W^Q$ is one $d \\times d$ matrix (the `qkv` layer holds $W^Q, W^K, W^V$ as "
            "$3d \\times d$): attention is $4(d^2 + d)$ whatever $h$ is. The FFN is $d \\cdot 4d + 4d + 4d \\cdot d "
            "+ d$.",
        ),
        solution=r"""
- attention: $W^Q, W^K, W^V$ are $d \times d$ in all (each head's $d \times d/h$ side by side), and so is $W^O$:
  $4(d^2 + d) = 4(4096 + 64) = 16{,}640$;
- feedforward: $W_1$ ($d \times 4d$) and $b_1$, $W_2$ ($4d \times d$) and $b_2$: $16{,}384 + 256 + 16{,}384 + 64 =
  33{,}088$;
- two layer norms, a gain and a bias of $d$ each: $256$.

In all **49,984**, and the number of heads does not change it. Counting $d \times d$ projections per head gives
99,904. Check: `sum(p.numel() for p in TransformerBlock(64, 4, ff_size=256).parameters())`. Two thirds of a
block is its feedforward layer.

The whole model of the page is two blocks ($99{,}968$), the embeddings of its 69 characters ($69 \times 64 =
4{,}416$), a position vector for each of its 64 positions ($4{,}096$) and an output layer with its bias
($64 \times 69 + 69 = 4{,}485$): $112{,}965$, the count its training log prints.
""",
        answer=_block_parameters, checker=number(rel=0, abs=0.5), wrong=99904),
    Exercise(
        number=3, title="What attention knows of order", kind="predict",
        prompt=one_paragraph(r"""
A causal `MultiHeadAttention` layer (no position vectors added to its input) reads $x_1, \dots, x_5$. Swap
$x_1$ and $x_2$. Is the output at the **last** position `"changed"` or `"unchanged"`?
"""),
        hints=(
            "The last query may attend to every key. Does $\\sum_j \\alpha_{5j} v_j$ depend on the order of the "
            "terms?",
        ),
        solution=r"""
**Unchanged.** The last query sees all five positions, and its output $\sum_j \alpha_{5j} v_j$, with
$\alpha_{5j}$ a softmax over the same set of scores, is a sum whose terms only swap places. (The outputs at positions 1
and 2 do change: each sees another prefix.) That is why the model adds a position vector to each embedding,
$X = E[w] + P[\text{position}]$, or rotates the queries and keys (`--positions rotary`): without them the
transformer reads a bag of the previous tokens.
""",
        answer=_last_position_after_swap, checker=choice("changed", "unchanged"), wrong="changed",
        parse=str),
    Exercise(
        number=4, title="The nucleus of top-p", kind="compute",
        prompt=one_paragraph(r"""
The model's next-token distribution is $p = (0.45, 0.25, 0.15, 0.10, 0.05)$ (sorted). How many tokens does
top-p sampling with $p = 0.8$ keep (`--top-p 0.8`, the smallest set of most likely tokens whose probability
reaches $p$)?
"""),
        hints=(
            "Add the probabilities from the top until the sum reaches 0.8.",
            "$0.45 + 0.25 = 0.70$ has not reached 0.8 yet.",
        ),
        solution=r"""
$0.45$, then $0.70$, then $0.85 \ge 0.8$: **3** tokens, whose probabilities are then renormalised to sum to 1.
Stopping at the last sum *below* $p$ (2 tokens) keeps too few: the set must reach $p$. seqlab's rule (`TopP`)
keeps a token while the mass of the tokens before it is below $p$, which is the same. Top-k 3 would keep the same
three here; on a flatter distribution top-p keeps more, on a sharper one fewer.
""",
        answer=_nucleus_size, checker=number(rel=0, abs=0.01), wrong=2),
    Exercise(
        number=5, title="The length penalty", kind="predict",
        prompt=one_paragraph(r"""
A beam search ends with two hypotheses: A, of 10 tokens with $\log p = -6.0$, and B, of 5 tokens with
$\log p = -4.0$. With `--length-penalty 0.6` they are ranked by $\log p / \text{length}^{0.6}$. Which is
returned: `"A"` or `"B"`?
"""),
        hints=(
            "$10^{0.6} \\approx 3.98$ and $5^{0.6} \\approx 2.63$.",
            "Compare $-6.0 / 3.98$ with $-4.0 / 2.63$: the higher (closer to 0) wins.",
        ),
        solution=r"""
$-6.0 / 10^{0.6} = -1.507$ and $-4.0 / 5^{0.6} = -1.523$: **A**, the longer one, by a hair. With
`--length-penalty 0` (the raw log probability) B wins by 2 nats: every extra token multiplies $p$ by a number
below 1, so the raw score favours short outputs. The default, 1, ranks by log probability per token
($-0.6$ against $-0.8$), A again. seqlab's `decoding.core.normalized` is this formula.
""",
        answer=_ranked_first, checker=choice("A", "B"), wrong="B", parse=str),
    Exercise(
        number=6, title="Causal self-attention, from the equations", kind="implement",
        prompt=one_paragraph(r"""
Write one head of causal self-attention (eqs. 9.20-9.21 with the causal mask): a function `attend(Q, K, V)` of
three tensors $(T, d_k)$ that returns a $(T, d_k)$ tensor whose row $i$ is $a_i = \sum_{j \le i} \alpha_{ij} v_j$.
Define it in a cell (`def attend(Q, K, V): ...`), then put `answer = attend`.

The check runs it on the page's numbers and on random ones (one of a single position) against seqlab's
`scaled_dot_product_attention` with its `causal_mask`.
"""),
        hints=(
            "All scores at once: `Q @ K.T / math.sqrt(Q.size(-1))`, a $(T, T)$ matrix.",
            "Set the scores above the diagonal to $-\\infty$ before the softmax: "
            "`torch.ones(T, T, dtype=torch.bool).tril()` is True where $j \\le i$; `masked_fill` the rest.",
        ),
        solution=r"""
```python
def attend(Q, K, V):
    T, d_k = Q.shape
    scores = Q @ K.T / math.sqrt(d_k)                                   # (T, T)
    allowed = torch.ones(T, T, dtype=torch.bool).tril()                 # j <= i
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights @ V                                                  # (T, d_k)
```

Forgetting the $\sqrt{d_k}$ gives the same output only where one weight takes everything; elsewhere the softmax
is sharper than it should be, and more so the larger $d_k$ (a dot product of $d_k$ random unit-variance numbers
has a variance of $d_k$).
""",
        answer=_reference_attention, checker=function(_attention_cases, rel=1e-4, abs=1e-5),
        wrong=_attention_without_scale, parse=None),
]
