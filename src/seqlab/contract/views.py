"""What `seqlab explore` shows of a trained model: the views a family declares (`ViewSpec`, in its `explain`
part's `VIEWS`), the options a reader sets (`ExplainOptions`), and the shapes of what a view holds (`View`, one of
four kinds the page draws without knowing the family), gathered in an `Explanation`.

The kinds, each drawn by one function of the page (`static/explore.js`) whatever family sends it:

    tokens   a strip of the text's tokens, each with a value (a heat strip: surprisal, a probability) and, on
             hover, its details: the top-k alternatives with their probabilities, the rank of the actual token
    matrix   panels of a heat map (rows x columns, e.g. units x tokens, a layer's gate; queries x keys, one head's
             attention; tokens x labels, a tagger's scores; tokens x classes, a classifier's prefixes), each
             with its value range, an optional highlighted path (the Viterbi path), an optional strip of a value
             per column above it (a layer's hidden-state norms ||h_t||) and, where rows and columns are both
             tokens, a line view (`lines`)
    bars     one distribution: a bar per label (a classifier's classes)
    tree     a search's tree (a beam's kept and dropped candidates, step by step) and its finished hypotheses
             ranked

Torch-free: the families turn their tensors into lists (`.tolist()`) before they build a view, so that an
explanation is plain data, JSON as it is (`Explanation.to_json`), and an export on onnxruntime builds the same.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from seqlab.config import option
from seqlab.errors import SeqlabError

KINDS = ("tokens", "matrix", "bars", "tree")

# bounds of one explanation (a request to the server, a call of `explain`)
MAX_TEXT_CHARS = 5000         # characters of the text explained
MAX_TOKENS = 512              # tokens (or characters, for a character model) read of it
MAX_UNITS = 256               # the most hidden units a heat map sends; the rest summarised away
MAX_GENERATE = 64             # tokens generated step by step
MAX_BEAM = 16
MAX_TOP_K = 50
MAX_CELLS = 400_000           # numbers of matrix panels one answer of the server holds (~3 MB of JSON)
DIGITS = 4                    # significant digits of the numbers the server sends


@dataclass(frozen=True)
class ViewSpec:
    """A view a family can show: its name (the key a reader asks for), its kind (`KINDS`), its title, what it
    shows (one line, with the book's equations), and the architectures it applies to (() for all)."""

    name: str                       # "gates"
    kind: str                       # "matrix"
    title: str                      # "Gates and hidden states"
    about: str                      # "the LSTM's forget, add and output gates (SLP 13.20-13.26) per token and unit"
    archs: tuple[str, ...] = ()     # the architectures that have it ("lstm", "gru", ...); () for all
    exported: bool = False          # it can be computed on an ONNX export (from the graphs' outputs alone)
    why_not_exported: str = ""      # where not: why ("the graphs output the logits, not the gates")

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"view {self.name!r}: kind {self.kind!r}; choose one of {', '.join(KINDS)}")
        if not self.exported and not self.why_not_exported:
            raise ValueError(f"view {self.name!r}: say why it cannot be computed on an export")


def _number(name: str, value: Any, low: float, high: float, integer: bool) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SeqlabError(f"{name} must be a number, not {value!r}")
    if integer and value != int(value):
        raise SeqlabError(f"{name} must be a whole number, not {value}")
    if not math.isfinite(value) or not low <= value <= high:
        raise SeqlabError(f"{name} must be between {low:g} and {high:g}, not {value}")
    return int(value) if integer else float(value)


@dataclass(frozen=True)
class ExplainOptions:
    """What a reader sets beside the text; each checked on construction (out of range: SeqlabError). Each field's
    help and range (`seqlab.config.option`) are what `seqlab explore`'s flags and the API's document show."""

    top_k: int = option(5, "alternatives shown per position (a language model's), labels per token", at_least=1,
                        at_most=MAX_TOP_K)
    units: int = option(32, "hidden units a heat map shows: the ones that vary most over the text", at_least=1,
                        at_most=MAX_UNITS)
    strategy: str = option("greedy", "generation step by step: greedy, sample or beam",
                           choices=("greedy", "sample", "beam"))
    max_tokens: int = option(12, "tokens generated step by step", at_least=1, at_most=MAX_GENERATE)
    temperature: float = option(1.0, "softmax temperature of sampled generation", at_least=0.01, at_most=100)
    top_p: float = option(1.0, "nucleus sampling: the probability mass sampled from", at_least=0.01, at_most=1)
    beam: int = option(4, "the beam's width (beam generation, a translation's beam tree)", at_least=1,
                       at_most=MAX_BEAM)
    length_penalty: float = option(1.0, "alpha of log p / length^alpha that ranks finished hypotheses (SLP 13.4)",
                                   at_least=0, at_most=10)
    seed: int = option(0, "random seed of sampled generation", at_least=0, at_most=2**31 - 1)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            if f.metadata["choices"]:
                if getattr(self, f.name) not in f.metadata["choices"]:
                    raise SeqlabError(f"{f.name} must be {', '.join(f.metadata['choices'][:-1])} or "
                                      f"{f.metadata['choices'][-1]}, not {getattr(self, f.name)!r}")
                continue
            object.__setattr__(self, f.name, _number(f.name, getattr(self, f.name), f.metadata["at_least"],
                                                     f.metadata["at_most"], isinstance(f.default, int)))

    @classmethod
    def from_dict(cls, given: dict[str, Any] | None) -> ExplainOptions:
        """From a request's "options" (unknown keys refused, by name)."""
        given = dict(given or {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(given) - known)
        if unknown:
            raise SeqlabError(f"unknown explain option {unknown[0]!r}: choose from {', '.join(sorted(known))}")
        return cls(**given)


def _finite(values: Any, digits: int | None = None) -> Any:
    """Lists (and dicts) of numbers with NaN and infinities as None (JSON has neither), each float rounded to
    `digits` significant digits where given."""
    if isinstance(values, list | tuple):
        return [_finite(v, digits) for v in values]
    if isinstance(values, dict):
        return {k: _finite(v, digits) for k, v in values.items()}
    if isinstance(values, float):
        if not math.isfinite(values):
            return None
        return float(f"{values:.{digits}g}") if digits else values
    return values


@dataclass
class Panel:
    """One heat map of a matrix view: `values` rows x columns (lists of floats), with their labels."""

    title: str                                   # "layer 1, forward: forget gate f (13.20)"
    rows: list[str]                              # row labels: units ("unit 17": its index, from 0), tokens, queries
    cols: list[str]                              # column labels: tokens, keys, labels
    values: list[list[float]]
    range: tuple[float, float] | None = None     # the colour scale's ends (None: the values' own)
    path: list[int] | None = None                # a highlighted cell per row (its column): the Viterbi path
    group: str = ""                              # panels of one group are chosen between (a layer, a head)
    strip: list[float] | None = None             # a value per column, drawn as a strip above the heat map
    strip_label: str = ""                        # what the strip's values are ("||h_t||, over all 64 units")

    def __post_init__(self) -> None:
        if len(self.values) != len(self.rows) or any(len(row) != len(self.cols) for row in self.values):
            raise ValueError(f"panel {self.title!r}: {len(self.values)} rows of values for {len(self.rows)} "
                             f"labels, each of {len(self.cols)} columns")
        if self.strip is not None and len(self.strip) != len(self.cols):
            raise ValueError(f"panel {self.title!r}: a strip of {len(self.strip)} values for {len(self.cols)} "
                             "columns")


@dataclass
class View:
    """One view's data, as the page and a notebook read it. What each kind holds (beside name, kind, title,
    about, and `note`, what was left out or summarised):

    tokens: `tokens` [str], `values` [float] (`label` says what), `details` [{...}] per token (its probability,
            rank, `alternatives` [[token, probability], ...])
    matrix: `panels` [Panel], `lines` (rows and columns are tokens: draw lines between them too)
    bars:   `labels` [str], `values` [float], `label`
    tree:   `nodes` [{"id", "parent", "token", "score", "step", "status"}], `finished` [{"node", "tokens",
            "text", "score", "normalized", "rank"}], `label`
    """

    name: str
    kind: str
    title: str
    about: str = ""
    note: str = ""
    label: str = ""
    tokens: list[str] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    details: list[dict[str, Any]] = field(default_factory=list)
    panels: list[Panel] = field(default_factory=list)
    lines: bool = False
    labels: list[str] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    finished: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"view {self.name!r}: kind {self.kind!r}; choose one of {', '.join(KINDS)}")

    def to_json(self, digits: int | None = None, panels: int | None = None) -> dict[str, Any]:
        """The view as the page reads it: only what its kind holds, NaN and infinities as null, the numbers
        rounded to `digits` significant digits (None: as computed), the first `panels` of a matrix (None: all;
        the note then says how many were left out)."""
        keep = {"tokens": ("tokens", "values", "details", "label"), "matrix": ("panels", "lines"),
                "bars": ("labels", "values", "label"), "tree": ("nodes", "finished", "label")}[self.kind]
        out: dict[str, Any] = {"name": self.name, "kind": self.kind, "title": self.title, "about": self.about,
                               "note": self.note}
        for key in keep:
            value = getattr(self, key)
            if key == "panels":
                shown = value if panels is None else value[:panels]
                if len(shown) < len(value):
                    left = (f"{len(value) - len(shown)} of its {len(value)} panels left out: an answer of the "
                            f"server holds at most {MAX_CELLS:,} numbers (ask for fewer tokens or views; "
                            "`explain` in Python gives them all)")
                    out["note"] = f"{self.note}; {left}" if self.note else left
                value = [{**dataclasses.asdict(p), "values": _finite(p.values, digits),
                          "strip": _finite(p.strip, digits)} for p in shown]
            elif key != "tokens" and key != "labels" and key != "label":
                value = _finite(value, digits)
            out[key] = value
        return out

    def cells(self) -> list[int]:
        """The numbers each of its panels holds, its strip's too (a matrix's; [] for the other kinds)."""
        return [(len(p.rows) + (p.strip is not None)) * len(p.cols) for p in self.panels]

    @classmethod
    def of(cls, spec: ViewSpec, **fields: Any) -> View:
        """The view of a declared `spec` (its name, kind, title and about), holding `fields`."""
        return cls(name=spec.name, kind=spec.kind, title=spec.title, about=spec.about, **fields)


@dataclass
class Explanation:
    """What `explain` found: the text's tokens as the model read them, each view asked for, and the seconds it
    took. `view(name)` is one of them; `to_json()` the whole, as POST /v1/explain answers."""

    model: str                               # the run's folder name (or the export's)
    family: str
    arch: str
    tokens: list[str]
    views: list[View]
    seconds: float = 0.0
    truncated: bool = False                  # the text was longer than MAX_TOKENS: its first ones were read

    def view(self, name: str) -> View:
        for view in self.views:
            if view.name == name:
                return view
        raise KeyError(f"no view {name!r} here: {', '.join(v.name for v in self.views) or 'none'}")

    def to_json(self, digits: int | None = None, max_cells: int | None = None) -> dict[str, Any]:
        """The whole as JSON: numbers rounded to `digits` significant digits (None: as computed); with
        `max_cells`, the matrix panels past that many numbers in all (in view order) left out, each view's note
        saying so (the server's answer: `DIGITS`, `MAX_CELLS`)."""
        budget = max_cells
        shown = []
        for view in self.views:
            panels = None
            if budget is not None and view.panels:
                panels = 0
                for cells in view.cells():
                    if cells > budget:
                        break
                    budget -= cells
                    panels += 1
            shown.append(view.to_json(digits, panels))
        return {"model": self.model, "family": self.family, "arch": self.arch, "tokens": self.tokens,
                "truncated": self.truncated, "seconds": round(self.seconds, 4), "views": shown}


def top_units(values: Sequence[Sequence[float]], count: int) -> list[int]:
    """Of a units x tokens matrix, the `count` units whose values vary most over the tokens (their standard
    deviation), in their original order: what a heat map of many units keeps (LSTMVis's selection)."""
    def spread(row: Sequence[float]) -> float:
        mean = sum(row) / max(len(row), 1)
        return sum((v - mean) ** 2 for v in row) / max(len(row), 1)
    ranked = sorted(range(len(values)), key=lambda u: -spread(values[u]))
    return sorted(ranked[:count])


# the hidden state and the gates of each recurrent cell, as its panels are titled: (key, the book's name, equation)
HIDDEN = {"rnn": ("hidden state h", "13.1"), "lstm": ("hidden state h", "13.27"), "gru": ("hidden state h", "9.13")}
GATES = {
    "lstm": (("i", "add (input) gate i", "13.23"), ("f", "forget gate f", "13.20"),
             ("o", "output gate o", "13.26"), ("c", "context c", "13.25")),
    "gru": (("z", "update gate z", "9.11"), ("r", "reset gate r", "9.10")),
    "rnn": (),
}


def _rows(values: Any) -> list[list[float]]:
    """A (T, H) array (a tensor, a numpy array, lists) as H lists of T floats."""
    rows = values.tolist() if hasattr(values, "tolist") else values
    return [list(column) for column in zip(*rows, strict=True)]


def gate_panels(layers: Sequence[Sequence[dict[str, Any]]], cell: str, columns: list[str], units: int,
                bounded: bool = True, stack: str = "", digits: int = 6) -> tuple[list[Panel], str]:
    """The panels of a recurrent stack's `gates` view from what `seqlab.nn.inside.recurrent_record` recorded
    (per layer, per direction: {"h": (T, H), and the cell's `GATES`}, tensors or arrays): per layer and direction
    (the group "layer L forward" or "backward", after `stack`: "encoder "), the hidden state h (range -1..1 where
    `bounded`: tanh) and each gate (0..1; the LSTM's context c its own), rows the `units` units whose h varies
    most over the text (the same in each panel of a group, "unit N" by their index), columns the tokens, and
    above each the group's strip of hidden-state norms ||h_t|| (over all H units, the ones not shown too); and
    the note saying how many units of how many are shown."""
    panels, notes = [], []
    name, equation = HIDDEN[cell]
    for l, directions in enumerate(layers, start=1):
        for d, found in enumerate(directions):
            group = f"{stack}layer {l} {'backward' if d else 'forward'}"
            h = _rows(found["h"])                                               # (H, T)
            kept = top_units(h, units)
            labels = [f"unit {u}" for u in kept]
            norms = {"strip": _finite([math.hypot(*at) for at in zip(*h, strict=True)], digits),   # (T,)
                     "strip_label": f"||h_t||, the hidden state's norm over all {len(h)} units"}
            panels.append(Panel(f"{group}: {name} ({equation})", labels, list(columns),
                                _finite([h[u] for u in kept], digits), (-1.0, 1.0) if bounded else None, group=group,
                                **norms))
            for key, title, eq in GATES[cell]:
                values = _rows(found[key])
                panels.append(Panel(f"{group}: {title} ({eq})", labels, list(columns),
                                    _finite([values[u] for u in kept], digits), None if key == "c" else (0.0, 1.0),
                                    group=group, **norms))
            if len(kept) < len(h):
                notes.append(f"{stack}the {len(kept)} of {len(h)} units whose hidden state varies most over the text "
                             "(the same in each panel of a layer)")
    return panels, "; ".join(dict.fromkeys(notes))


def choose(declared: Sequence[ViewSpec], arch: str, asked: Sequence[str] | None,
           exported: bool = False) -> list[ViewSpec]:
    """The views of `declared` that a model of `arch` has (on an export: those computed from its outputs),
    in their declared order; `asked` (None: all of them) names some, each of which must be one."""
    available = [s for s in declared if (not s.archs or arch in s.archs) and (s.exported or not exported)]
    if asked is None:
        return available
    names = {s.name: s for s in available}
    for name in asked:
        if name not in names:
            where = "an export of " if exported else ""
            raise SeqlabError(f"{where}a {arch} model has no view {name!r}: choose from "
                              f"{', '.join(names) or 'none'}")
    return [s for s in available if s.name in set(asked)]


def explain(model: Any, text: str, views: Sequence[str] | None = None,
            options: ExplainOptions | dict[str, Any] | None = None, name: str = "") -> Explanation:
    """Look inside `model` (a trained model of a family with an `explain` part, on PyTorch or on an export) as
    it reads `text`: each view of `views` (None: every view its architecture has) computed by its family's
    `explain` part on the model's own forward pass. What `seqlab.load(run).explain(text)`, POST /v1/explain and
    `seqlab explore` call."""
    import time

    family = getattr(model, "family", None)
    if family is None or not family.explains:
        raise SeqlabError(f"{getattr(family, 'title', 'this model')} has no views to explore")
    if not isinstance(text, str) or not text.strip():
        raise SeqlabError("the text to explain is empty: give a sentence")
    if len(text) > MAX_TEXT_CHARS:
        raise SeqlabError(f"the text to explain has {len(text)} characters; at most {MAX_TEXT_CHARS} are read")
    if isinstance(views, str):
        views = [v for v in views.split(",") if v]
    options = options if isinstance(options, ExplainOptions) else ExplainOptions.from_dict(options)
    part = family.part("explain")
    exported = not hasattr(model, "model")                  # an export's API holds sessions, not a module
    arch = part.arch(model)
    specs = choose(part.VIEWS, arch, views, exported)
    started = time.perf_counter()
    compute = part.explain_exported if exported else part.explain
    tokens, found, truncated = compute(model, text, specs, options)
    return Explanation(model=name or str(getattr(model, "run_dir", "") or getattr(model, "export_dir", "")),
                       family=family.name, arch=arch, tokens=tokens, views=found,
                       seconds=time.perf_counter() - started, truncated=truncated)
