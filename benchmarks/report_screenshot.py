"""A screenshot of a `seqlab compare` report (report.html) in headless Chromium, for the README.

    python benchmarks/report_screenshot.py runs/compare-ptb docs/compare_report.png

Needs Playwright for Python and Debian's Chromium (apt-get install chromium; pip install -e '.[browser]').
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", help="the comparison's folder (holding report.html)")
    parser.add_argument("output", help="the PNG to write")
    parser.add_argument("--width", type=int, default=1200)
    parser.add_argument("--height", type=int, default=1500)
    parser.add_argument("--chromium", default=os.environ.get("SEQLAB_CHROMIUM", "/usr/bin/chromium"))
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    report = Path(args.directory).resolve() / "report.html"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": args.width, "height": args.height})
        page.goto(report.as_uri())
        page.wait_for_load_state("load")
        page.screenshot(path=args.output)
        browser.close()
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
