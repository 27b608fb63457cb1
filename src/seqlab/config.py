"""Typed configuration: dataclass fields with a help line, YAML/TOML files, and overrides.

A config field is declared with `option(default, "one-line help", choices=...)`. The command line
builds its options from these fields, so every option has `--help` text and no option is defined
twice. A config file (YAML or TOML) may hold any option, flat (`hidden_size: 650`) or under the
group it belongs to (`model: {hidden_size: 650}`); the command line overrides the file.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import types
import typing
from dataclasses import MISSING, field
from pathlib import Path

from seqlab.errors import SeqlabError
from seqlab.fileio import read_text


def option(default, help: str, choices: tuple | None = None, flag: str | None = None):
    """A config field with its --help line (and the allowed values, if a closed set)."""
    return field(default=default, metadata={"help": help, "choices": choices, "flag": flag})


def field_type(cls, f: dataclasses.Field):
    """The base type of a field: int for `int | None`, etc."""
    hint = typing.get_type_hints(cls)[f.name]
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        hint = args[0]
    return hint


def check_choices(obj) -> None:
    """Every field with `choices` holds one of them; raise naming the option otherwise."""
    for f in dataclasses.fields(obj):
        choices = f.metadata.get("choices")
        value = getattr(obj, f.name)
        if choices and value is not None and value not in choices:
            raise SeqlabError(f"--{f.name.replace('_', '-')}: {value!r} is not one of "
                              f"{', '.join(map(str, choices))}")


def coerce(cls, name: str, value, what: str = "config"):
    """A config-file value converted to the field's type (YAML reads `1e-3` as text), or an error."""
    f = {f.name: f for f in dataclasses.fields(cls)}[name]
    kind = field_type(cls, f)
    if value is None or isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    try:
        if kind is bool and isinstance(value, str) and value.lower() in ("true", "false", "yes", "no"):
            return value.lower() in ("true", "yes")
        if kind is float and isinstance(value, (int, str)) and not isinstance(value, bool):
            return float(value)
        if kind is int and (isinstance(value, str) or (isinstance(value, float) and value.is_integer())):
            return int(value)
        if kind is str and isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
    except ValueError:
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


def read_config_file(path: str | Path) -> dict:
    """A YAML (.yaml/.yml) or TOML (.toml) file -> a flat dict of options (groups flattened)."""
    path = Path(path)
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
    flat = {}
    for key, value in data.items():
        if isinstance(value, dict):
            for inner, inner_value in value.items():
                flat[inner.replace("-", "_")] = inner_value
        else:
            flat[key.replace("-", "_")] = value
    return flat


def defaults(cls) -> dict:
    return {f.name: (f.default if f.default is not MISSING else f.default_factory())
            for f in dataclasses.fields(cls)}
