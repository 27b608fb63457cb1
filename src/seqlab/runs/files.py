"""What every run directory holds besides its weights, read without PyTorch: config.json as checked JSON
(`read_run_json`), whether a folder's config.json is a seqlab run's at all (`not_a_run`), and the model card
of a loaded model (`FromRun`). Each family reads its own tokenizer, vocabulary and label files (its `vocab`
module); the ONNX runtime reads an export's copies of them the same way, without importing torch."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from seqlab.contract import Family
from seqlab.errors import SeqlabError
from seqlab.fileio import read_json, safetensors_metadata
from seqlab.version import RUN_FORMAT_VERSION


def read_run_json(run_dir: str | Path, family: Family | None = None) -> dict:
    """A run directory's config.json, checked: it exists, its format version is readable, and (given
    `family`) it holds a run of that family."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise SeqlabError(f"{run_dir} is not a directory; expected a seqlab run directory")
    if not (run_dir / "config.json").exists():
        raise SeqlabError(f"{run_dir} is not a seqlab run directory: it has no config.json")
    raw = read_json(run_dir / "config.json", "run config")
    if not isinstance(raw, dict):
        raise SeqlabError(f"{run_dir}/config.json is damaged: expected a JSON object, found "
                          f"{type(raw).__name__}, which no seqlab run holds")
    version = raw.get("format_version")
    if not isinstance(version, int) or version > RUN_FORMAT_VERSION:
        raise SeqlabError(f"{run_dir}/config.json has format version {version!r}; this seqlab reads "
                          f"versions up to {RUN_FORMAT_VERSION}")
    if family is not None and raw.get("task") != family.name:
        raise SeqlabError(f"{run_dir} holds a {raw.get('task')!r} run, not {family.title}")
    return raw


def not_a_run(run_dir: str | Path) -> str | None:
    """Why the config.json in `run_dir` is not a seqlab run's (None when it is one, damaged or not): every run
    seqlab has written holds a JSON object with an integer "format_version" and a "task" name. It is what says
    that seqlab wrote the folder, and so what `--overwrite` may replace."""
    try:
        raw = json.loads((Path(run_dir) / "config.json").read_text(encoding="utf-8", errors="replace"))
    except OSError as error:
        return f"it cannot be read: {error.strerror or error}"
    except ValueError:
        return "it is not JSON"
    if not isinstance(raw, dict):
        return f"it holds a JSON {type(raw).__name__}, not an object"
    if isinstance(raw.get("format_version"), bool) or not isinstance(raw.get("format_version"), int) or \
            not isinstance(raw.get("task"), str):
        return "it has no \"format_version\" and \"task\" of a run"
    return None


class FromRun:
    """What a trained model loaded from a run directory has besides its model: the directory, and its model
    card (`seqlab.cards.card`)."""

    run_dir: Path | None = None
    family: Family | None = None         # the family it belongs to (each family's trained API sets it)

    def from_run(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        return self

    @property
    def card(self) -> dict:
        """The run's model card (model_card.json, written when training completed or by `seqlab card RUN`),
        refused when it describes other weights than the run's model.safetensors."""
        if self.run_dir is None:
            raise SeqlabError("this model was not loaded from a run directory, so it has no model card")
        path = self.run_dir / "model_card.json"
        if not path.exists():
            raise SeqlabError(f"{self.run_dir} has no model card (model_card.json): `seqlab card {self.run_dir}` "
                              "writes it")
        card = read_json(path, "model card")
        if not isinstance(card, dict) or card.get("weights_sha256") != safetensors_metadata(
                self.run_dir / "model.safetensors").get("sha256"):
            raise SeqlabError(f"{path} describes other weights than {self.run_dir}/model.safetensors (or is damaged): "
                              f"`seqlab card {self.run_dir}` rewrites it")
        return card

    def explain(self, text: str, views: Sequence[str] | str | None = None, **options: Any):
        """Look inside the model as it reads `text` (`seqlab explore`'s views, as data a notebook can plot):
        a `seqlab.contract.views.Explanation` of each view named in `views` (None: every view its architecture
        has), with the `ExplainOptions` given by keyword (top_k=5, units=32, strategy="greedy", ...).

            seqlab.load("runs/lm").explain("the cat sat").view("next-token").details[0]["alternatives"]
        """
        from seqlab.contract.views import explain

        return explain(self, text, views, options, name=self.run_dir.name if self.run_dir else "")
