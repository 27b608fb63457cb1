"""Exercises of the tutorial "Harms: model cards and audits" (SLP 9.5): a secret's exposure with ties (Carlini et
al. 2019), the toxicity probability that a scorer's false positives alone make, expected maximum toxicity by hand
(Gehman et al. 2020), the shared tokens of a CrowS-Pairs pair (Nangia et al. 2020), and the page's exposure
table."""

from __future__ import annotations

import math

from seqlab.exercises import Exercise, choice, number

_MORE = "The man in the wheelchair was a burden to his family."
_LESS = "The man in the blue coat was a burden to his family."


def _exposure() -> float:
    import numpy as np

    from seqlab.harms.exposure import exposure_exact, rank_of

    scores = np.array([2.0] * 12 + [1.0] * 5 + [0.0] * 9982)     # 9,999 other candidates: 12 above, 5 tied
    return exposure_exact(10_000, rank_of(scores, 1.0))


def _false_positives() -> float:
    return 1 - (1 - 0.045) ** 10          # P(at least one of k = 10 harmless texts scored toxic), each p = 0.045


def _expected_max() -> float:
    from seqlab.harms.toxicity import summarize

    return summarize([[0.1, 0.7, 0.2], [0.05, 0.3, 0.49], [0.9, 0.0, 0.95], [0.2, 0.1, 0.3]])["expected_max_toxicity"]


def _shared() -> int:
    from seqlab.harms.bias import shared_positions

    more, less = _MORE.split() + ["</s>"], _LESS.split() + ["</s>"]      # a word tokenizer's tokens, then </s>
    return len(shared_positions(more, less)[0])


EXERCISES = [
    Exercise(
        number=1,
        title="Exposure, with ties",
        kind="compute",
        prompt="""A secret `my pin is {digits:4}` has $|R| = 10{,}000$ candidates. Of the 9,999 others, 12 get a
strictly higher score than the secret and 5 exactly the same score. Compute its exposure
$\\log_2 |R| - \\log_2 \\operatorname{rank}(s)$ in bits, with the page's rank (ties in the secret's favour).""",
        hints=("$\\operatorname{rank}(s) = 1 +$ the number of candidates with a strictly higher score.",
               "The rank is 13. Both logarithms are base 2: $\\log_2 10{,}000 = 13.29$."),
        solution="""$\\operatorname{rank}(s) = 1 + 12 = 13$ (the 5 ties do not count against the secret), so
exposure $= \\log_2 10{,}000 - \\log_2 13 = 13.288 - 3.700 = 9.59$ bits. Counting the ties as above it (rank 18)
gives 9.12; natural logarithms give $9.210 - 2.565 = 6.65$. `seqlab.harms.exposure.rank_of` and
`exposure_exact` compute the same.""",
        answer=_exposure,
        checker=number(rel=1e-2),
        wrong=math.log2(10_000) - math.log2(18),
    ),
    Exercise(
        number=2,
        title="Toxicity out of false positives",
        kind="compute",
        prompt="""A scorer calls 4.5% of harmless texts toxic (its false-positive rate), independently of each
other. A language model writes only harmless text, and the audit samples $k = 10$ continuations per prompt, as
this page's audit does. What toxicity probability (the share of prompts with at least one continuation scored
toxic) do you expect?""",
        hints=("A prompt counts when **at least one** of its 10 continuations is scored toxic.",
               "The probability that none of the 10 is scored toxic is $0.955^{10}$."),
        solution="""$1 - (1 - 0.045)^{10} = 1 - 0.955^{10} = 1 - 0.631 = 0.369$. With the paper's 25
continuations it is $1 - 0.955^{25} = 0.68$: the figure the page's benchmark scorer reaches on human Wikipedia
text. The maximum over $k$ samples amplifies a small per-text error rate, so the toxicity probability must be
read against the scorer's false-positive rate. (A single text: 0.045; adding the 10 rates: 0.45, an
overestimate.)""",
        answer=_false_positives,
        checker=number(rel=1e-2),
        wrong=0.45,
    ),
    Exercise(
        number=3,
        title="Expected maximum toxicity by hand",
        kind="compute",
        prompt="""Four prompts get three continuations each, scored by the scorer:
$[0.1, 0.7, 0.2]$, $[0.05, 0.3, 0.49]$, $[0.9, 0.0, 0.95]$, $[0.2, 0.1, 0.3]$. Compute the expected maximum
toxicity $\\frac{1}{P} \\sum_p \\max_j \\operatorname{tox}(c_{p,j})$ (and, for yourself, the toxicity
probability).""",
        hints=("Take each prompt's largest score first.",
               "The maxima are 0.7, 0.49, 0.95 and 0.3."),
        solution="""The maxima are $0.7, 0.49, 0.95, 0.3$; their mean is $2.44 / 4 = 0.61$. The toxicity
probability is $2/4 = 0.5$: two maxima reach 0.5 (0.49 does not). The mean of all twelve scores, 0.36, is a
different figure: it asks how toxic a typical sample is, not how bad the worst of $k$ is.
`seqlab.harms.toxicity.summarize` gives both.""",
        answer=_expected_max,
        checker=number(rel=1e-3),
        wrong=sum([0.1, 0.7, 0.2, 0.05, 0.3, 0.49, 0.9, 0.0, 0.95, 0.2, 0.1, 0.3]) / 12,
    ),
    Exercise(
        number=4,
        title="The shared tokens of a pair",
        kind="derive",
        prompt=f"""A word-level model reads the pair of `pairs.csv`
*"{_MORE}"* (`sent_more`) and *"{_LESS}"* (`sent_less`), each split on spaces and ended by `</s>`. How many
tokens are in $U$, the shared tokens the **shared** score sums over (the "equal" blocks of difflib's
alignment)?""",
        hints=("The sentences differ in one place: *wheelchair* against *blue coat*.",
               "Count the tokens before the difference and after it, and do not forget the final `</s>`."),
        solution="""The tokens before the difference, *The man in the* (4), and after it, *was a burden to his
family.* (6, "family." one token when splitting on spaces), and `</s>`: $|U| = 11$. Both sentences are scored on
these 11 tokens, each conditioned on its own modified words where they come earlier, so that "wheelchair" (one
token) and "blue coat" (two) do not weigh in by their own probabilities. `seqlab.harms.bias.shared_positions`
gives the same positions.""",
        answer=_shared,
        checker=number(rel=0, abs=0.5),
        wrong=10,
    ),
    Exercise(
        number=5,
        title="Reading the exposure table",
        kind="read a plot",
        prompt="""The exposure audit of the page's character LSTM prints one row per secret, with how often it was
planted (`repeats`: 1, 4, 16, 64) and its exposure. A secret the model has not memorised sits near
$1/\\ln 2 = 1.44$ bits on average. What is the smallest repeat count whose secret has an exposure above 5 bits:
`"1"`, `"4"`, `"16"` or `"64"`?""",
        hints=("Read the `exposure` column from the top.",
               "The 1- and 4-repeat secrets are near chance."),
        solution="""**16**: the secrets planted once and 4 times score 0.5 and 2.5 bits, near chance (a uniform
random rank); the one planted 16 times ranks about 100th of 10,000 (6.6 bits), and the one planted 64 times
first (13.29 bits, $\\log_2 |R|$). Exposure grows with the insertions, as in Carlini et al. 2019 (Fig. 1), while
the validation perplexity is still falling: memorisation of a repeated secret comes early, not from
overfitting.""",
        answer=lambda: "16",
        checker=choice("1", "4", "16", "64"),
        wrong="64",
        parse=str,
    ),
]
