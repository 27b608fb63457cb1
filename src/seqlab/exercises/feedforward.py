"""Exercises of the tutorial "Feedforward networks" (SLP 6.1-6.6): the cross-entropy of a softmax, the size of a
feedforward head, the gradient of one sigmoid unit, what confidence does to the loss, and a network's forward pass
written by hand."""

from __future__ import annotations

from seqlab.exercises import Exercise, choice, function, number


def _cross_entropy() -> float:
    import torch

    z = torch.tensor([2.0, 1.0, 0.1])
    return float(-torch.log_softmax(z, dim=0)[1])                   # eq. 6.27: -log softmax(z)_c, c the 2nd class


def _parameters() -> int:
    from seqlab.nn.feedforward import feedforward

    return sum(p.numel() for p in feedforward(300, 64, 2, 5, dropout=0.0).parameters())


def _weight_gradient() -> float:
    import torch

    w = torch.tensor([0.2, 0.3, 0.9], requires_grad=True)
    x = torch.tensor([0.5, 0.6, 0.1])
    z = torch.dot(w, x) + 0.5                                       # the book's unit: z = w . x + b = 0.87
    loss = torch.nn.functional.binary_cross_entropy_with_logits(z, torch.tensor(1.0))   # eq. 6.25 with y = 1
    loss.backward()
    return float(w.grad[0])


def _sharper() -> str:
    import torch
    import torch.nn.functional as F

    gold = torch.tensor([0.0, 1.0, 1.0, 0.0])
    before = F.binary_cross_entropy_with_logits(torch.tensor([0.0, 1.0, 1.0, 0.0]), gold)
    after = F.binary_cross_entropy_with_logits(torch.tensor([0.0, 3.0, 3.0, 0.0]), gold)   # U multiplied by 3
    return "lower" if after < before - 1e-6 else "higher" if after > before + 1e-6 else "the same"


def _forward():
    import torch

    def forward(x, W, b, U):
        return torch.softmax(U @ torch.relu(W @ x + b), dim=0)     # eqs. 6.19-6.20, then eq. 6.11's softmax
    return forward


def _forward_cases():
    import torch

    generator = torch.Generator().manual_seed(0)
    cases = []
    for inputs, hidden, classes in ((2, 2, 3), (4, 3, 2), (5, 8, 4)):
        cases.append((torch.randn(inputs, generator=generator), torch.randn(hidden, inputs, generator=generator),
                       torch.randn(hidden, generator=generator), torch.randn(classes, hidden, generator=generator)))
    return cases


def _forward_with_sigmoid(x, W, b, U):
    import torch

    return torch.softmax(U @ torch.sigmoid(W @ x + b), dim=0)      # the wrong activation: not a ReLU layer


EXERCISES = [
    Exercise(
        number=1,
        title="The cross-entropy of a softmax",
        kind="compute",
        prompt="""A network's output layer gives the scores $z = [2.0, 1.0, 0.1]$ for three classes, and the gold
class is the second one (the score 1.0). Compute the cross-entropy loss $L_{CE} = -\\log \\hat{y}_c$ of eq. 6.27,
with $\\hat{y} = \\mathrm{softmax}(z)$ (eq. 6.11), in nats (natural logarithm), to three decimals.""",
        hints=("First the softmax: $\\hat{y}_i = e^{z_i} / \\sum_j e^{z_j}$. The sum is $e^{2} + e^{1} + e^{0.1}$.",
               "$\\hat{y}_2 = e^{1} / (e^{2} + e^{1} + e^{0.1}) \\approx 0.242$; the loss is minus its natural log."),
        solution="""$\\sum_j e^{z_j} = e^{2} + e^{1} + e^{0.1} = 7.389 + 2.718 + 1.105 = 11.212$, so
$\\hat{y}_2 = 2.718 / 11.212 = 0.2424$ and $L_{CE} = -\\ln 0.2424 = 1.417$ nats. Equivalently
$L_{CE} = -z_c + \\log \\sum_j e^{z_j} = -1 + \\ln 11.212 = 1.417$: the form seqlab's losses compute
(`log_softmax`), which never takes the log of a number rounded to zero. In bits (log base 2) it would be 2.044:
the same loss in another unit, but not the one training uses.""",
        answer=_cross_entropy,
        checker=number(rel=2e-3),
        wrong=2.044,                                                # log base 2: bits, not nats
    ),
    Exercise(
        number=2,
        title="How many parameters has a feedforward head?",
        kind="derive",
        prompt="""seqlab's classifiers build their heads with `feedforward(inputs, hidden, layers, outputs,
dropout)`: `layers` hidden layers $h = \\mathrm{ReLU}(W x + b)$ of width `hidden`, then an output layer $z = U h$
with a bias (eqs. 6.19-6.20; the page shows its source). How many parameters (weights and biases) has
`feedforward(300, 64, 2, 5, dropout=0.1)`: 300 inputs, two hidden layers of 64 units, 5 classes?""",
        hints=("A layer from $m$ inputs to $n$ outputs has an $n \\times m$ weight matrix and $n$ biases.",
               "Three layers: 300 to 64, 64 to 64, 64 to 5. Do not forget a bias per output of each."),
        solution="""Each `nn.Linear(m, n)` has $m n$ weights and $n$ biases: $300 \\cdot 64 + 64 = 19{,}264$,
$64 \\cdot 64 + 64 = 4{,}160$ and $64 \\cdot 5 + 5 = 325$, in all **23,749**. Dropout has no parameters. Without
the biases it would be 23,616. Check it: `sum(p.numel() for p in feedforward(300, 64, 2, 5, 0.1).parameters())`.""",
        answer=_parameters,
        checker=number(rel=0, abs=0.5),
        wrong=300 * 64 + 64 * 64 + 64 * 5,                          # the weights without the biases
    ),
    Exercise(
        number=3,
        title="The gradient of one sigmoid unit",
        kind="derive",
        prompt="""The book's unit of SLP 6.1 has $w = [0.2, 0.3, 0.9]$, $b = 0.5$, and reads $x = [0.5, 0.6, 0.1]$,
so $z = 0.87$ and $\\hat{y} = \\sigma(z)$. Its gold answer is $y = 1$, and its loss the binary cross-entropy of
eq. 6.25, $L = -[y \\log \\sigma(z) + (1 - y) \\log(1 - \\sigma(z))]$. Derive $\\partial L / \\partial w_1$ (the
first weight, the one that multiplies $x_1 = 0.5$) and give its value to three decimals. Is it positive or
negative, and which way will a gradient step move $w_1$?""",
        hints=("The chain rule: $\\partial L / \\partial w_1 = \\frac{\\partial L}{\\partial z} \\cdot "
               "\\frac{\\partial z}{\\partial w_1}$, and $\\partial z / \\partial w_1 = x_1$.",
               "With the sigmoid's derivative $\\sigma'(z) = \\sigma(z)(1 - \\sigma(z))$, eq. 6.25 gives "
               "$\\partial L / \\partial z = \\sigma(z) - y$.",
               "$\\sigma(0.87) \\approx 0.705$."),
        solution="""By the chain rule $\\frac{\\partial L}{\\partial w_1} = \\frac{\\partial L}{\\partial z}
\\frac{\\partial z}{\\partial w_1}$. For $y = 1$, $L = -\\log \\sigma(z)$ and $\\frac{\\partial L}{\\partial z} =
-\\frac{\\sigma(z)(1 - \\sigma(z))}{\\sigma(z)} = \\sigma(z) - 1$; in general $\\sigma(z) - y$, the prediction
minus the gold answer. And $\\partial z / \\partial w_1 = x_1$. So
$\\partial L / \\partial w_1 = (\\sigma(0.87) - 1) \\cdot 0.5 = (0.7047 - 1) \\cdot 0.5 = -0.148$. It is negative:
gradient descent, $w \\leftarrow w - \\eta \\nabla_w L$, raises $w_1$, which raises $z$ and $\\hat{y}$ towards the
gold 1. Autograd agrees: `loss.backward()` on the page's unit puts $-0.148$ in `w.grad[0]`.""",
        answer=_weight_gradient,
        checker=number(rel=1e-2),
        wrong=0.148,                                                # the sign lost: y - sigma(z) instead
    ),
    Exercise(
        number=4,
        title="More confident, same answers: does the loss move?",
        kind="predict",
        prompt="""The book's XOR network (Fig. 6.6) gives the four inputs the scores $z = [0, 1, 1, 0]$, and the
page computes its mean binary cross-entropy (eq. 6.25) against the gold answers $[0, 1, 1, 0]$. Multiply the
output weights $U$ by 3, so that the scores become $[0, 3, 3, 0]$. Every input is still on the same side of the
decision threshold. Is the mean loss now `higher`, `lower` or `the same`?""",
        hints=("Look at the inputs one by one: which of the four losses change when the score goes from 1 to 3?",
               "A score of 0 is $\\sigma(0) = 0.5$ whatever $U$ is; a score of 3 is $\\sigma(3) \\approx 0.95$."),
        solution="""**Lower**. The two inputs scored 0 keep $\\sigma(0) = 0.5$ and a loss of $\\ln 2 = 0.693$ each:
multiplying $U$ does not move a score of zero. The two positive inputs go from $\\sigma(1) = 0.731$ (a loss of
0.313) to $\\sigma(3) = 0.953$ (0.049). The mean falls from 0.503 to 0.371, though the accuracy stays the same:
the loss rewards confidence in right answers, which is why training keeps pushing scores apart after every answer
is right (and why it needs regularisation to stop).""",
        answer=_sharper,
        checker=choice("higher", "lower", "the same"),
        wrong="the same",                                           # the accuracy is the same; the loss is not
        parse=str,
    ),
    Exercise(
        number=5,
        title="A feedforward network by hand",
        kind="implement",
        prompt="""Write the forward pass of a feedforward network with one hidden ReLU layer and a softmax output,
as a function `forward(x, W, b, U)` of torch tensors: $x$ of shape $(d,)$, $W$ $(H, d)$, $b$ $(H,)$, $U$ $(C, H)$,
returning $\\hat{y} = \\mathrm{softmax}(U\\, \\mathrm{ReLU}(W x + b))$ of shape $(C,)$ (eqs. 6.19-6.20 and the
softmax of eq. 6.11). Use torch operations only (`@`, `torch.relu`, `torch.softmax` or your own exponentials);
define it with `def forward(x, W, b, U): ...` and put `answer = forward`.""",
        hints=("Three lines: $h = \\mathrm{ReLU}(W x + b)$, $z = U h$, $\\hat{y} = \\mathrm{softmax}(z)$.",
               "`torch.softmax(z, dim=0)` for a vector $z$; or `torch.exp(z) / torch.exp(z).sum()`."),
        solution="""```python
def forward(x, W, b, U):
    h = torch.relu(W @ x + b)          # eq. 6.19: the hidden layer, (H,)
    z = U @ h                          # eq. 6.20: the scores, (C,)
    return torch.softmax(z, dim=0)     # eq. 6.11: a probability per class
```

With the book's XOR weights and a two-class $U$, it gives for each input the probabilities that the page's
`feedforward` head (followed by a softmax) gives. The check compares yours with this one on three random
networks of different sizes.""",
        answer=_forward,
        checker=function(_forward_cases),
        wrong=_forward_with_sigmoid,
        placeholder="None",
        parse=None,
    ),
]
