"""`--log tensorboard mlflow`: the trackers hold what the run directory holds.

Each test trains a tiny run and reads the trackers back with their own readers (TensorBoard's
EventAccumulator, MLflow's MlflowClient), comparing them with train_log.jsonl, metrics.jsonl, config.json,
MODEL_CARD.md and the PNGs. The MLflow tests use a file store (MLFLOW_ALLOW_FILE_STORE: opened in
milliseconds); creating the default SQLite store runs MLflow's migrations (~7 s), so the one test of it is slow.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import seqlab
from conftest import Killed, one_line_error, run_seqlab, tiny_config
from seqlab.config import OptionError, coerce
from seqlab.errors import SeqlabWarning
from seqlab.training import trackers
from seqlab.training.config import TrainConfig

FIXTURES = Path(__file__).parent / "fixtures"
SENTIMENT = str(FIXTURES / "classify" / "sentiment.tsv")
CLASSIFIER = ["train", "classifier", "--train", SENTIMENT, "--dev", SENTIMENT, "--format", "tsv",
              "--embedding-size", "8", "--hidden-size", "8", "--max-steps", "6", "--eval-every", "3",
              "--log-every", "1", "--no-progress"]


def records(run: Path, name: str) -> list[dict]:
    return [json.loads(line) for line in (run / name).read_text(encoding="utf-8").splitlines()]


def evaluations(run: Path) -> list[dict]:
    return [r for r in records(run, "metrics.jsonl") if not r.get("final")]


def tensorboard_events(run: Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run / "tensorboard"), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    events.Reload()
    return events


def tensorboard_text(events, tag: str) -> str:
    return events.Tensors(f"{tag}/text_summary")[-1].tensor_proto.string_val[0].decode("utf-8")


@pytest.fixture
def file_store(tmp_path, monkeypatch) -> str:
    """A fresh MLflow file store (MLflow 3 refuses one unless MLFLOW_ALLOW_FILE_STORE is set)."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return (tmp_path / "store").as_uri()


def mlflow_run(run: Path):
    """(client, MLflow run) of the run directory, from its trackers.json."""
    from mlflow import MlflowClient

    saved = json.loads((run / "trackers.json").read_text())["mlflow"]
    client = MlflowClient(tracking_uri=saved["tracking_uri"])
    return client, client.get_run(saved["run_id"])


def history(client, run_id: str, name: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, name))


def test_trackers_tensorboard_holds_the_runs_records(tmp_path):
    run = tmp_path / "lm"
    seqlab.train_lm(tiny_config(run, log=["tensorboard"]))
    events = tensorboard_events(run)
    evaluated = evaluations(run)
    for figure in ("loss", "perplexity", "bits_per_char", "tokens"):
        scalars = events.Scalars(f"valid/{figure}")
        assert [e.step for e in scalars] == [r["step"] for r in evaluated] == [4, 8]
        assert [e.value for e in scalars] == pytest.approx([r[figure] for r in evaluated], rel=1e-6)  # float32
    logged = records(run, "train_log.jsonl")
    for figure in ("loss", "lr", "tokens_per_s"):
        scalars = events.Scalars(f"train/{figure}")
        assert [e.step for e in scalars] == [r["step"] for r in logged] == list(range(1, 9))
        assert [e.value for e in scalars] == pytest.approx([r[figure] for r in logged], rel=1e-6, abs=1e-12)
    for final in (r for r in records(run, "metrics.jsonl") if r.get("final")):
        (point,) = events.Scalars(f"final/{final['split']}/loss")
        assert (point.step, point.value) == (final["trained_steps"], pytest.approx(final["loss"], rel=1e-6))
    assert "valid/best" not in events.Tags()["scalars"] and "valid/step" not in events.Tags()["scalars"]
    config = json.loads(tensorboard_text(events, "config").removeprefix("```json\n").removesuffix("\n```"))
    assert config["model"] == json.loads((run / "config.json").read_text())["model"]
    assert config["train"]["log"] == ["tensorboard"]
    assert tensorboard_text(events, "model_card") == (run / "MODEL_CARD.md").read_text(encoding="utf-8")
    from PIL import Image

    (image,) = events.Images("plots/curves")
    assert (image.width, image.height) == Image.open(run / "curves.png").size
    assert json.loads((run / "trackers.json").read_text())["step"] == 8


def test_trackers_mlflow_params_metrics_artefacts_and_a_finished_run(tmp_path, file_store):
    run = tmp_path / "lm"
    seqlab.train_lm(tiny_config(run, log=["mlflow"], mlflow_uri=file_store, experiment="tiny"))
    client, found = mlflow_run(run)
    assert found.info.status == "FINISHED" and found.info.run_name == "lm"
    assert client.get_experiment(found.info.experiment_id).name == "tiny"
    params = found.data.params
    assert params["train.lr"] == "0.003" and params["model.hidden_size"] == "24" and params["task"] == "lm"
    assert params["train.log"] == '["mlflow"]' and params["data.train"].endswith("shakespeare_train.txt")
    assert found.data.tags["seqlab.task"] == "lm" and found.data.tags["seqlab.run_dir"] == str(run.resolve())
    evaluated = evaluations(run)
    assert history(client, found.info.run_id, "valid/loss") == [(r["step"], r["loss"]) for r in evaluated]
    assert history(client, found.info.run_id, "valid/perplexity") == [(r["step"], r["perplexity"]) for r in evaluated]
    assert history(client, found.info.run_id, "train/loss") == [(r["step"], r["loss"]) for r in
                                                                records(run, "train_log.jsonl")]
    final = {r["split"]: r for r in records(run, "metrics.jsonl") if r.get("final")}
    assert history(client, found.info.run_id, "final/test/loss") == [(8, final["test"]["loss"])]
    artefacts = {f.path for f in client.list_artifacts(found.info.run_id)}
    assert {"config.json", "MODEL_CARD.md", "model_card.json", "metrics.jsonl", "train_log.jsonl",
            "curves.png"} <= artefacts
    card = Path(client.download_artifacts(found.info.run_id, "MODEL_CARD.md", str(tmp_path)))
    assert card.read_text(encoding="utf-8") == (run / "MODEL_CARD.md").read_text(encoding="utf-8")


def test_trackers_resume_continues_the_same_mlflow_run_and_tensorboard(tmp_path, file_store):
    run = tmp_path / "lm"
    seqlab.train_lm(tiny_config(run, max_steps=4, log=["mlflow", "tensorboard"], mlflow_uri=file_store))
    first = json.loads((run / "trackers.json").read_text())["mlflow"]["run_id"]
    seqlab.train_lm(tiny_config(run, max_steps=8, log=["mlflow", "tensorboard"], mlflow_uri=file_store),
                    resume=True)
    client, found = mlflow_run(run)
    assert found.info.run_id == first and found.info.status == "FINISHED"
    assert len(client.search_runs([found.info.experiment_id])) == 1
    evaluated = evaluations(run)
    assert [r["step"] for r in evaluated] == [4, 8]
    assert history(client, first, "valid/loss") == [(r["step"], r["loss"]) for r in evaluated]
    assert [step for step, _ in history(client, first, "train/loss")] == list(range(1, 9))
    finals = [r for r in records(run, "metrics.jsonl") if r.get("final") and r["split"] == "valid"]
    assert history(client, first, "final/valid/loss") == [(r["trained_steps"], r["loss"]) for r in finals]
    assert [e.step for e in tensorboard_events(run).Scalars("train/loss")] == list(range(1, 9))


def test_trackers_resume_after_a_crash_purges_tensorboard_and_reopens_the_failed_mlflow_run(tmp_path, file_store):
    """Killed at step 6, after the checkpoint of step 4: the resumed session logs steps 5-8 again. TensorBoard
    hides the first session's 5 and 6; MLflow keeps them (its history cannot be cut), the same values."""
    run = tmp_path / "lm"

    def kill_at_step_6(event):
        if event["event"] == "log" and event["step"] == 6:
            raise Killed

    with pytest.raises(Killed):
        seqlab.train_lm(tiny_config(run, log=["tensorboard", "mlflow"], mlflow_uri=file_store),
                        callback=kill_at_step_6)
    client, found = mlflow_run(run)
    assert found.info.status == "FAILED"
    seqlab.train_lm(tiny_config(run, log=["tensorboard", "mlflow"], mlflow_uri=file_store), resume=True)
    logged = records(run, "train_log.jsonl")
    scalars = tensorboard_events(run).Scalars("train/loss")
    assert [e.step for e in scalars] == [r["step"] for r in logged] == list(range(1, 9))
    assert [e.value for e in scalars] == pytest.approx([r["loss"] for r in logged], rel=1e-6)
    client, resumed = mlflow_run(run)
    assert resumed.info.run_id == found.info.run_id and resumed.info.status == "FINISHED"
    assert sorted(set(history(client, found.info.run_id, "train/loss"))) == [(r["step"], r["loss"]) for r in logged]


def test_trackers_a_tracker_new_to_a_resumed_run_gets_its_records_so_far(tmp_path, file_store):
    run = tmp_path / "lm"
    seqlab.train_lm(tiny_config(run, max_steps=4))
    assert not (run / "trackers.json").exists()
    seqlab.train_lm(tiny_config(run, max_steps=8, log=["mlflow"], mlflow_uri=file_store), resume=True)
    client, found = mlflow_run(run)
    assert history(client, found.info.run_id, "train/loss") == [(r["step"], r["loss"]) for r in
                                                                records(run, "train_log.jsonl")]
    assert [step for step, _ in history(client, found.info.run_id, "valid/loss")] == [4, 8]
    assert [step for step, _ in history(client, found.info.run_id, "final/valid/loss")] == [4, 8]
    assert found.data.params["train.max_steps"] == "8"                   # the options this session ran with


def test_trackers_an_overwritten_run_keeps_nothing_of_the_replaced_runs_trackers(tmp_path, file_store):
    run = tmp_path / "lm"
    seqlab.train_lm(tiny_config(run, max_steps=4, log=["mlflow", "tensorboard"], mlflow_uri=file_store))
    replaced = json.loads((run / "trackers.json").read_text())["mlflow"]["run_id"]
    seqlab.train_lm(tiny_config(run, max_steps=4), overwrite=True)
    assert not (run / "trackers.json").exists() and not (run / "tensorboard").exists()
    seqlab.train_lm(tiny_config(run, max_steps=8, log=["mlflow"], mlflow_uri=file_store), resume=True)
    client, found = mlflow_run(run)
    assert found.info.run_id != replaced                                  # not the replaced run's MLflow run
    assert [step for step, _ in history(client, found.info.run_id, "valid/loss")] == [4, 8]


def test_trackers_cli_classifier_logs_to_both(tmp_path, capsys, monkeypatch, file_store):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", file_store)                 # the store when --mlflow-uri is not given
    run = tmp_path / "sentiment"
    code, err = run_seqlab([*CLASSIFIER, "--output", run, "--log", "tensorboard", "mlflow", "--experiment",
                            "sentiment"], capsys)
    assert code == 0, err
    evaluated = evaluations(run)
    accuracy = tensorboard_events(run).Scalars("valid/accuracy")
    assert [(e.step, e.value) for e in accuracy] == [(r["step"], pytest.approx(r["accuracy"], rel=1e-6))
                                                     for r in evaluated]
    client, found = mlflow_run(run)
    assert json.loads((run / "trackers.json").read_text())["mlflow"]["tracking_uri"] == file_store
    assert history(client, found.info.run_id, "valid/accuracy") == [(r["step"], r["accuracy"]) for r in evaluated]
    assert found.info.status == "FINISHED" and found.data.params["task"] == "classifier"
    pictures = {p.name for p in run.glob("*.png")}
    assert "curves.png" in pictures and pictures <= {f.path for f in client.list_artifacts(found.info.run_id)}


@pytest.mark.slow
def test_trackers_cli_default_mlflow_store_is_sqlite_beside_the_run_and_quiet(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    run = tmp_path / "runs" / "sentiment"
    code, err = run_seqlab([*CLASSIFIER, "--output", run, "--log", "mlflow"], capsys)
    assert code == 0, err
    assert "INFO" not in err and "database tables" not in err, err
    saved = json.loads((run / "trackers.json").read_text())["mlflow"]
    assert saved["tracking_uri"] == f"sqlite:///{(tmp_path / 'runs' / 'mlflow.db').resolve()}"
    assert (tmp_path / "runs" / "mlruns" / saved["run_id"] / "artifacts" / "MODEL_CARD.md").is_file()
    client, found = mlflow_run(run)
    assert found.info.status == "FINISHED" and client.get_experiment(found.info.experiment_id).name == "seqlab"


@pytest.mark.parametrize("name, missing, expect", [
    ("mlflow", "mlflow", "--log mlflow needs MLflow: pip install 'seqlab[mlflow]'"),
    ("tensorboard", "tensorboard", "--log tensorboard needs TensorBoard: pip install 'seqlab[tensorboard]'"),
    ("mlflow", "sqlalchemy", "needs SQLAlchemy and Alembic: pip install sqlalchemy alembic"),
])
def test_trackers_missing_package_is_one_line_before_any_work(tmp_path, capsys, monkeypatch, name, missing, expect):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setitem(sys.modules, missing, None)                        # `import missing` now fails
    if missing == "tensorboard":
        monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    run = tmp_path / "run"
    code, err = run_seqlab([*CLASSIFIER, "--output", run, "--log", name], capsys)
    one_line_error(code, err, expect)
    assert not run.exists()                                                # nothing trained, nothing written


def test_trackers_a_store_that_cannot_be_written_is_one_line(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    code, err = run_seqlab([*CLASSIFIER, "--output", tmp_path / "run", "--log", "tensorboard", "mlflow",
                            "--mlflow-uri", f"sqlite:///{blocker}/mlflow.db"], capsys)
    one_line_error(code, err, f"--log mlflow cannot use the store sqlite:///{blocker}/mlflow.db")
    assert not (tmp_path / "run" / "checkpoint.safetensors").exists()      # stopped before training


def test_trackers_log_choices_are_checked_item_by_item(tmp_path, capsys):
    with pytest.raises(OptionError, match="--log must be one of tensorboard, mlflow, got 'wandb'"):
        TrainConfig(log=["tensorboard", "wandb"])
    assert coerce(TrainConfig, "log", "mlflow") == ["mlflow"]                # a config file's `log: mlflow`
    code, err = run_seqlab([*CLASSIFIER, "--output", tmp_path / "run", "--log", "mlflow", "wandb"], capsys)
    one_line_error(code, err, "--log must be one of tensorboard, mlflow, got 'wandb'")


def test_trackers_a_tracker_that_fails_mid_run_is_dropped_and_training_goes_on(tmp_path, file_store, monkeypatch):
    calls = []

    def broken(self, figures, step):
        calls.append(step)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(trackers.MLflowTracker, "scalars", broken)
    run = tmp_path / "lm"
    with pytest.warns(SeqlabWarning, match="--log mlflow: stopped logging .*No space left on device"):
        results = seqlab.train_lm(tiny_config(run, log=["mlflow", "tensorboard"], mlflow_uri=file_store))
    assert calls == [1] and "test" in results
    assert [e.step for e in tensorboard_events(run).Scalars("train/loss")] == list(range(1, 9))
    assert "mlflow" not in json.loads((run / "trackers.json").read_text())


@pytest.mark.slow
def test_trackers_without_log_import_neither_package():
    """Importing MLflow takes ~2 s: a run without --log never does, nor TensorBoard's writer."""
    code = ("import sys, tempfile, seqlab.api\n"
            "from seqlab.training.config import TrainConfig\n"
            "from seqlab.training.trackers import check_trackers, log_artifacts, open_trackers\n"
            "folder = tempfile.mkdtemp()\n"
            "check_trackers(TrainConfig())\n"
            "with open_trackers(TrainConfig(), folder, False, 0) as opened:\n"
            "    opened.event({'event': 'log', 'step': 1, 'loss': 1.0})\n"
            "log_artifacts(folder, TrainConfig())\n"
            "print(sorted(m for m in ('mlflow', 'torch.utils.tensorboard', 'tensorboard') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stderr


def test_trackers_scalar_names_and_flat_params():
    step, figures = trackers.scalars({"event": "evaluate", "step": 4, "epoch": 1, "split": "valid", "loss": 2.0,
                                      "accuracy": 0.5, "train_loss": None, "lr": 0.1, "elapsed_s": 3.0,
                                      "best": True}, 0)
    assert (step, figures) == (4, {"valid/loss": 2.0, "valid/accuracy": 0.5})
    assert trackers.scalars({"event": "finish", "valid": {"loss": 2.0}, "test": {"loss": 3.0}}, 9) == \
        (9, {"final/valid/loss": 2.0, "final/test/loss": 3.0})
    params = trackers.flat_params({"task": "lm", "model": {"hidden_size": 650, "tied": True},
                                   "train": {"log": ["mlflow"], "card_notes": "", "notes": "x" * 7000}})
    assert params == {"task": "lm", "model.hidden_size": "650", "model.tied": "true", "train.log": '["mlflow"]',
                      "train.card_notes": "", "train.notes": "x" * trackers.MAX_PARAM_CHARS}


@pytest.mark.slow          # a tune and a compare, 5 s: the default suite keeps the single-run tracker tests
def test_trackers_tune_and_compare_file_every_run_under_one_experiment(tmp_path, capsys, file_store):
    """`--log` reaches every run a tune or a compare trains: each tuning trial and each seed's run is an MLflow
    run of the experiment "tune DIR" / "compare DIR" (or --experiment), with TensorBoard events beside it."""
    from mlflow import MlflowClient

    out = tmp_path / "cmp"
    code, err = run_seqlab(["compare", "classifier", "--train", SENTIMENT, "--dev", SENTIMENT, "--archs", "pooled",
                            "--size", "tiny", "--budget-epochs", "1", "--batch-size", "4", "--no-progress",
                            "--seeds", "2", "--tune-trials", "2", "--output", out, "--log", "mlflow", "tensorboard",
                            "--mlflow-uri", file_store], capsys)
    assert code == 0, err
    client = MlflowClient(tracking_uri=file_store)
    experiment = client.get_experiment_by_name("compare cmp")
    names = sorted(run.info.run_name for run in client.search_runs([experiment.experiment_id]))
    assert names == ["0000", "0001", "seed-1111", "seed-1112"]                 # 2 trials, then 2 seeds
    assert all(run.info.status == "FINISHED" for run in client.search_runs([experiment.experiment_id]))
    for run in ("tune/pooled/trials/0000", "runs/pooled/seed-1112"):
        assert tensorboard_events(out / run).Scalars("valid/accuracy")
    code, err = run_seqlab(["tune", "classifier", "--train", SENTIMENT, "--dev", SENTIMENT, "--arch", "pooled",
                            "--size", "tiny", "--trials", "1", "--budget-epochs", "1", "--batch-size", "4",
                            "--no-progress", "--output", tmp_path / "study", "--log", "mlflow",
                            "--mlflow-uri", file_store], capsys)
    assert code == 0, err
    experiment = client.get_experiment_by_name("tune study")
    assert [run.info.run_name for run in client.search_runs([experiment.experiment_id])] == ["0000"]
