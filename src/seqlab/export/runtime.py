"""Running an ONNX export (`seqlab.export.onnx`) on onnxruntime: the whole task in numpy, without the run
directory and without PyTorch (text <-> ids through seqlab's own tokenizers and vocabularies, read from the
export's copies of the run's files by each family's torch-free `vocab` module). Importing this module and
running an export never imports torch (tests/test_export.py checks it in a fresh process).

    from seqlab.export.runtime import load_export
    tagger = load_export("exports/ner")               # an ExportedTagger
    tagger.tag_sentences([["John", "lives", "in", "Paris", "."]])

`load_export` gives the family's runtime (its `exported` part), which answers as the family's PyTorch API
does (`seqlab.load(run)`), and as `seqlab serve --runtime onnx` serves it:

    ExportedClassifier.classify(texts)                 -> [Prediction]       (as TrainedClassifier.classify)
    ExportedTagger.tag_sentences(sentences)            -> [[(tag, p)]]       argmax, or Viterbi with a CRF
    ExportedLM.generate(prompt, max_tokens)            -> str                greedy (generate_ids: the ids)
    ExportedLM.stream(prompt, **options)               -> text pieces        greedy, sampled or beam search
    ExportedSeq2Seq.translate(texts)                   -> [str]              greedy
    ExportedSeq2Seq.generate(texts, beam, ...)         -> [Output]           greedy, sampled or beam search

Greedy, argmax and Viterbi results equal the PyTorch model's, the scores within float rounding
(tests/test_export.py checks 1e-4); the searches are `seqlab.decoding`'s, on numpy arrays. Batches are
formed as the PyTorch API forms them (`length_batches`, shortest first).
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np

from seqlab.data.vocab import PAD
from seqlab.errors import SeqlabError
from seqlab.export.manifest import read_manifest
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
        dict: its "data", "model" and "train" groups)."""
        from seqlab.registry import FAMILIES

        ort = onnxruntime()
        self.dir = Path(export_dir)
        self.manifest = read_manifest(self.dir)
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


def load_export(export_dir: str | Path, threads: int = 0):
    """An export directory as its family's runtime: an `ExportedClassifier`, `ExportedTagger`, `ExportedLM` or
    `ExportedSeq2Seq`."""
    from seqlab.registry import FAMILIES

    task = read_manifest(export_dir).get("task")
    if task not in FAMILIES:
        raise SeqlabError(f"{export_dir}/manifest.json names the task {task!r}, which this seqlab cannot run")
    return FAMILIES[task].part("exported").RUNTIME(export_dir, threads)


__all__ = ["Exported", "load_export", "pad"]
