"""The registry: each task family by its name (`FAMILIES`: name -> `seqlab.families.contract.Family`), the
family of a run directory, and `seqlab.load(run_dir)`, which loads whatever a run directory holds.

The CLI, the server, the exporter, the model cards, the comparisons and the trainer reach every family
through this one table and the family's parts (`Family.part`), so a capability built on it is written once
for all of them, and a new family is one package under `seqlab/families/` and one line here. Importing it
needs no PyTorch: the ONNX runtime and its server find an export's family here too.
"""

from __future__ import annotations

from pathlib import Path

from seqlab.errors import SeqlabError
from seqlab.families import classifier, lm, seq2seq, tagger
from seqlab.families.contract import Family
from seqlab.families.run_files import read_run_json

FAMILIES: dict[str, Family] = {f.name: f for f in (lm.FAMILY, tagger.FAMILY, classifier.FAMILY, seq2seq.FAMILY)}


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


def titles(names) -> str:
    """The titles of the families named, as a phrase ("a tagger, a classifier and a language model")."""
    words = [FAMILIES[name].title for name in names]
    return " and ".join([", ".join(words[:-1]), words[-1]] if len(words) > 2 else words)


def load(run_dir: str | Path, device: str = "cpu", rnn_impl: str | None = None):
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
