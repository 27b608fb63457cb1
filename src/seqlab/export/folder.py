"""Exports of a trained run: `onnx.py` (inference graphs for onnxruntime) and `hf.py` (a transformer LM as a
Hugging Face GPT-2 directory). What they share: how the export directory is made (`export_folder`).

An export is written into a hidden folder beside DIR and moved into place when complete, so a failed export
leaves what DIR held before. With --overwrite DIR may hold an export, and only that: its manifest.json (every
export writes one) lists every file it wrote, and a file it does not list (a user's) is never deleted; the
command is refused instead. An export written before it had a manifest.json (every ONNX export has one; a Hugging
Face export before it wrote one) is recognised by the exporter's `legacy` function (the format's part's
`legacy_export_files`; `seqlab.export.onnx` asks every format's)."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from seqlab.errors import SeqlabError
from seqlab.owned import listing, refuse_overlap, replace_folder, staging_folder, strangers
from seqlab.runs.files import not_a_run

MANIFEST = "manifest.json"
Legacy = Callable[[Path], "set[str] | None"]     # the files of an export of before manifest.json, or None


@contextlib.contextmanager
def export_folder(out: str | Path, overwrite: bool, run_dir: str | Path, legacy: Legacy | None = None
                  ) -> Iterator[Path]:
    """An empty folder to write the export of `run_dir` in, which takes the place of `out` when the block ends
    without an error (and is removed when it does not). Refused, before any work: `out` a file; `out` the run
    itself, inside it or holding it; `out` holding files, unless `overwrite` and they are an export's (see
    the module's docstring; `legacy` recognises an export of before manifest.json)."""
    out = Path(out)
    place = out.resolve() if out.is_symlink() else out
    check_output(out, overwrite, run_dir, legacy)
    staging = staging_folder(place, "--output")
    try:
        yield staging
        check_output(out, overwrite, run_dir, legacy)      # again: the export may have taken minutes
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    replace_folder(staging, place, "--output")


def check_output(out: Path, overwrite: bool, run_dir: str | Path, legacy: Legacy | None = None) -> None:
    """Refuse an --output that cannot take the export (the reasons of `export_folder`)."""
    if out.exists() and not out.is_dir():
        raise SeqlabError(f"--output {out} is a file; give a directory")
    refuse_overlap(out, Path(run_dir), "the run being exported")
    if not out.exists() or not any(out.iterdir()):
        return
    if not overwrite:
        raise SeqlabError(f"--output {out} already holds files; add --overwrite to replace them")
    known = export_files(out, legacy)
    if known is None and (out / "config.json").exists() and not_a_run(out) is None:
        raise SeqlabError(f"--output {out} holds a seqlab run, not an export: --overwrite replaces only an export; "
                          "choose another --output")
    if known is None:
        raise SeqlabError(f"--output {out} holds files but no seqlab export (no manifest.json of one): "
                          "--overwrite replaces only an export, and seqlab never deletes what it did not write; "
                          "choose another --output")
    foreign = strangers(out, known)
    if foreign:
        raise SeqlabError(f"--output {out} holds {listing(foreign)}, which the seqlab export there did not write "
                          "(its manifest.json does not list it): seqlab never deletes what it did not write; move "
                          "it out, or choose another --output")


def export_files(out: Path, legacy: Legacy | None = None) -> set[str] | None:
    """The files of the seqlab export in the folder `out` (relative POSIX paths, manifest.json among them), or
    None where it holds none: a manifest.json with an export's "format" and the list of its "files", or (no
    manifest.json) an export of before it that `legacy` recognises."""
    try:
        manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = None
    if isinstance(manifest, dict) and isinstance(manifest.get("format"), str) and \
            isinstance(manifest.get("files"), list) and all(isinstance(f, str) for f in manifest["files"]):
        graphs_entry = manifest.get("graphs")
        graphs = graphs_entry if isinstance(graphs_entry, dict) else {}
        named = [graph["file"] for graph in graphs.values() if isinstance(graph, dict)
                 and isinstance(graph.get("file"), str)]
        return {MANIFEST, *manifest["files"], *named}
    if (out / MANIFEST).exists() or legacy is None:
        return None
    return legacy(out)
