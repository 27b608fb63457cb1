"""What the documentation site shows a learner, counted from the site's own sources: outputs per page (cells that
print or draw, of the cells that run, from docs/outputs/*.json, with the seconds each page's recorded run took),
diagrams drawn and placed, exercises and checks per tutorial, and the reference's option rows held to the parsers.

    python benchmarks/docs_site.py             # -> benchmarks/results/docs_site.{json,md}
    python benchmarks/docs_site.py --ci-seconds 2400   # also record a measured `time bash .ci/run`

Every figure is counted, none typed in: the pages' records come from real runs (docs/hooks/notebooks.py --record).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from common import device_name, record, write_records

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "hooks"))

import notebooks  # noqa: E402


def page_rows() -> list[dict]:
    rows = []
    for page in sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.parts):
        running = [b for b in notebooks.blocks(page.read_text(encoding="utf-8"), str(page)) if b.runs]
        if not running:
            continue
        saved = notebooks.load_record(page)
        cells = (saved or {}).get("cells", [])
        printing = [c for c in cells if c["outputs"]]
        figures = sum("text" not in o for c in cells for o in c["outputs"]) + len(notebooks.figures(page))
        rows.append(record(task="docs", dataset="site", config=str(page.relative_to(DOCS)),
                           metric="cells with output",
                           value=len(printing), cells=len(running), figures=figures,
                           wall_s=saved.get("seconds") if saved else None, measured_on=(saved or {}).get("machine"),
                           device=device_name()))
    return rows


def diagram_rows() -> list[dict]:
    import diagrams

    marks = {}
    for page in DOCS.rglob("*.md"):
        for name in re.findall(r"<!--\s*docs:\s*diagram\s+(\S+)\s*-->", page.read_text(encoding="utf-8")):
            marks.setdefault(name, []).append(str(page.relative_to(DOCS)))
    return [record(task="docs", dataset="site", config="diagrams", metric="diagrams drawn",
                   value=len(diagrams.DIAGRAMS), placed=sum(bool(marks.get(n)) for n in diagrams.DIAGRAMS),
                   device=device_name())]


def exercise_rows() -> list[dict]:
    from seqlab import exercises as book

    rows = []
    for tutorial in book.TUTORIALS:
        found = book.exercises(tutorial)
        checked = sum(book.check(tutorial, e.number, e.answer()).correct and
                      not book.check(tutorial, e.number, e.wrong).correct for e in found)
        rows.append(record(task="docs", dataset="site", config=f"exercises {tutorial}", metric="exercises",
                           value=len(found), checks_passing=checked, kinds=", ".join(sorted({e.kind for e in found})),
                           hints=sum(len(e.hints) for e in found), device=device_name()))
    return rows


def reference_rows() -> list[dict]:
    """The option rows of the command pages (tests/test_reference.py holds each to its argparse action: name,
    type, choices, default) and the rows of the config page (each to its dataclass field)."""
    import dataclasses

    import generate

    from seqlab.cli.main import build_parser
    from seqlab.registry import FAMILIES

    options = sum(len(actions) for _, sub, _ in generate.commands(build_parser())
                  for _, actions in generate.shown_actions(sub))
    keys = sum(1 for family in FAMILIES.values() for group, cls in family.pipeline.groups.items()
               for f in dataclasses.fields(cls)
               if "help" in f.metadata and not (group == "model" and f.name in family.pipeline.derived))
    messages = sum(len(v) for v in generate.error_messages().values())
    return [record(task="docs", dataset="site", config="reference command pages", metric="option rows checked",
                   value=options, device=device_name()),
            record(task="docs", dataset="site", config="reference config page", metric="key rows", value=keys,
                   device=device_name()),
            record(task="docs", dataset="site", config="reference error messages", metric="messages with cause and fix",
                   value=messages, device=device_name())]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ci-seconds", type=float, help="a measured `time bash .ci/run` (wall seconds) to record")
    args = parser.parse_args(argv)
    rows = page_rows() + diagram_rows() + exercise_rows() + reference_rows()
    if args.ci_seconds:
        rows.append(record(task="docs", dataset="site", config="bash .ci/run", metric="CI wall seconds",
                           value=args.ci_seconds, wall_s=args.ci_seconds, device=device_name()))
    write_records("docs_site", rows, "What the documentation site shows a learner",
                  "Counted from the site's sources by benchmarks/docs_site.py: per page, the cells that print or "
                  "draw (value) of the cells that run (cells), the figures shown, and the seconds the page's recorded "
                  "run took (wall_s, on the machine named in measured_on); the diagrams; each tutorial's exercises "
                  "with their checks passing (right answer taken, wrong one refused).")
    for row in rows:
        print(row["config"], row["metric"], row["value"], {k: row.get(k) for k in ("cells", "checks_passing")
                                                          if row.get(k) is not None})
    return 0


if __name__ == "__main__":
    sys.exit(main())
