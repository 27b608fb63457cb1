"""An export directory's manifest.json: what `seqlab.export.onnx` writes and `seqlab.export.runtime` reads
(torch-free, so that the runtime never imports PyTorch)."""

from __future__ import annotations

import json
from pathlib import Path

from seqlab.errors import SeqlabError

FORMAT_VERSION = 2        # 2: batch-first recurrent states, the RNN decoder step's attention weights


def read_manifest(export_dir: str | Path) -> dict:
    """The manifest of an export this seqlab can run (the format version it writes)."""
    path = Path(export_dir) / "manifest.json"
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise SeqlabError(f"{export_dir} is not a seqlab export (manifest.json: {error})") from None
    if not isinstance(manifest, dict):
        raise SeqlabError(f"{export_dir} is not a seqlab export (manifest.json holds no object)")
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise SeqlabError(f"{export_dir} is an export of format {version} (seqlab "
                          f"{manifest.get('seqlab_version', '?')}); this seqlab runs format {FORMAT_VERSION}: "
                          "export the run again with seqlab export")
    return manifest
