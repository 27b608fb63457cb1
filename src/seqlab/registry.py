"""The task registry: each task name -> its pipeline (`seqlab.pipelines.runs.Pipeline`: config, train,
load, evaluate), and `seqlab.load(run_dir)`, which loads whatever a run directory holds.

The CLI and the API reach every task through this one table, so a capability built on it (serving,
exporting, comparing) is written once for all of them.
"""

from __future__ import annotations

from pathlib import Path

from seqlab.errors import SeqlabError
from seqlab.nn.recurrent import RecurrentStack
from seqlab.pipelines import classifier, lm, seq2seq, tagger
from seqlab.pipelines.runs import Pipeline, read_run_json

TASKS: dict[str, Pipeline] = {p.name: p for p in (lm.PIPELINE, tagger.PIPELINE, classifier.PIPELINE,
                                                   seq2seq.PIPELINE)}


def pipeline(task: str) -> Pipeline:
    """The pipeline of a task name."""
    if task not in TASKS:
        raise SeqlabError(f"unknown task {task!r}: seqlab trains {', '.join(TASKS)}")
    return TASKS[task]


def run_pipeline(run_dir: str | Path) -> Pipeline:
    """The pipeline of the task a run directory holds."""
    task = read_run_json(run_dir).get("task", "lm")          # runs from before "task" was recorded are LMs
    if task not in TASKS:
        raise SeqlabError(f"{run_dir}/config.json names the task {task!r}, which this seqlab does not know "
                          f"({', '.join(TASKS)})")
    return TASKS[task]


def load(run_dir: str | Path, device: str = "cpu", rnn_impl: str | None = None):
    """A trained model from its run directory (the best weights): a `TrainedLM`, `TrainedTagger`,
    `TrainedClassifier` or `TrainedSeq2Seq`. `rnn_impl` runs its recurrent layers on the fused kernels
    or the textbook cells (`seqlab.nn.recurrent`), whatever it trained with."""
    trained = run_pipeline(run_dir).load(run_dir, device)
    if rnn_impl is not None:
        stacks = [m for m in trained.model.modules() if isinstance(m, RecurrentStack)]
        if not stacks:
            raise SeqlabError(f"--rnn-impl: the model in {run_dir} has no recurrent layers")
        for stack in stacks:
            stack.set_impl(rnn_impl)
        if hasattr(trained.config.model, "rnn_impl"):
            trained.config.model.rnn_impl = rnn_impl
    return trained
