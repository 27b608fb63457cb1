"""Typed configuration: dataclass fields with a help line, YAML/TOML files, and overrides.

A config field is declared with `option(default, "one-line help", choices=...)`. The command line
builds its options from these fields, so every option has `--help` text and no option is defined
twice. A config file (YAML or TOML) may hold any option, flat (`hidden_size: 650`) or under the
group it belongs to (`model: {hidden_size: 650}`); the command line overrides the file.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import sys
import types
import typing
from dataclasses import field
from pathlib import Path

from seqlab.errors import SeqlabError
from seqlab.fileio import read_text


def option(default, help: str, choices: tuple | None = None, flag: str | None = None, *,
           at_least: float | None = None, above: float | None = None, at_most: float | None = None,
           below: float | None = None, file: bool = False, when: dict[str, tuple] | None = None):
    """A config field with its --help line, the allowed values of a closed set (`choices`) and, for a
    number, its range: `at_least` / `above` a lower bound (inclusive / exclusive), `at_most` / `below`
    an upper one. A float must also be finite (nan and inf are refused everywhere). `file=True` marks
    an input file: a run records it as an absolute path with its SHA-256, and --resume checks both.
    `when={"arch": ("transformer",)}`: the option acts only when the named fields of its group hold one
    of those values; given otherwise (on the command line or in a config file), it is refused
    (`inapplicable`) instead of silently doing nothing."""
    metadata = {"help": help, "choices": choices, "flag": flag, "at_least": at_least,
                                            "above": above, "at_most": at_most, "below": below, "file": file,
                "when": when}
    if isinstance(default, list):             # a list-valued option (`--canary-repeats 1 4 16 64`)
        return field(default_factory=lambda: list(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def file_fields(obj) -> list[str]:
    """The names of a config's input-file fields (`option(..., file=True)`)."""
    return [f.name for f in dataclasses.fields(obj) if f.metadata.get("file")]


@functools.cache
def type_hints(cls) -> dict:
    """`typing.get_type_hints(cls)`, once per class: resolving the annotations is most of checking an options
    object's fields, which the server does for every request."""
    return typing.get_type_hints(cls)


def field_type(cls, f: dataclasses.Field):
    """The base type of a field: int for `int | None`, etc."""
    hint = type_hints(cls)[f.name]
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        hint = args[0]
    return hint


def element_type(kind: typing.Any) -> typing.Any:
    """The element type of a list-valued option (int for `list[int]`), or None for a scalar one."""
    return typing.get_args(kind)[0] if typing.get_origin(kind) is list else None


def field_default(f: dataclasses.Field):
    """A field's default value (a fresh list for a list-valued option)."""
    return f.default_factory() if f.default is dataclasses.MISSING else f.default


def flag_name(f: dataclasses.Field) -> str:
    """How messages name a field: its command-line option."""
    return f"--{f.metadata.get('flag') or f.name.replace('_', '-')}"


class OptionError(SeqlabError):
    """A refused option value, its message written once and naming the options as their caller names them:
    `template` holds each option as `{field_name}`, and `flags` maps those fields to their command-line flags.
    `str(error)` names the flags (`--top-p must be ...`: the command line, and the Python API, whose keywords
    the flags spell); `in_api()` names the fields as a JSON request does (`top_p must be ...`), or as `api`
    says for a field it maps (a request may lack the option: "" leaves it out)."""

    def __init__(self, template: str, flags: dict[str, str], api: dict[str, str] | None = None):
        self.template, self.flags, self.api = template, flags, api or {}
        super().__init__(template.format(**flags))

    @property
    def option(self) -> str:
        """The first option the message names (the field's name)."""
        return next(iter(self.flags))

    def in_api(self) -> str:
        return self.template.format(**{name: self.api.get(name, name) for name in self.flags})

    def __reduce__(self):                     # pickled (a worker's error) with its template, not its text
        return type(self), (self.template, self.flags, self.api)


def option_error(cls, template: str, *names: str) -> OptionError:
    """An `OptionError` about the fields `names` of the config dataclass `cls` (`template` names them as
    `{name}`)."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    return OptionError(template, {name: flag_name(fields[name]) for name in names})


def range_text(metadata) -> str:
    """A field's range in words or interval notation: "positive", "at least 1", "in [0, 1)"."""
    low = metadata.get("at_least") if metadata.get("at_least") is not None else metadata.get("above")
    high = metadata.get("at_most") if metadata.get("at_most") is not None else metadata.get("below")
    if low is None and high is None:
        return ""
    if high is None:
        if metadata.get("at_least") is not None:
            return f"at least {_number(low)}"
        return "positive" if low == 0 else f"above {_number(low)}"
    if low is None:
        return f"at most {_number(high)}" if metadata.get("at_most") is not None else f"below {_number(high)}"
    opening = "[" if metadata.get("at_least") is not None else "("
    closing = "]" if metadata.get("at_most") is not None else ")"
    return f"in {opening}{_number(low)}, {_number(high)}{closing}"


def _number(value) -> str:
    if isinstance(value, int) and value >= 1 << 20 and value & (value - 1) == 0:
        return f"2^{value.bit_length() - 1}"                  # a seed's bound, 2^63, not 19 digits
    return str(int(value)) if float(value).is_integer() else str(value)


def value_problem(kind: type, metadata, value) -> str | None:
    """What is wrong with `value` for a field of type `kind` with these metadata, or None."""
    if value is None:
        return None
    item = element_type(kind)
    if item is not None:                      # a list: each element as an option of the element type
        if not isinstance(value, (list, tuple)):
            return f"expects a list of {item.__name__} values, got {value!r}"
        for element in value:
            problem = value_problem(item, metadata, element)
            if problem:
                return problem
        return None
    if kind is bool:
        return None if isinstance(value, bool) else f"expects true or false, got {value!r}"
    if kind in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and isinstance(value, float)):
            return f"expects {'an integer' if kind is int else 'a number'}, got {value!r}"
        if not math.isfinite(value):
            return f"must be a finite number, got {value}"
        bounds = [(metadata.get("at_least"), value >= (metadata.get("at_least") or 0)),
                  (metadata.get("above"), value > (metadata.get("above") or 0)),
                  (metadata.get("at_most"), value <= (metadata.get("at_most") or 0)),
                  (metadata.get("below"), value < (metadata.get("below") or 0))]
        if any(bound is not None and not ok for bound, ok in bounds):
            return f"must be {range_text(metadata)}, got {value}"
    elif kind is str and not isinstance(value, str):
        return f"expects text, got {value!r}"
    choices = metadata.get("choices")
    if choices and value not in choices:
        return f"must be one of {', '.join(map(str, choices))}, got {value!r}"
    return None


def check_fields(obj) -> None:
    """Every field of a config dataclass holds a value of its type, within its range (numbers are
    finite) and among its choices; raise an `OptionError` naming the option otherwise."""
    hints = type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if value is None and type(None) not in typing.get_args(hints[f.name]):
            raise OptionError(f"{{{f.name}}} needs a value (got none)", {f.name: flag_name(f)})
        problem = value_problem(field_type(type(obj), f), f.metadata, value)
        if problem:
            raise OptionError(f"{{{f.name}}} " + problem.replace("{", "{{").replace("}", "}}"),
                              {f.name: flag_name(f)})


def inapplicable(obj, given) -> str | None:
    """What is wrong with the options `given` (names) of a config group `obj` that do nothing there (their
    `when` condition fails), or None: "--heads applies to --arch transformer only, not lstm"."""
    fields = {f.name: f for f in dataclasses.fields(obj)}
    for name in given:
        for condition, values in (fields[name].metadata.get("when") or {}).items():
            actual = getattr(obj, condition)
            if actual not in values:
                shown = " or ".join(str(v) for v in values)
                return (f"{flag_name(fields[name])} applies to {flag_name(fields[condition])} {shown} only, not "
                        f"{actual}: leave it out")
    return None


def coerce(cls, name: str, value, what: str = "config"):
    """A config-file value converted to the field's type (YAML reads `1e-3` as text), or an error."""
    f = {f.name: f for f in dataclasses.fields(cls)}[name]
    kind = field_type(cls, f)
    item = element_type(kind)
    if item is not None:                      # a list-valued option: a YAML/TOML list, or one value
        values = value if isinstance(value, (list, tuple)) else [value]
        converted = [_coerce_value(item, f.metadata, v, name, what) for v in values]
        problem = value_problem(kind, f.metadata, converted)
        if problem:
            raise SeqlabError(f"{what}: option {name!r} {problem}")
        return converted
    return _coerce_value(kind, f.metadata, value, name, what)


def _coerce_value(kind: type, metadata, value, name: str, what: str):
    if value is None or isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        problem = value_problem(kind, metadata, value)
        if problem and not problem.startswith("expects"):
            raise SeqlabError(f"{what}: option {name!r} {problem}")
        return value
    try:
        if kind is bool and isinstance(value, str) and value.lower() in ("true", "false", "yes", "no"):
            return value.lower() in ("true", "yes")
        converted = None
        if kind is float and isinstance(value, (int, str)) and not isinstance(value, bool):
            converted = float(value)
        elif kind is int and (isinstance(value, str) or (isinstance(value, float) and value.is_integer())):
            converted = int(value)
        elif kind is str and isinstance(value, (int, float)) and not isinstance(value, bool):
            converted = str(value)
        if converted is not None:
            return _coerce_value(kind, metadata, converted, name, what)
    except (ValueError, OverflowError):
        pass
    raise SeqlabError(f"{what}: option {name!r} expects {kind.__name__}, got {value!r}")


def from_dict(cls, data: dict, what: str = "config"):
    """Build a dataclass from a dict, refusing unknown keys by name."""
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise SeqlabError(f"{what}: unknown option {unknown[0]!r}; known options are {', '.join(sorted(names))}")
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        kwargs[f.name] = coerce(cls, f.name, data[f.name], what)
    return cls(**kwargs)


def to_dict(obj) -> dict:
    return json.loads(json.dumps(dataclasses.asdict(obj), default=str))


TASK_KEY = "task"       # a config file's family (`task: classifier`): `seqlab train --config FILE` reads it


def read_config_file(path: str | Path, groups: dict[str, type] | None = None) -> dict:
    """A YAML (.yaml/.yml) or TOML (.toml) file -> a flat dict of options (groups flattened).

    Keys are option names (dashes or underscores), at the top level or under their group. Given
    `groups` (group name -> config class), a group the task lacks and an option under a group it does
    not belong to are refused; an option given twice is refused either way. A top-level `task` names the
    family the file is for (`config_task`), not an option."""
    path = Path(path)
    data = _config_mapping(path)
    members = {f.name: group for group, cls in (groups or {}).items() for f in dataclasses.fields(cls)}
    flat: dict = {}

    def put(key, value, group: str | None) -> None:
        if not isinstance(key, str):
            raise SeqlabError(f"config file {path}: the key {key!r} is not an option name (expected text such "
                              "as 'lr' or 'hidden_size')")
        name = key.replace("-", "_")
        if name in flat:
            raise SeqlabError(f"config file {path}: option {key!r} is given twice")
        if group is not None and name in members and members[name] != group:
            raise SeqlabError(f"config file {path}: option {key!r} belongs to the group {members[name]!r}, "
                              f"not {group!r}")
        flat[name] = value

    for key, value in data.items():
        if key == TASK_KEY and not isinstance(value, dict):
            continue
        if isinstance(value, dict):
            if groups is not None and key not in groups:
                raise SeqlabError(f"config file {path}: unknown group {key!r}; the groups are "
                                  f"{', '.join(groups)} (or give options at the top level)")
            for inner, inner_value in value.items():
                put(inner, inner_value, key)
        else:
            put(key, value, None)
    return flat


def config_task(path: str | Path) -> str | None:
    """The family a config file names (`task: classifier`, as `seqlab tune` writes best.yaml), or None; a
    `task` that is not text is a SeqlabError."""
    task = _config_mapping(Path(path)).get(TASK_KEY)
    if task is not None and not isinstance(task, str):
        raise SeqlabError(f"config file {path}: task is {task!r}; expected a family's name (task: classifier)")
    return task


def _config_mapping(path: Path) -> dict:
    """A YAML or TOML config file read as a mapping (anything else is a SeqlabError naming the file)."""
    text = read_text(path, "config file")
    if path.suffix in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as error:
            line = getattr(getattr(error, "problem_mark", None), "line", None)
            raise SeqlabError(f"config file {path}{'' if line is None else f':{line + 1}'} is not valid "
                              f"YAML: {getattr(error, 'problem', error)}") from None
    elif path.suffix == ".toml":
        if sys.version_info >= (3, 11):
            import tomllib
        else:
            import tomli as tomllib
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise SeqlabError(f"config file {path} is not valid TOML: {error}") from None
    else:
        raise SeqlabError(f"config file {path}: expected a .yaml, .yml or .toml file")
    if not isinstance(data, dict):
        raise SeqlabError(f"config file {path}: expected a mapping of option names to values")
    return data
