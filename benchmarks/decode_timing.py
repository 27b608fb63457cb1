"""Greedy and beam-5 decoding speed of one trained seq2seq run (or of its ONNX export, with --onnx), with
whichever seqlab is first on PYTHONPATH, so that two versions of the code can be timed side by side,
alternately, on the same run and machine:

    git worktree add /tmp/before REV
    for code in /tmp/before .; do
        PYTHONPATH=$code/src OMP_NUM_THREADS=1 python benchmarks/decode_timing.py RUN SRC TGT 500
        PYTHONPATH=$code/src OMP_NUM_THREADS=1 python benchmarks/decode_timing.py RUN SRC TGT 500 --onnx EXPORT
    done

Prints one JSON line: sentences per second at beam 1 and 5, the first output, and the SHA-256 of every
output (which must agree between the versions). --onnx times the numpy searches on onnxruntime (`seqlab
serve --runtime onnx`'s path): the export's `generate`, or before the families had it, the server's adapter.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time

import seqlab
from seqlab.families.seq2seq.parallel import read_aligned


def load(run: str, export: str | None):
    """The model that decodes: the PyTorch run, or the ONNX export's runtime (one thread each)."""
    if export is None:
        import torch

        torch.set_num_threads(1)
        return seqlab.load(run)
    from seqlab.export.runtime import load_export

    runtime = load_export(export, threads=1)
    if hasattr(runtime, "generate"):
        return runtime
    from seqlab.serve.onnx_models import OnnxSeq2Seq  # the code before issue 29

    return OnnxSeq2Seq(runtime)


def main() -> int:
    arguments = sys.argv[1:]
    export = None
    if "--onnx" in arguments:
        at = arguments.index("--onnx")
        export = arguments[at + 1]
        del arguments[at:at + 2]
    run, source, target, n = arguments[0], arguments[1], arguments[2], int(arguments[3])
    model = load(run, export)
    texts = [p.source for p in read_aligned(source, target)[:n]]
    figures = {"code": seqlab.__file__, "runtime": "onnx" if export else "torch", "sentences": len(texts)}
    for beam in (1, 5):
        model.generate(texts[:64], beam=beam)                        # warm up
        start = time.perf_counter()
        outputs = model.generate(texts, beam=beam)
        figures[f"beam{beam}_sentences_per_s"] = round(len(texts) / (time.perf_counter() - start), 1)
        figures[f"beam{beam}_first_output"] = outputs[0].text
        figures[f"beam{beam}_outputs_sha256"] = hashlib.sha256("\n".join(o.text for o in outputs).encode()).hexdigest()
    print(json.dumps(figures, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
