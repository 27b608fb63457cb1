"""The report of `seqlab compare` (report.html) opened in a real headless Chromium from the file itself: every
picture loads from the page (data: URIs), nothing is asked of any other place, no script runs or fails.

Needs Playwright for Python and Debian's Chromium (no browser download), as tests/test_serve_page.py:
    apt-get install chromium && pip install -e '.[browser]'
It skips without them. SEQLAB_REPORT_SCREENSHOT=docs/compare_report.png saves the page there (the README's
picture is made from a real comparison by benchmarks/report_screenshot.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import headless_chromium, page_test_chromium

CHROMIUM = page_test_chromium()                  # skips the module without Playwright or Chromium

from seqlab.cli.main import main  # noqa: E402

pytestmark = pytest.mark.browser          # make test-browser runs them (Debian's Chromium), not make test

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def browser():
    yield from headless_chromium(CHROMIUM)


@pytest.mark.slow
def test_compare_report_opens_offline_with_every_picture_drawn(tmp_path, browser):
    out = tmp_path / "cmp"
    assert main(["compare", "lm", "--train", str(FIXTURES / "shakespeare_train.txt"), "--valid",
                 str(FIXTURES / "shakespeare_valid.txt"), "--archs", "gru", "transformer", "--budget-tokens", "400",
                 "--size", "tiny", "--batch-size", "4", "--seq-len", "10", "--no-progress", "--output", str(out)]) == 0
    report = out / "report.html"
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    requests, errors = [], []
    page.on("request", lambda request: requests.append(request.url))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(report.as_uri())
    page.wait_for_load_state("load")
    images = page.eval_on_selector_all("img", "imgs => imgs.map(i => [i.naturalWidth, i.src.slice(0, 22)])")
    assert len(images) >= 4 and all(width > 0 and src == "data:image/png;base64," for width, src in images)
    assert all(url == report.as_uri() or url.startswith("data:") for url in requests), requests
    assert errors == [] and "winner" in page.inner_text("body").lower()
    if os.environ.get("SEQLAB_REPORT_SCREENSHOT"):
        page.screenshot(path=os.environ["SEQLAB_REPORT_SCREENSHOT"], full_page=False)
