"""The wall between the shared server (`seqlab/serve/`) and the families' endpoints (`seqlab/families/*/serve.py`,
the language model's OpenAI routes): a request crosses from the shared machinery into its family once, and the
web page's forms are the families' declarations (GET /v1/ui), not the page's own."""

from __future__ import annotations

import dataclasses
import json
import threading
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from conftest import serving, tiny_config  # noqa: E402
from seqlab.families.lm import serve as lm_serve  # noqa: E402
from seqlab.registry import FAMILIES  # noqa: E402
from seqlab.serve import ui  # noqa: E402
from seqlab.serve.app import create_app, load_runs  # noqa: E402
from seqlab.serve.limits import ServeLimits  # noqa: E402

SOURCE = Path(__import__("seqlab").__file__).resolve().parent
SHARED, FAMILY_WING = str(SOURCE / "serve") + "/", str(SOURCE / "families") + "/"
STATIC = SOURCE / "serve" / "static"


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory) -> Path:
    from seqlab.families.lm.pipeline import train_lm

    folder = tmp_path_factory.mktemp("wall")
    train_lm(tiny_config(folder / "lm", arch="gru", tokenizer="char", max_steps=4))
    return folder / "lm"


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.loads(answer.read())


def zone(filename: str) -> str | None:
    return "serve" if filename.startswith(SHARED) else "families" if filename.startswith(FAMILY_WING) else None


def test_serve_a_completion_crosses_from_the_shared_server_into_its_family_once(lm_run):
    """Every Python call of the server's threads while it answers one POST /v1/completions, caller and callee
    each in the shared hall (serve/) or the family wing (families/): the shared machinery calls into the family
    once (the batch: `app.run_batch` -> the family's `run_batch`), and on the thread that runs it the family never
    calls back into serve/ (it was serve/compat -> batcher -> run_batch -> compat.generate -> completion)."""
    edges: list[tuple[str, str, str, int]] = []          # (caller zone, callee zone, callee, thread)

    def profile(frame, event, arg):
        if event != "call":
            return
        callee = zone(frame.f_code.co_filename)
        caller = zone(frame.f_back.f_code.co_filename) if callee and frame.f_back else None
        if caller and caller != callee:
            edges.append((caller, callee, f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}",
                          threading.get_ident()))

    models = load_runs([lm_run])
    threading.setprofile(profile)                        # the server's threads (uvicorn's, the inference one)
    try:
        server, url = serving(create_app(models, ServeLimits()))
    finally:
        threading.setprofile(None)
    try:
        get(f"{url}/healthz")
        edges.clear()
        answer = post(f"{url}/v1/completions", {"model": "lm", "prompt": "ROMEO:", "max_tokens": 5,
                                                 "temperature": 0, "logprobs": 1, "stop": "zz"})
    finally:
        server.should_exit = True
    assert answer["object"] == "text_completion" and answer["choices"][0]["logprobs"]["tokens"]
    inward = [(callee, thread) for caller, callee_zone, callee, thread in edges if caller == "serve"]
    assert [callee for callee, _ in inward] == ["serve.py:run_batch"], edges
    batch_thread = inward[0][1]
    outward = [callee for caller, _, callee, thread in edges if caller == "families" and thread == batch_thread]
    assert outward == [], outward                        # the batch never comes back into serve/
    handled = [callee for caller, _, callee, thread in edges if caller == "families" and thread != batch_thread]
    assert "routes.py:named" in handled                  # the recording sees the handler use the shared machinery


def page_forms(url: str) -> dict:
    return get(f"{url}/v1/ui")["forms"]


def test_serve_ui_serves_the_forms_each_family_declares_and_the_page_names_no_endpoint():
    server, url = serving(create_app({}))
    try:
        forms = page_forms(url)
    finally:
        server.should_exit = True
    declared = {form.endpoint: (name, form) for name, family in FAMILIES.items()
                for form in family.part("serve").FORMS}
    assert set(forms) == set(declared) == {"generate", "score", "tag", "classify", "translate", "summarize"}
    for endpoint, (name, form) in declared.items():
        assert endpoint in FAMILIES[name].endpoints and forms[endpoint] == json.loads(json.dumps(
            dataclasses.asdict(form)))
        assert forms[endpoint]["view"] in ui.VIEWS
    assert [f["name"] for f in forms["generate"]["groups"][0]["fields"]] == ["max_tokens", "temperature", "top_k",
                                                                              "seed"]
    page = (STATIC / "page.js").read_text(encoding="utf-8") + (STATIC / "index.html").read_text(encoding="utf-8")
    for endpoint in declared:                            # the page reads them all from the declarations
        assert f"v1/{endpoint}" not in page and f'=== "{endpoint}"' not in page and f"{endpoint}:" not in page
    with pytest.raises(ValueError, match="view 'chart'"):
        ui.Form("x", "chart", "X", "Text")


def with_top_p(monkeypatch) -> ui.Field:
    """The language model's generate form declaring one more field, top_p (which /v1/generate takes)."""
    extra = ui.Field("top_p", "Top-p (nucleus)", "number", value=0.9, min=0, max=1, step=0.05)
    generate, *others = lm_serve.FORMS
    group = dataclasses.replace(generate.groups[0], fields=(*generate.groups[0].fields, extra))
    monkeypatch.setattr(lm_serve, "FORMS", (dataclasses.replace(generate, groups=(group,)), *others))
    return extra


def test_serve_ui_shows_a_field_a_family_declares(monkeypatch):
    with_top_p(monkeypatch)
    server, url = serving(create_app({}))
    try:
        fields = page_forms(url)["generate"]["groups"][0]["fields"]
    finally:
        server.should_exit = True
    assert fields[-1] == {"name": "top_p", "label": "Top-p (nucleus)", "type": "number", "value": 0.9, "blank": None,
                          "min": 0, "max": 1, "step": 0.05, "placeholder": ""}


@pytest.mark.browser
def test_serve_ui_page_draws_and_sends_a_field_a_family_declares(monkeypatch, lm_run):
    """In a real Chromium: the declared field appears in the form with its label and value, and its value goes
    into the request's body."""
    from conftest import headless_chromium, page_test_chromium

    chromium = page_test_chromium()                      # skips without Playwright or Chromium
    with_top_p(monkeypatch)
    server, url = serving(create_app(load_runs([lm_run]), ServeLimits(max_tokens=64)))
    sent, errors = [], []
    try:
        for browser in headless_chromium(chromium):
            page = browser.new_page()
            page.set_default_timeout(10_000)
            page.on("request", lambda r: sent.append(r.post_data_json) if r.url.endswith("/v1/generate") else None)
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(f"{url}/")
            page.wait_for_selector("#model option", state="attached")
            page.select_option("#action", "generate")
            assert page.is_visible("#top-p") and page.input_value("#top-p") == "0.9"
            assert page.inner_text("label[for=top-p]") == "Top-p (nucleus)"
            page.fill("#top-p", "0.5")
            page.fill("#seed", "3")
            page.click("#run")
            page.wait_for_function("!document.getElementById('run').disabled")
            assert not page.is_visible("#error") and errors == []
            assert sent == [{"model": "lm", "prompt": "", "stream": True, "max_tokens": 60, "temperature": 0.8,
                             "top_k": 0, "seed": 3, "top_p": 0.5}]
            page.select_option("#action", "score")
            assert not page.is_visible("#top-p")
    finally:
        server.should_exit = True
