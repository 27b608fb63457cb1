"""Progress that reads well in a log (`seqlab.progress`): with stderr not a terminal a bar is a plain line every
$SEQLAB_PROGRESS_EVERY seconds (none with 0), in order with the trainer's `tqdm.write` messages; a training
command says when it starts reading its data and how long that took; the model card's wall time counts the
start-up beside the training."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tqdm import tqdm  # the base class of every bar seqlab draws (tqdm.auto only in a notebook)

from conftest import TRAIN, VALID
from seqlab import progress
from seqlab.cli.main import main
from seqlab.errors import SeqlabError
from seqlab.fileio import safetensors_metadata
from seqlab.progress import LogBar, Reading, progress_bar

TERMINAL_CODES = ("\r", "\x1b")


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_progress_log_bar_prints_a_plain_line_every_interval(capsys):
    clock = FakeClock()
    bar = LogBar(total=100, desc="training", unit="step", every=30, clock=clock)
    for _ in range(20):                   # 5 s a step: lines at 30, 60 and 90 s
        clock.now += 5
        bar.update(5)
        bar.set_postfix({"loss": 3.2123456, "lr": "0.001"}, refresh=False)
    bar.close()                           # and the last one, at 100 s
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "training: 30/100 step (30%), 1.00 step/s, elapsed 00:30, remaining 01:10, loss=3.21, lr=0.001",
        "training: 60/100 step (60%), 1.00 step/s, elapsed 01:00, remaining 00:40, loss=3.21, lr=0.001",
        "training: 90/100 step (90%), 1.00 step/s, elapsed 01:30, remaining 00:10, loss=3.21, lr=0.001",
        "training: 100/100 step (100%), 1.00 step/s, elapsed 01:40, remaining 00:00, loss=3.21, lr=0.001"]


def test_progress_log_bar_shorter_than_the_interval_stays_silent(capsys):
    clock = FakeClock()
    with LogBar(range(5), desc="evaluating", every=30, clock=clock) as bar:
        for _ in bar:
            clock.now += 1
    assert capsys.readouterr().err == ""


def test_progress_log_bar_takes_a_total_fixed_later_and_bytes(capsys):
    """The trainer's --time-schedule assigns `total` and refreshes; a bar of bytes scales its units."""
    clock = FakeClock()
    bar = LogBar(total=1000, initial=200, unit="step", every=10, clock=clock)
    clock.now = 10
    bar.update(10)
    bar.total = 250
    bar.refresh()                         # not due: 10 s since the last line only after the next one
    clock.now = 20
    bar.refresh()
    sizes = LogBar(total=120_000_000, desc="preparing wt2", unit="B", unit_scale=True, every=1, clock=clock)
    clock.now = 50
    sizes.update(45_200_000)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "210/1,000 step (21%), 1.00 step/s, elapsed 00:10, remaining 13:10"
    assert lines[1] == "210/250 step (84%), 2.00 s/step, elapsed 00:20, remaining 01:20"
    assert lines[2] == "preparing wt2: 45.2MB/120MB (38%), 1.51MB/s, elapsed 00:30, remaining 00:49"


def test_progress_log_bar_without_total_counts_and_reset_restarts(capsys):
    clock = FakeClock()
    bar = LogBar(desc="scoring", unit=" sentences", every=2, clock=clock)
    clock.now = 4
    bar.update(2)                         # 0.5 a second: seconds per unit
    bar.reset(total=8)
    clock.now = 8
    bar.update(8)
    assert capsys.readouterr().err.splitlines() == [
        "scoring: 2 sentences, 2.00 s/sentences, elapsed 00:04",
        "scoring: 8/8 sentences (100%), 2.00 sentences/s, elapsed 00:04, remaining 00:00"]


def test_progress_log_lines_at_the_environment_interval(capsys, monkeypatch):
    """stderr captured (not a terminal): every bar of seqlab is a log bar, at $SEQLAB_PROGRESS_EVERY."""
    monkeypatch.setenv("SEQLAB_PROGRESS_EVERY", "0.05")
    started = time.monotonic()
    for _ in progress_bar(range(8), None, desc="work", unit="item"):
        time.sleep(0.03)
    seconds = time.monotonic() - started
    err = capsys.readouterr().err
    assert not any(code in err for code in TERMINAL_CODES)
    lines = err.splitlines()
    assert 2 <= len(lines) <= seconds / 0.05 + 1                      # at most one a 0.05 s, and the last
    assert all(line.startswith("work: ") and "/8 item (" in line for line in lines)
    assert lines[-1].startswith("work: 8/8 item (100%)")


def test_progress_log_every_zero_prints_nothing(capsys, monkeypatch):
    monkeypatch.setenv("SEQLAB_PROGRESS_EVERY", "0")
    items = [1, 2, 3]
    assert progress_bar(items, None, desc="work") is items            # no bar at all over an iterable
    with progress_bar(None, None, total=3, desc="work") as bar:
        for _ in items:
            time.sleep(0.01)
            bar.update(1)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("value", ["soon", "-1", "nan", "inf"])
def test_progress_log_refuses_a_bad_interval(monkeypatch, value):
    monkeypatch.setenv("SEQLAB_PROGRESS_EVERY", value)
    with pytest.raises(SeqlabError, match=f"^SEQLAB_PROGRESS_EVERY={value}: give the seconds between progress "):
        progress_bar(range(3), None)


def test_progress_on_a_terminal_stays_a_tqdm_bar(monkeypatch):
    monkeypatch.setattr(progress, "on_terminal", lambda: True)
    bar = progress_bar(None, None, total=3, desc="work")
    assert isinstance(bar, tqdm)
    bar.close()
    assert progress_bar(None, False, total=3).every == 0                # off: a silent bar to update


def test_progress_log_keeps_tqdm_write_messages_in_order(tmp_path):
    """stdout and stderr into one pipe, stdout buffered as in a log: a message written with tqdm.write before
    a bar's line comes before it, however long the buffer would have kept it."""
    script = (
        "import time\n"
        "from tqdm.auto import tqdm\n"
        "from seqlab.progress import progress_bar\n"
        "bar = progress_bar(None, None, total=4, desc='training', unit='step')\n"
        "for step in range(4):\n"
        "    time.sleep(0.06)\n"
        "    bar.update(1)\n"
        "    tqdm.write(f'evaluated step {step + 1}')\n"
        "bar.close()\n")
    result = subprocess.run([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, timeout=120, env={**_environment(), "SEQLAB_PROGRESS_EVERY": "0.05"})
    assert result.returncode == 0, result.stdout
    lines = result.stdout.splitlines()
    assert not any(code in result.stdout for code in TERMINAL_CODES)
    for step in range(1, 4):             # each bar line after the message of the step before it
        assert lines.index(f"evaluated step {step}") < lines.index(next(
            line for line in lines if line.startswith(f"training: {step + 1}/4 step")))


def _environment() -> dict:
    """This environment, with stdout buffered as Python buffers it into a file or a pipe."""
    return {k: v for k, v in os.environ.items() if k not in ("SEQLAB_PROGRESS_EVERY", "PYTHONUNBUFFERED")}


def test_progress_reading_says_what_and_how_long(tmp_path):
    data = tmp_path / "train.txt"
    data.write_text("a b c\n" * 2000)
    folder = tmp_path / "prepared"
    folder.mkdir()
    (folder / "ids.bin").write_bytes(b"\0" * 1500)
    said = []
    reading = Reading([data, "", folder], said.append)
    seconds = reading.done("6,000 training tokens")
    assert said[0] == "seqlab: reading train.txt (12.0 kB), prepared/ (1.5 kB) ..."
    assert said[1] == f"seqlab: read 6,000 training tokens in {seconds:.1f} s"
    quiet = []
    Reading([data], quiet.append, show=False).done("nothing")
    assert quiet == []


# ---------------------------------------------------------------------------- a training command, end to end

@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny language model trained by `seqlab train` with stdout and stderr into one log (`Log`), at a 10 ms
    log interval: (run, its log); then resumed for two more steps."""
    folder = tmp_path_factory.mktemp("progress-log")
    run = folder / "run"
    options = ["train", "lm", "--train", str(TRAIN), "--valid", str(VALID), "--tokenizer", "word",
               "--embedding-size", "8", "--hidden-size", "8", "--batch-size", "4", "--seq-len", "8",
               "--eval-every", "2", "--output", str(run)]
    monkeypatch = pytest.MonkeyPatch()
    log = Log()
    try:
        monkeypatch.setenv("SEQLAB_PROGRESS_EVERY", "0.01")
        monkeypatch.setattr(sys, "stdout", log.stdout)
        monkeypatch.setattr(sys, "stderr", log.stderr)
        assert main([*options, "--max-steps", "4"]) == 0
    finally:
        monkeypatch.undo()
    first = json.loads(safetensors_metadata(run / "checkpoint.safetensors")["trainer"])
    card = json.loads((run / "model_card.json").read_text())["model_details"]
    markdown = (run / "MODEL_CARD.md").read_text()
    assert main([*options, "--max-steps", "6", "--resume", "--no-progress"]) == 0
    second = json.loads(safetensors_metadata(run / "checkpoint.safetensors")["trainer"])
    return {"run": run, "log": "".join(log.text), "first": first, "card": card, "markdown": markdown,
            "second": second, "resumed_card": json.loads((run / "model_card.json").read_text())["model_details"]}


class Log:
    """stdout and stderr into one log as a file gets them from a process: what stderr writes at once, what stdout
    writes when it is flushed (Python buffers stdout into a file or a pipe); neither is a terminal."""

    def __init__(self):
        self.text: list[str] = []
        self.stdout, self.stderr = _Stream(self.text, buffered=True), _Stream(self.text, buffered=False)


class _Stream(io.TextIOBase):
    def __init__(self, log: list[str], buffered: bool):
        self.log, self.buffered, self.pending = log, buffered, []

    def write(self, text: str) -> int:
        (self.pending if self.buffered else self.log).append(text)
        return len(text)

    def flush(self) -> None:
        self.log.extend(self.pending)
        self.pending.clear()

    def isatty(self) -> bool:
        return False


def test_progress_log_train_says_it_reads_the_data_before_training(trained):
    lines = trained["log"].splitlines()
    assert not any(code in trained["log"] for code in TERMINAL_CODES)
    reading = next(i for i, line in enumerate(lines) if line.startswith("seqlab: reading "))
    assert lines[reading].startswith(f"seqlab: reading {TRAIN.name} (") and f", {VALID.name} (" in lines[reading]
    read = next(i for i, line in enumerate(lines) if line.startswith("seqlab: read "))
    assert lines[read].endswith(" s") and " training tokens in " in lines[read]
    training = next(i for i, line in enumerate(lines) if line.startswith("training: "))
    assert reading < read < training
    assert lines[training].split(": ")[1].split(" ")[0].endswith("/4")     # the bar's n/total


def test_progress_log_train_keeps_stdout_lines_in_place(trained):
    """The evaluations (stdout, buffered in a log) come where they happened, not when the process exits."""
    lines = trained["log"].splitlines()
    evaluated = lines.index(next(line for line in lines if line.startswith("step 2 (epoch 1) valid: ")))
    assert evaluated < lines.index(next(line for line in lines if line.startswith("training: 4/4 step")))
    final = lines.index(next(line for line in lines if line.startswith("step 4 valid: ")))
    assert final < lines.index("writing the model card (MODEL_CARD.md, model_card.json)")


def test_progress_log_card_wall_time_counts_the_start_up(trained):
    card, first = trained["card"], trained["first"]
    assert first["startup"] > 0 and card["startup_s"] == first["startup"]
    assert card["wall_time_s"] == pytest.approx(first["elapsed"] + first["startup"])
    assert card["wall_time_s"] >= first["elapsed"]
    assert card["tokens_per_s"] == pytest.approx(first["tokens"] / first["elapsed"])   # of the training time
    assert ", of which start-up " in next(line for line in trained["markdown"].splitlines()
                                          if line.startswith("| wall time |"))


def test_progress_log_resume_adds_its_start_up(trained):
    first, second = trained["first"], trained["second"]
    assert second["step"] == 6 and second["startup"] > first["startup"]
    assert trained["resumed_card"]["wall_time_s"] == pytest.approx(second["elapsed"] + second["startup"])


def test_progress_log_evaluate_says_it_reads_the_file(trained, capsys):
    assert main(["evaluate", str(trained["run"]), str(VALID), "--json"]) == 0         # --json: no progress
    assert "seqlab: read" not in capsys.readouterr().err
    assert main(["evaluate", str(trained["run"]), str(VALID)]) == 0
    lines = capsys.readouterr().err.splitlines()
    reading = next(i for i, line in enumerate(lines) if line.startswith("seqlab: reading "))
    read = next(i for i, line in enumerate(lines) if line.startswith("seqlab: read "))
    assert lines[reading].startswith(f"seqlab: reading {VALID.name} (") and reading < read
    assert " tokens in " in lines[read]


def test_progress_log_prepare_keeps_terminal_codes_out(tmp_path, monkeypatch, capsys):
    """`seqlab prepare` (progress on by default) writes log lines, never a bar, when stderr is a file."""
    monkeypatch.setenv("SEQLAB_PROGRESS_EVERY", "0.0001")
    assert main(["prepare", "lm", "--train", str(TRAIN), "--valid", str(VALID), "--tokenizer", "word",
                 "--output", str(tmp_path / "prepared")]) == 0
    err = capsys.readouterr().err
    assert not any(code in err for code in TERMINAL_CODES)
    assert any(line.startswith("preparing prepared: ") and "B (" in line for line in err.splitlines())


def test_progress_module_is_the_only_tqdm_user():
    """Every bar of seqlab comes through `seqlab.progress` (the trainer's messages use tqdm.write only)."""
    source = Path(progress.__file__).parent
    users = [path.relative_to(source).as_posix() for path in source.rglob("*.py")
             if "tqdm(" in path.read_text(encoding="utf-8") and path.name != "progress.py"]
    assert users == []


def test_progress_trainer_imports_no_notebook_tqdm_without_widgets():
    """Without ipywidgets, importing the trainer must not import tqdm.auto: in a Jupyter kernel (a documentation
    page run as a notebook) tqdm.auto prints "TqdmWarning: IProgress not found" into the page's outputs."""
    code = ("import importlib.util, sys; import seqlab.training.trainer; "
            "print(importlib.util.find_spec('ipywidgets') is not None, 'tqdm.auto' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    widgets, imported = done.stdout.split()
    assert imported == widgets


def test_progress_log_bad_interval_stops_a_training_before_its_data(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SEQLAB_PROGRESS_EVERY", "soon")
    assert main(["train", "lm", "--train", str(TRAIN), "--valid", str(VALID), "--output", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err == ("seqlab: error: SEQLAB_PROGRESS_EVERY=soon: give the seconds between progress lines in a log, "
                   "a number such as 30 or 0.5 (0: no progress lines)\n")
