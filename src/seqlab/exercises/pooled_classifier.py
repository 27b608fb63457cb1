"""Exercises of the tutorial "Pooled-embedding classifiers" (SLP 6.5, eqs. 6.21-6.22): pooling a padded batch, where
a pooled classifier's parameters are, the accuracy a model blind to word order can reach, what bigrams change, and
max pooling as code."""

from __future__ import annotations

from seqlab.exercises import Exercise, choice, function, number, numbers_close


def _pooled() -> list[float]:
    import torch

    from seqlab.nn.pooling import max_pool, mean_pool

    h = torch.tensor([[[1.0, -2.0], [-3.0, -4.0], [0.0, 0.0]]])    # "not bad", then one padding position
    lengths = torch.tensor([2])
    return torch.cat([mean_pool(h, lengths)[0], max_pool(h, lengths)[0]]).tolist()


def _parameters() -> int:
    """The pooled classifier's parts (`--arch pooled`): the embeddings, then the feedforward head over their pooled
    vector (tests/test_exercises.py holds it equal to the classifier's count; a shared module does not import a
    family)."""
    from torch import nn

    from seqlab.nn.feedforward import feedforward

    parts = nn.ModuleList([nn.Embedding(5000, 100), feedforward(100, 50, 1, 3, dropout=0.0)])   # E; W, b, U, b
    return sum(p.numel() for p in parts.parameters())


def _cap() -> float:
    plain, negated, twins = 120, 80, 200
    return 100 * (plain + negated + twins / 2) / (plain + negated + twins)   # one of each pair of twins right


def _bigrams() -> str:
    from collections import Counter

    from seqlab.data.words import with_ngrams

    one, other = ("the plot is not dull , it is superb .", "the plot is not superb , it is dull .")
    same = Counter(with_ngrams(one.split(), 2)) == Counter(with_ngrams(other.split(), 2))
    return "no" if same else "yes"


def _max_pool():
    from seqlab.nn.pooling import max_pool

    return max_pool


def _max_pool_cases():
    import torch

    generator = torch.Generator().manual_seed(0)
    cases = []
    for lengths in ([3, 1], [2, 4, 1], [5]):
        h = torch.randn(len(lengths), max(lengths) + 1, 4, generator=generator)
        for b, n in enumerate(lengths):
            h[b, n:] = 10.0                                           # padding positions hold large values
        cases.append((h, torch.tensor(lengths)))
    return cases


def _max_pool_over_padding(h, lengths):
    return h.amax(1)                                                # the padding positions counted


EXERCISES = [
    Exercise(
        number=1,
        title="Pooling a padded document",
        kind="compute",
        prompt="""The document "not bad" has the embeddings $e(\\text{not}) = [1, -2]$ and
$e(\\text{bad}) = [-3, -4]$; in a batch with a longer document it is padded to three positions, the third holding
the padding embedding $[0, 0]$. Compute its mean-pooled vector (eq. 6.21) and its max-pooled vector (eq. 6.22,
per dimension), over its real words only, and give the four numbers $[x_{\\mathrm{mean}}; x_{\\mathrm{max}}]$ as a
list.""",
        hints=("The length of the document is 2: the padding position counts neither in the sum nor in the "
               "division, nor in the max.",
               "The mean is $\\frac{1}{2}(e(\\text{not}) + e(\\text{bad}))$; the max takes the larger of the two "
               "in each dimension."),
        solution="""Over the two real words: $x_{\\mathrm{mean}} = \\frac{1}{2}([1, -2] + [-3, -4]) = [-1, -3]$ and
$x_{\\mathrm{max}} = [\\max(1, -3), \\max(-2, -4)] = [1, -2]$, so **[-1, -3, 1, -2]**. Counting the padding
would give $[-\\frac{2}{3}, -2]$ and $[1, 0]$: the max of a dimension whose every word is negative becomes the
padding's 0. This is why `mean_pool` divides by each row's length and `max_pool` fills the padding with
$-\\infty$ before the max (the page shows both). `mean_pool(h, lengths)` and `max_pool(h, lengths)` with
`h = torch.tensor([[[1., -2.], [-3., -4.], [0., 0.]]])` and `lengths = torch.tensor([2])` check it.""",
        answer=_pooled,
        checker=numbers_close(rel=1e-3, abs=1e-3),
        wrong=[-2 / 3, -2.0, 1.0, 0.0],                             # the padding position counted
        parse=lambda text: [float(x) for x in text.strip("[]() ").replace(",", " ").split()],
    ),
    Exercise(
        number=2,
        title="Where are a pooled classifier's parameters?",
        kind="derive",
        prompt="""A pooled classifier (`--arch pooled`) over a vocabulary of 5,000 words has embeddings of 100
($E$: one row per word), one hidden layer of 50 ReLU units ($W$, $b$) and an output layer to 3 classes ($U$ and
its bias), eqs. 6.19-6.22. How many parameters has it? (Pooling has none.) What share of them are embeddings?""",
        hints=("Three parts: $E$ is $5{,}000 \\times 100$; the hidden layer reads the pooled vector, 100 wide.",
               "$|V| d + (d H + H) + (H C + C)$ with $|V| = 5{,}000$, $d = 100$, $H = 50$, $C = 3$."),
        solution="""$E$: $5{,}000 \\cdot 100 = 500{,}000$. The hidden layer: $100 \\cdot 50 + 50 = 5{,}050$. The output
layer: $50 \\cdot 3 + 3 = 153$. In all **505,203**, of which 99% are the embeddings: a pooled classifier is almost
all lookup table, which is why it trains fast (a step updates only the rows of the words in the batch) and why
pretrained vectors (`--vectors`) help it so much. The page's small model has 4,258 (98 words of 32, 32 hidden,
2 classes). Forgetting the embeddings gives 5,203. Check: `sum(p.numel() for p in
Classifier(ClassifierConfig(arch="pooled", vocab_size=5000, embedding_size=100, hidden_size=50,
num_labels=3)).parameters())`.""",
        answer=_parameters,
        checker=number(rel=0, abs=0.5),
        wrong=100 * 50 + 50 + 50 * 3 + 3,                           # the embeddings forgotten
    ),
    Exercise(
        number=3,
        title="The most a bag of words can score",
        kind="compute",
        prompt="""A test set has 120 plain reviews, 80 negated ones and 200 twins (100 pairs: the same words in
two orders, with opposite labels), as in the page's section on word order. A pooled classifier gets every plain
and every negated review right. What is the highest test accuracy (in percent) it can reach?""",
        hints=("Twins have the same bag of words, so the same pooled vector, so the same prediction.",
               "Of each pair of twins exactly one is right, whatever the model says."),
        solution="""Every plain and negated review right: 200. Of the 100 pairs of twins, whatever the model
answers for a pair, it answers it for both, and their labels differ: exactly one right, 100. So
$(120 + 80 + 100) / 400 = $ **75%**. The page computes the same cap for its test set (with its own counts) and
finds the pooled classifier on it; a model that reads the words in order (the BiLSTM) can pass it. Counting the
twins as all wrong gives 50%; as all right, 100%: neither can happen.""",
        answer=_cap,
        checker=number(rel=0, abs=0.1, unit="%"),
        wrong=50.0,                                                 # every twin counted wrong
    ),
    Exercise(
        number=4,
        title="Do bigrams tell twins apart?",
        kind="predict",
        prompt="""With `--ngrams 2` the classifier pools the embeddings of a review's words *and* of its bigrams
(fastText's bag of n-grams: "the plot", "plot is", ...). Take the twins "the plot is not dull , it is superb ."
(`pos`) and "the plot is not superb , it is dull ." (`neg`). Can a pooled classifier with bigrams give them
different answers: `yes` or `no`?""",
        hints=("Two reviews get the same pooled vector exactly when they have the same bag of tokens. Are their bags "
               "of words and bigrams the same?",
               "Look at the bigrams that contain \"not\"."),
        solution="""**Yes**. Their words are the same, but not their bigrams: "not dull" and "superb ." in the
first, "not superb" and "dull ." in the second. Their bags differ, so their mean embeddings can differ, and a model
can learn that "not dull" is positive. Bigrams give the bag some local order, enough for the scope of "not" over
the next word, though not for every twin: a "but" whose clauses are long enough, or "although" at the start, needs
more than two words of context. `with_ngrams` in `seqlab.data.words` makes the bag: compare
`Counter(with_ngrams(text.split(), 2))` for the two.""",
        answer=_bigrams,
        checker=choice("yes", "no"),
        wrong="no",
        parse=str,
    ),
    Exercise(
        number=5,
        title="Max pooling over a padded batch",
        kind="implement",
        prompt="""Write `max_pool(h, lengths)`: for a padded batch `h` of shape $(B, T, D)$ and the length of each
row `lengths` $(B,)$ (each at least 1), the $(B, D)$ element-wise maximum of eq. 6.22 over each row's real
positions only (the padding positions may hold anything, even large values). Define it with
`def max_pool(h, lengths): ...` and put `answer = max_pool`.""",
        hints=("A mask of the real positions: `torch.arange(T)[None, :] < lengths[:, None]`, shape $(B, T)$.",
               "Fill the padding with $-\\infty$ before the max: `h.masked_fill(~mask[:, :, None], float('-inf'))"
               ".amax(1)`."),
        solution="""```python
def max_pool(h, lengths):
    T = h.size(1)
    mask = torch.arange(T)[None, :] < lengths[:, None]                  # (B, T): the real positions
    return h.masked_fill(~mask[:, :, None], float("-inf")).amax(1)      # (B, D)
```

seqlab's `max_pool` (the page shows its source) does the same, and also gives an empty row (length 0) the vector 0
instead of $-\\infty$. `h.amax(1)` alone takes the padding into account, which is wrong as soon as a padding
position is larger than every real one.""",
        answer=_max_pool,
        checker=function(_max_pool_cases),
        wrong=_max_pool_over_padding,
        parse=None,
    ),
]
