"""Exercises for the tutorials, each with a check a student runs, hints, and a solution a teacher finds.

Every tutorial of the site ends with 3-6 exercises (derive, compute, change a hyperparameter and predict, read a
plot). A student writes an answer and checks it:

    from seqlab.exercises import check
    check("rnn-lm", 2, 0.37)            # -> ✓ right (or ✗ not yet, with what is off)

or from the command line, `seqlab exercises check rnn-lm 2 0.37`. `hint(tutorial, number)` gives the hints one at a
time; `solution(tutorial, number)` the worked solution (the site keeps the solutions on a page of their own,
Tutorials > Solutions, so that a student does not meet them by default).

Each tutorial's exercises are a module of this package (`seqlab.exercises.rnn_lm` for the tutorial `rnn-lm`) holding
`EXERCISES`, a list of `Exercise`. An exercise's right answer is computed by code where it can be (`Exercise.answer`),
so that the check, the solution and the tests cannot disagree; `Exercise.wrong` is an answer the check must refuse
(tests/test_exercises.py holds every check to both).
"""

from __future__ import annotations

import importlib
import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from seqlab.errors import SeqlabError

# the tutorials that have exercises, in the order of the site (the module of each: its name with "_" for "-")
TUTORIALS = ("feedforward", "window-lm", "pooled-classifier", "rnn-lm", "lstm-gru", "stacked-bidirectional",
             "transformer-lm", "encoder-decoder", "summarisation", "harms")
KINDS = ("derive", "compute", "predict", "read a plot", "implement")


@dataclass(frozen=True)
class Verdict:
    """What a check says of an answer: right or not, and a line on why (what is off, never the answer)."""

    correct: bool
    message: str

    def __str__(self) -> str:
        return ("✓ right: " if self.correct else "✗ not yet: ") + self.message

    __repr__ = __str__

    def __bool__(self) -> bool:
        return self.correct


Checker = Callable[[Any, Any], Verdict]     # (answer, expected) -> Verdict


@dataclass(frozen=True)
class Exercise:
    """One exercise: its prompt (Markdown, with the book's notation), hints, solution (Markdown) and check."""

    number: int
    title: str
    kind: str                               # one of KINDS
    prompt: str
    hints: tuple[str, ...]
    solution: str
    answer: Callable[[], Any]               # the right answer, computed (cheap: the tests call every one)
    checker: Checker
    wrong: Any                              # an answer the check refuses (the tests hold it to that)
    placeholder: str = "None"               # what the page's check cell puts in `answer` for the student to replace
    parse: Callable[[str], Any] | None = float    # how `seqlab exercises check` reads an answer typed as text;
    #                                         None: the answer is Python code (a function), checked from Python only
    tutorial: str = field(default="", compare=False)

    def check(self, answer) -> Verdict:
        if answer is None or answer is Ellipsis:
            return Verdict(False, f"no answer yet: put yours in `answer` (it is {self.placeholder} now) and run the "
                           "cell again")
        try:
            return self.checker(answer, self.answer())
        except SeqlabError as error:
            return Verdict(False, str(error))


# ------------------------------------------------------------------------------------------------ the checkers
def number(rel: float = 1e-2, abs: float = 0.0, unit: str = "") -> Checker:
    """A number within `rel` (relative) or `abs` of the right one. Says whether the answer is too high or low."""
    def verdict(answer, expected) -> Verdict:
        value = _as_number(answer)
        if math.isclose(value, expected, rel_tol=rel, abs_tol=abs):
            return Verdict(True, f"{value:g}{unit}")
        side = "too high" if value > expected else "too low"
        close = math.isclose(value, expected, rel_tol=10 * rel, abs_tol=10 * abs)
        return Verdict(False, f"{value:g}{unit} is {side}" + (" (close: check your rounding)" if close else ""))
    return verdict


def numbers_close(rel: float = 1e-2, abs: float = 1e-6) -> Checker:
    """A sequence (or array, or tensor) of numbers, each within `rel` or `abs` of the right one, in order."""
    def verdict(answer, expected) -> Verdict:
        got, want = _as_numbers(answer), _as_numbers(expected)
        if len(got) != len(want):
            return Verdict(False, f"{len(got)} numbers, where {len(want)} are asked for")
        off = [i for i, (g, w) in enumerate(zip(got, want, strict=True))
               if not math.isclose(g, w, rel_tol=rel, abs_tol=abs)]
        if not off:
            return Verdict(True, f"all {len(want)} numbers")
        return Verdict(False, f"{len(off)} of {len(want)} numbers are off, the first at position {off[0]}")
    return verdict


def choice(*options: str) -> Checker:
    """One of a few words (case and surrounding spaces ignored), e.g. "higher" / "lower" / "the same"."""
    allowed = {o.lower(): o for o in options}

    def verdict(answer, expected) -> Verdict:
        said = str(answer).strip().lower()
        if said not in allowed:
            raise SeqlabError(f"answer one of {', '.join(repr(o) for o in options)} (not {answer!r})")
        if said == str(expected).lower():
            return Verdict(True, allowed[said])
        return Verdict(False, f"{allowed[said]!r} is not it: look at the hint")
    return verdict


def function(inputs: Callable[[], Sequence[tuple]], rel: float = 1e-4, abs: float = 1e-6) -> Checker:
    """A function the student writes (e.g. one step of eq. 13.1): called on each argument tuple of `inputs()`, its
    result must equal the right function's (`Exercise.answer()` returns the right function) within tolerance."""
    def verdict(answer, expected) -> Verdict:
        if not callable(answer):
            raise SeqlabError(f"the answer is a function (a `def`), not a {type(answer).__name__}")
        cases = list(inputs())
        for k, args in enumerate(cases, 1):
            try:
                got = answer(*args)
            except Exception as error:          # the student's code failing is an answer, not a crash of the check
                return Verdict(False, f"case {k} of {len(cases)} raised {type(error).__name__}: {error}")
            want = expected(*args)
            if hasattr(want, "shape") and tuple(getattr(got, "shape", ())) != tuple(want.shape):
                return Verdict(False, f"case {k}: shape {tuple(getattr(got, 'shape', ()))}, expected "
                               f"{tuple(want.shape)}")
            g, w = _as_numbers(got), _as_numbers(want)
            if len(g) != len(w) or any(not math.isclose(a, b, rel_tol=rel, abs_tol=abs)
                                       for a, b in zip(g, w, strict=True)):
                return Verdict(False, f"case {k} of {len(cases)} gives different numbers")
        return Verdict(True, f"equal to the reference on {len(cases)} cases")
    return verdict


def _as_number(value) -> float:
    if hasattr(value, "item") and getattr(value, "numel", lambda: getattr(value, "size", 1))() == 1:
        value = value.item()
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise SeqlabError(f"the answer is a number, not {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise SeqlabError(f"the answer is a number, not a {type(value).__name__}")
    if not math.isfinite(value):
        raise SeqlabError(f"the answer is a finite number, not {value}")
    return float(value)


def _as_numbers(value) -> list[float]:
    if hasattr(value, "detach"):
        value = value.detach().cpu().reshape(-1).tolist()
    elif hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, numbers.Real):
        value = [value]
    flat: list = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(reversed(item))
        else:
            flat.append(_as_number(item))
    return flat


# ------------------------------------------------------------------------------------- helpers of the modules
def own_random(compute):
    """`compute` (an exercise's `answer`) on torch's random generator of its own: a check run in a notebook leaves
    the student's seed as it was."""
    import functools

    import torch

    @functools.wraps(compute)
    def wrapped():
        with torch.random.fork_rng(devices=[]):
            return compute()
    return wrapped


def one_paragraph(text: str) -> str:
    """A prompt written over several lines of source as one paragraph of Markdown."""
    return " ".join(text.split())


# ------------------------------------------------------------------------------------------------- the lookup
def exercises(tutorial: str) -> list[Exercise]:
    """The exercises of a tutorial (e.g. "rnn-lm"), in order."""
    if tutorial not in TUTORIALS:
        raise SeqlabError(f"no tutorial {tutorial!r} has exercises; the tutorials: {', '.join(TUTORIALS)}")
    try:
        module = importlib.import_module(f"seqlab.exercises.{tutorial.replace('-', '_')}")
    except ModuleNotFoundError as error:
        if error.name != f"seqlab.exercises.{tutorial.replace('-', '_')}":
            raise
        return []
    found = list(module.EXERCISES)
    return [_with_tutorial(e, tutorial) for e in found]


def _with_tutorial(exercise: Exercise, tutorial: str) -> Exercise:
    object.__setattr__(exercise, "tutorial", tutorial)
    return exercise


def get(tutorial: str, number: int) -> Exercise:
    found = exercises(tutorial)
    for exercise in found:
        if exercise.number == number:
            return exercise
    raise SeqlabError(f"the tutorial {tutorial} has exercises 1 to {len(found)}, not {number}" if found else
                      f"the tutorial {tutorial} has no exercises yet, so not {number}")


def check(tutorial: str, number: int, answer) -> Verdict:
    """Check an answer to exercise `number` of `tutorial`: a Verdict, shown as "✓ right: ..." or "✗ not yet: ..."."""
    return get(tutorial, number).check(answer)


def hint(tutorial: str, number: int, which: int = 1) -> str:
    """The `which`-th hint (1 first) of an exercise."""
    hints = get(tutorial, number).hints
    if not 1 <= which <= len(hints):
        raise SeqlabError(f"exercise {tutorial} {number} has hints 1 to {len(hints)}, not {which}")
    return hints[which - 1]


def solution(tutorial: str, number: int) -> str:
    """The worked solution of an exercise (Markdown), for a teacher, or a student who is done trying."""
    return get(tutorial, number).solution
