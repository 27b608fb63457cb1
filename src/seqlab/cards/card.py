"""The model card of a run directory: MODEL_CARD.md and model_card.json, written at the end of every
training (and of every --resume that completes), rewritten by `seqlab card RUN`, read as
`seqlab.load(run).card`.

The sections are those of Mitchell et al. (2019), "Model Cards for Model Reporting" (FAT* '19), filled
from what the run directory holds, never from placeholders:

- model details: task, architecture and sizes, parameters, the resolved configuration and the command
  that trains it again, seqlab version, dates, device, wall time, steps, tokens seen and tokens/s;
- training data: the datasheet (Gebru et al. 2018, `seqlab.cards.datasheet`) of every split file, read
  with the task's own readers: identity (path, SHA-256, bytes), size (units, tokens, types), labels or
  tags, character set, exact duplicates within train, and contamination of each evaluation split by
  train (GPT-3's 13-gram test, 50 characters for character models); canaries inserted, if any (that
  they were, never their values);
- evaluation: every metric of every split the run scored (metrics.jsonl's final records), with
  bootstrap 95% intervals over sentences, documents or pairs (`seqlab.cards.intervals`);
- intended use and out-of-scope use: the task's default text, then the user's own notes
  (--card-notes FILE, copied into the run as card_notes.md);
- ethical considerations and caveats: the harms of SLP 9.5 that apply to the task, the audits run on
  this model (RUN/audits/*.json, with their commands), out-of-vocabulary rates, data size and domain.

A card names the weights it describes (model.safetensors' checksum): `read_card` rebuilds a card whose
weights have changed since it was written.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import platform
import warnings
from pathlib import Path

from seqlab.cards import datasheet as sheets
from seqlab.errors import SeqlabError
from seqlab.fileio import atomic_write_json, atomic_write_text, read_json, read_text, safetensors_metadata
from seqlab.version import __version__

CARD_MD, CARD_JSON, NOTES, ENVIRONMENT, CANARIES = ("MODEL_CARD.md", "model_card.json", "card_notes.md",
                                                     "environment.json", "canaries.json")
CARD_FORMAT = 1
# the split options of each task's data config, in order, and the name its metrics records give the split
SPLITS = {
    "lm": (("train", "train"), ("valid", "valid"), ("test", "test")),
    "tagger": (("train", "train"), ("dev", "valid"), ("test", "test")),
    "classifier": (("train", "train"), ("dev", "valid"), ("test", "test")),
    "seq2seq": (("train", "train"), ("dev", "valid"), ("test", "test")),
}
UNITS = {"lm": "lines", "tagger": "sentences", "classifier": "documents", "seq2seq": "pairs"}

INTENDED_USE = {
    "lm": "Scoring text (perplexity) and generating continuations in the style and domain of the training "
          "text, for study, teaching and baselines; a small model trained on one corpus.",
    "tagger": "Labelling the tokens of sentences like the training sentences (same language, genre and "
              "tokenisation) with the tag set it was trained on.",
    "classifier": "Assigning one of the training labels to documents like the training documents (same "
                  "language, genre and label definitions).",
    "seq2seq": "Transforming sources like the training sources (translation or summarisation, as the training "
               "pairs define it) for study, teaching and baselines.",
}
OUT_OF_SCOPE = {
    "lm": "Producing facts, advice or text that people will read as true or as written by a person; any "
          "decision about people; text in other languages or domains than the training text.",
    "tagger": "Other languages, genres or tokenisations than the training data's without re-evaluation; "
              "decisions about people based on its labels.",
    "classifier": "Decisions about people (hiring, moderation, credit, policing) without human review and an "
                  "audit of its errors per group; labels or domains it was not trained on.",
    "seq2seq": "Translating or summarising text whose meaning matters (medical, legal, safety) without a "
               "person checking the output; other language pairs or domains than the training pairs'.",
}
# SLP 9.5 (Potential harms from language models), and what of it applies to each task
RISKS = {
    "lm": ["Toxic and harmful generation: a language model continues prompts with whatever its training text "
           "held, offensive text included (measure it: `seqlab audit toxicity`).",
           "Bias: it reproduces the stereotypes of its training text and can amplify them (measure it: "
           "`seqlab audit bias`).",
           "Privacy: it can leak phrases of its training data, such as names or numbers, verbatim (measure "
           "it: `seqlab audit memorization`, and `seqlab audit exposure` for a run trained with --canary).",
           "Misuse: generated text can be passed off as written by a person, or used for spam and "
           "misinformation."],
    "tagger": ["Bias: tagging accuracy is usually lower for dialects, names and genres rare in the training "
               "data, so errors fall unevenly on the people whose language that is.",
               "Errors propagate: downstream systems (entity extraction, search) inherit its mistakes."],
    "classifier": ["Bias: a classifier learns the associations of its labels in the training data; toxicity "
                   "and sentiment classifiers are known to flag dialects and identity terms as negative "
                   "(SLP 9.5; Sap et al. 2019 on the Davidson data).",
                   "Misuse: automated decisions about people based on its labels.",
                   "Privacy: training documents may contain personal data."],
    "seq2seq": ["Hallucination: outputs can be fluent and wrong, adding or dropping content.",
                "Bias: translation can impose stereotypes (e.g. gendered occupations) absent from the source.",
                "Privacy: outputs can reproduce phrases of the training targets verbatim."],
}
AUDIT_COMMANDS = {"toxicity": "seqlab audit toxicity {run} --scorer SCORER_RUN --prompts FILE",
                  "bias": "seqlab audit bias {run} --pairs crows_pairs_anonymized.csv",   # the CrowS-Pairs file
                  "memorization": "seqlab audit memorization {run} --train TRAIN_FILE",
                  "exposure": "seqlab audit exposure {run}"}


AUDIT_FILES = {"toxicity": "toxicity", "bias": "crows_pairs", "memorization": "memorization", "exposure": "exposure"}


# ---------------------------------------------------------------------------- building

def build_card(run_dir: str | Path, trained=None, intervals: bool = True, resamples: int = 1000, seed: int = 0,
               device: str = "cpu", progress: bool | None = False) -> dict:
    """The model card of a trained run, as a JSON-serialisable dict. `trained` is the loaded model
    (`seqlab.load(run_dir)`), loaded here if not given; `intervals` adds bootstrap intervals to the
    evaluation (one prediction pass over each evaluation file)."""
    from seqlab.cards.intervals import split_intervals
    from seqlab.info import read_records, run_info
    from seqlab.registry import run_family

    run_dir = Path(run_dir)
    info = run_info(run_dir)
    if not info["trained"]:
        raise SeqlabError(f"{run_dir} has no model.safetensors yet (training has not reached its first "
                          "evaluation): there is no model to describe")
    family = run_family(run_dir)
    config = _config(run_dir, family)
    task = family.name
    records = read_records(run_dir / "metrics.jsonl")
    data = training_data(task, config)
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
        "intended_use": {"intended": INTENDED_USE[task], "out_of_scope": OUT_OF_SCOPE[task],
                         "notes": _notes(run_dir)},
        "ethical_considerations": {"risks": RISKS[task], "audits": audits(run_dir),
                                   "audits_not_run": [AUDIT_COMMANDS[name].format(run=run_dir)
                                                      for name in missing_audits(run_dir, task)]},
        "caveats": caveats(task, config, data),
    }


def _config(run_dir: Path, pipeline):
    from seqlab.families.runs import read_run_config
    return read_run_config(run_dir, pipeline)


def _figures(record: dict) -> dict:
    from seqlab.info import BOOKKEEPING
    return {k: v for k, v in record.items() if k not in BOOKKEEPING and isinstance(v, (int, float))}


def weights_digest(run_dir: Path) -> str | None:
    """The checksum model.safetensors carries in its header (of its tensors): which weights a card is of."""
    return safetensors_metadata(run_dir / "model.safetensors").get("sha256")


def model_details(run_dir: Path, info: dict, config) -> dict:
    """Task, architecture, sizes, configuration, versions, dates, device and how long training took."""
    from seqlab.config import to_dict

    trainer = {}
    header = safetensors_metadata(run_dir / "checkpoint.safetensors")
    if "trainer" in header:
        try:
            trainer = json.loads(header["trainer"])
        except ValueError:
            trainer = {}
    environment = read_environment(run_dir)
    elapsed = trainer.get("elapsed", info["progress"]["wall_time_s"])
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
        "wall_time_s": elapsed, "steps": info["progress"]["steps"], "epochs": info["progress"]["epochs"],
        "tokens_seen": tokens,
        "tokens_per_s": tokens / elapsed if tokens and elapsed else None,
        "best": {"metric": info["progress"]["metric"],
                 "step": (info["progress"]["best"] or {}).get("step")},
    }


def read_environment(run_dir: Path) -> dict:
    path = run_dir / ENVIRONMENT
    if not path.exists():
        return {}
    try:
        found = read_json(path, "run environment")
    except SeqlabError:
        return {}
    return found if isinstance(found, dict) and isinstance(found.get("sessions"), list) else {}


def record_session(run_dir: Path, device, resume: bool) -> None:
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

@dataclasses.dataclass
class Split:
    """One split as the task reads it: its files, units, the texts compared for contamination (per side
    for pairs), and labels."""
    name: str
    files: dict[str, str]                 # {option: path}
    units: int
    texts: dict[str, list[str]]           # {"text"} or {"source", "target"}
    labels: list[str]


def read_split(task: str, config, option: str) -> Split | None:
    """A split of the run's data config, read with the task's own reader (None when not given)."""
    data = config.data
    if task == "seq2seq":
        from seqlab.families.seq2seq.pipeline import read_pairs
        pairs, _ = read_pairs(data, option)
        if pairs is None:
            return None
        names = (option, f"{option}_src", f"{option}_tgt")
        files = {name: getattr(data, name) for name in names if getattr(data, name)}
        return Split(option, files, len(pairs), {"source": [p.source for p in pairs],
                                                 "target": [p.target for p in pairs]}, [])
    path = getattr(data, option)
    if not path:
        return None
    if task == "lm":
        lines = sheets.read_lines(path)
        return Split(option, {option: path}, len(lines), {"text": lines}, [])
    if task == "tagger":
        from seqlab.families.tagger.pipeline import read_sentences
        sentences = read_sentences(path, data, f"{option} file")
        return Split(option, {option: path}, len(sentences), {"text": [" ".join(s.tokens) for s in sentences]},
                     [label for s in sentences for label in s.labels])
    from seqlab.families.classifier.pipeline import read_split as read_documents
    documents = read_documents(path, data, f"{option} file")
    return Split(option, {option: path}, len(documents), {"text": [d.text for d in documents]},
                 [d.label for d in documents if d.label is not None])


def side_unit(task: str, config, side: str) -> str:
    """"char" where the model reads characters (50-character n-grams), else "word" (13-grams)."""
    data = config.data
    if task == "lm":
        return "char" if data.tokenizer == "char" else "word"
    if task == "seq2seq" and side in ("source", "target"):
        return "char" if data.side_tokenizer(side) == "char" else "word"
    return "word"


def training_data(task: str, config) -> dict:
    """The datasheet section: per file its sheet; per split its units, labels, duplicates and
    contamination by train; what the files are when the run used the bundled corpus; canaries."""
    if task == "lm" and not config.data.train:
        return bundled_corpus_sheet(config)
    splits = {option: split for option, _ in SPLITS[task] if (split := read_split(task, config, option))}
    files = {}
    for split in splits.values():
        for option, path in split.files.items():
            units = split.units if len(split.files) == 1 or option == split.name else None
            sheet = sheets.file_sheet(path, option, UNITS[task] if units is not None else "lines", units)
            files[option] = sheet
    train = splits.get("train")
    out = {"unit": UNITS[task], "files": files, "splits": {}, "contamination": {}, "oov": {}}
    for name, split in splits.items():
        out["splits"][name] = {"units": split.units,
                               **({"labels": sheets.label_distribution(split.labels)} if split.labels else {}),
                               "duplicates": {side: sheets.duplicate_lines(_nonblank(texts))
                                              for side, texts in split.texts.items()}}
    if train is not None:
        for side, texts in train.texts.items():
            unit = side_unit(task, config, side)
            index = sheets.TrainIndex(texts, unit=unit)
            known = set(tokens_of(texts, unit))
            for name, split in splits.items():
                if name == "train":
                    continue
                key = name if side == "text" else f"{name} ({side})"
                out["contamination"][key] = index.check(split.texts[side])
                out["oov"][key] = oov_rate(split.texts[side], known, unit)
    return out


def _nonblank(texts: list[str]) -> list[str]:
    return [text for text in map(sheets.normalise, texts) if text]


def tokens_of(texts: list[str], unit: str) -> list[str]:
    """The units a model of `unit` reads: whitespace tokens, or characters (spaces left out)."""
    if unit == "char":
        return [char for text in texts for char in text if not char.isspace()]
    return [token for text in texts for token in text.split()]


def oov_rate(texts: list[str], known: set[str], unit: str = "word") -> dict:
    """Tokens (characters, for character models) of `texts` never seen in the training split's texts: as a
    share of the tokens, and the number of such types."""
    tokens = tokens_of(texts, unit)
    unseen = [token for token in tokens if token not in known]
    return {"unit": unit, "tokens": len(tokens), "unseen_tokens": len(unseen),
            "token_rate": len(unseen) / len(tokens) if tokens else 0.0,
            "types": len(set(tokens)), "unseen_types": len(set(unseen))}


def bundled_corpus_sheet(config) -> dict:
    """An LM trained on the bundled Tiny Shakespeare (no --train): the file, its 90/10 split (see
    `seqlab.data.readers.default_corpus`), and contamination of the 10% by the 90%."""
    from importlib import resources

    from seqlab.data.readers import DEFAULT_CORPUS, default_corpus

    train_lines, valid_lines = default_corpus()
    path = Path(str(resources.files("seqlab.corpora").joinpath(DEFAULT_CORPUS)))
    train, valid = _nonblank(train_lines), _nonblank(valid_lines)
    unit = side_unit("lm", config, "text")
    index = sheets.TrainIndex(train, unit=unit)
    known = set(tokens_of(train, unit))
    return {"unit": "lines", "bundled": f"the bundled {DEFAULT_CORPUS}: train = its lines up to 90% of its "
                                        "characters, valid = the rest",
            "files": {"corpus": sheets.file_sheet(path, "corpus")},
            "splits": {"train": {"units": len(train), "duplicates": {"text": sheets.duplicate_lines(train)}},
                       "valid": {"units": len(valid), "duplicates": {"text": sheets.duplicate_lines(valid)}}},
            "contamination": {"valid": index.check(valid)}, "oov": {"valid": oov_rate(valid, known, unit)}}


def canaries(run_dir: Path) -> dict | None:
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
    from seqlab.families.runs import RunLock, log
    from seqlab.training.trainer import resolve_device

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


def audits(run_dir: Path) -> dict:
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


def headline(name: str, result: dict) -> dict:
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


def missing_audits(run_dir: Path, task: str) -> list[str]:
    if task != "lm":
        return []
    done = set(audits(run_dir))
    names = ["toxicity", "bias", "memorization"] + (["exposure"] if (run_dir / CANARIES).exists() else [])
    return [name for name in names if AUDIT_FILES[name] not in done]


def caveats(task: str, config, data: dict) -> list[str]:
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

def write_card(run_dir: str | Path, card: dict) -> dict[str, Path]:
    """MODEL_CARD.md and model_card.json, each written atomically."""
    run_dir = Path(run_dir)
    atomic_write_json(run_dir / CARD_JSON, card)
    atomic_write_text(run_dir / CARD_MD, to_markdown(card))
    return {"markdown": run_dir / CARD_MD, "json": run_dir / CARD_JSON}


def make_card(run_dir: str | Path, trained=None, **options) -> tuple[dict, dict[str, Path]]:
    """Build the card (`build_card`) and write it; return (card, paths)."""
    card = build_card(run_dir, trained, **options)
    return card, write_card(run_dir, card)


def read_card(run_dir: str | Path, trained=None) -> dict:
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


def _row(*cells) -> str:
    return "| " + " | ".join(str(cell) for cell in cells) + " |"


def _number(value, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.0f}" if abs(value) >= 10 ** digits else f"{value:.{digits}g}"


def _duration(seconds) -> str:
    if not isinstance(seconds, (int, float)):
        return "-"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s" if minutes else f"{seconds:.1f} s"


def to_markdown(card: dict) -> str:
    """The card as Markdown, the sections of Mitchell et al. (2019) in their order."""
    details, data, evaluation = card["model_details"], card["training_data"], card["evaluation"]
    use, ethics = card["intended_use"], card["ethical_considerations"]
    out = [f"# Model card: {card['run_dir']}", "",
           f"_{details['title'].capitalize()} trained by seqlab {details['seqlab_version']}; this card was written "
           f"{card['written']} by seqlab {details['card_seqlab_version']} from the run directory's own files "
           "(sections after Mitchell et al. 2019, \"Model Cards for Model Reporting\"; the training data section "
           "after Gebru et al., \"Datasheets for Datasets\")._", "", "## Model details", "",
           _row("", ""), _row("---", "---")]
    sizes = ", ".join(f"{k} {_number(v)}" for k, v in details["model"].items() if k != "arch")
    rows = [("task", f"{details['task']} ({details['title']})"), ("architecture", details["architecture"] or "-"),
            ("sizes and options", sizes), ("parameters", _number(details["parameters"])),
            ("vocabulary", ", ".join(f"{k} {_number(v)}" for k, v in details["vocabulary"].items()) or "-"),
            ("trained", details["trained"] or "-"), ("device", details["device"] or "- (not recorded)"),
            ("wall time", _duration(details["wall_time_s"])), ("steps", _number(details["steps"])),
            ("epochs", _number(details["epochs"])), ("tokens seen", _number(details["tokens_seen"])),
            ("tokens / s", _number(details["tokens_per_s"], 3)),
            ("best weights", f"{details['best']['metric'] or '-'} at step {_number(details['best']['step'])}")]
    out += [_row(k, str(v).replace("|", "\\|")) for k, v in rows]
    out += ["", "Trains again with:", "", "```", details["command"], "```", "",
            "<details><summary>The resolved configuration (config.json)</summary>", "", "```json",
            json.dumps(details["config"], indent=2), "```", "", "</details>", ""]
    out += ["## Training data", ""]
    if data.get("bundled"):
        out += [f"Trained on {data['bundled']}.", ""]
    out += [_row("file", "path", "bytes", "lines", "units", "tokens", "types", "duplicate lines"),
            _row(*["---"] * 2, *["---:"] * 6)]
    for name, f in data["files"].items():
        dup = f["duplicates"]
        out.append(_row(name, f"`{f['path']}`", _number(f["bytes"]), _number(f["lines"]),
                        f"{_number(f['units'])} {f['unit']}", _number(f["tokens"]), _number(f["types"]),
                        f"{_number(dup['count'])} ({dup['share']:.2%})"))
    out += ["", "SHA-256 of each file:", ""] + [f"- {name}: `{f['sha256']}`" for name, f in data["files"].items()]
    out += ["", "Character set (characters by class; most frequent non-ASCII):", ""]
    for name, f in data["files"].items():
        classes = ", ".join(f"{k.replace('_', ' ')} {_number(v)}" for k, v in f["charset"]["classes"].items())
        top = " ".join(f"`{e['char']}` ({_number(e['count'])})" for e in f["charset"]["top_non_ascii"][:5])
        out.append(f"- {name}: {classes}" + (f"; {top}" if top else ""))
    out += ["", f"Splits, as the task reads them ({data['unit']}); duplicates are exact repeats within the split "
            "(after whitespace normalisation):", "",
            _row("split", data["unit"], "duplicates", "labels (most frequent)"),
            _row("---", "---:", "---:", "---")]
    for name, split in data["splits"].items():
        dups = "; ".join(f"{'' if side == 'text' else side + ' '}{_number(d['count'])} ({d['share']:.2%})"
                         for side, d in split["duplicates"].items())
        labels = split.get("labels", {})
        total = sum(labels.values()) or 1
        shown = ", ".join(f"{k} {v / total:.1%}" for k, v in list(labels.items())[:8])
        more = f" (+{len(labels) - 8} more)" if len(labels) > 8 else ""
        out.append(_row(name, _number(split["units"]), dups, (shown + more) or "-"))
    if data["contamination"]:
        out += ["", "Contamination of each evaluation split by train (Brown et al. 2020, app. C: a unit is "
                "contaminated when it shares an n-gram of 13 words, or 50 characters for character models, with "
                "the training split; units shorter than n count only when verbatim):", "",
                _row("split", "units", "shorter than n", "verbatim in train", "n-gram overlap",
                     "n-gram overlap, units >= n", "unseen tokens (chars)"),
                _row("---", *["---:"] * 6)]
        for name, check in data["contamination"].items():
            oov = data["oov"].get(name, {})
            out.append(_row(name, _number(check["eval_lines"]), _number(check["short_lines"]),
                            f"{_number(check['verbatim'])} ({check['verbatim_share']:.2%})",
                            f"{_number(check['ngram'])} ({check['ngram_share']:.2%}) [{check['n']}-{check['unit']}]",
                            f"{_number(check['long_ngram'])} ({check['long_ngram_share']:.2%})",
                            f"{oov.get('token_rate', 0):.2%}"))
    found = data.get("canaries")
    if found:
        out += ["", f"**Canaries**: {found.get('secrets', '?')} random secrets of the template "
                f"`{found.get('template')}` were inserted into the training data, repeated "
                f"{', '.join(map(str, found.get('repeats', [])))} times (their values are kept in canaries.json, "
                "not here)."]
    out += ["", "## Evaluation", ""]
    if not evaluation["final"]:
        out += ["No final evaluation recorded (training did not finish).", ""]
    else:
        resamples = evaluation.get("resamples") or 0
        out += ["The best weights' figures on each split the run scored"
                + (f", with percentile bootstrap 95% intervals ({resamples:,} resamples of the split's "
                   "sentences, documents or pairs)." if evaluation["intervals"] else "."), "",
                _row("split", "metric", "value", "95% interval"), _row("---", "---", "---:", "---")]
        for split, figures in evaluation["final"].items():
            intervals = evaluation["intervals"].get(split, {})
            for metric, value in figures.items():
                interval = intervals.get(metric)
                shown = f"[{_number(interval['low'])}, {_number(interval['high'])}]" if interval else ""
                out.append(_row(split, metric, _number(value), shown))
            for metric, interval in intervals.items():
                if metric not in figures:
                    out.append(_row(split, metric, _number(interval["value"]),
                                    f"[{_number(interval['low'])}, {_number(interval['high'])}]"))
        out.append("")
    out += ["## Intended use", "", use["intended"], "", "## Out-of-scope use", "", use["out_of_scope"], ""]
    if use["notes"]:
        out += ["## Notes from the model's authors", "", use["notes"], ""]
    out += ["## Ethical considerations", "", "Harms of language technology that apply here (SLP 9.5):", ""]
    out += [f"- {risk}" for risk in ethics["risks"]]
    if ethics["audits"]:
        out += ["", "Audits run on this model:", "", _row("audit", "figures", "command"), _row("---", "---", "---")]
        for name, audit in ethics["audits"].items():
            figures = ", ".join(f"{k} {_number(v)}" for k, v in audit["figures"].items()
                                if not isinstance(v, (dict, list))) or "see " + audit["file"]
            out.append(_row(name, figures, f"`{audit['command']}`" if audit["command"] else "-"))
    if ethics["audits_not_run"]:
        out += ["", "Audits not run on this model yet:", ""] + [f"- `{c}`" for c in ethics["audits_not_run"]]
    out += ["", "## Caveats and recommendations", ""] + [f"- {c}" for c in card["caveats"]] + [""]
    return "\n".join(out)
