"""An export directory's manifest.json: what `seqlab.export.onnx` writes and `seqlab.export.runtime` reads
(torch-free, so that the runtime never imports PyTorch), the confinement of what it names (an export reads
only files inside its own folder), and the checks of the files the runtime reads (`check_files`: each there,
a regular file, and its JSON an object), so that a damaged export is refused in one line naming the file
before anything runs, and a FIFO in a file's place is refused without being opened."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from seqlab.errors import SeqlabError
from seqlab.fileio import escape, outward_link, read_json

FORMAT_VERSION = 3        # 3: README.md, plain tokenizer and vocabulary files, seqlab's own files under seqlab/
READS = (2, 3)            # 2: the same graphs, seqlab's files beside them
SEQLAB_FILES = "seqlab"   # the folder of the run's own tokenizer, vocabulary and label files (format 3)


def read_manifest(export_dir: str | Path) -> dict[str, Any]:
    """The manifest of an export this seqlab can run (a format version it reads), every path it names
    confined to the export's folder. A missing folder, a folder without manifest.json (a run directory among
    them) and a manifest.json that is no regular file (a FIFO is refused without being opened) are refused
    in one line."""
    export_dir = Path(export_dir)
    if not export_dir.exists():
        raise SeqlabError(f"{export_dir} does not exist; expected an export directory (seqlab export RUN --format "
                          "onnx --output DIR)")
    if not export_dir.is_dir():
        raise SeqlabError(f"{export_dir} is {kind(export_dir)}, not an export directory (seqlab export RUN --format "
                          "onnx --output DIR writes one)")
    path = export_dir / "manifest.json"
    if not path.exists() and not path.is_symlink():
        raise SeqlabError(f"{export_dir} is not a seqlab export: it has no manifest.json{missing_manifest(export_dir)}")
    regular(path)
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise SeqlabError(f"{path} is damaged ({error}): export the run again") from None
    if not isinstance(manifest, dict):
        raise SeqlabError(f"{path} is damaged (it holds no JSON object): export the run again")
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


def seqlab_files(export_dir: str | Path, manifest: dict[str, Any]) -> Path:
    """The folder of the run's own files that seqlab's runtime reads: seqlab/ (format 3), or the export
    folder itself (format 2)."""
    return Path(export_dir) / SEQLAB_FILES if manifest.get("format_version", 2) >= 3 else Path(export_dir)


def named_paths(manifest: dict[str, Any]) -> list[Any]:
    """Every path the manifest names: each graph's "file" and each entry of "files"."""
    files = manifest.get("files", [])
    return [graph.get("file") for graph in manifest["graphs"].values()] + (files if isinstance(files, list)
                                                                            else [files])


def confine(export_dir: str | Path, manifest: dict[str, Any]) -> None:
    """Refuse, in one line, a manifest that names a path outside the export folder (absolute, through `..`,
    or a link that leads out), and a link anywhere in the folder that leads out of it: loading an export
    reads only what the folder holds."""
    for name in named_paths(manifest):
        problem = escape(Path(export_dir), name)
        if problem == "no file name":
            raise SeqlabError(f"{export_dir}/manifest.json names the file {name!r}, which is no file name; "
                              "export the run again")
        if problem == "outside":
            raise SeqlabError(f"{export_dir}/manifest.json names {name!r}, outside the export folder; an export "
                              "reads only the files inside its own folder")
        if problem == "a link":
            raise SeqlabError(f"{export_dir}/manifest.json names {name!r}, a link that leads outside the export "
                              "folder; an export reads only the files inside its own folder")
    link = outward_link(Path(export_dir))
    if link is not None:
        raise SeqlabError(f"{export_dir}: {link.relative_to(Path(export_dir).resolve())} is a link to "
                          f"{os.readlink(link)}, outside the export folder; an export reads only the files inside "
                          "its own folder")


def missing_manifest(export_dir: Path) -> str:
    """What a folder without manifest.json holds instead, for the message that refuses it."""
    if (export_dir / "model.safetensors").exists():
        return (f" (it is a run directory: export it with seqlab export {export_dir} --format onnx --output DIR, or "
                "serve it on PyTorch with --runtime torch)")
    if any(export_dir.glob("*.onnx")):
        return " (it holds ONNX graphs, but not the manifest that names them: export the run again)"
    return " (seqlab export RUN --format onnx --output DIR writes an export)"


def kind(path: Path) -> str:
    """What a path that is not a regular file is ("a folder", "a FIFO (named pipe)", ...), from its status
    alone: nothing is opened."""
    mode = os.stat(path).st_mode
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISREG, "a file")):
        if test(mode):
            return name
    return "not a regular file"


def regular(path: Path) -> None:
    """Refuse, without opening it, a path that is not a regular file: reading a FIFO would wait for a writer
    forever, a device never ends, a folder is no file."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return                            # missing, or a link to nothing: the reader says so
    if not stat.S_ISREG(mode):
        raise SeqlabError(f"{path} is {kind(path)}, not a file: an export holds only the files seqlab export "
                          "wrote; export the run again")


def check_files(export_dir: str | Path, manifest: dict[str, Any]) -> None:
    """Refuse, in one line naming the file, an export whose runtime would fail on a file: a graph missing, or
    not a regular file; a file the manifest names that is not a regular file (nothing is opened); config.json
    or a file of the run's own (seqlab/) missing, empty, or not a JSON object."""
    export_dir = Path(export_dir)
    for name, graph in manifest["graphs"].items():
        path = export_dir / graph["file"]
        if not path.exists():
            raise SeqlabError(f"{path} is missing: the export's {name} graph (manifest.json names it) is not there; "
                              "export the run again")
        regular(path)
    for name in named_paths(manifest):
        regular(export_dir / name)
    files = seqlab_files(export_dir, manifest)
    for path in files.glob("*.json"):                 # what the family's readers look for, listed or not
        regular(path)
    files_entry = manifest.get("files")
    listed = files_entry if isinstance(files_entry, list) else []
    read = {"config.json", *(name for name in listed if name.endswith(".json") and name != "manifest.json"
                             and (export_dir / name).parent == files)}
    for name in sorted(read):
        path = export_dir / name
        if not path.exists():
            raise SeqlabError(f"{path} is missing{' (manifest.json lists it)' if name in listed else ''}: the export "
                              "is incomplete; export the run again")
        regular(path)
        try:
            data = read_json(path, "export file")
        except SeqlabError as error:
            raise SeqlabError(f"{error}: export the run again") from None
        if not isinstance(data, dict):
            raise SeqlabError(f"export file {path} is damaged (it holds no JSON object): export the run again")
