"""Exercises of the tutorial "Encoder-decoders and attention" (SLP 13.7-13.8): dot-product attention by hand, what
the padding mask does, the size of the bilinear score, greedy against beam search on a scripted model, the length
penalty, and the page's BLEU-by-length figure."""

from __future__ import annotations

import math

from seqlab.exercises import Exercise, choice, number, numbers_close

# a scripted decoder for exercise 4: P(next token | previous token), ids as seqlab's (<s> 2, </s> 3), "a" 5, "b" 6
_START, _END, _A, _B = 2, 3, 5, 6
_TREE = {_START: {_A: 0.5, _B: 0.4, _END: 0.1}, _A: {_END: 0.4, _A: 0.3, _B: 0.3}, _B: {_END: 0.9, _A: 0.05, _B: 0.05}}


def _context():
    import torch

    from seqlab.nn.cross_attention import Attention

    query = torch.tensor([[1.0, 2.0]])                                          # h_{i-1}^d, (1, 2)
    states = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]])               # h_1^e, h_2^e, h_3^e, (1, 3, 2)
    context, _ = Attention("dot", 2, 2)(query, states, torch.ones(1, 3, dtype=torch.bool))
    return context[0].tolist()                                                  # eq. 13.37


def _unmasked() -> str:
    import torch

    from seqlab.nn.cross_attention import Attention

    query = torch.tensor([[1.0, 0.0, 1.0]])
    states = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 1.0], [5.0, 5.0, 5.0]]])     # the page's example
    attention = Attention("dot", 3, 3)
    _, masked = attention(query, states, torch.tensor([[True, True, False]]))
    _, unmasked = attention(query, states, torch.ones(1, 3, dtype=torch.bool))
    before, after = float(masked[0, 0]), float(unmasked[0, 0])
    return "lower" if after < before - 1e-6 else "higher" if after > before + 1e-6 else "the same"


def _bilinear() -> int:
    from seqlab.nn.cross_attention import Attention

    width = 2 * 128                  # a bidirectional encoder of hidden size 128: [h^f; h^b]; the decoder as wide
    return sum(p.numel() for p in Attention("bilinear", width, width).parameters())


class _Scripted:
    """A decoder whose next-token probabilities depend on the previous token only (`_TREE`)."""

    start_token = _START

    def step(self, tokens, state, need_weights=False):
        import torch

        logits = torch.full((len(tokens), 7), -1e9)                               # (B, V): log p, ~0 elsewhere
        for row, token in enumerate(tokens.tolist()):
            for word, p in _TREE[token].items():
                logits[row, word] = math.log(p)
        return logits, tokens, None

    def reorder_state(self, state, index):
        return state[index]


def _beam_probability() -> float:
    import torch

    from seqlab.decoding.core import best_first
    from seqlab.decoding.search import beam_steps

    start = torch.tensor([_START])
    found = beam_steps(_Scripted(), start, start, torch.tensor([5]), 2, 1.0)     # K = 2, alpha = 1
    return math.exp(best_first(found[0], 1)[0].score)


def _tie() -> float:
    from seqlab.decoding.core import normalized

    # log p -2.4 with 3 words + </s> (n = 4), -4.0 with 7 words + </s> (n = 8); the alpha where they rank equal
    low, high = 0.0, 5.0
    for _ in range(60):
        alpha = (low + high) / 2
        if normalized(-2.4, 4, alpha) > normalized(-4.0, 8, alpha):      # the shorter still ranks first
            low = alpha
        else:
            high = alpha
    return (low + high) / 2


EXERCISES = [
    Exercise(
        number=1,
        title="Dot-product attention by hand",
        kind="compute",
        prompt="""The decoder's previous state is $h_{i-1}^d = [1, 2]$ and the encoder states are
$h_1^e = [1, 0]$, $h_2^e = [0, 1]$, $h_3^e = [1, 1]$ (no padding). Compute the context vector $c_i$ of
eqs. 13.35-13.37 (dot-product scores, softmax, weighted sum): `answer = [c1, c2]`, to two decimals.""",
        hints=("The scores are the dot products $h_{i-1}^d \\cdot h_j^e$: 1, 2 and 3.",
               "$\\alpha = \\mathrm{softmax}([1, 2, 3]) \\approx [0.090, 0.245, 0.665]$; then "
               "$c_i = \\sum_j \\alpha_{ij} h_j^e$."),
        solution="""Scores (13.35): $[1 \\cdot 1 + 2 \\cdot 0,\\; 1 \\cdot 0 + 2 \\cdot 1,\\; 1 + 2] = [1, 2, 3]$.
Weights (13.36): $e^1, e^2, e^3 = 2.718, 7.389, 20.086$, sum 30.19, so $\\alpha = [0.090, 0.245, 0.665]$.
Context (13.37): $0.090 \\cdot [1, 0] + 0.245 \\cdot [0, 1] + 0.665 \\cdot [1, 1] = [0.755, 0.910]$.
Dividing the scores by their sum instead of taking the softmax ($[1/6, 2/6, 3/6]$) gives $[0.67, 0.83]$: the
softmax sharpens the weights towards the best-scoring state. In code:
`Attention("dot", 2, 2)(torch.tensor([[1., 2.]]), torch.tensor([[[1., 0.], [0., 1.], [1., 1.]]]),
torch.ones(1, 3, dtype=torch.bool))[0]`.""",
        answer=_context,
        checker=numbers_close(rel=1e-2, abs=5e-3),
        wrong=[4 / 6, 5 / 6],
        parse=lambda text: [float(x) for x in text.strip("[]() ").replace(",", " ").split()],
    ),
    Exercise(
        number=2,
        title="Without the mask",
        kind="predict",
        prompt="""In the page's check of `Attention`, the third encoder state $[5, 5, 5]$ is padding, and the mask
gives it weight 0, so $\\alpha_{i1} = 0.5$. Suppose the mask were left out (every position marked real). Would
the weight $\\alpha_{i1}$ on $h_1^e$ be `"higher"`, `"lower"` or `"the same"`?""",
        hints=("Compute the padding position's score $h_{i-1}^d \\cdot [5, 5, 5]$ and compare it with the real "
               "ones (1 and 1).",
               "The softmax shares one unit of weight among all positions it sees."),
        solution="""The padding's score is $[1, 0, 1] \\cdot [5, 5, 5] = 10$ against 1 and 1 for the real states.
Unmasked, $\\alpha = \\mathrm{softmax}([1, 1, 10]) \\approx [0.0001, 0.0001, 0.9998]$: $\\alpha_{i1}$ falls from
0.5 to about $10^{-4}$ (**lower**), and the context becomes almost $[5, 5, 5]$, a vector of padding. That is why
the mask sets the padding scores to $-\\infty$ before the softmax: a padded sentence must get the same context
as the same sentence alone in its batch.""",
        answer=_unmasked,
        checker=choice("higher", "lower", "the same"),
        wrong="higher",
        parse=str,
    ),
    Exercise(
        number=3,
        title="The size of the bilinear score",
        kind="derive",
        prompt="""The page's encoder is a bidirectional GRU of hidden size $H = 128$, and its decoder is as wide
as the context. How many parameters does the bilinear score $h_{i-1}^d\\, W_s\\, h_j^e$ (eq. 13.38,
`--attention bilinear`) add to the model, compared with the dot product (13.35)?""",
        hints=("The dot product has no parameters. $W_s$ is a matrix between a decoder state and an encoder state.",
               "How wide is an encoder state $h_j^e$ when the encoder reads both ways? And the decoder state?"),
        solution="""An encoder state is the forward and backward states side by side, $2H = 256$ numbers, and the
decoder is as wide as the context, 256 too. $W_s$ is $256 \\times 256 = 65{,}536$ parameters (seqlab's
`Attention("bilinear", 256, 256)` holds exactly that, without a bias); the dot product adds none. Forgetting the
second direction gives $256 \\times 128$ or $128 \\times 128$.""",
        answer=_bilinear,
        checker=number(rel=0, abs=0.5),
        wrong=256 * 128,
    ),
    Exercise(
        number=4,
        title="Greedy against beam search",
        kind="compute",
        prompt="""A decoder over the words `a`, `b` and `</s>` gives, at the first step, $P(a) = 0.5$, $P(b) = 0.4$,
$P(\\text{</s>}) = 0.1$. After `a` it gives $P(\\text{</s>}) = 0.4$, $P(a) = P(b) = 0.3$; after `b` it gives
$P(\\text{</s>}) = 0.9$, $P(a) = P(b) = 0.05$. Greedy decoding writes `a </s>`, of probability 0.2. What is the
probability of the output that beam search with $K = 2$ returns (length penalty $\\alpha = 1$)?""",
        hints=("At the first step the beam keeps the two best prefixes, `a` and `b`.",
               "Extend both by every word and keep the best: which hypotheses end with `</s>` at step 2, and with "
               "what probabilities? Both have 2 tokens, so $\\alpha$ does not change their order."),
        solution="""Step 1 keeps `a` (0.5) and `b` (0.4). Step 2 extends them: `a </s>` 0.2, `a a` 0.15,
`a b` 0.15, `b </s>` $0.4 \\times 0.9 = 0.36$, `b a` and `b b` 0.02. The two best are both finished, `b </s>` (0.36)
and `a </s>` (0.2), so the search stops and returns `b </s>`, **0.36**. Greedy committed to `a` at the first
step, the likelier word, and could not see that `b` leads to a much likelier whole output. seqlab's own
`seqlab.decoding.search.beam_steps`, run on a scripted model with these probabilities, finds the same.""",
        answer=_beam_probability,
        checker=number(rel=1e-3),
        wrong=0.2,
    ),
    Exercise(
        number=5,
        title="Where the length penalty tips the balance",
        kind="derive",
        prompt="""Beam search has finished two hypotheses of one sentence: a short one, 3 words and `</s>`, with
$\\log p = -2.4$, and a long one, 7 words and `</s>`, with $\\log p = -4.0$. seqlab ranks them by
$\\log p / \\text{length}^\\alpha$, where the length counts the `</s>`. With $\\alpha = 0$ the short one wins.
Above which $\\alpha$ does the long one win? Give $\\alpha$ to two decimals.""",
        hints=("They tie where $-2.4 / 4^\\alpha = -4.0 / 8^\\alpha$.",
               "Rearrange to $(8/4)^\\alpha = 4.0 / 2.4$ and take logarithms."),
        solution="""The tie: $2.4 / 4^\\alpha = 4.0 / 8^\\alpha \\iff 2^\\alpha = 4.0 / 2.4 = 5/3 \\iff
\\alpha = \\log_2(5/3) \\approx 0.74$. Above it the long hypothesis ranks first: at the default $\\alpha = 1$,
$-2.4/4 = -0.60$ against $-4.0/8 = -0.50$. Counting the length without `</s>` (3 and 7) gives
$\\log(5/3)/\\log(7/3) \\approx 0.60$. Without normalisation ($\\alpha = 0$) beam search favours short outputs,
since every extra token multiplies in a probability below 1.""",
        answer=_tie,
        checker=number(rel=1e-2),
        wrong=math.log(4.0 / 2.4) / math.log(7 / 3),
    ),
    Exercise(
        number=6,
        title="Reading the length figure",
        kind="read a plot",
        prompt="""In the figure of test BLEU by source length, in which length bucket does the model **without**
attention score lowest: `"4-7"`, `"8-10"`, `"11-13"` or `"14-20"`? And think about why, before you check.""",
        hints=("Follow the line of the model without attention from left to right.",
               "Everything the decoder knows about the source passes through the one vector $c = h_n^e$."),
        solution="""**14-20**: the line without attention falls steadily with the source length (from about 70 BLEU
on the shortest sentences to about 20 on the longest), while the line with attention stays high at every length.
The fixed context $c$ of eq. 13.32 must hold the whole source, and a longer source has more to hold; with
attention the decoder reads back the encoder state it needs at each step (13.37).""",
        answer=lambda: "14-20",
        checker=choice("4-7", "8-10", "11-13", "14-20"),
        wrong="4-7",
        parse=str,
    ),
]
