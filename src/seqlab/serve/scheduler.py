"""The server's one inference thread, shared fairly: no request can hold it, and no request runs for a client
that has gone or past its deadline.

PyTorch is called from one thread only (from the many threads of a pool, each grew its own memory), so every
model call of the server is a work item run on that thread (`Scheduler`, a `concurrent.futures.Executor`: the
event loop hands it work with `run_in_executor`, the dynamic batcher too). Work is queued per model and taken
in turn, one item of each model's queue per round, so a busy model does not starve the others.

An item may be long (a beam search of 1,000 steps over 4 sources; the scores of 64 texts of 20,000 characters),
so it yields: the searches call `seqlab.decoding.core.checkpoint()` once per step, and the work that is one pass
over its inputs (scoring, tagging, classifying, reading long prompts or sources) is cut by `core.slices` into
slices of about --slice-ms each (a window of time steps, a few texts: what a slice is, is the family's), with a
checkpoint before each. The scheduler answers a checkpoint by

- raising `Cancelled` when every request the item serves has gone (its client disconnected) or is past its
  deadline (`--request-timeout`): the work stops there, and its memory is freed;
- running the items waiting, one of each queue (its own model's too), so that a classification, or a short
  translation by the same model, waits one decoding step or one slice, not the whole work. An item run there
  yields in turn, down to NESTING items deep, so that a few long requests at once still let the short ones
  through.

Each HTTP request under /v1 is a `Job` (`Watch`, an ASGI middleware, makes it and watches its connection): its
model (`Job.key`, set when the route finds the model), its deadline, and whether its client has gone. An item
serves the job of the request that submitted it (a context variable, read when the item is submitted), or a
`Jobs` of the requests whose texts the batcher gathered.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import Executor, Future

from seqlab.decoding import core

NESTING = 4      # items one inside another's checkpoint that still let others run: 3 long requests at once yield


class Cancelled(Exception):
    """The work's requests have all gone (`reason` "disconnected") or are past their deadline ("deadline")."""

    def __init__(self, reason: str, timeout: float | None = None):
        super().__init__(reason)
        self.reason, self.timeout = reason, timeout


class Job:
    """One request: the model it asks (`key`, for fairness), its deadline (time.monotonic(), or None) and why it
    ended early (None while it may run). `ended` is set, on the event loop, when it is cancelled."""

    def __init__(self, timeout: float | None = None):
        self.key: str = ""
        self.timeout = timeout
        self.deadline = None if not timeout else time.monotonic() + timeout
        self.reason: str | None = None
        self.ended = asyncio.Event()

    def cancel(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        self.ended.set()

    def stopped(self) -> str | None:
        """Why work for this request should stop now (checked from the inference thread), or None."""
        if self.reason is None and self.deadline is not None and time.monotonic() > self.deadline:
            return "deadline"
        return self.reason

    async def wait(self, future: asyncio.Future):
        """The result of `future` (the request's work), unless the request ends first (its client goes, its
        deadline passes): then `Cancelled`, and the work, if it has not started, never runs."""
        remaining = None if self.deadline is None else max(0.0, self.deadline - time.monotonic())
        ended = asyncio.ensure_future(self.ended.wait())
        try:
            done, _ = await asyncio.wait({future, ended}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ended.cancel()
        if future in done:
            return future.result()
        if self.reason is None:
            self.reason = "deadline"
        future.cancel()
        raise Cancelled(self.reason, self.timeout)


class Jobs:
    """The requests a batch serves: it stops when all of them have stopped."""

    def __init__(self, jobs: list[Job]):
        self.jobs = jobs
        self.key = jobs[0].key if jobs else ""
        self.timeout = max((job.timeout or 0 for job in jobs), default=0) or None

    def stopped(self) -> str | None:
        reasons = [job.stopped() for job in self.jobs]
        return reasons[0] if reasons and all(reasons) else None


CURRENT: contextvars.ContextVar[Job | Jobs | None] = contextvars.ContextVar("seqlab_job", default=None)


def current_job() -> Job | None:
    job = CURRENT.get()
    return job if isinstance(job, Job) else None


class Item:
    def __init__(self, future: Future, call: Callable, job):
        self.future, self.call, self.job = future, call, job


class Scheduler(Executor):
    """One thread running the work items, a queue per model taken in turn (see the module's docstring)."""

    def __init__(self, name: str = "seqlab-inference", read_threads: int = 0, slice_seconds: float = 0.0):
        self.read_threads = read_threads            # the CPU threads reading a batch's prompts (0: as the rest)
        self.slice_seconds = slice_seconds          # how long a slice of long work lasts (`core.slices`; 0: unsliced)
        self.queues: OrderedDict[str, deque[Item]] = OrderedDict()
        self.lock = threading.Condition()
        self.closed = False
        self.local = threading.local()              # depth: 0 outside items, 1 in an item, 2 in a nested one, ...
        self.stopped: Counter = Counter()           # work stopped, by reason ("disconnected", "deadline")
        self.thread = threading.Thread(target=self.loop, name=name, daemon=True)
        self.thread.start()

    # ---- the event loop's side

    def submit(self, fn: Callable, /, *args, **kwargs) -> Future:
        future: Future = Future()
        job = CURRENT.get()
        item = Item(future, lambda: fn(*args, **kwargs), job)
        with self.lock:
            if self.closed:
                raise RuntimeError("the scheduler is shut down")
            self.queues.setdefault(getattr(job, "key", "") or "", deque()).append(item)
            self.lock.notify()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self.lock:
            self.closed = True
            self.lock.notify()
        if wait and threading.current_thread() is not self.thread:
            self.thread.join(timeout=30)

    # ---- the inference thread's side

    def take(self) -> Item | None:
        """The next item, the queues taken in turn (the queue taken goes to the back). Called with the lock
        held."""
        for key in list(self.queues):
            queue = self.queues[key]
            if not queue:
                continue
            item = queue.popleft()
            self.queues.move_to_end(key)
            if not queue:
                del self.queues[key]
            return item
        return None

    def loop(self) -> None:
        core.set_checkpoint(self.checkpoint)
        core.set_read_threads(self.read_threads)
        core.set_slice_seconds(self.slice_seconds)
        self.local.depth = 0
        while True:
            with self.lock:
                item = self.take()
                while item is None and not self.closed:
                    self.lock.wait()
                    item = self.take()
                if item is None:
                    return
            self.run(item)

    def run(self, item: Item) -> None:
        if not item.future.set_running_or_notify_cancel():
            return
        reason = item.job.stopped() if item.job is not None else None
        if reason is not None:                                 # gone, or late, before it started
            self.stopped[reason] += 1
            item.future.set_exception(Cancelled(reason, item.job.timeout))
            return
        outer = getattr(self.local, "item", None)
        self.local.item = item
        self.local.depth += 1
        try:
            result = item.call()
        except BaseException as error:                         # noqa: BLE001 - handed to the request
            if isinstance(error, Cancelled):
                self.stopped[error.reason] += 1
            item.future.set_exception(error)
        else:
            item.future.set_result(result)
        finally:
            self.local.depth -= 1
            self.local.item = outer

    def checkpoint(self) -> None:
        """Called by the searches once per step, and by sliced work once per slice, on this thread: stop a
        cancelled item; let the waiting items run, one of each queue, its own model's included (from an item
        run inside another's checkpoint too, down to NESTING items deep)."""
        item = getattr(self.local, "item", None)
        if item is None:
            return
        if item.job is not None:
            reason = item.job.stopped()
            if reason is not None:
                raise Cancelled(reason, item.job.timeout)
        if self.local.depth >= NESTING or not self.queues:
            return
        with self.lock:
            turn = []
            for _ in range(len(self.queues)):
                other = self.take()
                if other is None:
                    break
                turn.append(other)
        for other in turn:
            self.run(other)


class Watch:
    """ASGI middleware: each /v1 request becomes a `Job` (the current one while its route runs), with its deadline
    (`timeout` seconds, 0: none), cancelled when its client disconnects: the connection is watched once the body
    has been read."""

    def __init__(self, app, timeout: float = 0.0):
        self.app, self.timeout = app, timeout

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not scope.get("path", "").startswith("/v1/"):
            return await self.app(scope, receive, send)
        job = Job(self.timeout or None)
        token = CURRENT.set(job)
        gone = asyncio.Event()
        watcher: asyncio.Task | None = None

        async def watch() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    job.cancel("disconnected")
                    gone.set()
                    return

        async def receiving():
            nonlocal watcher
            if watcher is not None:                             # the body is read: wait with the watcher
                await gone.wait()
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.disconnect":
                job.cancel("disconnected")
                gone.set()
            elif not message.get("more_body", False):
                watcher = asyncio.ensure_future(watch())
            return message

        try:
            await self.app(scope, receiving, send)
        finally:
            if watcher is not None:
                watcher.cancel()
            CURRENT.reset(token)
