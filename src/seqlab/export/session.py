"""What a family's ONNX runtime is built on (its `exported` part; `seqlab.export.runtime.load_export` picks the
family's): `Exported`, an export directory's manifest and onnxruntime sessions, whose `run` turns onnxruntime's
failures into one-line errors and whose `parameters` are counted from the graphs; and `pad`. Torch-free."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np

from seqlab.data.vocab import PAD
from seqlab.errors import SeqlabError
from seqlab.export.manifest import read_manifest, seqlab_files
from seqlab.families.run_files import read_run_json


def onnxruntime():
    try:
        import onnxruntime
    except ImportError:
        raise SeqlabError("running an ONNX export needs onnxruntime: pip install 'seqlab[export]'") from None
    return onnxruntime


class Exported:
    """An export directory's manifest and onnxruntime sessions, one per graph (each family's runtime
    subclasses it)."""

    def __init__(self, export_dir: str | Path, threads: int = 0):
        """`threads`: onnxruntime's intra-op threads (0: its default). `config` is the run's config.json (a
        dict: its "data", "model" and "train" groups); `files` the folder of the run's own tokenizer, vocabulary
        and label files (seqlab/, or the export folder itself in an export of format 2)."""
        from seqlab.registry import FAMILIES

        ort = onnxruntime()
        self.dir = Path(export_dir)
        self.manifest = read_manifest(self.dir)
        self.files = seqlab_files(self.dir, self.manifest)
        self.config = read_run_json(self.dir, FAMILIES.get(self.manifest.get("task")))
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self.sessions = {name: ort.InferenceSession(str(self.dir / graph["file"]), options,
                                                    providers=["CPUExecutionProvider"])
                         for name, graph in self.manifest["graphs"].items()}

    def run(self, graph: str, values: dict) -> dict[str, np.ndarray]:
        """Run one graph on the values it takes (by input name) -> its outputs by name. An input the graph
        cannot take is a SeqlabError of one line (a server answers it with a 422, not a 500)."""
        session = self.sessions[graph]
        feeds = {i.name: values[i.name] for i in session.get_inputs()}
        names = [o.name for o in session.get_outputs()]
        try:
            return dict(zip(names, session.run(names, feeds), strict=True))
        except Exception as error:
            if type(error).__module__ != "onnxruntime.capi.onnxruntime_pybind11_state":
                raise
            raise SeqlabError(f"the ONNX export cannot run this input ({type(error).__name__}: "
                              f"{str(error).splitlines()[0][:300] if str(error) else 'no message'})") from None

    @functools.cached_property
    def parameters(self) -> int:
        """The model's parameters: the manifest's count, or the float initializers of its graphs, each
        distinct tensor once (a weight that two graphs hold counts once), plus what the runtime holds
        outside the graphs (`extra_parameters`: a CRF's scores); 0 without the onnx package."""
        if "parameters" in self.manifest:
            return int(self.manifest["parameters"])
        try:
            import onnx
        except ImportError:
            return 0
        seen: set[tuple] = set()
        total = 0
        for graph in self.manifest["graphs"].values():
            model = onnx.load(str(self.dir / graph["file"]), load_external_data=False)
            for tensor in model.graph.initializer:
                if tensor.data_type not in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16):
                    continue                                  # shapes and indexes, not weights
                key = (tuple(tensor.dims), tensor.raw_data or bytes(np.array(tensor.float_data, np.float32)))
                if key not in seen:
                    seen.add(key)
                    total += math.prod(tensor.dims)
        return total + self.extra_parameters

    extra_parameters = 0


def pad(rows: list[list[int]], width: int | None = None) -> np.ndarray:
    """Right-padded (B, T) int64 ids."""
    out = np.full((len(rows), width or max(map(len, rows))), PAD, dtype=np.int64)
    for b, row in enumerate(rows):
        out[b, :len(row)] = row
    return out
