"""The Explore tab of the page at / (`/#explore`: static/explore.js, explore-kinds.js), in a real headless Chromium.

Two servers: a small one of this module's that answers /v1/explain with views built by the real classes of
`seqlab.contract.views` (every kind, and the edge cases: a one-token text, NaN values, 256 units), so that each
kind's drawing is tested whatever the families show; and the real `seqlab serve` app over a tiny run of every
family (conftest's `train_serve_runs`), each explored as a reader would: pick the model, an example, Explore,
every view drawn, and its controls used. Every request but this machine's is blocked and counted; a script
error or a console error fails the test.

Needs Playwright for Python and Debian's Chromium (see tests/test_serve_page.py); `make test-browser` runs it.
"""

from __future__ import annotations

import math
import re
import time
from pathlib import Path

import pytest

from conftest import page_test_chromium

pytest.importorskip("fastapi")
CHROMIUM = page_test_chromium()                  # skips the module without Playwright or Chromium

from fastapi import FastAPI, Request  # noqa: E402
from fastapi.responses import FileResponse, JSONResponse  # noqa: E402
from fastapi.staticfiles import StaticFiles  # noqa: E402

from conftest import headless_chromium, serving, train_serve_runs  # noqa: E402
from seqlab.contract.views import Explanation, Panel, View, ViewSpec  # noqa: E402
from seqlab.serve.explore import option_bounds  # noqa: E402

pytestmark = pytest.mark.browser          # make test-browser runs them (Debian's Chromium), not make test

STATIC = Path(__file__).parents[1] / "src" / "seqlab" / "serve" / "static"


# ---- a server of views of every kind ----

SPECS = (ViewSpec("surprise", "tokens", "Surprise per token", "how surprised the model is (bits)", exported=True),
         ViewSpec("cells", "matrix", "Units", "each unit's value per token", why_not_exported="inside the graph"),
         ViewSpec("heads", "matrix", "Heads", "each head's weights (9.20-9.21)", exported=True),
         ViewSpec("labels", "matrix", "Label scores", "scores and the best path", exported=True),
         ViewSpec("choices", "bars", "Choices", "the distribution over labels", exported=True),
         ViewSpec("search", "tree", "Search", "the beam's candidates (13.4)", why_not_exported="no beam there"))
EXAMPLES = ["the cat sat on the mat", "a dog ran", "one"]


def softmax(row: list[float]) -> list[float]:
    top = max(row)
    exps = [math.exp(v - top) for v in row]
    return [e / sum(exps) for e in exps]


def variance(row: list[float]) -> float:
    mean = sum(row) / len(row)
    return sum((v - mean) ** 2 for v in row) / len(row)


def tokens_view(tokens: list[str]) -> View:
    values = [float("nan")] + [1.0 + i for i in range(len(tokens) - 1)]        # the first has no prediction
    details = [{}] + [{"probability": 2.0 ** -(1.0 + i), "rank": i + 1,
                       "alternatives": [["dog", 0.4], [tokens[i + 1], 2.0 ** -(1.0 + i)], ["the", 0.05]]}
                      for i in range(len(tokens) - 1)]
    return View.of(SPECS[0], tokens=tokens, values=values, details=details, label="surprisal (bits)")


def units_view(tokens: list[str], units: int = 256) -> View:
    panels = []
    for group in ("layer 1 forward", "layer 1 backward"):
        for what, low in (("|h|", -1.0), ("forget gate f", 0.0)):
            values = [[math.sin(0.37 * u * (t + 1)) * (u % 7) / 7 for t in range(len(tokens))] for u in range(units)]
            if low == 0:
                values = [[(v + 1) / 2 for v in row] for row in values]
            norms = [math.sqrt(t + 1.0) for t in range(len(tokens))]           # the group's strip, in each panel
            panels.append(Panel(f"{group}: {what}", [f"unit {u}" for u in range(units)], list(tokens), values,
                                range=(low, 1.0), group=group, strip=norms, strip_label="||h_t|| over 512 units"))
    return View.of(SPECS[1], panels=panels, note=f"the {units} of 512 units that vary most")


def heads_view(tokens: list[str]) -> View:
    panels = []
    for layer in (1, 2):
        for head in (1, 2):
            values = [softmax([((q * 3 + k * layer + head) % 5) * (1.0 if k <= q else -50.0)
                               for k in range(len(tokens))]) for q in range(len(tokens))]
            panels.append(Panel(f"layer {layer}, head {head}", list(tokens), list(tokens), values, range=(0.0, 1.0),
                                group=f"layer {layer}"))
    return View.of(SPECS[2], panels=panels, lines=True)


def labels_view(tokens: list[str]) -> View:
    labels = ["O", "B-PER", "I-PER"]
    values = [[float(t % 3 == j) * 2 - 0.5 * j for j in range(3)] for t in range(len(tokens))]
    values[0][1] = float("nan")
    return View.of(SPECS[3], panels=[Panel("label scores", list(tokens), labels, values,
                                           path=[t % 3 for t in range(len(tokens))])])


def bars_view() -> View:
    return View.of(SPECS[4], labels=["negative", "positive", "neutral"], values=[0.2, 0.7, 0.1], label="probability")


def tree_view(one: bool = False) -> View:
    if one:
        nodes = [{"id": 0, "parent": None, "token": "</s>", "score": -0.1, "step": 0, "status": "ended"}]
        finished = [{"node": 0, "tokens": [], "text": "", "score": -0.1, "normalized": -0.1, "rank": 1}]
        return View.of(SPECS[5], nodes=nodes, finished=finished, label="log probability")
    nodes = [{"id": 0, "parent": None, "token": "the", "score": -0.5, "step": 0, "status": "kept"},
             {"id": 1, "parent": None, "token": "a", "score": -1.0, "step": 0, "status": "kept"},
             {"id": 2, "parent": None, "token": "one", "score": -2.0, "step": 0, "status": "dropped"},
             {"id": 3, "parent": 0, "token": "cat", "score": -0.9, "step": 1, "status": "kept"},
             {"id": 4, "parent": 1, "token": "</s>", "score": -1.2, "step": 1, "status": "ended"},
             {"id": 5, "parent": 0, "token": "dog", "score": -2.5, "step": 1, "status": "dropped"},
             {"id": 6, "parent": 3, "token": "</s>", "score": -1.0, "step": 2, "status": "ended"},
             {"id": 7, "parent": 3, "token": "sat", "score": -3.0, "step": 2, "status": "late"}]
    finished = [{"node": 4, "tokens": ["a"], "text": "a", "score": -1.2, "normalized": -1.2, "rank": 2},
                {"node": 6, "tokens": ["the", "cat"], "text": "the cat", "score": -1.0, "normalized": -0.5,
                 "rank": 1}]
    return View.of(SPECS[5], nodes=nodes, finished=finished, label="log probability")


def explanation(text: str, asked: list[str] | None) -> dict:
    tokens = text.split()
    if len(tokens) > 100:                          # a long text: the tokens and one head's attention, T x T
        heads = heads_view(tokens)
        heads.panels = heads.panels[:1]
        return Explanation("toy", "toy", "toy", tokens, [tokens_view(tokens), heads], truncated=True).to_json()
    one = len(tokens) == 1
    views = [tokens_view(tokens), units_view(tokens), heads_view(tokens), labels_view(tokens), bars_view(),
             tree_view(one)]
    views = [v for v in views if asked is None or v.name in asked]
    return Explanation("toy", "toy", "toy", tokens, views, seconds=0.0421).to_json()


def model_entry(name: str) -> dict:
    return {"id": name, "object": "model", "task": "toy", "endpoints": [], "metrics": {}, "arch": "toy",
            "parameters": 10, "summary": ""}


def toy_app(key: str | None = None) -> FastAPI:
    """The page's files, GET /v1/models (three models: `toy`, `export` (an ONNX export), `plain` (no views)),
    GET /v1/explain/{model} and POST /v1/explain answering `explanation`; with `key`, every /v1 asks for it."""
    app = FastAPI()
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.state.posts = []

    @app.middleware("http")
    async def guard(request: Request, call_next):
        if key and request.url.path.startswith("/v1") and request.headers.get("authorization") != f"Bearer {key}":
            return JSONResponse({"error": "this server needs an API key: send Authorization: Bearer KEY"}, 401)
        return await call_next(request)

    @app.get("/")
    def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    @app.get("/v1/models")
    def models() -> dict:
        return {"object": "list", "data": [model_entry(name) for name in ("plain", "toy", "export")]}

    @app.get("/v1/ui")
    def ui() -> dict:
        return {"forms": {}}

    @app.get("/v1/explain/{model}")
    def views(model: str):
        if model == "plain":
            return JSONResponse({"error": f"model {model!r} is a toy, which has no views to explore"}, 400)
        exported = model == "export"
        return {"model": model, "family": "toy", "arch": "toy", "runtime": "onnx" if exported else "torch",
                "views": [vars(s) | {"archs": []} for s in SPECS if s.exported or not exported],
                "not_on_export": [{"name": s.name, "title": s.title, "why": s.why_not_exported} for s in SPECS
                                  if exported and not s.exported],
                "options": option_bounds(), "examples": EXAMPLES, "limits": {"max_chars": 5000, "max_tokens": 512}}

    @app.post("/v1/explain")
    async def explain(request: Request):
        body = await request.json()
        app.state.posts.append(body)
        if not body["text"].strip():
            return JSONResponse({"error": "the text to explain is empty: give a sentence"}, 422)
        return explanation(body["text"], body["views"])

    return app


@pytest.fixture(scope="module")
def toy():
    app = toy_app()
    server, url = serving(app)
    yield url, app
    server.should_exit = True


@pytest.fixture(scope="module")
def browser():
    yield from headless_chromium(CHROMIUM)


def open_explore(browser, url: str):
    """A fresh page at `url`/#explore that blocks (and records) every request to another host and records every
    script error and console error (but the network's own line for an answer the test asked to be refused)."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.blocked, page.errors = [], []

    def only_this_server(route):
        if route.request.url.startswith(f"{url}/") or route.request.url.startswith("data:"):
            route.continue_()
        else:
            page.blocked.append(route.request.url)
            route.abort()

    page.route("**/*", only_this_server)
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.on("console", lambda message: page.errors.append(message.text) if message.type == "error" and not
            message.text.startswith("Failed to load resource: the server responded with a status of") else None)
    page.goto(f"{url}/#explore")
    page.wait_for_selector("#explore-model option", state="attached")
    return page


def closed(page) -> None:
    """The page made no request elsewhere and met no error; then closed."""
    try:
        assert page.blocked == [] and page.errors == []
    finally:
        page.context.close()


def explore(page, model: str, example: int | None = 0, text: str | None = None) -> None:
    """Pick the model, an example (or type `text`), press Explore and wait for the answer."""
    page.select_option("#explore-model", model)
    if example is not None:
        page.select_option("#explore-example", str(example))
    if text is not None:
        page.fill("#explore-text", text)
    page.click("#explore-run")
    page.wait_for_function("!document.getElementById('explore-run').disabled")


def order(page, view: str) -> list[str]:
    return page.eval_on_selector(f"#view-{view} canvas.cells", "c => JSON.parse(c.dataset.order)")


def cell_at(page, view: str, row: int, col: int) -> dict:
    """The middle of the heat map's cell (row, col) as drawn, in the canvas's own pixels."""
    size = page.eval_on_selector(f"#view-{view} canvas.cells", "c => [c.dataset.left, c.dataset.top, c.dataset.cw, "
                                                               "c.dataset.ch].map(Number)")
    left, top, cw, ch = size
    return {"x": left + (col + 0.5) * cw, "y": top + (row + 0.5) * ch}


def hover_cell(page, view: str, row: int, col: int) -> str:
    """Move the mouse over the heat map's cell (row, col): the tooltip's text."""
    page.hover(f"#view-{view} canvas.cells", position=cell_at(page, view, row, col))
    page.wait_for_selector(f"#view-{view} .tip:not([hidden])")
    return page.inner_text(f"#view-{view} .tip")


def test_explore_page_opens_at_its_hash_with_the_models_that_explain(browser, toy):
    url, _ = toy
    page = open_explore(browser, url)
    try:
        assert page.is_visible("#explore-form") and not page.is_visible("#request-form")
        assert page.get_attribute("#tab-explore", "aria-current") == "page"
        assert page.locator("#explore-model option").all_inner_texts() == ["toy (toy)", "export (toy)"]  # not plain
        assert page.get_attribute("#explore-text", "placeholder") == EXAMPLES[0]
        assert page.locator("#explore-example option").all_inner_texts()[1:] == EXAMPLES
        page.select_option("#explore-example", "1")
        assert page.input_value("#explore-text") == EXAMPLES[1]
        boxes = page.locator("#explore-view-list input")
        assert [boxes.nth(i).get_attribute("value") for i in range(boxes.count())] == [s.name for s in SPECS]
        assert all(boxes.nth(i).is_checked() for i in range(boxes.count()))
        assert page.get_attribute("label[for=explore-view-cells]", "title") == SPECS[1].about
        bounds = option_bounds()
        assert page.get_attribute("#explore-top-k", "max") == str(bounds["top_k"]["max"])
        assert page.input_value("#explore-units") == str(bounds["units"]["default"])
        assert page.locator("#explore-strategy option").all_inner_texts() == ["greedy", "sample", "beam"]
        for input_id in ["explore-model", "explore-example", "explore-text", "explore-top-k", "explore-strategy"]:
            assert page.locator(f"label[for={input_id}]").count() == 1          # labelled
        page.select_option("#explore-model", "export")                      # an export: what it cannot show, why
        assert page.is_disabled("#explore-view-cells") and page.is_disabled("#explore-view-search")
        assert "inside the graph" in page.inner_text("label[for=explore-view-cells]")
        assert not page.is_disabled("#explore-view-surprise")
        page.click("#tab-ask")                                              # the other tab, and back
        page.wait_for_selector("#request-form", state="visible")
        assert not page.is_visible("#explore-form") and page.url.endswith("#ask")
        page.click("#tab-explore")
        page.wait_for_selector("#explore-form", state="visible")
    finally:
        closed(page)


def test_explore_page_draws_each_kind_and_its_controls(browser, toy):
    url, app = toy
    page = open_explore(browser, url)
    try:
        page.fill("#explore-top-k", "7")
        explore(page, "toy")
        assert app.state.posts[-1] == {"model": "toy", "text": EXAMPLES[0], "views": [s.name for s in SPECS],
                                       "options": {**{k: v["default"] for k, v in option_bounds().items()},
                                                   "top_k": 7}}
        assert not page.is_visible("#explore-error")
        assert "0.042 s" in page.inner_text("#explore-meta") and "6 tokens" in page.inner_text("#explore-meta")
        kinds = page.eval_on_selector_all("#explore-results article.view", "a => a.map(v => [v.dataset.view, "
                                                                           "v.dataset.kind])")
        assert kinds == [[s.name, s.kind] for s in SPECS]
        for spec in SPECS:                                                  # title, about
            assert page.inner_text(f"#view-{spec.name} h2") == spec.title
            assert page.inner_text(f"#view-{spec.name} .about") == spec.about

        # tokens: the strip, NaN shown as missing, hover and focus show the details
        chips = page.locator("#view-surprise .tok")
        assert chips.all_inner_texts() == EXAMPLES[0].split()
        assert chips.nth(0).evaluate("c => getComputedStyle(c).backgroundColor") == "rgb(217, 217, 217)"
        assert "surprisal (bits)" in page.inner_text("#view-surprise .legend-scale")
        chips.nth(2).hover()
        assert page.locator("#view-surprise .alternatives li").all_inner_texts()[0].split() == ["dog", "40.0%"]
        assert "rank" in page.inner_text("#view-surprise .facts") and "0.2500" in page.inner_text(
            "#view-surprise .facts")
        assert page.locator("#view-surprise .alternatives li.actual code").inner_text() == "sat"
        chips.nth(0).focus()                                               # keyboard: a token without details
        assert "—" in page.inner_text("#view-surprise .token-detail")
        page.keyboard.press("Tab")
        assert page.locator("#view-surprise .alternatives li.actual code").inner_text() == "cat"

        # matrix of units: group and panel, sort, search, a clicked column, the tooltip
        cells = "#view-cells canvas.cells"
        assert page.get_attribute(cells, "data-rows") == "256" and page.get_attribute(cells, "data-cols") == "6"
        assert "the 256 of 512 units" in page.inner_text("#view-cells .note")
        assert "layer 1 forward: |h|" in page.get_attribute(cells, "aria-label")
        assert "largest value" in page.get_attribute(cells, "aria-label")
        assert page.locator("#m-cells-group option").all_inner_texts() == ["layer 1 forward", "layer 1 backward"]
        page.select_option("#m-cells-panel", "1")
        assert page.inner_text("#view-cells .panel-title") == "layer 1 forward: forget gate f"
        page.select_option("#m-cells-group", "layer 1 backward")
        assert page.inner_text("#view-cells .panel-title") == "layer 1 backward: |h|"
        assert order(page, "cells")[:3] == ["unit 0", "unit 1", "unit 2"]
        page.select_option("#m-cells-sort", "variance")
        view = units_view(EXAMPLES[0].split()).panels[2]
        spread = sorted(range(256), key=lambda u: -variance(view.values[u]))
        assert order(page, "cells")[0] == f"unit {spread[0]}" and order(page, "cells")[-1] != "unit 255"
        page.fill("#m-cells-search", "17")
        assert order(page, "cells") == ["unit 17"]
        page.fill("#m-cells-search", "3-10, 200")
        assert sorted(order(page, "cells"), key=lambda u: int(u.split()[1])) == [f"unit {u}" for u in
                                                                                  [*range(3, 11), 200]]
        page.fill("#m-cells-search", "")
        page.select_option("#m-cells-sort", "index")
        text = hover_cell(page, "cells", 5, 2)
        assert text.startswith("unit 5 · sat: ") and float(text.split(": ")[1]) == pytest.approx(
            view.values[5][2], abs=1e-4)
        page.focus(cells)                                                  # the keyboard: arrows, Enter
        for key in ("ArrowDown", "ArrowDown", "ArrowRight"):
            page.keyboard.press(key)
        assert page.inner_text("#view-cells .tip").startswith("unit 2 · cat: ")
        page.keyboard.press("Enter")
        assert page.input_value("#m-cells-sort") == "column"
        assert order(page, "cells")[0] == f"unit {max(range(256), key=lambda u: view.values[u][1])}"
        page.select_option("#m-cells-sort", "index")
        page.click(cells, position=cell_at(page, "cells", 0, 4))
        assert page.input_value("#m-cells-sort") == "column"
        at = sorted(range(256), key=lambda u: -view.values[u][4])
        assert order(page, "cells")[0] == f"unit {at[0]}"
        assert page.inner_text("#m-cells-sort option[value=column]") == "value at column 5 (the)"

        # attention: heads chosen by layer, and the line view
        heads = "#view-heads"
        assert page.locator(f"{heads} .sort-select").count() == 0                 # rows are tokens, not units
        page.select_option("#m-heads-group", "layer 2")
        page.select_option("#m-heads-panel", "1")
        assert page.inner_text(f"{heads} .panel-title") == "layer 2, head 2"
        page.click(f"{heads} button[data-mode=lines]")
        assert page.get_attribute(f"{heads} button[data-mode=lines]", "aria-pressed") == "true"
        lines = page.locator(f"{heads} svg.lines line")
        assert lines.count() >= 6 and page.locator(f"{heads} svg.lines text.q").count() == 6
        page.hover(f"{heads} svg.lines text.q >> nth=3")
        lit = page.eval_on_selector_all(f"{heads} svg.lines line.on", "ls => ls.map(l => Number(l.dataset.q))")
        assert lit and set(lit) == {3}
        weights = heads_view(EXAMPLES[0].split()).panels[3].values[3]
        shown = page.eval_on_selector_all(f"{heads} svg.lines line.on", """ls => ls.map(
            l => [Number(l.dataset.k), Number(l.getAttribute('stroke-opacity'))])""")
        for k, opacity in shown:
            assert opacity == pytest.approx(weights[k] / max(max(r) for r in heads_view(
                EXAMPLES[0].split()).panels[3].values), abs=1e-3)
        page.click(f"{heads} button[data-mode=heat]")
        assert page.locator(f"{heads} canvas.cells").count() == 1

        # the path's cells, and a NaN cell shown as missing; one panel: no group or panel to choose
        assert not page.is_visible("#m-labels-group") and not page.is_visible("#m-labels-panel")
        assert hover_cell(page, "labels", 0, 1).endswith(": —")
        assert hover_cell(page, "labels", 1, 1).endswith("(on the path)")

        # bars: sorted, as percentages
        assert page.locator("#view-choices .bar-label").all_inner_texts() == ["positive", "negative", "neutral"]
        assert page.locator("#view-choices .bar-value").all_inner_texts() == ["70.0%", "20.0%", "10.0%"]

        # tree: every node drawn in its status's style, the finished ranked; a click shows a path
        tree = "#view-search svg.tree"
        assert page.locator(f"{tree} g.node").count() == 8 + 1                     # and the start
        assert {s: page.locator(f"{tree} g.node.{s}").count() for s in ("kept", "ended", "dropped", "late")} == \
            {"kept": 3, "ended": 2, "dropped": 2, "late": 1}
        assert page.locator(f"{tree} g.node.dropped").first.evaluate("n => getComputedStyle(n).opacity") == "0.45"
        hypotheses = page.locator("#view-search ol.finished button")
        assert page.locator("#view-search ol.finished .rank").all_inner_texts() == ["#1", "#2"]
        assert page.locator("#view-search ol.finished .text").all_inner_texts() == ["the cat", "a"]
        hypotheses.nth(0).click()
        assert sorted(page.eval_on_selector_all(f"{tree} g.node.on-path", "ns => ns.map(n => n.dataset.id)")) == \
            ["0", "3", "6", "start"]
        assert page.locator(f"{tree} path.edge.on-path").count() == 3
        assert hypotheses.nth(0).get_attribute("aria-pressed") == "true"
        hypotheses.nth(1).click()
        assert sorted(page.eval_on_selector_all(f"{tree} g.node.on-path", "ns => ns.map(n => n.dataset.id)")) == \
            ["1", "4", "start"]
    finally:
        closed(page)


def firing(row: list[float | None], start: int, end: int) -> float | None:
    """LSTMVis's rule as the page ranks units by it: the mean inside columns start..end minus the mean outside."""
    inside = [v for c, v in enumerate(row) if v is not None and start <= c <= end]
    outside = [v for c, v in enumerate(row) if v is not None and not start <= c <= end]
    if not inside:
        return None
    return sum(inside) / len(inside) - (sum(outside) / len(outside) if outside else 0)


def ranked(panel: dict, start: int, end: int) -> list[str]:
    """A panel's units (of the server's JSON), highest `firing` first."""
    scores = [firing(row, start, end) for row in panel["values"]]
    order = sorted(range(len(scores)), key=lambda r: -(scores[r] if scores[r] is not None else -math.inf))
    return [panel["rows"][r] for r in order]


def test_explore_page_ranks_the_units_that_fire_on_a_selected_range_under_the_norms_strip(browser, toy):
    url, _ = toy
    page = open_explore(browser, url)
    try:
        page.select_option("#explore-model", "toy")
        page.select_option("#explore-example", "0")
        with page.expect_response(lambda r: r.url.endswith("/v1/explain") and r.request.method == "POST") as sent:
            page.click("#explore-run")
        page.wait_for_function("!document.getElementById('explore-run').disabled")
        panels = next(v for v in sent.value.json()["views"] if v["name"] == "cells")["panels"]
        cells = "#view-cells canvas.cells"

        # the strip above the cells: its values on hover, its legend
        size = page.eval_on_selector(cells, "c => [c.dataset.left, c.dataset.stripTop, c.dataset.cw, "
                                            "c.dataset.stripHeight, c.dataset.top].map(Number)")
        left, strip_top, cw, strip_height, top = size
        assert strip_top + strip_height < top
        page.hover(cells, position={"x": left + 2.5 * cw, "y": strip_top + strip_height / 2})
        tip = page.inner_text("#view-cells .tip")
        assert tip.startswith("||h_t|| over 512 units · sat: ") and float(tip.split(": ")[1]) == pytest.approx(
            panels[0]["strip"][2], abs=1e-4)
        assert "||h_t|| over 512 units" in page.inner_text("#view-cells .heat")

        # a drag over columns 2-4: the units ranked by LSTMVis's rule on them, the top ones listed
        page.locator(cells).scroll_into_view_if_needed()
        box = page.locator(cells).bounding_box()
        start, end = cell_at(page, "cells", 0, 1), cell_at(page, "cells", 3, 3)
        page.mouse.move(box["x"] + start["x"], box["y"] + start["y"])
        page.mouse.down()
        page.mouse.move(box["x"] + end["x"], box["y"] + end["y"], steps=4)
        page.mouse.up()
        assert page.input_value("#m-cells-sort") == "range"
        assert page.get_attribute(cells, "data-range") == "[1,3]"
        assert order(page, "cells") == ranked(panels[0], 1, 3)
        listed = page.eval_on_selector_all("#view-cells ol.firing-units li", "ls => ls.map(l => l.dataset.row)")
        assert listed == ranked(panels[0], 1, 3)[:10]
        assert "columns 2-4 (cat sat on)" in page.inner_text("#view-cells .firing")
        page.select_option("#m-cells-panel", "1")                       # the gate's values, the same range
        assert order(page, "cells") == ranked(panels[1], 1, 3)

        # a click sorts by its column; a shift-click then selects from it
        page.click(cells, position=cell_at(page, "cells", 0, 4))
        assert page.input_value("#m-cells-sort") == "column" and page.locator("#view-cells .firing").count() == 0
        page.click(cells, position=cell_at(page, "cells", 0, 0), modifiers=["Shift"])
        assert page.get_attribute(cells, "data-range") == "[0,4]"
        assert order(page, "cells") == ranked(panels[1], 0, 4)
        page.focus(cells)                                                # the keyboard: Shift+Enter from there
        page.keyboard.press("Enter")                                      # column 1: the anchor
        page.focus(cells)
        for key in ("ArrowRight", "ArrowRight", "ArrowRight", "ArrowRight", "ArrowRight"):
            page.keyboard.press(key)
        page.keyboard.press("Shift+Enter")
        assert page.get_attribute(cells, "data-range") == "[0,5]"
        assert order(page, "cells") == ranked(panels[1], 0, 5)            # every column: the mean alone
        page.fill("#m-cells-search", "1-9")
        assert order(page, "cells") == [u for u in ranked(panels[1], 0, 5) if 1 <= int(u.split()[1]) <= 9]
    finally:
        closed(page)


def test_explore_page_draws_a_one_token_text_and_shows_errors_in_one_line(browser, toy):
    url, app = toy
    page = open_explore(browser, url)
    try:
        explore(page, "toy", example=2)                                         # "one": one token
        assert page.locator("#view-surprise .tok").all_inner_texts() == ["one"]
        assert page.get_attribute("#view-cells canvas.cells", "data-cols") == "1"
        assert page.locator("#view-search svg.tree g.node").count() == 2
        page.click("#view-search ol.finished button")
        assert page.locator("#view-search svg.tree g.node.on-path").count() == 2
        page.click("#view-heads button[data-mode=lines]")
        assert page.locator("#view-heads svg.lines line").count() == 1

        posts = len(app.state.posts)
        for name in [s.name for s in SPECS]:                                   # no view: refused here, not sent
            page.uncheck(f"#explore-view-{name}")
        explore(page, "toy", example=None)
        assert page.inner_text("#explore-error") == "choose at least one view" and len(app.state.posts) == posts
        page.check("#explore-view-choices")
        explore(page, "toy", example=None, text="  ")                           # the API's error, in the page
        assert page.is_visible("#explore-error")
        assert page.inner_text("#explore-error") == "the text to explain is empty: give a sentence"
        assert app.state.posts[-1]["views"] == ["choices"]
        explore(page, "toy", example=None, text="a dog ran")
        assert not page.is_visible("#explore-error")
        assert page.eval_on_selector_all("#explore-results article", "a => a.map(v => v.dataset.view)") == ["choices"]
    finally:
        closed(page)


def test_explore_page_draws_a_long_text_and_bounds_its_lines(browser, toy):
    url, _ = toy
    page = open_explore(browser, url)
    try:
        words = [f"w{i}" for i in range(300)]
        started = time.perf_counter()
        explore(page, "toy", example=None, text=" ".join(words))
        assert page.locator("#view-surprise .tok").count() == 300
        assert "the text was cut" in page.inner_text("#explore-meta")
        canvas = "#view-heads canvas.cells"
        assert page.get_attribute(canvas, "data-rows") == page.get_attribute(canvas, "data-cols") == "300"
        assert page.eval_on_selector(canvas, "c => c.width") >= 300 * 3                     # 3 px a cell at least
        page.click("#view-heads button[data-mode=lines]")
        drawn = page.locator("#view-heads svg.lines line").count()
        assert drawn == 5000 and "the 5000 heaviest of" in page.inner_text("#view-heads .lines-box")
        assert time.perf_counter() - started < 10
    finally:
        closed(page)


def test_explore_page_sends_the_api_key(browser):
    server, url = serving(toy_app(key="s3cret"))
    page = browser.new_page()
    try:
        page.goto(f"{url}/#explore")
        page.wait_for_selector("#key-form", state="visible")
        assert "API key" in page.inner_text("#explore-error")
        page.fill("#api-key", "s3cret")
        page.click("#key-apply")
        page.wait_for_selector("#explore-model option", state="attached")
        assert not page.is_visible("#explore-error")
        explore(page, "toy")
        assert page.locator("#explore-results article").count() == len(SPECS)
    finally:
        page.close()
        server.should_exit = True


def test_explore_page_names_no_family_and_no_view():
    script = "".join((STATIC / name).read_text(encoding="utf-8") for name in ("explore.js", "explore-kinds.js"))
    from seqlab.registry import FAMILIES

    names = set(FAMILIES) | {"next-token", "generation", "gates", "attention", "cross-attention", "label-scores",
                             "transitions", "lattice", "classes", "prefixes", "occlusion", "beam-tree", "alignment"}
    for family in FAMILIES.values():
        if family.explains:
            names |= {spec.name for spec in family.part("explain").VIEWS}
    for name in names:
        assert not re.search(rf"""["'`]{re.escape(name)}["'`]""", script), name
    assert "http://" not in script.replace("http://www.w3.org/2000/svg", "") and "https://" not in script


# ---- the real server over a tiny run of every family ----

RUNS = ("lm", "ner", "sentiment", "de-en")


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    from seqlab.serve.app import create_app, load_runs

    runs = train_serve_runs(tmp_path_factory.mktemp("explore"), lr=0.05)
    server, url = serving(create_app(load_runs(runs.values())))
    yield url, runs
    server.should_exit = True


def check_drawn(page, view) -> None:
    """The view's drawing on the page agrees with `view` (the same explanation computed in this process), and its
    controls work."""
    box = f"#view-{view.name}"
    assert page.get_attribute(box, "data-kind") == view.kind
    if view.kind == "tokens":
        assert page.locator(f"{box} .tok").count() == len(view.tokens) > 0
        with_alternatives = [i for i, d in enumerate(view.details) if d and d.get("alternatives")]
        if with_alternatives:
            i = with_alternatives[-1]
            page.hover(f"{box} .tok >> nth={i}")
            assert page.locator(f"{box} .alternatives li").count() == len(view.details[i]["alternatives"])
    elif view.kind == "bars":
        ranked = sorted(view.values, reverse=True)                    # the server's rounded to 4 digits
        shown = [float(p.rstrip("%")) for p in page.locator(f"{box} .bar-value").all_inner_texts()]
        assert shown == pytest.approx([100 * p for p in ranked], abs=0.051)
    elif view.kind == "tree":
        assert page.locator(f"{box} svg.tree g.node").count() == len(view.nodes) + 1
        ranked = sorted(view.finished, key=lambda f: f["rank"])
        assert page.locator(f"{box} ol.finished .text").all_inner_texts() == [f["text"] for f in ranked]
        page.click(f"{box} ol.finished button >> nth=0")
        assert page.locator(f"{box} svg.tree g.node.on-path").count() >= 2
    elif view.kind == "matrix":
        first = view.panels[0]
        canvas = f"{box} canvas.cells"
        assert page.get_attribute(canvas, "data-cols") == str(len(first.cols))
        assert sorted(page.eval_on_selector(canvas, "c => JSON.parse(c.dataset.order)")) == sorted(first.rows)
        assert (page.get_attribute(canvas, "data-strip-top") is not None) == (first.strip is not None)   # ||h_t||
        groups = list(dict.fromkeys(p.group for p in view.panels))
        if len(groups) > 1:                                              # another layer / direction
            page.select_option(f"#m-{view.name}-group", groups[-1])
            assert page.inner_text(f"{box} .panel-title") == next(p.title for p in view.panels
                                                                  if p.group == groups[-1])
        if page.locator(f"#m-{view.name}-panel option").count() > 1:      # another gate / head
            page.select_option(f"#m-{view.name}-panel", "1")
            assert page.inner_text(f"{box} .panel-title") == [p for p in view.panels
                                                              if p.group == groups[-1]][1].title
        if page.locator(f"#m-{view.name}-sort").count():                  # units: sort, search
            page.select_option(f"#m-{view.name}-sort", "variance")
            shown = page.eval_on_selector(canvas, "c => JSON.parse(c.dataset.order)")
            page.fill(f"#m-{view.name}-search", shown[0].split()[1])
            assert page.eval_on_selector(canvas, "c => JSON.parse(c.dataset.order)") == [shown[0]]
            page.fill(f"#m-{view.name}-search", "")
        if view.lines:
            page.click(f"{box} button[data-mode=lines]")
            assert page.locator(f"{box} svg.lines line").count() > 0
            page.hover(f"{box} svg.lines text.q >> nth=0")
            assert page.locator(f"{box} svg.lines line.on").count() > 0
            page.click(f"{box} button[data-mode=heat]")


@pytest.mark.parametrize("name", RUNS)
def test_explore_page_explores_a_run_of_every_family(browser, real, name):
    import seqlab
    from seqlab.registry import run_family

    url, runs = real
    family = run_family(runs[name])
    if not family.explains:
        pytest.skip(f"the {family.name} family has no explain part yet")
    page = open_explore(browser, url)
    try:
        page.select_option("#explore-model", name)
        example = page.locator("#explore-example option").count() > 1
        explore(page, name, example=0 if example else None, text=None if example else "a short text .")
        assert not page.is_visible("#explore-error"), page.inner_text("#explore-error")
        text = page.input_value("#explore-text")
        found = seqlab.load(runs[name]).explain(text)
        offered = page.eval_on_selector_all("#explore-view-list input:not(:disabled)", "i => i.map(v => v.value)")
        assert offered == [v.name for v in found.views]
        assert page.eval_on_selector_all("#explore-results article", "a => a.map(v => v.dataset.view)") == offered
        for view in found.views:
            check_drawn(page, view)
    finally:
        closed(page)


def test_explore_page_shows_what_an_export_cannot_and_draws_what_it_can(browser, classifier_export):
    from seqlab.export.runtime import load_export
    from seqlab.serve.app import create_app, load_runs

    server, url = serving(create_app(load_runs([classifier_export], runtime="onnx")))
    page = open_explore(browser, url)
    try:
        name = classifier_export.name
        assert "onnx" in page.inner_text("#explore-info")
        disabled = page.eval_on_selector_all("#explore-view-list input:disabled", "i => i.map(v => v.value)")
        assert disabled                                                    # the states and gates: not in the graphs
        for view in disabled:
            assert "(" in page.inner_text(f"label[for=explore-view-{view}]")      # and why
        explore(page, name, example=None, text="a warm and funny film")
        assert not page.is_visible("#explore-error"), page.inner_text("#explore-error")
        found = load_export(classifier_export).explain("a warm and funny film")
        assert page.eval_on_selector_all("#explore-results article", "a => a.map(v => v.dataset.view)") == \
            [v.name for v in found.views]
        assert not set(disabled) & {v.name for v in found.views}
        for view in found.views:
            check_drawn(page, view)
        page.fill("#explore-top-k", "51")                                   # out of bounds: the server's line
        explore(page, name, example=None)
        error = page.inner_text("#explore-error")                          # the API's line, as it words it
        assert "top_k" in error and "50" in error and "51" in error and "\n" not in error
    finally:
        closed(page)
        server.should_exit = True


def test_explore_page_screenshots_each_view_of_every_family(browser, real, tmp_path):
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "docs" / "hooks"))
    import screenshots

    from seqlab.registry import run_family

    _, runs = real
    written = screenshots.screenshots(list(runs.values()), tmp_path, CHROMIUM, {"lm": "ROMEO: I will "}, browser)
    for name, run in runs.items():
        family = run_family(run)
        if family.explains:
            assert any(p.name.startswith(f"{family.name}-") for p in written), name
    for path in written:
        data = path.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) < screenshots.MAX_BYTES
    assert sorted(written) == sorted(tmp_path.iterdir())                 # nothing else left there (no temporaries)
