"""Dynamic batching: the texts of concurrent requests to one model are gathered into one forward pass.

A request hands its texts to the model's `Batcher` under a key (the model, the endpoint and the options
that must agree, such as the beam) and awaits its own results. One worker per key takes the requests
waiting, up to `max_batch` texts, and runs them in one call on the server's inference thread; each request
gets back its own slice of the outputs, in order. While the batch is not full it waits at most `max_wait`
seconds for more to arrive, but only when the model's previous batch held several requests: a lone client's
request runs at once (waiting for company that never comes halved its throughput), and under load the queue
fills while a batch runs, so the wait costs little. When a batch fails (one request's text is refused, say), each of its
requests is run alone, so that only the bad one gets the error.

A batch still running after `long_after` seconds is a long one (64 texts of 20,000 characters to score): it yields
to other work at each of its slices or steps (`seqlab.serve.scheduler`), so the key's next batch starts beside it
instead of waiting for it, and a short request to the same model waits a slice, not the whole long batch. One long
batch per key runs beside the others: a second long one is awaited before the next batch starts.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict, deque
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from seqlab.serve.scheduler import CURRENT, Cancelled, Jobs, current_job

Key: TypeAlias = "tuple[Any, ...]"    # (model, endpoint, options that must agree), hashable: what a batch is under


@dataclass
class Job:
    items: list
    future: asyncio.Future = field(repr=False)
    request: object = None             # the request's `scheduler.Job`: a batch stops when all of its requests have


class Batcher:
    """`work(key, items) -> outputs` (one output per item) run on gathered batches in `executor` (the
    server's inference thread); `observe(key, n)` is told each batch's size (for /metrics)."""

    def __init__(self, work: Callable[[Key, list], list], max_batch: int, max_wait: float, executor: Executor,
                 observe: Callable[[Key, int], None] | None = None, long_after: float = 0.1):
        self.work, self.max_batch, self.max_wait, self.observe = work, max_batch, max_wait, observe
        self.executor, self.long_after = executor, long_after
        self.queues: dict[Key, deque[Job]] = defaultdict(deque)
        self.workers: dict[Key, asyncio.Task] = {}
        self.company: dict[Key, bool] = {}                          # did the key's last batch hold several jobs?
        self.long: dict[Key, asyncio.Future] = {}                   # the key's long batch running beside the next

    async def submit(self, key: Key, items: list) -> list:
        """The outputs of `items`, computed in a batch with whatever else is waiting under `key`."""
        request = current_job()
        job = Job(list(items), asyncio.get_running_loop().create_future(), request)
        self.queues[key].append(job)
        if key not in self.workers or self.workers[key].done():
            self.workers[key] = asyncio.create_task(self.drain(key))
        if request is None:
            return await job.future
        return await request.wait(job.future)

    async def drain(self, key: Key) -> None:
        queue = self.queues[key]
        while queue:
            if self.max_wait > 0 and self.company.get(key) and sum(len(job.items) for job in queue) < self.max_batch:
                await asyncio.sleep(self.max_wait)                   # let the batch fill, a little
            jobs, count = [], 0
            while queue and (not jobs or count + len(queue[0].items) <= self.max_batch):
                job = queue.popleft()
                if job.future.done():                                    # its request has gone or timed out
                    continue
                jobs.append(job)
                count += len(job.items)
            if not jobs:
                continue
            self.company[key] = len(jobs) > 1
            running = asyncio.ensure_future(self.run(key, jobs))
            await asyncio.wait({running}, timeout=self.long_after)
            if running.done():
                running.result()
                continue
            beside = self.long.get(key)                          # a long batch: the next starts beside it,
            if beside is not None and not beside.done():         # unless another long one runs already
                await running
            else:
                self.long[key] = running

    async def run(self, key: Key, jobs: list[Job]) -> None:
        items = [item for job in jobs for item in job.items]
        if self.observe is not None:
            self.observe(key, len(items))
        CURRENT.set(Jobs([job.request for job in jobs]) if all(job.request for job in jobs) else None)
        try:
            outputs = await asyncio.get_running_loop().run_in_executor(self.executor, self.work, key, items)
        except Exception as error:                                   # noqa: BLE001 - handed to each request
            if len(jobs) == 1:
                settle(jobs[0], error=error)
                return
            if isinstance(error, Cancelled):                         # every request of the batch has stopped
                for job in jobs:
                    settle(job, error=error)
                return
            for job in jobs:                                         # find the request that failed
                await self.run(key, [job])
            return
        start = 0
        for job in jobs:
            settle(job, outputs[start:start + len(job.items)])
            start += len(job.items)


def settle(job: Job, outputs: list | None = None, error: BaseException | None = None) -> None:
    if job.future.done():                                            # its client went away
        return
    if error is not None:
        job.future.set_exception(error)
    else:
        job.future.set_result(outputs)
