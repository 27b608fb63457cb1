"""The explorer's endpoints on a real server (uvicorn on a real socket): GET /v1/explain/{model} lists a model's
views, options and texts to try, POST /v1/explain answers an `Explanation` equal to the Python API's, and every bad
request is answered with its status and one line in the route's shape: 404 an unknown model, 422 a text over the
server's limit, an option out of range, an unknown option or view, an empty text; 400 a model of a family without
views; each status declared by the OpenAPI document the server serves; and, as every endpoint, 504 past the
server's deadline with the work stopped."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from conftest import serving, viewless_run
from seqlab.contract.views import DIGITS, MAX_CELLS, ExplainOptions
from seqlab.serve.app import create_app, load_runs
from seqlab.serve.limits import ServeLimits

LIMITS = ServeLimits(max_chars=200)


@pytest.fixture(scope="module")
def server(serve_runs, tmp_path_factory):
    """A server of the session's tiny run of each family and a run of a family without views (the tests'
    regressor): its base URL."""
    with viewless_run(tmp_path_factory.mktemp("viewless")) as regressor:
        server, url = serving(create_app(load_runs([*serve_runs.values(), regressor]), LIMITS))
        yield url
        server.should_exit = True


def refused(response: httpx.Response, status: int, words: str) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert isinstance(error, str) and "\n" not in error and words in error, error


def test_serve_explore_answers_each_bad_request_with_its_status_in_one_line(server):
    post = lambda body: httpx.post(f"{server}/v1/explain", json=body, timeout=60)   # noqa: E731
    refused(httpx.get(f"{server}/v1/explain/nope", timeout=30), 404, "no model named 'nope'")
    refused(post({"model": "nope", "text": "a b"}), 404, "no model named 'nope'")
    refused(httpx.get(f"{server}/v1/explain/run", timeout=30), 400, "which has no views to explore")
    refused(post({"model": "run", "text": "seven"}), 400, "which has no views to explore")
    refused(post({"model": "lm", "text": "x" * (LIMITS.max_chars + 1)}), 422, "text")
    refused(post({"model": "lm", "text": ""}), 422, "text")
    refused(post({"model": "lm", "text": "To be", "options": {"top_k": 51}}), 422, "options.top_k")
    refused(post({"model": "lm", "text": "To be", "options": {"strategy": "nucleus"}}), 422, "options.strategy")
    refused(post({"model": "lm", "text": "To be", "options": {"topk": 3}}), 422, "options.topk")
    refused(post({"model": "lm", "text": "To be", "views": ["no-such-view"]}), 422, "no view 'no-such-view'")
    refused(post({"model": "lm", "text": "To be", "colour": "blue"}), 422, "colour")


def test_serve_explore_document_declares_the_statuses_its_routes_give(server):
    document = httpx.get(f"{server}/openapi.json", timeout=30).json()
    listing = document["paths"]["/v1/explain/{model_id}"]["get"]["responses"]
    explaining = document["paths"]["/v1/explain"]["post"]["responses"]
    assert {"200", "400", "404", "504"} <= set(listing) and {"200", "400", "404", "422", "504"} <= set(explaining)
    options = document["components"]["schemas"]["ExplainOptions"]["properties"]
    assert options["top_k"]["maximum"] == 50 and options["strategy"]["enum"] == ["greedy", "sample", "beam"]
    text = document["components"]["schemas"]["ExplainRequest"]["properties"]["text"]
    assert text["maxLength"] == LIMITS.max_chars                   # the server's limit, under the explorer's own


def test_serve_explore_lists_each_models_views_and_explains_as_the_python_api(server, serve_runs):
    """For one run of each family: the views GET lists are the ones POST computes by default, with the options'
    defaults and bounds of `ExplainOptions` and texts of the run's dev set; POST's answer is
    `seqlab.load(run).explain(text)`'s JSON as the server rounds it (but the seconds it took)."""
    import seqlab

    for name, run in serve_runs.items():
        listed = httpx.get(f"{server}/v1/explain/{name}", timeout=60).json()
        assert listed["model"] == name and listed["runtime"] == "torch" and listed["views"], listed
        assert listed["options"]["top_k"] == {"default": ExplainOptions().top_k, "min": 1, "max": 50,
                                              "integer": True}
        assert listed["examples"] and all(isinstance(text, str) and text for text in listed["examples"])
        text = listed["examples"][0][:150]
        answer = httpx.post(f"{server}/v1/explain", json={"model": name, "text": text,
                                                          "options": {"top_k": 3, "units": 4}}, timeout=120)
        assert answer.status_code == 200, answer.text
        found = answer.json()
        assert [v["name"] for v in found["views"]] == [v["name"] for v in listed["views"]]
        own = seqlab.load(run).explain(text, top_k=3, units=4).to_json(DIGITS, MAX_CELLS)   # as the server rounds
        own = json.loads(json.dumps(own))
        found.pop("seconds"), own.pop("seconds")
        assert found == own, name


def test_serve_explore_past_the_deadline_answers_504_and_stops_its_work(serve_runs):
    """As /v1/translate and /v1/score do (tests/test_serve_scheduler.py, test_serve_slices.py): an explanation past
    the server's request_timeout is answered 504 in one line at the deadline, and its work stops at its next
    checkpoint (the beam search's next step) instead of running on, on the inference thread."""
    from seqlab.serve.app import create_app, load_runs
    from seqlab.serve.limits import ServeLimits

    app = create_app(load_runs([serve_runs["de-en"]]), ServeLimits(request_timeout=0.5))
    model = app.state.models["de-en"].trained.model
    step, steps = model.step, []

    def slow(*args, **kwargs):                      # a long search on a tiny model: 0.1 s a step
        steps.append(time.monotonic())
        time.sleep(0.1)
        return step(*args, **kwargs)

    model.step = slow
    server, url = serving(app)
    try:
        stopped = app.state.scheduler.stopped["deadline"]
        began = time.perf_counter()
        answer = httpx.post(f"{url}/v1/explain", json={"model": "de-en", "text": "ein mann und eine frau " * 4,
                                                       "views": ["beam-tree"], "options": {"beam": 16}}, timeout=30)
        seconds = time.perf_counter() - began
        refused(answer, 504, "limit of 0.5 s")
        assert "its work was stopped" in answer.json()["error"] and seconds < 1.5, seconds
        waited = time.perf_counter()
        while app.state.scheduler.stopped["deadline"] == stopped and time.perf_counter() - waited < 1.0:
            time.sleep(0.02)
        assert app.state.scheduler.stopped["deadline"] == stopped + 1           # stopped at its next step
        ran = len(steps)
        time.sleep(0.3)
        assert len(steps) == ran and 0 < ran < 20, ran                          # and not a step since
    finally:
        server.should_exit = True
