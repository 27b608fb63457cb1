"""What the server holds for each model: `Served` (its name, family and API object). The PyTorch runtime
(`app.load_runs`) and the ONNX one (`seqlab.serve.onnx.load_exports`) both make these; the endpoints each
answers are its family's (`seqlab.registry`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path

import seqlab.serve.schemas as schemas
from seqlab.registry import FAMILIES
from seqlab.serve.limits import ServeLimits


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

    def openai_endpoints(self) -> tuple[str, ...]:
        """The endpoints of OpenAI's API it answers (POST /v1/completions): its family's `openai_endpoints`."""
        return FAMILIES[self.task].openai_endpoints

    def answers(self) -> tuple[str, ...]:
        """Its family's endpoints, by name (`generate`, `tag`, ...)."""
        return FAMILIES[self.task].endpoints

    def endpoints(self) -> list[str]:
        """The endpoints it answers: its family's, then the OpenAI ones it answers (`openai_endpoints`)."""
        return [f"/v1/{e}" for e in (*FAMILIES[self.task].endpoints, *self.openai_endpoints())]

    def arch(self) -> str:
        return str(getattr(self.trained.config.model, FAMILIES[self.task].arch_option))

    def parameters(self) -> int:
        return self.trained.model.num_parameters()

    def info(self, limits: ServeLimits) -> schemas.ModelInfo:
        """Its entry in GET /v1/models: OpenAI's fields (`created`: its directory's modification time), seqlab's,
        and the server's `limits` on a request (every field of `ServeLimits`)."""
        return schemas.ModelInfo(id=self.name, created=int(self.run_dir.stat().st_mtime), task=self.task,
                                 arch=self.arch(), parameters=self.parameters(), endpoints=self.endpoints(),
                                 metrics=final_metrics(self.run_dir), summary=self.summary,
                                 limits={f.name: getattr(limits, f.name) for f in fields(ServeLimits)})


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
