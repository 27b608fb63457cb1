"""`seqlab compare TASK`: every architecture of the chapters trained on the user's own data under the same
budget, each into an ordinary run directory, then one report (`seqlab.compare.report`).

    seqlab compare lm --train data/train.txt --valid data/valid.txt --budget 5m --output cmp/
    seqlab compare --report cmp/                       # rebuild the report from the finished runs

The budget is the same for every architecture: wall time (`--budget 5m`, evaluation included) or training
tokens (`--budget-tokens N`: what the loss is summed over, documents for a classifier); each run's cosine
schedule decays over it, so no model is cut off at a high learning rate: over the tokens (`--max-tokens` of
`seqlab train`), or over the step count that the time fits, fixed once from the first steps' measured speed
(`--max-time` with `--time-schedule`: the schedule never follows the clock itself).
Each architecture has a recipe that works without tuning (the ones the benchmark tables found:
`configs/ptb-compare-*.yaml` for language models, the tagging and classification tables' settings), at sizes
chosen so that the models have similar parameter counts (`--size tiny|small|medium`). Options the user
gives (the task's data options, and any model or training option) apply to every architecture they act on.

Variants of the user's own (`--variants FILE`, YAML: `bilstm-crf: {recipe: bilstm, crf: true}`) are compared
beside or instead of the architectures: each starts from a recipe (or, without one, from `seqlab train`'s
defaults), takes the shared options, then its own. A budget of epochs (`--budget-epochs N`) trains every
model for the same number of passes over the data with its own schedule, as the benchmark tables do.

DIR/compare.json records the plan; DIR/runs/NAME is each run. A killed compare resumes where it stopped: a
finished run is kept, an interrupted one continues from its checkpoint (`--resume`), the rest start.
"""

from __future__ import annotations

import datetime
import re
from pathlib import Path
from typing import Any

from seqlab.compare.recipes import (  # noqa: F401  (archs, SIZES: re-exported)
    SIZES,
    applicable_options,
    archs,
    check_given,
    entry_options,
    recipe,
    recipes,
)
from seqlab.errors import SeqlabError
from seqlab.fileio import atomic_write_json, read_json
from seqlab.registry import family
from seqlab.runs.directory import RunLock, log
from seqlab.version import __version__

PLAN = "compare.json"
EPOCHS_UNDER_BUDGET = 1000       # with a budget, epochs only bound it from above
DEFAULT_BUDGET_S = 180.0         # three minutes per model: the whole comparison in a quarter of an hour


def parse_budget(text: str, flag: str = "--budget") -> float:
    """'90s', '5m', '1.5h' or plain seconds -> seconds."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text or "")
    if not found or float(found.group(1)) <= 0:
        raise SeqlabError(f"{flag} {text!r}: give a time such as 90s, 5m or 1.5h (a positive number; plain "
                          "numbers are seconds)")
    return float(found.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[found.group(2)]


VARIANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
SET_BY_COMPARE = ("output", "max_time", "max_tokens", "time_schedule", "resume")
NO_SEEDS: tuple[None] = (None,)  # without --seeds: one run per architecture, of its config's seed


def check_variants(task: str, variants: dict[str, Any] | None, source: str = "variants") -> dict[str, Any]:
    """Variants of the user's own: {name: {"recipe": one of the task's architectures (optional), option:
    value, ...}}, option names as in a config file (`num_layers`, `crf`). Returns them with dashes in option
    names made underscores; anything else is a SeqlabError naming the variant and what to change."""
    if variants is None:
        return {}
    if not isinstance(variants, dict) or not variants:
        raise SeqlabError(f"{source}: give a mapping from a variant's name to its options, e.g. "
                          "'bilstm-crf: {recipe: bilstm, crf: true}'")
    options = family(task).pipeline.option_groups
    checked = {}
    for name, entry in variants.items():
        if not isinstance(name, str) or not VARIANT_NAME.fullmatch(name):
            raise SeqlabError(f"{source}: variant name {name!r}: use letters, digits, '.', '_' and '-' (it names "
                              "the variant's run directory), at most 64 characters")
        if not isinstance(entry, dict):
            raise SeqlabError(f"{source}: variant {name!r}: give its options as a mapping (option: value)")
        entry = {str(k).replace("-", "_"): v for k, v in entry.items()}
        base = entry.get("recipe")
        if base is not None and base not in recipes(task):
            raise SeqlabError(f"{source}: variant {name!r}: recipe {base!r} is not an architecture seqlab compares "
                              f"for {task}; choose from {', '.join(recipes(task))}, or leave it out to start from "
                              f"seqlab train {task}'s defaults")
        for key in entry:
            if key == "recipe":
                continue
            if key not in options:
                raise SeqlabError(f"{source}: variant {name!r}: unknown option {key!r} for {task} (option names "
                                  "are a config file's: num_layers, not --layers)")
            if key in SET_BY_COMPARE or key == "epochs":
                raise SeqlabError(f"{source}: variant {name!r}: {key!r} is set by seqlab compare for every "
                                  "variant alike (the budget: --budget, --budget-tokens or --budget-epochs)")
        checked[name] = entry
    return checked


def read_variants(path: str | Path) -> dict[str, Any]:
    """A --variants file: YAML (or JSON), a mapping from each variant's name to its options (`check_variants`
    checks them). A missing, empty, binary or non-UTF-8 file is refused by `read_text`."""
    import yaml

    from seqlab.fileio import read_text

    path = Path(path)
    try:
        variants: dict[str, Any] = yaml.safe_load(read_text(path, "--variants file"))     # checked by check_variants
        return variants
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise SeqlabError(f"{path}{where}: not valid YAML ({getattr(error, 'problem', None) or error})") from None


def run_config(task: str, arch: str, size: str, given: dict[str, Any], budget: dict[str, Any], output: Path,
               variants: dict[str, Any] | None = None) -> Any:
    """The config of one architecture's (or variant's) run: its recipe, then every option the user gave that
    acts on it, then a variant's own options, then the budget and its run directory."""
    pipeline = family(task).pipeline
    options, own = entry_options(task, arch, size, variants or {})
    groups = pipeline.option_groups
    options = {**options, **given, **own}
    base = {k: v for k, v in options.items() if k in groups}
    timed = {"time_schedule": True} if "max_time" in budget else {}     # the step count fixed from the time, once
    config = pipeline.resolve(None, {**base, "output": str(output), "epochs": given.get("epochs", EPOCHS_UNDER_BUDGET),
                                     **budget, **timed}, resume=False)
    return config


def compare(task: str, output: str | Path, given: dict[str, Any] | None = None,
            arch_names: list[str] | tuple[str, ...] = (),
            budget_s: float | None = None, budget_tokens: int | None = None, size: str = "small",
            prompt: str | None = None, command: str | None = None, report: bool = True,
            variants: dict[str, Any] | None = None, budget_epochs: int | None = None, seeds: int | None = None,
            tune_trials: int | None = None, tune_budget: dict[str, Any] | None = None,
            space: dict[str, Any] | None = None, pruner: str = "median", tune_evaluations: int = 4) -> dict[str, Any]:
    """Train every architecture of `arch_names` (default: all of the task's, or none when `variants` are
    given) and every variant of `variants` ({name: {"recipe": ARCH, option: value}}) under one budget
    (wall time, training tokens or epochs) into OUTPUT/runs/NAME, resuming what an earlier compare left, then
    write the report; returns the plan.

    `seeds` K: each model is trained K times, with the seeds --seed, --seed + 1, ..., into
    OUTPUT/runs/NAME/seed-S (the report gives each one's figure, their mean and spread, and a bootstrap
    interval). `tune_trials` N: each architecture's options are first searched with N trials of `seqlab tune`
    (OUTPUT/tune/NAME; `tune_budget` {"budget_s" | "budget_tokens" | "budget_epochs": ...} is each trial's
    budget, by default the comparison's own; `space`, `pruner` and `tune_evaluations` as `seqlab tune`'s),
    then the best options are trained with the comparison's budget and seeds (one seed unless `seeds`)."""
    from seqlab.api import train

    pipeline = family(task).pipeline
    given = dict(given or {})
    check_given(task, given, SET_BY_COMPARE, "compare", "use --output DIR for the comparison, --budget / "
                "--budget-tokens / --budget-epochs for the budget")
    if sum(b is not None for b in (budget_s, budget_tokens, budget_epochs)) > 1:
        raise SeqlabError("give one of --budget (time), --budget-tokens and --budget-epochs: the models share "
                          "one budget")
    if budget_tokens is not None and budget_tokens < 1:
        raise SeqlabError(f"--budget-tokens {budget_tokens}: at least 1")
    if budget_epochs is not None and budget_epochs < 1:
        raise SeqlabError(f"--budget-epochs {budget_epochs}: at least 1")
    if budget_epochs is not None and "epochs" in given:
        raise SeqlabError("--budget-epochs sets every model's epochs: leave --epochs out")
    variants = check_variants(task, variants)
    if seeds is not None and not 1 <= seeds <= 100:
        raise SeqlabError(f"--seeds {seeds}: between 1 and 100")
    if tune_trials is not None:
        if tune_trials < 1:
            raise SeqlabError(f"--tune-trials {tune_trials}: at least 1")
        if variants:
            raise SeqlabError("--tune-trials tunes the architectures' recipes; give --archs, not --variants, or "
                              "tune a variant with seqlab tune and compare its best.yaml options as a variant")
    elif tune_budget or space is not None:
        raise SeqlabError("--tune-budget, --tune-budget-tokens, --tune-budget-epochs and --space set the tuning: "
                          "add --tune-trials N")
    from seqlab.config import file_fields
    from seqlab.fileio import check_input_file
    for name in file_fields(pipeline.groups["data"]):           # absolute, so a resumed compare finds them anywhere
        if given.get(name):
            check_input_file(Path(given[name]), f"--{name.replace('_', '-')}")     # before any model trains
            given[name] = str(Path(given[name]).resolve())
    budget: dict[str, Any]
    if budget_tokens is not None:
        budget = {"max_tokens": budget_tokens}
    elif budget_epochs is not None:
        budget = {"epochs": budget_epochs}
    else:
        budget = {"max_time": budget_s if budget_s is not None else DEFAULT_BUDGET_S}
    names = list(arch_names) or ([] if variants else list(archs(task)))
    for name in names:
        recipe(task, name, size)                               # an unknown arch or size: refused before any work
    if size not in SIZES:
        raise SeqlabError(f"--size {size!r}: choose from {', '.join(SIZES)}")
    names += list(variants)
    if len(set(names)) != len(names):
        raise SeqlabError("--archs and --variants name an architecture twice")
    output = Path(output)
    if given.get("log") and "experiment" not in given:        # --log: the trackers file the comparison's runs
        given["experiment"] = f"compare {output.resolve().name}"   # (its tuning trials too) under one experiment
    seeded = seeds is not None or tune_trials is not None
    first = int(given.get("seed", pipeline.groups["train"]().seed))
    seed_list = [first + i for i in range(seeds or 1)] if seeded else None
    tuning = {"trials": tune_trials, "budget": trial_budget_options(tune_budget, budget), "space": space,
              "pruner": pruner, "evaluations": tune_evaluations} if tune_trials else None
    with RunLock(output):                                      # one compare writes DIR at a time
        plan = start_plan(output, task, names, budget, size, given, prompt, command, variants, seed_list, tuning)
    configs = {}
    for name in names:                                         # every config first: a bad option fails before training
        kept = applicable_options(task, name, size, given, variants)
        configs[name] = run_config(task, name, size, kept, budget, output / run_path(name, seed_list), variants)
    total = len(names) * len(seed_list or [None])
    done = 0
    for name in names:
        found = {}
        if tuning:
            found = tune_architecture(task, output, name, size, given, tuning)
        for seed in seed_list or NO_SEEDS:
            done += 1
            run_dir = output / run_path(name, seed_list, seed)
            label = f"[{done}/{total}] {name}" + (f", seed {seed}" if seed is not None else "")
            state = run_state(run_dir)
            if state == "finished":
                log(f"{label}: finished already ({run_dir})")
                continue
            resume = state == "resumable"
            log(f"{label}: {'resuming' if resume else 'training'} into {run_dir}")
            if resume:
                config = pipeline.resolve(None, {"output": str(run_dir)}, resume=True)
            elif seed is None and not found:
                config = configs[name]
            else:
                kept = applicable_options(task, name, size, {**given, **found}, variants)
                config = run_config(task, name, size, {**kept, "seed": seed}, budget, run_dir, variants)
            train(task, config, resume=resume, overwrite=state == "stale")
    if report:
        from seqlab.compare.report import build_report
        build_report(output)
    return plan


BUDGET_NAMES = {"max_time": "time_s", "max_tokens": "tokens", "epochs": "epochs"}     # config -> compare.json


def run_path(name: str, seeds: list[int] | None, seed: int | None = None) -> str:
    """A model's run directory under the comparison: runs/NAME, or with seeds runs/NAME/seed-S (the first seed's
    when `seed` is None)."""
    if seeds is None:
        return f"runs/{name}"
    return f"runs/{name}/seed-{seeds[0] if seed is None else seed}"


def trial_budget_options(tune_budget: dict[str, Any] | None, budget: dict[str, Any]) -> dict[str, Any]:
    """Each tuning trial's budget as `seqlab.tuning.study.tune` takes it: the one given, else the comparison's."""
    if tune_budget:
        given = {k: v for k, v in tune_budget.items() if v is not None}
        if len(given) > 1:
            raise SeqlabError("give one of --tune-budget, --tune-budget-tokens and --tune-budget-epochs")
        if given:
            return given
    if "max_time" in budget:
        return {"budget_s": budget["max_time"]}
    if "max_tokens" in budget:
        return {"budget_tokens": budget["max_tokens"]}
    return {"budget_epochs": budget["epochs"]}


def tune_architecture(task: str, output: Path, name: str, size: str, given: dict[str, Any],
                      tuning: dict[str, Any]) -> dict[str, Any]:
    """Search `name`'s options with `seqlab tune` into OUTPUT/tune/NAME (resumed where a killed compare left it;
    done already, it trains nothing) and return the best trial's options. The width stays the recipe's at the
    comparison's --size unless the --space file names it: the models keep comparable sizes."""
    from seqlab.tuning.study import best_options, tune

    folder = output / "tune" / name
    log(f"{name}: tuning with {tuning['trials']} trials into {folder}")
    given = {k: v for k, v in given.items() if k != "epochs"}
    tune(task, folder, given, name, trials=tuning["trials"], size=size, space=tuning["space"],
         pruner=tuning["pruner"], evaluations=tuning["evaluations"], width=False, **tuning["budget"])
    return best_options(folder)


def start_plan(output: Path, task: str, names: list[str], budget: dict[str, Any], size: str, given: dict[str, Any],
               prompt: str | None, command: str | None, variants: dict[str, Any] | None = None,
               seeds: list[int] | None = None, tuning: dict[str, Any] | None = None) -> dict[str, Any]:
    """DIR/compare.json: a new plan, or the one an earlier compare of the same task wrote (resumed as planned;
    a different task, budget, size, options, variants, seeds or tuning in DIR is refused rather than mixed).
    With seeds, "seed_runs" names each seed's run and "runs" the first seed's; with tuning, "tuning" names
    each architecture's study folder."""
    path = output / PLAN
    variants = variants or {}
    wanted: dict[str, Any] = {"task": task, "budget": {BUDGET_NAMES[k]: v for k, v in budget.items()}, "size": size,
                              "options": given, **({"seeds": seeds} if seeds is not None else {}),
                              **({"tune": tuning} if tuning is not None else {})}
    for key in ("seeds", "tune"):                         # given before and not now (or the other way): differs
        wanted.setdefault(key, None)
    if path.exists():
        plan = read_json(path, "compare plan")
        if not isinstance(plan, dict) or any(plan.get(k) != v for k, v in wanted.items()):
            differs = next((k for k, v in wanted.items() if not isinstance(plan, dict) or plan.get(k) != v), "task")
            raise SeqlabError(f"{output} holds a comparison planned differently ({differs}: "
                              f"{plan.get(differs) if isinstance(plan, dict) else '?'!r}); choose another --output, "
                              "or give the same options to resume it")
        planned = plan.get("variants") or {}
        listed = plan.get("archs")
        archs = listed if isinstance(listed, list) else []
        for name in names:
            if name in archs and planned.get(name) != variants.get(name):
                raise SeqlabError(f"{output} holds a comparison planned differently ({name!r} was planned as "
                                  f"{planned.get(name) or 'the recipe'}); choose another --output, or give the "
                                  "same variants to resume it")
        added = [name for name in names if name not in archs]
        if added:          # more architectures or variants for the same comparison: planned beside the others
            plan["archs"] = archs + added
            plan["runs"] = {**(plan.get("runs") or {}), **{name: run_path(name, seeds) for name in added}}
            plan["variants"] = {**planned, **{n: variants[n] for n in added if n in variants}} or None
            plan.update(seed_layout(plan["archs"], seeds, tuning))
            atomic_write_json(path, plan)
        return plan
    plan = {**wanted, "archs": names, "variants": variants or None,
            "runs": {name: run_path(name, seeds) for name in names}, **seed_layout(names, seeds, tuning),
            "metric": family(task).metric,
            "lower_is_better": family(task).lower_is_better, "prompt": prompt, "command": command,
            "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "seqlab_version": __version__, "title": family(task).title}
    atomic_write_json(path, plan)
    return plan


def seed_layout(names: list[str], seeds: list[int] | None, tuning: dict[str, Any] | None) -> dict[str, Any]:
    """compare.json's "seed_runs" ({name: {seed: its run}}) and "tuning" ({name: its study folder})."""
    layout: dict[str, Any] = {}
    if seeds is not None:
        layout["seed_runs"] = {name: {str(s): run_path(name, seeds, s) for s in seeds} for name in names}
    if tuning is not None:
        layout["tuning"] = {name: f"tune/{name}" for name in names}
    return layout


def run_state(run_dir: Path) -> str:
    """new (nothing there), finished (a final record), resumable (a checkpoint), or stale (a run killed
    before its first checkpoint: started again)."""
    from seqlab.runs.records import read_records

    if not (run_dir / "config.json").exists():
        return "new"
    if any(r.get("final") for r in read_records(run_dir / "metrics.jsonl")):
        return "finished"
    return "resumable" if (run_dir / "checkpoint.safetensors").exists() else "stale"

