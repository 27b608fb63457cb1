"""Experiment trackers: a run also written to TensorBoard and/or MLflow (`--log tensorboard mlflow`).

The run directory stays the record; the trackers get a copy of what it holds, as the trainer emits it, so
that the run shows up beside the others in the tools people already use. One naming serves both:

    the trainer's event / the run's file       the scalars (x: the optimizer step)
    "log"      train_log.jsonl                 train/loss, train/lr, train/tokens_per_s (train/mfu, ...)
    "evaluate" metrics.jsonl                   valid/loss, valid/perplexity, valid/accuracy, ... (every figure)
    "finish"   metrics.jsonl's final records   final/valid/loss, final/test/loss, ... (at the last step)
    opening    config.json                     TensorBoard: text "config"; MLflow: params data.*, model.*, train.*
    log_artifacts, after the model card        TensorBoard: text "model_card", images "plots/<name>";
                                               MLflow: config.json, MODEL_CARD.md, model_card.json,
                                               metrics.jsonl, train_log.jsonl, *.png, then the run FINISHED

TensorBoard writes event files into RUN/tensorboard; MLflow a run named after the run directory, in the
experiment --experiment of the store --mlflow-uri (by default SQLite beside the run: PARENT/mlflow.db, its
artefacts in PARENT/mlruns). RUN/trackers.json keeps the MLflow run's id and the last step logged, so that
`--resume` continues the same MLflow run (a tracker new to a resumed run first gets the records the run
already holds), and TensorBoard hides the events a crashed session wrote after its checkpoint (`purge_step`).

Only the main process logs. Neither package is imported unless asked for (importing MLflow takes ~2 s). A
missing package or a store that cannot be opened stops the run before it trains (one line); a tracker that
fails later is dropped with a warning, and training goes on: the run directory still holds everything.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import shutil
import time
import warnings
from pathlib import Path

from seqlab.errors import SeqlabError, SeqlabWarning, os_error_message, os_error_reason
from seqlab.fileio import atomic_write_json
from seqlab.training import distributed

TRACKERS = ("tensorboard", "mlflow")
STATE = "trackers.json"                  # in the run directory: the MLflow run's id, the last step logged
TENSORBOARD_DIR = "tensorboard"          # in the run directory: TensorBoard's event files
# what the import of each tracker needs, and its name in messages
PACKAGES = {"tensorboard": ("TensorBoard", ("tensorboard", "torch.utils.tensorboard")),
            "mlflow": ("MLflow", ("mlflow",))}
# the keys of an evaluation record that are bookkeeping, not figures (seqlab.info.BOOKKEEPING): lr is train/lr
BOOKKEEPING = ("event", "step", "trained_steps", "epoch", "split", "final", "best", "lr", "elapsed_s", "train_loss")
# the run's files MLflow keeps as artefacts (and every *.png of the run directory)
ARTEFACTS = ("config.json", "MODEL_CARD.md", "model_card.json", "metrics.jsonl", "train_log.jsonl")
MAX_PARAM_CHARS = 6000                   # MLflow's limit on a param's value
PARAMS_PER_BATCH = 100                   # ... and on the params of one log_batch
DATABASES = ("sqlite", "postgresql", "mysql", "mssql")   # store URIs MLflow opens through SQLAlchemy


# ---------------------------------------------------------------------------------------------- checks and places

def check_trackers(config_train) -> None:
    """Refuse `--log` trackers whose packages are not installed, before any work (one line, on every process):
    "--log mlflow needs MLflow: pip install 'seqlab[mlflow]'". MLflow's database stores (the default SQLite
    one) also need SQLAlchemy and Alembic, which mlflow-skinny leaves out."""
    for name in dict.fromkeys(config_train.log):
        title, modules = PACKAGES[name]
        for module in modules:
            try:
                importlib.import_module(module)
            except ImportError:
                raise SeqlabError(f"--log {name} needs {title}: pip install 'seqlab[{name}]'") from None
    if "mlflow" in config_train.log:
        uri = mlflow_uri(config_train)
        if uri.split(":", 1)[0].split("+", 1)[0] in DATABASES:
            for module in ("sqlalchemy", "alembic"):
                try:
                    importlib.import_module(module)
                except ImportError:
                    raise SeqlabError(f"--log mlflow keeps its runs in the database {uri}, which needs SQLAlchemy "
                                      "and Alembic: pip install sqlalchemy alembic (the full mlflow package has "
                                      "them), or give --mlflow-uri a tracking server (http://HOST:PORT)") from None


def reason(error: BaseException) -> str:
    """The first line of an error's message (MLflow's run to paragraphs), or its type's name; an OSError's with
    what to do about it."""
    if isinstance(error, OSError):
        return os_error_message(error)
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def mlflow_uri(config_train) -> str:
    """The MLflow store: --mlflow-uri, else $MLFLOW_TRACKING_URI, else SQLite beside the run directory
    (sqlite:///PARENT/mlflow.db, PARENT the folder that holds the run: one store for all the runs there)."""
    parent = Path(config_train.output).resolve().parent
    return config_train.mlflow_uri or os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{parent / 'mlflow.db'}"


def sqlite_file(uri: str) -> Path | None:
    """The database file of a sqlite:/// URI (sqlite:///runs/mlflow.db: runs/mlflow.db; four slashes: an
    absolute path); None for another store or SQLite in memory."""
    if not uri.startswith("sqlite:///") or uri == "sqlite:///:memory:":
        return None
    path = uri.removeprefix("sqlite:///").split("?", 1)[0]
    return Path(path) if path else None


def read_state(run_dir: Path) -> dict:
    """RUN/trackers.json ({} without one, or a damaged one: the trackers then start afresh)."""
    try:
        state = json.loads((run_dir / STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def run_config(run_dir: Path, config_train) -> dict:
    """config.json with the training options of this session (a resume may change them), for the params and
    the "config" text."""
    from seqlab.config import to_dict

    try:
        saved = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        saved = {}
    return {**(saved if isinstance(saved, dict) else {}), "train": to_dict(config_train)}


def flat_params(config: dict, prefix: str = "") -> dict[str, str]:
    """A nested config as MLflow params: {"model.hidden_size": "650", "train.lr": "0.001", ...}; lists and
    other values as JSON, text as it is, each cut to MLflow's MAX_PARAM_CHARS."""
    params = {}
    for key, value in config.items():
        if isinstance(value, dict):
            params |= flat_params(value, f"{prefix}{key}.")
        else:
            params[f"{prefix}{key}"] = (value if isinstance(value, str) else json.dumps(value))[:MAX_PARAM_CHARS]
    return params


def _numbers(record: dict, skip: tuple = ()) -> dict[str, float]:
    """The real-number fields of a record (not flags, not text, not missing figures)."""
    return {key: float(value) for key, value in record.items()
            if key not in skip and isinstance(value, (int, float)) and not isinstance(value, bool)}


def scalars(event: dict, step: int) -> tuple[int, dict[str, float]]:
    """A trainer event as (step, {scalar name: value}): the one naming both trackers use. "finish" carries no
    step: its figures go at `step`, the last one logged."""
    kind = event["event"]
    if kind == "log":
        return event["step"], {f"train/{k}": v for k, v in _numbers(event, ("event", "step", "epoch")).items()}
    if kind == "evaluate":
        return event["step"], {f"{event.get('split', 'valid')}/{k}": v for k, v in _numbers(event, BOOKKEEPING).items()}
    if kind == "finish":
        return step, {f"final/{split}/{k}": v for split, figures in event.items() if isinstance(figures, dict)
                      for k, v in _numbers(figures).items()}
    return step, {}


def recorded_scalars(run_dir: Path) -> list[tuple[int, dict[str, float]]]:
    """The records the run directory holds (train_log.jsonl, metrics.jsonl) as (step, scalars), in step order,
    for a tracker that a resumed run starts: it then holds the whole run, not just its end."""
    points = []
    for name, kind in (("train_log.jsonl", "log"), ("metrics.jsonl", "evaluate")):
        with contextlib.suppress(OSError):
            for line in (run_dir / name).read_text(encoding="utf-8").splitlines():
                with contextlib.suppress(ValueError):
                    record = json.loads(line)
                    if not isinstance(record, dict) or not isinstance(record.get("step"), int):
                        continue
                    if record.get("final"):   # an earlier session's final figures, at the steps it trained
                        figures = {k: v for k, v in record.items() if k not in BOOKKEEPING}
                        event = {"event": "finish", record.get("split", "valid"): figures}
                        points.append(scalars(event, record.get("trained_steps", record["step"])))
                    else:
                        points.append(scalars({"event": kind, **record}, record["step"]))
    return sorted(points, key=lambda point: point[0])


# ---------------------------------------------------------------------------------------------- the trackers

class TensorBoardTracker:
    """Scalars, the config and (log_artifacts) the model card and the curves into RUN/tensorboard."""

    name = "tensorboard"

    def __init__(self, run_dir: Path, resumed: bool, start_step: int):
        from torch.utils.tensorboard import SummaryWriter

        folder = run_dir / TENSORBOARD_DIR
        self.new = not any(folder.glob("events.out.tfevents.*"))
        # on resume, hide what a crashed session logged after the checkpoint: steps above start_step
        purge = start_step + 1 if resumed and not self.new else None
        try:
            self.writer = SummaryWriter(log_dir=str(folder), purge_step=purge, flush_secs=10)
        except OSError as error:
            raise SeqlabError(f"--log tensorboard: cannot write {folder}: {os_error_reason(error)}") from None

    def start(self, config: dict, step: int) -> None:
        self.writer.add_text("config", "```json\n" + json.dumps(config, indent=2) + "\n```", step)

    def scalars(self, figures: dict[str, float], step: int) -> None:
        for name, value in figures.items():
            self.writer.add_scalar(name, value, step)

    def close(self, status: str | None) -> None:
        self.writer.close()

    def state(self) -> dict:
        return {"log_dir": TENSORBOARD_DIR}


class MLflowTracker:
    """Params, metrics and (log_artifacts) artefacts into an MLflow run named after the run directory, through
    an `MlflowClient` (no global MLflow state: `mlflow.start_run` is never called)."""

    name = "mlflow"

    def __init__(self, config_train, run_dir: Path, resumed: bool, saved: dict):
        self.uri = mlflow_uri(config_train)
        self.client = open_store(self.uri)
        with store_errors(self.uri):
            experiment = experiment_id(self.client, config_train.experiment, self.uri)
            run = continued_run(self.client, saved, self.uri, experiment) if resumed else None
            self.new = run is None
            if run is None:
                from seqlab.version import __version__

                run = self.client.create_run(experiment, run_name=run_dir.name, tags={
                    "seqlab.run_dir": str(run_dir.resolve()), "seqlab.version": __version__})
            else:
                self.client.update_run(run.info.run_id, status="RUNNING")
        self.run_id, self.experiment_id, self.params = run.info.run_id, experiment, set(run.data.params)

    def start(self, config: dict, step: int) -> None:
        """The flattened config as params; those the run already has stay (MLflow's params never change)."""
        from mlflow.entities import Param

        params = [Param(k, v) for k, v in flat_params(config).items() if k not in self.params]
        for first in range(0, len(params), PARAMS_PER_BATCH):
            self.client.log_batch(self.run_id, params=params[first:first + PARAMS_PER_BATCH])
        if config.get("task"):
            self.client.set_tag(self.run_id, "seqlab.task", config["task"])

    def scalars(self, figures: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(name, value, now, step) for name, value in figures.items()]
        if metrics:
            self.client.log_batch(self.run_id, metrics=metrics)

    def close(self, status: str | None) -> None:
        if status is not None:            # a run that failed; a finished one is set FINISHED by log_artifacts
            self.client.set_terminated(self.run_id, status)

    def state(self) -> dict:
        return {"tracking_uri": self.uri, "experiment_id": self.experiment_id, "run_id": self.run_id}


@contextlib.contextmanager
def quiet_mlflow():
    """MLflow's and Alembic's INFO lines ("Creating initial MLflow database tables...") kept off stderr while
    the store opens: the run's own log stays readable."""
    loggers = [logging.getLogger(name) for name in ("mlflow", "alembic")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


@contextlib.contextmanager
def store_errors(uri: str):
    """Whatever MLflow (or SQLAlchemy, or the file system) raises on opening the store, as one line."""
    try:
        yield
    except SeqlabError:
        raise
    except Exception as error:            # MLflow, SQLAlchemy and the OS each have their own
        raise SeqlabError(f"--log mlflow cannot use the store {uri}: {reason(error)}; give --mlflow-uri a store it can "
                          "write (sqlite:///PATH/mlflow.db, or a tracking server http://HOST:PORT)") from None


def open_store(uri: str):
    """An MlflowClient on `uri`, its database created or upgraded if need be (quietly). The folder of a SQLite
    database is locked meanwhile, so that runs started together do not create its tables twice."""
    from mlflow import MlflowClient

    database = sqlite_file(uri)
    with store_errors(uri), quiet_mlflow():
        with folder_lock(database.resolve().parent if database is not None else None):
            client = MlflowClient(tracking_uri=uri)
            client.search_experiments(max_results=1)      # opens (creates, upgrades) the store now, not later
    return client


@contextlib.contextmanager
def folder_lock(folder: Path | None):
    """An exclusive flock on `folder` (a directory's descriptor: no lock file left behind); nothing for None."""
    if folder is None:
        yield
        return
    import fcntl

    folder.mkdir(parents=True, exist_ok=True)
    handle = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)


def experiment_id(client, name: str, uri: str) -> str:
    """The id of the experiment `name`, created on first use; in a SQLite store its artefacts go beside the
    database (PARENT/mlruns), not into the current folder."""
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        database = sqlite_file(uri)
        location = str(database.resolve().parent / "mlruns") if database is not None else None
        try:
            return client.create_experiment(name, artifact_location=location)
        except Exception:                 # created meanwhile by a run started together: take it
            experiment = client.get_experiment_by_name(name)
            if experiment is None:
                raise
    if experiment.lifecycle_stage != "active":
        raise SeqlabError(f"--experiment {name!r} is deleted in the MLflow store {uri}: restore it (mlflow "
                          "experiments restore) or choose another --experiment")
    return experiment.experiment_id


def continued_run(client, saved: dict, uri: str, experiment: str):
    """The MLflow run a resumed run continues (trackers.json's), if it is in this store and experiment; else None
    (a new MLflow run: --mlflow-uri or --experiment changed, or the run was deleted)."""
    if not saved.get("run_id") or saved.get("tracking_uri") != uri:
        return None
    try:
        run = client.get_run(saved["run_id"])
    except Exception:                     # MlflowException: no such run in this store
        return None
    if run.info.lifecycle_stage != "active" or run.info.experiment_id != experiment:
        return None
    return run


class Trackers:
    """The trackers a run writes to (none: every call does nothing), as a context manager: leaving it closes
    them, an error marking the MLflow run FAILED (KILLED on Ctrl-C)."""

    def __init__(self, members: list | None = None, run_dir: Path | None = None, step: int = 0):
        self.members, self.run_dir, self.step = list(members or []), run_dir, step

    def event(self, event: dict) -> None:
        """A trainer event ("log", "evaluate", "finish") to every tracker."""
        if not self.members:
            return
        self.step, figures = scalars(event, self.step)
        self._each("log", lambda member: member.scalars(figures, self.step))

    def close(self, status: str | None = None) -> None:
        self._each("close", lambda member: member.close(status))
        if self.members and self.run_dir is not None:
            self.save()
        self.members = []

    def save(self) -> None:
        atomic_write_json(self.run_dir / STATE, {"step": self.step, **{m.name: m.state() for m in self.members}})

    def _each(self, what: str, call) -> None:
        """`call(member)` for every tracker; one that fails is dropped, with a warning: training goes on."""
        for member in list(self.members):
            try:
                call(member)
            except Exception as error:    # a tracker's own (a store gone, a full disk): not the run's
                self.members.remove(member)
                warnings.warn(f"--log {member.name}: stopped logging ({what}: {reason(error)}); the run directory "
                              "still records everything", SeqlabWarning, stacklevel=2)

    def __enter__(self) -> Trackers:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if kind is None:
            self.close()
        else:
            self.close("KILLED" if issubclass(kind, KeyboardInterrupt) else "FAILED")


def open_trackers(config_train, run_dir: str | Path, resumed: bool, start_step: int,
                  is_main: bool = True) -> Trackers:
    """The trackers of `config_train.log` for the run in `run_dir` (no members on the other processes, or
    without --log), training from `start_step`. A tracker new to a resumed run first gets the records the run
    already holds. A store that cannot be opened stops every process with the main one's one-line error."""
    run_dir = Path(run_dir)
    if is_main and not resumed:           # a fresh run (or an overwritten one): no trace of an earlier run's
        (run_dir / STATE).unlink(missing_ok=True)
        shutil.rmtree(run_dir / TENSORBOARD_DIR, ignore_errors=True)
    if not config_train.log:
        return Trackers()
    trackers, problem, name = Trackers(run_dir=run_dir, step=start_step), None, ""
    if is_main:
        try:
            check_trackers(config_train)
            saved, config = read_state(run_dir) if resumed else {}, run_config(run_dir, config_train)
            for name in dict.fromkeys(config_train.log):
                member = (TensorBoardTracker(run_dir, resumed, start_step) if name == "tensorboard" else
                          MLflowTracker(config_train, run_dir, resumed, saved.get("mlflow") or {}))
                trackers.members.append(member)
                member.start(config, start_step)
                if resumed and member.new:
                    replay(member, run_dir)
            trackers.save()               # the MLflow run's id, at once: a run killed now resumes into it
        except Exception as error:        # SeqlabError, or the tracker's own on its first writes
            trackers.close("FAILED")
            problem = str(error) if isinstance(error, SeqlabError) else f"--log {name}: {reason(error)}"
    problem = distributed.broadcast_object(problem)
    if problem is not None:
        raise SeqlabError(problem)
    return trackers


def replay(member, run_dir: Path) -> None:
    """The records the run already holds, to a tracker that a resumed run starts."""
    for step, figures in recorded_scalars(run_dir):
        member.scalars(figures, step)


def log_artifacts(run_dir: str | Path, config_train) -> None:
    """After the model card: TensorBoard gets the card as text and the run's PNGs as images; MLflow the run's
    files as artefacts, then its run is FINISHED. A tracker that fails here is skipped with a warning (the run
    is trained and saved)."""
    if not config_train.log:
        return
    run_dir = Path(run_dir)
    state = read_state(run_dir)
    step = state.get("step", 0) if isinstance(state.get("step"), int) else 0
    pictures = sorted(run_dir.glob("*.png"))
    card = run_dir / "MODEL_CARD.md"
    members = []
    if "tensorboard" in config_train.log and "tensorboard" in state:
        members.append(("tensorboard", lambda: _tensorboard_artifacts(run_dir / TENSORBOARD_DIR, card, pictures,
                                                                      step)))
    if "mlflow" in config_train.log and (state.get("mlflow") or {}).get("run_id"):
        members.append(("mlflow", lambda: _mlflow_artifacts(state["mlflow"], run_dir, pictures)))
    for name, call in members:
        try:
            call()
        except Exception as error:        # the store gone since training, a full disk: the run itself is saved
            warnings.warn(f"--log {name}: the run's files were not logged ({reason(error)}); the run directory "
                          "holds them", SeqlabWarning, stacklevel=2)


def _tensorboard_artifacts(folder: Path, card: Path, pictures: list[Path], step: int) -> None:
    import numpy as np
    from PIL import Image
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(folder))
    try:
        if card.exists():
            writer.add_text("model_card", card.read_text(encoding="utf-8"), step)
        for picture in pictures:
            with Image.open(picture) as image:
                pixels = np.asarray(image.convert("RGB")).transpose(2, 0, 1)     # (H, W, 3) -> (3, H, W), uint8
            writer.add_image(f"plots/{picture.stem}", pixels, step)
    finally:
        writer.close()


def _mlflow_artifacts(saved: dict, run_dir: Path, pictures: list[Path]) -> None:
    client = open_store(saved["tracking_uri"])
    for path in [run_dir / name for name in ARTEFACTS] + pictures:
        if path.exists():
            client.log_artifact(saved["run_id"], str(path))
    client.set_terminated(saved["run_id"], "FINISHED")
