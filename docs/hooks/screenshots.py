"""Screenshots of the Explore tab of `seqlab serve`'s page (`/#explore`) for the docs: one PNG per view of each
family's model, as a reader sees it in Chromium.

    python docs/hooks/screenshots.py                          # tiny runs of every family, trained in a temporary
                                                              # folder (the page tests' runs: tests/conftest.py)
    python docs/hooks/screenshots.py runs/lm runs/pos ...     # these runs (one per family)
    python docs/hooks/screenshots.py --out /tmp/shots --text "tagger=Peter lives in Berlin ." --text "lm=ROMEO: I"

It starts the server over the runs on 127.0.0.1 (the app of `seqlab serve`), opens /#explore in Debian's Chromium
through Playwright (SEQLAB_CHROMIUM or --chromium names another; every request to another host is refused), and
for each run picks its model, its first example text (or its family's --text), presses Explore and saves each
view's figure
(its article, cropped) as `OUT/FAMILY-VIEW.png` from a 1200 px wide window: a token hovered where the view has
tokens, the best hypothesis's path where it has a tree, and a second picture `FAMILY-VIEW-lines.png` of a view's
line drawing. Files are written atomically; a picture over 150 KB is reduced to 256 colours (Pillow). It needs the
browser extra (pip install -e '.[browser]') and Chromium (apt-get install chromium).
"""

from __future__ import annotations

import argparse
import io
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "assets" / "explore"
WIDTH = 1200
MAX_BYTES = 150_000
MAX_HEIGHT = 1400                  # a taller figure is cropped to its top
TINY_TEXTS = {"lm": "Before we proceed any further, hear me "}     # a line's first words: the tiny LM goes on


def serve(runs: list[Path]):
    """`seqlab serve`'s app over `runs` in a thread on 127.0.0.1: (server, base url)."""
    import uvicorn

    from seqlab.serve.app import create_app, load_runs

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(load_runs(runs)), host="127.0.0.1", port=port,
                                           log_level="error"))
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.time() + 30
    while not server.started and time.time() < deadline:
        time.sleep(0.05)
    return server, f"http://127.0.0.1:{port}"


def tiny_runs(folder: Path) -> list[Path]:
    """A tiny run of every family, as the page tests train them (tests/conftest.py `train_serve_runs`), but the
    language model trained longer (400 steps, about 15 s), so that it generates more than an end at once."""
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import tiny_config, train_serve_runs
    from seqlab.families.lm.pipeline import train_lm

    runs = train_serve_runs(folder, lr=0.05)
    runs["lm"] = folder / "shakespeare"
    train_lm(tiny_config(runs["lm"], arch="transformer", tokenizer="char", max_steps=400, seq_len=16, batch_size=16,
                         eval_every=400, lr=1e-2))
    return list(runs.values())


def shown(path: Path) -> Path:
    return path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path


def small_png(data: bytes) -> bytes:
    """The PNG as it is, or reduced to 256 colours when it is over MAX_BYTES."""
    if len(data) <= MAX_BYTES:
        return data
    from PIL import Image

    image = Image.open(io.BytesIO(data)).convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()


def shoot(locator, path: Path) -> int:
    """The element's picture (cropped to MAX_HEIGHT) written atomically at `path`: its size in bytes."""
    from seqlab.fileio import atomic_write_bytes

    box = locator.bounding_box()
    locator.scroll_into_view_if_needed()
    if box["height"] > MAX_HEIGHT:
        locator.page.set_viewport_size({"width": WIDTH, "height": MAX_HEIGHT + 200})
        locator.scroll_into_view_if_needed()
        box = locator.bounding_box()
        data = locator.page.screenshot(clip={**box, "height": MAX_HEIGHT})
        locator.page.set_viewport_size({"width": WIDTH, "height": 900})
    else:
        data = locator.screenshot()
    data = small_png(data)
    atomic_write_bytes(path, data)
    return len(data)


def explore(page, model: str, text: str | None) -> None:
    """Pick the model and a text (its first example, or `text`), press Explore and wait for the views."""
    page.select_option("#explore-model", model)
    if text is None and page.locator("#explore-example option").count() > 1:
        page.select_option("#explore-example", "0")
    else:
        page.fill("#explore-text", text or "the cat sat on the mat .")
    page.click("#explore-run")
    page.wait_for_function("!document.getElementById('explore-run').disabled")
    if page.is_visible("#explore-error"):
        raise SystemExit(f"{model}: {page.inner_text('#explore-error')}")


def pose(page, box: str, kind: str) -> None:
    """Show what a reader would look at first: a token's alternatives, the best hypothesis's path."""
    if kind == "tokens":
        count = page.locator(f"{box} .tok").count()
        if count:
            page.hover(f"{box} .tok >> nth={min(count - 1, 3)}")
    elif kind == "tree" and page.locator(f"{box} ol.finished button").count():
        page.click(f"{box} ol.finished button >> nth=0")


def screenshots(runs: list[Path], out: Path, chromium: Path, texts: dict[str, str] | None = None,
                browser=None) -> list[Path]:
    """Each view of each run's model saved under `out` (see the module's docstring), the text explored the
    family's of `texts` (else its first example): the files written. In a Playwright `browser` if given (a test's),
    else Chromium at `chromium`, launched and closed here."""
    from seqlab.registry import run_family

    families: dict[str, Path] = {}
    for run in runs:
        family = run_family(run).name
        if family in families:
            raise SystemExit(f"two runs of the {family} family ({families[family]} and {run}): the pictures are "
                             "named by family, give one run of each")
        families[family] = run
    out.mkdir(parents=True, exist_ok=True)
    server, url = serve(runs)
    try:
        if browser is not None:
            return shoot_views(browser, url, families, out, texts or {})
        from playwright.sync_api import sync_playwright

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(chromium), args=["--no-sandbox"])
            try:
                return shoot_views(browser, url, families, out, texts or {})
            finally:
                browser.close()
    finally:
        server.should_exit = True


def shoot_views(browser, url: str, families: dict[str, Path], out: Path, texts: dict[str, str]) -> list[Path]:
    """`screenshots` in `browser` over the server at `url`: the files written."""
    written: list[Path] = []
    page = browser.new_page(viewport={"width": WIDTH, "height": 900})
    page.set_default_timeout(60_000)
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(f"{url}/")
               or route.request.url.startswith("data:") else route.abort())
    page.goto(f"{url}/#explore")
    page.wait_for_function("document.getElementById('explore-model').options.length"
                           " || !document.getElementById('explore-error').hidden")
    for family, run in families.items():
        model = Path(run).resolve().name
        if not page.locator(f"#explore-model option[value='{model}']").count():
            print(f"{run}: the page offers no views of it (the {family} family has no explain part)", file=sys.stderr)
            continue
        explore(page, model, texts.get(family))
        for name, kind in page.eval_on_selector_all("#explore-results article",
                                                    "a => a.map(v => [v.dataset.view, v.dataset.kind])"):
            box = f"#view-{name}"
            pose(page, box, kind)
            path = out / f"{family}-{name}.png"
            print(f"{shown(path)}: {shoot(page.locator(box), path) // 1000} KB")
            written.append(path)
            if page.locator(f"{box} button[data-mode=lines]").count():
                page.click(f"{box} button[data-mode=lines]")
                middle = page.locator(f"{box} svg.lines text.q").count() // 2
                page.hover(f"{box} svg.lines text.q >> nth={middle}")             # a query's lines
                path = out / f"{family}-{name}-lines.png"
                print(f"{shown(path)}: {shoot(page.locator(box), path) // 1000} KB")
                written.append(path)
                page.click(f"{box} button[data-mode=heat]")
    page.close()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="*", type=Path, help="run directories (default: tiny runs of every family, "
                                                          "trained in a temporary folder)")
    parser.add_argument("--out", type=Path, default=OUT, help="where the PNGs go (default: docs/assets/explore)")
    parser.add_argument("--text", action="append", default=[], metavar="FAMILY=TEXT",
                        help="the text to explore with a family's run (default: the run's first example; with the "
                             f"tiny runs, the language model's {TINY_TEXTS['lm']!r}, mid-line, so that it generates)")
    parser.add_argument("--chromium", type=Path, default=Path(os.environ.get("SEQLAB_CHROMIUM", "/usr/bin/chromium")),
                        help="Chromium's executable (default: $SEQLAB_CHROMIUM or /usr/bin/chromium)")
    args = parser.parse_args(argv)
    if not args.chromium.is_file():
        raise SystemExit(f"no Chromium at {args.chromium}: apt-get install chromium (or give --chromium)")
    with tempfile.TemporaryDirectory(prefix="seqlab-screenshots-") as folder:
        texts = {} if args.runs else dict(TINY_TEXTS)
        for given in args.text:
            family, _, text = given.partition("=")
            if not text:
                parser.error(f"--text {given!r}: give FAMILY=TEXT")
            texts[family] = text
        runs = args.runs or tiny_runs(Path(folder))
        screenshots(runs, args.out, args.chromium, texts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
