"""Search spaces: the options `seqlab tune` (and `seqlab compare --tune-trials`) searches for one architecture,
each a range or a set of values, declared once per family beside its compare recipes (`SPACE` and
`ARCH_SPACE` of `seqlab.families.<name>.compare`), and overridable from a YAML file (`--space FILE`):

    lr: {low: 3.0e-4, high: 1.0e-2, log: true}     # a real range; log: sampled uniformly in log space
    dropout: {low: 0.0, high: 0.6}
    num_layers: {low: 1, high: 3}                   # whole-number ends: an integer range
    hidden_size: [128, 256, 512]                    # a list: one of these values
    weight_decay: null                              # null: leave a default out of the space
    lstm:                                           # an architecture's name: entries for it alone
      dropout: {low: 0.2, high: 0.7}

Option names are a config file's (`num_layers`, not `--layers`). The width of the recipe (`hidden_size`,
else `embedding_size`) is searched over 0.5x to 2x the recipe's at the chosen --size; a comparison leaves it
out (its models keep the size --size gives them) unless the file names it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seqlab.errors import SeqlabError
from seqlab.registry import family

if TYPE_CHECKING:
    from optuna.distributions import BaseDistribution

WIDTH_FACTORS = (0.5, 1.0, 1.5, 2.0)
WIDTH_OPTIONS = ("hidden_size", "embedding_size")         # the first the recipe has is its width
SET_BY_TUNE = ("output", "epochs", "max_time", "max_tokens", "max_steps", "time_schedule", "resume", "seed")


@dataclass(frozen=True)
class Param:
    """One searched option: a real or integer range [low, high] (log: uniform in log space), or `choices`."""

    name: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    integer: bool = False
    choices: tuple[Any, ...] | None = None

    def distribution(self) -> BaseDistribution:
        """The Optuna distribution it is sampled from."""
        import optuna

        if self.choices is not None:
            return optuna.distributions.CategoricalDistribution(self.choices)
        assert self.low is not None and self.high is not None        # a range: low and high, no choices
        if self.integer:
            return optuna.distributions.IntDistribution(int(self.low), int(self.high), log=self.log)
        return optuna.distributions.FloatDistribution(self.low, self.high, log=self.log)

    def holds(self, value: object) -> bool:
        """Whether `value` lies in the space (the recipe's own value, tried first, must)."""
        if self.choices is not None:
            return value in self.choices
        assert self.low is not None and self.high is not None
        return isinstance(value, (int, float)) and not isinstance(value, bool) and self.low <= value <= self.high \
            and (not self.integer or float(value).is_integer())

    def describe(self) -> str:
        if self.choices is not None:
            return "one of " + ", ".join(map(str, self.choices))
        return f"{self.low:g} to {self.high:g}" + (" (log)" if self.log else "") + (" (integers)" if self.integer
                                                                                    else "")

    def as_entry(self) -> list[Any] | dict[str, Any]:
        """The YAML form it was given in (tune.json and the summary record the space so)."""
        if self.choices is not None:
            return list(self.choices)
        return {"low": self.low, "high": self.high, **({"log": True} if self.log else {})}


def parse_param(name: str, entry: object, source: str) -> Param:
    """A space entry (a mapping with low/high[/log], or a list of values) -> Param; anything else, an empty or
    reversed range, a log range reaching 0, or an empty list is a SeqlabError naming `source` and the option."""
    where = f"{source}: {name}"
    if isinstance(entry, (list, tuple)):
        if not entry:
            raise SeqlabError(f"{where}: an empty list of values; give at least one")
        if len(set(map(repr, entry))) != len(entry):
            raise SeqlabError(f"{where}: a value is listed twice in {list(entry)}")
        if not all(isinstance(v, (str, int, float, bool)) for v in entry):
            raise SeqlabError(f"{where}: values must be numbers, strings or booleans, got {list(entry)}")
        return Param(name, choices=tuple(entry))
    if not isinstance(entry, dict):
        raise SeqlabError(f"{where}: give a range {{low: A, high: B}} (log: true for a log scale) or a list of "
                          f"values, not {entry!r}")
    unknown = set(entry) - {"low", "high", "log"}
    if unknown or "low" not in entry or "high" not in entry:
        why = f"unknown: {', '.join(map(str, unknown))}" if unknown else "give both low and high"
        raise SeqlabError(f"{where}: a range takes low, high and log ({why})")
    low, high, log = entry["low"], entry["high"], entry.get("log", False)
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in (low, high))
    if not numbers:
        raise SeqlabError(f"{where}: low and high must be finite numbers, got {low!r} and {high!r}")
    if not isinstance(log, bool):
        raise SeqlabError(f"{where}: log must be true or false, got {log!r}")
    if low >= high:
        raise SeqlabError(f"{where}: the range {low!r} to {high!r} is empty; give low < high (a single value: "
                          "set the option itself, not a range)")
    if log and low <= 0:
        raise SeqlabError(f"{where}: a log range must stay above 0, got low {low!r}")
    integer = isinstance(low, int) and isinstance(high, int)
    return Param(name, float(low) if not integer else low, float(high) if not integer else high, log, integer)


def read_space(path: str | Path) -> dict[str, Any]:
    """A --space file: YAML, a mapping (module docstring). A missing, empty or unreadable file, or one that is
    not YAML, is a SeqlabError."""
    import yaml

    from seqlab.fileio import read_text

    path = Path(path)
    try:
        loaded = yaml.safe_load(read_text(path, "--space file"))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise SeqlabError(f"{path}{where}: not valid YAML ({getattr(error, 'problem', None) or error})") from None
    if not isinstance(loaded, dict) or not loaded:
        raise SeqlabError(f"{path}: give a mapping from option names to ranges, e.g. 'lr: {{low: 1.0e-4, high: "
                          "1.0e-2, log: true}'")
    return loaded


def width_param(options: dict[str, Any]) -> Param | None:
    """The recipe's width (hidden_size, else embedding_size) at 0.5x-2x its value, each a multiple of the
    heads of a transformer (its width must divide among them), as a set of values."""
    name = next((n for n in WIDTH_OPTIONS if isinstance(options.get(n), int)), None)
    if name is None:
        return None
    unit = max(int(options.get("num_heads") or 1), 2)
    values = sorted({max(unit, unit * round(options[name] * f / unit)) for f in WIDTH_FACTORS})
    return Param(name, choices=tuple(values))


def search_space(task: str, arch: str, options: dict[str, Any], user: dict[str, Any] | None = None, width: bool = True,
                 source: str = "--space") -> dict[str, Param]:
    """{option: Param} for the architecture `arch` of the task's compare recipes, whose options at the run's size
    are `options`: the family's SPACE, its ARCH_SPACE[arch], the width (`width`: not in a comparison), then
    the user's entries (top level: every architecture they act on; under an architecture's name: that one;
    None removes an entry). An option the task does not have, one set by the budget, or one that does nothing
    for this architecture is a SeqlabError."""
    from seqlab.compare.recipes import recipes

    part = family(task).part("compare")
    pipeline = family(task).pipeline
    entries: dict[str, Any] = {**part.SPACE, **part.ARCH_SPACE.get(arch, {})}
    space = {name: parse_param(name, entry, f"{task} search space") for name, entry in entries.items()}
    found = width_param(options) if width else None
    if found is not None:
        space[found.name] = found
    user = dict(user or {})
    archs = recipes(task)
    mine = user.pop(arch, None) if isinstance(user.get(arch), dict) else None
    for name in [n for n in user if n in archs]:                   # another architecture's section
        if not isinstance(user[name], dict):
            raise SeqlabError(f"{source}: {name}: an architecture's section must map options to ranges")
        user.pop(name)
    for scope, given in (("", user), (f" ({arch})", mine or {})):
        for name, entry in given.items():
            name = str(name).replace("-", "_")
            if name not in pipeline.option_groups:
                raise SeqlabError(f"{source}{scope}: unknown option {name!r} for {task} (option names are a config "
                                  f"file's: num_layers, not --layers; architectures: {', '.join(archs)})")
            if name in SET_BY_TUNE:
                raise SeqlabError(f"{source}{scope}: {name!r} is set by the tuning budget for every trial alike "
                                  "(--budget-epochs, --budget-tokens or --budget), not searched")
            if entry is None:
                space.pop(name, None)
                continue
            space[name] = parse_param(name, entry, source + scope)
    for param in space.values():
        check_applies(task, arch, options, param, source)
    return space


def check_applies(task: str, arch: str, options: dict[str, Any], param: Param, source: str) -> None:
    """An option that does nothing for this architecture (heads for an LSTM) cannot be searched: its trials
    would differ in nothing; refused, naming the option."""
    from seqlab.config import inapplicable

    pipeline = family(task).pipeline
    group = pipeline.option_groups[param.name]
    values = {k: v for k, v in options.items() if pipeline.option_groups.get(k) == group}
    samples = param.choices if param.choices is not None else (param.low, param.high)
    for sample in samples:                                   # every value it may take is one the option takes
        try:
            obj = pipeline.groups[group](**{**values, param.name: sample})
        except SeqlabError as error:
            raise SeqlabError(f"{source}: {param.name}: {error}") from None
        except TypeError:
            raise SeqlabError(f"{source}: {param.name}: {sample!r} is not a value it takes") from None
    if inapplicable(obj, [param.name]):
        raise SeqlabError(f"{source}: {param.name!r} does nothing for the {arch} architecture of {task}; leave it "
                          f"out (or put it under another architecture's name)")
