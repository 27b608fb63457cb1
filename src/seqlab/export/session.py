"""What a family's ONNX runtime is built on (its `exported` part; `seqlab.export.runtime.load_export` picks the
family's): `Exported`, an export directory's manifest and onnxruntime sessions, whose `run` turns onnxruntime's
failures into one-line errors and whose `parameters` are counted from the graphs; and `pad`. Torch-free.

A graph file onnxruntime cannot load is refused in one line that says what is wrong with it (`graph_damage`:
empty, truncated, not an ONNX model at all), read from its protocol-buffer framing (`seqlab.export.protobuf`,
which counts the parameters of an export whose manifest does not, without the onnx package)."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from seqlab.data.vocab import PAD
from seqlab.errors import SeqlabError, os_error_reason
from seqlab.export.manifest import check_files, read_manifest, seqlab_files
from seqlab.export.protobuf import float_initializers, model_problem
from seqlab.runs.files import read_run_json

if TYPE_CHECKING:
    from seqlab.contract import Family
    from seqlab.contract.views import Explanation


def onnxruntime() -> Any:                   # the module (untyped: it has no stubs)
    try:
        import onnxruntime
    except ImportError:
        raise SeqlabError("running an ONNX export needs onnxruntime: pip install 'seqlab[export]'") from None
    return onnxruntime


class Exported:
    """An export directory's manifest and onnxruntime sessions, one per graph (each family's runtime
    subclasses it, and names its `family`)."""

    family: Family | None = None       # whose exports it runs: their config.json is checked to hold its run

    def __init__(self, export_dir: str | Path, threads: int = 0):
        """`threads`: onnxruntime's intra-op threads (0: its default). `config` is the run's config.json (a
        dict: its "data", "model" and "train" groups); `files` the folder of the run's own tokenizer, vocabulary
        and label files (seqlab/, or the export folder itself in an export of format 2)."""
        ort = onnxruntime()
        self.dir = Path(export_dir)
        self.manifest = read_manifest(self.dir)
        check_files(self.dir, self.manifest)
        self.files = seqlab_files(self.dir, self.manifest)
        self.config = read_run_json(self.dir, self.family)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self.sessions = {name: open_graph(ort, self.dir / graph["file"], options, graph)
                         for name, graph in self.manifest["graphs"].items()}

    def explain(self, text: str, views: Sequence[str] | str | None = None, **options: Any) -> Explanation:
        """`seqlab explore`'s views that an export can give (those its family declares `exported`), as
        `FromRun.explain` gives them of a run."""
        from seqlab.contract.views import explain

        return explain(self, text, views, options, name=self.dir.name)

    def run(self, graph: str, values: dict[str, Any]) -> dict[str, np.ndarray]:
        """Run one graph on the values it takes (by input name) -> its outputs by name. An input the graph
        cannot take is a SeqlabError of one line (a server answers it with a 422, not a 500)."""
        session = self.sessions[graph]
        feeds = {i.name: values[i.name] for i in session.get_inputs()}
        names = [o.name for o in session.get_outputs()]
        try:
            return dict(zip(names, session.run(names, feeds), strict=True))
        except Exception as error:
            if not from_onnxruntime(error):
                raise
            raise SeqlabError(f"the ONNX export cannot run this input ({type(error).__name__}: "
                              f"{str(error).splitlines()[0][:300] if str(error) else 'no message'})") from None

    @functools.cached_property
    def parameters(self) -> int:
        """The model's parameters: the manifest's count (exports since it was recorded), or the float
        initializers of its graphs, each distinct tensor once (a weight that two graphs hold counts once), plus
        what the runtime holds outside the graphs (`extra_parameters`: a CRF's scores)."""
        counted = self.manifest.get("parameters")
        if isinstance(counted, int):
            return counted
        seen: set[tuple[tuple[int, ...], bytes]] = set()
        for graph in self.manifest["graphs"].values():
            seen.update(float_initializers((self.dir / graph["file"]).read_bytes()))
        return sum(math.prod(shape) for shape, _ in seen) + self.extra_parameters

    extra_parameters = 0


def from_onnxruntime(error: Exception) -> bool:
    """Whether `error` is one of onnxruntime's own (InvalidArgument, InvalidProtobuf, NoSuchFile, Fail, ...)."""
    return type(error).__module__ == "onnxruntime.capi.onnxruntime_pybind11_state"


def open_graph(ort: Any, path: Path, options: Any, graph: dict[str, Any]) -> Any:
    """An onnxruntime session of one graph file (`graph`: its manifest entry). A file onnxruntime cannot load,
    and a graph whose inputs or outputs are not those the manifest names (another export's graph in its
    place), are refused in one line naming the file."""
    try:
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as error:
        if not from_onnxruntime(error):
            raise
        raise SeqlabError(f"{path} {graph_damage(path, error)}; export the run again") from None
    for side, names in (("inputs", session.get_inputs()), ("outputs", session.get_outputs())):
        found, expected = [n.name for n in names], graph.get(side)
        if isinstance(expected, list) and sorted(found) != sorted(map(str, expected)):
            raise SeqlabError(f"{path} is not the graph manifest.json describes: its {side} are {', '.join(found)}, "
                              f"the manifest's {', '.join(map(str, expected))}; export the run again")
    return session


def graph_damage(path: Path, error: Exception) -> str:
    """What is wrong with a graph file onnxruntime failed to load, for a message: "is empty", "is truncated
    ...", "is not an ONNX graph ...", or onnxruntime's own words when its framing is sound."""
    try:
        data = path.read_bytes()
    except OSError as read_error:
        return f"cannot be read ({os_error_reason(read_error)})"
    if not data:
        return "is empty, not an ONNX graph"
    problem = model_problem(data)
    if problem:
        return problem
    words = str(error).splitlines()[0][:300] if str(error) else type(error).__name__
    return f"is an ONNX model that onnxruntime cannot load ({words})"


def pad(rows: list[list[int]], width: int | None = None) -> np.ndarray:
    """Right-padded (B, T) int64 ids."""
    out = np.full((len(rows), width or max(map(len, rows))), PAD, dtype=np.int64)
    for b, row in enumerate(rows):
        out[b, :len(row)] = row
    return out
