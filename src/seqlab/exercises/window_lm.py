"""Exercises of the tutorial "A feedforward window language model" (SLP 6.5, eq. 6.24; Bengio et al. 2003): the
size of the model, a perplexity by hand, the windows of eq. 6.24 as code, and what the temperature does."""

from __future__ import annotations

from seqlab.exercises import Exercise, choice, function, number


def _parameters() -> int:
    from seqlab.models.ffn_lm import FeedforwardLM, FeedforwardLMConfig

    model = FeedforwardLM(FeedforwardLMConfig(vocab_size=62, embedding_size=16, hidden_size=64, context=4,
                                              dropout=0.0))
    return sum(p.numel() for p in model.parameters())


def _perplexity() -> float:
    import math

    p = [0.5, 0.25, 0.125, 0.5]                                     # the model's probability of each token
    return math.exp(-sum(math.log(q) for q in p) / len(p))          # exp of the mean negative log-probability


def _windows():
    import torch

    def windows(tokens, N):
        history = torch.cat([torch.zeros(N - 1, dtype=tokens.dtype), tokens])   # N-1 line ends (id 0) first
        return history.unfold(0, N, 1)                                          # (T, N): one window per position
    return windows


def _window_cases():
    import torch

    return [(torch.tensor([5, 3, 8, 1]), 3), (torch.tensor([7, 2]), 4), (torch.tensor([4, 9, 6]), 1),
            (torch.arange(1, 11), 5)]


def _windows_unpadded(tokens, N):
    return tokens.unfold(0, N, 1)                                   # no line ends before the text: T-N+1 windows


def _temperature() -> str:
    import torch

    z = torch.tensor([0.6, 1.1, -1.5, 1.2, 3.2, -1.1])             # the book's scores of eq. 6.11

    def entropy(temperature: float) -> float:
        p = torch.softmax(z / temperature, dim=0)
        return float(-(p * p.log()).sum())
    before, after = entropy(1.0), entropy(0.5)
    return "lower" if after < before - 1e-6 else "higher" if after > before + 1e-6 else "the same"


EXERCISES = [
    Exercise(
        number=1,
        title="How many parameters has a window LM?",
        kind="derive",
        prompt="""A window LM (eq. 6.24) reads windows of $N = 4$ characters, from a vocabulary of $|V| = 62$,
with embeddings of width $d = 16$, a hidden layer of $H = 64$ units and an output layer to the 62 characters
(weights $U$ and a bias; the embeddings are not tied to the output layer). How many parameters has it? Count $E$,
$W$ and $b$, and $U$ with its bias.""",
        hints=("$E$ has one row of $d$ numbers per token of the vocabulary.",
               "The hidden layer reads the concatenation $e$, which is $N \\cdot d$ wide: $W$ is $H \\times N d$.",
               "$|V| d + (N d H + H) + (H |V| + |V|)$."),
        solution="""$E$: $62 \\cdot 16 = 992$. $W$ and $b$: the hidden layer reads $N d = 64$ numbers, so
$64 \\cdot 64 + 64 = 4{,}160$. $U$ and its bias: $64 \\cdot 62 + 62 = 4{,}030$. In all **9,182**. The window enters
only through $W$: each extra position adds $d H = 1{,}024$ weights, which is how the page's table grows with $N$
(there $d H = 32 \\cdot 128 = 4{,}096$ a position). Forgetting the concatenation (a $W$ of $H \\times d$) gives 6,110.
Check it: `sum(p.numel() for p in FeedforwardLM(LMConfig(arch="ffn", vocab_size=62, embedding_size=16,
hidden_size=64, context=4)).parameters())`.""",
        answer=_parameters,
        checker=number(rel=0, abs=0.5),
        wrong=62 * 16 + 16 * 64 + 64 + 64 * 62 + 62,                # W as H x d: the window's concatenation forgotten
    ),
    Exercise(
        number=2,
        title="A perplexity by hand",
        kind="compute",
        prompt="""A language model reads a text of four tokens (the last one `</s>`) and gives them the
probabilities $0.5$, $0.25$, $0.125$ and $0.5$. What is its perplexity on this text,
$\\exp(-\\frac{1}{T} \\sum_t \\log P(w_t \\mid \\dots))$ (the page's definition, SLP 9.1)? Give it to three
decimals.""",
        hints=("The perplexity is the inverse of the probability of the whole text, normalised by its length: "
               "$(\\prod_t P(w_t))^{-1/T}$.",
               "$\\prod_t P(w_t) = \\frac{1}{2} \\cdot \\frac{1}{4} \\cdot \\frac{1}{8} \\cdot \\frac{1}{2} = "
               "\\frac{1}{128}$; take its fourth root."),
        solution="""The mean negative log-probability is
$-\\frac{1}{4}(\\ln \\frac{1}{2} + \\ln \\frac{1}{4} + \\ln \\frac{1}{8} + \\ln \\frac{1}{2}) = \\frac{7}{4} \\ln 2$
nats (1.75 bits), so the perplexity is $e^{\\frac{7}{4} \\ln 2} = 2^{1.75} = 128^{1/4} = 3.364$. It is the
geometric mean of $1/P$, not the arithmetic mean: $\\frac{1}{4}(2 + 4 + 8 + 2) = 4$ overweights the one unlikely
token. `lm.perplexity(text)` on the page computes the same thing from `lm.score(text)`.""",
        answer=_perplexity,
        checker=number(rel=2e-3),
        wrong=4.0,                                                  # the arithmetic mean of 1/p
    ),
    Exercise(
        number=3,
        title="The windows of eq. 6.24",
        kind="implement",
        prompt="""Write `windows(tokens, N)`: for a 1-D tensor of token ids $w_1, \\dots, w_T$, the $(T, N)$
tensor whose row $t$ is the window the model reads to predict $w_{t+1}$, $[w_{t-N+1}, \\dots, w_t]$ (eq. 6.24),
where the positions before the text hold the line end `</s>`, id 0 (the model's state at the start of a stream).
For `tokens = torch.tensor([5, 3, 8, 1])` and `N = 3` the rows are `[0, 0, 5]`, `[0, 5, 3]`, `[5, 3, 8]`,
`[3, 8, 1]`. Define it with `def windows(tokens, N): ...` and put `answer = windows`.""",
        hints=("First put $N - 1$ zeros before the tokens: `torch.cat([torch.zeros(N - 1, dtype=tokens.dtype), "
               "tokens])`.",
               "`x.unfold(0, N, 1)` cuts a 1-D tensor into all its windows of size N, one step apart: the page's "
               "`history.unfold(1, N, 1)` does it over a batch."),
        solution="""```python
def windows(tokens, N):
    history = torch.cat([torch.zeros(N - 1, dtype=tokens.dtype), tokens])   # the state, then the text
    return history.unfold(0, N, 1)                                          # (T, N)
```

It is what `FeedforwardLM.forward` does over the embeddings (`e.unfold(1, self.window, 1)`), after it puts the
state (the last $N - 1$ tokens, or line ends) before the segment. Without the padding there are only
$T - N + 1$ windows, and the first $N - 1$ tokens are never predicted.""",
        answer=_windows,
        checker=function(_window_cases),
        wrong=_windows_unpadded,
        parse=None,
    ),
    Exercise(
        number=4,
        title="A lower temperature",
        kind="predict",
        prompt="""`generate(..., temperature=T)` samples from $\\mathrm{softmax}(z / T)$ instead of
$\\mathrm{softmax}(z)$. Take the book's scores $z = [0.6, 1.1, -1.5, 1.2, 3.2, -1.1]$ (eq. 6.11). At a temperature
of 0.5 instead of 1, is the entropy of the distribution the model samples from, $-\\sum_i \\hat{y}_i \\log
\\hat{y}_i$, `higher`, `lower` or `the same`? (And what does that do to the generated text?)""",
        hints=("Dividing by $T = 0.5$ doubles every score: the gaps between them double too.",
               "With larger gaps the largest score takes more of the mass ($e^{2 \\cdot 3.2}$ against "
               "$e^{2 \\cdot 1.2}$)."),
        solution="""**Lower**. Dividing the scores by $T < 1$ stretches the gaps between them, and the softmax puts
more of the mass on the top score: $\\hat{y}_5$ goes from 0.74 to 0.96, and the entropy from 0.91 to 0.20
nats. The sampled text is more often the most likely character: more regular, less varied, nearer to greedy
decoding (the limit $T \\to 0$), which on this model loops (`the the the`). $T > 1$ flattens the distribution
towards uniform (the limit $T \\to \\infty$).""",
        answer=_temperature,
        checker=choice("higher", "lower", "the same"),
        wrong="higher",
        parse=str,
    ),
]
