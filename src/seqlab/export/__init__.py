"""Exports of a trained run: `onnx.py` (inference graphs for onnxruntime) and `hf.py` (a transformer LM as a
Hugging Face GPT-2 directory). What they share: how the export directory is made."""

from __future__ import annotations

import shutil
from pathlib import Path

from seqlab.errors import SeqlabError


def prepare_output(out: Path, overwrite: bool) -> None:
    """An empty directory at `out`: refuse a file, and a directory that holds files unless `overwrite`."""
    if out.exists() and not out.is_dir():
        raise SeqlabError(f"--output {out} is a file; give a directory")
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise SeqlabError(f"--output {out} already holds files; add --overwrite to replace them")
    try:
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
    except OSError as error:
        raise SeqlabError(f"--output {out}: cannot write there ({error.strerror or error})") from None
