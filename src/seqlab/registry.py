"""The registry: each task family by its name (`FAMILIES`: name -> `seqlab.contract.Family`), the
family of a run directory, and `seqlab.load(run_dir)`, which loads whatever a run directory holds.

The CLI, the server, the exporter, the model cards, the comparisons and the trainer reach every family
through this one table and the family's parts (`Family.part`), so a capability built on it is written once
for all of them, and a new family is one package under `seqlab/families/` and one line here. Importing it
needs no PyTorch: the ONNX runtime and its server find an export's family here too.

A family may also live outside seqlab, in a package of its own: it registers under the entry-point group
`seqlab.families` (in its pyproject.toml, `[project.entry-points."seqlab.families"] NAME = "package:FAMILY"`),
and every process finds it here when it starts, or it is added in a process with `register(FAMILY)`
(`registered(FAMILY)` for a while, as the tests do). docs/reference/adding-a-family.md walks through one.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from seqlab.contract import Family
from seqlab.errors import SeqlabError
from seqlab.families import classifier, lm, seq2seq, tagger
from seqlab.runs.files import read_run_json

FAMILIES: dict[str, Family] = {f.name: f for f in (lm.FAMILY, tagger.FAMILY, classifier.FAMILY, seq2seq.FAMILY)}
BUILT_IN = tuple(FAMILIES)
ENTRY_POINTS = "seqlab.families"       # the entry-point group of the families installed apart from seqlab


def register(found: Family) -> None:
    """Add a family defined outside seqlab (its `package` names where its parts are) to `FAMILIES`: the CLI
    built after this (`seqlab train NAME`, its inference commands), the server, the exporter and `load` then
    take it as they take the built-in ones. A name already taken is refused."""
    if not isinstance(found, Family):
        raise SeqlabError(f"a seqlab family is a seqlab.contract.Family, not {type(found).__name__}")
    if not found.name.isidentifier() or not found.package:
        raise SeqlabError(f"family {found.name!r}: its name must be a Python identifier and its package named "
                          "(Family.package: the module its parts are imported from)")
    if found.name in FAMILIES:
        raise SeqlabError(f"a family named {found.name!r} is registered already ({FAMILIES[found.name].package}); "
                          "give the new one another name")
    FAMILIES[found.name] = found


def unregister(name: str) -> None:
    """Remove a family `register` added (the built-in ones stay)."""
    if name in BUILT_IN:
        raise SeqlabError(f"{name!r} is one of seqlab's own families, which cannot be removed")
    FAMILIES.pop(name, None)


@contextlib.contextmanager
def registered(found: Family) -> Iterator[Family]:
    """`found` registered while the block runs, removed after it, however it ends."""
    register(found)
    try:
        yield found
    finally:
        unregister(found.name)


def register_installed() -> None:
    """Register every family an installed distribution declares under the entry-point group `seqlab.families`
    (name = "package:FAMILY"). One that cannot be loaded, or is not a family, or whose name is taken, is left
    out with one warning line on stderr: a broken add-on never stops seqlab's own families."""
    for entry in importlib.metadata.entry_points(group=ENTRY_POINTS):
        if entry.name in FAMILIES and FAMILIES[entry.name].package == entry.value.partition(":")[0]:
            continue                                    # registered already (a second call)
        try:
            register(entry.load())
        except Exception as error:                      # whatever its import raises: it is not seqlab's code
            reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            print(f"seqlab: warning: the family {entry.name!r} ({entry.value}, entry point {ENTRY_POINTS}) is left "
                  f"out: {reason}", file=sys.stderr)


register_installed()


def family(name: str) -> Family:
    """The family of a task name (`seqlab train NAME`, config.json's "task")."""
    if name not in FAMILIES:
        raise SeqlabError(f"unknown task {name!r}: seqlab trains {', '.join(FAMILIES)}")
    return FAMILIES[name]


def run_family(run_dir: str | Path) -> Family:
    """The family of the run a run directory holds."""
    name = read_run_json(run_dir).get("task", "lm")          # runs from before "task" was recorded are LMs
    if name not in FAMILIES:
        raise SeqlabError(f"{run_dir}/config.json names the task {name!r}, which this seqlab does not know "
                          f"({', '.join(FAMILIES)})")
    return FAMILIES[name]


def run_config(run_dir: str | Path, family: Family | None = None) -> Any:
    """A run directory's config.json as its family's config dataclass (`family`: the run's, found when not
    given)."""
    from seqlab.runs.directory import read_run_config_as

    family = family or run_family(run_dir)
    pipeline = family.pipeline
    return read_run_config_as(run_dir, family, pipeline.config, pipeline.groups)


def titles(names: Iterable[str]) -> str:
    """The titles of the families named, as a phrase ("a tagger, a classifier and a language model")."""
    words = [FAMILIES[name].title for name in names]
    return " and ".join([", ".join(words[:-1]), words[-1]] if len(words) > 2 else words)


def load(run_dir: str | Path, device: str = "cpu", rnn_impl: str | None = None) -> Any:
    """A trained model from its run directory (the best weights): a `TrainedLM`, `TrainedTagger`,
    `TrainedClassifier` or `TrainedSeq2Seq`. `rnn_impl` runs its recurrent layers on the fused kernels
    or the textbook cells (`seqlab.nn.recurrent`), whatever it trained with."""
    from seqlab.nn.recurrent import RecurrentStack

    trained = run_family(run_dir).pipeline.load(run_dir, device)
    if rnn_impl is not None:
        stacks = [m for m in trained.model.modules() if isinstance(m, RecurrentStack)]
        if not stacks:
            raise SeqlabError(f"--rnn-impl: the model in {run_dir} has no recurrent layers")
        for stack in stacks:
            stack.set_impl(rnn_impl)
        if hasattr(trained.config.model, "rnn_impl"):
            trained.config.model.rnn_impl = rnn_impl
    return trained
