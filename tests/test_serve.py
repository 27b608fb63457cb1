"""`seqlab serve`: every endpoint answers as the Python API does, and every bad request gets a 4xx with one
line while the server goes on (the app in-process, through FastAPI's test client)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

import seqlab  # noqa: E402
from conftest import serving  # noqa: E402
from seqlab.cli.main import main  # noqa: E402
from seqlab.errors import SeqlabError  # noqa: E402
from seqlab.serve.app import create_app, load_runs  # noqa: E402
from seqlab.serve.limits import ServeLimits  # noqa: E402


@pytest.fixture(scope="module")
def runs(serve_runs) -> dict[str, Path]:
    """One tiny run of each task family (the session's, `conftest.serve_runs`)."""
    return serve_runs


@pytest.fixture(scope="module")
def client(runs) -> TestClient:
    app = create_app(list(runs.values()), ServeLimits(max_body_bytes=4096, max_chars=200, max_items=4,
                                                      max_tokens=64, max_beam=4))
    return TestClient(app)


def test_serve_lists_its_models_and_is_healthy(client, runs):
    assert client.get("/healthz").json() == {"status": "ok", "models": 4}
    models = {m["id"]: m for m in client.get("/v1/models").json()["data"]}
    assert {name: m["task"] for name, m in models.items()} == {"lm": "lm", "ner": "tagger",
                                                              "sentiment": "classifier", "de-en": "seq2seq"}
    assert models["ner"]["endpoints"] == ["/v1/tag"]
    assert models["lm"]["endpoints"] == ["/v1/generate", "/v1/score", "/v1/completions"]
    assert models["lm"]["parameters"] == seqlab.load(runs["lm"]).model.num_parameters()
    final = [json.loads(line) for line in (runs["sentiment"] / "metrics.jsonl").read_text().splitlines()
             if json.loads(line).get("final")]
    assert models["sentiment"]["metrics"]["valid"]["accuracy"] == final[-1]["accuracy"]
    parameters = seqlab.load(runs["sentiment"]).model.num_parameters()
    assert models["sentiment"]["summary"] == (f"a classifier (lstm, {parameters:,} parameters) trained for "
                                              f"{final[-1]['trained_steps']} steps on classify/sentiment.tsv; valid "
                                              f"accuracy {final[-1]['accuracy']:.2f}")
    lm = models["lm"]["summary"]
    assert lm.startswith("a language model (transformer") and "perplexity" in lm
    assert "/v1/translate" in client.get("/openapi.json").json()["paths"]


def test_serve_answers_as_the_python_api(client, runs):
    lm = seqlab.load(runs["lm"])
    got = client.post("/v1/generate", json={"model": "lm", "prompt": "ROMEO:", "max_tokens": 12, "seed": 3})
    assert got.status_code == 200
    assert got.json()["text"] == lm.generate("ROMEO:", max_tokens=12, seed=3) and got.json()["text"]
    beam = client.post("/v1/generate", json={"model": "lm", "prompt": "ROMEO:", "max_tokens": 6, "beam": 3}).json()
    assert beam["text"] == lm.generate("ROMEO:", max_tokens=6, beam=3)
    scored = client.post("/v1/score", json={"model": "lm", "text": ["To be", "or not"]}).json()["results"]
    assert [(t["token"], t["logprob"]) for t in scored[1]["tokens"]] == [tuple(p) for p in lm.score("or not")]
    assert scored[0]["perplexity"] == pytest.approx(lm.perplexity("To be"))

    tagger = seqlab.load(runs["ner"])
    tagged = client.post("/v1/tag", json={"model": "ner", "text": "John lives in Paris ."}).json()["results"][0]
    expected = tagger.tag("John lives in Paris .".split())
    assert tagged["tags"] == [t for t, _ in expected]
    assert tagged["probabilities"] == pytest.approx([p for _, p in expected])
    assert isinstance(tagged["entities"], list)

    classifier = seqlab.load(runs["sentiment"])
    texts = ["a warm and funny film", "a dull mess"]
    classified = client.post("/v1/classify", json={"model": "sentiment", "text": texts}).json()["results"]
    assert [c["label"] for c in classified] == [p.label for p in classifier.classify(texts)]
    assert sum(classified[0]["probabilities"].values()) == pytest.approx(1.0)

    translator = seqlab.load(runs["de-en"])
    sources = ["der hund sieht .", "der mann mag der katze ."]
    for endpoint in ("translate", "summarize"):
        decoded = client.post(f"/v1/{endpoint}", json={"model": "de-en", "text": sources, "beam": 2,
                                                       "attention": True}).json()["results"]
        assert [d["text"] for d in decoded] == translator.translate(sources, beam=2)
        assert len(decoded[0]["attention"]) >= 1 and len(decoded[0]["attention"][0]) == len(decoded[0]["source_tokens"])


def test_serve_streams_generation_as_server_sent_events(client, runs):
    lm = seqlab.load(runs["lm"])
    with client.stream("POST", "/v1/generate", json={"model": "lm", "prompt": "ROMEO:", "max_tokens": 10,
                                                     "seed": 5, "stream": True}) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        events = [line[len("data: "):] for line in response.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]" and len(events) > 3
    assert json.loads(events[-2]) == {"text": "", "finish_reason": "length"}     # why it ended, then [DONE]
    pieces = [json.loads(event)["text"] for event in events[:-2]]
    assert pieces == list(lm.stream("ROMEO:", max_tokens=10, seed=5))


BAD = [
    ("post", "/v1/classify", b"{not json", 400, "not valid JSON"),
    ("post", "/v1/classify", {"text": "hello"}, 422, "model: is required"),
    ("post", "/v1/classify", {"model": "sentiment", "text": 5}, 422, "text"),
    ("post", "/v1/classify", {"model": "sentiment", "text": "fine", "colour": "red"}, 422,
     "colour: is not a field"),
    ("post", "/v1/classify", {"model": "nobody", "text": "fine"}, 404, "no model named 'nobody'"),
    ("post", "/v1/tag", {"model": "sentiment", "text": "fine"}, 400, "use POST /v1/classify"),
    ("post", "/v1/classify", {"model": "sentiment", "text": ["a", "b", "c", "d", "e"]}, 422, "limit is 4"),
    ("post", "/v1/classify", {"model": "sentiment", "text": "x" * 201}, 422, "201 characters"),
    ("post", "/v1/classify", {"model": "sentiment", "text": "y" * 5000}, 413, "limit is 4,096"),
    ("post", "/v1/classify", {"model": "sentiment", "text": []}, 422, "text: is an empty list"),
    ("post", "/v1/classify", {"model": "sentiment", "text": ""}, 422, "empty"),
    ("post", "/v1/generate", {"model": "lm", "max_tokens": 65}, 422, "over the limit of 64"),
    ("post", "/v1/generate", {"model": "lm", "max_tokens": -1}, 422, "max_tokens"),
    ("post", "/v1/generate", {"model": "lm", "temperature": 0}, 422, "temperature"),
    ("post", "/v1/generate", {"model": "lm", "beam": 2, "temperature": 0.5}, 422, "samples nothing"),
    ("post", "/v1/generate", {"model": "lm", "prompt": "a" * 100, "max_tokens": 2}, 422, "longer than the model"),
    ("post", "/v1/translate", {"model": "de-en", "text": "der hund", "beam": 5}, 422, "beam 5 is over"),
    ("post", "/v1/translate", {"model": "de-en", "text": "der hund", "length_penalty": "nan"}, 422,
     "length_penalty"),
    ("get", "/v1/nowhere", None, 404, "Not Found"),
    ("get", "/v1/classify", None, 405, "Method Not Allowed"),
]


@pytest.mark.parametrize("method, path, body, status, message", BAD, ids=[f"{c[1]}-{c[3]}-{i}" for i, c in
                                                                           enumerate(BAD)])
def test_serve_answers_a_bad_request_with_a_4xx_and_one_line(client, method, path, body, status, message):
    if method == "get":
        response = client.get(path)
    elif isinstance(body, bytes):
        response = client.post(path, content=body, headers={"content-type": "application/json"})
    else:
        response = client.post(path, json=body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert message in error and "\n" not in error
    assert client.get("/healthz").status_code == 200                 # and the server goes on


def test_serve_requires_the_api_key_when_set(runs, monkeypatch):
    models = load_runs([runs["sentiment"]])
    client = TestClient(create_app(models, api_key="s3cret"))
    request = {"model": "sentiment", "text": "a fine film"}
    assert client.post("/v1/classify", json=request).status_code == 401
    wrong = client.post("/v1/classify", json=request, headers={"Authorization": "Bearer guess"})
    assert wrong.status_code == 401 and "API key" in wrong.json()["error"]
    assert client.post("/v1/classify", json=request, headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert client.get("/healthz").status_code == 200                 # health needs no key
    monkeypatch.setenv("SEQLAB_API_KEY", "from-env")
    client = TestClient(create_app(models))
    assert client.post("/v1/classify", json=request, headers={"Authorization": "Bearer from-env"}).status_code == 200


def test_serve_refuses_bad_runs_and_options(runs, tmp_path, capsys):
    with pytest.raises(SeqlabError, match="two runs are named"):
        load_runs([runs["lm"], runs["lm"]])
    with pytest.raises(SeqlabError, match="not a directory|not a seqlab run"):
        load_runs([tmp_path / "missing"])
    with pytest.raises(SeqlabError, match="--max-items must be at least 1"):
        ServeLimits(max_items=0)
    assert main(["serve", str(tmp_path / "missing"), "--port", "8765"]) == 2
    assert "seqlab: error:" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["serve", str(runs["lm"]), "--port", "70000"])


@pytest.mark.parametrize("given, expected, read", [([], None, None), (["--threads", "1"], 1, None),
                                                   (["--read-threads", "3"], None, 3)])
def test_serve_leaves_a_core_to_the_event_loop(runs, monkeypatch, given, expected, read):
    """By default the models run on one thread per core but one (the event loop needs a core of its own), and a
    batch's prompts are read on every core (--read-threads)."""
    import socket

    import uvicorn

    from seqlab.serve.limits import available_cores

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    seen = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: seen.update(threads=torch.get_num_threads(),
                                                                      read=app.state.scheduler.read_threads, **kw))
    before = torch.get_num_threads()
    try:
        assert main(["serve", str(runs["sentiment"]), "--port", str(port), *given]) == 0
    finally:
        torch.set_num_threads(before)
    assert seen["threads"] == (expected or max(1, available_cores() - 1))
    assert seen["read"] == (read or available_cores())
    assert seen["host"] == "127.0.0.1" and seen["port"] == port


class CountingLM:
    """A stand-in language model whose stream counts the pieces it has made (one every 10 ms)."""

    def __init__(self):
        self.made = 0

    def stream(self, prompt, **options):
        import time

        for _ in range(options["max_tokens"]):
            time.sleep(0.01)
            self.made += 1
            yield "x"


def test_serve_stops_generating_when_the_client_goes_away(tmp_path):
    import time

    import httpx

    from seqlab.serve.served import Served

    lm = CountingLM()
    server, url = serving(create_app({"fake": Served("fake", "lm", lm, tmp_path)}, ServeLimits(max_tokens=1000)))
    try:
        with httpx.stream("POST", f"{url}/v1/generate", json={"model": "fake", "max_tokens": 1000, "stream": True},
                          timeout=10) as response:
            lines = response.iter_lines()
            assert [next(lines) for _ in range(3)][0] == 'data: {"text": "x"}'
        time.sleep(0.5)
        stopped = lm.made
        time.sleep(0.3)
        assert lm.made == stopped < 200                        # not the 1000 asked for, and no more since
    finally:
        server.should_exit = True


@pytest.mark.slow
def test_serve_command_serves_on_127_0_0_1_until_interrupted(runs):
    """`seqlab serve RUN --port N` end to end: a real process answers over HTTP, and Ctrl-C stops it."""
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time

    import httpx

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "seqlab", "serve", str(runs["sentiment"]), "--port", str(port)],
                               stderr=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        deadline, health = time.time() + 60, None
        while time.time() < deadline and process.poll() is None:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).json()
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        assert health == {"status": "ok", "models": 1}
        answer = httpx.post(f"http://127.0.0.1:{port}/v1/classify", json={"model": "sentiment", "text": "fine"})
        assert answer.status_code == 200 and answer.json()["results"][0]["label"] in ("pos", "neg")
        taken = subprocess.run([sys.executable, "-m", "seqlab", "serve", str(runs["sentiment"]), "--port", str(port)],
                               capture_output=True, text=True)
        assert taken.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in taken.stderr
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    assert f"serving sentiment (classifier) on http://127.0.0.1:{port}" in err and "Traceback" not in err


def metric(text: str, name: str, endpoint: str) -> float:
    """One sample of /metrics' text: `name{endpoint="..."...}` (the first series of that endpoint)."""
    for line in text.splitlines():
        if line.startswith(name + "{") and f'endpoint="{endpoint}"' in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} for {endpoint} is not in /metrics")


def test_serve_gathers_concurrent_requests_into_batches_and_counts_them(runs):
    """Concurrent requests to one model run as batches (the batch-size histogram of /metrics has batches
    above one text), answer exactly what they answer alone, and a request with a refused text fails alone."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    classifier = seqlab.load(runs["sentiment"])
    texts = ["a warm and funny film", "a dull mess", "lovely", "lifeless and dull", "fine acting", "a mess",
             "funny", "warm"]
    models = load_runs([runs["sentiment"]])

    class Slow:                      # 50 ms a batch, so that requests arriving meanwhile queue up behind it
        def __getattr__(self, name):
            return getattr(classifier, name)

        def classify(self, texts):
            time.sleep(0.05)
            return classifier.classify(texts)

    models["sentiment"].trained = Slow()
    server, url = serving(create_app(models, ServeLimits(max_batch=8, max_wait_ms=200)))
    try:
        def ask(text):
            return httpx.post(f"{url}/v1/classify", json={"model": "sentiment", "text": text}, timeout=30)

        with ThreadPoolExecutor(len(texts)) as pool:
            answers = list(pool.map(ask, texts))
        alone = classifier.classify(texts)
        for answer, expected in zip(answers, alone, strict=True):
            result = answer.json()["results"][0]
            assert result["label"] == expected.label
            assert result["probability"] == pytest.approx(expected.probability, abs=1e-5)
        text = httpx.get(f"{url}/metrics").text
        batches = metric(text, "seqlab_batch_size_count", "/v1/classify")
        assert metric(text, "seqlab_batch_size_sum", "/v1/classify") == len(texts)
        assert batches < len(texts)                                # at least one batch held several requests
        with ThreadPoolExecutor(len(texts) + 1) as pool:
            answers = list(pool.map(ask, [*texts, ""]))
        assert [a.status_code for a in answers] == [200] * len(texts) + [422]     # the empty text fails alone
        assert "empty" in answers[-1].json()["error"]
        text = httpx.get(f"{url}/metrics").text
        assert 'seqlab_requests_total{endpoint="/v1/classify",status="200"} 16' in text
        assert 'seqlab_requests_total{endpoint="/v1/classify",status="422"} 1' in text
        assert metric(text, "seqlab_request_seconds_count", "/v1/classify") == 2 * len(texts) + 1
    finally:
        server.should_exit = True


def test_serve_batcher_waits_for_company_only_when_the_last_batch_had_some():
    """A lone request runs at once, however long --max-wait-ms is; once a batch has held several requests,
    the next one waits up to max_wait for others to join it."""
    import asyncio
    import time
    from concurrent.futures import ThreadPoolExecutor

    from seqlab.serve.batching import Batcher

    sizes = []

    def work(key, items):
        sizes.append(len(items))
        return [item * 2 for item in items]

    async def scenario():
        batcher = Batcher(work, max_batch=8, max_wait=0.3, executor=ThreadPoolExecutor(1))

        async def timed(*groups):
            start = time.perf_counter()
            answers = await asyncio.gather(*(batcher.submit("k", group) for group in groups))
            return answers, time.perf_counter() - start

        alone, alone_s = await timed([1])
        together, _ = await timed([2], [3, 4], [5])
        after_company, after_company_s = await timed([6])
        alone_again, alone_again_s = await timed([7])
        return alone, alone_s, together, after_company_s, after_company, alone_again, alone_again_s

    alone, alone_s, together, waited_s, after_company, alone_again, alone_again_s = asyncio.run(scenario())
    assert alone == [[2]] and together == [[4], [6, 8], [10]] and after_company == [[12]] and alone_again == [[14]]
    assert sizes == [1, 4, 1, 1]                                 # the three concurrent requests in one batch
    assert alone_s < 0.2 and alone_again_s < 0.2                 # no company: no wait
    assert waited_s >= 0.25                                      # after a shared batch: it waited for others
