"""`seqlab tune TASK` and `seqlab.tune(...)`: the options of one architecture searched on the user's data with
Optuna (Akiba et al. 2019), every trial an ordinary run directory trained under the same budget.

    seqlab tune classifier --train train.tsv --dev dev.tsv --arch pooled --trials 12 --budget-epochs 1 \
        --output tune/pooled
    seqlab train --config tune/pooled/best.yaml --output runs/pooled

What a study does:

- It starts from the architecture's compare recipe at --size (`seqlab.compare.run.recipe`), with the options
  the user gave (data, and any model or training option: an option given is fixed, and left out of the
  search). The first trial is the recipe itself, so the best found is never worse than the recipe on the
  tuning budget; the rest are drawn by the TPE sampler (Bergstra et al. 2011; its first trials at random).
- The search space is the family's (`seqlab.tuning.space`), or the user's `--space FILE`.
- Every trial trains under the same budget, epochs (`--budget-epochs`, default 1), training tokens
  (`--budget-tokens`) or wall time (`--budget`), with --evaluations evaluations spread over it; a median
  pruner (Optuna's MedianPruner) reads each evaluation's validation figure and stops a trial whose figure is
  worse than the median of the earlier trials' at the same step.
- The study stops at --trials trials, or once its trials have spent --study-time seconds or --study-tokens
  training tokens (checked before each trial starts), whichever comes first.
- It lives in DIR/study.db (SQLite); DIR/trials/NNNN are the trials' runs. A folder holding a study of another
  task or architecture, or planned with other options, is refused rather than mixed.
- At the end, and after every trial: DIR/tune.json (every trial: state, value, options, duration, tokens, the
  figures it reported), DIR/tune.md, DIR/history.png (trial values over trials) and DIR/best.yaml, the best
  trial's options as a config `seqlab train --config` takes: its family (`task:`) and the full training length
  (`seqlab train`'s epochs, not the trials' budget), its comment naming the options that train the trial again.
- A killed study resumes with the same command: the trial it was in runs on from its checkpoint with its own
  options and counts once; each session's sampler is seeded anew (--seed plus the trials already in the study),
  so a resumed study never proposes again what the killed session proposed.
"""

from __future__ import annotations

import datetime
import math
import statistics
import time
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from seqlab.errors import SeqlabError
from seqlab.fileio import atomic_write_json, atomic_write_text
from seqlab.metrics import lower_is_better
from seqlab.registry import family
from seqlab.runs.directory import RunLock, log
from seqlab.tuning.space import Param, search_space
from seqlab.version import __version__

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from optuna import Study
    from optuna.trial import FrozenTrial, Trial

STUDY_FILE = "study.db"
SUMMARY = "tune.json"
BEST = "best.yaml"
REPORT = "tune.md"
HISTORY = "history.png"
STUDY_NAME = "seqlab"
DEFAULT_TRIALS = 12
DEFAULT_EVALUATIONS = 4               # evaluations per trial: what the pruner reads
FAILURES_IN_A_ROW = 3                 # trials that fail one after another before the study gives up
SET_BY_TUNE = ("output", "max_time", "max_tokens", "time_schedule", "resume")


def import_optuna() -> ModuleType:
    """Optuna, or a SeqlabError naming the extra that installs it."""
    try:
        import optuna
    except ImportError:
        raise SeqlabError("seqlab tune needs Optuna: pip install 'seqlab[tune]'") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def trial_budget(budget_s: float | None, budget_tokens: int | None, budget_epochs: int | None) -> dict[str, Any]:
    """Each trial's training budget as run options: wall time (its step count fixed once from the measured speed,
    `--time-schedule`), training tokens, or epochs (the default: one)."""
    if sum(b is not None for b in (budget_s, budget_tokens, budget_epochs)) > 1:
        raise SeqlabError("give one of --budget (time), --budget-tokens and --budget-epochs: every trial has one "
                          "budget")
    if budget_s is not None:
        if not (math.isfinite(budget_s) and budget_s > 0):
            raise SeqlabError(f"--budget {budget_s!r}: a positive time")
        return {"max_time": float(budget_s), "time_schedule": True, "epochs": 1000}
    if budget_tokens is not None:
        if budget_tokens < 1:
            raise SeqlabError(f"--budget-tokens {budget_tokens}: at least 1")
        return {"max_tokens": int(budget_tokens), "epochs": 1000}
    epochs = 1 if budget_epochs is None else budget_epochs
    if epochs < 1:
        raise SeqlabError(f"--budget-epochs {epochs}: at least 1")
    return {"epochs": int(epochs)}


def tune(task: str, output: str | Path, given: dict[str, Any] | None = None, arch: str | None = None,
         trials: int = DEFAULT_TRIALS, study_time: float | None = None, study_tokens: int | None = None,
         budget_s: float | None = None, budget_tokens: int | None = None, budget_epochs: int | None = None,
         size: str = "small", space: dict[str, Any] | None = None, metric: str | None = None, pruner: str = "median",
         evaluations: int = DEFAULT_EVALUATIONS, width: bool = True, command: str | None = None) -> dict[str, Any]:
    """Search the options of the architecture `arch` (one of the task's compare recipes) on the data and options
    `given` (a config file's option names: train=, dev=, lr=, ...) into OUTPUT (module docstring); returns the
    summary written to OUTPUT/tune.json ("best": the best trial's number, value and options)."""
    from seqlab.compare.recipes import applicable_options, check_given, recipe, recipes

    optuna = import_optuna()
    found = family(task)
    given = dict(given or {})
    if arch is None:
        raise SeqlabError(f"seqlab tune {task} needs --arch: one of {', '.join(recipes(task))}")
    recipe(task, arch, size)                                        # an unknown arch or size: refused here
    check_given(task, given, SET_BY_TUNE, "tune", "--output DIR for the study, --budget / --budget-tokens / "
                "--budget-epochs for each trial's budget")
    if budget_epochs is not None and "epochs" in given:
        raise SeqlabError("--budget-epochs sets every trial's epochs: leave --epochs out")
    check_limits(trials, study_time, study_tokens, evaluations, pruner)
    budget = trial_budget(budget_s, budget_tokens, budget_epochs if "epochs" not in given else None)
    if "epochs" in given and budget_s is None and budget_tokens is None:
        budget = {"epochs": given.pop("epochs")}
    given = absolute_files(task, given)
    metric = metric or found.metric
    lower = lower_is_better(metric)
    options = {**recipe(task, arch, size), **applicable_options(task, arch, size, given)}
    params = search_space(task, arch, options, space, width=width)
    fixed = [name for name in params if name in given]              # given by the user: fixed, not searched
    for name in fixed:
        params.pop(name)
    if not params:
        raise SeqlabError("nothing left to search: every option of the space is fixed by an option you gave "
                          f"({', '.join(fixed)})")
    output = Path(output)
    for marker, what in (("config.json", "a run directory"), ("compare.json", "a comparison")):
        if (output / marker).exists():
            raise SeqlabError(f"--output {output} is {what}; give seqlab tune a folder of its own")
    plan = {"task": task, "arch": arch, "size": size, "options": given, "budget": budget, "metric": metric,
            "space": {name: p.as_entry() for name, p in params.items()}, "pruner": pruner,
            "evaluations": evaluations}
    with RunLock(output):                                           # one process runs a study at a time
        study = open_study(optuna, output, plan, lower, seed=int(given.get("seed", 1111)), trials=trials,
                           pruner=pruner)
        if fixed:
            log(f"fixed by your options, not searched: {', '.join(fixed)}")
        log(f"tuning {arch} for {task}: {', '.join(f'{n} {p.describe()}' for n, p in params.items())}; "
            f"{describe_limits(trials, study_time, study_tokens)}, each trial {describe_budget(budget)}")
        if not study.trials:                                        # the recipe first: the baseline to beat
            own = recipe_values(task, options, params)
            study.enqueue_trial({n: v for n, v in own.items() if params[n].holds(v)}, skip_if_exists=True)
        runner = TrialRunner(task, output, options, params, budget, metric, evaluations, given)
        distributions = {name: p.distribution() for name, p in params.items()}
        started = time.time()
        for trial in stale_trials(optuna, study):                  # a killed study: its trial resumes
            runner.run(optuna, study, optuna.trial.Trial(study, trial._trial_id), resumed=True)
        while not limit_reached(optuna, study, trials, study_time, study_tokens):
            runner.run(optuna, study, study.ask(distributions))
        summary = write_summary(optuna, study, output, plan, command, time.time() - started)
    best = summary["best"]
    if best is None:
        raise SeqlabError(f"no trial of the study in {output} completed (see {output / REPORT})")
    log(f"best: trial {best['number']}, valid {metric} {best['value']:.4g}: "
        + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in best["params"].items()))
    log(f"train it: seqlab train {task} --config {output / BEST} --output runs/{arch}-tuned")
    return summary


def recipe_values(task: str, options: dict[str, Any], params: dict[str, Param]) -> dict[str, Any]:
    """{searched option: its value in the recipe}: the recipe's own, else `seqlab train`'s default."""
    import dataclasses

    pipeline = family(task).pipeline
    values = {}
    for name in params:
        if name in options:
            values[name] = options[name]
            continue
        group = pipeline.option_groups[name]
        if group == "train" and name in pipeline.train_defaults:
            values[name] = pipeline.train_defaults[name]
            continue
        found = {f.name: f for f in dataclasses.fields(pipeline.groups[group])}[name]
        if found.default is not dataclasses.MISSING:
            values[name] = found.default
    return values


def check_limits(trials: int | None, study_time: float | None, study_tokens: int | None, evaluations: int,
                 pruner: str) -> None:
    if trials is not None and trials < 1:
        raise SeqlabError(f"--trials {trials}: at least 1")
    if study_time is not None and not (math.isfinite(study_time) and study_time > 0):
        raise SeqlabError(f"--study-time {study_time!r}: a positive time")
    if study_tokens is not None and study_tokens < 1:
        raise SeqlabError(f"--study-tokens {study_tokens}: at least 1")
    if evaluations < 0:
        raise SeqlabError(f"--evaluations {evaluations}: at least 0 (0: at the end of each epoch)")
    if pruner not in ("median", "none"):
        raise SeqlabError(f"--pruner {pruner!r}: median or none")


def absolute_files(task: str, given: dict[str, Any]) -> dict[str, Any]:
    """The data files given, checked (before any trial) and made absolute, so that a resumed study finds them
    from any folder and its plan compares equal."""
    from seqlab.config import file_fields
    from seqlab.fileio import check_input_file

    given = dict(given)
    for name in file_fields(family(task).pipeline.groups["data"]):
        if given.get(name):
            check_input_file(Path(given[name]), f"--{name.replace('_', '-')}")
            given[name] = str(Path(given[name]).resolve())
    return given


def describe_limits(trials: int | None, study_time: float | None, study_tokens: int | None) -> str:
    parts = [f"{trials} trials" if trials else None, f"{study_time:g} s" if study_time else None,
             f"{study_tokens:,} tokens" if study_tokens else None]
    return "at most " + ", ".join(p for p in parts if p)


def describe_budget(budget: dict[str, Any]) -> str:
    if "max_time" in budget:
        return f"{budget['max_time']:g} s"
    if "max_tokens" in budget:
        return f"{budget['max_tokens']:,} training tokens"
    return f"{budget['epochs']} epoch{'s' if budget['epochs'] != 1 else ''}"


def open_study(optuna: ModuleType, output: Path, plan: dict[str, Any], lower: bool, seed: int, trials: int | None,
               pruner: str) -> Study:
    """The study in OUTPUT/study.db: created with `plan` in its user attributes, or loaded when they are the
    same (another task, architecture or plan there is a SeqlabError)."""
    storage = optuna.storages.RDBStorage(f"sqlite:///{(output / STUDY_FILE).resolve()}")
    startup = min(10, max(3, (trials or 30) // 3))                 # random trials before TPE models the rest
    pruning = optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=0) if pruner == "median" else \
        optuna.pruners.NopPruner()
    names = optuna.study.get_all_study_names(storage)
    if STUDY_NAME in names:
        study: Study = optuna.load_study(study_name=STUDY_NAME, storage=storage, sampler=None, pruner=pruning)
        study.sampler = session_sampler(optuna, seed, len(study.trials), startup)
        held = study.user_attrs.get("plan") or {}
        if held.get("task") != plan["task"]:
            raise SeqlabError(f"{output} holds a study of {held.get('task')!r}, not {plan['task']}: choose another "
                              "--output")
        differs = next((k for k in plan if held.get(k) != plan[k]), None)
        if differs:
            raise SeqlabError(f"{output} holds a study planned differently ({differs}: {held.get(differs)!r}); "
                              "give the same options to resume it, or choose another --output")
        return study
    study = optuna.create_study(study_name=STUDY_NAME, storage=storage, pruner=pruning,
                                sampler=session_sampler(optuna, seed, 0, startup),
                                direction="minimize" if lower else "maximize")
    study.set_user_attr("plan", plan)
    study.set_user_attr("started", datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    study.set_user_attr("seqlab_version", __version__)
    return study


def session_sampler(optuna: ModuleType, seed: int, trials: int, startup: int) -> Any:     # a TPESampler
    """The TPE sampler of one session of a study that holds `trials` trials already, seeded with `seed` + `trials`:
    a study run without a break draws as it always did, and a resumed one does not draw again what the
    session before it drew (one seed for every session would propose the killed session's trials once more,
    each a trial of the budget spent on options already tried)."""
    return optuna.samplers.TPESampler(seed=seed + trials, n_startup_trials=startup, multivariate=True)


def stale_trials(optuna: ModuleType, study: Study) -> list[FrozenTrial]:
    """Trials left RUNNING by a killed study (the folder's lock says no other process runs it)."""
    return [t for t in study.get_trials() if t.state == optuna.trial.TrialState.RUNNING]


def finished(optuna: ModuleType, study: Study) -> list[FrozenTrial]:
    states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED, optuna.trial.TrialState.FAIL)
    return [t for t in study.get_trials() if t.state in states]


def limit_reached(optuna: ModuleType, study: Study, trials: int | None, study_time: float | None,
                  study_tokens: int | None) -> bool:
    done = finished(optuna, study)
    return bool((trials and len(done) >= trials)
                or (study_time and sum(t.user_attrs.get("duration_s", 0.0) for t in done) >= study_time)
                or (study_tokens and sum(t.user_attrs.get("tokens", 0) for t in done) >= study_tokens))


class TrialRunner:
    """Trains one trial into DIR/trials/NNNN and tells the study its result: its best valid figure (complete),
    pruned (the pruner stopped it at an evaluation) or failed (training raised a SeqlabError: a diverged loss,
    a width the architecture refuses); FAILURES_IN_A_ROW failures one after another, or the recipe's own trial
    failing, stop the study with the error (the data or the options are at fault, not the trial)."""

    def __init__(self, task: str, output: Path, options: dict[str, Any], params: dict[str, Param],
                 budget: dict[str, Any], metric: str, evaluations: int, given: dict[str, Any]) -> None:
        self.task, self.output, self.options, self.params = task, output, options, params
        self.budget, self.metric, self.evaluations, self.given = budget, metric, evaluations, given
        self.failures = 0

    def config(self, trial_params: dict[str, Any], run_dir: Path) -> Any:
        pipeline = family(self.task).pipeline
        groups = pipeline.option_groups
        options = {k: v for k, v in {**self.options, **trial_params}.items() if k in groups}
        extra: dict[str, Any] = {}
        if self.evaluations and not options.get("eval_every") and "evaluations" in groups:
            extra["evaluations"] = self.evaluations
        if "experiment" in groups and "experiment" not in self.given:
            extra["experiment"] = f"tune {self.output.resolve().name}"
        return pipeline.resolve(None, {**options, **extra, "output": str(run_dir), **self.budget}, resume=False)

    def run(self, optuna: ModuleType, study: Study, trial: Trial, resumed: bool = False) -> None:
        from seqlab.api import train
        from seqlab.runs.records import checkpoint_position

        run_dir = self.output / "trials" / f"{trial.number:04d}"
        params = dict(trial.params)
        trial.set_user_attr("run", f"trials/{trial.number:04d}")
        earlier = (checkpoint_position(run_dir) or {}) if resumed else {}
        resume = resumed and bool(earlier)
        log(f"trial {trial.number}{' (resumed)' if resume else ''}: "
            + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items()))
        started = time.time()
        reported = {int(step) for step in trial.storage.get_trial(trial._trial_id).intermediate_values}

        def prune(event: dict[str, Any]) -> None:
            value = event.get(self.metric)
            if event.get("event") != "evaluate" or not isinstance(value, (int, float)) or not math.isfinite(value):
                return
            step = int(event.get("step", 0))
            if step not in reported:
                trial.report(float(value), step)
                reported.add(step)
            if trial.should_prune():
                raise optuna.TrialPruned(f"trial {trial.number} pruned at step {step}: valid {self.metric} "
                                         f"{value:.4g}")

        state, value = None, None
        try:
            config = self.config(params, run_dir)
            results = train(self.task, config, resume=resume, overwrite=not resume, callback=prune)
            value = (results.get("valid") or {}).get(self.metric)
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise SeqlabError(f"trial {trial.number}: the run reported no finite valid {self.metric!r} (check "
                                  "--metric)")
            state = optuna.trial.TrialState.COMPLETE
            self.failures = 0
        except optuna.TrialPruned as pruned:
            log(str(pruned))
            state = optuna.trial.TrialState.PRUNED
        except SeqlabError as error:
            self.failures += 1
            trial.set_user_attr("error", str(error))
            log(f"trial {trial.number} failed: {error}")
            state = optuna.trial.TrialState.FAIL
            if trial.number == 0 or self.failures >= FAILURES_IN_A_ROW:
                self.record(trial, run_dir, started, earlier)
                study.tell(trial, state=state)
                why = "the recipe's own trial" if trial.number == 0 else f"{self.failures} trials in a row"
                raise SeqlabError(f"{why} failed, so the data or the options are at fault: {error}") from None
        self.record(trial, run_dir, started, earlier)
        if state == optuna.trial.TrialState.COMPLETE:
            assert value is not None                                   # complete: a finite number
            study.tell(trial, float(value))
            log(f"trial {trial.number}: valid {self.metric} {value:.4g} (best so far "
                f"{study.best_value:.4g}, trial {study.best_trial.number})")
        else:
            study.tell(trial, state=state)
        write_summary(optuna, study, self.output, study.user_attrs.get("plan") or {}, None, None)

    def record(self, trial: Trial, run_dir: Path, started: float, earlier: dict[str, Any]) -> None:
        """The trial's wall time (this session's, plus the training time of sessions before a resume) and
        training tokens (its checkpoint's), in its user attributes: the study's --study-time and --study-tokens
        count them."""
        from seqlab.runs.records import checkpoint_position

        position = checkpoint_position(run_dir) or {}
        trial.set_user_attr("duration_s", round(time.time() - started + float(earlier.get("elapsed", 0.0))
                                                + float(earlier.get("startup", 0.0)), 3))
        trial.set_user_attr("tokens", int(position.get("tokens", 0)))


# ------------------------------------------------------------------------------------------ the summary

def trial_rows(optuna: ModuleType, study: Study) -> list[dict[str, Any]]:
    rows = []
    for t in study.get_trials():
        rows.append({"number": t.number, "state": t.state.name,
                     "value": t.value if t.state == optuna.trial.TrialState.COMPLETE else None,
                     "params": dict(t.params), "duration_s": t.user_attrs.get("duration_s"),
                     "tokens": t.user_attrs.get("tokens"),
                     "intermediate": sorted([int(s), float(v)] for s, v in t.intermediate_values.items()),
                     "run": t.user_attrs.get("run", f"trials/{t.number:04d}"),
                     **({"error": t.user_attrs["error"]} if "error" in t.user_attrs else {})})
    return rows


def pruning_saved(rows: list[dict[str, Any]]) -> float | None:
    """An estimate of the training time pruning saved: for each pruned trial, the median complete trial's
    duration less its own (never below 0); None without a complete and a pruned trial."""
    complete = [r["duration_s"] for r in rows if r["state"] == "COMPLETE" and r["duration_s"] is not None]
    pruned = [r["duration_s"] for r in rows if r["state"] == "PRUNED" and r["duration_s"] is not None]
    if not complete or not pruned:
        return None
    median = statistics.median(complete)
    saved: float = round(sum(max(0.0, median - d) for d in pruned), 1)
    return saved


def write_summary(optuna: ModuleType, study: Study, output: Path, plan: dict[str, Any], command: str | None,
                  wall_s: float | None) -> dict[str, Any]:
    """OUTPUT/tune.json, tune.md, history.png and best.yaml from the study as it stands."""
    rows = trial_rows(optuna, study)
    complete = [r for r in rows if r["state"] == "COMPLETE"]
    lower = study.direction == optuna.study.StudyDirection.MINIMIZE
    best = (min if lower else max)(complete, key=lambda r: r["value"]) if complete else None
    durations = [r["duration_s"] or 0.0 for r in rows]
    summary = {"task": plan.get("task"), "arch": plan.get("arch"), "metric": plan.get("metric"),
               "direction": "minimize" if lower else "maximize", "size": plan.get("size"),
               "budget": plan.get("budget"), "space": plan.get("space"), "options": plan.get("options"),
               "trials": rows, "best": {k: best[k] for k in ("number", "value", "params", "run")} if best else None,
               "wall_s": round(sum(durations), 1), "pruned": sum(r["state"] == "PRUNED" for r in rows),
               "failed": sum(r["state"] == "FAIL" for r in rows), "complete": len(complete),
               "pruning_saved_s": pruning_saved(rows), "command": command or study.user_attrs.get("command"),
               "started": study.user_attrs.get("started"), "seqlab_version": __version__}
    if command:
        study.set_user_attr("command", command)
    atomic_write_json(output / SUMMARY, summary)
    if best is not None:
        write_best_config(output, plan, best)
    atomic_write_text(output / REPORT, summary_markdown(summary))
    if rows:
        plot_history(summary, output / HISTORY)
    return summary


def best_options(output: str | Path) -> dict[str, Any]:
    """The options of the best trial of the study in OUTPUT (its tune.json): the searched ones."""
    from seqlab.fileio import read_json

    summary = read_json(Path(output) / SUMMARY, "tuning summary")
    if not isinstance(summary, dict) or not isinstance(summary.get("best"), dict):
        raise SeqlabError(f"{output}: the study has no complete trial yet")
    return dict(summary["best"]["params"])


def write_best_config(output: Path, plan: dict[str, Any], best: dict[str, Any]) -> None:
    """OUTPUT/best.yaml: the best trial's run options (the recipe, the options given and the options found)
    grouped as a config file for `seqlab train --config`, with its family (`task:`, which `seqlab train --config
    best.yaml` reads when the command names none) and the full training length instead of the trials' budget
    (`full_length`); its comment says how to train the trial again exactly (`trial_flags`)."""
    import yaml

    from seqlab.fileio import read_json

    config = read_json(output / best["run"] / "config.json", "the best trial's config")
    task = plan.get("task")
    if not isinstance(task, str):                                   # open_study writes it: a damaged study
        raise SeqlabError(f"{output}: the study's plan names no task; start the study again with --overwrite")
    pipeline = family(task).pipeline
    given = plan.get("options") or {}
    budget = plan.get("budget") or {"epochs": 1}
    set_by_tune = {name for name in (*budget, "time_schedule", "evaluations", "experiment") if name not in given}
    skip = {"output", "resume", "progress", *pipeline.derived, *set_by_tune}
    defaults = {}
    for group, cls in pipeline.groups.items():
        obj = cls()
        defaults[group] = {k: getattr(obj, k) for k in vars(obj)}
        if group == "train":
            defaults[group].update(pipeline.train_defaults)
    grouped = {}
    for group in pipeline.groups:
        held = config.get(group)
        values = held if isinstance(held, dict) else {}
        kept = {k: v for k, v in values.items() if k not in skip and k in pipeline.option_groups
                and (k in best["params"] or k in given or v != defaults[group].get(k))}
        if group == "train":
            kept["epochs"] = given.get("epochs") or full_length(budget, defaults[group]["epochs"])
        if kept:
            grouped[group] = kept
    epochs = grouped["train"]["epochs"]
    again = trial_flags(budget, (config.get("train") or {}).get("evaluations", 0) if "evaluations" in set_by_tune
                        else 0)
    header = (f"# seqlab tune: the best of the study in {output} (trial {best['number']}, valid "
              f"{plan.get('metric')} {best['value']:.6g}).\n"
              f"# Each trial trained for the tuning budget ({describe_budget(budget)}); the options found are meant "
              f"for a full run,\n# so epochs is {epochs}, seqlab train's full training length for {task} (the "
              f"budget's when longer).\n# To train the best trial again exactly, add {again}.\n"
              f"# seqlab train {task} --config {output / BEST} --output runs/{plan.get('arch')}-tuned\n")
    atomic_write_text(output / BEST, header + yaml.safe_dump({"task": task, **grouped}, sort_keys=False))


def full_length(budget: dict[str, Any], default_epochs: int) -> int:
    """The epochs of a full run of the options a study found: `seqlab train`'s default for the family
    (`default_epochs`), or the trials' own epochs when they trained for more (a time or token budget caps
    epochs the trials never reached: not a length)."""
    if "max_time" in budget or "max_tokens" in budget:
        return int(default_epochs)
    return max(int(default_epochs), int(budget.get("epochs", 1)))


def trial_flags(budget: dict[str, Any], evaluations: int) -> str:
    """The options that give `seqlab train --config best.yaml` a trial's budget again: `--epochs 1`,
    `--max-time 300 --time-schedule --epochs 1000`, `--max-tokens N --epochs 1000`; with --evaluations N."""
    if "max_time" in budget:
        flags = f"--max-time {budget['max_time']:g} --time-schedule --epochs {budget['epochs']}"
    elif "max_tokens" in budget:
        flags = f"--max-tokens {budget['max_tokens']} --epochs {budget['epochs']}"
    else:
        flags = f"--epochs {budget.get('epochs', 1)}"
    return flags + (f" --evaluations {evaluations}" if evaluations else "")


def number_text(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def summary_markdown(summary: dict[str, Any]) -> str:
    best = summary["best"]
    lines = [f"# Tuning {summary['arch']} for {summary['task']}", ""]
    lines.append(f"{len(summary['trials'])} trials ({summary['complete']} complete, {summary['pruned']} pruned, "
                 f"{summary['failed']} failed), {summary['wall_s']:,.0f} s of training; each trial "
                 f"{describe_budget(summary['budget'] or {'epochs': 1})}; valid {summary['metric']}, "
                 f"{'lower' if summary['direction'] == 'minimize' else 'higher'} is better.")
    if summary.get("pruning_saved_s") is not None:
        lines.append(f"Pruning saved about {summary['pruning_saved_s']:,.0f} s (the median complete trial's time "
                     "less each pruned trial's, an estimate).")
    lines.append("")
    if best:
        lines += [f"**Best: trial {best['number']}**, valid {summary['metric']} {best['value']:.4g}: "
                  + ", ".join(f"`{k}={number_text(v)}`" for k, v in best["params"].items()) + ".", "",
                  "Train it: `seqlab train " + f"{summary['task']} --config best.yaml --output runs/"
                  f"{summary['arch']}-tuned` (in this folder).", ""]
    names = list((summary.get("space") or {}).keys())
    lines.append("| trial | state | value | " + " | ".join(names) + " | s | tokens |")
    lines.append("|---:|---|---:|" + "---:|" * len(names) + "---:|---:|")
    for row in summary["trials"]:
        value = number_text(row["value"]) if row["value"] is not None else (
            f"({number_text(row['intermediate'][-1][1])} at step {row['intermediate'][-1][0]})"
            if row["intermediate"] else "")
        cells = [str(row["number"]), row["state"].lower(), value,
                 *[number_text(row["params"].get(n, "")) for n in names],
                 f"{row['duration_s']:,.0f}" if row["duration_s"] is not None else "",
                 f"{row['tokens']:,}" if row["tokens"] is not None else ""]
        lines.append("| " + " | ".join(cells) + " |")
    if summary.get("command"):
        lines += ["", f"Command: `{summary['command']}`"]
    lines.append("")
    return "\n".join(lines)


def plot_history(summary: dict[str, Any], path: Path, ax: Axes | None = None) -> Path | None:
    """Trial values over trials: complete trials as dots, pruned ones as crosses at the last value they reported,
    the best so far as a line. Drawn on `ax` when given (the compare report's grid), else saved to `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from seqlab.training.plots import save_png

    rows = summary["trials"]
    own = ax is None
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 3.6), dpi=110)
    lower = summary["direction"] == "minimize"
    done = [(r["number"], r["value"]) for r in rows if r["state"] == "COMPLETE"]
    pruned = [(r["number"], r["intermediate"][-1][1]) for r in rows if r["state"] == "PRUNED" and r["intermediate"]]
    if done:
        ax.scatter(*zip(*done, strict=True), color="tab:blue", zorder=3, label="complete")
    if pruned:
        ax.scatter(*zip(*pruned, strict=True), color="tab:red", marker="x", zorder=3, label="pruned (last value)")
    best, line = None, []
    for number, value in sorted(done):
        best = value if best is None or (value < best if lower else value > best) else best
        line.append((number, best))
    if line:
        ax.step(*zip(*line, strict=True), where="post", color="black", linewidth=1, label="best so far")
    failed = [r["number"] for r in rows if r["state"] == "FAIL"]
    for number in failed:
        ax.axvline(number, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("trial")
    ax.set_ylabel(f"valid {summary['metric']}")
    ax.set_title(f"{summary['arch']}" + (f" ({len(failed)} failed: dotted)" if failed else ""), fontsize=9)
    if done or pruned:
        ax.legend(fontsize=7)
    if own:
        fig.tight_layout()
        return save_png(fig, path)
    return None
