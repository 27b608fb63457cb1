"""What a family's ONNX graphs are built with (its `graphs` part, driven by `seqlab.export.onnx`): `Graph`, the
module every graph wraps a trained model in, `export_graph`, which traces one graph to a file with its named
inputs and outputs and dynamic axes (opset 17), `layers_first` for the recurrent states, which the graphs
keep batch-first, and `annotate`, which gives a written graph its description and metadata."""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

OPSET = 17


class Graph(nn.Module):
    """What every exported graph wraps: the trained model, whose `forward` the graph's calls (a family's
    graph modules subclass it, one per graph)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model


def layers_first(h: Tensor) -> Tensor:
    """(B, L, H) <-> (L, B, H): the graphs' states are batch-first, the recurrent stacks' layer-first."""
    return h.transpose(0, 1)


@contextlib.contextmanager
def quiet_stderr() -> Iterator[None]:
    """File descriptor 2 to a temporary file while the exporter runs: its C++ side warns that the packed
    sequences' ops have no shape inference (they become the RNN ops' sequence_lens, checked by the tests);
    what it wrote is shown if the export fails."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            held.seek(0)
            sys.stderr.write(held.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def export_graph(module: nn.Module, args: tuple[Any, ...], path: Path, inputs: list[str], outputs: list[str],
                 axes: dict[str, dict[int, str]]) -> dict[str, Any]:
    """One graph to `path` (the TorchScript-based exporter, `dynamo=False`: torch 2.13's default dynamo
    exporter needs onnxscript, which seqlab does not depend on, and the recurrent encoders' packed sequences
    export as ONNX's own RNN ops with per-row lengths only through this one); its file, inputs and outputs,
    and what it computes ("doc": the graph module's docstring, which `annotate` writes into the file)."""
    module.eval()
    with warnings.catch_warnings(), torch.no_grad(), quiet_stderr():
        warnings.simplefilter("ignore")                      # tracer warnings about Python-side shape checks
        torch.onnx.export(module, args, str(path), input_names=inputs, output_names=outputs,
                          dynamic_axes=axes, opset_version=OPSET, dynamo=False)
    doc = inspect.cleandoc(type(module).__doc__ or "")
    return {"file": path.name, "inputs": inputs, "outputs": outputs, "doc": doc}


def annotate(path: Path, doc: str, metadata: dict[str, Any]) -> None:
    """Describe the graph at `path` inside the file: its doc_string, seqlab as its producer, and `metadata`
    as its metadata_props (values that are not strings as JSON). The weights stay where they are (an
    external-data file, past 2 GB, is left untouched)."""
    import onnx

    from seqlab.version import __version__

    model = onnx.load(str(path), load_external_data=False)
    model.doc_string = doc
    model.producer_name, model.producer_version = "seqlab", __version__
    del model.metadata_props[:]
    for key, value in metadata.items():
        model.metadata_props.add(key=key, value=value if isinstance(value, str) else json.dumps(value))
    onnx.save(model, str(path))
