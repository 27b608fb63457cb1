"""keep_freed_memory: repeated large allocations stop faulting in fresh pages once it is on."""

import platform
import subprocess
import sys
import textwrap

import pytest

from seqlab.training.memory import keep_freed_memory

glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")

COUNT_FAULTS = textwrap.dedent("""
    import resource, sys, torch
    import seqlab.registry, seqlab.decoding.search, seqlab.training.trainer  # as in a training process: its heap
    import seqlab.families.classifier.pipeline, seqlab.families.lm.pipeline
    import seqlab.families.seq2seq.pipeline, seqlab.families.tagger.pipeline
    from seqlab.training.memory import keep_freed_memory
    if sys.argv[1] == "keep":
        assert keep_freed_memory()
    def step():                      # a 64 MB buffer allocated, written and freed, as logits are each step
        torch.empty(16 * 2 ** 20).fill_(1.0)
    for _ in range(3):               # the heap grows to its working size
        step()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(10):
        step()
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
""")


def page_faults(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", COUNT_FAULTS, mode], capture_output=True, text=True, check=True)
    return int(done.stdout.strip())


@pytest.mark.slow
@glibc
def test_keep_freed_memory_stops_the_page_faults_of_repeated_large_allocations():
    pages = 10 * 64 * 2 ** 20 // 4096                    # what ten fresh 64 MB buffers fault in
    assert page_faults("default") > pages // 2
    assert page_faults("keep") < pages // 20


def test_keep_freed_memory_says_whether_it_applied():
    assert keep_freed_memory() == (platform.libc_ver()[0] == "glibc")
