"""Every page of the site as a Jupyter notebook, and the runner that executes it: the same code, in the same order,
in CI (`tests/test_docs.py`), on the site (each tutorial's "open as a notebook" download) and by hand:

    python docs/hooks/notebooks.py docs/tutorials/rnn-lm.md --record   # run the page; keep what it prints
    python docs/hooks/notebooks.py docs/tutorials/rnn-lm.md            # run it; compare with what it printed
    python docs/hooks/notebooks.py docs/tutorials/rnn-lm.md --figures  # ... and copy its figures into docs/
    python docs/hooks/notebooks.py docs/tutorials/rnn-lm.md --write x.ipynb   # the notebook a reader downloads

How a page's fenced blocks run (a page is a notebook whose cells are its fences, top to bottom, in one kernel whose
working directory is a fresh folder, after an install cell that does nothing where seqlab is installed):

    ```python            a code cell
    ```bash              a `%%bash` cell, run with `set -euo pipefail` (commands only: no `$ ` prompts)
    <!-- docs: file NAME -->   before a fence: its text written to NAME (`%%writefile`), e.g. a config file
    <!-- docs: skip REASON --> before a fence: shown, not run (a REASON is required: e.g. it needs two machines)
    <!-- docs: varies REASON --> before a fence: its output is not compared, only that it prints (sampled text)
    <!-- docs: tolerance 20% REASON --> before a fence: its numbers held within 20%, not 5% (a small model's BLEU
                                    moves with the CPU's rounding)
    ```text, ```console, ```json ... (any other language, or none): output shown to the reader, not run

A bash block in a `=== "CLI"` tab beside a `=== "Python"` tab runs in a scratch copy of the working folder: the
notebook a reader downloads holds the Python tab (the CLI shown as text), and must run without what the CLI tab
made; both tabs write the same paths.

Lines replaced before the page is split (`expand`): `<!-- docs: source seqlab.x.y -->` (the source of a function
or class, from the code), `<!-- docs: exercises TUTORIAL -->` (`seqlab.exercises`), `<!-- docs: diagram NAME -->`
(docs/hooks/diagrams.py).

What each cell printed (its text, its figures) is recorded by `--record` in docs/outputs/PAGE.json with the hash
of the block's code; the site shows it under the block (`render`, from the MkDocs hook), the downloadable notebook
holds it. The default tests fail when a block changed since its outputs were recorded; the slow tests re-run every
page and fail when an output drifts (`drift`): the same words once dates, times, rates, sizes and temporary paths
are masked, every number within 5% (or 0.02) of the one the page shows.

Masked: dates, clock times, durations and speeds (a number with its unit, or under a key that names a time or a
speed: 'elapsed': 3.7), sizes in bytes, temporary paths, hashes, ports and pids, a machine's FLOP/s, and the
progress lines a long loop prints every 30 s (there on a slow machine only).

A figure the page shows as `figures/PAGE/NAME.png` (relative to the page) is made by the page's code as `NAME.png`
in its working folder; `--figures` copies it to `docs/.../figures/PAGE/NAME.png`, and the test fails when the page
did not make it.
"""

from __future__ import annotations

import argparse
import os
import posixpath
import re
import shutil
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)$")   # indented: in a tab or a note
MARK = re.compile(r"^<!--\s*docs:\s*(?P<kind>skip|file|varies|tolerance)\b\s*(?P<arg>.*?)\s*-->\s*$")
# a line of prose replaced by generated Markdown, before the page is split (on the site, in the notebook, in CI)
EXPAND = re.compile(r"^(?P<indent> *)<!--\s*docs:\s*(?P<kind>source|exercises|diagram)\b\s*(?P<arg>.*?)\s*-->\s*$")
TAB = re.compile(r'^===\+?\s+"(?P<title>[^"]*)"')
RUN = {"python": "python", "py": "python", "bash": "bash", "sh": "bash", "shell": "bash"}
FIGURE = re.compile(r"!\[[^\]]*\]\((figures/[^)\s]+\.png)\)")
CLI_TABS = ("CLI", "Command line", "Shell")


@dataclass
class Block:
    """A fenced block of a page: its language, its text, the line it starts on and its `docs:` mark; where it sits
    in the expanded page (`start`, `end`: the lines of its fences, 0-based) and the tab it is in (a tab group's
    CLI tab with a Python sibling is `side`: it runs in a scratch copy of the working folder, and the notebook shows
    it as text)."""

    language: str
    text: str
    line: int
    mark: str = ""          # "", "skip", "file", "varies"
    argument: str = ""      # the skip's reason, the file's name, why the output varies
    indent: str = ""
    start: int = 0
    end: int = 0
    tab: str = ""           # the title of the tab it is in ("" outside tabs)
    group: int = -1         # its tab group (-1 outside tabs)
    side: bool = False

    @property
    def runs(self) -> str | None:
        """"python", "bash", "file", or None (shown, not run)."""
        if self.mark == "skip":
            return None
        if self.mark == "file":
            return "file"
        return RUN.get(self.language)

    @property
    def sha(self) -> str:
        import hashlib

        return hashlib.sha256(self.text.encode()).hexdigest()[:16]


# ------------------------------------------------------------------------------------ generated parts of a page
def source_block(dotted: str, indent: str = "", where: str = "page") -> list[str]:
    """`<!-- docs: source seqlab.nn.cells.elman_cell -->`: the source of a function, class or method of seqlab,
    read from the code when the page is built (so it cannot drift), shown under its file and lines, not run."""
    import importlib
    import inspect

    parts = dotted.split(".")
    target = None
    for cut in range(len(parts) - 1, 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        try:
            for name in parts[cut:]:
                target = getattr(target, name)
        except AttributeError:
            target = None
        break
    if target is None or not dotted.startswith("seqlab."):
        raise ValueError(f"{where}: `docs: source {dotted}`: no such function or class of seqlab")
    code, first = inspect.getsourcelines(inspect.unwrap(target))
    path = Path(inspect.getsourcefile(inspect.unwrap(target))).resolve()
    try:
        shown = path.relative_to(Path(__file__).resolve().parents[2])
    except ValueError:
        shown = Path("src", *path.parts[path.parts.index("seqlab"):])
    body = textwrap.dedent("".join(code)).rstrip("\n").split("\n")
    title = f"{shown}, lines {first}-{first + len(code) - 1}"
    return [f"{indent}<!-- docs: skip the source of {dotted}, shown from the code -->",
            f'{indent}```python title="{title}"', *(indent + ln if ln else ln for ln in body), f"{indent}```"]


def exercises_section(tutorial: str, indent: str = "", where: str = "page") -> list[str]:
    """`<!-- docs: exercises TUTORIAL -->`: the tutorial's exercises (`seqlab.exercises`), each with its prompt, a
    cell that checks an answer, and its hints folded; the solutions are on a page of their own."""
    from seqlab import exercises as book

    found = book.exercises(tutorial)
    if not found:
        raise ValueError(f"{where}: `docs: exercises {tutorial}`: seqlab.exercises has none for {tutorial}")
    out = ["## Exercises", "",
           f"Each exercise has a check: put your answer in `answer` and run its cell (or, from a shell, `seqlab "
           f"exercises {tutorial} N --check ANSWER`). The hints unfold one at a time; the worked solutions, for "
           f"teachers, are on [their own page](solutions.md#{tutorial}).", ""]
    for exercise in found:
        out += [f"### {exercise.number}. {exercise.title} {{#exercise-{tutorial}-{exercise.number}}}", "",
                f"*{exercise.kind}*", "", exercise.prompt.strip(), "", "```python",
                "from seqlab.exercises import check", "", f"answer = {exercise.placeholder}    # your answer",
                f"check({tutorial!r}, {exercise.number}, answer)", "```", ""]
        for k, text in enumerate(exercise.hints, 1):
            out += [f'<details class="tip" markdown="1"><summary>Hint {k}</summary>', "", text.strip(), "",
                    "</details>", ""]
    return [indent + ln if ln else ln for ln in "\n".join(out).split("\n")]


def diagram_block(name: str, indent: str = "", where: str = "page") -> list[str]:
    """`<!-- docs: diagram NAME -->`: a diagram drawn by code (docs/hooks/diagrams.py), inline SVG."""
    import diagrams

    try:
        return [indent + ln if ln else ln for ln in diagrams.markdown(name).split("\n")]
    except KeyError:
        raise ValueError(f"{where}: `docs: diagram {name}`: no such diagram in docs/hooks/diagrams.py") from None


EXPANDERS = {"source": source_block, "exercises": exercises_section, "diagram": diagram_block}


def expand(text: str, where: str = "page") -> tuple[str, list[int]]:
    """The page with each `docs: source|exercises|diagram` line replaced by what it names, and for each line of
    the result the line of the page it comes from (1-based), so that messages name the page's own lines."""
    out: list[str] = []
    origin: list[int] = []
    for number, line in enumerate(text.split("\n"), 1):
        found = EXPAND.match(line)
        if found:
            made = "\n".join(EXPANDERS[found["kind"]](found["arg"], found["indent"], f"{where}:{number}")).split("\n")
            out += made
            origin += [number] * len(made)
        else:
            out.append(line)
            origin.append(number)
    return "\n".join(out), origin


def split(text: str, where: str = "page", expanded: bool = False) -> list[str | Block]:
    """The page as markdown text and fenced blocks, in order. A malformed mark (a skip without its reason, a
    mark not followed by a fence) is refused: the page's examples must all run or say why not. `expanded`: the
    text is already `expand`ed."""
    if expanded:
        origin = list(range(1, text.count("\n") + 2))
    else:
        text, origin = expand(text, where)
    lines = text.split("\n")
    parts: list[str | Block] = []
    prose: list[str] = []
    tab, group, groups, in_group = "", -1, 0, False
    i = 0
    while i < len(lines):
        found = FENCE.match(lines[i])
        if not found:
            tabbed = TAB.match(lines[i])
            if tabbed:
                if not in_group:
                    group, groups, in_group = groups, groups + 1, True
                tab = tabbed["title"]
            elif lines[i].strip() and not lines[i].startswith(" "):
                tab, group, in_group = "", -1, False
            prose.append(lines[i])
            i += 1
            continue
        fence, info = found["fence"], found["info"].strip()
        language = info.split()[0].lstrip("{.").rstrip("}") if info else ""
        body, j = [], i + 1
        while j < len(lines) and not (lines[j].strip().startswith(fence) and lines[j].strip() == fence[0] *
                                      len(lines[j].strip())):
            body.append(lines[j][len(found["indent"]):])
            j += 1
        if j == len(lines):
            raise ValueError(f"{where}:{origin[i]}: a fence that is never closed")
        mark = argument = ""
        previous = next((k for k in range(len(prose) - 1, -1, -1) if prose[k].strip()), None)
        if previous is not None and MARK.match(prose[previous].strip()):
            m = MARK.match(prose[previous].strip())
            mark, argument = m["kind"], m["arg"]
            if not argument or (mark == "tolerance" and not re.match(r"\d+(\.\d+)?%\s+\S", argument)):
                needs = {"file": "a file name", "tolerance": "a percentage and a reason (20% BLEU of 40 "
                         "sentences)"}.get(mark, "a reason")
                raise ValueError(f"{where}:{origin[i] - 1}: `docs: {mark}` needs {needs}")
        if prose:
            parts.append("\n".join(prose))
            prose = []
        inside = bool(found["indent"]) and tab != ""
        if not found["indent"]:
            tab, group, in_group = "", -1, False
        parts.append(Block(language, "\n".join(body), origin[i], mark, argument, found["indent"], i, j,
                           tab if inside else "", group if inside else -1))
        i = j + 1
    if prose:
        parts.append("\n".join(prose))
    for k, part in enumerate(parts):
        if isinstance(part, str):
            marks = [ln.strip() for ln in part.split("\n") if MARK.match(ln.strip())]
            last = [ln.strip() for ln in part.split("\n") if ln.strip()][-1:]
            followed = k + 1 < len(parts) and isinstance(parts[k + 1], Block)
            for mark in marks:
                if mark != last[0] or not followed:
                    raise ValueError(f"{where}: `{mark}` is not followed by a fenced block")
    found_blocks = [p for p in parts if isinstance(p, Block)]
    python_groups = {b.group for b in found_blocks if b.group >= 0 and b.tab == "Python" and b.runs == "python"}
    for b in found_blocks:
        b.side = b.group in python_groups and b.tab in CLI_TABS and b.runs == "bash"
    return parts


def blocks(text: str, where: str = "page") -> list[Block]:
    return [p for p in split(text, where) if isinstance(p, Block)]


# ------------------------------------------------------------------------------------------- running a page
DOCS = Path(__file__).resolve().parents[1]
OUTPUTS = DOCS / "outputs"            # the recorded outputs: docs/outputs/<page path>.json (not part of the site)
INSTALL = """\
# seqlab (and PyTorch) in this notebook's Python, if it lacks them. seqlab installs from a clone of its repository:
# set SEQLAB_SOURCE to the clone's folder (or a wheel), or install it yourself: pip install -e /path/to/seqlab
import importlib.util, os, subprocess, sys
if importlib.util.find_spec("seqlab") is None:
    source = os.environ.get("SEQLAB_SOURCE")
    if not source:
        raise SystemExit("seqlab is not installed here: set SEQLAB_SOURCE to a clone of seqlab and run this cell again")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torch>=2.4", source], check=True)
import seqlab
print("seqlab", seqlab.__version__)"""


def record_path(path: Path) -> Path:
    """Where a page's recorded outputs are kept: docs/outputs/<its path under docs/>.json (README.md: README.json)."""
    path = Path(path).resolve()
    try:
        relative = path.relative_to(DOCS)
    except ValueError:
        relative = Path(path.name)
    return OUTPUTS / relative.with_suffix(".json")


def cells_to_run(path: Path, side_folder: Path | None = None) -> list[tuple[Block | None, str]]:
    """The code cells a page's run executes, in order: the install cell (block None), then each block that runs. A
    CLI tab with a Python sibling runs in `side_folder`, a fresh copy of the working folder, so that what it makes
    is not what later cells read: the notebook holds the Python tab alone, and must run without the CLI tab."""
    cells: list[tuple[Block | None, str]] = [(None, INSTALL)]
    for block in blocks(path.read_text(encoding="utf-8"), str(path)):
        if block.runs == "python":
            cells.append((block, block.text))
        elif block.runs == "bash" and block.side:
            side = str(side_folder or "../cli-tab")
            cells.append((block, f'%%bash\nset -euo pipefail\nrm -rf "{side}" && mkdir -p "{side}" && cp -a . '
                                 f'"{side}/" && cd "{side}"\n{block.text}'))
        elif block.runs == "bash":
            cells.append((block, "%%bash\nset -euo pipefail\n" + block.text))
        elif block.runs == "file":
            cells.append((block, f"%%writefile {block.argument}\n{block.text}"))
    return cells


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def clean_text(text: str) -> str:
    """A cell's text output as a terminal would leave it: colour codes dropped, a line rewritten by `\r` (a
    progress bar) kept as its last state."""
    text = ANSI.sub("", text)
    return "\n".join(line.rsplit("\r", 1)[-1] if "\r" in line.rstrip("\r") else line.rstrip("\r")
                     for line in text.split("\n"))


def outputs_of(cell) -> list[dict]:
    """A run cell's outputs as records: {"text": ...} (the streams, in order, stdout and stderr together, and a
    result's text) or {"png": base64} / {"svg": text} (a figure shown by the cell)."""
    found: list[dict] = []
    for output in cell.get("outputs", []):
        kind = output.get("output_type")
        if kind == "stream":
            text = clean_text(output.get("text", ""))
            if found and "text" in found[-1]:
                found[-1]["text"] += text
            else:
                found.append({"text": text})
        elif kind in ("execute_result", "display_data"):
            data = output.get("data", {})
            if "image/png" in data:
                found.append({"png": data["image/png"].replace("\n", "")})
            elif "image/svg+xml" in data:
                found.append({"svg": data["image/svg+xml"]})
            elif "text/plain" in data:
                text = clean_text(data["text/plain"]) + "\n"
                if found and "text" in found[-1]:
                    found[-1]["text"] += text
                else:
                    found.append({"text": text})
        elif kind == "error":
            found.append({"text": clean_text("\n".join(output.get("traceback", [])))})
    for item in found:
        if "text" in item:
            item["text"] = item["text"].rstrip("\n")
    return [item for item in found if item.get("text", True)]


def machine() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().split("\n"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip() + f", {os.cpu_count()} cores"
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


class PageFailed(Exception):
    pass


def run(path: Path, workdir: Path | None = None, timeout: int = 600, copy_figures: bool = False) -> dict:
    """Execute the page in `workdir` (a fresh folder by default) and return its record: {"page", "machine",
    "date", "seconds", "cells": [{"line", "sha", "side", "seconds", "outputs"}]}. A failing cell raises PageFailed
    naming the page's line; a figure the page shows that its code did not make, too."""
    import nbclient
    import nbformat
    from nbclient.exceptions import CellExecutionError

    path = Path(path).resolve()
    owned = workdir is None
    base = Path(tempfile.mkdtemp(prefix="seqlab-docs-")) if owned else Path(workdir)
    workdir = base / "page" if owned else base
    workdir.mkdir(parents=True, exist_ok=True)
    side = workdir.parent / f"{workdir.name}-cli-tab"
    cells = cells_to_run(path, side)
    book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code) for _, code in cells])
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    os.environ.setdefault("MPLBACKEND", "Agg")       # the kernel inherits these: `seqlab` of this Python; no display;
    os.environ.setdefault("OMP_NUM_THREADS", "1")   # one thread: the pages train tiny models, and CI runs beside them
    os.environ.setdefault("COLUMNS", "100")          # what a CLI wraps its tables to
    start = time.perf_counter()
    client = nbclient.NotebookClient(book, timeout=timeout, kernel_name="python3", record_timing=True,
                                     resources={"metadata": {"path": str(workdir)}})
    # the kernel runs as a reader's would: none of seqlab's settings of the process that runs it (the tests'
    # shared SEQLAB_CACHE_DIR would move every prepared folder, and the page print another path)
    hidden = {k: os.environ.pop(k) for k in [k for k in os.environ if k.startswith("SEQLAB_")]}
    try:
        client.execute()
    except CellExecutionError as error:
        failed = next((k for k, c in enumerate(book.cells) if any(
            o.get("output_type") == "error" for o in c.get("outputs", []))), None)
        block = cells[failed][0] if failed is not None else None
        raise PageFailed(f"{path}:{block.line if block else 0}: the example failed:\n"
                         f"{block.text if block else ''}\n{str(error)[-3000:]}") from None
    except Exception as error:             # a cell that ran past the timeout, a kernel that died
        raise PageFailed(f"{path}: {type(error).__name__}: {error}") from None
    finally:
        os.environ.update(hidden)
        shutil.rmtree(side, ignore_errors=True)
    record = {"page": str(path.relative_to(DOCS)) if DOCS in path.parents else path.name, "machine": machine(),
              "date": time.strftime("%Y-%m-%d"), "seconds": round(time.perf_counter() - start, 1), "cells": []}
    for (block, _), cell in zip(cells, book.cells, strict=True):
        if block is None:
            continue
        timing = cell.metadata.get("execution", {})
        seconds = _seconds(timing.get("iopub.execute_input"), timing.get("shell.execute_reply"))
        record["cells"].append({"line": block.line, "sha": block.sha, "side": block.side, "seconds": seconds,
                                "outputs": [] if block.runs == "file" else outputs_of(cell)})
    missing, copied = [], []
    for figure in figures(path):
        made = workdir / Path(figure).name
        if not made.exists():
            missing.append(figure)
        elif copy_figures:
            target = path.parent / figure
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(made, target)
            copied.append(str(target))
    if missing:
        raise PageFailed(f"{path}: the page shows {', '.join(missing)} but its code did not make "
                         f"{', '.join(Path(m).name for m in missing)} in its working folder")
    if owned:
        shutil.rmtree(base, ignore_errors=True)
    record["figures"] = copied
    return record


def _seconds(start: str | None, end: str | None) -> float | None:
    from datetime import datetime

    try:
        return round((datetime.fromisoformat(end.replace("Z", "+00:00")) -
                      datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds(), 2)
    except (AttributeError, ValueError):
        return None


def save_record(path: Path, record: dict) -> Path:
    import json

    target = record_path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    kept = {k: v for k, v in record.items() if k != "figures"}
    tmp = target.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(kept, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, target)
    return target


def load_record(path: Path) -> dict | None:
    import json

    target = record_path(path)
    return json.loads(target.read_text(encoding="utf-8")) if target.exists() else None


def stale(path: Path, record: dict | None) -> list[str]:
    """Why a page's recorded outputs are not those of its code: a block that runs was added, removed or changed
    since the record was made (empty when they match)."""
    running = [b for b in blocks(Path(path).read_text(encoding="utf-8"), str(path)) if b.runs]
    if record is None:
        return [f"{path}: no recorded outputs (python docs/hooks/notebooks.py --record {path})"] if running else []
    cells = record["cells"]
    problems = []
    for k, block in enumerate(running):
        if k >= len(cells) or cells[k]["sha"] != block.sha:
            problems.append(f"{path}:{block.line}: the block changed since its outputs were recorded")
    if len(cells) > len(running):
        problems.append(f"{path}: {len(cells) - len(running)} recorded cells have no block any more")
    return problems


# -------------------------------------------------------------------------------- outputs drifting from the page
TOLERANCE = 0.05          # numbers: within 5% of the shown value (relative), or 0.02 (absolute) for small ones
ABSOLUTE = 0.02
MASKS = [
    (re.compile(r"\b\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?\S*)?"), "‹date›"),
    (re.compile(r"\b\d+:\d{2}(:\d{2})?(\.\d+)?\b"), "‹clock›"),
    (re.compile(r"(/tmp|/var/folders|/private/var)/[^\s'\",)\]]+"), "‹path›"),
    (re.compile(r"(?<![.\d])\b(?=[0-9a-f]*[a-f])[0-9a-f]{12,64}\b(?![-+]\d)"), "‹hash›"),   # not 1.43...e-06
    (re.compile(r"(\d[\d,]*\.?\d*(e[-+]?\d+)?)\s*(tokens|tok|it|samples|sentences|examples|chars|characters|"
                r"requests|words|batches|steps|pairs|lines)\s*/\s*(s|sec|second|min)\b", re.I), "‹rate›"),
    (re.compile(r"(\d[\d,]*\.?\d*)\s*[kMGTP]?FLOP/s\b"), "‹rate›"),                 # the machine's speed
    (re.compile(r"\bMFU\s*(\d[\d,]*\.?\d*)\s*%|(\d[\d,]*\.?\d*)\s*%\s*MFU"), "‹MFU›"),
    (re.compile(r"(\d[\d,]*\.?\d*)\s*(ms|µs|us|s|sec|secs|seconds|min|mins|minutes|h|hours)\b"), "‹time›"),
    (re.compile(r"(\d[\d,]*\.?\d*)\s*(B|KB|kB|MB|GB|KiB|MiB|GiB|bytes)\b"), "‹size›"),
    # the CPU's model name, as environment.json and the benchmark rows write it ("AMD EPYC, 1 threads of 2 cores")
    (re.compile(r"\b(Intel\(R\)|AMD|Apple|ARM|Neoverse)[^,'\"\n]*(?=, \d+ threads?\b)"), "‹cpu›"),
    (re.compile(r"\bpid \d+|port \d+|127\.0\.0\.1:\d+|localhost:\d+"), "‹process›"),
    # --precision auto's choice and its reason name the CPU's bf16 kernels (AMX-BF16, AVX512-BF16, none), and a
    # large model's choice itself moves with them: the machine's, like its peak (the rule: tests/test_devices.py)
    (re.compile(r"^precision: (fp32|bf16 autocast) \(auto: .*$", re.M), "precision: ‹auto›"),
    (re.compile(r" \(bf16 products\)"), ""),
]
FIGURE_TEXT = r"[-+]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"    # 1,234.5e-3
# a value whose key says it is a time or a speed, in a printed dict or JSON ('elapsed': 3.73, "wall_s": 12.1, "mfu":
# 3.3, the share of the machine's peak, which moves with its load)
TIMED = re.compile(r"""(?P<key>['"]?\w*(?:elapsed|startup|seconds|time|wall|latency|duration|per_s|_s|_ms|speed|"""
                   r"""rate|throughput|mfu)\w*['"]?\s*[:=]\s*)""" + FIGURE_TEXT, re.I)
# a progress line seqlab prints every SEQLAB_PROGRESS_EVERY seconds of a long loop: there on a slow machine only
PROGRESS = re.compile(r"^.*\belapsed \d+:\d{2}(:\d{2})?\b.*$\n?", re.M)
NUMBER = re.compile(FIGURE_TEXT)


SPEED_COLUMN = re.compile(r"tokens/s|/s\b|per s|wall|time|seconds|elapsed|speed|latency|throughput|^\s*m?s\s*$",
                          re.I)


def _timed_columns(text: str) -> str:
    """A Markdown table's cells under a header that names a time or a speed (`tokens/s`, `wall time`) masked."""
    lines, out, columns = text.split("\n"), [], set()
    for k, line in enumerate(lines):
        if line.lstrip().startswith("|"):
            cells = line.split("|")
            following = lines[k + 1] if k + 1 < len(lines) else ""
            if re.fullmatch(r"\s*\|?[\s:|-]+\|?\s*", following) and "-" in following:      # a header row
                columns = {j for j, cell in enumerate(cells) if SPEED_COLUMN.search(cell)}
            elif columns and not re.fullmatch(r"\s*\|?[\s:|-]+\|?\s*", line):
                cells = [("‹time›" if j in columns and cell.strip() else cell) for j, cell in enumerate(cells)]
                line = "|".join(cells)
        else:
            columns = set()
        out.append(line)
    return "\n".join(out)


def masked(text: str) -> str:
    text = PROGRESS.sub("", text)
    text = _timed_columns(text)
    text = TIMED.sub(lambda m: m["key"] + "‹time›", text)
    for pattern, replacement in MASKS:
        text = pattern.sub(replacement, text)
    return re.sub(r"[ \t]+", " ", text)            # columns padded to a time's width: the same words


def _numbers(text: str) -> tuple[str, list[float]]:
    values = []

    def keep(match: re.Match) -> str:
        try:
            values.append(float(match.group(0).replace(",", "")))
        except ValueError:
            return match.group(0)
        return "#"
    return NUMBER.sub(keep, text), values


def drift(shown: str, now: str, rel: float = TOLERANCE, absolute: float = ABSOLUTE) -> str | None:
    """Why `now` (a fresh run's text output) is not what the page shows, or None: the same words once dates,
    times, rates, sizes and temporary paths are masked, and every number within the tolerance. The lines may come
    in another order (a command's stdout and stderr reach the cell in the order the pipes deliver them)."""
    why = _drift_in_order(masked(shown), masked(now), rel, absolute)
    if why is None:
        return None
    a_lines, b_lines = (sorted(masked(t).split("\n"), key=lambda ln: _numbers(ln)[0]) for t in (shown, now))
    if [_numbers(ln)[0] for ln in a_lines] != [_numbers(ln)[0] for ln in b_lines]:
        return why                                   # other words: the first difference in the page's order
    return _drift_in_order("\n".join(a_lines), "\n".join(b_lines), rel, absolute)


def _drift_in_order(shown: str, now: str, rel: float, absolute: float) -> str | None:
    a_words, a_values = _numbers(shown)
    b_words, b_values = _numbers(now)
    if a_words != b_words:
        import difflib

        a_lines, b_lines = a_words.split("\n"), b_words.split("\n")
        for left, right in zip(a_lines, b_lines, strict=False):
            if left != right:
                return f"the page shows {left.strip()!r}, the run prints {right.strip()!r}"
        return (f"the page shows {len(a_lines)} lines, the run prints {len(b_lines)}: " +
                "; ".join(difflib.unified_diff(a_lines, b_lines, lineterm="", n=0))[:300])
    for x, y in zip(a_values, b_values, strict=True):
        if abs(x - y) > max(absolute, rel * max(abs(x), abs(y))):
            return f"the page shows {x:g}, the run prints {y:g} (beyond {rel:.0%})"
    return None


def compare(path: Path, shown: dict, now: dict) -> list[str]:
    """The cells of a fresh run whose outputs drifted from the recorded ones the page shows. A block marked
    `<!-- docs: varies REASON -->` need only print something, as it did."""
    problems = []
    marks = {b.sha: b for b in blocks(Path(path).read_text(encoding="utf-8"), str(path)) if b.runs}
    for old, new in zip(shown["cells"], now["cells"], strict=False):
        block = marks.get(new["sha"])
        where = f"{path}:{new['line']}"
        if old["sha"] != new["sha"]:
            problems.append(f"{where}: the recorded outputs are of another version of this block: re-record")
            continue
        old_text = "\n".join(o["text"] for o in old["outputs"] if "text" in o)
        new_text = "\n".join(o["text"] for o in new["outputs"] if "text" in o)
        old_images = sum("text" not in o for o in old["outputs"])
        new_images = sum("text" not in o for o in new["outputs"])
        if old_images != new_images:
            problems.append(f"{where}: the page shows {old_images} figures, the run draws {new_images}")
        if block is not None and block.mark == "varies":
            if bool(old_text.strip()) != bool(new_text.strip()):
                problems.append(f"{where}: the page shows {'some' if old_text.strip() else 'no'} output, the run "
                                f"prints {'some' if new_text.strip() else 'none'}")
            continue
        rel = float(block.argument.split("%")[0]) / 100 if block is not None and block.mark == "tolerance" \
            else TOLERANCE
        why = drift(old_text, new_text, rel=rel)
        if why:
            problems.append(f"{where}: {why}")
    if len(shown["cells"]) != len(now["cells"]):
        problems.append(f"{path}: {len(shown['cells'])} cells recorded, {len(now['cells'])} run")
    return problems


# ---------------------------------------------------------------------------------- outputs shown on the site
SHOWN_LINES = 40          # an output longer than this is shown as its first and last lines


def shown_text(text: str) -> str:
    lines = text.split("\n")
    if len(lines) <= SHOWN_LINES:
        return text
    head, tail = lines[:SHOWN_LINES // 2], lines[-(SHOWN_LINES // 2 - 5):]
    return "\n".join(head + [f"… ({len(lines) - len(head) - len(tail)} lines more)"] + tail)


def fence_for(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`{3,}", text)), default=2)
    return "`" * max(3, longest + 1)


def render(markdown: str, path: Path, record: dict | None, image_url=None) -> tuple[str, list[str]]:
    """The page's Markdown (already expanded) with each block's recorded outputs under it, and the problems (a
    block whose record is missing or stale). `image_url(k, j, kind)` names the file of a cell's figure."""
    parts = [b for b in split(markdown, str(path), expanded=True) if isinstance(b, Block) and b.runs]
    problems = stale(path, record) if record is not None else []
    if record is None:
        return markdown, [f"{path}: no recorded outputs"] if parts else []
    lines = markdown.split("\n")
    cells = record["cells"]
    for k in range(len(parts) - 1, -1, -1):
        block = parts[k]
        if k >= len(cells) or cells[k]["sha"] != block.sha or block.runs == "file":
            continue
        out: list[str] = []
        for j, output in enumerate(cells[k]["outputs"]):
            if "text" in output:
                text = shown_text(output["text"])
                fence = fence_for(text)
                out += ["", f'{fence}{{.text .seqlab-output title="output"}}', *text.split("\n"), fence]
            elif image_url is not None:
                kind = "png" if "png" in output else "svg"
                out += ["", f"![output of the cell above]({image_url(k, j, kind)}){{ .seqlab-output }}"]
        indent = block.indent
        lines[block.end + 1:block.end + 1] = [indent + ln if ln else ln for ln in out]
    return "\n".join(lines), problems


# ------------------------------------------------------------------------------------ the downloadable notebook
LINK = re.compile(r"(?<!!)\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)\)")


def site_link(target: str, site_url: str = "", page: str = "") -> str:
    """A link of a page as the notebook needs it: a page of the site (`x.md#a` -> `x.html#a`, under `site_url`
    when the site has one), anything else as it is."""
    if re.match(r"^[a-z]+:|^#", target):
        return target
    file, _, anchor = target.partition("#")
    if file.endswith(".md"):
        file = file[:-3] + ".html"
    if site_url:
        file = posixpath.normpath(posixpath.join(posixpath.dirname(page), file))
        file = site_url.rstrip("/") + "/" + file
    return file + (f"#{anchor}" if anchor else "")


def notebook(path: Path, record: dict | None = None, site_url: str = ""):
    """The page as a notebook a reader downloads (nbformat 4): an install cell; its prose as Markdown (tabs
    unfolded: the CLI tab shown as text, the Python tab as code); each block that runs as a code cell holding its
    recorded outputs; figures embedded as attachments; links to the site's pages."""
    import base64

    import nbformat

    path = Path(path).resolve()
    page = str(path.relative_to(DOCS)) if DOCS in path.parents else path.name
    record = record if record is not None else load_record(path)
    text = path.read_text(encoding="utf-8")
    attachments: dict[str, dict] = {}

    def diagram_image(match: re.Match) -> str:
        import diagrams

        name = match["arg"]
        attachments[f"{name}.svg"] = {"image/svg+xml": diagrams.svg(name)}
        return f"{match['indent']}![{name}](attachment:{name}.svg)"
    text = re.sub(r"^(?P<indent> *)<!--\s*docs:\s*diagram\s+(?P<arg>\S+)\s*-->\s*$", diagram_image, text,
                  flags=re.M)
    parts = split(text, str(path))
    recorded = {c["sha"]: c for c in (record or {}).get("cells", [])}
    cells = [nbformat.v4.new_code_cell(INSTALL)]
    prose: list[str] = []

    def flush():
        body = "\n".join(prose).strip()
        prose.clear()
        if not body:
            return
        cell = nbformat.v4.new_markdown_cell(body)
        used = {}
        for name in re.findall(r"\(attachment:([^)\s]+)\)", body):
            used[name] = attachments[name]

        def embed(match: re.Match) -> str:
            alt, target = match.group(1), match.group(2)
            file = path.parent / target
            if target.startswith(("http", "attachment:")) or not file.exists():
                return match.group(0)
            used[file.name] = {"image/png" if file.suffix == ".png" else "image/svg+xml":
                               base64.b64encode(file.read_bytes()).decode() if file.suffix == ".png"
                               else file.read_text(encoding="utf-8")}
            return f"![{alt}](attachment:{file.name})"
        body = re.sub(r"!\[([^\]]*)\]\(([^)\s]+)\)(\{[^}]*\})?", embed, body)
        body = LINK.sub(lambda m: f"[{m['text']}]({site_link(m['target'], site_url, page)})", body)
        import escape

        body, _ = escape.escape_tokens(body)           # <unk>, </s> in prose: text, not HTML Jupyter drops
        cell.source = body
        if used:
            cell.attachments = used
        cells.append(cell)

    for part in parts:
        if isinstance(part, str):
            for line in part.split("\n"):
                if MARK.match(line.strip()) or TAB.match(line):
                    continue
                prose.append(line[4:] if line.startswith("    ") else line)
            continue
        block = part
        if block.runs is None or block.side:
            note = "From the command line:" if block.side else ""
            prose.extend(([note, ""] if note else []) + [f"```{block.language}", block.text, "```"])
            continue
        flush()
        if block.runs == "python":
            code = block.text
        elif block.runs == "bash":
            code = "%%bash\nset -euo pipefail\n" + block.text
        else:
            code = f"%%writefile {block.argument}\n{block.text}"
        cell = nbformat.v4.new_code_cell(code)
        for output in recorded.get(block.sha, {}).get("outputs", []):
            if "text" in output:
                cell.outputs.append(nbformat.v4.new_output("stream", name="stdout", text=output["text"] + "\n"))
            elif "png" in output:
                cell.outputs.append(nbformat.v4.new_output("display_data", data={"image/png": output["png"]}))
            else:
                cell.outputs.append(nbformat.v4.new_output("display_data", data={"image/svg+xml": output["svg"]}))
        cells.append(cell)
    flush()
    book = nbformat.v4.new_notebook(cells=cells)
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    book.metadata["language_info"] = {"name": "python"}
    return book


def figures(path: Path) -> list[str]:
    """The figures the page shows that its own code makes (`figures/...png`, relative to the page)."""
    return sorted(set(FIGURE.findall(path.read_text(encoding="utf-8"))))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Run a documentation page as a notebook.")
    parser.add_argument("pages", nargs="+", type=Path)
    parser.add_argument("--record", action="store_true", help="keep the run's outputs as the ones the page shows "
                        "(docs/outputs/PAGE.json); without it, a run is compared with them")
    parser.add_argument("--figures", action="store_true", help="copy the figures the page makes into docs/")
    parser.add_argument("--write", type=Path, help="write the notebook here instead of running it (one page)")
    parser.add_argument("--keep", type=Path, help="run in this folder and keep it")
    parser.add_argument("--timeout", type=int, default=600, help="seconds a cell may run")
    args = parser.parse_args(argv)
    missing = [str(page) for page in args.pages if not page.is_file()]
    if missing:
        parser.error(f"no such page: {', '.join(missing)}")
    if args.write:
        import nbformat

        nbformat.write(notebook(args.pages[0]), str(args.write))
        return 0
    failed = 0
    for page in args.pages:
        try:
            done = run(page, args.keep, args.timeout, args.figures)
        except PageFailed as error:
            print(error, file=sys.stderr)
            failed += 1
            continue
        note = f"{page}: {len(done['cells'])} cells in {done['seconds']:.1f} s"
        if args.record:
            note += f"; outputs recorded in {save_record(page, done).relative_to(DOCS.parent)}"
        else:
            shown = load_record(page)
            problems = compare(page, shown, done) if shown else [f"{page}: no recorded outputs to compare with"]
            for problem in problems:
                print(problem, file=sys.stderr)
            failed += bool(problems)
        print(note + (f"; figures: {', '.join(done['figures'])}" if done["figures"] else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
