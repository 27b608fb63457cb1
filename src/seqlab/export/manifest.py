"""An export directory's manifest.json: what `seqlab.export.onnx` writes and `seqlab.export.runtime` reads
(torch-free, so that the runtime never imports PyTorch), and the confinement of what it names: an export
reads only files inside its own folder."""

from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath, PureWindowsPath

from seqlab.errors import SeqlabError

FORMAT_VERSION = 3        # 3: README.md, plain tokenizer and vocabulary files, seqlab's own files under seqlab/
READS = (2, 3)            # 2: the same graphs, seqlab's files beside them
SEQLAB_FILES = "seqlab"   # the folder of the run's own tokenizer, vocabulary and label files (format 3)


def read_manifest(export_dir: str | Path) -> dict:
    """The manifest of an export this seqlab can run (a format version it reads), every path it names
    confined to the export's folder."""
    path = Path(export_dir) / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise SeqlabError(f"{export_dir} is not a seqlab export (manifest.json: {error})") from None
    if not isinstance(manifest, dict):
        raise SeqlabError(f"{export_dir} is not a seqlab export (manifest.json holds no object)")
    if manifest.get("format", "onnx") != "onnx":
        raise SeqlabError(f"{export_dir} is an export of format {manifest.get('format')!r}, not ONNX: seqlab's "
                          "runtime runs ONNX exports (a Hugging Face export loads with transformers)")
    version = manifest.get("format_version")
    if version not in READS:
        raise SeqlabError(f"{export_dir} is an export of format {version} (seqlab "
                          f"{manifest.get('seqlab_version', '?')}); this seqlab runs formats "
                          f"{', '.join(map(str, READS))}: export the run again with seqlab export")
    graphs = manifest.get("graphs")
    if not isinstance(graphs, dict) or not all(isinstance(g, dict) and "file" in g for g in graphs.values()):
        raise SeqlabError(f"{export_dir}/manifest.json is damaged (its \"graphs\" name no files): export the run again")
    confine(export_dir, manifest)
    return manifest


def seqlab_files(export_dir: str | Path, manifest: dict) -> Path:
    """The folder of the run's own files that seqlab's runtime reads: seqlab/ (format 3), or the export
    folder itself (format 2)."""
    return Path(export_dir) / SEQLAB_FILES if manifest.get("format_version", 2) >= 3 else Path(export_dir)


def named_paths(manifest: dict) -> list:
    """Every path the manifest names: each graph's "file" and each entry of "files"."""
    files = manifest.get("files", [])
    return [graph.get("file") for graph in manifest["graphs"].values()] + (files if isinstance(files, list)
                                                                            else [files])


def confine(export_dir: str | Path, manifest: dict) -> None:
    """Refuse, in one line, a manifest that names a path outside the export folder (absolute, through `..`,
    or a link that leads out), and a link anywhere in the folder that leads out of it: loading an export
    reads only what the folder holds."""
    root = Path(export_dir).resolve()
    for name in named_paths(manifest):
        if not isinstance(name, str) or not name or "\x00" in name:
            raise SeqlabError(f"{export_dir}/manifest.json names the file {name!r}, which is no file name; "
                              "export the run again")
        if PurePosixPath(name).is_absolute() or PureWindowsPath(name).is_absolute() or name.startswith("\\") \
                or ".." in PurePosixPath(name.replace("\\", "/")).parts:
            raise SeqlabError(f"{export_dir}/manifest.json names {name!r}, outside the export folder; an export "
                              "reads only the files inside its own folder")
        if not inside(root, root / name):
            raise SeqlabError(f"{export_dir}/manifest.json names {name!r}, a link that leads outside the export "
                              "folder; an export reads only the files inside its own folder")
    for folder, dirs, files in os.walk(root):
        for entry in [*dirs, *files]:
            path = Path(folder) / entry
            if path.is_symlink() and not inside(root, path):
                raise SeqlabError(f"{export_dir}: {path.relative_to(root)} is a link to {os.readlink(path)}, outside "
                                  "the export folder; an export reads only the files inside its own folder")


def inside(root: Path, path: Path) -> bool:
    """Whether `path`, its links followed, lies in the (resolved) folder `root`."""
    try:
        return path.resolve().is_relative_to(root)
    except (OSError, RuntimeError):          # a link loop
        return False
