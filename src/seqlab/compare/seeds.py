"""Seeds and tuning in the report of `seqlab compare` (issue 33): what the report shows when compare.json
names several seeds ("seeds", "seed_runs": each architecture trained once per seed) or tuning folders
("tuning": each architecture's options searched first, `seqlab.tuning.study`).

Seeds. Each architecture's K seed runs give K figures on one split (the test split when every finished seed
run of every architecture has a final test record, else the valid split): their mean ± standard deviation,
and a 95% interval on the mean from a two-level percentile bootstrap (Efron & Tibshirani 1993, ch. 13; the
seed as a source of variance as in Bouthillier et al. 2021) that resamples the file's items and the seeds
together. For replicates b = 1..B (B = 2000):

    i_b1 .. i_bn ~ Uniform{1..n}     the n items of the file (a document, a sentence, a pair), one draw per
                                     replicate, the same for every architecture and seed (all are scored on
                                     the same file)
    j_b1 .. j_bK ~ Uniform{1..K}     the architecture's K finished seed runs
    theta*_b = 1/K sum_m f( sum_k s^(j_bm)_(i_bk) )

where s^(r)_i are item i's summable statistics under seed run r (the family's `cards` part collects them,
`seqlab.cards.intervals`) and f the corpus figure of their sums (`Items.figures`): accuracy = right / all,
F1 from summed span counts, ... The interval is the 2.5 and 97.5 percentiles of theta*_1 .. theta*_B.
Where the runs give no per-item statistics of the figure (a language model scores a file as one stream of
tokens, so perplexity is not a sum over lines), the bootstrap is over the seeds alone:

    theta*_b = 1/K sum_m x_(j_bm),   x_r the final figure of seed run r,

which needs two finished seeds. The draws come from `numpy.random.default_rng(0)`, spawned into two
independent streams: the first draws the items (`seqlab.cards.bootstrap.resample_sums`; the draw depends only
on n and B, so every run of the file gets the same one and a run's B replicate figures f(...) can be kept in
its directory, `compare_items.npz`, keyed by its weights' SHA-256 and the split: a rebuilt report does not
score again), the second draws each architecture's seeds.

The verdict: the architecture with the best mean wins only where its interval and every other
architecture's are disjoint. Otherwise the difference is within seed noise: the report names the
architectures whose intervals overlap the best's and marks no winner.

Tuning. Each tuning folder's tune.json (`seqlab.tuning.study` writes it): the trial values over trials
(`plot_history`), the best options found, the trials complete / pruned / failed, the tuning wall time and an
estimate of the training time pruning saved (`pruning_saved`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from seqlab.cards.bootstrap import Items, percentile_interval, resample_sums
from seqlab.compare.pages import DAMAGED_RUN, Figure, Section, figure, is_number, one_line, safe_name
from seqlab.errors import SeqlabError
from seqlab.fileio import atomic_write, file_sha256, read_json, safetensors_metadata
from seqlab.registry import FAMILIES, run_config
from seqlab.runs.records import duration
from seqlab.training.plots import save_png

if TYPE_CHECKING:
    from seqlab.contract import Family

RESAMPLES = 2000
CONFIDENCE = 0.95
CACHE = "compare_items.npz"         # in each seed run's directory: its per-item statistics and replicate figures
CHECK = 1e-6                        # how close the items' figure must come to the run's final record


def several(spec: dict[str, Any]) -> bool:
    """Whether compare.json names more than one seed (one seed, or none: the report of one run per arch)."""
    return isinstance(spec.get("seeds"), list) and len(spec["seeds"]) > 1


def seed_runs(spec: dict[str, Any]) -> dict[str, list[tuple[str, str]]]:
    """{arch: [(seed, run path relative to DIR)]}, in the order of "seeds": "seed_runs", else runs/ARCH/seed-S."""
    named = spec.get("seed_runs")
    given = named if isinstance(named, dict) else {}
    seeds = [str(seed) for seed in spec["seeds"]]
    runs = {}
    for arch in spec["runs"]:
        own = given.get(arch)
        mine = own if isinstance(own, dict) else {}
        runs[arch] = [(seed, str(mine.get(seed, f"runs/{arch}/seed-{seed}"))) for seed in seeds]
    return runs


# ---------------------------------------------------------------------------------------------- the bootstrap

def streams(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    """`default_rng(seed)` spawned into two independent streams: (the items' draw, the seeds' draw)."""
    items, seeds = np.random.default_rng(seed).spawn(2)
    return items, seeds


def item_replicates(stats: np.ndarray, figure_of_sums: Callable[[np.ndarray], np.ndarray], resamples: int = RESAMPLES,
                    seed: int = 0) -> np.ndarray:
    """(B,): one seed run's figure on each replicate's items, f(sum_k s_(i_bk)), from its per-item statistics
    `stats` (n, k) and the figure of summed statistics `figure_of_sums` ((B, k) -> (B,)). The draw of items
    depends only on n, B and `seed`: every run scored on the same file gets the same one."""
    return np.asarray(figure_of_sums(resample_sums(stats, resamples, streams(seed)[0])), dtype=np.float64)


def seed_interval(figures: list[float], replicates: list[np.ndarray] | None = None, resamples: int = RESAMPLES,
                  seed: int = 0, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The percentile interval of the mean over seeds (module docstring). `figures`: the K seed runs' final
    figures x_r; `replicates`: for each run its `item_replicates` (the two-level bootstrap), or None (seeds
    alone). Each replicate b draws K seeds j_b1..j_bK with replacement and averages their figures."""
    K = len(figures)
    drawn = streams(seed)[1].integers(0, K, size=(resamples, K))              # (B, K): the seeds drawn
    if replicates is None:
        theta = np.asarray(figures, dtype=np.float64)[drawn].mean(axis=1)     # (B,)
    else:
        table = np.stack([np.asarray(r, dtype=np.float64) for r in replicates], axis=1)   # (B, K): run r on b's items
        if table.shape != (resamples, K):
            raise ValueError(f"replicates of shape {table.shape}, expected ({resamples}, {K})")
        theta = np.take_along_axis(table, drawn, axis=1).mean(axis=1)       # (B,)
    return percentile_interval(theta, confidence)


def verdict(archs: list[dict[str, Any]], lower_is_better: bool) -> dict[str, Any]:
    """Of the architectures with a mean ({"arch", "mean", "low", "high"}; low/high None without an interval):
    "best" (the best mean, the first of a tie), "winner" (the best, only where its interval is disjoint
    from every other's), "overlapping" (the architectures whose intervals overlap the best's) and
    "no_interval" (those without one: nothing can be said apart from them)."""
    ranked = [a for a in archs if a.get("mean") is not None]
    if not ranked:
        return {"best": None, "winner": None, "overlapping": [], "no_interval": []}
    best = (min if lower_is_better else max)(ranked, key=lambda a: a["mean"])
    no_interval = [a["arch"] for a in ranked if a["low"] is None]
    overlapping = [a["arch"] for a in ranked if a is not best and a["low"] is not None and best["low"] is not None
                   and a["low"] <= best["high"] and best["low"] <= a["high"]]
    separated = not overlapping and not no_interval
    return {"best": best["arch"], "winner": best["arch"] if separated else None, "overlapping": overlapping,
            "no_interval": no_interval}


# ---------------------------------------------------------------------------------------------- the seeds' figures

def seed_statistics(spec: dict[str, Any], rows: dict[str, list[tuple[str, dict[str, Any]]]],
                    progress: bool | None = None, resamples: int = RESAMPLES, seed: int = 0,
                    confidence: float = CONFIDENCE) -> dict[str, Any]:
    """What the Seeds section shows, from each architecture's seed runs as the report's table reads a run
    ({arch: [(seed, `seqlab.compare.report.run_row`)]}, in the order of `seed_runs`): {"split", "metric",
    "lower_is_better", "seeds", "resamples", "items" (n, or None: seeds alone), "unit", "why" (why seeds
    alone), "archs": [{"arch", "runs": [{"seed", "run_dir", "status", "note", "figure"}], "count" (finished
    seeds), "mean", "sd", "low", "high"}], and `verdict`'s "best", "winner", "overlapping", "no_interval"}."""
    metric, lower = spec["metric"], spec["lower_is_better"]
    finished = [row for entries in rows.values() for _, row in entries if row["status"] == "finished"]
    split = "test" if finished and all(row["test"] is not None for row in finished) else "valid"
    archs: list[dict[str, Any]] = []
    for arch, entries in rows.items():
        runs: list[dict[str, Any]] = []
        for s, row in entries:
            counted = row["status"] == "finished" and row[split] is not None
            note = row["note"] or ("" if counted else f"its final {split} record has no {metric}")
            runs.append({"seed": s, "run_dir": row["run_dir"], "status": row["status"] if counted else (
                "no figure" if row["status"] == "finished" else row["status"]), "note": note,
                "figure": row[split] if counted else None})
        archs.append({"arch": arch, "runs": runs})
    counted = [run for a in archs for run in a["runs"] if run["figure"] is not None]
    items, why = item_statistics(counted, FAMILIES[spec["task"]], split, metric, resamples, seed, progress)
    for a in archs:
        mine = [run for run in a["runs"] if run["figure"] is not None]
        values = [run["figure"] for run in mine]
        a.update(count=len(values), mean=float(np.mean(values)) if values else None,
                 sd=float(np.std(values, ddof=1)) if len(values) > 1 else None, low=None, high=None)
        if values and (items is not None or len(values) > 1):
            replicates = [run["replicates"] for run in mine] if items is not None else None
            a["low"], a["high"] = seed_interval(values, replicates, resamples, seed, confidence)
    for run in counted:
        run.pop("replicates", None)
    return {"split": split, "metric": metric, "lower_is_better": lower, "seeds": [str(s) for s in spec["seeds"]],
            "resamples": resamples, "confidence": confidence, "items": items["n"] if items else None,
            "unit": items["unit"] if items else None, "why": why, "archs": archs, **verdict(archs, lower)}


def item_statistics(runs: list[dict[str, Any]], family: Family, split: str, metric: str, resamples: int, seed: int,
                    progress: bool | None) -> tuple[dict[str, Any] | None, str]:
    """Each counted seed run's `item_replicates` (set as run["replicates"]), from its cache or scored;
    ({"n", "unit"}, "") when every run has them, each reproducing its final record, all of the same file;
    else (None, why the bootstrap is over seeds alone). Scoring stops at the first run without them."""
    if not runs:
        return None, "no seed run has finished"
    option = next((option for option, name in family.splits if name == split), None)
    files, unit = set(), None
    for run in runs:
        found = run_items(Path(run["run_dir"]), family, option, split, metric, resamples, seed, progress)
        if isinstance(found, str):
            return None, found
        if abs(found["figure"] - run["figure"]) > CHECK * max(1.0, abs(run["figure"])):
            return None, (f"{run['run_dir']}: its items give {metric} {found['figure']!r} but its final {split} "
                          f"record says {run['figure']!r}")
        run["replicates"], unit = found["replicates"], found["unit"]
        files.add((found["n"], tuple(found["files"])))
    if len(files) > 1:                  # the same draw of items for every run needs the same file
        return None, f"the seed runs scored different {split} files (by their SHA-256)"
    return {"n": files.pop()[0], "unit": unit}, ""


def run_items(run_dir: Path, family: Family, option: str | None, split: str, metric: str, resamples: int, seed: int,
              progress: bool | None) -> dict[str, Any] | str:
    """One seed run's {"replicates" (B,), "n", "unit", "figure" (on every item once), "files" (their
    SHA-256)}, from run_dir/CACHE when its key matches (the weights' SHA-256, the split, its files and the
    figure), else scored (`score_items`) and cached; a string says why it has none."""
    try:
        config = run_config(run_dir, family)
        found = family.part("cards").evaluation_file(config.data, option) if option else None
        if found is None:
            return (f"{family.title}'s evaluation gives no per-item statistics of the {split} file (a language "
                    "model scores a file as one stream of tokens, not as a sum over lines: seqlab.cards.intervals; "
                    "a split held out of the training file has no file of its own)")
        path, options, files = found
        missing = [f for f in files if not Path(f).is_file()]
        if missing:
            return f"{run_dir}: its {split} file {missing[0]} is no longer there"
        weights = run_dir / "model.safetensors"
        digest = safetensors_metadata(weights).get("sha256") or file_sha256(weights, "weights")
        key: dict[str, Any] = {"weights_sha256": digest, "split": split,
                               "files": {str(f): file_sha256(f, f"{split} file") for f in files},
                               "metric": metric, "resamples": resamples, "seed": seed}
        cached = read_cache(run_dir / CACHE, key)
        if cached is not None:
            return cached if isinstance(cached, str) else {**cached, "files": sorted(key["files"].values())}
        scored = score_items(run_dir, path, options, progress)
    except DAMAGED_RUN as error:
        return f"{run_dir} could not be scored: {one_line(error)}"
    if scored is None:
        return f"{family.title}'s evaluation gives no per-item statistics of the {split} file"
    items, values = scored
    outcome: dict[str, Any]
    if metric not in items.figures:
        outcome = {"none": f"the per-item statistics give {', '.join(items.figures)} but not {metric}"}
    else:
        outcome = {"replicates": item_replicates(items.stats, items.figures[metric], resamples, seed),
                   "n": len(items.stats), "unit": items.unit, "figure": float(items.full()[metric])}
    write_cache(run_dir / CACHE, key, items.stats, outcome)
    result: dict[str, Any] | str = outcome.get("none", {**outcome, "files": sorted(key["files"].values())})
    return result


def score_items(run_dir: Path, path: str, options: dict[str, Any],
                progress: bool | None) -> tuple[Items, dict[str, Any]] | None:
    """The run's best weights scoring the file: (the items, the evaluation's figures) as the family's
    `interval_items` gives them (checked: the items reproduce the figures), or None."""
    from seqlab.cards.intervals import check
    from seqlab.registry import load

    trained = load(run_dir)
    found: tuple[Items, dict[str, Any]] | None = trained.family.part("cards").interval_items(trained, path, progress,
                                                                                            dict(options))
    if found is not None:
        check(*found, str(path))
    return found


def read_cache(path: Path, key: dict[str, Any]) -> dict[str, Any] | str | None:
    """The cached result for `key` (a dict, or the string saying why there are no items); None when there is
    no cache, it is damaged, or it is of other weights, split, file or figure."""
    try:
        with np.load(path, allow_pickle=False) as data:
            saved = json.loads(str(data["key"]))
            if saved.get("key") != key:
                return None
            if "none" in saved:
                why: str = saved["none"]
                return why
            return {"replicates": data["replicates"], "n": saved["n"], "unit": saved["unit"], "figure": saved["figure"]}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write_cache(path: Path, key: dict[str, Any], stats: np.ndarray, found: dict[str, Any]) -> None:
    """run_dir/CACHE: the per-item statistics (n, k), the replicate figures (B,) and what they are of. A
    run directory that cannot be written keeps no cache (the report is the same; the next build scores again)."""
    meta = {"key": key, **{k: v for k, v in found.items() if k != "replicates"}}
    replicates = found.get("replicates", np.zeros(0))

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as handle:
            np.savez_compressed(handle, key=np.array(json.dumps(meta)), stats=stats, replicates=replicates)
    try:
        atomic_write(path, write)
    except SeqlabError:
        pass


# ---------------------------------------------------------------------------------------------- the Seeds section

def mark_winner(rows: list[dict[str, Any]], found: dict[str, Any]) -> dict[str, Any] | None:
    """The table's winner mark on the Seeds verdict's winner only (none where the difference is within seed
    noise); returns its row."""
    for row in rows:
        row["winner"] = row["arch"] == found["winner"]
    return next((row for row in rows if row["winner"]), None)


def better(found: dict[str, Any]) -> str:
    return "lower" if found["lower_is_better"] else "higher"


def headline(found: dict[str, Any]) -> str | None:
    """The report's headline with several seeds (None when no seed run has finished: the usual one)."""
    if found["best"] is None:
        return None
    arch = next(a for a in found["archs"] if a["arch"] == found["best"])
    what = f"{found['split']} {found['metric']}"
    if found["winner"] is not None:
        return (f"Winner: {arch['arch']}, {what} {figure(arch['mean'])} (mean of {arch['count']} seeds; its 95% "
                f"interval {interval_text(arch)} is apart from every other architecture's; {better(found)} is better).")
    if found["overlapping"]:
        return (f"No winner: the best mean {what}, {arch['arch']}'s {figure(arch['mean'])} over {arch['count']} seeds, "
                f"is within seed noise of {', '.join(found['overlapping'])} (their 95% intervals overlap; "
                f"{better(found)} is better).")
    return (f"No winner: the best mean {what} is {arch['arch']}'s {figure(arch['mean'])}, but "
            f"{', '.join(found['no_interval'])} {'has' if len(found['no_interval']) == 1 else 'have'} too few finished "
            f"seeds for an interval: it cannot be told from seed noise ({better(found)} is better).")


def interval_text(arch: dict[str, Any]) -> str:
    return f"{figure(arch['low'])} – {figure(arch['high'])}" if arch["low"] is not None else "—"


def row_verdict(arch: dict[str, Any], found: dict[str, Any]) -> str:
    if arch["mean"] is None:
        return "no finished seed"
    if arch["arch"] == found["winner"]:
        return "★ winner: apart from every other"
    if arch["low"] is None:
        return "too few seeds for an interval"
    if arch["arch"] == found["best"]:
        return "best mean, within seed noise"
    if arch["arch"] in found["overlapping"]:
        return "overlaps the best: within seed noise"
    return "apart from the best"


def seeds_section(found: dict[str, Any], figures: Path) -> Section:
    """The table (each seed's figure, mean ± sd, the 95% interval, the verdict), what the interval is, and
    the picture: each seed a dot, the interval a bar."""
    section = Section("Seeds")
    what, K = f"{found['split']} {found['metric']}", len(found["seeds"])
    section.text(f"Each architecture was trained with {K} seeds ({', '.join(found['seeds'])}); the table gives each "
                 f"seed run's final {what} (its best weights, picked on the validation set), their mean ± standard "
                 "deviation (n − 1 in the denominator) and a bootstrap 95% interval on the mean. The other sections "
                 "show the first seed's runs." + ("" if found["split"] == "test" else
                                                  " (The valid figure: not every finished run has a test split.)"))
    cells = []
    for arch in found["archs"]:
        seeds = [figure(run["figure"]) if run["figure"] is not None else run["status"] for run in arch["runs"]]
        spread = (f"{figure(arch['mean'])} ± {arch['sd']:.2f}" if arch["sd"] is not None else
                  figure(arch["mean"]) if arch["mean"] is not None else "—")
        if 0 < arch["count"] < K:
            spread += f" ({arch['count']} of {K} seeds)"
        cells.append(["★ winner" if arch["arch"] == found["winner"] else "", arch["arch"], *seeds, spread,
                      interval_text(arch), row_verdict(arch, found)])
    section.blocks.append(("table", ["", "architecture", *[f"seed {s}" for s in found["seeds"]], "mean ± sd",
                                     "95% interval", "verdict"], cells))
    if found["items"] is not None:
        unit = found["unit"] or "items"
        section.text(f"The interval is a two-level percentile bootstrap (Efron & Tibshirani 1993): each of "
                     f"{found['resamples']:,} replicates draws the {found['items']:,} {unit} of the {found['split']} "
                     f"file with replacement (the same draw for every architecture and seed: all are scored on the "
                     f"same file) and the finished seeds with replacement, and averages over the drawn seeds the "
                     f"{found['metric']} recomputed from the drawn {unit}' summed statistics; its ends are the 2.5 and "
                     "97.5 percentiles. It covers both the seed and the choice of test items.")
    else:
        section.text(f"The interval is over seeds alone, since {found['why']}. Each of {found['resamples']:,} "
                     "replicates draws the finished seeds with replacement and averages their figures; its ends are "
                     "the 2.5 and 97.5 percentiles. It shows how much the figure moves with the seed, not with the "
                     "choice of test items, and needs two finished seeds.")
    section.text(verdict_text(found))
    left = [f"{arch['arch']} seed {run['seed']} ({run['status']}{': ' + run['note'] if run['note'] else ''})"
            for arch in found["archs"] for run in arch["runs"] if run["figure"] is None]
    if left:
        section.text("Left out of the statistics: " + "; ".join(left) + ".")
    section.figure(plot_seeds(found, figures / "seeds.png"))
    return section


def verdict_text(found: dict[str, Any]) -> str:
    if found["best"] is None:
        return "No seed run has finished yet: no means, no intervals."
    if found["winner"] is not None:
        return (f"{found['winner']} has the best mean and its interval is apart from every other architecture's: "
                "the difference is larger than the seed noise. It is marked the winner.")
    if found["overlapping"]:
        return (f"{found['best']} has the best mean, but its interval overlaps those of "
                f"{', '.join(found['overlapping'])}: the difference is within seed noise, and no winner is marked. "
                + ("More seeds (or a larger test set) narrow the intervals." if found["items"] is not None else
                   "More seeds narrow the intervals."))
    return (f"{found['best']} has the best mean, but {', '.join(found['no_interval'])} "
            f"{'has' if len(found['no_interval']) == 1 else 'have'} no interval (too few finished seeds), so the "
            "difference cannot be told from seed noise; no winner is marked.")


def plot_seeds(found: dict[str, Any], path: Path) -> Figure | None:
    """Per architecture (a line each): every seed's figure a dot, the 95% interval a bar, the mean a tick."""
    shown = [a for a in found["archs"] if a["count"]]
    if not shown:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 0.9 + 0.55 * len(shown)), dpi=110)
    for y, arch in enumerate(reversed(shown)):
        colour = "#d62728" if arch["arch"] == found["winner"] else "#1f77b4"
        if arch["low"] is not None:
            ax.plot([arch["low"], arch["high"]], [y, y], color=colour, lw=7, alpha=0.3, solid_capstyle="butt")
        values = [run["figure"] for run in arch["runs"] if run["figure"] is not None]
        ax.scatter(values, [y] * len(values), color=colour, s=28, zorder=3)
        ax.plot([arch["mean"]], [y], marker="|", color="black", ms=16, mew=2, zorder=4)
    ax.set_yticks(range(len(shown)), [a["arch"] + (" (winner)" if a["arch"] == found["winner"] else "")
                                      for a in reversed(shown)])
    ax.set_ylim(-0.6, len(shown) - 0.4)
    ax.set_xlabel(f"{found['split']} {found['metric']} ({better(found)} is better)")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title("each seed a dot, the mean a tick, the bootstrap 95% interval a bar", fontsize=10)
    fig.tight_layout()
    return Figure(f"{found['split']} {found['metric']} of each seed, with the 95% interval", save_png(fig, path))


# ---------------------------------------------------------------------------------------------- the Tuning section

STATES = ("COMPLETE", "PRUNED", "FAIL", "RUNNING")


def read_tuning(folder: Path) -> dict[str, Any]:
    """folder/tune.json with its trials checked and filled in ("value", "duration_s" a number or None,
    "intermediate" [[step, value]], "params" a dict); a SeqlabError for a missing or damaged file."""
    path = folder / "tune.json"
    summary = read_json(path, "tuning summary")
    if not isinstance(summary, dict) or not isinstance(summary.get("trials"), list):
        raise SeqlabError(f"{path}: not a tuning summary (no \"trials\" list); seqlab tune writes it")
    trials = []
    for trial in summary["trials"]:
        if not isinstance(trial, dict) or trial.get("state") not in STATES or not is_number(trial.get("number")):
            continue
        reported = trial.get("intermediate")
        steps = reported if isinstance(reported, list) else []
        trials.append({**trial, "value": trial.get("value") if is_number(trial.get("value")) else None,
                       "duration_s": trial.get("duration_s") if is_number(trial.get("duration_s")) else None,
                       "params": trial.get("params") if isinstance(trial.get("params"), dict) else {},
                       "intermediate": [list(pair) for pair in steps if isinstance(pair, list) and len(pair) == 2
                                        and all(is_number(v) for v in pair)]})
    trials = [t for t in trials if t["state"] != "COMPLETE" or t["value"] is not None]
    return {**summary, "trials": trials, "metric": str(summary.get("metric") or "figure"),
            "direction": "maximize" if summary.get("direction") == "maximize" else "minimize"}


def option_text(value: object) -> str:
    return f"{value:.3g}" if isinstance(value, float) else json.dumps(value)


def tuning_section(directory: Path, spec: dict[str, Any], figures: Path) -> Section:
    """Per architecture: the trial values over trials, and a table of the best value and options, the trial
    counts, the tuning wall time and the estimate of what pruning saved."""
    from seqlab.tuning.study import plot_history, pruning_saved

    section = Section("Tuning")
    section.text("Each architecture's options were tuned before its seeds were trained (seqlab tune, Optuna): "
                 "every trial a short run on the valid split; the median pruner stops a trial whose figure falls "
                 "behind the earlier trials' at the same step. Pruning saved: for each pruned trial, the median "
                 "complete trial's duration less its own, summed; an estimate of the training time it did not spend.")
    headers = ["architecture", "best", "best options", "complete", "pruned", "failed", "tuning time",
               "pruning saved (estimate)"]
    cells, pictures = [], []
    for arch, folder in spec["tuning"].items():
        try:
            summary = read_tuning(directory / str(folder))
        except DAMAGED_RUN as error:
            cells.append([str(arch), one_line(error), "", "", "", "", "", ""])
            continue
        trials, best = summary["trials"], summary.get("best")
        count = {state: sum(t["state"] == state for t in trials) for state in STATES}
        saved = pruning_saved(trials)
        wall = summary.get("wall_s")
        best_text = (f"{figure(best['value'])} (trial {best.get('number')})" if isinstance(best, dict) and
                     is_number(best.get("value")) else "no complete trial")
        chosen = best.get("params") if isinstance(best, dict) else None
        params = chosen if isinstance(chosen, dict) else {}
        cells.append([str(arch), best_text, ", ".join(f"{k}={option_text(v)}" for k, v in params.items()) or "—",
                      str(count["COMPLETE"]), str(count["PRUNED"]),
                      str(count["FAIL"]) + (f" ({count['RUNNING']} running)" if count["RUNNING"] else ""),
                      duration(wall) if is_number(wall) else "—",
                      "—" if saved is None else f"≈ {duration(saved)}"])
        if trials:
            path = plot_history({**summary, "arch": str(arch)}, figures / f"tuning-{safe_name(str(arch))}.png")
            assert path is not None                                      # saved there: no axes given
            pictures.append(Figure(f"{arch}: valid {summary['metric']} of each trial "
                                   f"({'lower' if summary['direction'] == 'minimize' else 'higher'} is better)", path))
    section.blocks.append(("table", headers, cells))
    for picture in pictures:
        section.figure(picture)
    if pictures:
        section.text("Dots: complete trials; crosses: pruned trials, at the last value they reported; the line: "
                     "the best so far; dotted vertical lines: failed trials.")
    return section
