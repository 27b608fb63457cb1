"""What the server holds for each model: `Served` (its name, task and API object) and the endpoints of each
task family. The PyTorch runtime (`app.load_runs`) and the ONNX one (`onnx_models.load_exports`) both make
these."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import seqlab.serve.schemas as schemas

ENDPOINTS = {"lm": ("generate", "score"), "tagger": ("tag",), "classifier": ("classify",),
             "seq2seq": ("translate", "summarize")}


@dataclass
class Served:
    """A loaded run: its name, its task and the model's API object (TrainedLM, TrainedTagger, ...)."""

    name: str
    task: str
    trained: object
    run_dir: Path
    title: str = ""          # how messages name the task: "a language model"
    summary: str = ""        # one sentence on the run (`seqlab.info.summary`)

    def info(self) -> schemas.ModelInfo:
        model = self.trained.config.model
        arch = getattr(model, "arch", None) or getattr(model, "encoder", "")
        return schemas.ModelInfo(name=self.name, task=self.task, arch=str(arch),
                                 parameters=self.trained.model.num_parameters(),
                                 endpoints=[f"/v1/{e}" for e in ENDPOINTS[self.task]],
                                 metrics=final_metrics(self.run_dir), summary=self.summary)


def final_metrics(run_dir: Path) -> dict[str, dict]:
    """{split: figures} of the run's final records in metrics.jsonl (empty when it has none)."""
    figures = {}
    path = run_dir / "metrics.jsonl"
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and record.get("final"):
                figures[record.get("split", "valid")] = {k: v for k, v in record.items()
                                                         if isinstance(v, (int, float)) and k != "step"}
    return figures
