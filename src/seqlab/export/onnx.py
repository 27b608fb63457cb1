"""`seqlab export RUN --format onnx`: a trained run's inference graphs as ONNX files, with everything needed
to run them without the run directory (`seqlab.export.runtime.load_export` runs them on onnxruntime).

Each family draws its own graphs (its `graphs` part: `seqlab.families.<name>.graphs`, whose docstrings say
what each graph takes and gives): a classifier's scores, a tagger's emissions (and its CRF's scores), a
language model's decoding step, a sequence-to-sequence model's encoder and decoder step. The batch and
sequence axes are dynamic (opset 17), and every state and memory tensor is batch-first (the recurrent
states are transposed inside the graphs), so beam search selects the rows of any of them with one index on
axis 0.

The export directory holds the .onnx files, manifest.json (task, arch, each graph's inputs and outputs,
the seqlab, torch and opset versions), and the run's config.json and vocabulary, tokenizer and label files.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
from torch import nn

from seqlab.errors import SeqlabError
from seqlab.export import prepare_output
from seqlab.export.graphs import OPSET
from seqlab.export.manifest import FORMAT_VERSION
from seqlab.fileio import atomic_write_json
from seqlab.nn.attention import MultiHeadAttention
from seqlab.nn.recurrent import RecurrentStack
from seqlab.version import __version__

# the run's files an export carries (those that exist): the vocabulary, tokenizer, labels and config
RUN_FILES = ("config.json", "vocab.json", "tokenizer.json", "labels.json", "chars.json", "features.json")


def prepare_for_export(model: nn.Module) -> None:
    """The same parameters, on the implementations that trace with dynamic shapes: every recurrent stack
    on PyTorch's kernels, which export as ONNX's RNN / LSTM / GRU ops (the book's GRU variant, reset before
    U, has no kernel and stays on the cells); self-attention on the textbook code with an explicit causal
    mask (the fused kernel's `is_causal` is chosen from the shapes in Python, which a trace freezes)."""
    for module in model.modules():
        if isinstance(module, RecurrentStack) and module.gru_reset == "after":
            module.set_impl("fused")
        if isinstance(module, MultiHeadAttention):
            module.impl = "textbook"


def export_onnx(run_dir: str | Path, output: str | Path, overwrite: bool = False) -> Path:
    """Export the run's inference graphs to `output` (see the module's docstring); returns the manifest's path."""
    from seqlab.families.run_files import read_run_json
    from seqlab.registry import load, run_family

    family = run_family(Path(run_dir))
    graphs = family.part("graphs")
    graphs.refuse(read_run_json(Path(run_dir)))
    try:
        import onnx  # noqa: F401  (torch.onnx.export writes through it)
    except ImportError:
        raise SeqlabError("seqlab export --format onnx needs the onnx package: pip install 'seqlab[export]'") from None
    run_dir, out = Path(run_dir), Path(output)
    trained = load(run_dir)
    prepare_output(out, overwrite)
    prepare_for_export(trained.model)
    trained.model.eval()
    drawn = graphs.export(trained, out)
    for name in RUN_FILES:
        if (run_dir / name).exists():
            shutil.copyfile(run_dir / name, out / name)
    manifest = {"format": "onnx", "format_version": FORMAT_VERSION, "task": family.name,
                "arch": getattr(trained.config.model, family.arch_option), "graphs": drawn,
                "files": sorted(p.name for p in out.iterdir()), "crf": (out / "crf.json").exists(),
                "context": getattr(trained.model, "context_length", None), "seqlab_version": __version__,
                "torch_version": torch.__version__, "opset": OPSET, "source_run": str(run_dir.resolve())}
    atomic_write_json(out / "manifest.json", manifest)
    return out / "manifest.json"
