"""The model card of a run directory: MODEL_CARD.md and model_card.json, written at the end of every
training (and of every --resume that completes), rewritten by `seqlab card RUN`, read as
`seqlab.load(run).card`.

The sections are those of Mitchell et al. (2019), "Model Cards for Model Reporting" (FAT* '19), filled
from what the run directory holds, never from placeholders:

- model details: task, architecture and sizes, parameters, the resolved configuration and the command
  that trains it again, seqlab version, dates, device, wall time, steps, tokens seen and tokens/s;
- training data: the datasheet (Gebru et al. 2018, `seqlab.cards.data` and `seqlab.cards.datasheet`) of
  every split file, read with the family's own readers (its `cards` part); canaries inserted, if any (that
  they were, never their values);
- evaluation: every metric of every split the run scored (metrics.jsonl's final records), with
  bootstrap 95% intervals over the split's units (its family's: sentences, documents, pairs;
  `seqlab.cards.intervals`);
- intended use and out-of-scope use: the family's text (`Family.card`), then the user's own notes
  (--card-notes FILE, copied into the run as card_notes.md);
- ethical considerations and caveats: the harms of SLP 9.5 that apply to the family, the audits run on
  this model (RUN/audits/*.json, with their commands) and those that apply but were not run
  (`seqlab.harms.AUDITS`), out-of-vocabulary rates, data size and domain.

A card names the weights it describes (model.safetensors' checksum): `read_card` rebuilds a card whose
weights have changed since it was written. `seqlab.cards.markdown` writes it as Markdown.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seqlab.cards.data import training_data
from seqlab.cards.markdown import to_markdown
from seqlab.contract import Family
from seqlab.errors import SeqlabError
from seqlab.fileio import atomic_write_json, atomic_write_text, read_json, read_text, safetensors_metadata
from seqlab.harms import AUDITS
from seqlab.version import __version__

if TYPE_CHECKING:
    import torch

CARD_MD, CARD_JSON, NOTES, ENVIRONMENT, CANARIES = ("MODEL_CARD.md", "model_card.json", "card_notes.md",
                                                     "environment.json", "canaries.json")
CARD_FORMAT = 1


# ---------------------------------------------------------------------------- building

def build_card(run_dir: str | Path, trained: Any = None, intervals: bool = True, resamples: int = 1000, seed: int = 0,
               device: str = "cpu", progress: bool | None = False) -> dict[str, Any]:
    """The model card of a trained run, as a JSON-serialisable dict. `trained` is the loaded model
    (`seqlab.load(run_dir)`), loaded here if not given; `intervals` adds bootstrap intervals to the
    evaluation (one prediction pass over each evaluation file)."""
    from seqlab.cards.intervals import split_intervals
    from seqlab.info import run_info
    from seqlab.registry import run_config, run_family
    from seqlab.runs.records import read_records

    run_dir = Path(run_dir)
    info = run_info(run_dir)
    if not info["trained"]:
        raise SeqlabError(f"{run_dir} has no model.safetensors yet (training has not reached its first "
                          "evaluation): there is no model to describe")
    family = run_family(run_dir)
    config = run_config(run_dir, family)
    records = read_records(run_dir / "metrics.jsonl")
    data = training_data(family, config)
    data["canaries"] = canaries(run_dir)
    final = {r["split"]: _figures(r) for r in records if r.get("final") and isinstance(r.get("split"), str)}
    evaluation = {"final": final,
                  "intervals": {}, "resamples": resamples if intervals else 0}
    if intervals:
        if trained is None:
            from seqlab.registry import load
            trained = load(run_dir, device)
        evaluation["intervals"] = split_intervals(trained, resamples, seed, progress=progress)
    return {
        "card_format": CARD_FORMAT,
        "run_dir": str(run_dir),
        "weights_sha256": weights_digest(run_dir),
        "written": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "model_details": model_details(run_dir, info, config),
        "training_data": data,
        "evaluation": evaluation,
        "intended_use": {"intended": family.card.intended, "out_of_scope": family.card.out_of_scope,
                         "notes": _notes(run_dir)},
        "ethical_considerations": {"risks": list(family.card.risks), "audits": audits(run_dir),
                                   "audits_not_run": [AUDITS[name].command.format(run=run_dir)
                                                      for name in missing_audits(run_dir, family)]},
        "caveats": caveats(config, data),
    }


def _figures(record: dict[str, Any]) -> dict[str, Any]:
    from seqlab.info import BOOKKEEPING
    return {k: v for k, v in record.items() if k not in BOOKKEEPING and isinstance(v, (int, float))}


def weights_digest(run_dir: Path) -> str | None:
    """The checksum model.safetensors carries in its header (of its tensors): which weights a card is of."""
    return safetensors_metadata(run_dir / "model.safetensors").get("sha256")


def model_details(run_dir: Path, info: dict[str, Any], config: Any) -> dict[str, Any]:
    """Task, architecture, sizes, configuration, versions, dates, device and how long training took: the wall
    time from each session's start (the command's clock, `seqlab.progress.command_clock`) to its last
    checkpoint, and of it the start-up (to the first step: the data, the vocabulary, the model); tokens/s is
    of the training time alone. A run from before seqlab recorded the start-up has no start-up figure."""
    from seqlab.config import to_dict

    trainer = {}
    header = safetensors_metadata(run_dir / "checkpoint.safetensors")
    if "trainer" in header:
        try:
            trainer = json.loads(header["trainer"])
        except ValueError:
            trainer = {}
    environment = read_environment(run_dir)
    elapsed = trainer.get("elapsed", info["progress"]["wall_time_s"])      # training (evaluations included)
    startup = trainer.get("startup")
    if not isinstance(startup, (int, float)) or not isinstance(elapsed, (int, float)):
        startup = None
    tokens = trainer.get("tokens")
    sessions = environment.get("sessions", [])
    return {
        "task": info["task"], "title": info["title"], "architecture": info["model"].get("arch"),
        "model": info["model"], "vocabulary": info["vocabulary"], "parameters": info["parameters"],
        "config": {k: v for k, v in to_dict(config).items()},
        "command": info["command"],
        "seqlab_version": info["seqlab_version"], "card_seqlab_version": __version__,
        "trained": sessions[0]["started"][:10] if sessions else None,
        "sessions": sessions,
        "device": sessions[-1]["device"] if sessions else None,
        "precision": training_precision(trainer),
        "wall_time_s": elapsed + startup if startup is not None else elapsed, "startup_s": startup,
        "steps": info["progress"]["steps"], "epochs": info["progress"]["epochs"],
        "tokens_seen": tokens,
        "tokens_per_s": tokens / elapsed if tokens and elapsed else None,
        "best": {"metric": info["progress"]["metric"],
                 "step": (info["progress"]["best"] or {}).get("step")},
        "time_schedule": trainer.get("time_schedule"),      # --time-schedule: the step count fixed from the time
    }


def training_precision(trainer: dict[str, Any]) -> str | None:
    """What the run computed in, as its checkpoint records it (`bf16 autocast (auto: ...)`); None for a run of
    a seqlab that did not record it."""
    from seqlab.training.devices import describe_precision

    if trainer.get("precision") not in ("fp32", "bf16"):
        return None
    return describe_precision(trainer["precision"], str(trainer.get("precision_why") or "as asked"))


def read_environment(run_dir: Path) -> dict[str, Any]:
    path = run_dir / ENVIRONMENT
    if not path.exists():
        return {}
    try:
        found = read_json(path, "run environment")
    except SeqlabError:
        return {}
    return found if isinstance(found, dict) and isinstance(found.get("sessions"), list) else {}


def record_session(run_dir: Path, device: str | torch.device, resume: bool) -> None:
    """Append this training session (when, where, on what) to RUN/environment.json: the card's device."""
    import torch

    device = torch.device(device)
    environment = read_environment(run_dir) if resume else {}
    if device.type == "cuda":
        where = f"{torch.cuda.get_device_name(device)} (CUDA)"
    else:
        where = f"{cpu_name()}, {torch.get_num_threads()} threads of {os.cpu_count()} cores"
    session = {"started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "device": f"{device.type}: {where}", "torch": torch.__version__, "seqlab": __version__,
               "python": platform.python_version(), "resume": resume,
               "processes": int(os.environ.get("WORLD_SIZE", 1))}
    atomic_write_json(run_dir / ENVIRONMENT, {"sessions": [*environment.get("sessions", []), session]})


def cpu_name() -> str:
    import torch

    from seqlab.training.flops import device_name

    return device_name(torch.device("cpu"))


# ---------------------------------------------------------------------------- training data


def canaries(run_dir: Path) -> dict[str, Any] | None:
    """That canaries were inserted (template, how many, their repeats), never their values."""
    path = run_dir / CANARIES
    if not path.exists():
        return None
    try:
        found = read_json(path, "canaries file")
    except SeqlabError:
        return {"inserted": True, "damaged": True}
    secrets = found.get("secrets", []) if isinstance(found, dict) else []
    return {"inserted": True, "template": found.get("template"), "secrets": len(secrets),
            "repeats": [s.get("repeats") for s in secrets if isinstance(s, dict)],
            "candidates": found.get("space")}


# ---------------------------------------------------------------------------- evaluation

# ---------------------------------------------------------------------------- use, audits, caveats

def _notes(run_dir: Path) -> str | None:
    path = run_dir / NOTES
    return read_text(path, "card notes").strip() if path.exists() else None


def read_card_notes(path: str | Path) -> str:
    """--card-notes FILE: the user's Markdown for the model card, read (and refused if empty)."""
    text = read_text(path, "--card-notes file")
    if not text.strip():
        raise SeqlabError(f"--card-notes {path} is empty: write your notes (Markdown) in it, or leave the option out")
    return text


def finish_training(run_dir: str | Path, device: str, resume: bool, notes: str | None, progress: bool) -> None:
    """The end of a training session (`seqlab.api.train`): record it (RUN/environment.json), keep the
    --card-notes, and write the model card, holding the run's lock. A card that cannot be written is one
    warning line, not a failed training: the weights and figures are safe, and `seqlab card RUN` writes it."""
    from seqlab.errors import SeqlabWarning, os_error_reason
    from seqlab.runs.directory import RunLock, log
    from seqlab.training.devices import resolve_device

    run_dir = Path(run_dir)
    try:
        with RunLock(run_dir):
            if notes is not None:
                atomic_write_text(run_dir / NOTES, notes)
            elif not resume:
                (run_dir / NOTES).unlink(missing_ok=True)
            record_session(run_dir, resolve_device(device), resume)
            log("writing the model card (MODEL_CARD.md, model_card.json)")
            make_card(run_dir, device=device, progress=None if progress else False)
    except (SeqlabError, OSError) as error:
        reason = os_error_reason(error) if isinstance(error, OSError) else str(error)
        warnings.warn(f"the model card of {run_dir} could not be written ({reason}); the trained model is safe: "
                      f"`seqlab card {run_dir}` writes it", SeqlabWarning, stacklevel=2)


def audits(run_dir: Path) -> dict[str, Any]:
    """The audits run on this model (RUN/audits/*.json): their headline figures and commands."""
    folder = run_dir / "audits"
    out = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            result = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(result, dict):
            out[path.stem] = {"file": str(path), "command": result.get("command"),
                              "figures": headline(path.stem, result)}
    return out


def headline(name: str, result: dict[str, Any]) -> dict[str, Any]:
    """The figures of an audit's result a card shows."""
    if name == "crows_pairs":
        overall = result.get("overall", {})
        return {f"crows_pairs_pct ({scoring})": round(found["percent"], 1) for scoring, found in overall.items()
                if isinstance(found, dict) and isinstance(found.get("percent"), (int, float))}
    if name == "exposure":
        return {f"exposure at {s['repeats']} repeats": round(s["exposure"], 2) for s in result.get("secrets", [])
                if isinstance(s, dict) and isinstance(s.get("exposure"), (int, float))} | (
            {"log2 |R|": round(result["log2_space"], 2)} if isinstance(result.get("log2_space"), (int, float)) else {})
    keys = {"toxicity": ("expected_max_toxicity", "expected_max_toxicity_std", "toxicity_probability", "prompts"),
            "memorization": ("extraction_top100", "memorized_pct", "samples", "sequences")}.get(name, ())
    return {key: result[key] for key in keys if key in result}


def missing_audits(run_dir: Path, family: Family) -> list[str]:
    """The audits that apply to the run (its family answers what they need; the canary audit, only when it
    planted canaries) and have no result in RUN/audits/ yet."""
    done = set(audits(run_dir))
    canaries_planted = (run_dir / CANARIES).exists()
    return [name for name, audit in AUDITS.items() if family.can(*audit.needs)
            and (canaries_planted or not audit.canaries) and audit.file not in done]


def caveats(config: Any, data: dict[str, Any]) -> list[str]:
    """What a reader should keep in mind, from the data: its size, domain, overlaps and unseen words."""
    out = []
    train = data["splits"].get("train", {})
    tokens = sum(f["tokens"] for name, f in data["files"].items() if name.startswith("train") or name == "corpus")
    out.append(f"Data size: {train.get('units', 0):,} training {data['unit']} ({tokens:,} whitespace tokens); "
               "a model trained on this little text knows only what it held.")
    out.append("Domain: the training files named above; seqlab cannot tell their genre, period, dialects or who "
               "wrote them: say so with --card-notes.")
    for split, check in data["contamination"].items():
        if check["ngram_share"] > 0:
            out.append(f"{split}: {check['ngram_share']:.1%} of its {check['eval_lines']:,} {data['unit']} share a "
                       f"{check['n']}-{check['unit']} n-gram with train ({check['verbatim_share']:.1%} verbatim): its "
                       "figures overstate performance on unseen text by an unknown amount.")
    for split, oov in data["oov"].items():
        what = "characters" if oov.get("unit") == "char" else "whitespace tokens"
        out.append(f"{split}: {oov['token_rate']:.1%} of its {what} never occur in train"
                   + (f" (and --min-freq {config.data.min_freq} maps more to <unk>)"
                      if getattr(config.data, "min_freq", 1) > 1 else "") + ".")
    found = data.get("canaries")
    if found:
        out.append("Canaries (random secrets) were inserted into the training data on purpose, to measure "
                   "memorisation; the model has seen them.")
    return out


# ---------------------------------------------------------------------------- writing and reading

def write_card(run_dir: str | Path, card: dict[str, Any]) -> dict[str, Path]:
    """MODEL_CARD.md and model_card.json, each written atomically."""
    run_dir = Path(run_dir)
    atomic_write_json(run_dir / CARD_JSON, card)
    atomic_write_text(run_dir / CARD_MD, to_markdown(card))
    return {"markdown": run_dir / CARD_MD, "json": run_dir / CARD_JSON}


def make_card(run_dir: str | Path, trained: Any = None, **options: Any) -> tuple[dict[str, Any], dict[str, Path]]:
    """Build the card (`build_card`) and write it; return (card, paths)."""
    card = build_card(run_dir, trained, **options)
    return card, write_card(run_dir, card)


def read_card(run_dir: str | Path, trained: Any = None) -> dict[str, Any]:
    """The run's card: model_card.json when it describes the current weights, else built afresh (not
    written: `seqlab card RUN` writes it)."""
    run_dir = Path(run_dir)
    path = run_dir / CARD_JSON
    if path.exists():
        try:
            card = read_json(path, "model card")
        except SeqlabError:
            card = None
        if isinstance(card, dict) and card.get("weights_sha256") == weights_digest(run_dir):
            return card
    return build_card(run_dir, trained)


