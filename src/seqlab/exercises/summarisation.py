"""Exercises of the tutorial "Summarisation" (SLP 13.7-13.8 with See et al. 2017): the pointer-generator's mixture
(their eq. 9) by hand, what p_gen = 1 leaves of copying, the coverage loss (their eqs. 10 and 12), ROUGE-2 by
hand, and the page's scores of the plain and the copy model."""

from __future__ import annotations

import math

from seqlab.exercises import Exercise, choice, number

# exercises 1 and 2: a source of five words, "friday" twice; the target vocabulary has V = 6 words, and "zoltan"
# (the source's last word but one, out of the vocabulary) gets the extended id V = 6
_SOURCE = ["call", "on", "friday", "or", "friday"]
_FRIDAY = 4                                          # "friday"'s id in the vocabulary
_ATTENTION = [0.1, 0.1, 0.5, 0.1, 0.2]               # a_i^t over the five source words
_P_VOCAB = [0.0, 0.0, 0.1, 0.2, 0.4, 0.3]            # P_vocab(w) over the V = 6 words


def _mixture(p_gen: float, source_ids: list[int], vocabulary: list[float]):
    """log P(w) of eq. 9, from seqlab's own RNNEncoderDecoder._final_distribution, for a p_gen given directly."""
    from types import SimpleNamespace

    import torch

    from seqlab.models.rnn_seq2seq import RNNEncoderDecoder

    gate = math.log(p_gen / (1 - p_gen)) if p_gen < 1 else 80.0          # sigmoid(gate) = p_gen
    fake = SimpleNamespace(generation_gate=lambda inputs: torch.full((*inputs.shape[:-1], 1), gate))
    logits = torch.tensor([vocabulary]).clamp_min(1e-30).log()            # softmax(log P) = P, (1, V)
    a = torch.tensor([_ATTENTION])                                        # (1, S)
    empty = torch.zeros(1, 1)
    return RNNEncoderDecoder._final_distribution(fake, logits, a, empty, empty, empty, torch.tensor([source_ids]))


def _friday() -> float:
    log_p = _mixture(0.3, [0, 1, _FRIDAY, 2, _FRIDAY], _P_VOCAB)        # "call" "on" friday "or" friday
    return float(log_p[0, _FRIDAY].exp())


def _zoltan() -> str:
    log_p = _mixture(1.0, [0, 1, 6, 2, _FRIDAY], _P_VOCAB)              # "zoltan" at position 3: extended id 6
    return "yes" if float(log_p[0, 6].exp()) > 1e-6 else "no"


COVERAGE_ATTENTION = [[[0.8, 0.2, 0.0], [0.6, 0.2, 0.2], [0.1, 0.1, 0.8]]]     # (B=1, T=3, S=3)


def _coverage_loss() -> float:
    """Eq. 12 summed over t, as the seq2seq family's `coverage_losses` computes it (tests/test_exercises.py holds
    the two equal; a shared module does not import a family)."""
    import torch

    a = torch.tensor(COVERAGE_ATTENTION)
    c = torch.cumsum(a, dim=1) - a                                              # c^t = Σ_{t' < t} a^{t'} (eq. 10)
    return float(torch.minimum(a, c).sum())                                     # Σ_t Σ_i min(a_i^t, c_i^t)


def _rouge2() -> float:
    from seqlab.metrics import rouge

    return rouge(["the call moved to friday afternoon"], ["call moved to friday"])["rouge2"]


EXERCISES = [
    Exercise(
        number=1,
        title="The pointer-generator's mixture",
        kind="compute",
        prompt="""The source is `call on friday or friday`, and at this step the attention over its five words is
$a^t = [0.1, 0.1, 0.5, 0.1, 0.2]$. The vocabulary distribution gives "friday" $P_{vocab}(\\text{friday}) = 0.4$,
and the generation probability is $p_{gen} = 0.3$. With eq. 9 of See et al.,
$P(w) = p_{gen} P_{vocab}(w) + (1 - p_{gen}) \\sum_{i: x_i = w} a_i^t$, compute $P(\\text{friday})$.""",
        hints=("The first term is $0.3 \\times 0.4$.",
               "\"friday\" occurs twice in the source: the sum runs over both positions."),
        solution="""$P(\\text{friday}) = 0.3 \\times 0.4 + 0.7 \\times (0.5 + 0.2) = 0.12 + 0.49 = 0.61$. The copy
term sums the attention of every position that holds the word, so a word named twice in the source can be
copied with the weight of both. Taking only the first occurrence gives $0.12 + 0.35 = 0.47$. seqlab's
`RNNEncoderDecoder._final_distribution` computes the same with `scatter_add` over the source's ids.""",
        answer=_friday,
        checker=number(rel=1e-3),
        wrong=0.47,
    ),
    Exercise(
        number=2,
        title="When p_gen is 1",
        kind="predict",
        prompt="""The copy model of the page writes "zoltan", a name that is not in its target vocabulary, by
copying it from the email. Suppose its generation gate were stuck at $p_{gen} = 1$ (eq. 8's sigmoid saturated).
Could it still write "zoltan"? Answer `"yes"` or `"no"`.""",
        hints=("Write eq. 9 with $p_{gen} = 1$: what is left of the copy term?",
               "What is $P_{vocab}$ of a word outside the vocabulary?"),
        solution="""**No.** With $p_{gen} = 1$, eq. 9 is $P(w) = P_{vocab}(w)$: the copy term has the factor
$1 - p_{gen} = 0$. "zoltan" has only its extended id $V$ (for this one email), which $P_{vocab}$ does not cover, so
its probability is 0, whatever the attention. The model is then the plain attention model, which can write a word
outside its vocabulary only as `<unk>`. A learned $p_{gen}$ near 0 on such words is what lets the model copy
them.""",
        answer=_zoltan,
        checker=choice("yes", "no"),
        wrong="yes",
        parse=str,
    ),
    Exercise(
        number=3,
        title="The coverage loss by hand",
        kind="compute",
        prompt="""A decoder writes three tokens over a source of three words, with the attention
$a^1 = [0.8, 0.2, 0]$, $a^2 = [0.6, 0.2, 0.2]$, $a^3 = [0.1, 0.1, 0.8]$. The coverage is the sum of the earlier
steps' attention, $c^t = \\sum_{t' < t} a^{t'}$ (eq. 10). Compute the coverage loss summed over the three steps,
$\\sum_t \\sum_i \\min(a_i^t, c_i^t)$ (eq. 12).""",
        hints=("$c^1 = [0, 0, 0]$: the first step costs nothing.",
               "$c^2 = [0.8, 0.2, 0]$ and $c^3 = [1.4, 0.4, 0.2]$; take the elementwise minimum with $a^t$ and sum."),
        solution="""$c^1 = 0$, so step 1 adds 0. $c^2 = a^1 = [0.8, 0.2, 0]$: $\\min(0.6, 0.8) + \\min(0.2, 0.2) +
\\min(0.2, 0) = 0.8$. $c^3 = [1.4, 0.4, 0.2]$: $\\min(0.1, 1.4) + \\min(0.1, 0.4) + \\min(0.8, 0.2) = 0.4$. The
total is **1.2**: step 2 looked again at the first word, step 3 partly again at the third. Counting the current
step in the coverage ($c^t = \\sum_{t' \\le t} a^{t'}$) would make every step cost 1, 3 in all: the sum must stop
before $t$. This is `seqlab.families.seq2seq.task.coverage_losses` on these numbers.""",
        answer=_coverage_loss,
        checker=number(rel=1e-3),
        wrong=3.0,
    ),
    Exercise(
        number=4,
        title="ROUGE-2 by hand",
        kind="compute",
        prompt="""The reference subject is `call moved to friday` and the summary `the call moved to friday
afternoon`. Compute ROUGE-2, the F1 of their overlapping bigrams, in percent.""",
        hints=("List the bigrams: the reference has 3, the summary 5.",
               "Precision is the overlap over the summary's bigrams, recall over the reference's; F1 is their "
               "harmonic mean."),
        solution="""Reference bigrams: *call moved*, *moved to*, *to friday* (3). Summary bigrams: *the call*,
*call moved*, *moved to*, *to friday*, *friday afternoon* (5). Overlap 3: precision $3/5$, recall $3/3$,
$F_1 = 2 \\cdot 0.6 \\cdot 1 / 1.6 = 0.75$, **75**. (ROUGE-1 is $F_1$ of $4/6$ and $4/4$, 80.) Recall alone would
give 100: the F1 charges the summary for its extra words. `seqlab.metrics.rouge` gives the same.""",
        answer=_rouge2,
        checker=number(abs=0.5, rel=0),
        wrong=80.0,
    ),
    Exercise(
        number=5,
        title="Plain or copy",
        kind="read a plot",
        prompt="""The page prints the test ROUGE of the plain summariser and of the copy model after the same two
epochs. Which has the higher ROUGE-2: `"plain"` or `"copy"`? Then say to yourself which words the difference is
made of.""",
        hints=("Look at the line the copy model's training cell prints for each run.",
               "The plain model's errors are in the words that fill the templates."),
        solution="""**copy**: near 100 against the plain model's lower score (about 85 ROUGE-L). The plain model
gets the templates right and the filling words (days, names, topics) wrong; pointing at those words in the
email (eq. 9's copy term) is easier than choosing them out of the vocabulary, and makes words outside the
vocabulary writable at all.""",
        answer=lambda: "copy",
        checker=choice("plain", "copy"),
        wrong="plain",
        parse=str,
    ),
]
