"""The exercises of the tutorial rnn-lm (docs/tutorials/rnn-lm.md): the Elman network, SLP eqs. 13.1-13.2, its
perplexity, and the gradient through time. Each right answer is computed by seqlab or torch code."""

from __future__ import annotations

import math

import torch

from seqlab.exercises import Exercise, choice, function, number, own_random


# ------------------------------------------------------------------------------------- 1. parameters of a tied LM
@own_random
def _tied_parameters() -> int:
    from seqlab.models.rnn_lm import RecurrentLM, RecurrentLMConfig

    model = RecurrentLM(RecurrentLMConfig(arch="rnn", vocab_size=10_000, embedding_size=256, hidden_size=256,
                                          num_layers=1, tie_weights=True))
    return model.num_parameters()


# the classic mistake: counting the output matrix V as well as E, as if the weights were not tied
_UNTIED = 10_000 * 256 + 2 * 256 * 256 + 2 * 256 + 10_000 * 256 + 10_000


# ----------------------------------------------------------------------------------------- 2. perplexity by hand
_PROBABILITIES = (0.5, 0.25, 0.8, 0.1)


def _perplexity() -> float:
    """exp of the mean cross-entropy, computed by torch's loss on logits that give those probabilities."""
    vocab = 5
    logits = torch.empty(len(_PROBABILITIES), vocab, dtype=torch.float64)   # (T, V): the true token is id 0
    for t, p in enumerate(_PROBABILITIES):
        logits[t] = math.log((1 - p) / (vocab - 1))
        logits[t, 0] = math.log(p)
    loss = torch.nn.functional.cross_entropy(logits, torch.zeros(len(_PROBABILITIES), dtype=torch.long))
    return math.exp(loss.item())                                             # the mean, in nats per token


# ------------------------------------------------------------------------------------ 3. eqs. 13.1-13.2 as code
def _elman_step():
    """The reference: seqlab's Elman cell (eq. 13.1, no biases) and the softmax of eq. 13.2."""
    from seqlab.nn.cells import Weights, elman_cell

    def step(x, h_prev, W, U, V):
        zeros = torch.zeros(U.size(0), dtype=U.dtype)
        h = elman_cell((W @ x)[None], h_prev[None], Weights(W, U, zeros, zeros))[0]   # (H,)
        return torch.softmax(V @ h, dim=-1)                                          # (vocabulary,)
    return step


def _elman_cases():
    generator = torch.Generator().manual_seed(13)
    cases = []
    for size_in, size_h, size_v in ((2, 3, 4), (5, 4, 7), (3, 8, 10)):
        x, h = torch.randn(size_in, generator=generator), torch.randn(size_h, generator=generator)
        W, U = torch.randn(size_h, size_in, generator=generator), torch.randn(size_h, size_h, generator=generator)
        V = torch.randn(size_v, size_h, generator=generator)
        cases.append((x, h, W, U, V))
    return cases


def _no_activation(x, h_prev, W, U, V):
    """The classic mistake: eq. 13.1 without g."""
    return torch.softmax(V @ (U @ h_prev + W @ x), dim=-1)


# ---------------------------------------------------------------------------------- 4. a large U and a saturated g
def _grow_or_vanish() -> str:
    h_0 = torch.full((4,), 0.5, dtype=torch.float64, requires_grad=True)
    U = 1.2 * torch.eye(4, dtype=torch.float64)
    h = h_0
    for _ in range(50):
        h = torch.tanh(U @ h)                         # eq. 13.1 with x_t = 0
    (gradient,) = torch.autograd.grad(h.sum(), h_0)   # U is diagonal: d h_50[j] / d h_0[j] for each unit j
    return "grow" if gradient.abs().max().item() > 1 else "vanish"


# --------------------------------------------------------------------------------- 5. reading the gradient curve
@own_random
def _gradient_by_distance() -> torch.Tensor:
    """The page's left panel, for rho = 0.5: the same seed, the same draws, in the same order."""
    from seqlab.nn.recurrent import RecurrentStack

    torch.manual_seed(0)
    x = torch.randn(1, 100, 32, dtype=torch.float64)                   # (1, T, I)
    stack = RecurrentStack("rnn", 32, 128).double()
    Q, _ = torch.linalg.qr(torch.randn(128, 128, dtype=torch.float64))
    with torch.no_grad():
        stack.layers[0].weight_hh_l0.copy_(0.5 * Q)
    x.requires_grad_(True)
    h, _ = stack(x)                                                    # (1, T, H)
    h[0, -1].sum().backward()
    return x.grad[0].norm(dim=-1).flip(0)                              # (T,): distance 0, 1, 2, ...


def _steps_per_decade() -> float:
    gradient = _gradient_by_distance()
    return 80 / math.log10(gradient[10].item() / gradient[90].item())


_STEPS_PER_FACTOR_E = 1.27     # the classic mistake: the natural logarithm where a factor of ten is asked for


EXERCISES = [
    Exercise(
        number=1, title="Count the parameters of a tied Elman LM", kind="derive",
        prompt=r"""
An Elman language model (eqs. 13.1-13.2) reads words from a vocabulary of $|V| = 10{,}000$, with embeddings of
$d = 256$ dimensions and one recurrent layer of $H = 256$ units, and its output matrix is tied to the embedding
matrix (`--tied`: the output layer's weights are $E$ itself, SLP 13.2.3). Like PyTorch's `nn.RNN`, it keeps a bias
on each side of eq. 13.1 ($b_W$ and $b_U$), and its output layer has a bias of its own, one per word.

How many parameters does it have?
""",
        hints=(
            "List the matrices and vectors: $E$, $W$, $U$, $b_W$, $b_U$, the output bias; $V$ is not a new matrix.",
            r"Their shapes: $E$ is $|V| \times d$, $W$ is $H \times d$, $U$ is $H \times H$; the biases have $H$ and "
            r"$|V|$ entries.",
            r"$|V| d + H d + H^2 + 2H + |V|$.",
        ),
        solution=r"""
$E$: $10{,}000 \times 256 = 2{,}560{,}000$. $W$: $256 \times 256 = 65{,}536$, and $U$ the same. $b_W$ and $b_U$:
$256$ each. The output layer's weights are $E$ (tied), so only its bias counts: $10{,}000$.

$$2{,}560{,}000 + 2 \times 65{,}536 + 2 \times 256 + 10{,}000 = 2{,}701{,}584.$$

Untied, $V$ would add another $2{,}560{,}000$: on a word-level model the embedding and the output matrix are most of
the parameters, which is why tying them pays. The page's character model, with $|V| = 62$ and $d = H = 128$, has
$62 \cdot 128 + 2 \cdot 128^2 + 2 \cdot 128 + 62 = 41{,}022$, the figure its training log prints.
Check: `build_lm(LMConfig(arch="rnn", vocab_size=10_000, embedding_size=256, hidden_size=256,
tie_weights=True)).num_parameters()`.
""",
        answer=_tied_parameters, checker=number(rel=0, abs=0.5), wrong=_UNTIED,
    ),
    Exercise(
        number=2, title="Perplexity by hand", kind="compute",
        prompt=r"""
A language model reads a test file of four tokens (the last one the `</s>` that ends the line). To the true
token at each position it gives the probabilities

$$P(w_1 \mid \ldots) = 0.5,\quad P(w_2 \mid \ldots) = 0.25,\quad P(w_3 \mid \ldots) = 0.8,\quad
P(w_4 \mid \ldots) = 0.1 .$$

What is its perplexity on the file, as `seqlab evaluate` reports it?
""",
        hints=(
            r"The loss is the mean over the tokens of $-\ln P(w_t \mid w_{<t})$; the perplexity is $e^{\text{loss}}$.",
            r"$e^{-\frac{1}{N}\sum_t \ln p_t} = \big(\prod_t p_t\big)^{-1/N}$: the geometric mean of the $1/p_t$.",
        ),
        solution=r"""
The loss is $-\frac{1}{4}(\ln 0.5 + \ln 0.25 + \ln 0.8 + \ln 0.1) = -\frac{1}{4}\ln 0.01 = 1.1513$ nats per
token, and the perplexity $e^{1.1513} = 0.01^{-1/4} = \sqrt{10} \approx 3.162$: the model is as uncertain as a
uniform choice among about 3.2 tokens. The arithmetic mean of the $1/p_t$, $(2 + 4 + 1.25 + 10) / 4 = 4.31$, is
not the perplexity: one confident success cannot make up for a bad miss in the geometric mean, where the
probabilities multiply.
""",
        answer=_perplexity, checker=number(rel=1e-3), wrong=(2 + 4 + 1.25 + 10) / 4,
    ),
    Exercise(
        number=3, title="Write eqs. 13.1 and 13.2", kind="implement",
        prompt=r"""
Write one step of the Elman language model: a function `answer(x, h_prev, W, U, V)` that returns $y_t$ (eq.
13.2) for the input vector $x_t$ (`x`, shape $(d,)$) and the previous hidden state $h_{t-1}$ (`h_prev`,
$(H,)$), with $g = \tanh$ in eq. 13.1 and no biases. `W` is $H \times d$, `U` is $H \times H$, `V` is
$|V| \times H$; use torch. Replace the line `answer = None` with your `def answer(x, h_prev, W, U, V): ...`.
""",
        hints=(
            "Two lines: first $h_t$, then $y_t$. `@` multiplies a matrix by a vector.",
            "`torch.tanh` is $g$; `torch.softmax(scores, dim=-1)` turns the scores $V h_t$ into a distribution.",
            "`h = torch.tanh(U @ h_prev + W @ x)`, then `return torch.softmax(V @ h, dim=-1)`.",
        ),
        solution=r"""
```python
def answer(x, h_prev, W, U, V):
    h = torch.tanh(U @ h_prev + W @ x)      # eq. 13.1
    return torch.softmax(V @ h, dim=-1)     # eq. 13.2
```

The check compares it with seqlab's `elman_cell` (on zero biases) followed by a softmax. Without the $g$ of eq.
13.1 the network is linear from one step to the next: a stack of linear maps is one linear map, so it could not
model more than a product of matrices, and its state could grow without bound.
""",
        answer=_elman_step, checker=function(_elman_cases), wrong=_no_activation, placeholder="None", parse=None,
    ),
    Exercise(
        number=4, title="A large U: will the gradient grow?", kind="predict",
        prompt=r"""
An Elman network of four units has $U = 1.2\,I$ (every singular value $1.2$, above 1), $g = \tanh$, no biases,
and reads zeros ($x_t = 0$) for 50 steps from $h_0 = (0.5, 0.5, 0.5, 0.5)$. Will the gradient
$\partial h_{50} / \partial h_0$ **grow** (above 1) or **vanish**? Answer `"grow"` or `"vanish"`.
""",
        hints=(
            r"Each step multiplies the gradient by $\operatorname{diag}(g'(U h_{s-1}))\, U$, and "
            r"$\tanh'(a) = 1 - \tanh^2(a)$.",
            r"Where does $h$ go? Iterate $h \leftarrow \tanh(1.2\, h)$ by hand from 0.5 for a few steps.",
            r"$h$ settles near $h^* = \tanh(1.2\, h^*) \approx 0.66$; there each step multiplies the gradient by "
            r"$1.2\,(1 - 0.66^2)$.",
        ),
        solution=r"""
It vanishes. $h_s$ climbs from 0.5 to the fixed point $h^* = \tanh(1.2 h^*) \approx 0.659$, where $\tanh$ is
saturated enough that its slope is $1 - 0.659^2 \approx 0.566$. Each step multiplies the gradient by
$1.2 \times 0.566 \approx 0.68$, and after 50 steps by about $0.68^{50} \approx 10^{-8}$ (autograd gives
$9.9 \times 10^{-9}$). A largest singular value above 1 makes exploding *possible*, not certain: with a saturating
$g$ the state drifts to where the slope is small. The page's $\rho = 2$ network exploded because its random
inputs and orthogonal $U$ kept the units out of saturation; with `--activation relu`, whose slope is 1 for a
positive unit, this network's gradient would grow as $1.2^{50} \approx 9{,}100$.
""",
        answer=_grow_or_vanish, checker=choice("grow", "vanish"), wrong="grow", parse=str, placeholder='None',
    ),
    Exercise(
        number=5, title="Read the curve: steps per factor of ten", kind="read a plot",
        prompt=r"""
In the left panel of the figure of the section "Why the gradient vanishes through time" (its numbers printed
above it), the gradient of the network with $U = 0.5 \times$ orthogonal falls on a straight line on the log scale.
Between distance 10 and distance 90, how many steps back does it take, on average, to lose a **factor of ten**?
""",
        hints=(
            "A straight line on a log scale is a geometric decay: the same factor every step.",
            r"Over 80 steps it falls by the ratio of its values at distance 10 and 90; how many factors of ten is "
            r"that? ($\log_{10}$ of the ratio.)",
            r"steps per factor of ten $= 80 / \log_{10}(g_{10} / g_{90})$.",
        ),
        solution=r"""
The page prints the gradient at distances 10 and 90, about $1.2 \times 10^{-3}$ and $5 \times 10^{-31}$: a
factor of about $10^{27.4}$ over 80 steps, so one factor of ten every $80 / 27.4 \approx 2.9$ steps. Each step
multiplies the gradient by about $10^{-1/2.9} \approx 0.45$: the $0.5$ of $U$, times the slope of tanh, a little
below 1. With the natural logarithm instead of $\log_{10}$ one gets the steps per factor of $e$ (1.27), not of ten.
""",
        answer=_steps_per_decade, checker=number(rel=0.05), wrong=_STEPS_PER_FACTOR_E,
    ),
]
