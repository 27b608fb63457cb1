"""The report of a compare directory (issue 18): `build_report(DIR)` writes DIR/report.md, DIR/report.html
and DIR/figures/*.png from the runs under DIR/runs (the layout `seqlab.compare.run` writes: compare.json
names the task, the runs and the figure they are ranked by).

What it shows, for a person to look at rather than read:

- a table, one row per architecture: parameters, training tokens/s, wall time, the step of the best
  weights, the valid and test figure (the runs' final records in metrics.jsonl), the winner (the best
  valid figure among the finished runs) marked, unfinished or damaged runs said to be so;
- the validation curves against steps and against wall time (one line per architecture), and speed
  against quality (tokens/s against the valid figure);
- per family, its `compare` part's sections (`seqlab.families.<name>.compare.sections`): a sample of
  each language model for the same prompt and the pictures of inside them (`seqlab.compare.inside`: the
  gates of recurrent cells and a transformer head's attention, SLP 13.5, 9.4); the tag pairs each tagger
  confuses most and the winner's confusion heat map; each classifier's confusion matrix; the same
  development sources translated by each sequence-to-sequence model and the winner's attention heat map
  (Bahdanau et al. 2015, Fig. 3);
- with several seeds (compare.json's "seeds"), first a Seeds section: each seed's figure, mean ± sd and a
  bootstrap 95% interval per architecture, the winner marked only where the intervals separate; with
  "tuning", a Tuning section: each architecture's trial history (`seqlab.compare.seeds`).

report.html is self-contained (`seqlab.compare.pages` writes both pages): every image a base64
`data:image/png` URI, inline CSS, no script and no link, so it opens the same offline, attached to a mail
or years later. Every text from the user (file names, architectures, samples, tags) is escaped.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

from seqlab.compare import seeds
from seqlab.compare.pages import DAMAGED_RUN, Figure, Section, is_number, one_line, render_html, render_markdown
from seqlab.errors import SeqlabError
from seqlab.fileio import atomic_write_text, check_writable, read_json, safetensors_metadata
from seqlab.info import count_parameters, run_info
from seqlab.metrics import lower_is_better
from seqlab.progress import progress_bar
from seqlab.registry import FAMILIES
from seqlab.runs.records import number, read_records
from seqlab.training.plots import save_png


def build_report(directory: str | Path, progress: bool | None = None) -> dict[str, Any]:
    """Write DIR/report.md, DIR/report.html and DIR/figures/*.png for the compare directory DIR; return
    {"markdown": path, "html": path, "table": rows} (a row per architecture: `run_row`). `progress`: a
    bar over the models (None: when stderr is a terminal; False: none). A missing DIR or compare.json
    is a SeqlabError; a missing, unfinished or damaged run is a row that says so."""
    directory = Path(directory)
    spec = read_spec(directory)
    figures = directory / "figures"
    check_writable(figures, "the report's figures folder", folder=True)
    metric = spec["metric"]
    rows = [run_row(directory, arch, path, metric) for arch, path in spec["runs"].items()]
    winner = pick_winner(rows, spec["lower_is_better"])
    sections = [Section("Curves", [("figure", f) for f in (plot_validation(rows, metric, figures / "curves.png"),
                                                          plot_speed(rows, metric, figures / "speed_quality.png"))
                                   if f is not None])]
    if len(sections[0].blocks) < 2:
        sections[0].text("Curves and the speed plot need evaluations and finished runs; some are missing.")
    if isinstance(spec.get("variants"), dict) and spec["variants"]:
        sections.insert(0, variants_section(spec))
    spec["seeds_headline"] = None               # the Seeds verdict, for pages.headline (never compare.json's)
    if seeds.several(spec):                     # each seed's figure, the intervals; a winner only where they separate
        seed_rows = {arch: [(seed, run_row(directory, arch, path, metric)) for seed, path in runs]
                     for arch, runs in seeds.seed_runs(spec).items()}
        found = seeds.seed_statistics(spec, seed_rows, progress)
        winner, spec["seeds_headline"] = seeds.mark_winner(rows, found), seeds.headline(found)
        sections.insert(0, seeds.seeds_section(found, figures))
    if isinstance(spec.get("tuning"), dict) and spec["tuning"]:
        sections.append(seeds.tuning_section(directory, spec, figures))
    models = load_models(rows, progress)
    sections += FAMILIES[spec["task"]].part("compare").sections(spec, rows, models, winner, figures)
    markdown_path, html_path = directory / "report.md", directory / "report.html"
    atomic_write_text(markdown_path, render_markdown(spec, rows, winner, sections, directory))
    atomic_write_text(html_path, render_html(spec, rows, winner, sections))
    return {"markdown": markdown_path, "html": html_path, "table": rows}


def variants_section(spec: dict[str, Any]) -> Section:
    """What each of the user's variants is: the recipe it starts from and its own options."""
    section = Section("Variants")
    section.text("Each variant starts from a recipe (or from seqlab train's defaults), takes the options shared by "
                 "every model, then its own options, listed here.")
    cells = []
    for name, entry in spec["variants"].items():
        entry = entry if isinstance(entry, dict) else {}
        own = ", ".join(f"{k}={json.dumps(v)}" for k, v in entry.items() if k != "recipe")
        cells.append([str(name), str(entry.get("recipe") or f"seqlab train {spec['task']} defaults"), own or "—"])
    section.blocks.append(("table", ["variant", "starts from", "its own options"], cells))
    return section


def read_spec(directory: Path) -> dict[str, Any]:
    """compare.json, checked, with its defaults: "runs" ({arch: path}; default runs/<arch> for each of
    "archs"), "metric" (the task's usual figure) and "lower_is_better" (its declaration in `seqlab.metrics`)."""
    if not directory.exists():
        raise SeqlabError(f"compare directory {directory} does not exist")
    if not directory.is_dir():
        raise SeqlabError(f"{directory} is a file, expected a compare directory (the --output of seqlab compare)")
    path = directory / "compare.json"
    if not path.exists():
        raise SeqlabError(f"{directory} is not a compare directory: it has no compare.json (seqlab compare writes it)")
    spec = read_json(path, "compare file")
    if not isinstance(spec, dict) or spec.get("task") not in FAMILIES:
        task = spec.get("task") if isinstance(spec, dict) else None
        raise SeqlabError(f"{path}: the task {task!r} is not one of {', '.join(FAMILIES)}")
    listed, named = spec.get("archs"), spec.get("runs")
    archs = listed if isinstance(listed, list) else []
    given = named if isinstance(named, dict) else {}
    runs = {str(arch): str(given.get(arch, f"runs/{arch}")) for arch in [*archs, *given]}
    if not runs:
        raise SeqlabError(f"{path} names no architectures (its \"archs\" and \"runs\" are empty)")
    metric = spec["metric"] if isinstance(spec.get("metric"), str) else FAMILIES[spec["task"]].metric
    lower = spec.get("lower_is_better")
    return {**spec, "runs": runs, "metric": metric,
            "lower_is_better": lower if isinstance(lower, bool) else lower_is_better(metric)}


def run_row(directory: Path, arch: str, path: str, metric: str) -> dict[str, Any]:
    """One architecture's line of the table. "status": finished (a final valid record), not finished, not
    started (no run yet) or damaged (its files, or its config.json as its task's config, cannot be read;
    "note" says why, and the figures that could be read are shown). The figures come from the run's
    files: metrics.jsonl (the final records, the evaluations, the best step), and for parameters,
    tokens/s and wall time model_card.json's model_details when the card is of the weights in
    model.safetensors (its weights_sha256), else the weights' shapes and the trainer's position in
    checkpoint.safetensors (tokens seen / elapsed), else train_log.jsonl's tokens_per_s and the last
    evaluation's elapsed_s."""
    run_dir = directory / path
    row: dict[str, Any] = {"arch": arch, "run_dir": str(run_dir), "status": "not started", "note": "",
                           "parameters": None, "tokens_per_s": None, "wall_time_s": None, "best_step": None, "steps": 0,
                           "valid": None, "test": None, "last_valid": None, "winner": False, "evaluations": []}
    if not (run_dir / "config.json").exists():
        row["note"] = f"no run in {path}" if not run_dir.exists() else f"{path} has no config.json yet"
        return row
    try:
        records = read_records(run_dir / "metrics.jsonl")
        logged = read_records(run_dir / "train_log.jsonl")
        card = read_card(run_dir)
        weights = run_dir / "model.safetensors"
        parameters = card.get("parameters") if is_number(card.get("parameters")) else (
            count_parameters(weights)[0] if weights.exists() else None)
    except DAMAGED_RUN as error:
        return {**row, "status": "damaged", "note": one_line(error)}
    trainer = trainer_position(run_dir)
    valid = [r for r in records if r.get("split") == "valid" and not r.get("final") and is_number(r.get("step"))]
    evaluations = [r for r in valid if is_number(r.get(metric))]
    final = {r["split"]: r for r in records if r.get("final") and isinstance(r.get("split"), str)}
    elapsed = [r["elapsed_s"] for r in records if is_number(r.get("elapsed_s"))]
    speeds = [r["tokens_per_s"] for r in logged if is_number(r.get("tokens_per_s"))]
    row.update(parameters=parameters,
               tokens_per_s=first_number(card.get("tokens_per_s"), trainer.get("tokens_per_s"),
                                         sum(speeds) / len(speeds) if speeds else None),
               wall_time_s=first_number(card.get("wall_time_s"), trainer.get("elapsed"),
                                        elapsed[-1] if elapsed else None),
               best_step=next((r["step"] for r in reversed(valid) if r.get("best")), None),
               steps=max((r["step"] for r in records + logged if is_number(r.get("step"))), default=0),
               evaluations=evaluations, last_valid=evaluations[-1][metric] if evaluations else None)
    for split in ("valid", "test"):
        value = final.get(split, {}).get(metric)
        row[split] = value if is_number(value) else None
    if "valid" in final:
        row["status"] = "finished"
        if row["valid"] is None:
            row["note"] = f"its final valid record has no {metric}"
    else:
        row["status"] = "not finished"
        row["note"] = f"stopped at step {row['steps']:,}" + (
            f"; last valid {metric} {number(row['last_valid'])}" if row["last_valid"] is not None else "")
    try:
        run_info(run_dir)                 # config.json read as its task's config: what loading the model needs
    except DAMAGED_RUN as error:
        row.update(status="damaged", note=one_line(error))
    return row


def trainer_position(run_dir: Path) -> dict[str, Any]:
    """The trainer's position saved in checkpoint.safetensors' header (tokens seen, elapsed seconds) with
    tokens_per_s = tokens / elapsed; {} when there is none."""
    try:
        trainer = json.loads(safetensors_metadata(run_dir / "checkpoint.safetensors").get("trainer", "{}"))
    except (ValueError, TypeError):
        return {}
    if not isinstance(trainer, dict):
        return {}
    tokens, elapsed = trainer.get("tokens"), trainer.get("elapsed")
    if is_number(tokens) and is_number(elapsed) and elapsed > 0:
        trainer["tokens_per_s"] = tokens / elapsed
    return trainer


def first_number(*values: object) -> float | None:
    """The first of `values` that is a number (None if none is)."""
    return next((v for v in values if is_number(v)), None)


def read_card(run_dir: Path) -> dict[str, Any]:
    """model_card.json's model_details, if the card is of the weights now in model.safetensors; else {}."""
    path = run_dir / "model_card.json"
    if not path.exists():
        return {}
    try:
        card = read_json(path, "model card")
    except SeqlabError:
        return {}
    weights = safetensors_metadata(run_dir / "model.safetensors").get("sha256")
    if not isinstance(card, dict) or card.get("weights_sha256") != weights or not isinstance(
            card.get("model_details"), dict):
        return {}
    details: dict[str, Any] = card["model_details"]
    return details


def pick_winner(rows: list[dict[str, Any]], lower_is_better: bool) -> dict[str, Any] | None:
    """The finished row with the best valid figure (the first of a tie), marked "winner"; None if none."""
    ranked = [r for r in rows if r["status"] == "finished" and r["valid"] is not None]
    if not ranked:
        return None
    winner = (min if lower_is_better else max)(ranked, key=lambda r: r["valid"])
    winner["winner"] = True
    return winner


def load_models(rows: list[dict[str, Any]], progress: bool | None) -> dict[str, Any]:
    """{arch: the trained model} for each run with weights; a run that fails to load gets a note."""
    from seqlab.registry import load

    models = {}
    for row in progress_bar(rows, progress, desc="report", unit="model", leave=False):
        if row["status"] in ("finished", "not finished") and row["parameters"] is not None:
            try:
                models[row["arch"]] = load(row["run_dir"])
            except DAMAGED_RUN as error:
                row["note"] = (row["note"] + "; " if row["note"] else "") + f"cannot be loaded: {one_line(error)}"
    return models


# ---------------------------------------------------------------------------------------------- figures

def pyplot() -> ModuleType:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_validation(rows: list[dict[str, Any]], metric: str, path: Path) -> Figure | None:
    """The valid figure of each run's evaluations against optimizer steps and against wall time."""
    shown = [r for r in rows if r["evaluations"]]
    if not shown:
        return None
    plt = pyplot()
    fig, (by_step, by_time) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=110)
    for i, row in enumerate(shown):                  # one colour per architecture in both panels
        steps = [r["step"] for r in row["evaluations"]]
        values = [r[metric] for r in row["evaluations"]]
        style = {"color": f"C{i % 10}", "lw": 3 if row["winner"] else 1.5, "marker": "o", "ms": 3, "label": row["arch"]
                 + (" (winner)" if row["winner"] else "")}
        by_step.plot(steps, values, **style)
        timed = [(r["elapsed_s"], r[metric]) for r in row["evaluations"] if is_number(r.get("elapsed_s"))]
        if timed:
            by_time.plot(*zip(*timed, strict=True), **style)
    for ax, label in ((by_step, "optimizer step"), (by_time, "wall time (s)")):
        ax.set_xlabel(label)
        ax.set_ylabel(f"valid {metric}")
        ax.grid(alpha=0.3)
    by_step.legend(fontsize=8)
    by_step.set_title(f"valid {metric} against steps", fontsize=10)
    by_time.set_title(f"valid {metric} against wall time", fontsize=10)
    fig.tight_layout()
    return Figure(f"valid {metric} against steps and wall time", save_png(fig, path))


def plot_speed(rows: list[dict[str, Any]], metric: str, path: Path) -> Figure | None:
    """Speed against quality: each finished run's training tokens/s and its valid figure."""
    shown = [r for r in rows if r["status"] == "finished" and r["valid"] is not None and r["tokens_per_s"]]
    if not shown:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.2), dpi=110)
    for row in shown:
        ax.scatter(row["tokens_per_s"], row["valid"], s=140 if row["winner"] else 50,
                   marker="*" if row["winner"] else "o", color="#d62728" if row["winner"] else "#1f77b4", zorder=3)
        ax.annotate(row["arch"], (row["tokens_per_s"], row["valid"]), textcoords="offset points", xytext=(6, 5),
                    fontsize=9)
    speeds = [r["tokens_per_s"] for r in shown]
    if min(speeds) > 0 and max(speeds) / min(speeds) > 20:
        ax.set_xscale("log")
    ax.set_xlabel("training tokens / s (faster to the right)")
    ax.set_ylabel(f"valid {metric}")
    ax.grid(alpha=0.3)
    ax.set_title("speed against quality", fontsize=10)
    fig.tight_layout()
    return Figure("speed against quality", save_png(fig, path))


# ---------------------------------------------------------------------------------------------- tasks
