"""The web page of `seqlab serve` (GET /), driven in a real headless Chromium over a real server: each task's
answer appears as it should, API errors are shown, and the page asks nothing of any other host.

Needs Playwright for Python and Debian's Chromium (no browser download):
    apt-get install chromium && pip install -e '.[browser]'
    pytest tests/test_serve_page.py
It skips without them; SEQLAB_CHROMIUM names another Chromium. SEQLAB_PAGE_SCREENSHOT=docs/serve_page.png
saves the translation with its heat map there (the README's picture).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from conftest import page_test_chromium

SCREENSHOT = os.environ.get("SEQLAB_PAGE_SCREENSHOT")

pytest.importorskip("fastapi")
CHROMIUM = page_test_chromium()                  # skips the module without Playwright or Chromium

import seqlab  # noqa: E402
from conftest import headless_chromium, serving, train_serve_runs  # noqa: E402
from seqlab.serve.app import create_app, load_runs  # noqa: E402
from seqlab.serve.limits import ServeLimits  # noqa: E402

pytestmark = pytest.mark.browser          # make test-browser runs them (Debian's Chromium), not make test


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    return train_serve_runs(tmp_path_factory.mktemp("page"), lr=0.05)


class SlowLM:
    """The trained language model, its stream slowed to a piece every 20 ms so that the page is seen to grow."""

    def __init__(self, lm):
        self.lm = lm

    def __getattr__(self, name):
        return getattr(self.lm, name)

    def stream(self, prompt, **options):
        for piece in self.lm.stream(prompt, **options):
            time.sleep(0.02)
            yield piece


@pytest.fixture(scope="module")
def url(runs):
    models = load_runs(runs.values())
    models["lm"].trained = SlowLM(models["lm"].trained)
    server, url = serving(create_app(models, ServeLimits(max_tokens=64, max_beam=4)))
    yield url
    server.should_exit = True


@pytest.fixture(scope="module")
def browser():
    yield from headless_chromium(CHROMIUM)


def open_page(browser, url: str):
    """A fresh page at `url`/ that records every request it makes and every script error it meets."""
    context = browser.new_context(viewport={"width": 1000, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    page.requests, page.errors = [], []
    page.on("request", lambda request: page.requests.append(request.url))
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.goto(f"{url}/")
    return page


@pytest.fixture
def page(browser, url):
    page = open_page(browser, url)
    page.wait_for_selector("#model option", state="attached")
    yield page
    outside = [u for u in page.requests if not u.startswith(f"{url}/") and not u.startswith("data:")]
    assert outside == [] and page.errors == []
    page.context.close()


def ask(page, model: str, action: str, text: str, **fields) -> None:
    """Choose the model and endpoint, type the text (and any other field, by id), press Run and wait."""
    page.select_option("#model", model)
    page.select_option("#action", action)
    page.fill("#text", text)
    for name, value in fields.items():
        page.fill(f"#{name.replace('_', '-')}", str(value))
    page.click("#run")
    page.wait_for_function("!document.getElementById('run').disabled")


def test_serve_page_lists_the_models_with_their_tasks(page, url):
    assert page.title() == "seqlab"
    options = page.locator("#model option").all_inner_texts()
    assert options == ["lm (lm)", "ner (tagger)", "sentiment (classifier)", "de-en (seq2seq)"]
    page.select_option("#model", "de-en")
    assert page.locator("#action option").all_inner_texts() == ["translate", "summarize"]
    assert "task seq2seq" in page.inner_text("#model-info") and page.is_visible("#beam")
    assert page.get_attribute("#model-info", "title").startswith("a sequence-to-sequence model (gru")
    assert not page.is_visible("#sampling") and not page.is_visible("#key-form")
    page.select_option("#model", "lm")
    assert page.locator("#action option").all_inner_texts() == ["generate", "score"]   # not OpenAI's completions
    assert page.is_visible("#temperature") and page.is_visible("#top-k") and page.is_visible("#seed")
    assert page.get_attribute("#text", "id") == page.get_attribute("label#text-label", "for")   # labelled
    assert any(u.endswith("/static/page.js") for u in page.requests)


def test_serve_page_streams_generated_text_as_it_comes(page, runs):
    page.select_option("#model", "lm")
    page.evaluate("""() => {
        const out = document.getElementById('continuation');
        window.lengths = [];
        new MutationObserver(() => window.lengths.push(out.textContent.length))
            .observe(out, {childList: true, characterData: true, subtree: true});
    }""")
    ask(page, "lm", "generate", "ROMEO:", max_tokens=40, temperature=1, top_k=0, seed=7)
    text = page.inner_text("#continuation")
    assert text == seqlab.load(runs["lm"]).generate("ROMEO:", max_tokens=40, temperature=1.0, top_k=0, seed=7)
    lengths = page.evaluate("window.lengths")
    assert text and len(set(lengths)) > 2 and lengths == sorted(lengths)          # it grew, piece by piece
    assert page.inner_text("#prompt-echo") == "ROMEO:"


def test_serve_page_shows_log_probabilities_and_perplexity(page, runs):
    ask(page, "lm", "score", "To be")
    lm = seqlab.load(runs["lm"])
    assert float(page.inner_text("#perplexity")) == pytest.approx(lm.perplexity("To be"), abs=0.01)
    shown = [float(cell) for cell in page.locator("#scores td.logprob").all_inner_texts()]
    assert shown == pytest.approx([p for _, p in lm.score("To be")], abs=1e-3)


def test_serve_page_shows_tags_and_highlights_entities(page):
    ask(page, "ner", "tag", "Peter Blackburn visited New York .")
    assert page.locator("#tags .token .word").all_inner_texts() == "Peter Blackburn visited New York .".split()
    assert page.locator("#tags .token .tag").all_inner_texts() == ["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O"]
    entities = page.locator("#tags mark.entity")
    assert [entities.nth(i).get_attribute("data-type") for i in range(entities.count())] == ["PER", "LOC"]
    assert entities.nth(0).locator(".word").all_inner_texts() == ["Peter", "Blackburn"]
    colours = {entities.nth(i).evaluate("e => getComputedStyle(e).backgroundColor") for i in range(2)}
    assert len(colours) == 2 and "rgba(0, 0, 0, 0)" not in colours              # a colour per type
    assert page.locator("#legend li").all_inner_texts() == ["LOC", "PER"]


def test_serve_page_draws_a_bar_per_class_the_predicted_first(page, runs):
    ask(page, "sentiment", "classify", "a warm and funny film")
    prediction = seqlab.load(runs["sentiment"]).classify(["a warm and funny film"])[0]
    bars = page.locator("#bars li")
    assert bars.count() == len(prediction.probabilities) == 2
    assert bars.nth(0).get_attribute("data-label") == prediction.label and "predicted" in bars.nth(0).get_attribute(
        "class")
    widths = page.eval_on_selector_all("#bars .bar-fill", """fills => fills.map(
        f => f.getBoundingClientRect().width / f.parentElement.getBoundingClientRect().width)""")
    assert sum(widths) == pytest.approx(1.0, abs=0.01)
    assert widths[0] == pytest.approx(prediction.probability, abs=0.01)


def test_serve_page_draws_the_translation_and_its_attention(page, runs):
    ask(page, "de-en", "translate", "der hund sieht .", beam=2)
    assert page.inner_text("#decoded") == seqlab.load(runs["de-en"]).translate(["der hund sieht ."], beam=2)[0]
    assert page.inner_text("#beam-used") == "2" and page.inner_text("#decode-title") == "Translation"
    assert page.locator("#heatmap thead th[scope=col]").all_inner_texts() == ["der", "hund", "sieht", "."]
    rows = page.locator("#heatmap tbody tr")
    assert rows.count() >= 1
    for i in range(rows.count()):
        weights = [float(w) for w in rows.nth(i).locator("td.cell").evaluate_all(
            "cells => cells.map(c => c.dataset.weight)")]
        assert len(weights) == 4 and sum(weights) == pytest.approx(1.0, abs=1e-3)
    shade = page.locator("#heatmap td.cell").first.evaluate("c => getComputedStyle(c).backgroundColor")
    assert shade.startswith("rgba(47, 95, 208")
    if SCREENSHOT:
        Path(SCREENSHOT).parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SCREENSHOT, full_page=True)


def test_serve_page_shows_the_api_error_and_clears_it(page):
    assert not page.is_visible("#error")
    ask(page, "sentiment", "classify", "")
    assert page.is_visible("#error") and "empty" in page.inner_text("#error")
    ask(page, "lm", "generate", "ROMEO:", max_tokens=65)
    assert "max_tokens 65 is over the limit of 64" in page.inner_text("#error")
    ask(page, "sentiment", "classify", "a dull mess")
    assert not page.is_visible("#error") and page.locator("#bars li").count() == 2


def test_serve_page_asks_for_the_api_key_when_the_server_has_one(browser, runs):
    server, url = serving(create_app(load_runs([runs["sentiment"]]), api_key="s3cret"))
    page = open_page(browser, url)
    try:
        page.wait_for_selector("#key-form", state="visible")
        assert "API key" in page.inner_text("#error") and page.locator("#model option").count() == 0
        page.fill("#api-key", "s3cret")
        page.click("#key-apply")
        page.wait_for_selector("#model option", state="attached")
        assert not page.is_visible("#key-form") and not page.is_visible("#error")
        ask(page, "sentiment", "classify", "a fine film")
        assert page.locator("#bars li").count() == 2 and page.errors == []
    finally:
        page.context.close()
        server.should_exit = True
