"""seqlab.training.distributed: the watch that ends a DDP job whose peer went silent (--dist-timeout), the barrier
on the store, and a clean end without stack traces.

The watch's rules run in one process, on sessions that share a real TCPStore (a "stopped" session is one whose
threads were stopped). Then two real processes of `seqlab train lm`, started as torchrun would start them
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; without torchrun's agent, rank 0's process serves the store): one
stopped with SIGSTOP must end the other within --dist-timeout with one line; a clean run ends without a trace.
tests/test_multinode.py does the same under torchrun (slow)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest
import torch.distributed as dist

from conftest import TRAIN, VALID
from seqlab.training.distributed import Session, beat_interval

# what a stack trace leaves in a log: Python's, PyTorch's C++ one (c10::Error's frames), a C++ log line
# ("[W1128 09:01:16.66 socket.cpp:469] ..."), gloo's abort at exit
TRACE = re.compile(r"Traceback|Exception raised from|frame #\d|^\[[WEF]\d{4}|terminate called", re.MULTILINE)


@pytest.fixture
def sessions(monkeypatch):
    """make(size, timeout): `size` sessions of one job on an in-process store; `failures` records what their
    judges would have printed before ending the process."""
    server = dist.TCPStore("127.0.0.1", 0, None, True, timedelta(seconds=10), wait_for_workers=False)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(server.port))
    failures: list[tuple[int, str]] = []

    def fail(self, problem):
        with self.lock:
            if not (self.ending or self.stopping.is_set()):
                self.ending = True
                failures.append((self.rank, problem))

    monkeypatch.setattr(Session, "fail", fail)
    made: list[Session] = []

    def make(size: int, timeout: float) -> list[Session]:
        with ThreadPoolExecutor(size) as pool:          # each waits for the others' names: start them together
            made.extend(pool.map(lambda rank: Session(rank, size, timeout), range(size)))
        return made[-size:]

    yield make, failures
    for session in made:
        session.stop()
    del server


@pytest.mark.slow
def test_distributed_watch_names_a_silent_peer_after_the_timeout(sessions):
    make, failures = sessions
    first, second = make(2, timeout=1.5)
    time.sleep(1.0)
    assert failures == []                               # both beat (every 0.3 s): nobody is judged
    second.stopping.set()                                # as SIGSTOP would: its threads stop beating
    stopped = time.monotonic()
    while not failures and time.monotonic() - stopped < 6:
        time.sleep(0.05)
    waited = time.monotonic() - stopped
    assert failures == [(0, f"rank 1 (pid {os.getpid()} on {os.uname().nodename}) did not answer within 1.5 s "
                            "(--dist-timeout): stopped or hung, or its machine is unreachable")]
    assert 1.5 - beat_interval(1.5) <= waited <= 1.5 + 3 * beat_interval(1.5) + 0.5


def test_distributed_watch_relays_a_failed_peers_line_at_once(sessions):
    make, failures = sessions
    first, second = make(2, timeout=2.5)
    second.abandon("--foo 3 is not a bar")
    deadline = time.monotonic() + 3 * beat_interval(2.5)
    while not failures and time.monotonic() < deadline:
        time.sleep(0.05)
    assert failures == [(0, f"rank 1 (pid {os.getpid()} on {os.uname().nodename}) stopped: --foo 3 is not a bar")]


@pytest.mark.slow
def test_distributed_watch_ignores_a_peer_that_left_cleanly(sessions):
    make, failures = sessions
    first, second = make(2, timeout=1.0)
    second.leave()                                       # its last store operations: counter DONE
    time.sleep(1.8)
    assert failures == [] and 1 not in first.seen


@pytest.mark.slow
def test_distributed_barrier_waits_for_a_busy_peer_beyond_the_timeout(sessions):
    """Rank 0 busy alone (preparing data, writing a checkpoint) for twice --dist-timeout while the other waits in
    the barrier: it beats all the while, so nobody is judged, and the barrier opens when it arrives."""
    make, failures = sessions
    first, second = make(2, timeout=1.0)
    passed = []
    waiter = threading.Thread(target=lambda: (second.barrier(), passed.append(time.monotonic())))
    start = time.monotonic()
    waiter.start()
    time.sleep(2.0)
    assert passed == []
    first.barrier()
    waiter.join(timeout=5)
    assert passed and passed[0] - start >= 2.0
    assert failures == []


def seqlab_processes(args: list[str], folder: Path, program: list[str] | None = None) -> list[subprocess.Popen]:
    """`seqlab ARGS` (or `program`) as ranks 0 and 1 of one job, as torchrun starts them (its agent left out: rank
    0's process serves the store); stderr in folder/rank{R}.err."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    processes = []
    for rank in range(2):
        environment = {**os.environ, "OMP_NUM_THREADS": "1", "RANK": str(rank), "LOCAL_RANK": "0",
                       "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        with open(folder / f"rank{rank}.err", "w") as err:
            processes.append(subprocess.Popen(program or [sys.executable, "-m", "seqlab", *args],
                                              stdout=subprocess.DEVNULL,
                                              stderr=err, env=environment))
    return processes


FAILING = """
import sys, time, torch
from seqlab.cli.main import fail
from seqlab.errors import SeqlabError
from seqlab.training import distributed
try:
    with distributed.joined(torch.device("cpu"), 30):
        for step in range(1000):
            if distributed.world()[0] == 1 and step == 5:
                raise SeqlabError("rank 1's own problem")
            distributed.all_reduce_sum([1.0], "cpu")
except SeqlabError as error:
    sys.exit(fail(str(error)))
"""


@pytest.mark.slow
def test_distributed_failed_process_ends_the_other_with_its_line(tmp_path):
    """Rank 1 fails by an error in the middle of the collectives: rank 0 ends at once (not --dist-timeout later),
    with rank 1's line as the reason, not gloo's "Connection closed by peer"."""
    script = tmp_path / "failing.py"
    script.write_text(FAILING, encoding="utf-8")
    ranks = seqlab_processes([], tmp_path, [sys.executable, str(script)])
    try:
        codes = [process.wait(timeout=60) for process in ranks]
    finally:
        for process in ranks:
            process.kill()
            process.wait()
    errs = [(tmp_path / f"rank{rank}.err").read_text() for rank in range(2)]
    assert codes == [2, 2], errs
    assert errs[1].strip() == "seqlab: error: rank 1's own problem"
    assert re.fullmatch(r"seqlab: error: rank 1 \(pid \d+ on \S+\) stopped: rank 1's own problem; ending rank 0 "
                        r"too \(the last checkpoint, if any, is intact: --resume continues from it\)\n",
                        errs[0]), errs[0]


OPTIONS = ["train", "lm", "--train", str(TRAIN), "--valid", str(VALID), "--tokenizer", "word", "--arch", "lstm",
           "--embedding-size", "8", "--hidden-size", "8", "--dropout", "0", "--batch-size", "4", "--seq-len", "8",
           "--log-every", "1", "--no-progress", "--threads", "1"]


@pytest.mark.slow          # a stopped process and a 2-process wait, 7 s (the watch tests below stay)
def test_distributed_stopped_process_ends_the_other_within_the_timeout_with_one_line(tmp_path):
    """SIGSTOP on rank 1 while both train: rank 0 ends --dist-timeout later (not 30 minutes of gloo's default),
    with one line naming rank 1 and exit status 2."""
    timeout = 3
    run = tmp_path / "run"
    ranks = seqlab_processes([*OPTIONS, "--max-steps", "100000", "--eval-every", "100000", "--dist-timeout",
                              str(timeout), "--output", str(run)], tmp_path)
    try:
        deadline = time.monotonic() + 60
        log = run / "train_log.jsonl"
        while not (log.exists() and len(log.read_text().splitlines()) >= 3):
            assert time.monotonic() < deadline and ranks[0].poll() is None, (tmp_path / "rank0.err").read_text()
            time.sleep(0.05)
        ranks[1].send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        code = ranks[0].wait(timeout=60)
        waited = time.monotonic() - stopped
    finally:
        for process in ranks:
            process.kill()
            process.wait()
    err = (tmp_path / "rank0.err").read_text()
    assert code == 2, err
    assert timeout - beat_interval(timeout) <= waited <= timeout + 3 * beat_interval(timeout) + 3, waited
    errors = [line for line in err.splitlines() if line.startswith("seqlab: error:")]
    assert len(errors) == 1 and err.rstrip().endswith(errors[0]), err
    assert re.fullmatch(r"seqlab: error: rank 1 \(pid \d+ on \S+\) did not answer within 3 s \(--dist-timeout\): "
                        r"stopped or hung, or its machine is unreachable; ending rank 0 too \(the last checkpoint, "
                        r"if any, is intact: --resume continues from it\)", errors[0]), errors[0]
    assert not TRACE.search(err), err


@pytest.mark.slow        # test_multinode's clean two-node run checks the same under torchrun (slow too)
def test_distributed_clean_two_process_run_ends_without_a_stack_trace(tmp_path):
    ranks = seqlab_processes([*OPTIONS, "--max-steps", "4", "--eval-every", "2", "--output", str(tmp_path / "run")],
                             tmp_path)
    try:
        codes = [process.wait(timeout=120) for process in ranks]
    finally:
        for process in ranks:
            process.kill()
            process.wait()
    errs = [(tmp_path / f"rank{rank}.err").read_text() for rank in range(2)]
    assert codes == [0, 0], errs
    assert (tmp_path / "run" / "model.safetensors").is_file()
    for err in errs:
        assert not TRACE.search(err) and "seqlab: error" not in err, err
