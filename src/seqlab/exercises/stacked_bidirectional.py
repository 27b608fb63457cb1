"""Exercises of the tutorial "Stacked and bidirectional RNNs" (docs/tutorials/stacked-bidirectional.md): the size
of a stacked BiLSTM, what each direction of a stack reads, the CRF's score of a tag sequence and its forward
algorithm, and the best a tagger that reads the word alone can do."""

from __future__ import annotations

import tempfile
from collections import Counter

from seqlab.exercises import Exercise, choice, function, number, one_paragraph

E, H = 32, 32       # the POS tagger's embedding size and hidden size per direction


def _bilstm_parameters() -> int:
    """A 2-layer BiLSTM's parameters with one bias per gate, as in eqs. 13.20-13.27 (PyTorch's LSTM, which seqlab's
    stack uses, keeps two: b_ih and b_hh, whose sum is the book's b; the second is left out of the count)."""
    from seqlab.nn.encoders import RecurrentEncoder

    encoder = RecurrentEncoder("lstm", input_size=E, hidden_size=H, num_layers=2, bidirectional=True)
    return sum(p.numel() for name, p in encoder.named_parameters() if "bias_hh" not in name)


def _unchanged_half() -> str:
    """Which half of a 2-layer BiLSTM's top states at positions 2..T stays put when the first token changes."""
    import torch

    from seqlab.nn.encoders import RecurrentEncoder

    torch.manual_seed(0)
    x = torch.randn(2, 6, 8)                                              # (B, T, I)
    changed = x.clone()
    changed[:, 0] = torch.randn(2, 8)                                     # another first token
    encoder = RecurrentEncoder("lstm", input_size=8, hidden_size=5, num_layers=2, bidirectional=True).eval()
    with torch.no_grad():
        moved = (encoder(changed)[0] - encoder(x)[0])[:, 1:].abs()        # (B, T-1, 2H): positions 2..T
    forward, backward = moved[..., :5].max().item() == 0, moved[..., 5:].max().item() == 0
    return {(True, True): "both", (True, False): "forward", (False, True): "backward"}.get((forward, backward),
                                                                                          "neither")


# the CRF of exercises 3 and 4: tags O, B-PER, I-PER (0, 1, 2), the sentence "Ada Lovelace wrote"
EMISSIONS = [[0.5, 2.0, -1.0], [0.2, 0.1, 1.5], [1.0, -0.5, 0.3]]        # e_t[y], t = 1..3
TRANSITIONS = [[0.5, 0.0, -2.0], [-0.5, -1.0, 1.0], [0.2, -0.3, 0.4]]     # A[y_{t-1}, y_t]
START, END = [0.1, 0.3, -1.0], [0.2, -0.1, 0.0]


def _crf(transitions, start, end):
    import torch

    from seqlab.nn.crf import CRF

    crf = CRF(len(start))
    with torch.no_grad():
        crf.transitions.copy_(torch.as_tensor(transitions, dtype=torch.float32))
        crf.start.copy_(torch.as_tensor(start, dtype=torch.float32))
        crf.end.copy_(torch.as_tensor(end, dtype=torch.float32))
    return crf


def _score() -> float:
    """s(B-PER I-PER O) of the CRF above, by seqlab.nn.crf.CRF.score."""
    import torch

    crf = _crf(TRANSITIONS, START, END)
    tags = torch.tensor([[1, 2, 0]])                                      # (B=1, T=3)
    mask = torch.ones(1, 3, dtype=torch.bool)
    with torch.no_grad():
        return round(crf.score(torch.tensor([EMISSIONS]), tags, mask).item(), 6)


def _log_z_reference():
    """log Z by seqlab's CRF (the forward algorithm): e (T, K), A (K, K), start (K,), end (K,) -> a number."""
    import torch

    def log_z(e, A, start, end):
        crf = _crf(A, start, end)
        with torch.no_grad():
            return crf.log_partition(e[None], torch.ones(1, e.size(0), dtype=torch.bool))[0]
    return log_z


def _log_z_cases():
    import torch

    generator = torch.Generator().manual_seed(44)
    cases = [(torch.tensor(EMISSIONS), torch.tensor(TRANSITIONS), torch.tensor(START), torch.tensor(END))]
    for T, K in ((1, 3), (5, 4), (12, 9)):
        cases.append((torch.randn(T, K, generator=generator), torch.randn(K, K, generator=generator),
                      torch.randn(K, generator=generator), torch.randn(K, generator=generator)))
    return cases


def _log_z_without_end(e, A, start, end):
    """The forward algorithm that forgets the end scores (the wrong answer of exercise 4)."""
    import torch

    alpha = start + e[0]
    for t in range(1, e.size(0)):
        alpha = torch.logsumexp(alpha[:, None] + A, dim=0) + e[t]
    return torch.logsumexp(alpha, dim=0)


def _can_counts() -> Counter:
    """The tags of *can* in the training split of `seqlab examples pos --size tiny` (what the page prints): the
    FORM and UPOS columns of its CoNLL-U word rows, read here (the CoNLL readers are the tagger family's) from
    the file seqlab has just written, which has no multiword ranges or empty nodes."""
    import seqlab.examples as examples

    with tempfile.TemporaryDirectory() as folder:
        files = examples.write("pos", folder, size="tiny")
        rows = [line.split("\t") for line in files["train"].read_text(encoding="utf-8").splitlines()
                if line and not line.startswith("#")]
    return Counter(upos for _, form, _, upos, *_ in rows if form.lower() == "can")


def _word_alone_ceiling() -> float:
    counts = _can_counts()
    return round(max(counts.values()) / sum(counts.values()), 4)


EXERCISES = [
    Exercise(
        number=1, title="The size of a stacked BiLSTM", kind="derive",
        prompt=one_paragraph(r"""
An LSTM layer (SLP eqs. 13.20-13.27) has four gates or candidates ($f$, $g$, $i$, $o$), each with its own input
weights $W$, recurrent weights $U$ and bias $b$. The POS tagger of this page reads embeddings of size $E = 32$
with $H = 32$ units per direction. How many parameters does a **two-layer** BiLSTM of that size have (both layers,
both directions; one bias vector per gate, as in the book)?
"""),
        hints=(
            "One direction of one layer whose inputs have size $n$: each of the 4 gates has $W$ ($H \\times n$), "
            "$U$ ($H \\times H$) and $b$ ($H$): $4(H(n + H) + H)$.",
            "A bidirectional layer is two such directions. What are the inputs of the second layer: the embeddings, "
            "or something else? How wide are they?",
            "The second layer reads $h_t = [h^f_t ; h^b_t]$ of the first, so its $n$ is $2H = 64$, not $E$.",
        ),
        solution=r"""
One direction of a layer with inputs of size $n$ has $4(H(n + H) + H)$ parameters: $W_f, W_g, W_i, W_o$
($H \times n$ each), $U_f, \dots, U_o$ ($H \times H$) and four biases.

- layer 1 reads the embeddings, $n = E = 32$: $4(32 \cdot 64 + 32) = 8{,}320$ per direction, $16{,}640$ for both;
- layer 2 reads the concatenated states of layer 1, $n = 2H = 64$: $4(32 \cdot 96 + 32) = 12{,}416$ per direction,
  $24{,}832$ for both.

In all **41,472**. Taking layer 2 as another copy of layer 1 (33,280) forgets that a stacked bidirectional layer
reads both directions of the layer below. PyTorch's `nn.LSTM`, which seqlab's `RecurrentStack` wraps, keeps two
bias vectors per gate ($b_{ih}$ and $b_{hh}$, whose sum is the book's $b$), so
`sum(p.numel() for p in RecurrentEncoder("lstm", 32, 32, 2, bidirectional=True).parameters())` says
$41{,}472 + 4 \cdot 4 \cdot 32 = 41{,}984$.
""",
        answer=_bilstm_parameters, checker=number(rel=0, abs=0.5), wrong=33280),
    Exercise(
        number=2, title="What the second layer of a BiLSTM reads", kind="predict",
        prompt=one_paragraph(r"""
The page changed the *last* token of a sentence and watched the states before it. Now change the **first** token
of a 6-token sentence fed to a **two-layer** BiLSTM, and look at the top layer's states $h_t = [h^f_t ; h^b_t]$ at
positions $t = 2 \dots 6$. Which half stays exactly as it was: `"forward"`, `"backward"`, `"both"` or
`"neither"`? (Try it: the page's check cell, with `changed[:, 0]` in place of `changed[:, -1]`.)
"""),
        hints=(
            "With one layer, the backward direction at position $t$ has read $x_t \\dots x_n$ only: for $t \\ge 2$ "
            "it never saw $x_1$.",
            "The second layer's backward direction at $t$ reads the first layer's states at $t \\dots n$: both "
            "halves of them. Has the first layer's forward half at those positions seen $x_1$?",
        ),
        solution=r"""
**Neither.** With one layer the answer would be the backward half: $h^b_t$ reads $x_t \dots x_n$ and never sees
$x_1$ for $t \ge 2$. But the second layer reads $h^{(1)}_t = [h^{f(1)}_t ; h^{b(1)}_t]$, and $h^{f(1)}_t$ has read
$x_1 \dots x_t$, so the first token reaches the second layer's backward direction at every position through the
first layer's forward states. From the second layer up, every state of a stacked BiLSTM depends on the whole
sentence.
""",
        answer=_unchanged_half, checker=choice("forward", "backward", "both", "neither"), wrong="backward",
        parse=str),
    Exercise(
        number=3, title="The CRF's score of a tag sequence", kind="compute",
        prompt=one_paragraph(r"""
A CRF tags "Ada Lovelace wrote" with the tags O, B-PER, I-PER (indices 0, 1, 2). The encoder's emission scores
$e_t$, the transition scores $A[y_{t-1}, y_t]$ (row: the tag before) and the start and end scores are

$e = \begin{pmatrix} 0.5 & 2.0 & -1.0 \\ 0.2 & 0.1 & 1.5 \\ 1.0 & -0.5 & 0.3 \end{pmatrix}$ (row $t$: $e_t$),
$A = \begin{pmatrix} 0.5 & 0.0 & -2.0 \\ -0.5 & -1.0 & 1.0 \\ 0.2 & -0.3 & 0.4 \end{pmatrix}$,
$\mathit{start} = (0.1, 0.3, -1.0)$ and $\mathit{end} = (0.2, -0.1, 0.0)$.
What is the score $s(y)$ of the page's equation for $y$ = B-PER I-PER O?
"""),
        hints=(
            "Four kinds of terms: the start score of $y_1$, one emission per token, one transition per adjacent "
            "pair, the end score of $y_3$.",
            "$s(y) = \\mathit{start}[\\text{B}] + e_1[\\text{B}] + A[\\text{B}, \\text{I}] + e_2[\\text{I}] + "
            "A[\\text{I}, \\text{O}] + e_3[\\text{O}] + \\mathit{end}[\\text{O}]$.",
        ),
        solution=r"""
$s(y) = \underbrace{0.3}_{\mathit{start}[B]} + \underbrace{2.0}_{e_1[B]} + \underbrace{1.0}_{A[B, I]} +
\underbrace{1.5}_{e_2[I]} + \underbrace{0.2}_{A[I, O]} + \underbrace{1.0}_{e_3[O]} + \underbrace{0.2}_{\mathit{end}[O]}
= 6.2$. Without the start and end scores one gets 5.7. seqlab computes the same with `CRF.score` (the training
loss is $\log Z - s(y)$, `CRF.nll`).
""",
        answer=_score, checker=number(rel=0, abs=1e-3), wrong=5.7),
    Exercise(
        number=4, title="The forward algorithm", kind="implement",
        prompt=one_paragraph(r"""
Write the forward algorithm that gives $\log Z = \log \sum_{y'} e^{s(y')}$ for one sentence, without summing
over the $K^n$ sequences one by one (the recursion is in the docstring of `seqlab.nn.crf`; the page shows
`CRF.forward_scores`): a function `log_z(e, A, start, end)` of a tensor `e` (T, K) of emission scores, `A` (K, K),
`start` and `end` (K,), that returns a number (a 0-d tensor). Define it in a cell (`def log_z(e, A, start, end):
...`), then put `answer = log_z`.

The check runs it on the CRF of exercise 3 and on random ones (one of a single token, one of 12 tokens and 9
tags) against seqlab's `CRF.log_partition`.
"""),
        hints=(
            "$\\alpha_t[j] = \\operatorname{logsumexp}_i(\\alpha_{t-1}[i] + A[i, j]) + e_t[j]$: "
            "`torch.logsumexp(alpha[:, None] + A, dim=0) + e[t]`.",
            "Don't forget the end scores: $\\log Z = \\operatorname{logsumexp}_j(\\alpha_T[j] + \\mathit{end}[j])$. "
            "A sentence of one token has no transition at all.",
        ),
        solution=r"""
```python
def log_z(e, A, start, end):
    alpha = start + e[0]                                         # (K,)
    for t in range(1, e.size(0)):
        alpha = torch.logsumexp(alpha[:, None] + A, dim=0) + e[t]  # (K,): sum over the tag before, in logs
    return torch.logsumexp(alpha + end, dim=0)
```

Each step costs $K^2$ additions, so a sentence costs $nK^2$ instead of the $K^n$ sequences of the sum: for 12
tokens and 9 tags, 972 against 282,429,536,481. Working in logs (`logsumexp`) keeps the sums finite. Dropping the
end scores is the usual slip: it gives another number whenever `end` is not all zeros.
""",
        answer=_log_z_reference, checker=function(_log_z_cases, rel=1e-4, abs=1e-4), wrong=_log_z_without_end,
        parse=None),
    Exercise(
        number=5, title="The best a tagger that reads the word alone can do", kind="compute",
        prompt=one_paragraph(r"""
The tagger with `--window 0` sees each word alone, so it gives every occurrence of a word form the same tag.
The page printed the tags of *can* in the training split (`can {...}`). On the training split's *can* tokens, what
is the highest accuracy such a tagger can reach (a share between 0 and 1)?
"""),
        hints=(
            "It can give *can* only one tag. Which one would you choose, to be right as often as possible?",
            "The commonest tag of *can*: its count divided by all the *can* tokens.",
        ),
        solution=r"""
A tagger that sees only the form gives *can* its commonest tag, and is right exactly as often as that tag is:
$\max_y \text{count}(\textit{can}, y) / \text{count}(\textit{can})$ (the counts the page prints). That is the
ceiling of the word-alone bars in the per-word figure; only context (the LSTM's left words, the BiLSTM's both
sides) can do better.
""",
        answer=_word_alone_ceiling, checker=number(rel=0, abs=0.01), wrong=round(1 / 3, 4)),
]
