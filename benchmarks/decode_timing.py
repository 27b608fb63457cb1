"""Greedy and beam-5 decoding speed of one trained seq2seq run, with whichever seqlab is first on PYTHONPATH,
so that two versions of the code can be timed side by side, alternately, on the same run and machine:

    git worktree add /tmp/before REV
    for code in /tmp/before .; do
        PYTHONPATH=$code/src OMP_NUM_THREADS=1 python benchmarks/decode_timing.py RUN SRC TGT 500
    done

Prints one JSON line: sentences per second at beam 1 and 5, and the first output (which must agree).
"""

from __future__ import annotations

import json
import sys
import time

import torch

import seqlab
from seqlab.data.parallel import read_aligned


def main() -> int:
    run, source, target, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    torch.set_num_threads(1)
    model = seqlab.load(run)
    texts = [p.source for p in read_aligned(source, target)[:n]]
    figures = {"code": seqlab.__file__, "sentences": len(texts)}
    for beam in (1, 5):
        model.generate(texts[:64], beam=beam)                        # warm up
        start = time.perf_counter()
        outputs = model.generate(texts, beam=beam)
        figures[f"beam{beam}_sentences_per_s"] = round(len(texts) / (time.perf_counter() - start), 1)
        figures[f"beam{beam}_first_output"] = outputs[0].text
    print(json.dumps(figures, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
