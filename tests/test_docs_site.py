"""The documentation site as a reader sees it: built with `mkdocs build --strict`, opened from the file system (no
server: the site must read offline) in a real headless Chromium, every page reached by following the navigation
and the links of the pages, and each page checked: no console error, no script error, no request that fails, every
image drawn, every equation typeset without a MathJax error.

Needs Playwright and Debian's Chromium, as tests/test_serve_page.py (make test-browser); skipped without them.
SEQLAB_DOCS_SCREENSHOTS=docs saves the home page and a tutorial there (docs/site_home.png, docs/site_tutorial.png,
the pictures the README shows).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urldefrag

import pytest

from conftest import headless_chromium, page_test_chromium

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "docs" / "hooks"))
import diagrams  # noqa: E402

CHROMIUM = page_test_chromium()                  # skips the module without Playwright or Chromium
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-5000:]
    return out


@pytest.fixture(scope="module")
def browser():
    yield from headless_chromium(CHROMIUM)


def check_page(page, url: str) -> list[str]:
    """Open `url`; what is wrong with it as the reader sees it."""
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"script error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
    page.on("request", lambda r: None if r.url.startswith(("file:", "data:", "blob:", "about:")) else
            problems.append(f"asked the network for {r.url}"))                 # it must read offline
    page.goto(url)
    page.wait_for_load_state("load")
    if page.locator(".arithmatex").count():
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=20000)
        page.evaluate("() => MathJax.startup.promise")
        if page.locator("mjx-merror, [data-mjx-error]").count():
            problems.append("an equation MathJax could not typeset")
        if page.locator("mjx-container").count() == 0:
            problems.append("equations left untypeset")
    broken = page.eval_on_selector_all("img", "imgs => imgs.filter(i => !(i.complete && i.naturalWidth > 0))"
                                              ".map(i => i.getAttribute('src'))")
    problems += [f"image not drawn: {src}" for src in broken]
    return problems


@pytest.mark.slow
def test_every_page_reached_from_the_navigation_opens_clean(site, browser):
    start = (site / "index.html").as_uri()
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    seen, queue, problems = set(), [start], {}
    while queue:
        url = queue.pop(0)
        if url in seen:
            continue
        seen.add(url)
        found = check_page(page, url)
        if found:
            problems[url.removeprefix(site.as_uri())] = found
        links = page.eval_on_selector_all("a[href]", "as => as.map(a => a.href)")
        for link in links:
            target, _ = urldefrag(link)
            if target.startswith(site.as_uri()) and target.endswith(".html") and target not in seen:
                queue.append(target)
        page.close()
        page = browser.new_page(viewport={"width": 1280, "height": 900})
    built = {p.as_uri() for p in site.rglob("*.html") if p.name != "404.html"}
    assert not problems, "\n".join(f"{u}: {'; '.join(p)}" for u, p in problems.items())
    assert built <= seen, f"pages no link reaches: {sorted(built - seen)[:10]}"
    assert len(seen) >= 60


@pytest.mark.slow
def test_the_navigation_leads_to_every_part_and_a_tutorial_shows_its_figures(site, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto((site / "index.html").as_uri())
    tabs = page.locator(".md-tabs__link").all_inner_texts()
    assert [t.strip() for t in tabs] == ["Home", "Get started", "Tutorials", "Guides", "Reference", "Benchmarks"]
    if os.environ.get("SEQLAB_DOCS_SCREENSHOTS"):
        page.screenshot(path=str(Path(os.environ["SEQLAB_DOCS_SCREENSHOTS"]) / "site_home.png"))
    page.locator(".md-tabs__link", has_text="Tutorials").click()
    page.wait_for_load_state("load")
    page.locator("article a", has_text="LSTM and GRU").first.click()
    page.wait_for_load_state("load")
    assert page.url.endswith("tutorials/lstm-gru.html")
    assert page.locator("article img").count() >= 1
    assert page.locator("a[href$='lstm-gru.ipynb']").count() == 1          # it opens as a notebook
    if os.environ.get("SEQLAB_DOCS_SCREENSHOTS"):
        page.screenshot(path=str(Path(os.environ["SEQLAB_DOCS_SCREENSHOTS"]) / "site_tutorial.png"))


CONTRAST = """() => {
  const rgb = s => (s.match(/[\\d.]+/g) || []).slice(0, 3).map(Number);
  const f = c => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
  const lum = ([r, g, b]) => 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  let bg = "rgba(0, 0, 0, 0)";
  for (let e = document.querySelector(".md-content"); e; e = e.parentElement) {
    const c = getComputedStyle(e).backgroundColor;
    if (!c.startsWith("rgba(0, 0, 0, 0)") && c !== "transparent") { bg = c; break; }
  }
  if (bg.startsWith("rgba(0, 0, 0, 0)")) bg = getComputedStyle(document.body).backgroundColor;
  return [...document.querySelectorAll("svg.sqd")].map(svg => {
    const box = svg.getBoundingClientRect();
    const text = svg.querySelector("text");
    const a = lum(rgb(getComputedStyle(text).fill)), b = lum(rgb(bg));
    return {id: svg.id, width: box.width, height: box.height,
            contrast: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)};
  });
}"""


@pytest.mark.slow
def test_docs_site_diagrams_read_in_both_palettes(site, browser):
    """The gallery of diagrams (reference/diagrams.md) in the light and the dark palette: every inline SVG is drawn
    (a non-zero size) and its text contrasts with the page's background (WCAG ratio at least 4.5)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto((site / "reference" / "diagrams.html").as_uri())
    page.wait_for_load_state("load")
    for scheme in ("default", "slate"):
        page.evaluate(f"() => document.body.setAttribute('data-md-color-scheme', '{scheme}')")
        found = page.evaluate(CONTRAST)
        assert len(found) == len(diagrams.DIAGRAMS), found          # the gallery shows every one
        for drawing in found:
            assert drawing["width"] > 100 and drawing["height"] > 100, (scheme, drawing)
            assert drawing["contrast"] >= 4.5, (scheme, drawing)
    page.close()
def _rgb(text: str) -> tuple[float, ...]:
    values = [float(v) for v in text[text.index("(") + 1:text.index(")")].replace("/", ",").split(",")]
    return tuple(values[:3]) + ((values[3],) if len(values) > 3 else (1.0,))


def _contrast(fg: tuple, bg: tuple) -> float:
    def luminance(c):
        channels = [v / 255 for v in c[:3]]
        channels = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in channels]
        return 0.2126 * channels[0] + 0.7152 * channels[1] + 0.0722 * channels[2]
    light, dark = sorted((luminance(fg), luminance(bg)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


BACKGROUND = """el => { let e = el; while (e) { const c = getComputedStyle(e).backgroundColor;
  if (c && !c.startsWith('rgba(0, 0, 0, 0)') && c !== 'transparent') return c; e = e.parentElement; }
  return getComputedStyle(document.body).backgroundColor; }"""


@pytest.mark.slow
def test_a_tutorial_shows_what_its_code_printed_readable_in_both_palettes(site, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto((site / "tutorials" / "rnn-lm.html").as_uri())
    page.wait_for_load_state("load")
    outputs = page.locator("div.seqlab-output code")
    assert outputs.count() >= 8, "the page shows fewer outputs than it has cells that print"
    for scheme in ("default", "slate"):
        page.evaluate(f"document.body.setAttribute('data-md-color-scheme', '{scheme}')")
        page.wait_for_timeout(800)                     # the theme's colours change through a CSS transition
        first = outputs.first
        fg = _rgb(first.evaluate("el => getComputedStyle(el).color"))
        bg = _rgb(first.evaluate(BACKGROUND))
        fg = tuple(fg[3] * f + (1 - fg[3]) * b for f, b in zip(fg[:3], bg[:3], strict=True))     # its alpha, drawn
        assert _contrast(fg, bg) >= 4.5, f"{scheme}: output text {fg} on {bg}"
