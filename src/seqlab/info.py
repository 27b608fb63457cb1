"""What a run directory is, in one screen: `run_info(run_dir)` reads it without building the model (a
JSON-serialisable dict) and `format_info` writes that as aligned text; `seqlab info DIR [--json]`.

Everything comes from the files a run writes (`seqlab.runs.directory`): config.json (task, options, data
files and their SHA-256, versions), model.safetensors (the parameter count, from the tensors' shapes; the
metric that picked the best weights, from its header), metrics.jsonl (the evaluations and the final
valid / test records), train_log.jsonl (steps done) and whether checkpoint.safetensors exists. The
command that made the run is rebuilt from config.json: the options that differ from the task's defaults.
"""

from __future__ import annotations

import dataclasses
import shlex
import textwrap
from pathlib import Path
from typing import Any

from seqlab.config import field_default, file_fields, inapplicable
from seqlab.contract import Family
from seqlab.errors import DAMAGED, SeqlabError
from seqlab.registry import run_config, run_family
from seqlab.runs.directory import read_run_json
from seqlab.runs.records import duration, number, read_records
from seqlab.training.checkpoint import load_tensors

# tensors saved with the weights that are not parameters: the CRF's transition constraints (seqlab.nn.crf)
BUFFERS = ("transition_penalty", "start_penalty", "end_penalty")
# the training options always shown; the others only when they differ from the task's defaults
TRAIN_SHOWN = ("epochs", "max_steps", "batch_size", "optimizer", "lr", "schedule", "seq_len")
# training options about where and how visibly a run went, not what it learned: left out of "training"
TRAIN_HIDDEN = ("output", "progress", "log_every", "device", "threads", "keep_memory", "dist_timeout",
                "eval_batch_size", "log", "experiment", "mlflow_uri")
# the data options always shown (the others only when they differ from the defaults)
DATA_SHOWN = ("tokenizer", "format")
# the files a run keeps its vocabularies in
VOCABULARY_FILES = ("tokenizer.json", "vocab.json", "labels.json", "chars.json", "features.json")
# figures of a metrics record that are bookkeeping, not scores
BOOKKEEPING = ("step", "trained_steps", "epoch", "split", "final", "best", "lr", "elapsed_s", "train_loss")
# the safetensors header keys that are not the best weights' figure
HEADER_KEYS = ("format", "format_version", "sha256", "step")
LABEL_WIDTH = 12


def run_info(run_dir: str | Path) -> dict[str, Any]:
    """What the run directory holds, as a JSON-serialisable dict (see `format_info` for its parts). A
    missing or damaged run directory raises a SeqlabError; a run that has not reached its first evaluation
    (no model.safetensors) has "trained": false and "parameters": None."""
    run_dir = Path(run_dir)
    family = run_family(run_dir)
    pipeline = family.pipeline
    raw = read_run_json(run_dir, family)
    config = run_config(run_dir, family)
    model = config.model
    weights = run_dir / "model.safetensors"
    parameters, best_metric = count_parameters(weights) if weights.exists() else (None, None)
    records = read_records(run_dir / "metrics.jsonl")
    logged = read_records(run_dir / "train_log.jsonl")
    evaluations = [r for r in records if not r.get("final")]
    best = next((r for r in reversed(evaluations) if r.get("best")), None)
    steps = max((r["step"] for r in records + logged if isinstance(r.get("step"), int)), default=0)
    epochs = [r["epoch"] for r in evaluations + logged if isinstance(r.get("epoch"), int)]
    elapsed = [r["elapsed_s"] for r in records if isinstance(r.get("elapsed_s"), (int, float))]
    recorded = raw.get("data_sha256")
    digests = recorded if isinstance(recorded, dict) else {}
    return {
        "run_dir": str(run_dir),
        "task": family.name,
        "title": family.title,
        "model": {name: getattr(model, name) for name in applicable(model) if name not in pipeline.derived},
        "parameters": parameters,
        "vocabulary": {name: getattr(model, name) for name in pipeline.derived},
        "vocabulary_files": [name for name in VOCABULARY_FILES if (run_dir / name).exists()],
        "data": {name: {"path": getattr(config.data, name),
                        "sha256": digests[name] if isinstance(digests.get(name), str) else None}
                 for name in file_fields(config.data) if getattr(config.data, name)},
        "data_options": shown(config.data, [f.name for f in dataclasses.fields(config.data)
                                            if f.name not in file_fields(config.data)], DATA_SHOWN, {}),
        "training": shown(config.train, [name for name in applicable(config.train) if name not in TRAIN_HIDDEN],
                          TRAIN_SHOWN, pipeline.train_defaults),
        "progress": {"steps": steps, "epochs": max(epochs, default=None),
                     "metric": best_metric, "best": best,
                     "final": {r["split"]: r for r in records if r.get("final") and isinstance(r.get("split"), str)},
                     "wall_time_s": elapsed[-1] if elapsed else None},
        "trained": weights.exists(),
        "resumable": (run_dir / "checkpoint.safetensors").exists(),
        "finished": finished_note(run_dir, config),
        "seqlab_version": raw.get("seqlab_version"),
        "format_version": raw.get("format_version"),
        "command": train_command(family, config),
    }


def count_parameters(weights: Path) -> tuple[int, str | None]:
    """The parameters in a model.safetensors, counted from its tensors' shapes (tied weights are stored
    once, so counted once), and the name of the figure that picked these weights (its header's)."""
    tensors, header = load_tensors(weights)
    count = sum(t.numel() for name, t in tensors.items() if name.rsplit(".", 1)[-1] not in BUFFERS)
    return count, next((key for key in header if key not in HEADER_KEYS), None)


def applicable(obj: Any) -> list[str]:
    """The fields of a config group that act with its other values (not refused by `inapplicable`)."""
    return [f.name for f in dataclasses.fields(obj) if not inapplicable(obj, [f.name])]


def defaults_of(cls: type, overrides: dict[str, Any]) -> dict[str, Any]:
    """{field: default} of a config dataclass, `overrides` (a task's train_defaults) over its own."""
    return {f.name: overrides.get(f.name, field_default(f)) for f in dataclasses.fields(cls)}


def shown(obj: Any, names: list[str], always: tuple[str, ...], overrides: dict[str, Any]) -> dict[str, Any]:
    """The options among `names` worth a line: those in `always`, and those off their default."""
    defaults = defaults_of(type(obj), overrides)
    return {name: getattr(obj, name) for name in names if name in always or getattr(obj, name) != defaults[name]}


def train_command(family: Family, config: Any) -> str:
    """`seqlab train TASK --option value ...`: a command that trains this configuration again. It names
    the options that differ from the task's defaults (the input files as config.json records them), leaving
    out the model fields set from the data, options that do nothing with the rest (the command line refuses
    them) and values the model fills in itself (an LSTM's activation, a transformer's ff_size)."""
    pipeline = family.pipeline
    argv = ["seqlab", "train", family.name]
    for group, cls in pipeline.groups.items():
        obj = getattr(config, group)
        base = pipeline.train_defaults if group == "train" else {}
        defaults = defaults_of(cls, base)
        skip = pipeline.derived if group == "model" else ()
        names = [name for name in applicable(obj) if name not in skip and getattr(obj, name) != defaults[name]]
        for name in minimal(cls, obj, names, base):
            argv += option_tokens({f.name: f for f in dataclasses.fields(cls)}[name], getattr(obj, name))
    return shlex.join(argv)


def minimal(cls: type, obj: Any, names: list[str], base: dict[str, Any]) -> list[str]:
    """`names` less those whose value the config sets by itself from the others (`__post_init__`)."""
    kept = list(names)
    for name in names:
        others = {n: getattr(obj, n) for n in kept if n != name}
        try:
            rebuilt = cls(**{**base, **others})
        except (SeqlabError, *DAMAGED):
            continue
        if getattr(rebuilt, name) == getattr(obj, name):
            kept.remove(name)
    return kept


def option_tokens(f: dataclasses.Field[Any], value: Any) -> list[str]:
    """A config field's value as command-line words: `--tied`, `--no-bias`, `--lr 0.001`."""
    flag = f.metadata.get("flag") or f.name.replace("_", "-")
    if isinstance(value, bool):
        return [f"--{flag}" if value else f"--no-{flag}"]
    if isinstance(value, list):                       # a list-valued option: `--canary-repeats 1 4 16 64`
        return [f"--{flag}", *map(str, value)]
    return [f"--{flag}", str(value)]


def format_info(info: dict[str, Any]) -> str:
    """`run_info`'s dict as aligned text, one screen for a typical run."""
    lines: list[str] = []

    def add(label: str, text: str, width: int = 100) -> None:
        wrapped = textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]
        lines.append(f"{label:<{LABEL_WIDTH}}{wrapped[0]}")
        lines.extend(" " * LABEL_WIDTH + rest for rest in wrapped[1:])

    progress = info["progress"]
    add("run", info["run_dir"])
    add("task", f"{info['task']} ({info['title']})")
    add("model", options_text(info["model"]))
    if info["parameters"] is None:
        add("parameters", "not trained yet (no model.safetensors: training has not reached its first evaluation)")
    else:
        add("parameters", f"{info['parameters']:,}")
    files = f" ({', '.join(info['vocabulary_files'])})" if info["vocabulary_files"] else ""
    add("vocabulary", options_text(info["vocabulary"], thousands=True) + files)
    width = max((len(name) for name in info["data"]), default=0)
    for i, (name, entry) in enumerate(info["data"].items()):
        digest = f"  sha256 {entry['sha256'][:16]}" if entry["sha256"] else "  (no SHA-256 recorded)"
        add("data" if i == 0 else "", f"{name:<{width}}  {entry['path']}{digest}", width=10_000)
    if info["data_options"]:
        add("" if info["data"] else "data", options_text(info["data_options"]))
    add("training", options_text(info["training"]))
    add("progress", progress_text(info))
    width = max((len(split) for split in progress["final"]), default=0)
    for i, (split, record) in enumerate(progress["final"].items()):
        add("final" if i == 0 else "", f"{split:<{width}}  {figures_text(record)}")
    if progress["wall_time_s"] is not None:
        add("wall time", duration(progress["wall_time_s"]))
    if info.get("finished"):
        add("checkpoint", f"checkpoint.safetensors: {info['finished']}")
    else:
        add("checkpoint", f"checkpoint.safetensors: resume with seqlab train {info['task']} --output "
            f"{shlex.quote(info['run_dir'])} --resume" if info["resumable"] else "none (not resumable)")
    add("version", f"seqlab {info['seqlab_version']}, run format {info['format_version']}")
    add("command", info["command"], width=10_000)
    return "\n".join(lines)


def options_text(options: dict[str, Any], thousands: bool = False) -> str:
    """`arch lstm, hidden_size 650, tie_weights true`."""
    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int) and thousands:
            return f"{v:,}"
        return "''" if v == "" else str(v)
    return ", ".join(f"{name} {value(v)}" for name, v in options.items())


def figures_text(record: dict[str, Any]) -> str:
    """The scores of a metrics record (not its counts, tables or bookkeeping): `loss 4.1153  perplexity 61.27`."""
    return "  ".join(f"{name} {number(value)}" for name, value in record.items()
                     if name not in BOOKKEEPING and isinstance(value, float))


def progress_text(info: dict[str, Any]) -> str:
    """`step 8 of 8, epoch 1 of 10; best loss 4.1153 at step 8 (valid)`."""
    progress, training = info["progress"], info["training"]
    limit = training.get("max_steps")
    text = f"step {progress['steps']:,}" + (f" of {limit:,}" if limit else "")
    if progress["epochs"] is not None:
        text += f", epoch {progress['epochs']:,}" + (f" of {training['epochs']:,}" if "epochs" in training else "")
    best, metric = progress["best"], progress["metric"]
    if best is not None and metric in best:
        text += f"; best {metric} {number(best[metric])} at step {number(best.get('step'))}"
    elif not info["trained"]:
        text += "; not trained yet"
    return text


def finished_note(run_dir: Path, config: Any) -> str | None:
    """Why training has ended and how to train further (`seqlab.runs.records.finished_run`: what `--resume`
    says of the run with its own options), or None while a resume has work to do."""
    from seqlab.runs.records import finished_run

    said = finished_run(run_dir, config.train)
    if said is None:
        return None
    ended = said.split(": ", 1)[-1].split("; nothing to do")[0]            # "training already finished at ..."
    further = said.rsplit(". ", 1)[-1]                                    # "To train it further, --resume ..."
    return f"{ended}; {further[0].lower()}{further[1:]}"


def summary(info: dict[str, Any]) -> str:
    """One sentence on the run, for GET /v1/models: `a classifier (lstm, 5,455,502 parameters) trained for 400
    steps on sst/train.txt; valid accuracy 65.83`."""
    arch = info["model"].get("arch") or info["model"].get("encoder")
    parameters = f", {info['parameters']:,} parameters" if info["parameters"] is not None else ""
    text = f"{info['title']} ({arch}{parameters})" if arch else info["title"]
    train = next((entry["path"] for name, entry in info["data"].items() if name.startswith("train")), None)
    text += f" trained for {info['progress']['steps']:,} steps"
    if train:                                                    # a LM may train on the bundled corpus
        text += f" on {'/'.join(Path(train).parts[-2:])}"
    metric = info["progress"]["metric"]
    for split, record in info["progress"]["final"].items():
        shown = [name for name in ([metric] if metric != "loss" else []) + ["perplexity", "bits_per_char"]
                 if isinstance(record.get(name), (int, float))]
        if shown:
            text += f"; {split} " + ", ".join(f"{name} {number(record[name])}" for name in dict.fromkeys(shown))
    return text
