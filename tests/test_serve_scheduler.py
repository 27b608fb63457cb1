"""The server's inference thread shared fairly (`seqlab.serve.scheduler`): a long decoding yields to other models'
requests at every step, stops when its deadline passes (504) or its client disconnects, and batched generation
across requests answers what each request gets alone. Real sockets against a real server."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from concurrent.futures import wait

import httpx
import pytest

import seqlab
from conftest import serving
from seqlab.decoding import core
from seqlab.serve.app import create_app
from seqlab.serve.limits import ServeLimits
from seqlab.serve.scheduler import CURRENT, Cancelled, Job, Scheduler


def steps(n: int, seconds: float, done: list) -> int:
    """A decoding stand-in: n steps of `seconds`, each after a checkpoint."""
    for i in range(n):
        core.checkpoint()
        time.sleep(seconds)
        done.append(i)
    return n


def test_a_long_item_lets_other_queues_run_at_each_step():
    scheduler = Scheduler()
    done: list = []
    long = Job()
    long.key = "translator"
    token = CURRENT.set(long)
    slow = scheduler.submit(steps, 400, 0.002, done)            # ~0.8 s
    CURRENT.reset(token)
    time.sleep(0.05)
    quick = Job()
    quick.key = "classifier"
    token = CURRENT.set(quick)
    start = time.perf_counter()
    fast = [scheduler.submit(time.perf_counter) for _ in range(5)]
    CURRENT.reset(token)
    wait(fast)
    assert max(f.result() for f in fast) - start < 0.1          # each waited a step or so, not the whole decoding
    assert not slow.done()
    assert slow.result(timeout=10) == 400
    scheduler.shutdown()


def test_a_long_item_lets_its_own_models_short_items_run_too():
    scheduler = Scheduler()
    job = Job()
    job.key = "translator"
    token = CURRENT.set(job)
    slow = scheduler.submit(steps, 300, 0.002, [])              # ~0.6 s
    time.sleep(0.05)
    start = time.perf_counter()
    fast = scheduler.submit(time.perf_counter)                  # the same model's queue
    CURRENT.reset(token)
    assert fast.result(timeout=10) - start < 0.1 and not slow.done()
    assert slow.result(timeout=10) == 300
    scheduler.shutdown()


def test_work_past_its_deadline_stops_at_the_next_step():
    scheduler = Scheduler()
    done: list = []

    async def main():
        job = Job(timeout=0.1)
        CURRENT.set(job)
        future = asyncio.get_running_loop().run_in_executor(scheduler, steps, 10_000, 0.001, done)
        with pytest.raises(Cancelled) as stopped:
            await job.wait(future)
        return stopped.value.reason

    assert asyncio.run(main()) == "deadline"
    time.sleep(0.1)
    assert len(done) < 1000 and scheduler.stopped["deadline"] == 1
    scheduler.shutdown()


@pytest.fixture(scope="module")
def runs(serve_runs):
    return serve_runs


def slowed(app, name: str, seconds: float):
    """Make the model `name` take `seconds` per decoding step (its `step`), for a long decoding on a tiny model."""
    model = app.state.models[name].trained.model
    step = model.step

    def slow(*args, **kwargs):
        time.sleep(seconds)
        return step(*args, **kwargs)

    model.step = slow


@pytest.fixture(scope="module")
def server(runs):
    app = create_app(list(runs.values()), ServeLimits(request_timeout=1.5))
    slowed(app, "de-en", 0.005)
    server, url = serving(app)
    yield app, url
    server.should_exit = True


def long_translation() -> dict:
    return {"model": "de-en", "text": ["ein mann", "eine frau", "ein hund", "ein kind"], "beam": 4,
            "max_length": 1000}


def test_a_long_translation_does_not_starve_the_classifier_and_stops_at_its_deadline(server):
    app, url = server
    stopped = app.state.scheduler.stopped["deadline"]
    result = {}

    def translate():
        start = time.perf_counter()
        result["answer"] = httpx.post(f"{url}/v1/translate", json=long_translation(), timeout=30)
        result["seconds"] = time.perf_counter() - start

    thread = threading.Thread(target=translate)
    thread.start()
    time.sleep(0.2)
    latencies = []
    with httpx.Client(base_url=url, timeout=30) as client:
        for _ in range(20):
            start = time.perf_counter()
            answer = client.post("/v1/classify", json={"model": "sentiment", "text": "a warm film"})
            latencies.append(time.perf_counter() - start)
            assert answer.status_code == 200
    thread.join()
    assert max(latencies) < 0.25, latencies
    answer = result["answer"]
    assert answer.status_code == 504 and "limit of 1.5 s" in answer.json()["error"]
    assert result["seconds"] < 3
    deadline = time.time() + 1.0                                 # the decoding stops at its next step
    while app.state.scheduler.stopped["deadline"] == stopped and time.time() < deadline:
        time.sleep(0.02)
    assert app.state.scheduler.stopped["deadline"] == stopped + 1


def test_a_client_that_disconnects_stops_its_decoding(server):
    app, url = server
    stopped = app.state.scheduler.stopped["disconnected"]
    body = json.dumps(long_translation()).encode()
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as connection:
        connection.sendall(b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                           b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        time.sleep(0.3)                                          # the decoding runs
    deadline = time.time() + 1.0                                 # well before the 1.5 s deadline
    while app.state.scheduler.stopped["disconnected"] == stopped and time.time() < deadline:
        time.sleep(0.02)
    assert app.state.scheduler.stopped["disconnected"] == stopped + 1


def test_a_streaming_client_that_disconnects_leaves_no_traceback_in_the_log(server, caplog, request):
    """A stream whose client goes away mid-generation: the work stops at its next step, and the `Cancelled` it
    ends with is read, not left for asyncio to log as "Future exception was never retrieved" with a traceback."""
    import gc

    app, url = server
    model = app.state.models["lm"].trained.model
    slowed(app, "lm", 0.005)
    request.addfinalizer(lambda: vars(model).pop("step"))           # the module's other tests: at full speed
    stopped = app.state.scheduler.stopped["disconnected"]
    body = json.dumps({"model": "lm", "prompt": "ROMEO:", "max_tokens": 1000, "stream": True}).encode()
    host, port = url.removeprefix("http://").split(":")
    with caplog.at_level("ERROR", logger="asyncio"):
        with socket.create_connection((host, int(port))) as connection:
            connection.sendall(b"POST /v1/generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                               b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            assert b"200 OK" in connection.recv(4096)               # the stream has begun
            time.sleep(0.1)
        deadline = time.time() + 1.0                                  # well before the 1.5 s deadline
        while app.state.scheduler.stopped["disconnected"] == stopped and time.time() < deadline:
            time.sleep(0.02)
        assert app.state.scheduler.stopped["disconnected"] > stopped    # its step, and any waiting behind it
        time.sleep(0.1)
        gc.collect()                                                  # an unread future logs when collected
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()], caplog.text


def test_concurrent_generate_requests_are_batched_and_answer_as_alone(server, runs):
    app, url = server
    lm = seqlab.load(runs["lm"])
    prompts = ["ROMEO:", "", "JULIET: O", "a", "First\nBe", "KING"]     # context 16: some rows slide, alone
    requests = [{"model": "lm", "prompt": p, "max_tokens": 6, **({"seed": i} if i % 2 else {"greedy": True})}
                for i, p in enumerate(prompts * 3)]

    async def main():
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            return await asyncio.gather(*(client.post("/v1/generate", json=r) for r in requests))

    answers = asyncio.run(main())
    for request, answer in zip(requests, answers, strict=True):
        assert answer.status_code == 200, answer.text
        options = {k: v for k, v in request.items() if k not in ("model", "prompt")}
        assert answer.json()["text"] == lm.generate(request["prompt"], **options)
    sizes = app.state.metrics.batches["/v1/generate"]
    assert sizes.count < len(requests)                           # gathered: fewer forward passes than requests
