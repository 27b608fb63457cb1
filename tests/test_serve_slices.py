"""Long work that is one pass over its inputs (scoring, tagging, classifying) runs on the server's inference thread
in bounded slices (`seqlab.decoding.core.slices`): between two slices the other requests' work runs, and the work
stops at its deadline or when its client goes. The slices give the figures of the unsliced pass. Real sockets
against a real server."""

from __future__ import annotations

import asyncio
import gc
import json
import socket
import threading
import time

import httpx
import pytest

import seqlab
from conftest import serving
from seqlab.decoding import core
from seqlab.serve.app import create_app
from seqlab.serve.limits import ServeLimits
from seqlab.serve.scheduler import CURRENT, Job, Scheduler


@pytest.fixture
def sliced():
    """This thread's long work cut into the smallest slices, as a server's inference thread would cut it."""
    core.set_slice_seconds(1e-9, first=1)
    yield
    core.set_slice_seconds(0)


def test_core_slices_are_one_run_outside_a_server():
    assert list(core.slices([5, 5, 5], "work")) == [range(3)]
    assert list(core.slices([], "work")) == []


def test_core_slices_cover_the_work_in_order_at_the_measured_pace():
    stops = []
    core.set_checkpoint(lambda: stops.append(None))
    core.set_slice_seconds(0.01)
    try:
        runs = []
        for part in core.slices([1] * 2000, "sleep"):
            runs.append(part)
            time.sleep(0.0001 * len(part))                  # 0.1 ms a unit: 100 units a slice
    finally:
        core.set_checkpoint(None)
        core.set_slice_seconds(0)
    assert [i for part in runs for i in part] == list(range(2000))
    assert len(stops) == len(runs)                          # a checkpoint before each slice
    assert runs[0] == range(core.FIRST_SLICE)               # the pace not known yet
    later = [len(part) for part in runs[2:-1]]
    assert 20 <= sorted(later)[len(later) // 2] <= 200      # then about 10 ms a slice (100 units; sleeps run long)


def test_core_slices_hold_at_least_the_least_items_and_no_short_tail(sliced):
    runs = list(core.slices([10] * 7, "least", least=3))
    assert runs == [range(0, 3), range(3, 7)]
    assert core.least_items(4) == 4 and core.least_items(16) == 1 and core.least_items(100) == 1


@pytest.fixture(scope="module")
def runs(serve_runs):
    return serve_runs


def test_serve_slices_tag_and_classify_as_the_unsliced_pass(runs, sliced):
    tagger, classifier = seqlab.load(runs["ner"]), seqlab.load(runs["sentiment"])
    sentences = [("John lives in Paris . " * k).split() for k in (1, 7, 3, 12, 2, 5)]
    core.set_slice_seconds(0)
    whole = tagger.tag_sentences(sentences)
    texts = [" ".join(s) + " a warm film" for s in sentences]
    labels = classifier.classify(texts)
    core.set_slice_seconds(1e-9, first=1)
    cut = tagger.tag_sentences(sentences)
    assert [[t for t, _ in row] for row in cut] == [[t for t, _ in row] for row in whole]
    assert [p for row in cut for _, p in row] == pytest.approx([p for row in whole for _, p in row], abs=1e-5)
    again = classifier.classify(texts)
    assert [p.label for p in again] == [p.label for p in labels]
    assert [p.probability for p in again] == pytest.approx([p.probability for p in labels], abs=1e-5)


def test_scheduler_long_items_nested_in_each_other_still_yield():
    """Two long items at once (the second run inside the first's checkpoint): short work waits a step, not the
    second long item."""
    scheduler = Scheduler()

    def long_work(n: int) -> int:
        for _ in range(n):
            core.checkpoint()
            time.sleep(0.002)
        return n

    futures = []
    for key in ("lm", "tagger"):
        job = Job()
        job.key = key
        token = CURRENT.set(job)
        futures.append(scheduler.submit(long_work, 300))            # ~0.6 s each
        CURRENT.reset(token)
        time.sleep(0.05)
    quick = Job()
    quick.key = "classifier"
    token = CURRENT.set(quick)
    start = time.perf_counter()
    fast = scheduler.submit(time.perf_counter)
    CURRENT.reset(token)
    assert fast.result(timeout=10) - start < 0.1
    assert not futures[0].done() and not futures[1].done()
    assert [f.result(timeout=10) for f in futures] == [300, 300]
    scheduler.shutdown()


TIMEOUT = 2.0
LIMITS = ServeLimits(request_timeout=TIMEOUT, max_chars=10_000)


@pytest.fixture(scope="module")
def server(runs):
    """The app on a real server, what is loaded moved out of the collector's sight as `seqlab serve` does
    (`seqlab.serve.server.serve`): without it a full collection pauses every thread for a few hundred ms."""
    app = create_app(list(runs.values()), LIMITS)
    gc.collect()
    gc.freeze()
    server, url = serving(app)
    yield app, url
    server.should_exit = True
    gc.unfreeze()


def worst_score() -> dict:
    """The largest /v1/score request the server takes: 64 texts of 10,000 characters, ~1,250 windows each of the
    character transformer (context 16)."""
    return {"model": "lm", "text": [("the king " * 1200)[:LIMITS.max_chars]] * LIMITS.max_items}


def worst_tag() -> dict:
    """The largest /v1/tag request: 64 sentences of 5,000 tokens, through the BiLSTM and the CRF."""
    return {"model": "ner", "text": [("a " * 5000)[:LIMITS.max_chars]] * LIMITS.max_items}


SMALL = [("/v1/classify", {"model": "sentiment", "text": "a warm film"}),
         ("/v1/score", {"model": "lm", "text": "To be"}),                       # the long score's own model
         ("/v1/tag", {"model": "ner", "text": "John lives in Paris ."})]        # the long tag's own model


def stopped_soon(app, reason: str, before: int, count: int = 1, within: float = 1.0) -> float:
    """Seconds until the scheduler has stopped `count` more items for `reason` (at most `within`)."""
    start = time.perf_counter()
    while app.state.scheduler.stopped[reason] < before + count and time.perf_counter() - start < within:
        time.sleep(0.005)
    assert app.state.scheduler.stopped[reason] == before + count
    return time.perf_counter() - start


def test_serve_worst_score_and_tag_let_small_requests_through_and_stop_at_their_deadline(server):
    app, url = server
    stopped = app.state.scheduler.stopped["deadline"]
    results = {}

    def big(path: str, body: dict) -> None:
        start = time.perf_counter()
        answer = httpx.post(f"{url}{path}", json=body, timeout=30)
        results[path] = (answer, time.perf_counter() - start)

    threads = [threading.Thread(target=big, args=args) for args in
               (("/v1/score", worst_score()), ("/v1/tag", worst_tag()))]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    time.sleep(0.3)                                              # both have started
    latencies = []
    with httpx.Client(base_url=url, timeout=30) as client:
        while time.perf_counter() - began < TIMEOUT - 0.5:       # while both run
            path, body = SMALL[len(latencies) % len(SMALL)]
            start = time.perf_counter()
            answer = client.post(path, json=body)
            latencies.append(time.perf_counter() - start)
            assert answer.status_code == 200, answer.text
    running = [thread.is_alive() for thread in threads]
    for thread in threads:
        thread.join()
    assert all(running) and len(latencies) >= 3                 # answered beside the long ones
    assert max(latencies) < 0.75, latencies                      # a few slices, not the whole 2 s
    for path, (answer, seconds) in results.items():
        assert answer.status_code == 504, (path, answer.text)
        assert f"limit of {TIMEOUT:g} s" in answer.json()["error"]
        assert seconds < TIMEOUT + 1.0
    stopped_soon(app, "deadline", stopped, count=2)              # and their work stopped at the next slice


def test_serve_a_client_that_closes_frees_the_worker_within_a_slice(server):
    app, url = server
    stopped = app.state.scheduler.stopped["disconnected"]
    body = json.dumps(worst_score()).encode()
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as connection:
        connection.sendall(b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                           b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        time.sleep(0.4)                                          # the scoring runs
        assert app.state.scheduler.stopped["disconnected"] == stopped
    freed = stopped_soon(app, "disconnected", stopped)           # from the close
    assert freed < 0.5, freed                                    # well before the 2 s deadline
    start = time.perf_counter()
    answer = httpx.post(f"{url}/v1/score", json=SMALL[1][1], timeout=30)
    assert answer.status_code == 200 and time.perf_counter() - start < 0.5


def test_serve_sliced_scores_are_the_python_apis(server, runs):
    """What the server answers when its work was cut into slices: the Python API's unsliced figures, exactly."""
    app, url = server
    lm = seqlab.load(runs["lm"])
    texts = ["To be, or not to be", "the king " * 2, "x", "ROMEO:\nO"]          # within the context, together
    texts += [("the king " * 30)[:200]]                                           # past it: windows
    async def main():
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            return await asyncio.gather(*(client.post("/v1/score", json={"model": "lm", "text": texts})
                                          for _ in range(3)))
    for answer in asyncio.run(main()):
        assert answer.status_code == 200
        for text, result in zip(texts, answer.json()["results"], strict=True):
            assert [(t["token"], t["logprob"]) for t in result["tokens"]] == [tuple(p) for p in lm.score(text)]
