"""Run directories, whatever they hold: the checks and files every task shares, and
`seqlab.load(run_dir)`, which loads a language model, a tagger, a classifier or a sequence-to-sequence
model."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path

from seqlab import __version__
from seqlab.config import coerce, from_dict, read_config_file, to_dict
from seqlab.errors import SeqlabError
from seqlab.fileio import atomic_write_json, read_json
from seqlab.training import distributed
from seqlab.training.checkpoint import FORMAT_VERSION, load_model
from seqlab.training.trainer import TrainConfig, configure_threads, resolve_device

RUN_OUTPUTS = ("metrics.jsonl", "train_log.jsonl", "model.safetensors", "checkpoint.safetensors", "curves.png")


def log(message: str) -> None:
    """A progress message on stderr, from rank 0 only."""
    if distributed.world()[0] == 0:
        print(message, file=sys.stderr, flush=True)


def train_in_run(train: TrainConfig, resume: bool, overwrite: bool, work: Callable) -> dict:
    """Check the run directory, pick the device and threads, join the process group (under
    torchrun) and call `work(run_dir, device)`; leave the group whatever happens."""
    run_dir = Path(train.output)
    if (run_dir / "config.json").exists() and not (resume or overwrite):
        raise SeqlabError(f"{run_dir} already holds a run: pass --resume to continue it, --overwrite to "
                          "replace it, or choose another --output")
    if resume and not (run_dir / "checkpoint.safetensors").exists():
        raise SeqlabError(f"--resume: {run_dir} has no checkpoint.safetensors to resume from")
    device = resolve_device(train.device)
    configure_threads(train.threads, device)
    distributed.setup(device)
    try:
        return work(run_dir, device)
    finally:
        distributed.teardown()


def start_run(run_dir: Path, task: str, config, overwrite: bool) -> None:
    """A fresh run's config.json (rank 0), after clearing an overwritten run's outputs."""
    if overwrite:
        for name in RUN_OUTPUTS:
            (run_dir / name).unlink(missing_ok=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(run_dir / "config.json", {"format_version": FORMAT_VERSION, "seqlab_version": __version__,
                                                "task": task, **to_dict(config)})


def read_run_json(run_dir: str | Path, task: str | None = None) -> dict:
    """A run directory's config.json, checked: it exists, its format version is readable, and (given
    `task`) it holds that task."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise SeqlabError(f"{run_dir} is not a directory; expected a seqlab run directory")
    if not (run_dir / "config.json").exists():
        raise SeqlabError(f"{run_dir} is not a seqlab run directory: it has no config.json")
    raw = read_json(run_dir / "config.json", "run config")
    version = raw.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise SeqlabError(f"{run_dir}/config.json has format version {version!r}; this seqlab reads "
                          f"versions up to {FORMAT_VERSION}")
    names = {"lm": "a language model", "tagger": "a tagger", "classifier": "a classifier",
             "seq2seq": "a sequence-to-sequence model"}
    if task is not None and raw.get("task") != task:
        raise SeqlabError(f"{run_dir} holds a {raw.get('task')!r} run, not {names.get(task, task)}")
    return raw


def resolve_run_config(cls: type, groups: dict[str, type], config_file: str | Path | None, overrides: dict | None,
                       resume: bool, read_saved: Callable, defaults: dict | None = None):
    """A run's configuration: `defaults` < the config file < `overrides` (the command line), split into
    the groups of `cls`. With `resume`, the run's own config.json is the base and only options of the
    `train` group may change."""
    option_groups = {f.name: group for group, group_cls in groups.items() for f in dataclasses.fields(group_cls)}
    given = read_config_file(config_file) if config_file else {}
    for name, value in given.items():
        if name not in option_groups:
            raise SeqlabError(f"config file {config_file}: unknown option {name!r}")
        given[name] = coerce(groups[option_groups[name]], name, value, f"config file {config_file}")
    for name in overrides or {}:
        if name not in option_groups:
            raise SeqlabError(f"unknown option {name!r}")
    given.update(overrides or {})
    if not resume:
        given = {**(defaults or {}), **given}
        parts = {group: {k: v for k, v in given.items() if option_groups[k] == group} for group in groups}
        return cls(*(group_cls(**parts[group]) for group, group_cls in groups.items()))
    output = Path(given.get("output", (defaults or {}).get("output", TrainConfig.output)))
    if not (output / "checkpoint.safetensors").exists():
        raise SeqlabError(f"--resume: {output} has no checkpoint.safetensors to resume from")
    saved = read_saved(output)
    for name, value in given.items():
        group = option_groups[name]
        before = getattr(getattr(saved, group), name)
        if group != "train" and before != value:
            raise SeqlabError(f"--resume continues the run in {output} as it was configured; "
                              f"--{name.replace('_', '-')} cannot change ({before!r} -> {value!r})")
    train = dataclasses.replace(saved.train, **{k: v for k, v in given.items() if option_groups[k] == "train"})
    return dataclasses.replace(saved, train=train)


def read_run_config_as(run_dir: str | Path, task: str, cls: type, groups: dict[str, type]):
    """config.json as the task's config dataclass `cls`, built group by group."""
    raw = read_run_json(run_dir, task)
    try:
        return cls(*(from_dict(group_cls, raw[group], f"config.json {group}") for group, group_cls in groups.items()))
    except (KeyError, TypeError) as error:
        raise SeqlabError(f"{run_dir}/config.json is incomplete or malformed ({error})") from None


def load_best(run_dir: Path, model, device: str = "cpu"):
    """The run's best weights (model.safetensors) into `model`, on the device and in eval mode; returns
    (model, device)."""
    weights = run_dir / "model.safetensors"
    if not weights.exists():
        raise SeqlabError(f"{run_dir} has no model.safetensors yet (training has not reached its first evaluation)")
    load_model(weights, model)
    device = resolve_device(device)
    return model.to(device).eval(), device


def load(run_dir: str | Path, device: str = "cpu", **options):
    """A trained model from its run directory: a `TrainedLM`, `TrainedTagger`, `TrainedClassifier` or
    `TrainedSeq2Seq`."""
    task = read_run_json(run_dir).get("task")
    if task == "tagger":
        from seqlab.tagger import load_tagger
        return load_tagger(run_dir, device)
    if task == "classifier":
        from seqlab.classifier import load_classifier
        return load_classifier(run_dir, device)
    if task == "seq2seq":
        from seqlab.seq2seq import load_seq2seq
        return load_seq2seq(run_dir, device)
    from seqlab.lm import load as load_lm
    return load_lm(run_dir, device, **options)
