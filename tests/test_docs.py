"""The documentation site (docs/, mkdocs.yml) and the README: what they show runs.

Default suite (seconds): every page splits into prose and blocks with well-formed `docs:` marks; every `seqlab`
command of a block that runs parses with seqlab's own parser (a renamed option fails here first); every Python
block compiles; every `<!-- results: ... -->` mark matches records; the README is a front page.
Slow suite: every page with code runs top to bottom as a notebook (docs/hooks/notebooks.py), the way a reader
runs it, and makes the figures it shows; `mkdocs build --strict` passes (no broken link or anchor).
The site in a real Chromium: tests/test_docs_site.py (make test-browser).
"""

from __future__ import annotations

import ast
import hashlib
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "hooks"))

import generate  # noqa: E402
import notebooks  # noqa: E402

PAGES = sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.parts and p.name != "README.md")
SHOWN = PAGES + [ROOT / "README.md"]
MATHJAX_SHA256 = "d4295dc33744836935c1399feece5159577b34c5c8ffb9f1c6324cd82e03a882"


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def running_blocks(path: Path) -> list[notebooks.Block]:
    return [b for b in notebooks.blocks(path.read_text(encoding="utf-8"), rel(path)) if b.runs]


def seqlab_commands(script: str) -> list[list[str]]:
    """The argument lists of the `seqlab ...` (and `python -m seqlab ...`) commands of a shell block."""
    script = re.sub(r"\\\n", " ", script)                      # continuation lines
    found = []
    for line in script.split("\n"):
        line = line.split(" #")[0].strip()
        if not line or line.startswith("#"):
            continue
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        command: list[str] = []
        for word in words + [";"]:
            if word in (";", "&&", "||", "|", "&", ">", "2>", ">>", "<") or word.endswith(("&", ";")):
                if word.endswith(("&", ";")) and word not in ("&", ";", "&&"):
                    command.append(word.rstrip("&;"))
                if command and word != "||":           # `cmd || ...`: a command shown failing on purpose
                    found.append(command)
                command = []
            else:
                command.append(word)
    out = []
    for words in found:
        if words[:1] == ["!"]:                                             # `! seqlab ...`: shown failing
            continue
        while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):           # VAR=value seqlab ...
            words = words[1:]
        if words[:1] in (["timeout"],):
            words = words[2:]
        if words[:1] in (["seqlab"], [".venv/bin/seqlab"]):
            out.append(words[1:])
        elif len(words) > 2 and words[1:3] == ["-m", "seqlab"]:
            out.append(words[3:])
    return out


def test_every_page_splits_into_prose_and_blocks_with_well_formed_marks():
    assert len(PAGES) >= 10
    for path in SHOWN:
        notebooks.split(path.read_text(encoding="utf-8"), rel(path))      # raises on a malformed mark


def test_a_malformed_mark_is_refused_naming_the_page_and_line():
    with pytest.raises(ValueError, match=r"page.md:2: `docs: skip` needs a reason"):
        notebooks.split("text\n<!-- docs: skip -->\n```bash\nls\n```\n", "page.md")
    with pytest.raises(ValueError, match="not followed by a fenced block"):
        notebooks.split("<!-- docs: file a.yaml -->\n\ntext\n", "page.md")
    with pytest.raises(ValueError, match="a percentage and a reason"):
        notebooks.split("<!-- docs: tolerance lots -->\n```bash\nls\n```\n", "page.md")
    with pytest.raises(ValueError, match="never closed"):
        notebooks.split("```python\nx = 1\n", "page.md")


TOY = ("# T\n\nprose [next](lstm-gru.md#gates) and [out](https://example.org)\n\n```python\nx = 1\nx\n```\n\n"
       "<!-- docs: file c.yaml -->\n```yaml\na: 1\n```\n\n=== \"CLI\"\n\n    ```bash\n    seqlab --version\n    ```\n\n"
       "=== \"Python\"\n\n    ```python\n    import seqlab\n    ```\n\n<!-- docs: skip needs two machines -->\n"
       "```bash\ntorchrun x\n```\n\n```text\noutput\n```\n")


def toy_page(tmp_path) -> Path:
    path = tmp_path / "page.md"
    path.write_text(TOY)
    return path


def test_a_page_becomes_a_notebook_with_an_install_cell_and_the_python_tab_only(tmp_path):
    cells = notebooks.notebook(toy_page(tmp_path), record={"cells": []}).cells
    kinds = [(c.cell_type, c.source.split("\n")[0]) for c in cells]
    assert kinds[0][0] == "code" and "SEQLAB_SOURCE" in cells[0].source          # the install cell
    assert kinds[1:] == [("markdown", "# T"), ("code", "x = 1"), ("code", "%%writefile c.yaml"),
                         ("markdown", "From the command line:"), ("code", "import seqlab"), ("markdown", "```bash")]
    text = "".join(c.source for c in cells)
    assert '=== "' not in text and "docs: skip" not in text                     # no tab markers, no marks
    assert "(lstm-gru.html#gates)" in cells[1].source and "(https://example.org)" in cells[1].source


def test_the_cli_tab_of_a_pair_runs_in_a_scratch_copy_and_the_notebook_holds_the_rest(tmp_path):
    page = toy_page(tmp_path)
    found = notebooks.blocks(page.read_text(), "page.md")
    side = [b for b in found if b.side]
    assert [b.text for b in side] == ["seqlab --version"] and side[0].tab == "CLI"
    run = notebooks.cells_to_run(page, tmp_path / "side")
    assert 'cd "' + str(tmp_path / "side") + '"' in run[3][1]                  # the CLI tab: in its copy
    book = [c.source for c in notebooks.notebook(page, record={"cells": []}).cells if c.cell_type == "code"]
    assert book == [code for block, code in run if block is None or not block.side]


def test_recorded_outputs_are_shown_under_their_block_in_its_tab_and_a_changed_block_is_named(tmp_path):
    page = toy_page(tmp_path)
    running = [b for b in notebooks.blocks(page.read_text(), "page.md") if b.runs]
    record = {"cells": [{"line": b.line, "sha": b.sha, "outputs": []} for b in running]}
    record["cells"][0]["outputs"] = [{"text": "1"}, {"png": "AAAA"}]
    record["cells"][3]["outputs"] = [{"text": "seqlab 0.1.0"}]
    markdown, _ = notebooks.expand(page.read_text())
    shown, problems = notebooks.render(markdown, page, record, lambda k, j, kind: f"out/{k}-{j}.{kind}")
    assert not problems
    lines = shown.split("\n")
    first = lines.index('```{.text .seqlab-output title="output"}')
    assert lines[first + 1] == "1" and "out/0-1.png" in shown
    assert '    ```{.text .seqlab-output title="output"}' in lines                # indented: inside the Python tab
    assert lines[lines.index('    ```{.text .seqlab-output title="output"}') + 1] == "    seqlab 0.1.0"
    page.write_text(TOY.replace("x = 1", "x = 2"))
    assert "changed since its outputs were recorded" in notebooks.stale(page, record)[0]


def test_an_output_drifts_only_beyond_the_stated_tolerance_with_times_and_paths_masked():
    shown = "epoch 3 valid: loss 1.2345, perplexity 3.44 in 12.1 s (9,800 tokens/s)\nsaved to /tmp/seqlab-x1/runs"
    assert notebooks.drift(shown, shown.replace("1.2345", "1.2500").replace("12.1 s", "3.0 s")
                           .replace("9,800", "20,100").replace("x1", "y7")) is None
    assert "1.2345" in notebooks.drift(shown, shown.replace("1.2345", "1.5"))
    assert "perplexity" in notebooks.drift(shown, shown.replace("perplexity", "accuracy"))
    assert notebooks.drift("a\nb", "a\nb\nc").startswith("the page shows 2 lines")
    assert notebooks.drift("peak 197.4 GFLOP/s", "peak 1,210.0 GFLOP/s") is None      # the machine's, not the page's
    shown = "{'step': 40, 'elapsed': 3.73, 'startup': 4.7, \"wall_s\": 12.0, 'loss': 3.25}\nsaved"
    assert notebooks.drift(shown, shown.replace("3.73", "9.1").replace("4.7", "1.2").replace("12.0", "30")) is None
    assert "3.25" in notebooks.drift(shown, shown.replace("3.25", "3.5"))        # a figure of the model is held
    logged = '{"step": 40, "loss": 3.2786, "gflop_per_s": 6.511, "mfu": 3.299}'     # MFU: the machine's load
    assert notebooks.drift(logged, logged.replace("6.511", "5.8").replace("3.299", "2.925")) is None
    slow = "epoch 1\ntrain: 120/266 step (45%), 3.85 step/s, elapsed 00:31, remaining 00:38, loss=2.1\nepoch 2"
    assert notebooks.drift("epoch 1\nepoch 2", slow) is None                   # a slow machine's progress line
    assert notebooks.drift("seqlab: reading a.txt\nloss 2.0\nsaved", "loss 2.01\nseqlab: reading a.txt\nsaved") \
        is None                                                                    # stderr before stdout this time
    assert notebooks.drift("textbook   9.1 ms per batch", "textbook    10.2 ms per batch") is None    # padding
    small = "largest gradient difference: 1.430511474609375e-06"                  # rounding, not a hash
    assert notebooks.drift(small, small.replace("1.430511474609375e-06", "9.5367431640625e-07")) is None
    table = "| arch | tokens/s | wall time | valid accuracy |\n|---|---|---|---|\n| window | 3,513 | 2.05 s | 69.04 |"
    assert notebooks.drift(table, table.replace("3,513", "9,000").replace("2.05", "7.5")) is None
    assert "69.04" in notebooks.drift(table, table.replace("69.04", "50.0"))
    amx = ("precision: fp32 (auto: this CPU has AMX-BF16, AVX512-BF16, but only 20% of the model's product FLOPs "
           "are in products large enough to run faster in bf16 (it takes 75%))\nmodel FLOPs: 3.92 M per token; "
           "peak 1,381.4 GFLOP/s (bf16 products)\nloss 3.3637")
    other = ("precision: fp32 (auto: this CPU has no bfloat16 kernels)\nmodel FLOPs: 3.92 M per token; "
             "peak 97.1 GFLOP/s\n")
    assert notebooks.drift(amx, other + "loss 3.3637") is None                  # the CPU's kernels, not the page's
    assert "3.3637" in notebooks.drift(amx, other + "loss 3.9")
    sessions = "environment.json   279 bytes\n{'device': 'cpu: Intel(R) Xeon(R) Processor, 1 threads'}"
    amd = sessions.replace("279", "261").replace("Intel(R) Xeon(R) Processor", "AMD EPYC")
    assert notebooks.drift(sessions, amd) is None                                # the machine's name, and its length
    trials = "| trial | value | s | tokens |\n|---:|---:|---:|---:|\n| 1 | 16.51 | 1 | 3,382 |"   # a column named `s`
    assert notebooks.drift(trials, trials.replace("| 1 | 3,382", "| 2 | 3,382")) is None
    assert "3382" in notebooks.drift(trials, trials.replace("3,382", "4,000"))
    assert "shows 2, the run prints 3" in notebooks.drift("reading\nloss 2.0", "loss 3.0\nreading")   # still held


def test_every_seqlab_command_shown_parses():
    """Each command a reader can copy parses with seqlab's own parser: no renamed option, no value out of range
    (a value held in a shell variable is left to the run). The family the README installs from outside
    (tests/families/regressor) is registered, as its entry point would be, for a parser built afresh."""
    from seqlab import registry
    from seqlab.cli.main import build_parser

    sys.path.insert(0, str(ROOT / "tests" / "families"))
    try:
        import regressor

        with registry.registered(regressor.FAMILY):
            parser = build_parser.__wrapped__()
    finally:
        sys.path.remove(str(ROOT / "tests" / "families"))
    checked = 0
    problems = []
    for path in SHOWN:
        for block in notebooks.blocks(path.read_text(encoding="utf-8"), rel(path)):
            if block.language not in ("bash", "sh", "shell"):
                continue
            for argv in seqlab_commands(block.text):
                if any("$" in word or "*" in word for word in argv) or not argv or "--help" in argv:
                    continue
                try:
                    parser.parse_args(argv)
                    checked += 1
                except SystemExit as error:
                    if error.code:
                        problems.append(f"{rel(path)}:{block.line}: seqlab {' '.join(argv)}")
    assert not problems, "commands that do not parse:\n" + "\n".join(problems)
    assert checked >= 20


def test_every_python_block_compiles():
    for path in SHOWN:
        for block in notebooks.blocks(path.read_text(encoding="utf-8"), rel(path)):
            if block.language in ("python", "py"):
                try:
                    ast.parse(block.text)
                except SyntaxError as error:
                    pytest.fail(f"{rel(path)}:{block.line + (error.lineno or 0)}: {error.msg}")


def test_every_results_mark_matches_records():
    marks = 0
    for path in PAGES:
        text = path.read_text(encoding="utf-8")
        if "<!-- results:" in text:
            out = generate.replace_results(text, str(path.relative_to(DOCS)))
            assert "<!-- results:" not in out
            marks += text.count("<!-- results:")
    assert marks >= 1


def test_a_results_mark_renders_its_rows_with_machine_command_and_date():
    out = generate.replace_results('<!-- results: compare_tuned_ptb arch=gru config="compare ptb tuned 12 trials, '
                                   '6 epochs, mean of 3 seeds" split=test -->', "benchmarks/tuning.md")
    assert "105.18" in out and "Measured on AMD EPYC" in out and "benchmarks/compare_tuned.py" in out
    assert "(results/compare_tuned_ptb.md)" in out
    with pytest.raises(ValueError, match="matches no record"):
        generate.replace_results("<!-- results: compare_tuned_ptb arch=nothing -->")


def test_the_generated_reference_covers_every_command_and_config_key():
    from seqlab.cli.main import build_parser
    from seqlab.registry import FAMILIES

    pages = generate.cli_pages()
    every = [" ".join(path) for path, _, _ in generate.commands(build_parser())]
    index = pages["reference/cli/index.md"]
    assert all(f"`{command}`" in index for command in every)
    assert "`--lr`" in pages["reference/cli/train.md"] and "positive" in pages["reference/cli/train.md"]
    config = generate.config_page()
    for family in FAMILIES.values():
        for cls in family.pipeline.groups.values():
            assert f"{cls.__module__}.{cls.__name__}" in config
    errors = generate.errors_page()
    assert "is not a seqlab run directory: it has no config.json" in errors
    assert "## Resuming and run directories" in errors and "**Fix.**" in errors
    assert "src/seqlab/" not in errors                       # grouped by what the user did, not keyed by file:line


def test_the_explore_guide_lists_every_view_the_families_declare():
    """docs/guides/explore.md's table of views is generated from each family's `explain` part (`VIEWS`): a row
    per declared view, naming its kind, architectures and whether an export computes it."""
    from seqlab.registry import FAMILIES

    assert generate.VIEWS_MARK in (DOCS / "guides" / "explore.md").read_text()
    table = generate.views_table()
    for family in FAMILIES.values():
        if not family.explains:
            assert family.title in table.splitlines()[-1]
            continue
        for spec in family.part("explain").VIEWS:
            row = next(line for line in table.splitlines() if line.startswith(f"| {family.name} | `{spec.name}` |"))
            assert f"| {spec.kind} |" in row and (", ".join(spec.archs) or "all") in row
            assert ("| yes |" in row) == spec.exported


def test_the_mathjax_shipped_is_the_release_named():
    data = (DOCS / "assets" / "vendor" / "mathjax" / "tex-svg.js").read_bytes()
    assert hashlib.sha256(data).hexdigest() == MATHJAX_SHA256


def test_the_readme_is_a_front_page_whose_figures_are_the_results_files():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.split("\n")) <= 230
    assert "make demo" in readme and "make test" in readme and "make docs" in readme
    assert generate.readme_table() in readme, "run `python docs/hooks/generate.py --readme`"
    for link in re.findall(r"\]\(([^)#\s]+)", readme):
        assert link.startswith("http") or (ROOT / link).exists(), f"README.md links to {link}, which is missing"


# ------------------------------------------------------------------------------------------------- slow: they run
RUNNABLE = [p for p in SHOWN if running_blocks(p)]


RECORDED = [p for p in RUNNABLE if p.name != "README.md"]      # the site's pages show their outputs


def test_every_page_with_code_shows_the_outputs_of_its_current_code():
    """Each page of the site whose code runs has its outputs recorded (docs/outputs/), from its code as it is now:
    a block changed without re-recording (python docs/hooks/notebooks.py --record PAGE) fails here."""
    problems = [p for page in RECORDED for p in notebooks.stale(page, notebooks.load_record(page))]
    assert not problems, "\n".join(problems)
    for page in RECORDED:
        cells = notebooks.load_record(page)["cells"]
        assert any(c["outputs"] for c in cells), f"{rel(page)} shows no output at all"


@pytest.mark.slow
@pytest.mark.parametrize("page", RUNNABLE, ids=[rel(p) for p in RUNNABLE])
def test_the_page_runs_top_to_bottom_and_prints_what_it_shows(page, tmp_path):
    """The page runs as a notebook in a fresh kernel (install cell, then its blocks), makes the figures it shows,
    and every cell prints what the page shows under it, within the tolerance notebooks.drift states."""
    try:
        now = notebooks.run(page, tmp_path / "work", timeout=600)
    except notebooks.PageFailed as error:
        pytest.fail(str(error), pytrace=False)
    if page in RECORDED:
        problems = notebooks.compare(page, notebooks.load_record(page), now)
        assert not problems, "outputs drifted from the page (re-record if the change is meant):\n" + \
            "\n".join(problems)


@pytest.mark.slow
def test_the_site_builds_strict(tmp_path):
    """`mkdocs build --strict`: a broken link or anchor, a page missing from the nav, fails."""
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-5000:]
    site = tmp_path / "site"
    assert (site / "index.html").exists() and (site / "reference" / "cli" / "train.html").exists()
    assert (site / "tutorials" / "rnn-lm.ipynb").exists()


def test_an_expanded_page_keeps_for_each_line_the_line_of_the_page_it_comes_from():
    for path in PAGES:
        text = path.read_text(encoding="utf-8")
        expanded, origin = notebooks.expand(text, rel(path))
        assert len(expanded.split("\n")) == len(origin), rel(path)
        assert origin == sorted(origin) and origin[-1] == len(text.split("\n"))
