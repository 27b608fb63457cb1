"""Run directories, whatever family they hold: the lock (one writer at a time), config.json and the
options resolved into it, the checks of --resume and --overwrite, and loading the best weights. Every
family's pipeline trains and loads through these."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import socket
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

from seqlab.config import coerce, file_fields, from_dict, inapplicable, read_config_file, to_dict
from seqlab.contract import Family
from seqlab.errors import DAMAGED, SeqlabError, SeqlabWarning, os_error_reason
from seqlab.fileio import atomic_write_json, file_sha256, remove_stale_temporaries  # noqa: F401  (file_sha256: re-exported)
from seqlab.owned import listing
from seqlab.progress import command_clock
from seqlab.runs.files import not_a_run, read_run_json
from seqlab.training import distributed
from seqlab.training.checkpoint import FORMAT_VERSION, load_model, load_tensors
from seqlab.training.devices import check_precision, configure_threads, resolve_device
from seqlab.version import __version__

RESUME_OR_OVERWRITE = "--resume continues the run in --output and --overwrite replaces it: choose one"
LM_ONLY_TRAIN_OPTIONS = ("seq_len", "eval_stride")
# (a data hook's files, canaries.json, are not among them: the LM pipeline removes an overwritten run's before its
# data plants this run's, which must survive `start_run`)
RUN_OUTPUTS = ("metrics.jsonl", "train_log.jsonl", "model.safetensors", "checkpoint.safetensors", "curves.png",
               "MODEL_CARD.md", "model_card.json", "card_notes.md", "environment.json")


def refuse_fused_output(train, what: str) -> None:
    """--fused-output on / off is for models with an output layer over a vocabulary (language models,
    sequence to sequence); for `what` (a tagger, a classifier) it would do nothing, so it is refused."""
    if train.fused_output != "auto":
        raise SeqlabError(f"--fused-output {train.fused_output} is for language models and sequence-to-sequence "
                          f"models (an output layer over a vocabulary); {what} scores a few labels: leave it out")


def log(message: str) -> None:
    """A progress message on stderr, from rank 0 only, after what stdout holds (the trainer's `tqdm.write`
    lines keep their place in a log that gets both)."""
    if distributed.world()[0] == 0:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        print(message, file=sys.stderr, flush=True)


def train_in_run(config, resume: bool, overwrite: bool, work: Callable) -> dict:
    """Check the run directory and take its lock, pick the device and threads, join the process group
    (under torchrun; --dist-timeout bounds every wait for a silent peer) and call `work(config, run_dir,
    device)`; leave the group whatever happens.

    `config` is the task's whole config (its `train` group names the run directory). Its input files
    become absolute paths, so that --resume reads the same files from any folder, and --resume refuses
    a file whose SHA-256 differs from the one recorded when the run started. The command's clock
    (`seqlab.progress.command_clock`) starts here: the model card's start-up counts from it."""
    run_dir = Path(config.train.output)
    if resume and overwrite:
        raise SeqlabError(RESUME_OR_OVERWRITE)
    device = resolve_device(config.train.device)
    check_precision(device, config.train.precision)
    check_own_folder(run_dir, overwrite)             # before the lock writes anything into a folder not seqlab's
    with command_clock(), RunLock(run_dir) if distributed.world()[0] == 0 else contextlib.nullcontext():
        if not resume:
            config = dataclasses.replace(config, data=absolute_files(config.data))
        check_run_dir(run_dir, resume, overwrite)
        if resume:
            check_data_files(run_dir, config.data)
            load_tensors(run_dir / "checkpoint.safetensors")        # a damaged checkpoint fails here, before any work
        configure_threads(config.train.threads, device)
        with distributed.joined(device, config.train.dist_timeout):
            return work(config, run_dir, device)


def check_own_folder(run_dir: Path, overwrite: bool) -> None:
    """A run is written into a folder of its own: refuse an --output that holds a config.json that is not a seqlab
    run's, or, without a config.json, files that no seqlab run left there (a run killed before it wrote its
    config.json leaves its prepared data and its data hooks' files; hidden files are never touched). Training
    writes, and --overwrite replaces, only what a seqlab run writes: nothing the user had is lost."""
    if not run_dir.is_dir():
        return
    if (run_dir / "config.json").exists() or (run_dir / "config.json").is_symlink():
        refuse_foreign_config(run_dir)
        return
    from seqlab.data.hooks import hook_files
    from seqlab.data.prepared import prepared_files

    foreign = sorted(path.name for path in run_dir.iterdir() if not path.name.startswith(".")
                     and path.name not in hook_files()
                     and not (path.name == "prepared" and path.is_dir() and prepared_files(path) is not None))
    if not foreign:
        return
    if overwrite:
        raise SeqlabError(f"--overwrite replaces a seqlab run, and --output {run_dir} holds none (no config.json) "
                          f"but holds {listing(foreign)}: seqlab never deletes what it did not write; choose another "
                          "--output")
    raise SeqlabError(f"--output {run_dir} holds {listing(foreign)} and no seqlab run (no config.json): a run is "
                      "written into a folder of its own, and seqlab never replaces what it did not write; choose "
                      "another --output")


def refuse_foreign_config(run_dir: Path) -> None:
    """Refuse a folder whose config.json is not a seqlab run's (`not_a_run`): neither trained into, nor resumed,
    nor replaced."""
    problem = not_a_run(run_dir)
    if problem:
        raise SeqlabError(f"--output {run_dir} holds a config.json that is not a seqlab run's ({problem}): seqlab "
                          "never replaces what it did not write; choose another --output")


def check_run_dir(run_dir: Path, resume: bool, overwrite: bool) -> None:
    """A new run needs an empty place (or --overwrite), a resumed one a checkpoint."""
    started = (run_dir / "config.json").exists()
    if started:
        refuse_foreign_config(run_dir)
    checkpointed = (run_dir / "checkpoint.safetensors").exists()
    if started and not (resume or overwrite):
        if not checkpointed:
            raise SeqlabError(f"{run_dir} holds a run that stopped before its first checkpoint (nothing to resume): "
                              "start it again with --overwrite, or choose another --output")
        raise SeqlabError(f"{run_dir} already holds a run: pass --resume to continue it, --overwrite to "
                          "replace it, or choose another --output")
    if resume and not checkpointed:
        if started:
            raise SeqlabError(f"--resume: the run in {run_dir} stopped before its first checkpoint, so there is "
                              "nothing to resume; start it again with --overwrite")
        raise SeqlabError(f"--resume: {run_dir} has no checkpoint.safetensors to resume from")


class RunLock:
    """One writer per run directory: an advisory lock (flock) on DIR/.lock, held while the run trains and
    released by the operating system when the process ends, however it ends. Taking it also creates the
    directory (so an unwritable --output fails here, before any work) and removes the temporary files
    of an atomic write that an earlier process was killed in the middle of."""

    def __init__(self, run_dir: Path):
        self.run_dir, self.handle = Path(run_dir), None

    def __enter__(self) -> RunLock:
        import fcntl

        if self.run_dir.exists() and not self.run_dir.is_dir():
            raise SeqlabError(f"--output {self.run_dir} is a file, not a directory: choose another --output")
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self.handle = open(self.run_dir / ".lock", "a+", encoding="utf-8")
        except OSError as error:
            raise SeqlabError(f"cannot use --output {self.run_dir}: {os_error_reason(error)}") from None
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.handle.seek(0)
            owner = self.handle.read().strip() or "another process"
            self.handle.close()
            raise SeqlabError(f"{self.run_dir} is in use by {owner}: one process writes a run directory at a "
                              "time; wait for it to end (or stop it), or choose another --output") from None
        self.handle.seek(0)
        self.handle.truncate()
        self.handle.write(f"seqlab process {os.getpid()} on {socket.gethostname()}\n")
        self.handle.flush()
        for stale in remove_stale_temporaries(self.run_dir):
            log(f"removed {stale}, left by an interrupted write")
        return self

    def __exit__(self, *exc) -> None:
        if self.handle is not None:
            self.handle.close()           # closing releases the lock


def absolute_files(data):
    """The data config with its input files as absolute paths."""
    return dataclasses.replace(data, **{name: str(Path(getattr(data, name)).resolve())
                                        for name in file_fields(data) if getattr(data, name)})


def data_digests(data) -> dict[str, str]:
    """{option: SHA-256} of the data config's input files."""
    return {name: file_sha256(getattr(data, name), name) for name in file_fields(data) if getattr(data, name)}


def check_data_files(run_dir: Path, data) -> None:
    """--resume: every input file is the one the run started with (same SHA-256)."""
    recorded = read_run_json(run_dir).get("data_sha256")
    if not isinstance(recorded, dict):
        return                               # a run from before seqlab recorded its files
    for name, expected in recorded.items():
        path = getattr(data, name, "")
        if not path:
            continue
        if not Path(path).is_file():
            raise SeqlabError(f"--resume: --{name.replace('_', '-')} {path}, which the run in {run_dir} trained on, "
                              "is gone; put it back, or start again with --overwrite")
        if file_sha256(path, name) != expected:
            raise SeqlabError(f"--resume: --{name.replace('_', '-')} {path} has changed since the run in {run_dir} "
                              "started (its SHA-256 differs); --resume needs the same data: restore the file, or "
                              "start again with --overwrite")


def start_run(run_dir: Path, family: Family, config, overwrite: bool) -> None:
    """A fresh run's config.json (rank 0), with the SHA-256 of its input files, after clearing an
    overwritten run's outputs (the family's own files that this run does not write, its pipeline removes)."""
    from seqlab.training.trackers import STATE, TENSORBOARD_DIR

    if overwrite:
        for name in (*RUN_OUTPUTS, STATE):
            (run_dir / name).unlink(missing_ok=True)
        shutil.rmtree(run_dir / "audits", ignore_errors=True)          # they audited the replaced model
        shutil.rmtree(run_dir / TENSORBOARD_DIR, ignore_errors=True)   # its curves are not this run's
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(run_dir / "config.json", {"format_version": FORMAT_VERSION, "seqlab_version": __version__,
                                                "task": family.name, **to_dict(config),
                                                "data_sha256": data_digests(config.data)})


def resolve_run_config(cls: type, groups: dict[str, type], config_file: str | Path | None, overrides: dict | None,
                       resume: bool, read_saved: Callable, defaults: dict | None = None):
    """A run's configuration: `defaults` < the config file < `overrides` (the command line), split into
    the groups of `cls`. With `resume`, the run's own config.json is the base and only options of the
    `train` group may change."""
    option_groups = {f.name: group for group, group_cls in groups.items() for f in dataclasses.fields(group_cls)}
    given = read_config_file(config_file, groups) if config_file else {}
    for name, value in given.items():
        if name not in option_groups:
            raise SeqlabError(f"config file {config_file}: unknown option {name!r}")
        given[name] = coerce(groups[option_groups[name]], name, value, f"config file {config_file}")
    for name in overrides or {}:
        if name not in option_groups:
            raise SeqlabError(f"unknown option {name!r}")
    given.update(overrides or {})
    if not resume:
        parts = {group: {k: v for k, v in {**(defaults or {}), **given}.items() if option_groups[k] == group}
                 for group in groups}
        config = cls(*(group_cls(**parts[group]) for group, group_cls in groups.items()))
        check_applicable(config, given, set(overrides or ()), option_groups, config_file)
        return config
    output = Path(given.get("output", (defaults or {}).get("output", groups["train"].output)))
    check_run_dir(output, resume=True, overwrite=False)
    saved = read_saved(output)
    files = {name for group_cls in groups.values() for name in file_fields(group_cls)}
    for name, value in given.items():
        group = option_groups[name]
        before = getattr(getattr(saved, group), name)
        if name in files and before and value and Path(value).resolve() == Path(before).resolve():
            continue                                       # the same file, named from here
        if group != "train" and before != value:
            raise SeqlabError(f"--resume continues the run in {output} as it was configured; "
                              f"--{name.replace('_', '-')} cannot change ({before!r} -> {value!r})")
    train = dataclasses.replace(saved.train, **{k: v for k, v in given.items() if option_groups[k] == "train"})
    problem = inapplicable(train, [k for k in given if option_groups[k] == "train"])
    if problem:
        raise SeqlabError(problem)
    return dataclasses.replace(saved, train=train)


def check_applicable(config, given: dict, command_line: set[str], option_groups: dict[str, str],
                     config_file) -> None:
    """An option that does nothing with the rest of the configuration (`--heads` with `--arch lstm`): an
    error when given on the command line; from a config file (a recipe shared by several architectures,
    the benchmark tables' way) a warning, one line each: never silently ignored."""
    for group in dict.fromkeys(option_groups.values()):
        names = [k for k in given if option_groups[k] == group]
        problem = inapplicable(getattr(config, group), [k for k in names if k in command_line])
        if problem:
            raise SeqlabError(problem)
        for name in names:
            problem = inapplicable(getattr(config, group), [name])
            if problem and name not in command_line:
                warnings.warn(f"config file {config_file}: {problem.removesuffix(': leave it out')}; it does nothing "
                              "here", SeqlabWarning, stacklevel=3)


def read_run_config_as(run_dir: str | Path, family: Family, cls: type, groups: dict[str, type]):
    """config.json as the family's config dataclass `cls`, built group by group."""
    raw = read_run_json(run_dir, family)
    damaged = [group for group in groups if not isinstance(raw.get(group), dict)]
    if not damaged:        # runs from before the LM-only options left the shared train group: they acted on nothing
        train = {f.name for f in dataclasses.fields(groups["train"])}
        raw["train"] = {k: v for k, v in raw["train"].items() if k in train or k not in LM_ONLY_TRAIN_OPTIONS}
    if damaged:
        raise SeqlabError(f"{run_dir}/config.json is damaged: its {damaged[0]!r} group is missing or not an "
                          "object; retrain into this directory with --overwrite")
    try:
        return cls(*(from_dict(group_cls, raw[group], f"{run_dir}/config.json {group}")
                     for group, group_cls in groups.items()))
    except DAMAGED as error:
        raise SeqlabError(f"{run_dir}/config.json is damaged ({error}); retrain into this directory with "
                          "--overwrite") from None


def check_sizes(run_dir: Path, config, sizes: dict[str, tuple[str, int]]) -> None:
    """Each run file lists as many entries as the model in config.json has rows for them:
    `sizes` maps a model field (vocab_size) to (the file, its count)."""
    for name, (file, count) in sizes.items():
        expected = getattr(config.model, name)
        if count != expected:
            raise SeqlabError(f"{run_dir}: {file} lists {count:,} entries but the model in config.json has "
                              f"{expected:,} ({name}); the run directory is damaged: retrain into it with --overwrite")


def load_best(run_dir: Path, model, device: str = "cpu"):
    """The run's best weights (model.safetensors) into `model`, on the device and in eval mode; returns
    (model, device)."""
    weights = run_dir / "model.safetensors"
    if not weights.exists():
        raise SeqlabError(f"{run_dir} has no model.safetensors yet (training has not reached its first evaluation)")
    load_model(weights, model)
    device = resolve_device(device)
    return model.to(device).eval(), device

