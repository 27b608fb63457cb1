"""`seqlab tune` (Optuna: TPE, pruning, a study in SQLite that resumes), its search spaces, `seqlab compare
--seeds K --tune-trials N`, and the trainer's `--evaluations N` that spreads the evaluations the pruner reads."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import seqlab
from conftest import Killed, one_line_error, run_seqlab
from seqlab.compare.run import compare, recipe
from seqlab.errors import SeqlabError
from seqlab.tuning.space import parse_param, search_space
from seqlab.tuning.study import recipe_values, tune

FIXTURES = Path(__file__).parent / "fixtures"
SENTIMENT = str(FIXTURES / "classify" / "sentiment.tsv")
DATA = {"train": SENTIMENT, "dev": SENTIMENT}
TINY = {"batch_size": 4, "progress": False}


def summary(folder: Path) -> dict:
    return json.loads((folder / "tune.json").read_text())


def records(run: Path, name: str = "metrics.jsonl") -> list[dict]:
    return [json.loads(line) for line in (run / name).read_text().splitlines()]


# ------------------------------------------------------------------------------------------ search spaces

def test_space_entries_parse_to_ranges_and_choices():
    assert parse_param("lr", {"low": 1e-4, "high": 1e-2, "log": True}, "f").log
    layers = parse_param("num_layers", {"low": 1, "high": 3}, "f")
    assert layers.integer and layers.holds(2) and not layers.holds(2.5) and not layers.holds(4)
    assert parse_param("hidden_size", [64, 128], "f").choices == (64, 128)
    for entry, says in (({"low": 0.5, "high": 0.5}, "is empty"), ({"low": 0.6, "high": 0.1}, "is empty"),
                        ([], "an empty list"), ({"low": 0.0, "high": 1.0, "log": True}, "above 0"),
                        ({"low": 1}, "both low and high"), ({"low": 1, "high": 2, "step": 1}, "unknown: step"),
                        ("0.1", "give a range"), ({"low": "a", "high": 2}, "finite numbers"), ([1, 1], "twice")):
        with pytest.raises(SeqlabError, match=says):
            parse_param("dropout", entry, "space.yaml")


def test_the_default_space_holds_every_recipe_and_the_user_file_overrides_it():
    from seqlab.compare.run import recipes
    for task in ("lm", "tagger", "classifier", "seq2seq"):
        for arch in recipes(task):
            options = recipe(task, arch, "small")
            space = search_space(task, arch, options)
            assert "lr" in space and "dropout" in space
            width = space.get("hidden_size") or space.get("embedding_size")
            assert width is not None and width.choices[0] < width.choices[-1]
            values = recipe_values(task, options, space)
            assert all(space[name].holds(value) for name, value in values.items()), (task, arch, values)
    options = recipe("classifier", "lstm", "small")
    space = search_space("classifier", "lstm", options, {"weight_decay": None, "lr": [0.001, 0.01],
                                                         "lstm": {"dropout": {"low": 0.2, "high": 0.3}},
                                                         "gru": {"dropout": [0.9]}}, width=False)
    assert "weight_decay" not in space and "hidden_size" not in space
    assert space["lr"].choices == (0.001, 0.01) and (space["dropout"].low, space["dropout"].high) == (0.2, 0.3)


@pytest.mark.parametrize("entry,says", [
    ({"nonsense_option": [1, 2]}, "unknown option 'nonsense_option'"),
    ({"epochs": [1, 2]}, "set by the tuning budget"),
    ({"num_heads": [2, 4]}, "does nothing for the lstm architecture"),
    ({"dropout": {"low": 0.2, "high": 1.5}}, "dropout"),
])
def test_a_bad_space_entry_is_refused_naming_it(entry, says):
    with pytest.raises(SeqlabError, match=says):
        search_space("classifier", "lstm", recipe("classifier", "lstm", "small"), entry)


# ------------------------------------------------------------------------------------------ the trainer's --evaluations

@pytest.mark.parametrize("budget", [{"max_steps": 12}, {"max_tokens": 40}])
def test_evaluations_are_spread_evenly_over_the_run(tmp_path, budget):
    config = seqlab.resolve_classifier_config(overrides={**DATA, **TINY, **budget, "epochs": 100, "evaluations": 3,
                                                         "output": str(tmp_path / "run"), "arch": "pooled"})
    seqlab.train_classifier(config)
    steps = [r["step"] for r in records(tmp_path / "run") if not r.get("final")]
    last = records(tmp_path / "run", "train_log.jsonl")[-1]["step"]
    assert steps[-1] == last and len(steps) in (3, 4)           # the stop's evaluation may fall between them
    gaps = {b - a for a, b in zip([0, *steps[:-2]], steps[:-1], strict=True)}
    assert len(gaps) == 1                                        # evenly spaced


def test_evaluations_and_eval_every_together_are_refused(tmp_path):
    config = seqlab.resolve_classifier_config(overrides={**DATA, **TINY, "evaluations": 3, "eval_every": 2,
                                                         "output": str(tmp_path / "run")})
    with pytest.raises(SeqlabError, match="not both"):
        seqlab.train_classifier(config)


# ------------------------------------------------------------------------------------------ seqlab tune

@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("tune") / "pooled"
    tune("classifier", out, {**DATA, **TINY}, "pooled", trials=3, budget_epochs=1, size="tiny")
    return out


def test_tune_runs_the_recipe_first_then_the_sampler_and_writes_the_best(study):
    found = summary(study)
    assert [t["state"] for t in found["trials"]] == ["COMPLETE"] * 3
    options = recipe("classifier", "pooled", "tiny")
    assert found["trials"][0]["params"]["lr"] == options["lr"]              # trial 0 is the recipe itself
    assert len({json.dumps(t["params"], sort_keys=True) for t in found["trials"]}) == 3
    best = found["best"]
    values = [t["value"] for t in found["trials"]]
    assert best["value"] == max(values) and found["trials"][best["number"]]["value"] == best["value"]
    for trial in found["trials"]:                                # each trial is an ordinary, finished run
        final = [r for r in records(study / trial["run"]) if r.get("final")]
        assert final[0]["accuracy"] == trial["value"] and trial["tokens"] > 0
    assert (study / "history.png").read_bytes()[:4] == b"\x89PNG" and "| trial |" in (study / "tune.md").read_text()


def test_tune_best_yaml_carries_the_family_and_the_full_length_and_trains_the_best_trial_again(study, tmp_path, capsys):
    best = summary(study)["best"]
    text = (study / "best.yaml").read_text()
    config = yaml.safe_load(text)
    assert config["task"] == "classifier" and config["model"]["arch"] == "pooled"
    assert config["train"]["lr"] == best["params"]["lr"]
    assert config["train"]["epochs"] == 10 and "evaluations" not in config["train"]    # not the trials' 1 epoch
    assert "add --epochs 1 --evaluations 4" in text and "epochs is 10" in text
    # no family on the command line: best.yaml names it; the comment's options train the best trial again
    code, err = run_seqlab(["train", "--config", study / "best.yaml", "--output", tmp_path / "again", "--no-progress",
                            "--epochs", "1", "--evaluations", "4"], capsys)
    assert code == 0, err
    again = [r for r in records(tmp_path / "again") if r.get("final")][0]
    trial = [r for r in records(study / best["run"]) if r.get("final")][0]
    assert again["accuracy"] == trial["accuracy"] and again["loss"] == pytest.approx(trial["loss"], rel=1e-6)
    assert json.loads((tmp_path / "again" / "config.json").read_text())["train"]["epochs"] == 1


def test_tune_best_yaml_trains_the_full_length_by_default(study, tmp_path, capsys):
    code, err = run_seqlab(["train", "--config", study / "best.yaml", "--output", tmp_path / "full", "--no-progress",
                            "--max-steps", "2"], capsys)                # the length is config.json's; 2 steps: fast
    assert code == 0, err
    assert json.loads((tmp_path / "full" / "config.json").read_text())["train"]["epochs"] == 10
    (tmp_path / "other.yaml").write_text("task: tagger\n")
    code, err = run_seqlab(["train", "classifier", "--config", tmp_path / "other.yaml"], capsys)
    one_line_error(code, err, "is for seqlab train tagger (task: tagger), not classifier")
    (tmp_path / "none.yaml").write_text("train:\n  epochs: 3\n")
    code, err = run_seqlab(["train", "--config", tmp_path / "none.yaml"], capsys)
    one_line_error(code, err, "seqlab train needs the family before the options: seqlab train "
                              "lm|tagger|classifier|seq2seq --config")


@pytest.mark.slow
def test_a_finished_study_run_again_trains_nothing_and_more_trials_continue_it(study, monkeypatch):
    before = (study / "tune.json").read_text()
    tune("classifier", study, {**DATA, **TINY}, "pooled", trials=3, budget_epochs=1, size="tiny")
    assert [t["number"] for t in summary(study)["trials"]] == [0, 1, 2]
    assert json.loads(before)["trials"] == summary(study)["trials"]
    tune("classifier", study, {**DATA, **TINY}, "pooled", trials=4, budget_epochs=1, size="tiny")
    assert [t["number"] for t in summary(study)["trials"]] == [0, 1, 2, 3]


@pytest.mark.slow          # a kill and a resume (CI runs them in make test-slow)
def test_a_killed_study_resumes_its_trial_from_the_checkpoint(tmp_path, monkeypatch):
    import seqlab.api

    out = tmp_path / "study"
    real = seqlab.api.train

    def killed_in_trial_one(task, config, resume=False, overwrite=False, callback=None):
        def both(event):
            callback(event)
            if Path(config.train.output).name == "0001" and event["event"] == "evaluate" and event["step"] == 4:
                raise Killed
        return real(task, config, resume, overwrite, both)

    options = {**DATA, **TINY, "seed": 3}
    monkeypatch.setattr(seqlab.api, "train", killed_in_trial_one)
    with pytest.raises(Killed):
        tune("classifier", out, options, "pooled", trials=3, budget_epochs=2, size="tiny", evaluations=3)
    assert [t["state"] for t in summary(out)["trials"]] == ["COMPLETE"]
    monkeypatch.setattr(seqlab.api, "train", real)
    tune("classifier", out, options, "pooled", trials=3, budget_epochs=2, size="tiny", evaluations=3)
    trials = summary(out)["trials"]
    assert [t["state"] for t in trials] == ["COMPLETE"] * 3
    assert len({json.dumps(t["params"], sort_keys=True) for t in trials}) == 3     # no trial drawn again
    log = records(out / "trials" / "0001", "train_log.jsonl")
    assert [r["step"] for r in log] == sorted({r["step"] for r in log})       # resumed, not trained twice
    sessions = json.loads((out / "trials" / "0001" / "model_card.json").read_text())
    assert "resum" in json.dumps(sessions).lower()


@pytest.mark.slow
def test_tune_killed_mid_trial_by_sigkill_resumes_that_trial_and_ends_with_distinct_trials(tmp_path):
    """A real `seqlab tune` process killed with SIGKILL in its second trial, then the same command again: the
    killed trial runs on from its checkpoint with its own options and counts once, and the study ends with
    --trials complete trials, no two with the same options (the sampler of the resumed session is not the
    killed one's again). About 30 s: three trials of ~3 s and four process starts."""
    import optuna

    rows = (FIXTURES / "classify" / "sentiment.tsv").read_text().splitlines()
    train = tmp_path / "train.tsv"
    train.write_text("\n".join([rows[0], *rows[1:] * 80]) + "\n")      # 1,920 documents: 480 steps an epoch
    out = tmp_path / "study"
    argv = [sys.executable, "-m", "seqlab", "tune", "classifier", "--train", str(train), "--dev", SENTIMENT,
            "--arch", "pooled", "--size", "tiny", "--trials", "3", "--budget-epochs", "2", "--evaluations", "4",
            "--batch-size", "4", "--no-progress", "--output", str(out)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    checkpoint = out / "trials" / "0001" / "checkpoint.safetensors"       # trial 1's first evaluation of four
    deadline = time.time() + 120
    while not checkpoint.exists() and time.time() < deadline and process.poll() is None:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL
    storage = optuna.storages.RDBStorage(f"sqlite:///{out / 'study.db'}")
    killed = optuna.load_study(study_name="seqlab", storage=storage).trials
    assert [t.state.name for t in killed] == ["COMPLETE", "RUNNING"]        # killed in trial 1, mid-training
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "trial 1 (resumed)" in done.stderr
    assert re.search(r"resuming from step (240|480|720) \(of 960\), epoch [12] of 2", done.stdout)
    trials = summary(out)["trials"]
    assert [t["state"] for t in trials] == ["COMPLETE"] * 3 and [t["number"] for t in trials] == [0, 1, 2]
    assert trials[1]["params"] == killed[1].params                          # its own options, not drawn again
    assert len({json.dumps(t["params"], sort_keys=True) for t in trials}) == 3
    log = records(out / "trials" / "0001", "train_log.jsonl")
    assert [r["step"] for r in log] == sorted({r["step"] for r in log})     # run on, not trained twice


@pytest.mark.slow
def test_pruned_trials_stop_early_and_are_counted(tmp_path, monkeypatch):
    import optuna

    class PruneAfterTheRecipe(optuna.pruners.BasePruner):
        def prune(self, study, trial):
            return trial.number > 0

    monkeypatch.setattr(optuna.pruners, "MedianPruner", lambda **_: PruneAfterTheRecipe())
    out = tmp_path / "study"
    tune("classifier", out, {**DATA, **TINY}, "pooled", trials=3, budget_epochs=2, size="tiny", evaluations=3)
    found = summary(out)
    assert [t["state"] for t in found["trials"]] == ["COMPLETE", "PRUNED", "PRUNED"]
    assert found["pruned"] == 2 and found["best"]["number"] == 0
    full = [r["step"] for r in records(out / "trials" / "0000") if not r.get("final")]
    for trial in found["trials"][1:]:
        assert len(trial["intermediate"]) == 1                         # stopped at its first evaluation
        assert [r["step"] for r in records(out / trial["run"])] == full[:1] and len(full) > 1
        assert not any(r.get("final") for r in records(out / trial["run"]))
    assert "pruned" in (out / "tune.md").read_text()


def test_a_study_of_another_task_or_plan_in_the_folder_is_refused(study, capsys):
    code, err = run_seqlab(["tune", "tagger", "--train", FIXTURES / "tagging.conllu", "--dev",
                            FIXTURES / "tagging.conllu", "--arch", "lstm", "--output", study], capsys)
    one_line_error(code, err, "holds a study of 'classifier'")
    with pytest.raises(SeqlabError, match=r"planned differently \(arch"):
        tune("classifier", study, {**DATA, **TINY}, "gru", trials=3, budget_epochs=1, size="tiny")


@pytest.mark.parametrize("argv,says", [
    (["--space", "{space}"], "unknown option 'nonsense'"),
    (["--space", "{empty}"], "is empty"),
    (["--budget-epochs", "1", "--budget-tokens", "5"], "not allowed with argument"),
    (["--trials", "0"], "--trials"),
    (["--study-time", "soon"], "--study-time 'soon'"),
    (["--max-time", "5"], "--max-time"),
])
def test_bad_tune_options_are_one_line_errors(tmp_path, capsys, argv, says):
    (tmp_path / "space.yaml").write_text("nonsense: [1, 2]\n")
    (tmp_path / "empty.yaml").write_text("dropout: {low: 0.4, high: 0.1}\n")
    argv = [a.format(space=tmp_path / "space.yaml", empty=tmp_path / "empty.yaml") for a in argv]
    code, err = run_seqlab(["tune", "classifier", "--train", SENTIMENT, "--dev", SENTIMENT, "--arch", "pooled",
                            "--size", "tiny", "--output", tmp_path / "out", *argv], capsys)
    one_line_error(code, err, says)
    assert not (tmp_path / "out" / "trials").exists()


def test_optuna_missing_names_the_extra(tmp_path, capsys, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_optuna(name, *args, **kwargs):
        if name == "optuna":
            raise ImportError("No module named 'optuna'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_optuna)
    code, err = run_seqlab(["tune", "classifier", "--train", SENTIMENT, "--dev", SENTIMENT, "--arch", "pooled",
                            "--output", tmp_path / "out"], capsys)
    one_line_error(code, err, "pip install 'seqlab[tune]'")


# ------------------------------------------------------------------------------------------ seqlab compare

@pytest.mark.slow
def test_compare_with_seeds_and_tuning_trains_the_best_options_for_every_seed(tmp_path, capsys):
    out = tmp_path / "cmp"
    code, err = run_seqlab(["compare", "classifier", "--train", SENTIMENT, "--dev", SENTIMENT, "--archs", "pooled",
                            "--size", "tiny", "--budget-epochs", "2", "--batch-size", "4", "--no-progress",
                            "--seeds", "2", "--tune-trials", "2", "--tune-budget-epochs", "1", "--output", out],
                           capsys)
    assert code == 0, err
    plan = json.loads((out / "compare.json").read_text())
    assert plan["seeds"] == [1111, 1112] and plan["tuning"] == {"pooled": "tune/pooled"}
    assert plan["seed_runs"]["pooled"] == {"1111": "runs/pooled/seed-1111", "1112": "runs/pooled/seed-1112"}
    best = summary(out / "tune" / "pooled")["best"]["params"]
    assert "hidden_size" not in best                                 # a comparison keeps the sizes
    for seed in (1111, 1112):
        config = json.loads((out / "runs" / "pooled" / f"seed-{seed}" / "config.json").read_text())
        assert config["train"]["seed"] == seed and config["train"]["epochs"] == 2
        assert config["train"]["lr"] == best["lr"] and config["model"]["dropout"] == best["dropout"]
    finals = [[r for r in records(out / "runs" / "pooled" / f"seed-{s}") if r.get("final")][0] for s in (1111, 1112)]
    assert finals[0]["loss"] != finals[1]["loss"]                    # two seeds, two runs
    code, err = run_seqlab(["compare", "classifier", "--train", SENTIMENT, "--dev", SENTIMENT, "--archs", "pooled",
                            "--size", "tiny", "--budget-epochs", "2", "--batch-size", "4", "--no-progress",
                            "--seeds", "3", "--output", out], capsys)
    one_line_error(code, err, "planned differently (seeds")


def test_compare_seeds_without_tuning_and_tuning_options_alone(tmp_path):
    out = tmp_path / "cmp"
    compare("classifier", out, {**DATA, **TINY}, ["pooled"], budget_epochs=1, size="tiny", seeds=2, report=False)
    assert sorted(p.name for p in (out / "runs" / "pooled").iterdir()) == ["seed-1111", "seed-1112"]
    assert not (out / "tune").exists()
    with pytest.raises(SeqlabError, match="add --tune-trials"):
        compare("classifier", tmp_path / "other", {**DATA, **TINY}, ["pooled"], budget_epochs=1, size="tiny",
                tune_budget={"budget_epochs": 1}, report=False)
