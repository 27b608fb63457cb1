"""The report of `seqlab compare` (`seqlab.compare.report.build_report`), on compare directories of tiny runs of
every task family: the table's figures are the runs' final records and parameter counts, the winner is the
best valid figure, every image is a readable PNG, report.html refers to nothing outside itself, and a
missing, unfinished or damaged run is a row that says so."""

import base64
import json
import shutil
import sys
import types
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.image
import pytest

from seqlab.cli.main import main
from seqlab.compare.report import build_report
from seqlab.errors import SeqlabError
from seqlab.info import run_info

# its module fixture trains a comparison of every task family (~15 s on a 2-core CPU): the module runs with the
# slow tests (`make test-slow`, which CI runs too)
pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).parent / "fixtures"
FAST = ["--no-progress", "--dropout", "0"]
LM = ["--train", str(FIXTURES / "shakespeare_train.txt"), "--valid", str(FIXTURES / "shakespeare_valid.txt"),
      "--test", str(FIXTURES / "shakespeare_test.txt"), "--tokenizer", "word", "--max-steps", "4",
      "--eval-every", "2", "--batch-size", "4", "--seq-len", "8", "--embedding-size", "8"]
CLASSIFIER = [*(f"--{split}={FIXTURES / 'classify' / 'sentiment.tsv'}" for split in ("train", "dev", "test")),
              "--embedding-size", "8", "--epochs", "2", "--batch-size", "8"]
TAGGER = ["--train", str(FIXTURES / "ner.conll"), "--dev", str(FIXTURES / "ner.conll"), "--format", "conll",
          "--embedding-size", "8", "--hidden-size", "8", "--max-steps", "4", "--eval-every", "2", "--batch-size", "4"]
SEQ2SEQ = [*(f"--{split}-{side}={FIXTURES / 'seq2seq' / f'{split}.{side}'}" for split in ("train", "dev")
             for side in ("src", "tgt")), "--embedding-size", "16", "--max-steps", "3", "--batch-size", "16"]
COMPARES = {
    "lm": ("perplexity", True, LM, {"lstm": ["--arch", "lstm", "--hidden-size", "8", "--layers", "1"],
                                     "transformer": ["--arch", "transformer", "--layers", "1", "--heads", "2",
                                                     "--context", "16"]}),
    "classifier": ("accuracy", False, CLASSIFIER, {"gru": ["--arch", "gru", "--hidden-size", "8"],
                                                   "pooled": ["--arch", "pooled"]}),
    "tagger": ("accuracy", False, TAGGER, {"lstm": ["--encoder", "lstm"], "gru": ["--encoder", "gru"]}),
    "seq2seq": ("perplexity", True, SEQ2SEQ, {"gru": ["--arch", "gru", "--attention", "dot", "--hidden-size", "16"],
                                              "transformer": ["--arch", "transformer", "--num-layers", "1",
                                                              "--num-heads", "2", "--ff-size", "32"]}),
}


@pytest.fixture(scope="module")
def compares(tmp_path_factory) -> dict[str, Path]:
    """A compare directory per task: two tiny runs and the compare.json `seqlab compare` writes."""
    root = tmp_path_factory.mktemp("compare")
    for task, (metric, lower, options, archs) in COMPARES.items():
        for arch, arch_options in archs.items():
            output = root / task / "runs" / arch
            assert main(["train", task, *options, *arch_options, *FAST, "--output", str(output)]) == 0
        (root / task / "compare.json").write_text(json.dumps({
            "task": task, "archs": list(archs), "budget": {"tokens": 1000}, "size": "small",
            "runs": {arch: f"runs/{arch}" for arch in archs}, "metric": metric, "lower_is_better": lower,
            "command": f"seqlab compare {task} --output {root / task}", "started": "2026-11-25T12:00:00+00:00",
            "seqlab_version": "0.1.0"}))
    return {task: root / task for task in COMPARES}


@pytest.fixture(scope="module")
def reports(compares) -> dict[str, dict]:
    """build_report's result for each compare directory (built once: the tests read it)."""
    return {task: build_report(directory, progress=False) for task, directory in compares.items()}


@pytest.fixture
def copy_of(compares, tmp_path):
    """A compare directory of the fixture copied, to damage."""
    def copy(task: str) -> Path:
        return Path(shutil.copytree(compares[task], tmp_path / task))
    return copy


def final_records(run: Path) -> dict:
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return {r["split"]: r for r in records if r.get("final")}


@pytest.mark.parametrize("task", list(COMPARES))
def test_compare_report_table_holds_the_runs_figures(compares, reports, task):
    metric, lower, _, archs = COMPARES[task]
    result = reports[task]
    rows = {row["arch"]: row for row in result["table"]}
    assert list(rows) == list(archs)
    markdown = result["markdown"].read_text()
    for arch, row in rows.items():
        run = compares[task] / "runs" / arch
        final = final_records(run)
        card = json.loads((run / "model_card.json").read_text())["model_details"]
        assert row["status"] == "finished"
        assert row["valid"] == final["valid"][metric]
        assert row["test"] == (final["test"][metric] if "test" in final else None)
        assert row["parameters"] == run_info(run)["parameters"] == card["parameters"]
        assert row["tokens_per_s"] == card["tokens_per_s"] and row["wall_time_s"] == card["wall_time_s"]
        assert row["best_step"] == run_info(run)["progress"]["best"]["step"]
        assert f"{row['parameters']:,}" in markdown
    best = (min if lower else max)(row["valid"] for row in rows.values())
    winners = [row for row in rows.values() if row["winner"]]
    assert len(winners) == 1 and winners[0]["valid"] == best
    assert f"| ★ winner | {winners[0]['arch']} |" in markdown


class Page(HTMLParser):
    """Every tag of an HTML page with its attributes."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def read_page(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


@pytest.mark.parametrize("task", list(COMPARES))
def test_compare_report_images_are_pngs_and_html_is_self_contained(compares, reports, task):
    result = reports[task]
    markdown = result["markdown"].read_text()
    links = [line[line.index("](") + 2:-1] for line in markdown.splitlines() if line.startswith("![")]
    # curves, speed + the task's own; for the LMs one picture inside each (the 1-layer LSTM's gates, a head)
    expected = {"lm": 4, "classifier": 4, "tagger": 3, "seq2seq": 3}[task]
    assert len(links) == expected
    for link in links:
        png = compares[task] / link
        assert link.startswith("figures/") and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert matplotlib.image.imread(png).ndim == 3
    page = read_page(result["html"])
    images = [attrs for tag, attrs in page.tags if tag == "img"]
    assert len(images) == len(links)
    for attrs in images:
        assert attrs["src"].startswith("data:image/png;base64,")
        assert base64.b64decode(attrs["src"].split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    for tag, attrs in page.tags:
        assert tag not in ("script", "link", "iframe", "object", "embed")
        for name in ("src", "href", "action", "srcset"):
            value = (attrs.get(name) or "").strip().lower()
            assert not value.startswith(("http:", "https:", "//", "file:")), (tag, name, value)
    text = result["html"].read_text()
    assert "url(" not in text and "@import" not in text


def test_compare_report_task_sections(reports):
    lm = reports["lm"]["markdown"].read_text()
    first = next(line for line in (FIXTURES / "shakespeare_valid.txt").read_text().splitlines() if line.strip())
    prompt = " ".join(first.split()[:4])
    assert f"continues the prompt {prompt!r}" in lm and "**lstm**" in lm and "**transformer**" in lm
    tagger = reports["tagger"]["markdown"].read_text()
    assert "most confused tag pairs" in tagger and "confusion-" in tagger
    seq2seq = reports["seq2seq"]["markdown"].read_text()
    source = (FIXTURES / "seq2seq" / "dev.src").read_text().splitlines()[0]
    assert f"| source 1 | {source} |" in seq2seq and "| reference |" in seq2seq


def test_compare_report_shows_unfinished_run(reports, copy_of):
    directory = copy_of("lm")
    before = {row["arch"]: row for row in reports["lm"]["table"]}
    loser = next(arch for arch, row in before.items() if not row["winner"])
    winner = next(arch for arch, row in before.items() if row["winner"])
    metrics = directory / "runs" / winner / "metrics.jsonl"
    lines = [line for line in metrics.read_text().splitlines() if '"final": true' not in line]
    metrics.write_text("\n".join(lines) + "\n")
    result = build_report(directory, progress=False)
    rows = {row["arch"]: row for row in result["table"]}
    assert rows[winner]["status"] == "not finished" and rows[winner]["valid"] is None
    assert rows[winner]["note"].startswith("stopped at step 4") and not rows[winner]["winner"]
    assert rows[loser]["winner"]
    assert "not finished (stopped at step 4" in result["markdown"].read_text()
    assert any(tag == "tr" and attrs.get("class") == "off" for tag, attrs in read_page(result["html"]).tags)


def test_compare_report_damaged_and_missing_runs_are_rows(copy_of):
    directory = copy_of("classifier")
    (directory / "runs" / "pooled" / "config.json").write_text("{not json")
    spec = json.loads((directory / "compare.json").read_text())
    spec["archs"].append("<script>alert(1)</script>")
    (directory / "compare.json").write_text(json.dumps(spec))
    result = build_report(directory, progress=False)
    rows = {row["arch"]: row for row in result["table"]}
    assert rows["pooled"]["status"] == "damaged" and "config.json" in rows["pooled"]["note"]
    assert rows["gru"]["winner"]
    assert rows["<script>alert(1)</script>"]["status"] == "not started"
    page = result["html"].read_text()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_compare_report_inside_pictures(copy_of, monkeypatch):
    """The pictures `seqlab.compare.inside.pictures` returns go under "Inside the models", inlined."""
    directory = copy_of("lm")
    calls = []

    def pictures(trained, text, folder):
        calls.append((trained.config.model.arch, text))
        if trained.config.model.arch != "lstm":
            return []
        return [("the gates <i, f, o>", Path(directory / "figures" / "curves.png"))]

    monkeypatch.setitem(sys.modules, "seqlab.compare.inside", types.SimpleNamespace(pictures=pictures))
    result = build_report(directory, progress=False)
    assert [arch for arch, _ in calls] == ["lstm", "transformer"]
    markdown = result["markdown"].read_text()
    assert "## Inside the models" in markdown and "![lstm: the gates &lt;i, f, o&gt;](figures/curves.png)" in markdown
    assert "lstm: the gates &lt;i, f, o&gt;" in result["html"].read_text()


def test_compare_report_refuses_what_is_not_a_compare_directory(tmp_path):
    with pytest.raises(SeqlabError, match="does not exist"):
        build_report(tmp_path / "nothing")
    with pytest.raises(SeqlabError, match="no compare.json"):
        build_report(tmp_path)
    (tmp_path / "compare.json").write_text(json.dumps({"task": "poetry", "archs": ["lstm"]}))
    with pytest.raises(SeqlabError, match="'poetry' is not one of"):
        build_report(tmp_path)
    (tmp_path / "compare.json").write_text("{")
    with pytest.raises(SeqlabError, match="not valid JSON"):
        build_report(tmp_path)
