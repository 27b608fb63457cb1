"""The API's page, /docs (Swagger UI from the files the package ships), in a real headless Chromium over a real
server, with every request to another host blocked: it renders every operation of the OpenAPI document, asks
nothing of any other host, and with an API key its Authorize button sends the key ("Try it out" gets 200, and
401 before).

Needs Playwright for Python and Debian's Chromium (no browser download):
    apt-get install chromium && pip install -e '.[browser]'
    pytest tests/test_serve_docs_page.py
It skips without them; SEQLAB_CHROMIUM names another Chromium.
"""

from __future__ import annotations

import pytest

from conftest import page_test_chromium

pytest.importorskip("fastapi")
CHROMIUM = page_test_chromium()                  # skips the module without Playwright or Chromium

import httpx  # noqa: E402

from conftest import FIXTURES, headless_chromium, serving  # noqa: E402, I001
from seqlab.cli.main import main  # noqa: E402
from seqlab.serve.app import create_app, load_runs  # noqa: E402

pytestmark = pytest.mark.browser          # make test-browser runs them (Debian's Chromium), not make test

KEY = "s3cret"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A tiny classifier (every family's endpoints are in the document whatever the models served)."""
    run, sentiment = tmp_path_factory.mktemp("docs") / "sentiment", str(FIXTURES / "classify" / "sentiment.tsv")
    assert main(["train", "classifier", "--train", sentiment, "--dev", sentiment, "--format", "tsv", "--max-steps",
                 "2", "--embedding-size", "8", "--hidden-size", "8", "--no-progress", "--output", str(run)]) == 0
    return load_runs([run])


@pytest.fixture(scope="module", params=[None, KEY], ids=["open", "keyed"])
def server(request, models):
    server, url = serving(create_app(models, api_key=request.param))
    yield url, request.param
    server.should_exit = True


@pytest.fixture(scope="module")
def browser():
    yield from headless_chromium(CHROMIUM)


@pytest.fixture
def docs(browser, server):
    """/docs loaded with every request to another host aborted: (page, base url, key); afterwards, nothing was
    asked of another host, and no script error or console error (a refused resource, a CSP violation) came."""
    url, key = server
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    requests, blocked, errors = [], [], []
    page.on("request", lambda request: requests.append(request.url))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)

    def only_this_server(route):
        if route.request.url.startswith(f"{url}/") or route.request.url.startswith("data:"):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    page.route("**/*", only_this_server)
    page.goto(f"{url}/docs")
    yield page, url, key
    expected_errors = [e for e in errors if "401" in e]            # "Try it out" without the key: the 401 it shows
    assert blocked == [] and [e for e in errors if e not in expected_errors] == []
    assert all(u.startswith(f"{url}/") or u.startswith("data:") for u in requests), requests
    assert any(u.endswith("/swagger-ui-bundle.js") for u in requests)
    context.close()


def block(document: dict, path: str, method: str) -> str:
    """The CSS selector of Swagger UI's block for one operation."""
    operation = document["paths"][path][method]
    return f"#operations-{operation.get('tags', ['default'])[0]}-{operation['operationId']}"


def test_serve_docs_page_renders_every_operation_offline(docs):
    page, url, key = docs
    document = httpx.get(f"{url}/openapi.json").json()
    page.wait_for_selector(block(document, "/v1/generate", "post"), state="visible")
    assert page.title() == "seqlab: the HTTP API"
    assert "seqlab" in page.inner_text(".info .title")
    operations = [(path, method) for path, items in document["paths"].items() for method in items]
    assert page.locator(".opblock").count() == len(operations) > 5
    for path, method in operations:
        assert page.is_visible(block(document, path, method)), (method, path)
    generate = page.locator(block(document, "/v1/generate", "post"))
    assert "/v1/generate" in generate.inner_text() and "POST" in generate.inner_text()
    generate.locator(".opblock-summary").click()                   # its responses: 200 and every declared error
    statuses = generate.locator(".responses-table tr.response td.response-col_status")
    statuses.first.wait_for(state="visible")                       # drawn once the block opens
    codes = statuses.all_inner_texts()
    assert [c.split()[0] for c in codes] == list(document["paths"]["/v1/generate"]["post"]["responses"])
    assert page.locator(".btn.authorize").count() == (1 if key else 0)


@pytest.mark.parametrize("server", [KEY], indirect=True, ids=["keyed"])
def test_serve_docs_page_authorize_sends_the_api_key(docs):
    page, url, key = docs
    document = httpx.get(f"{url}/openapi.json").json()
    models = page.locator(block(document, "/v1/models", "get"))
    models.wait_for(state="visible")

    def try_it() -> str:
        """GET /v1/models through Swagger UI's Try it out: the status it shows."""
        if not models.locator(".try-out__btn").is_visible():
            models.locator(".opblock-summary").click()
            models.locator(".try-out__btn").click()
        models.locator(".execute").click()
        status = models.locator(".live-responses-table .response .response-col_status").first
        status.wait_for(state="visible")
        shown = status.inner_text().split()[0]
        models.locator(".btn-clear").click()
        status.wait_for(state="detached")                         # cleared, so the next answer is a new one
        return shown

    assert try_it() == "401"
    page.click(".btn.authorize")
    page.fill(".modal-ux input", key)
    page.click(".modal-ux .auth-btn-wrapper .authorize")
    page.click(".modal-ux .btn-done")
    assert try_it() == "200"
