"""What the server holds for each model: `Served` (its name, family and API object). The PyTorch runtime
(`app.load_runs`) and the ONNX one (`seqlab.serve.onnx.load_exports`) both make these; the endpoints each
answers are its family's (`seqlab.registry`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import seqlab.serve.schemas as schemas
from seqlab.registry import FAMILIES


@dataclass
class Served:
    """A loaded run: its name, its task (family name) and the model's API object (TrainedLM, TrainedTagger,
    ...)."""

    name: str
    task: str
    trained: object
    run_dir: Path
    title: str = ""          # how messages name the family: "a language model"
    summary: str = ""        # one sentence on the run (`seqlab.info.summary`)

    def endpoints(self) -> list[str]:
        """The endpoints it answers: its family's."""
        return [f"/v1/{e}" for e in FAMILIES[self.task].endpoints]

    def info(self) -> schemas.ModelInfo:
        arch = getattr(self.trained.config.model, FAMILIES[self.task].arch_option)
        return schemas.ModelInfo(name=self.name, task=self.task, arch=str(arch),
                                 parameters=self.trained.model.num_parameters(), endpoints=self.endpoints(),
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
