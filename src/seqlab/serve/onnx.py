"""`seqlab serve --runtime onnx EXPORT_DIR...`: export directories (`seqlab export RUN --format onnx`) served
without PyTorch on the request path.

Each export is loaded as its family's runtime (`seqlab.export.runtime.load_export`), which answers what the
app calls on a run's API object (`classify`, `tag_sentences`, `stream`, `score`, `generate`, ...) on
onnxruntime and the numpy searches of `seqlab.decoding`. The answers are the PyTorch model's
(tests/test_serve_onnx.py): labels, tags, greedy and beam outputs identical, probabilities, scores and
attention weights within 1e-4. Sampling draws from the same distribution with numpy's generator, so a seed
gives another continuation than the PyTorch server's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from seqlab.errors import SeqlabError
from seqlab.registry import FAMILIES
from seqlab.serve.served import Served


def load_exports(exports: Iterable[str | Path], threads: int = 0) -> dict[str, Served]:
    """Each export directory loaded on onnxruntime, by its name; two of one name, or a run directory, are
    refused. `threads`: onnxruntime's threads per graph (0: its default)."""
    from seqlab.export.runtime import load_export

    served: dict[str, Served] = {}
    for export in exports:
        export_dir = Path(export)
        name = export_dir.resolve().name
        if name in served:
            raise SeqlabError(f"two exports are named {name!r} ({served[name].run_dir} and {export_dir}): the API "
                              "names a model by its directory's name; rename one")
        if not (export_dir / "manifest.json").exists() and (export_dir / "model.safetensors").exists():
            raise SeqlabError(f"{export_dir} is a run directory, not an ONNX export: serve it with --runtime torch, "
                              f"or export it (seqlab export {export_dir} --format onnx --output DIR) and serve DIR")
        runtime = load_export(export_dir, threads)
        family = FAMILIES[runtime.manifest["task"]]
        summary = (f"{family.title} ({runtime.manifest.get('arch')}, {runtime.parameters:,} parameters): the ONNX "
                   f"export of {runtime.manifest.get('source_run', 'a run')}, on onnxruntime")
        served[name] = OnnxServed(name, family.name, runtime, export_dir, family.title, summary)
    if not served:
        raise SeqlabError("seqlab serve needs at least one export directory")
    return served


@dataclass
class OnnxServed(Served):
    """A loaded export: GET /v1/models reads its task and arch from the manifest, and counts its parameters.
    It answers none of OpenAI's endpoints (a language model's /v1/completions runs on PyTorch)."""

    def openai_endpoints(self) -> tuple[str, ...]:
        return ()

    def arch(self) -> str:
        return str(self.trained.manifest.get("arch", ""))

    def parameters(self) -> int:
        return self.trained.parameters
