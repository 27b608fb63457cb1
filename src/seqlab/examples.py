"""Small example datasets that seqlab writes itself, one per task, in the files `seqlab train` reads: a first
model of every family in minutes, on data the package ships (Tiny Shakespeare) or makes (the rest, from seeded
grammars). `write(task, directory)` writes them, `command(task, directory)` is the `seqlab train` line that
trains on them; the CLI is `seqlab examples TASK DIR` (`seqlab.cli.examples`).

Each family makes its own datasets: its `examples` part lists them in `EXAMPLES` (task name ->
`seqlab.data.examples.ExampleTask`: files, sizes, generator, first recipe), and says there why each is built so
(something the family's simplest model misses and its textbook model learns). This module collects them from
the registry (`tasks()`; `TASKS`: each task's one line, in the registry's order, as `seqlab examples --list`
prints them) and writes them.

Sizes: "tiny" is a few hundred examples (lm: the first 600 lines), which trains in seconds (tests, the docs'
CI); "small" is a few thousand (lm: the whole corpus), on which `command`'s model reaches a clearly good
score in one to three minutes on a laptop CPU. A seed fixes the files byte for byte (lm has no randomness);
no example appears in two splits. Files are written atomically (`seqlab.fileio`) and never replace existing
ones unless asked; asked (--overwrite), they replace only files seqlab examples wrote and that are unchanged
since: the folder's .seqlab-examples.json holds the SHA-256 of each file written (a file that already holds the
bytes to be written is replaced too: nothing is lost). This module is data only: it imports no PyTorch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import shlex
from pathlib import Path

from seqlab.data.examples import SIZES, SPLITS, ExampleTask
from seqlab.errors import SeqlabError
from seqlab.fileio import atomic_write_json, atomic_write_text, check_writable
from seqlab.registry import FAMILIES

__all__ = ["SIZES", "SPLITS", "ExampleTask", "command", "dataset", "files", "tasks", "write"]


def tasks() -> dict[str, ExampleTask]:
    """Every example dataset by its task name, from the `examples` part of each family that has one, in the
    registry's order; each knows its family (`ExampleTask.family`)."""
    found: dict[str, ExampleTask] = {}
    for family in FAMILIES.values():
        if not family.examples:
            continue
        for name, task in family.part("examples").EXAMPLES.items():
            if name in found:
                raise SeqlabError(f"the example task {name!r} is listed by the {found[name].family} and the "
                                  f"{family.name} families: a task name is one dataset")
            found[name] = dataclasses.replace(task, family=family.name)
    return found


def __getattr__(name: str):       # PEP 562: TASKS
    if name == "TASKS":                  # task -> one line: what its dataset is (read when asked: a family
        return {task: found.summary for task, found in tasks().items()}   # registered later is listed too)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def dataset(task: str) -> ExampleTask:
    """The example dataset of `task`, refused in one line if there is none."""
    found = tasks()
    if task not in found:
        raise SeqlabError(f"unknown example task {task!r}: choose one of {', '.join(found)}")
    return found[task]


def write(task: str, directory: str | Path, *, size: str = "small", seed: int = 0,
          overwrite: bool = False) -> dict[str, Path]:
    """Write the example dataset of `task` (one of TASKS) into `directory` (created if missing); return its files
    by the data option of `seqlab train` that reads each: {"train": ..., "dev": ..., "test": ...} ("valid" for
    lm; "train_src", "train_tgt", ... for translation). The same seed writes the same bytes."""
    spec = dataset(task)
    if size not in SIZES:
        raise SeqlabError(f"unknown example size {size!r}: choose one of {', '.join(SIZES)}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise SeqlabError(f"example seed {seed!r}: give an integer >= 0")
    paths = files(task, directory)
    existing = [path for path in paths.values() if path.exists()]
    if existing and not overwrite:
        raise SeqlabError(f"{existing[0]} already exists: add --overwrite (overwrite=True) to replace the "
                          f"{task} example's files, or choose another folder")
    check_writable(directory, "example folder", folder=True)
    texts = spec.make(random.Random(f"seqlab.examples {task} {seed}"), spec.counts[size])
    written = _written(Path(directory))
    for option, path in paths.items():                  # all checked before any is replaced
        if path.exists() and _sha256(path) not in (written.get(path.name), _digest(texts[option])):
            why = ("has changed since seqlab examples wrote it" if path.name in written else
                   f"was not written by seqlab examples ({MARKER} does not list it)")
            raise SeqlabError(f"--overwrite: {path} {why}: seqlab never replaces what it did not write; move it "
                              "out, or choose another folder")
    for option, path in paths.items():
        atomic_write_text(path, texts[option])
        written[path.name] = _digest(texts[option])
    atomic_write_json(Path(directory) / MARKER, {"format": MARKER_FORMAT, "files": dict(sorted(written.items()))})
    return paths


MARKER = ".seqlab-examples.json"     # in the folder: the SHA-256 of each file seqlab examples wrote there
MARKER_FORMAT = "seqlab-examples"


def _written(directory: Path) -> dict[str, str]:
    """{file name: SHA-256} of the files `write` wrote in `directory` (the marker; {} without a readable one)."""
    try:
        marker = json.loads((directory / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    files = marker.get("files") if isinstance(marker, dict) and marker.get("format") == MARKER_FORMAT else None
    return {k: v for k, v in files.items() if isinstance(v, str)} if isinstance(files, dict) else {}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _sha256(path: Path) -> str:
    from seqlab.fileio import file_sha256

    return file_sha256(path, "example file")


def files(task: str, directory: str | Path) -> dict[str, Path]:
    """The files `write` writes for `task` in `directory`, by the data option that reads each."""
    return {option: Path(directory) / name for option, name in dataset(task).files.items()}


def command(task: str, directory: str | Path, *, output: str | None = None) -> str:
    """The `seqlab train` command line that trains a first model on the files `write` wrote in `directory`
    (its run in `output`, default runs/TASK): ready to paste into a POSIX shell."""
    spec = dataset(task)
    words = ["seqlab", "train", spec.family]
    for option, path in files(task, directory).items():
        words += [f"--{option.replace('_', '-')}", str(path)]
    words += [*spec.recipe.split(), "--output", output or f"runs/{task}"]
    return " ".join(shlex.quote(word) for word in words)


