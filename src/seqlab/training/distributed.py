"""PyTorch DDP under torchrun: joining the process group, rank helpers and reductions (no-ops in one process), and
the watch that ends a job whose peer stopped answering (--dist-timeout).

A process that is stopped (SIGSTOP, a suspended machine), hung, or cut off from the others would leave them
waiting in their next collective for the backend's timeout (gloo's default is 30 minutes) and print nothing. So:

    every process     a thread adds 1 to  seqlab/<attempt>/beat/<rank>  in the job's store (the TCPStore that
                      torchrun serves at MASTER_ADDR:MASTER_PORT) every `beat` seconds and reads the others'
    a peer's counter unchanged for --dist-timeout s (a stopped process's threads are stopped too)
                   -> "rank R (pid P on HOST) did not answer within N s (--dist-timeout) ..." and exit status 2,
                      from that thread: the main thread may be blocked in a collective no Python code interrupts
    a peer that failed (an exception) sets its counter to FAILED with its one line
                   -> "rank R stopped: <its line>", exit status 2
    a collective that fails (a peer's connection closed; the process group's own timeout, --dist-timeout plus
    a grace, for a peer that beats but is stuck)  -> SeqlabError, one line (`joined` turns it into one)

The waits while rank 0 works alone (preparing the data, writing a checkpoint or the model card) are barriers on
the store, not collectives: they last as long as that work, however long, while every process beats. A clean end
is a barrier, the watch stopped, then each process's last store operation (rank 0 waits for them: without
torchrun, the store lives in its process), so that no process talks to a store that has gone (the C++ stack
traces of "recvValue failed")."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import sys
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from seqlab.errors import SeqlabError

DEFAULT_TIMEOUT = 180.0     # seconds: --dist-timeout's default
EXIT_STATUS = 2             # what the watch exits with: the command line's status for an error
DONE, FAILED = -1, -2       # a beat counter's values once its process has left (cleanly, or by an error)
LONG_WAIT = timedelta(hours=1)   # one store wait of a barrier; it waits again until the barrier opens


def world() -> tuple[int, int, int]:
    """(rank, world size, local rank) from torchrun's environment; (0, 1, 0) otherwise."""
    return (int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)),
            int(os.environ.get("LOCAL_RANK", 0)))


def beat_interval(timeout: float) -> float:
    """Seconds between heartbeats: five per --dist-timeout, at most 5 s."""
    return min(5.0, timeout / 5)


def grace(timeout: float) -> float:
    """Seconds the process group waits beyond --dist-timeout, so that the watch, which names the rank that went
    silent, speaks first; the group's own timeout is the backstop for a peer that beats but is stuck."""
    return 5.0 + 2 * beat_interval(timeout)


def first_line(error: BaseException) -> str:
    """The first line of an exception's text (PyTorch's C++ errors append a stack trace)."""
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__)[:300]


class Session:
    """This process's membership in the job: its store clients, the watch (two threads), the barrier count.

    A store operation blocks for as long as the store's process is stopped (PyTorch bounds only `wait` by the
    store's timeout), so the thread that beats is never the one that judges: the judge only reads the times the
    beater wrote down."""

    def __init__(self, rank: int, size: int, timeout: float):
        self.rank, self.size, self.timeout = rank, size, timeout
        self.address = f"{os.environ.get('MASTER_ADDR', '127.0.0.1')}:{os.environ.get('MASTER_PORT', '29500')}"
        self.prefix = f"seqlab/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
        self.store = self.connect()                # the main thread's; the beater has its own
        self.barriers = 0
        self.store.set(self.key("who", rank), f"pid {os.getpid()} on {socket.gethostname()}")
        self.store.wait([self.key("who", r) for r in range(size)])     # every rank is past init: at once
        self.names = {r: self.store.get(self.key("who", r)).decode() for r in range(size)}
        self.lock = threading.Lock()               # whoever takes it first (the judge, or a failing main thread)
        self.ending = False                        # reports the failure; the other stays quiet
        self.stopping = threading.Event()
        now = time.monotonic()
        self.answered = now                        # the beater's last exchange with the store (monotonic)
        self.seen = {r: (0, now) for r in range(size) if r != rank}    # peer -> (its counter, when it moved)
        self.failed: tuple[int, str] | None = None # a peer that ended by an error, and its line
        self.threads = [threading.Thread(target=target, name=f"seqlab-dist-{target.__name__}", daemon=True)
                        for target in (self.beat, self.judge)]
        for thread in self.threads:
            thread.start()

    def connect(self):
        host, port = self.address.rsplit(":", 1)
        return dist.TCPStore(host, int(port), None, False, timedelta(seconds=self.timeout))

    def key(self, kind: str, rank: int | str) -> str:
        return f"{self.prefix}/{kind}/{rank}"

    def name(self, rank: int) -> str:
        return f"rank {rank} ({self.names.get(rank, 'unknown process')})"

    # ------------------------------------------------------------------ the watch (two threads of its own)

    def beat(self) -> None:
        """Add 1 to this rank's counter and read the others', every `beat_interval`; note when each moved."""
        store = self.connect()
        while not self.stopping.wait(beat_interval(self.timeout)):
            try:
                store.add(self.key("beat", self.rank), 1)
                counters = {peer: store.add(self.key("beat", peer), 0) for peer in list(self.seen)}
                if FAILED in counters.values() and self.failed is None:
                    peer = next(p for p, value in counters.items() if value == FAILED)
                    self.failed = (peer, store.get(self.key("failed", peer)).decode())
            except RuntimeError:                  # DistNetworkError: the store has gone; the judge decides
                continue
            now = time.monotonic()
            self.answered = now
            for peer, value in counters.items():
                if value == DONE:
                    self.seen.pop(peer, None)
                elif value != self.seen[peer][0]:
                    self.seen[peer] = (value, now)

    def judge(self) -> None:
        """End the process when a peer failed, or went silent, or the store did, for --dist-timeout."""
        previous = time.monotonic()
        while not self.stopping.wait(beat_interval(self.timeout)):
            now = time.monotonic()
            if now - previous > self.timeout / 2:    # this process was stopped or starved itself: the silence
                self.seen = {peer: (value, now) for peer, (value, _) in self.seen.items()}   # is not the others'
                self.answered = now
            previous = now
            if self.failed is not None:
                self.fail(f"{self.name(self.failed[0])} stopped: {self.failed[1]}")
            elif now - self.answered > self.timeout:
                self.fail(f"the job's store at {self.address} (served by torchrun on the first node) did not answer "
                          f"within {self.timeout:g} s (--dist-timeout): that node is stopped or hung, or this machine "
                          "lost the network")
            elif self.silent():
                self.fail(self.silence())

    def silent(self, margin: float = 0.0) -> list[int]:
        """The peers whose counter has not moved for --dist-timeout (less `margin`)."""
        now = time.monotonic()
        return [peer for peer, (_, moved) in dict(self.seen).items() if now - moved > self.timeout - margin]

    def silence(self, margin: float = 0.0) -> str:
        ranks = ", ".join(self.name(peer) for peer in self.silent(margin))
        return (f"{ranks} did not answer within {self.timeout:g} s (--dist-timeout): stopped or hung, or its machine "
                "is unreachable")

    def fail(self, problem: str) -> None:
        """From the judge: one line on stderr and the end of this process (its main thread may be blocked in a
        collective that nothing interrupts); quiet when the main thread is already ending."""
        with self.lock:
            if self.ending or self.stopping.is_set():
                return
            self.ending = True
            with contextlib.suppress(Exception):
                sys.stdout.flush()
            message = (f"{problem}; ending rank {self.rank} too (the last checkpoint, if any, is intact: --resume "
                       "continues from it)")
            print(f"seqlab: error: {message}", file=sys.stderr, flush=True)
            os._exit(EXIT_STATUS)

    # ------------------------------------------------------------------ the main thread's side

    def barrier(self) -> None:
        """Wait on the store until every process has arrived, however long that takes (the judge ends the wait
        if one stops answering)."""
        self.barriers += 1
        key = self.key("barrier", self.barriers)
        if self.store.add(key, 1) == self.size:
            self.store.set(key + "/open", "1")
            return
        while True:
            try:
                self.store.wait([key + "/open"], LONG_WAIT)
                return
            except dist.DistStoreError:             # a wait longer than LONG_WAIT: wait again
                if self.store.check([key + "/open"]):
                    return

    def leave(self) -> None:
        """A clean end: the watch stopped, then each process's last store operations; rank 0 waits for the
        others' (the store may live in its process), at most --dist-timeout."""
        self.stop()

        def last():
            self.store.set(self.key("beat", self.rank), str(DONE))
            left = self.store.add(self.key("left", "all"), 1)
            deadline = time.monotonic() + self.timeout
            while self.rank == 0 and left < self.size and time.monotonic() < deadline:
                time.sleep(0.01)
                left = self.store.add(self.key("left", "all"), 0)
        bounded(last, self.timeout + 1)

    def abandon(self, message: str) -> None:
        """An end by an error: tell the others (their judge prints `message` as this rank's), unless the judge
        is ending the process already."""
        with self.lock:
            if self.ending:
                return
            self.ending = True
        self.stop()

        def tell():
            self.store.set(self.key("failed", self.rank), " ".join(message.split())[:500])
            self.store.set(self.key("beat", self.rank), str(FAILED))
        bounded(tell, beat_interval(self.timeout) * 2)

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            if thread is not threading.current_thread():
                thread.join(timeout=beat_interval(self.timeout) * 2)

    def explain(self, error: BaseException) -> str:
        """One line for a collective that failed. A peer that failed by an error said so in the store before its
        connections closed: asked there (for at most a beat: the store may be what failed)."""
        text = re.sub(r"^\[[^\]]*\] ", "", first_line(error)).split(". ")[0]    # gloo's "[file.cc:553] ..."
        if self.failed is None:
            def ask():
                for peer in list(self.seen):
                    if self.store.add(self.key("beat", peer), 0) == FAILED:
                        self.failed = (peer, self.store.get(self.key("failed", peer)).decode())
                        return
            bounded(ask, beat_interval(self.timeout))
        if self.failed is not None:
            return f"{self.name(self.failed[0])} stopped: {self.failed[1]}"
        if self.silent(margin=2 * beat_interval(self.timeout)):
            return self.silence(margin=2 * beat_interval(self.timeout))
        lower = text.lower()
        if "closed" in lower or "reset" in lower or "broken pipe" in lower:
            return (f"the connection to another process closed ({text}): it ended or its machine went down; its "
                    "own log says why")
        if "timed out" in lower or "timeout" in lower:
            return (f"a collective operation got no answer within {self.timeout + grace(self.timeout):g} s "
                    f"(--dist-timeout {self.timeout:g} plus a grace) while every process still answered: one of "
                    f"them is stuck ({text})")
        return f"a collective operation failed: {text}"


def bounded(work, seconds: float) -> bool:
    """Run `work` (store operations) in a thread of its own and wait for it at most `seconds`: a store that has
    stopped answering blocks an operation for ever. Whether it finished (its errors are swallowed)."""
    def run():
        with contextlib.suppress(RuntimeError):
            work()
    thread = threading.Thread(target=run, name="seqlab-dist-store", daemon=True)
    thread.start()
    thread.join(seconds)
    return not thread.is_alive()


_session: Session | None = None


def setup(device: torch.device, timeout: float = DEFAULT_TIMEOUT) -> None:
    """Join the process group (under torchrun, when there are several processes) and start the watch."""
    global _session
    rank, size, _ = world()
    if size == 1 or dist.is_initialized():
        return
    limit = timeout + grace(timeout)
    try:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=rank, world_size=size,
                                timeout=timedelta(seconds=limit))
        _session = Session(rank, size, timeout)
    except RuntimeError as error:            # DistStoreError, DistNetworkError: a peer or the store never came
        if dist.is_initialized():
            dist.destroy_process_group()
        reason = first_line(error).rstrip(".")
        raise SeqlabError(f"rank {rank} could not join the other {size - 1} process(es) within {limit:g} s "
                          f"(--dist-timeout {timeout:g} plus a grace): {reason}; every node must start the same "
                          "torchrun command (the same --rdzv-endpoint and --rdzv-id), and every process must get "
                          "this far (see the other nodes' logs)") from None


def teardown(error: BaseException | None = None, problem: str = "") -> None:
    """Leave the job. Cleanly (`error` None): together, after a barrier, so that no process closes its
    connections while another still writes its last files (gloo would abort that one at exit) or still talks
    to the store. By an error: at once, telling the others why (`problem`, else the error's first line: their
    watch prints it)."""
    if _session is None:
        return
    if error is None:
        _session.barrier()
    else:
        _session.abandon(problem or (str(error) if isinstance(error, SeqlabError) else
                                     f"{type(error).__name__}: {first_line(error)}"))
    _leave(clean=error is None)


def _leave(clean: bool) -> None:
    """The session's end: the last store operations (`Session.leave`, when clean), then the process group's."""
    global _session
    session, _session = _session, None
    if session is not None and clean:
        session.leave()
    with contextlib.suppress(RuntimeError):
        dist.destroy_process_group()


def collective_failure(error: BaseException) -> bool:
    """Whether `error` is a collective's or the store's failure (a peer gone, a timeout), not seqlab's own."""
    if isinstance(error, dist.DistError):
        return True
    text = str(error)
    return isinstance(error, RuntimeError) and any(mark in text for mark in ("gloo", "NCCL", "c10d", "TCPStore"))


@contextlib.contextmanager
def joined(device: torch.device, timeout: float = DEFAULT_TIMEOUT):
    """`setup`, the work, `teardown`; a collective's failure (or the store's) leaves as a SeqlabError of one
    line, which the other processes' watch repeats as this rank's."""
    setup(device, timeout)
    try:
        yield
        if _session is not None:
            _session.barrier()               # leave together (teardown's clean path, here so that it is explained)
    except BaseException as error:
        session = _session
        if session is None or not collective_failure(error):
            teardown(error)
            raise
        problem = session.explain(error)
        teardown(error, problem)
        raise SeqlabError(f"{problem}; ending rank {session.rank} too (the last checkpoint, if any, is intact: "
                          "--resume continues from it)") from None
    if _session is not None:
        _leave(clean=True)


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def all_reduce_sum(values: list[float], device) -> list[float]:
    if not is_distributed():
        return values
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return t.tolist()


def barrier() -> None:
    """Every process waits here for the others: on the store while seqlab's session runs (as long as the slowest
    one's work, see the module's docstring), else the backend's barrier."""
    if _session is not None:
        _session.barrier()
    elif is_distributed():
        dist.barrier()


def gather_rows(t: torch.Tensor, dim: int) -> torch.Tensor:
    """Concatenate every rank's rows along `dim`, in rank order (equal shapes required)."""
    if not is_distributed():
        return t
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, t.contiguous())
    return torch.cat(parts, dim=dim)


def gather_objects(obj) -> list:
    if not is_distributed():
        return [obj]
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def broadcast_object(obj):
    """Rank 0's `obj` on every process (itself in one process)."""
    if not is_distributed():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def broadcast_module(module: torch.nn.Module) -> None:
    """Every parameter and buffer of rank 0's `module` copied into the others' (in place), so that what rank 0
    loaded from its disk holds everywhere, whether or not the nodes share that disk."""
    if not is_distributed():
        return
    for tensor in module.state_dict().values():
        dist.broadcast(tensor, src=0)
