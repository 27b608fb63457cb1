"""The pages of a compare report: report.md (Markdown, figures as relative links) and report.html
(self-contained: inline CSS, every image a base64 `data:image/png` URI, no script, no link, nothing
fetched from anywhere; every text escaped), from the table's rows and the report's sections
(`seqlab.compare.report` makes both). The winner is highlighted and the figures come right after the
table: a page to look at rather than read. Also what the families' report sections share (`one_line`,
`safe_name`, `DAMAGED_RUN`)."""

from __future__ import annotations

import base64
import html
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from seqlab.errors import DAMAGED, SeqlabError
from seqlab.runs.records import duration, number

# what a run that cannot be read raises, and a model that cannot be loaded or run
DAMAGED_RUN = (SeqlabError, OSError, RuntimeError, *DAMAGED)

NOTE_CHARS = 160              # a row's note in the table: at most this long (the result's row keeps it whole)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
NUMERIC = ' class="n"'          # a table cell of figures, right-aligned


@dataclass
class Figure:
    """A PNG of the report, with its title."""

    title: str
    path: Path


@dataclass
class Section:
    """A part of the report: a heading and blocks, each one of ("text", str), ("pre", label, text),
    ("table", headers, rows) or ("figure", Figure)."""

    title: str
    blocks: list[Any] = field(default_factory=list)
    grid: bool = False                      # HTML: its figures side by side (small ones, such as confusion matrices)

    def text(self, words: str) -> None:
        self.blocks.append(("text", words))

    def figure(self, figure: Figure | None) -> None:
        if figure is not None:
            self.blocks.append(("figure", figure))


def table_cells(rows: list[dict[str, Any]], metric: str) -> tuple[list[str], list[list[str]]]:
    """The table's headers and cells as text."""
    headers = ["", "architecture", "parameters", "tokens/s", "wall time", "best step", f"valid {metric}",
               f"test {metric}", "status"]
    cells = []
    for row in rows:
        note = row["note"] if len(row["note"]) <= NOTE_CHARS else row["note"][:NOTE_CHARS - 1] + "…"
        status = row["status"] + (f" ({note})" if note else "")
        cells.append(["★ winner" if row["winner"] else "", row["arch"], figure(row["parameters"]),
                      figure(row["tokens_per_s"], speed=True),
                      duration(row["wall_time_s"]) if is_number(row["wall_time_s"]) else "—",
                      figure(row["best_step"]), figure(row["valid"]), figure(row["test"]), status])
    return headers, cells


def figure(value: object, speed: bool = False) -> str:
    """A figure of the table: `6,398`, `61.56`, `4.1201`; tokens/s without decimals from 100; — if none."""
    if not is_number(value):
        return "—"
    if speed and value >= 100:
        return f"{value:,.0f}"
    return number(value)


def legend(spec: dict[str, Any]) -> str:
    """What the table's columns are."""
    seeds = spec.get("seeds_headline") is not None        # several seeds: the rows are the first seed's runs
    return (f"valid / test {spec['metric']}: the final records of each run's metrics.jsonl (its best weights, "
            "picked on the validation set); best step: the step of those weights; tokens/s: training tokens per "
            "second; wall time: training time. " + ("Each row is the first seed's run; the winner is marked only "
                                                    "where its 95% interval over the seeds is apart from every "
                                                    "other's (Seeds)." if seeds else
                                                    "The winner has the best valid figure among the finished runs."))


def headline(spec: dict[str, Any], rows: list[dict[str, Any]], winner: dict[str, Any] | None) -> str:
    verdict = spec.get("seeds_headline")
    if isinstance(verdict, str):                          # several seeds: the Seeds section's verdict
        return verdict
    metric, better = spec["metric"], "lower" if spec["lower_is_better"] else "higher"
    if winner is None:
        return f"No run has finished yet: no winner (ranked by valid {metric}, {better} is better)."
    tied = [r["arch"] for r in rows if r is not winner and r["status"] == "finished" and r["valid"] == winner["valid"]]
    tie = f"; tied with {', '.join(tied)} (the first listed is marked)" if tied else ""
    return f"Winner: {winner['arch']}, valid {metric} {figure(winner['valid'])} ({better} is better{tie})."


def subtitle(spec: dict[str, Any]) -> str:
    given = spec.get("budget")
    budget = given if isinstance(given, dict) else {}
    parts = [f"task {spec['task']}"]
    parts += [f"budget {duration(v) if k == 'time_s' and is_number(v) else figure(v)} {'' if k == 'time_s' else k}"
              .strip() for k, v in budget.items()]
    parts += [f"{key} {spec[key]}" for key in ("size", "started", "seqlab_version") if isinstance(spec.get(key), str)]
    return ", ".join(parts)


def md_cell(text: str) -> str:
    """Text in a Markdown table cell or line: pipes and backslashes escaped, angle brackets as entities
    (Markdown passes HTML through), one line."""
    return (str(text).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
            .replace("\n", " "))


def md_table(headers: list[str], cells: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(md_cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    return lines + ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in cells]


def render_markdown(spec: dict[str, Any], rows: list[dict[str, Any]], winner: dict[str, Any] | None,
                    sections: list[Section], directory: Path) -> str:
    """report.md: the table, then each section, figures as relative links."""
    lines = [f"# seqlab compare: {spec['task']}", "", md_cell(subtitle(spec)), "",
             f"**{md_cell(headline(spec, rows, winner))}**", ""]
    lines += md_table(*table_cells(rows, spec["metric"])) + ["", f"*{md_cell(legend(spec))}*", ""]
    if isinstance(spec.get("command"), str):
        lines += ["```sh", spec["command"], "```", ""]
    for section in sections:
        lines += [f"## {section.title}", ""]
        for block in section.blocks:
            if block[0] == "text":
                lines += [block[1], ""]
            elif block[0] == "pre":
                fence = "`" * max(3, 1 + max((len(run) for run in re.findall("`+", block[2])), default=0))
                lines += [f"**{md_cell(block[1])}**", "", fence + "text", block[2], fence, ""]
            elif block[0] == "table":
                lines += md_table(block[1], block[2]) + [""]
            else:
                link = Path(os.path.relpath(block[1].path, directory)).as_posix()
                lines += [f"![{md_cell(block[1].title)}]({link})", ""]
    return "\n".join(lines)


CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1100px;
       padding: 0 1em; color: #222; }
h1 { margin-bottom: 0.2em; } .sub { color: #666; margin-top: 0; }
.win { background: #fff4c2; border-left: 6px solid #e0a800; padding: 0.6em 1em; font-size: 1.15em; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.95em; }
th, td { border-bottom: 1px solid #ddd; padding: 0.35em 0.7em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.winner td { background: #fff4c2; font-weight: 600; } tr.off td { color: #999; }
figure { margin: 1.2em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: 0.9em; } pre { background: #f7f7f7; padding: 0.7em; white-space: pre-wrap; }
code { background: #f3f3f3; padding: 0.1em 0.3em; }
.grid { display: flex; flex-wrap: wrap; gap: 1em; } .grid figure { flex: 1 1 300px; max-width: 480px; }
"""


def render_html(spec: dict[str, Any], rows: list[dict[str, Any]], winner: dict[str, Any] | None,
                sections: list[Section]) -> str:
    """report.html: self-contained (inline CSS, images as data: URIs), the winner highlighted, figures
    right after the table."""
    e = html.escape
    headers, cells = table_cells(rows, spec["metric"])
    numeric = range(2, 8)
    body = [f"<h1>seqlab compare: {e(spec['task'])}</h1>", f"<p class=\"sub\">{e(subtitle(spec))}</p>",
            f"<p class=\"win\">{e(headline(spec, rows, winner))}</p>", "<table>",
            "<tr>" + "".join(f"<th>{e(h)}</th>" for h in headers) + "</tr>"]
    for row, texts in zip(rows, cells, strict=True):
        kind = " class=\"winner\"" if row["winner"] else ("" if row["status"] == "finished" else " class=\"off\"")
        body.append(f"<tr{kind}>" + "".join(
            f"<td{NUMERIC if i in numeric else ''}>{e(t)}</td>" for i, t in enumerate(texts)) + "</tr>")
    body.append(f"</table><p class=\"sub\">{e(legend(spec))}</p>")
    if isinstance(spec.get("command"), str):
        body.append(f"<p><code>{e(spec['command'])}</code></p>")
    for section in sections:
        body.append(f"<h2>{e(section.title)}</h2>" + ("<div class=\"grid\">" if section.grid else ""))
        for block in section.blocks:
            if block[0] == "text":
                body.append(f"<p>{e(block[1])}</p>")
            elif block[0] == "pre":
                body.append(f"<h3>{e(block[1])}</h3><pre>{e(block[2])}</pre>")
            elif block[0] == "table":
                body.append("<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in block[1]) + "</tr>" + "".join(
                    "<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in block[2]) + "</table>")
            else:
                body.append(inline_figure(block[1]))
        if section.grid:
            body.append("</div>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>seqlab compare: {e(spec['task'])}</title><style>{CSS}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def inline_figure(fig: Figure) -> str:
    """A figure as <figure><img src="data:image/png;base64,..."> (a file that is not a PNG: a note)."""
    e = html.escape
    try:
        data = fig.path.read_bytes()
    except OSError as error:
        return f"<p>{e(fig.title)}: the image cannot be read ({e(error.strerror or str(error))})</p>"
    if not data.startswith(PNG_MAGIC):
        return f"<p>{e(fig.title)}: {e(fig.path.name)} is not a PNG image</p>"
    return (f"<figure><img alt=\"{e(fig.title)}\" src=\"data:image/png;base64,{base64.b64encode(data).decode()}\">"
            f"<figcaption>{e(fig.title)}</figcaption></figure>")


def is_number(value: object) -> TypeGuard[float]:                # an int or a float, not a bool
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def safe_name(arch: str) -> str:
    """An architecture's name as a file name."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", arch) or "_"


def one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__
