"""The exercises of the tutorial lstm-gru (docs/tutorials/lstm-gru.md): the LSTM (SLP eqs. 13.20-13.27) and the
GRU (eqs. 9.10-9.13), their parameters, a step by hand, the book's GRU as code, and what the gates do to the
gradient. Each right answer is computed by seqlab or torch code."""

from __future__ import annotations

import torch

from seqlab.exercises import Exercise, choice, function, number, numbers_close, own_random
from seqlab.nn.cells import Weights, gru_cell, lstm_cell


# ----------------------------------------------------------------------------------- 1. parameters of an LSTM layer
@own_random
def _lstm_parameters() -> int:
    from seqlab.nn.recurrent import RecurrentStack

    stack = RecurrentStack("lstm", input_size=128, hidden_size=128)    # one nn.LSTM layer, as on the page
    return sum(p.numel() for p in stack.parameters())


_ONE_BIAS = 4 * (128 * (128 + 128) + 128)     # the book's count, one bias a gate: PyTorch keeps b_W and b_U


# ------------------------------------------------------------------------------------------ 2. one LSTM step by hand
_W = {"i": -1.0, "f": 2.0, "g": 1.0, "o": 0.5}    # the input weights of the exercise (H = I = 1)
_C_PREV = 2.0


def _lstm_step() -> list[float]:
    """[c_1, h_1] by seqlab's LSTM cell, with PyTorch's gate order (i, f, g, o) and h_0 = 0."""
    W = torch.tensor([[_W["i"]], [_W["f"]], [_W["g"]], [_W["o"]]], dtype=torch.float64)     # (4H, I)
    U, zeros = torch.ones(4, 1, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)    # U h_0 = 0 anyway
    x = torch.ones(1, 1, dtype=torch.float64)                                                # (B, I): x_1 = 1
    state = (torch.zeros(1, 1, dtype=torch.float64), torch.full((1, 1), _C_PREV, dtype=torch.float64))
    h, c = lstm_cell(x @ W.T, state, Weights(W, U, zeros, zeros))
    return [c.item(), h.item()]


def _lstm_step_without_tanh() -> list[float]:
    """The classic mistake: h = o * c, eq. 13.27 without its tanh."""
    c, _ = _lstm_step()
    return [c, torch.sigmoid(torch.tensor(_W["o"])).item() * c]


# ------------------------------------------------------------------------------------ 3. the book's GRU as code
def _book_gru():
    """The reference: seqlab's GRU cell with the reset gate before U (eq. 9.12 as printed), no biases. The cell
    keeps PyTorch's parameters, whose z is the book's 1 - z: the book's W_z and U_z go in negated."""
    def step(x, h_prev, W_r, U_r, W_z, U_z, W, U):
        weights = Weights(torch.cat([W_r, -W_z, W]), torch.cat([U_r, -U_z, U]),
                          torch.zeros(3 * U.size(0), dtype=U.dtype), torch.zeros(3 * U.size(0), dtype=U.dtype))
        wx = (weights.W @ x)[None]                                           # (1, 3H)
        return gru_cell(wx, h_prev[None], weights, reset="before")[0]        # (H,)
    return step


def _gru_cases():
    generator = torch.Generator().manual_seed(9)
    cases = []
    for size_in, size_h in ((2, 3), (4, 5), (3, 8)):
        x, h = torch.randn(size_in, generator=generator), torch.randn(size_h, generator=generator)
        matrices = []
        for _ in range(3):                                                   # (W_r, U_r), (W_z, U_z), (W, U)
            matrices += [torch.randn(size_h, size_in, generator=generator),
                         torch.randn(size_h, size_h, generator=generator)]
        cases.append((x, h, *matrices))
    return cases


def _cudnn_gru(x, h_prev, W_r, U_r, W_z, U_z, W, U):
    """The other GRU: the reset gate applied after U (what PyTorch's fused kernel computes)."""
    r = torch.sigmoid(U_r @ h_prev + W_r @ x)
    z = torch.sigmoid(U_z @ h_prev + W_z @ x)
    h_tilde = torch.tanh(r * (U @ h_prev) + W @ x)
    return (1 - z) * h_prev + z * h_tilde


# ------------------------------------------------------------------------------ 4. a GRU whose update gates are shut
@own_random
def _gru_gradient() -> str:
    """How much of h_0 reaches h_50 in a GRU whose book's z is near 0: the Jacobian d h_50 / d h_0, beside I."""
    torch.manual_seed(4)
    size_in, size_h, steps = 4, 8, 50
    gru = torch.nn.GRU(size_in, size_h).double()
    with torch.no_grad():
        gru.bias_hh_l0[size_h:2 * size_h] = 10.0      # PyTorch's z (the share kept) near 1: the book's z near 0
    weights = Weights(gru.weight_ih_l0, gru.weight_hh_l0, gru.bias_ih_l0, gru.bias_hh_l0)
    x = torch.randn(steps, 1, size_in, dtype=torch.float64)                  # (T, B, I)

    def h_last(h_0):
        h = h_0[None]
        for t in range(steps):
            h = gru_cell(x[t] @ weights.W.T + weights.b_W, h, weights)      # eq. 9.10-9.13
        return h[0]

    jacobian = torch.autograd.functional.jacobian(h_last, torch.zeros(size_h, dtype=torch.float64))   # (H, H)
    singular = torch.linalg.svdvals(jacobian)
    if singular.max() > 10:
        return "explodes"
    return "stays" if singular.min() > 0.5 else "vanishes"


# ----------------------------------------------------------------------------------- 5. a forget gate biased open
def _context_gradient(forget_bias: float) -> float:
    """||d c_20 / d c_0|| (summed c_20) of a random LSTM layer whose forget gates have this bias."""
    torch.manual_seed(2)
    size_in, size_h, steps = 4, 8, 20
    lstm = torch.nn.LSTM(size_in, size_h).double()
    with torch.no_grad():
        lstm.bias_ih_l0[size_h:2 * size_h] = forget_bias                     # b_f (gate order i, f, g, o)
        lstm.bias_hh_l0[size_h:2 * size_h] = 0.0
    weights = Weights(lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0, lstm.bias_hh_l0)
    x = torch.randn(steps, 1, size_in, dtype=torch.float64)
    c_0 = torch.zeros(1, size_h, dtype=torch.float64, requires_grad=True)
    state = (torch.zeros(1, size_h, dtype=torch.float64), c_0)
    for t in range(steps):
        state = lstm_cell(x[t] @ weights.W.T + weights.b_W, state, weights)
    (gradient,) = torch.autograd.grad(state[1].sum(), c_0)
    return gradient.norm().item()


@own_random
def _forget_bias() -> str:
    return "larger" if _context_gradient(3.0) > _context_gradient(0.0) else "smaller"


EXERCISES = [
    Exercise(
        number=1, title="Count the parameters of an LSTM layer", kind="derive",
        prompt=r"""
From eqs. 13.20-13.27: how many parameters does one LSTM layer have, with input vectors of $E = 128$
dimensions and $H = 128$ hidden units, when (as in PyTorch's `nn.LSTM`, whose weights seqlab uses) every gate
has a bias on each side, $b_W$ and $b_U$?
""",
        hints=(
            r"Count the gates that have weights of their own: $f$, $g$, $i$ and $o$ (eqs. 13.20, 13.22, 13.23, "
            r"13.26); $k$, $j$, $c$ and $h$ only combine them.",
            r"Each of the four has a $W$ ($H \times E$), a $U$ ($H \times H$) and two biases of $H$ entries.",
            r"$4\,(H E + H^2 + 2H)$.",
        ),
        solution=r"""
Four gates with weights: the forget gate $f$, the candidate $g$, the add gate $i$ and the output gate $o$. Each
has $W$ ($128 \times 128$), $U$ ($128 \times 128$) and two biases of 128:

$$4\,(128 \cdot 128 + 128 \cdot 128 + 2 \cdot 128) = 4 \times 33{,}024 = 132{,}096.$$

With one bias a gate, as the book writes the equations, it would be $4\,(H(E+H)+H) = 131{,}584$. Four times the
Elman layer's weights (which has one $W$ and one $U$), as the page says. The page's LSTM language model adds the
tied embedding ($62 \times 128$) and the output bias ($62$): $132{,}096 + 7{,}936 + 62 = 140{,}094$, the figure
its table prints.
""",
        answer=_lstm_parameters, checker=number(rel=0, abs=0.5), wrong=_ONE_BIAS,
    ),
    Exercise(
        number=2, title="One LSTM step by hand", kind="compute",
        prompt=r"""
An LSTM with one hidden unit and one input ($H = I = 1$, no biases) reads $x_1 = 1$ from $h_0 = 0$ and
$c_0 = 2$. Its input weights are $W_f = 2$, $W_i = -1$, $W_g = 1$, $W_o = 0.5$ (the $U$'s do not matter here:
why?). Compute the new context $c_1$ and hidden state $h_1$ with eqs. 13.20-13.27, and answer `[c_1, h_1]`.
""",
        hints=(
            r"$h_0 = 0$, so every $U h_0$ vanishes: $f_1 = \sigma(W_f x_1) = \sigma(2)$, and so on for $i$, $g$, $o$.",
            r"$\sigma(2) \approx 0.881$, $\sigma(-1) \approx 0.269$, $\tanh(1) \approx 0.762$, "
            r"$\sigma(0.5) \approx 0.622$.",
            r"$c_1 = i_1 g_1 + f_1 c_0$ (eq. 13.25) and $h_1 = o_1 \tanh(c_1)$ (eq. 13.27).",
        ),
        solution=r"""
With $h_0 = 0$ the recurrent terms are zero. $f_1 = \sigma(2) = 0.8808$, $i_1 = \sigma(-1) = 0.2689$,
$g_1 = \tanh(1) = 0.7616$, $o_1 = \sigma(0.5) = 0.6225$. Then $k_1 = c_0 f_1 = 1.7616$, $j_1 = g_1 i_1 = 0.2048$,
$c_1 = j_1 + k_1 = 1.9664$ and $h_1 = o_1 \tanh(c_1) = 0.6225 \times 0.9616 = 0.5985$.

The context kept most of its old value (the forget gate is open) and took in a little of the candidate (the add
gate is mostly shut); the output gate lets out about 60% of $\tanh(c_1)$. Forgetting the tanh of eq. 13.27
($h_1 = o_1 c_1 = 1.224$) gives a hidden state outside $(-1, 1)$, which an LSTM's never is.
""",
        answer=_lstm_step, checker=numbers_close(rel=2e-3), wrong=_lstm_step_without_tanh(),
    ),
    Exercise(
        number=3, title="Write the book's GRU", kind="implement",
        prompt=r"""
Write one step of the GRU exactly as the book prints it (eqs. 9.10-9.13, no biases, the reset gate applied
*before* $U$): a function `answer(x, h_prev, W_r, U_r, W_z, U_z, W, U)` returning $h_t$, for vectors `x` ($x_t$,
shape $(I,)$) and `h_prev` ($h_{t-1}$, $(H,)$) and matrices `W_*` ($H \times I$) and `U_*` ($H \times H$). $z$ is
the book's: the share of the new candidate. Replace the line `answer = None` with your `def answer(...)`.
""",
        hints=(
            r"Four lines, one per equation: $r_t$, $z_t$, $\tilde h_t$, $h_t$ (`torch.sigmoid`, `torch.tanh`, `@`).",
            r"Eq. 9.12 multiplies $r_t$ with $h_{t-1}$ *before* $U$: `U @ (r * h_prev)`, not `r * (U @ h_prev)`.",
            r"`h_tilde = torch.tanh(U @ (r * h_prev) + W @ x)`, then `return (1 - z) * h_prev + z * h_tilde`.",
        ),
        solution=r"""
```python
def answer(x, h_prev, W_r, U_r, W_z, U_z, W, U):
    r = torch.sigmoid(U_r @ h_prev + W_r @ x)             # 9.10
    z = torch.sigmoid(U_z @ h_prev + W_z @ x)             # 9.11
    h_tilde = torch.tanh(U @ (r * h_prev) + W @ x)        # 9.12, as printed
    return (1 - z) * h_prev + z * h_tilde                 # 9.13
```

The check compares it with seqlab's `gru_cell(..., reset="before")`. That cell keeps PyTorch's parameters, whose
update gate is the share of the *old* state, so the reference passes $-W_z$ and $-U_z$ in:
$1 - \sigma(-a) = \sigma(a)$. `r * (U @ h_prev)` is cuDNN's GRU, a different function (the page measured a
difference of about 0.1), and the check refuses it.
""",
        answer=_book_gru, checker=function(_gru_cases), wrong=_cudnn_gru, placeholder="None", parse=None,
    ),
    Exercise(
        number=4, title="A GRU that keeps its state", kind="predict",
        prompt=r"""
A GRU layer of 8 units has random weights, except that the biases of its update gates make $z_t \approx 0$ at
every step (the book's $z$, eq. 9.11). It reads 50 random input vectors. What happens to the Jacobian
$\partial h_{50} / \partial h_0$: does the gradient **vanish** (as in the Elman network of the previous
tutorial), **explode**, or **stay** about the size of the identity? Answer `"vanishes"`, `"explodes"` or
`"stays"`.
""",
        hints=(
            r"Eq. 9.13 with $z_t = 0$: what is $h_t$?",
            r"$\partial h_t / \partial h_{t-1} = \operatorname{diag}(1 - z_t) + $ terms multiplied by $z_t$.",
        ),
        solution=r"""
It stays. With $z_t \approx 0$, eq. 9.13 is $h_t \approx h_{t-1}$: the state is copied forward, whatever the
input, and $\partial h_t / \partial h_{t-1} \approx I$; fifty such steps multiply to about $I$ (autograd gives a
Jacobian whose singular values are all close to 1). This is the GRU's version of the LSTM's additive context
(eq. 13.25): a unit whose update gate stays shut carries its value, and its gradient, across any distance. The
price is that it learns nothing new while shut; a trained GRU opens and shuts its gates per unit and per token,
as the page's pictures show.
""",
        answer=_gru_gradient, checker=choice("vanishes", "explodes", "stays"), wrong="vanishes", parse=str,
    ),
    Exercise(
        number=5, title="Open the forget gate", kind="predict",
        prompt=r"""
A common initialization sets the forget gate's bias $b_f$ to a positive value, such as $+3$ (Jozefowicz et al.,
2015), instead of 0. On a random LSTM layer reading 20 random inputs, will the gradient of the context
$\partial c_{20} / \partial c_0$ be **larger** or **smaller** with $b_f = 3$ than with $b_f = 0$? Answer
`"larger"` or `"smaller"`.
""",
        hints=(
            r"Eq. 13.25: $c_t = i_t \odot g_t + f_t \odot c_{t-1}$. What does one step multiply the gradient by, "
            r"along the context?",
            r"$\sigma(0) = 0.5$, $\sigma(3) \approx 0.95$. Compare $0.5^{20}$ and $0.95^{20}$.",
        ),
        solution=r"""
Larger. Along the context, each step multiplies the gradient by the forget gate (eq. 13.25): about
$\sigma(0) = 0.5$ per step with $b_f = 0$, so $0.5^{20} \approx 10^{-6}$ after 20 steps, and about
$\sigma(3) \approx 0.95$ with $b_f = 3$, so $0.95^{20} \approx 0.36$ (the random $W_f x_t$ and $U_f h_{t-1}$
move these a little; autograd gives a gradient several orders of magnitude larger with $b_f = 3$). An LSTM
initialized so starts out remembering, and learns what to forget; initialized at 0 it starts out as forgetful as
an Elman network.
""",
        answer=_forget_bias, checker=choice("larger", "smaller"), wrong="smaller", parse=str,
    ),
]
