"""Seeds, intervals and tuning history in the report of `seqlab compare` (`seqlab.compare.seeds`): the two-level
bootstrap against its formula, the verdict (a winner only where the intervals separate), and a real compare
directory of tiny classifier runs (2 architectures x 2 seeds) with a tuning summary, reported."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import seqlab.api
from seqlab.compare import seeds
from seqlab.compare.report import build_report
from seqlab.registry import family

FIXTURES = Path(__file__).parent / "fixtures"
SENTIMENT = str(FIXTURES / "classify" / "sentiment.tsv")
ARCHS, SEEDS = ("pooled", "gru"), (1111, 1112)


def accuracy(sums: np.ndarray) -> np.ndarray:
    """Items of two columns (right, total): 100 * right / total, per replicate."""
    return 100.0 * sums[:, 0] / sums[:, 1]


def items(right: list[int]) -> np.ndarray:
    """Per-item statistics (right, 1) of a run that got the items marked 1 right."""
    return np.stack([np.asarray(right, dtype=float), np.ones(len(right))], axis=1)       # (n, 2)


# ---------------------------------------------------------------------------------------------- the bootstrap

def test_seeds_bootstrap_is_deterministic_for_a_seed():
    rng = np.random.default_rng(7)
    runs = [items(rng.integers(0, 2, 60)) for _ in range(3)]
    figures = [float(accuracy(r.sum(0, keepdims=True))[0]) for r in runs]
    replicates = [seeds.item_replicates(r, accuracy) for r in runs]
    again = [seeds.item_replicates(r, accuracy) for r in runs]
    assert all(np.array_equal(a, b) for a, b in zip(replicates, again, strict=True))
    assert seeds.seed_interval(figures, replicates) == seeds.seed_interval(figures, replicates)
    assert seeds.seed_interval(figures) == seeds.seed_interval(figures)
    assert seeds.seed_interval(figures, [seeds.item_replicates(r, accuracy, seed=1) for r in runs], seed=1) != \
        seeds.seed_interval(figures, replicates)


def test_seeds_two_level_bootstrap_follows_its_formula():
    """theta*_b = 1/K sum_m f(sum_k s^(j_bm)_(i_bk)), recomputed here with loops from the same two streams."""
    rng = np.random.default_rng(3)
    runs = [items(rng.integers(0, 2, 25)) for _ in range(3)]
    B, n, K = 200, 25, 3
    item_stream, seed_stream = np.random.default_rng(0).spawn(2)
    drawn_items = item_stream.integers(0, n, size=(B, n))
    drawn_seeds = seed_stream.integers(0, K, size=(B, K))
    theta = [np.mean([accuracy(runs[j][drawn_items[b]].sum(0, keepdims=True))[0] for j in drawn_seeds[b]])
             for b in range(B)]
    expected = tuple(np.percentile(theta, [2.5, 97.5]))
    figures = [float(accuracy(r.sum(0, keepdims=True))[0]) for r in runs]
    replicates = [seeds.item_replicates(r, accuracy, resamples=B) for r in runs]
    assert seeds.seed_interval(figures, replicates, resamples=B) == pytest.approx(expected, abs=1e-9)
    alone = [np.mean([figures[j] for j in drawn_seeds[b]]) for b in range(B)]
    assert seeds.seed_interval(figures, resamples=B) == pytest.approx(tuple(np.percentile(alone, [2.5, 97.5])))


def test_seeds_same_item_draw_for_every_run_of_the_file():
    """Two runs scored on the same file (same n) get the same draw of items: a run that is right on exactly
    the items another is wrong on has, replicate by replicate, 100 minus its accuracy."""
    right = np.random.default_rng(5).integers(0, 2, 40)
    first = seeds.item_replicates(items(right), accuracy)
    second = seeds.item_replicates(items(1 - right), accuracy)
    assert np.allclose(first + second, 100.0) and first.std() > 0


def test_seeds_interval_contains_the_mean():
    rng = np.random.default_rng(11)
    for p in (0.3, 0.6, 0.9):
        runs = [items(rng.random(80) < p) for _ in range(4)]
        figures = [float(accuracy(r.sum(0, keepdims=True))[0]) for r in runs]
        low, high = seeds.seed_interval(figures, [seeds.item_replicates(r, accuracy) for r in runs])
        assert low < np.mean(figures) < high
        low, high = seeds.seed_interval(figures)
        assert low <= np.mean(figures) <= high and low < high


def test_seeds_items_and_seeds_against_seeds_alone():
    """Seeds alone see only the spread of the K figures (none when they agree); items + seeds add the spread
    over test items, so their interval is wider."""
    run = items([1] * 30 + [0] * 20)
    same = [60.0, 60.0, 60.0]
    assert seeds.seed_interval(same) == (60.0, 60.0)
    low, high = seeds.seed_interval(same, [seeds.item_replicates(run, accuracy)] * 3)
    assert low < 55 and high > 65
    rng = np.random.default_rng(2)
    runs = [items(rng.random(50) < p) for p in (0.5, 0.6, 0.7)]
    figures = [float(accuracy(r.sum(0, keepdims=True))[0]) for r in runs]
    alone = seeds.seed_interval(figures)
    both = seeds.seed_interval(figures, [seeds.item_replicates(r, accuracy) for r in runs])
    assert both[1] - both[0] > alone[1] - alone[0]


def synthetic(means: dict[str, float], spread: float, lower: bool = False) -> dict:
    """Seed statistics of architectures whose 5 seeds lie around `means` (seeds alone)."""
    archs = []
    for name, mean in means.items():
        values = [mean + spread * d for d in (-1.0, -0.5, 0.0, 0.5, 1.0)]
        low, high = seeds.seed_interval(values)
        archs.append({"arch": name, "runs": [{"seed": str(s), "figure": v, "status": "finished", "note": ""}
                                             for s, v in enumerate(values)],
                      "count": 5, "mean": float(np.mean(values)), "sd": float(np.std(values, ddof=1)),
                      "low": low, "high": high})
    return {"split": "test", "metric": "accuracy", "lower_is_better": lower, "seeds": [str(s) for s in range(5)],
            "resamples": seeds.RESAMPLES, "items": None, "unit": None, "why": "synthetic", "archs": archs,
            **seeds.verdict(archs, lower)}


def test_seeds_far_apart_are_separated_and_a_winner_is_marked(tmp_path):
    found = synthetic({"gru": 80.0, "pooled": 60.0, "lstm": 70.0}, spread=2.0)
    assert found["winner"] == found["best"] == "gru" and found["overlapping"] == []
    rows = [{"arch": a, "winner": a == "pooled"} for a in ("pooled", "gru", "lstm")]   # the first seed's pick
    assert seeds.mark_winner(rows, found) is rows[1] and [r["winner"] for r in rows] == [False, True, False]
    assert seeds.headline(found).startswith("Winner: gru, test accuracy 80.00 (mean of 5 seeds")
    lower = synthetic({"gru": 80.0, "pooled": 60.0}, spread=2.0, lower=True)
    assert lower["winner"] == "pooled"
    section = seeds.seeds_section(found, tmp_path)
    _, headers, cells = next(block for block in section.blocks if block[0] == "table")
    assert headers[-3:] == ["mean ± sd", "95% interval", "verdict"]
    assert [(row[0], row[1], row[-1]) for row in cells] == [("★ winner", "gru", "★ winner: apart from every other"),
                                                            ("", "pooled", "apart from the best"),
                                                            ("", "lstm", "apart from the best")]
    assert (tmp_path / "seeds.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_seeds_overlapping_are_within_seed_noise():
    found = synthetic({"gru": 71.0, "pooled": 70.0, "lstm": 50.0}, spread=3.0)
    assert found["best"] == "gru" and found["winner"] is None and found["overlapping"] == ["pooled"]
    rows = [{"arch": a, "winner": a == "gru"} for a in ("gru", "pooled", "lstm")]
    assert seeds.mark_winner(rows, found) is None and not any(r["winner"] for r in rows)
    assert "within seed noise of pooled" in seeds.headline(found) and seeds.headline(found).startswith("No winner")
    one = synthetic({"gru": 80.0, "pooled": 60.0}, spread=2.0)
    one["archs"][1].update(low=None, high=None, count=1)              # a single finished seed: no interval
    one.update(seeds.verdict(one["archs"], False))
    assert one["winner"] is None and one["no_interval"] == ["pooled"] and "seed noise" in seeds.headline(one)


# ---------------------------------------------------------------------------------------------- tuning

TUNE = {"task": "classifier", "arch": "gru", "metric": "accuracy", "direction": "maximize",
        "trials": [{"number": 0, "state": "COMPLETE", "value": 60.0, "params": {"lr": 0.003, "dropout": 0.31},
                    "duration_s": 100.0, "tokens": 900, "intermediate": [[3, 50.0], [6, 60.0]], "run": "trials/0000"},
                   {"number": 1, "state": "PRUNED", "value": None, "params": {"lr": 0.01, "dropout": 0.1},
                    "duration_s": 30.0, "tokens": 300, "intermediate": [[3, 40.0]], "run": "trials/0001"},
                   {"number": 2, "state": "FAIL", "value": None, "params": {"lr": 0.05, "dropout": 0.0},
                    "duration_s": 5.0, "tokens": 0, "intermediate": [], "run": "trials/0002"},
                   {"number": 3, "state": "PRUNED", "value": None, "params": {"lr": 0.02, "dropout": 0.5},
                    "duration_s": 50.0, "tokens": 450, "intermediate": [[3, 45.0]], "run": "trials/0003"},
                   {"number": 4, "state": "COMPLETE", "value": 70.0, "params": {"lr": 0.0012345, "dropout": 0.2},
                    "duration_s": 120.0, "tokens": 900, "intermediate": [[3, 55.0], [6, 70.0]], "run": "trials/0004"}],
        "best": {"number": 4, "value": 70.0, "params": {"lr": 0.0012345, "dropout": 0.2}},
        "wall_s": 305.0, "trials_budget": 12}


def test_seeds_tuning_section_counts_trials_and_estimates_pruning(tmp_path):
    (tmp_path / "tune" / "gru").mkdir(parents=True)
    (tmp_path / "tune" / "gru" / "tune.json").write_text(json.dumps(TUNE))
    (tmp_path / "tune" / "pooled").mkdir()
    (tmp_path / "tune" / "pooled" / "tune.json").write_text("{")
    section = seeds.tuning_section(tmp_path, {"tuning": {"gru": "tune/gru", "pooled": "tune/pooled"}}, tmp_path)
    _, headers, cells = next(block for block in section.blocks if block[0] == "table")
    row = dict(zip(headers, cells[0], strict=True))
    # pruning saved: the median complete trial (110 s) less each pruned one's (30 s, 50 s): 80 + 60 = 140 s
    assert row == {"architecture": "gru", "best": "70.00 (trial 4)", "best options": "lr=0.00123, dropout=0.2",
                   "complete": "2", "pruned": "2", "failed": "1", "tuning time": "5 min 5 s",
                   "pruning saved (estimate)": "≈ 2 min 20 s"}
    assert cells[1][0] == "pooled" and "not valid JSON" in cells[1][1]
    figures = [block[1] for block in section.blocks if block[0] == "figure"]
    assert [f.path.name for f in figures] == ["tuning-gru.png"] and figures[0].path.stat().st_size > 1000


# ------------------------------------------------------------------------------------------ a real compare directory
# its fixture trains 4 tiny runs (~5 s on a 2-core CPU): two tests use it in the default suite, the rest are slow

@pytest.fixture(scope="module")
def compared(tmp_path_factory) -> Path:
    """DIR: tiny classifier runs, 2 architectures x 2 seeds, in runs/ARCH/seed-S, the compare.json of
    `seqlab compare --seeds 2 --tune-trials` and one architecture's tune.json; its report built once."""
    directory = tmp_path_factory.mktemp("seeds")
    pipeline = family("classifier").pipeline
    for arch in ARCHS:
        for seed in SEEDS:
            options = {"train": SENTIMENT, "dev": SENTIMENT, "test": SENTIMENT, "arch": arch, "seed": seed,
                       "embedding_size": 8, "hidden_size": 8, "epochs": 1, "batch_size": 24, "lr": 0.01,
                       "progress": False, "output": str(directory / "runs" / arch / f"seed-{seed}")}
            seqlab.api.train("classifier", pipeline.resolve(None, options, resume=False))
    (directory / "compare.json").write_text(json.dumps({
        "task": "classifier", "archs": list(ARCHS), "budget": {"epochs": 1}, "size": "tiny",
        "metric": "accuracy", "lower_is_better": False, "seeds": list(SEEDS),
        "seed_runs": {arch: {str(seed): f"runs/{arch}/seed-{seed}" for seed in SEEDS} for arch in ARCHS},
        "runs": {arch: f"runs/{arch}/seed-{SEEDS[0]}" for arch in ARCHS}, "tuning": {"gru": "tune/gru"}}))
    (directory / "tune" / "gru").mkdir(parents=True)
    (directory / "tune" / "gru" / "tune.json").write_text(json.dumps(TUNE))
    build_report(directory, progress=False)
    return directory


@pytest.fixture
def copy(compared, tmp_path) -> Path:
    return Path(shutil.copytree(compared, tmp_path / "copy"))


def finals(run: Path) -> dict:
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return {r["split"]: r for r in records if r.get("final")}


def seeds_table(markdown: str) -> dict[str, list[str]]:
    """The Seeds section's table: {arch: its cells}."""
    part = markdown.split("## Seeds", 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip() for c in line.strip("|").split(" | ")] for line in part.splitlines() if line.startswith("| ")]
    return {row[1]: row for row in rows[1:]}


@pytest.mark.slow
def test_compare_seeds_report_shows_seeds_and_tuning(compared):
    markdown = (compared / "report.md").read_text()
    page = (compared / "report.html").read_text()
    assert markdown.index("## Seeds") < markdown.index("## Curves") < markdown.index("## Tuning")
    assert "<h2>Seeds</h2>" in page and "<h2>Tuning</h2>" in page
    assert "two-level percentile bootstrap" in markdown and "24 documents of the test file" in markdown
    for png in ("seeds.png", "tuning-gru.png"):
        assert (compared / "figures" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"](figures/{png})" in markdown
    assert page.count("data:image/png;base64,") == markdown.count("](figures/") and "src=\"figures/" not in page
    table = seeds_table(markdown)
    for arch in ARCHS:
        figures = [finals(compared / "runs" / arch / f"seed-{seed}")["test"]["accuracy"] for seed in SEEDS]
        cells = table[arch]
        assert cells[2:4] == [f"{figure:.2f}" for figure in figures]
        mean, sd = cells[4].split(" ± ")
        assert float(mean) == pytest.approx(np.mean(figures), abs=0.005)
        assert float(sd) == pytest.approx(np.std(figures, ddof=1), abs=0.005)   # two decimals
        low, high = (float(x) for x in cells[5].split(" – "))
        assert low <= float(mean) <= high
    tuning = markdown.split("## Tuning", 1)[1]
    assert "| gru | 70.00 (trial 4) | lr=0.00123, dropout=0.2 | 2 | 2 | 1 | 5 min 5 s | ≈ 2 min 20 s |" in tuning
    winners = [arch for arch, cells in table.items() if cells[0] == "★ winner"]
    headline = markdown.split("**", 2)[1]
    if winners:
        assert headline.startswith(f"Winner: {winners[0]}") and f"| ★ winner | {winners[0]} |" in markdown
    else:
        assert "within seed noise" in headline and "★ winner" not in markdown


@pytest.mark.slow
def test_compare_seeds_items_are_cached(copy, monkeypatch):
    """A rebuilt report reads each run's compare_items.npz and scores nothing; a run without its cache is scored
    again (here the scorer fails, and the interval falls back to the seeds alone, saying why)."""
    before = (copy / "report.md").read_text()

    def fail(*args, **kwargs):
        raise RuntimeError("scored again")
    monkeypatch.setattr(seeds, "score_items", fail)
    for arch in ARCHS:
        for seed in SEEDS:
            assert (copy / "runs" / arch / f"seed-{seed}" / seeds.CACHE).is_file()
    build_report(copy, progress=False)
    after = (copy / "report.md").read_text()
    assert seeds_table(after) == seeds_table(before) and "two-level percentile bootstrap" in after
    (copy / "runs" / "gru" / "seed-1112" / seeds.CACHE).unlink()
    build_report(copy, progress=False)
    text = (copy / "report.md").read_text()
    assert "The interval is over seeds alone" in text and "could not be scored: scored again" in text


@pytest.mark.slow
def test_compare_seeds_unfinished_seed_is_left_out(copy):
    run = copy / "runs" / "gru" / "seed-1112"
    lines = [line for line in (run / "metrics.jsonl").read_text().splitlines() if '"final": true' not in line]
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    build_report(copy, progress=False)
    markdown = (copy / "report.md").read_text()
    cells = seeds_table(markdown)["gru"]
    assert cells[3] == "not finished" and cells[4].endswith("(1 of 2 seeds)")
    first = finals(copy / "runs" / "gru" / "seed-1111")["test"]["accuracy"]
    assert cells[4].startswith(f"{first:.2f}")
    assert "Left out of the statistics: gru seed 1112 (not finished: stopped at step" in markdown


@pytest.mark.slow
def test_compare_seeds_one_seed_gives_todays_report(copy):
    """Without "seeds" (or with one) and "tuning", the report is the one of a run per architecture."""
    spec = json.loads((copy / "compare.json").read_text())
    for key in ("seeds", "seed_runs", "tuning"):
        spec.pop(key)
    (copy / "compare.json").write_text(json.dumps(spec))
    result = build_report(copy, progress=False)
    markdown = result["markdown"].read_text()
    assert "## Seeds" not in markdown and "## Tuning" not in markdown and "seed noise" not in markdown
    winner = next(row for row in result["table"] if row["winner"])
    assert markdown.split("**", 2)[1] == f"Winner: {winner['arch']}, valid accuracy {winner['valid']:.2f} " \
                                         "(higher is better)."
    spec["seeds"] = [SEEDS[0]]
    (copy / "compare.json").write_text(json.dumps(spec))
    assert build_report(copy, progress=False)["markdown"].read_text() == markdown
