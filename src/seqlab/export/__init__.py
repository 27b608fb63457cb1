"""Exports of a trained run: `onnx.py` (inference graphs for onnxruntime; a family may offer other formats, as
the LM's `hf.py` does), `folder.py` (how an export directory is made, replacing only an export), `runtime.py`
(an export loaded as its family's runtime). What the families' export parts build on: `graphs.py`,
`session.py`, `tokens.py`, `readme.py`, `manifest.py`, `protobuf.py`. This file imports nothing, so that a
family's part importing one of those runs nothing else."""
