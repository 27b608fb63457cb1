"""`seqlab export RUN --format onnx`: a trained run's inference graphs as ONNX files, with everything needed
to run them without the run directory, and without seqlab (`seqlab.export.runtime.load_export` runs them on
onnxruntime; the export's README.md shows how to with numpy and onnxruntime alone).

Each family draws its own graphs (its `graphs` part: `seqlab.families.<name>.graphs`, whose docstrings say
what each graph takes and gives): a classifier's scores, a tagger's emissions (and its CRF's scores), a
language model's decoding step, a sequence-to-sequence model's encoder and decoder step. The batch and
sequence axes are dynamic (opset 17), and every state and memory tensor is batch-first (the recurrent
states are transposed inside the graphs), so beam search selects the rows of any of them with one index on
axis 0.

The export directory holds:

    *.onnx          the graphs, each with its doc_string, seqlab as producer, and metadata_props (family,
                    arch, graph, vocabulary sizes, special ids, ...: the family's `metadata`)
    README.md       what the folder holds, each graph's inputs and outputs (names, dtypes, shapes), what the
                    scores are, how to tokenize, and an example in numpy and onnxruntime (`seqlab.export.readme`)
    tokenizer and vocabulary files a user reads without seqlab (the family's `files`: a `tokenizers`
                    tokenizer.json for BPE, vocab.txt and labels.txt of one token per line for the others)
    config.json     the run's config, its absolute paths reduced to their file names
    manifest.json   task, arch, each graph's inputs and outputs, every file, the seqlab, torch and opset
                    versions, the run's directory name, the model's parameters
    seqlab/         the run's own vocabulary, tokenizer and label files, which seqlab's runtime reads
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from seqlab.errors import SeqlabError
from seqlab.export.folder import export_folder
from seqlab.export.graphs import OPSET, annotate
from seqlab.export.manifest import FORMAT_VERSION, SEQLAB_FILES
from seqlab.export.readme import write_readme
from seqlab.export.tokens import special_ids
from seqlab.fileio import atomic_write_json
from seqlab.nn.attention import MultiHeadAttention
from seqlab.nn.recurrent import RecurrentStack
from seqlab.version import __version__

if TYPE_CHECKING:
    from seqlab.contract import Family
    from seqlab.contract.parts import GraphsPart

# the run's files seqlab's runtime reads (those that exist), copied into seqlab/: vocabulary, tokenizer, labels
RUN_FILES = ("vocab.json", "tokenizer.json", "labels.json", "chars.json", "features.json")


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


def without_local_paths(value: Any) -> Any:
    """`value` (config.json's JSON) with every absolute path (POSIX, Windows or ~) reduced to its file name: an
    export says which files a run was trained on, not where they lay on the machine that trained it."""
    if isinstance(value, dict):
        return {key: without_local_paths(item) for key, item in value.items()}
    if isinstance(value, list):
        return [without_local_paths(item) for item in value]
    if isinstance(value, str) and (value.startswith(("/", "~", "\\")) or PureWindowsPath(value).is_absolute()):
        return PureWindowsPath(value).name if "\\" in value else PurePosixPath(value).name
    return value


def files_in(out: Path) -> list[str]:
    """Every file under `out`, as sorted relative POSIX paths."""
    return sorted(PurePosixPath(os.path.relpath(Path(folder) / name, out)).as_posix()
                  for folder, _, names in os.walk(out) for name in names)


def export_onnx(run_dir: str | Path, output: str | Path, overwrite: bool = False) -> Path:
    """Export the run's inference graphs to `output` (see the module's docstring); returns the manifest's path."""
    from seqlab.registry import load, run_family
    from seqlab.runs.files import read_run_json

    family = run_family(Path(run_dir))
    graphs = family.part("graphs")
    saved = read_run_json(Path(run_dir))
    graphs.refuse(saved)
    try:
        import onnx  # noqa: F401  (torch.onnx.export writes through it)
    except ImportError:
        raise SeqlabError("seqlab export --format onnx needs the onnx package: pip install 'seqlab[export]'") from None
    run_dir, out = Path(run_dir), Path(output)
    with export_folder(out, overwrite, run_dir, legacy_exports) as folder:     # moved into place at the end
        write_export(run_dir, folder, family, graphs, saved, load(run_dir))
    return out / "manifest.json"


def legacy_exports(folder: Path) -> set[str] | None:
    """The files of an export of another format of before its manifest.json, as that format's part recognises
    them (`legacy_export_files`), or None: what --overwrite may replace with an ONNX export."""
    from seqlab.registry import FAMILIES

    for family in FAMILIES.values():
        for fmt in family.exports:
            recognise = family.part(fmt).legacy_export_files if fmt != "onnx" else None
            files = recognise(folder) if recognise is not None else None
            if files is not None:
                return files
    return None


def write_export(run_dir: Path, out: Path, family: Family, graphs: GraphsPart, saved: dict[str, Any],
                 trained: Any) -> None:
    """The export of the loaded run `trained` into the empty folder `out` (see the module's docstring)."""
    from seqlab.info import count_parameters

    prepare_for_export(trained.model)
    trained.model.eval()
    drawn = graphs.export(trained, out)
    (out / SEQLAB_FILES).mkdir()
    for name in RUN_FILES:
        if (run_dir / name).exists():
            shutil.copyfile(run_dir / name, out / SEQLAB_FILES / name)
    atomic_write_json(out / "config.json", without_local_paths(saved))
    described = graphs.files(trained, out)                         # {file: what it holds}, the plain ones
    arch = getattr(trained.config.model, family.arch_option)
    manifest = {"format": "onnx", "format_version": FORMAT_VERSION, "task": family.name, "arch": arch,
                "graphs": drawn, "crf": (out / "crf.json").exists(),
                "context": getattr(trained.model, "context_length", None), "seqlab_version": __version__,
                "torch_version": torch.__version__, "opset": OPSET, "source_run": run_dir.resolve().name,
                "parameters": count_parameters(run_dir / "model.safetensors")[0]}     # the runtime needs no onnx to say
    about = graphs.about(trained, manifest)
    common = {"family": family.name, "arch": arch, **graphs.metadata(trained), "special_ids": special_ids(),
              "seqlab_version": __version__, "source_run": manifest["source_run"]}
    for name, graph in drawn.items():
        doc = (f"{about['graphs'].get(name) or graph['doc']}\n\nThe {name} graph of {family.title} ({arch}) trained "
               f"with seqlab, exported from the run {manifest['source_run']} by seqlab {__version__}; README.md beside "
               "it says how to run it.")
        del graph["doc"]
        annotate(out / graph["file"], doc, {**common, "graph": name})
    write_readme(out, family, manifest, described, about)
    manifest["files"] = files_in(out)
    atomic_write_json(out / "manifest.json", manifest)
