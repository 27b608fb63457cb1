"""The character-LM runs behind `--lm-features FWD_RUN [BWD_RUN]` (contextual string embeddings, Akbik et
al. 2018; `seqlab.nn.lm_features`), for the tagger and the classifier.

At training, each run directory is checked and loaded (best weights): it must hold a character-level
language model (`seqlab train lm --tokenizer char`), the first read left to right, the second trained
with `--reverse`. The tagger (or classifier) then holds the LMs as a frozen part of its model, so their
weights go into its own model.safetensors, and their config.json, tokenizer.json and vocab.json are
copied under `RUN_FOLDER/forward` and `RUN_FOLDER/backward` of its run directory: the run is
self-contained, and predict / evaluate / serve never read the LM runs again (they may be moved or
deleted).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from seqlab.errors import SeqlabError
from seqlab.fileio import atomic_write_json, read_json
from seqlab.nn.lm_features import ContextualStringEmbeddings

RUN_FOLDER = "lm_features"
DIRECTIONS = ("forward", "backward")
FILES = ("config.json", "tokenizer.json", "vocab.json")


def check_paths(paths: list[str]) -> None:
    """One or two run directories (forward, then backward)."""
    if len(paths) > 2:
        raise SeqlabError(f"--lm-features takes one or two LM run directories (forward, then backward), "
                          f"got {len(paths)}")


def _check_lm(config, tokenizer, run_dir: Path, direction: str) -> None:
    if tokenizer.kind != "char":
        raise SeqlabError(f"--lm-features {run_dir}: a {tokenizer.kind}-level language model; contextual string "
                          "embeddings need a character LM (seqlab train lm --tokenizer char)")
    reverse = bool(getattr(config.data, "reverse", False))
    if direction == "forward" and reverse:
        raise SeqlabError(f"--lm-features {run_dir}: the first run must read left to right, but it was trained "
                          "with --reverse; give the forward LM first, the backward one second")
    if direction == "backward" and not reverse:
        raise SeqlabError(f"--lm-features {run_dir}: the second run is the backward LM and must be trained with "
                          "--reverse (seqlab train lm --tokenizer char --reverse)")


def load_lm_features(paths: list[str], device="cpu") -> ContextualStringEmbeddings:
    """The LMs of the run directories (best weights), frozen, as one feature extractor; any problem
    (no such directory, not an LM run, damaged files, a word-level LM) is one SeqlabError."""
    from seqlab.families.lm.pipeline import load_lm

    check_paths(paths)
    models, vocabs = [], []
    for path, direction in zip(paths, DIRECTIONS, strict=False):
        run_dir = Path(path)
        try:
            trained = load_lm(run_dir, device)
        except SeqlabError as error:
            raise SeqlabError(f"--lm-features {path}: {error}") from None
        except Exception as error:                                    # a damaged weights file, say
            raise SeqlabError(f"--lm-features {path}: cannot load the language model ({error})") from None
        _check_lm(trained.config, trained.tokenizer, run_dir, direction)
        models.append(trained.model)
        vocabs.append(trained.vocab)
    return ContextualStringEmbeddings(models[0], vocabs[0], *(models[1:] + vocabs[1:]))


def lm_features_note(model) -> str:
    """What the log says of a model's LM features."""
    frozen = sum(p.numel() for p in model.lm_features.parameters())
    return (f" ({frozen:,} of them in the frozen character LMs of --lm-features, whose {model.config.lm_feature_size}"
            "-wide states are computed once per sentence and cached)")


def copy_lm_files(run_dir: Path, paths: list[str]) -> None:
    """The LMs' config, tokenizer and vocabulary into the tagger's / classifier's run directory (the weights
    are in its model.safetensors); an overwritten run's copies go first."""
    shutil.rmtree(run_dir / RUN_FOLDER, ignore_errors=True)
    for path, direction in zip(paths or (), DIRECTIONS, strict=False):
        folder = run_dir / RUN_FOLDER / direction
        folder.mkdir(parents=True, exist_ok=True)
        for name in FILES:
            atomic_write_json(folder / name, read_json(Path(path) / name, f"LM run file {name}"))


def rebuild_lm_features(run_dir: Path, config_width: int) -> ContextualStringEmbeddings | None:
    """The LMs of a trained tagger / classifier, rebuilt from the copies in its run directory (weights to be
    loaded with the rest of the model), or None when it has none (`config_width` 0)."""
    if not config_width:
        return None
    from seqlab.families.lm.config import read_run_config
    from seqlab.families.lm.model import build_lm
    from seqlab.families.lm.vocab import read_tokenizer_and_vocab

    models, vocabs = [], []
    for direction in DIRECTIONS:
        folder = run_dir / RUN_FOLDER / direction
        if not folder.exists():
            continue
        config = read_run_config(folder)
        _, vocab = read_tokenizer_and_vocab(folder)
        models.append(build_lm(config.model))
        vocabs.append(vocab)
    if not models:
        raise SeqlabError(f"{run_dir}: the model uses LM features but {run_dir / RUN_FOLDER} is missing; the run "
                          "directory is damaged: retrain into it with --overwrite")
    return ContextualStringEmbeddings(models[0], vocabs[0], *(models[1:] + vocabs[1:]))

