"""Every page of the site as a Jupyter notebook, and the runner that executes it: the same code, in the same order,
in CI (`tests/test_docs.py`), on the site (each tutorial's "open as a notebook" download) and by hand:

    python docs/hooks/notebooks.py docs/tutorials/rnn-lm.md            # run the page, in a fresh folder
    python docs/hooks/notebooks.py docs/tutorials/rnn-lm.md --figures  # ... and copy its figures into docs/
    python docs/hooks/notebooks.py docs/tutorials/rnn-lm.md --write x.ipynb

How a page's fenced blocks run (a page is a notebook whose cells are its fences, top to bottom, in one kernel whose
working directory is a fresh folder):

    ```python            a code cell
    ```bash              a `%%bash` cell, run with `set -euo pipefail` (commands only: no `$ ` prompts)
    <!-- docs: file NAME -->   before a fence: its text written to NAME (`%%writefile`), e.g. a config file
    <!-- docs: skip REASON --> before a fence: shown, not run (a REASON is required: e.g. it needs two machines)
    ```text, ```console, ```json ... (any other language, or none): output shown to the reader, not run

A figure the page shows as `figures/PAGE/NAME.png` (relative to the page) is made by the page's code as `NAME.png`
in its working folder; `--figures` copies it to `docs/.../figures/PAGE/NAME.png`, and the test fails when the page
did not make it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)$")   # indented: in a tab or a note
MARK = re.compile(r"^<!--\s*docs:\s*(?P<kind>skip|file)\b\s*(?P<arg>.*?)\s*-->\s*$")
# a line of prose replaced by generated Markdown, before the page is split (on the site, in the notebook, in CI)
EXPAND = re.compile(r"^(?P<indent> *)<!--\s*docs:\s*(?P<kind>source|exercises|diagram)\b\s*(?P<arg>.*?)\s*-->\s*$")
RUN = {"python": "python", "py": "python", "bash": "bash", "sh": "bash", "shell": "bash"}
FIGURE = re.compile(r"!\[[^\]]*\]\((figures/[^)\s]+\.png)\)")


@dataclass
class Block:
    """A fenced block of a page: its language, its text, the line it starts on and its `docs:` mark."""

    language: str
    text: str
    line: int
    mark: str = ""          # "", "skip", "file"
    argument: str = ""      # the skip's reason, the file's name

    @property
    def runs(self) -> str | None:
        """"python", "bash", "file", or None (shown, not run)."""
        if self.mark == "skip":
            return None
        if self.mark == "file":
            return "file"
        return RUN.get(self.language)


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
    return [indent + ln if ln else ln for ln in out]


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
            made = EXPANDERS[found["kind"]](found["arg"], found["indent"], f"{where}:{number}")
            out += made
            origin += [number] * len(made)
        else:
            out.append(line)
            origin.append(number)
    return "\n".join(out), origin


def split(text: str, where: str = "page") -> list[str | Block]:
    """The page as markdown text and fenced blocks, in order. A malformed mark (a skip without its reason, a
    mark not followed by a fence) is refused: the page's examples must all run or say why not."""
    text, origin = expand(text, where)
    lines = text.split("\n")
    parts: list[str | Block] = []
    prose: list[str] = []
    i = 0
    while i < len(lines):
        found = FENCE.match(lines[i])
        if not found:
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
            if not argument:
                needs = "a reason" if mark == "skip" else "a file name"
                raise ValueError(f"{where}:{origin[i] - 1}: `docs: {mark}` needs {needs}")
        if prose:
            parts.append("\n".join(prose))
            prose = []
        parts.append(Block(language, "\n".join(body), origin[i], mark, argument))
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
    return parts


def blocks(text: str, where: str = "page") -> list[Block]:
    return [p for p in split(text, where) if isinstance(p, Block)]


def notebook(path: Path):
    """The page as a notebook (nbformat 4): its prose as markdown cells, each block that runs as a code cell."""
    import nbformat

    text = path.read_text(encoding="utf-8")
    cells = []
    for part in split(text, str(path)):
        if isinstance(part, str):
            prose = "\n".join(ln for ln in part.split("\n") if not MARK.match(ln.strip())).strip()
            if prose:
                cells.append(nbformat.v4.new_markdown_cell(prose))
        elif part.runs == "python":
            cells.append(nbformat.v4.new_code_cell(part.text))
        elif part.runs == "bash":
            cells.append(nbformat.v4.new_code_cell("%%bash\nset -euo pipefail\n" + part.text))
        elif part.runs == "file":
            cells.append(nbformat.v4.new_code_cell(f"%%writefile {part.argument}\n{part.text}"))
        else:
            cells.append(nbformat.v4.new_markdown_cell(f"```{part.language}\n{part.text}\n```"))
    book = nbformat.v4.new_notebook(cells=cells)
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    book.metadata["language_info"] = {"name": "python"}
    return book


def figures(path: Path) -> list[str]:
    """The figures the page shows that its own code makes (`figures/...png`, relative to the page)."""
    return sorted(set(FIGURE.findall(path.read_text(encoding="utf-8"))))


class PageFailed(Exception):
    pass


def run(path: Path, workdir: Path | None = None, timeout: int = 600, copy_figures: bool = False) -> dict:
    """Execute the page's notebook in `workdir` (a fresh folder by default); returns {"seconds", "cells",
    "figures"}. A failing cell raises PageFailed naming the page's line."""
    import nbclient
    from nbclient.exceptions import CellExecutionError

    path = Path(path).resolve()
    book = notebook(path)
    owned = workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="seqlab-docs-")) if owned else Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    os.environ.setdefault("MPLBACKEND", "Agg")       # the kernel inherits these: `seqlab` of this Python; no display;
    os.environ.setdefault("OMP_NUM_THREADS", "1")   # one thread: the pages train tiny models, and CI runs beside them
    start = time.perf_counter()
    client = nbclient.NotebookClient(book, timeout=timeout, kernel_name="python3",
                                     resources={"metadata": {"path": str(workdir)}})
    try:
        client.execute()
    except CellExecutionError as error:
        code = next((c.source for c in book.cells if c.cell_type == "code" and any(
            o.get("output_type") == "error" for o in c.get("outputs", []))), "")
        line = _line_of(path, code)
        raise PageFailed(f"{path}:{line}: the example failed:\n{code}\n{str(error)[-3000:]}") from None
    except Exception as error:             # a cell that ran past the timeout, a kernel that died
        raise PageFailed(f"{path}: {type(error).__name__}: {error}") from None
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
        shutil.rmtree(workdir, ignore_errors=True)
    return {"seconds": time.perf_counter() - start, "cells": sum(c.cell_type == "code" for c in book.cells),
            "figures": copied}


def _line_of(path: Path, code: str) -> int:
    body = code.split("\n", 2)[-1] if code.startswith(("%%bash", "%%writefile")) else code
    for block in blocks(path.read_text(encoding="utf-8"), str(path)):
        if block.text.strip() and block.text.strip() in body:
            return block.line
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Run a documentation page as a notebook.")
    parser.add_argument("pages", nargs="+", type=Path)
    parser.add_argument("--figures", action="store_true", help="copy the figures the page makes into docs/")
    parser.add_argument("--write", type=Path, help="write the notebook here instead of running it (one page)")
    parser.add_argument("--keep", type=Path, help="run in this folder and keep it")
    parser.add_argument("--timeout", type=int, default=600, help="seconds a cell may run")
    args = parser.parse_args(argv)
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
        print(f"{page}: {done['cells']} cells in {done['seconds']:.1f} s" +
              (f"; figures: {', '.join(done['figures'])}" if done["figures"] else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
