"""What a family's ONNX graphs are built with (its `graphs` part, driven by `seqlab.export.onnx`): `Graph`, the
module every graph wraps a trained model in, `export_graph`, which traces one graph to a file with its named
inputs and outputs and dynamic axes (opset 17), and `layers_first` for the recurrent states, which the graphs
keep batch-first."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import warnings
from pathlib import Path

import torch
from torch import Tensor, nn

OPSET = 17


class Graph(nn.Module):
    """What every exported graph wraps: the trained model, whose `forward` the graph's calls (a family's
    graph modules subclass it, one per graph)."""

    def __init__(self, model):
        super().__init__()
        self.model = model


def layers_first(h: Tensor) -> Tensor:
    """(B, L, H) <-> (L, B, H): the graphs' states are batch-first, the recurrent stacks' layer-first."""
    return h.transpose(0, 1)


@contextlib.contextmanager
def quiet_stderr():
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


def export_graph(module: nn.Module, args: tuple, path: Path, inputs: list[str], outputs: list[str],
                 axes: dict[str, dict[int, str]]) -> dict:
    """One graph to `path` (the TorchScript-based exporter, `dynamo=False`: torch 2.13's default dynamo
    exporter needs onnxscript, which seqlab does not depend on, and the recurrent encoders' packed sequences
    export as ONNX's own RNN ops with per-row lengths only through this one); its inputs and outputs."""
    module.eval()
    with warnings.catch_warnings(), torch.no_grad(), quiet_stderr():
        warnings.simplefilter("ignore")                      # tracer warnings about Python-side shape checks
        torch.onnx.export(module, args, str(path), input_names=inputs, output_names=outputs,
                          dynamic_axes=axes, opset_version=OPSET, dynamo=False)
    return {"file": path.name, "inputs": inputs, "outputs": outputs}
