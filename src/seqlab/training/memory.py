"""Keep freed memory inside the process while training on CPU (glibc's malloc).

A training step allocates and frees the same large buffers every time: with a 10,000-word softmax
over a 20 x 35 batch, the logits and their gradient are 28 MB each. glibc's malloc serves blocks that
large with mmap, or returns the top of its heap to the system once more than a threshold is free,
so each step maps fresh pages that the kernel must fault in and zero: we counted ~15,000 page faults
per step (~60 MB) on the PTB LSTM, ~5% of the step's time. PyTorch's CPU tuning guides answer this by
preloading jemalloc or tcmalloc with decay disabled; `keep_freed_memory` does the same with glibc
itself, for the whole process: no allocation is served by mmap, and the heap is never trimmed, so
the process holds on to its peak memory and every later step reuses it.
"""

from __future__ import annotations

import ctypes
import platform
import sys

M_TRIM_THRESHOLD = -1       # mallopt parameters, from glibc's malloc.h
M_MMAP_MAX = -4


def keep_freed_memory() -> bool:
    """Make glibc's malloc keep freed memory for reuse; False where that is not possible (not glibc)."""
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt(M_MMAP_MAX, 0) == 1 and mallopt(M_TRIM_THRESHOLD, 2 ** 31 - 1) == 1
