"""Progress that reads well on a terminal and in a log.

On a terminal (stderr is a tty, or tqdm draws a notebook widget) a progress bar is tqdm's. When stderr
goes to a file or a pipe (a job's log), redrawing a bar with carriage returns fills the log, so the bar is
a `LogBar` instead: one plain line every $SEQLAB_PROGRESS_EVERY seconds (default 30; 0: no lines) with
what the bar would show, and no carriage return or ANSI code:

    training: 1,200/5,000 step (24%), 3.10 step/s, elapsed 06:28, remaining 20:25, loss=3.21, lr=0.001

Every bar of seqlab comes from `progress_bar`; a message printed among bars with `tqdm.write` (on stdout)
keeps its place before the next line of a log bar, which flushes stdout first. `Reading` says that a long
data read starts and how long it took, and `command_clock` times a training command from its start, so that
the model card's wall time counts the start-up (data, vocabulary, model) beside the training.
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

if importlib.util.find_spec("ipywidgets"):    # a notebook widget, where a notebook can draw one
    from tqdm.auto import tqdm
else:                                         # without ipywidgets tqdm.auto warns "IProgress not found" in a notebook
    from tqdm import tqdm

from seqlab.errors import SeqlabError

EVERY_ENV = "SEQLAB_PROGRESS_EVERY"
DEFAULT_EVERY = 30.0                     # seconds between a log bar's lines
_NOTEBOOK = any(cls.__module__ == "tqdm.notebook" for cls in tqdm.__mro__)    # tqdm.auto chose a widget


def progress_bar(iterable: Iterable | None = None, progress: bool | None = None, **options):
    """A progress bar over `iterable` (or, without one, a bar to `update` by hand; `options` are tqdm's:
    total, desc, unit, ...): tqdm's on a terminal, a `LogBar` when stderr is not one. `progress` False: no
    bar, the iterable itself (making even a disabled tqdm bar costs about half a millisecond, which a server
    pays on every request), or a silent `LogBar` to update."""
    if progress is False:
        return iterable if iterable is not None else LogBar(every=0, **options)
    if on_terminal():
        return tqdm(iterable, disable=None, **options)
    every = log_interval()
    if not every and iterable is not None:
        return iterable
    return LogBar(iterable, every=every, **options)


def on_terminal() -> bool:
    """Whether a bar can redraw itself in place: stderr is a terminal, or tqdm draws a notebook widget."""
    if _NOTEBOOK:
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):          # no stderr (pythonw), or a closed one
        return False


def log_interval() -> float:
    """The seconds between a log bar's lines: $SEQLAB_PROGRESS_EVERY, 30 by default, 0 for no lines."""
    text = os.environ.get(EVERY_ENV, "").strip()
    if not text:
        return DEFAULT_EVERY
    try:
        every = float(text)
    except ValueError:
        every = math.nan
    if not (math.isfinite(every) and every >= 0):
        raise SeqlabError(f"{EVERY_ENV}={text}: give the seconds between progress lines in a log, a number "
                          "such as 30 or 0.5 (0: no progress lines)")
    return every


def _stderr_line(text: str) -> None:
    """One line on stderr, after what stdout holds: in a log that gets both, the messages printed with
    `tqdm.write` (stdout) before a bar's line stay before it. A line that cannot be written is dropped:
    progress never stops the work it reports on."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stdout.flush()
        print(text, file=sys.stderr, flush=True)


class LogBar:
    """What a tqdm bar shows, as one plain line on stderr at most every `every` seconds (0: never), and a
    last line when it closes if it showed any (a bar shorter than `every` leaves the log alone).

    The part of tqdm's interface seqlab uses: iteration, `with`, `update`, `set_postfix`, `set_description`,
    `reset`, `refresh`, `close` and a `total` to assign (a schedule fixed after the first steps). The rate
    is the average since the start (or the last `reset`), and the time remaining what is left at that rate.
    `clock` is the time source (a test gives a fake one); tqdm's display options are accepted and ignored."""

    def __init__(self, iterable: Iterable | None = None, desc: str | None = None, total: float | None = None,
                 initial: float = 0, unit: str = "it", unit_scale: bool = False, postfix: dict | None = None,
                 every: float = DEFAULT_EVERY, clock: Callable[[], float] = time.monotonic, **_display):
        if total is None and iterable is not None:
            with contextlib.suppress(TypeError):
                total = len(iterable)
        self.iterable, self.desc, self.total = iterable, desc or "", total
        self.unit, self.unit_scale = unit.strip() or "it", unit_scale
        self.every, self.clock = every, clock
        self.n = self.initial = initial
        self.postfix = ""
        self.start = self.last = clock()
        self.lines, self.closed = 0, False
        if postfix:
            self.set_postfix(postfix, refresh=False)

    def __iter__(self) -> Iterator:
        try:
            for item in self.iterable:
                yield item
                self.update()
        finally:
            self.close()

    def __len__(self) -> int:
        return int(self.total) if self.total is not None else len(self.iterable)

    def __enter__(self) -> LogBar:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def update(self, n: float = 1) -> None:
        self.n += n
        self.refresh()

    def set_postfix(self, ordered_dict: dict | None = None, refresh: bool = True, **fields) -> None:
        """`loss=3.21, lr=0.001` after the figures, numbers written as tqdm writes them."""
        fields = {**(ordered_dict or {}), **fields}
        self.postfix = ", ".join(f"{key}={tqdm.format_num(value) if isinstance(value, (int, float)) else value}"
                                 for key, value in fields.items())
        if refresh:
            self.refresh()

    def set_postfix_str(self, text: str = "", refresh: bool = True) -> None:
        self.postfix = str(text)
        if refresh:
            self.refresh()

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        self.desc = desc or ""
        if refresh:
            self.refresh()

    def reset(self, total: float | None = None) -> None:
        """Count again from 0 (with a new `total` if given), the rate and the clock too."""
        self.n = self.initial = 0
        if total is not None:
            self.total = total
        self.start = self.clock()

    def refresh(self) -> None:
        """A line if `every` seconds have passed since the last one (or the start)."""
        if self.every and not self.closed and self.clock() - self.last >= self.every:
            self._show()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.lines:
            self._show()

    def _show(self) -> None:
        self.last = self.clock()
        self.lines += 1
        _stderr_line(self.line())

    def line(self) -> str:
        """`desc: 1,200/5,000 step (24%), 3.10 step/s, elapsed 06:28, remaining 20:25, loss=3.21`."""
        elapsed = self.clock() - self.start
        rate = (self.n - self.initial) / elapsed if elapsed > 0 else 0.0
        parts = [self._count()]
        if rate > 0:
            parts.append(self._rate(rate))
        parts.append(f"elapsed {tqdm.format_interval(elapsed)}")
        if self.total and rate > 0:
            parts.append(f"remaining {tqdm.format_interval(max(0.0, self.total - self.n) / rate)}")
        if self.postfix:
            parts.append(self.postfix)
        return (f"{self.desc}: " if self.desc else "") + ", ".join(parts)

    def _amount(self, value: float) -> str:
        if self.unit_scale:
            return f"{tqdm.format_sizeof(value)}{self.unit}"
        return f"{value:,}" if isinstance(value, int) else f"{value:,.4g}"

    def _count(self) -> str:
        unit = "" if self.unit_scale else f" {self.unit}"
        if not self.total:
            return f"{self._amount(self.n)}{unit}"
        return f"{self._amount(self.n)}/{self._amount(self.total)}{unit} ({100 * self.n / self.total:.0f}%)"

    def _rate(self, rate: float) -> str:
        if self.unit_scale:
            return f"{tqdm.format_sizeof(rate)}{self.unit}/s"
        if rate < 1:
            return f"{1 / rate:.2f} s/{self.unit}"
        return f"{rate:,.1f} {self.unit}/s" if rate >= 100 else f"{rate:.2f} {self.unit}/s"


# ---------------------------------------------------------------------------- reading the data

class Reading:
    """The lines around a data read that can take minutes (hashing, preparing or loading the files), so that
    a log does not stay silent: `seqlab: reading train.txt (12.4 MB), valid.txt (1.2 MB) ...` when it is made,
    `seqlab: read 2,088,628 training tokens in 3.1 s` at `done`. `log` prints a line (a run's: rank 0 only);
    `show` False says nothing."""

    def __init__(self, paths: Iterable, log: Callable[[str], None] = _stderr_line, show: bool = True):
        self.log = log if show else None
        self.started = time.monotonic()
        if self.log is not None:
            named = [_described(Path(path)) for path in paths if path]
            self.log(f"seqlab: reading {', '.join(named) if named else 'the data'} ...")

    def done(self, what: str) -> float:
        """Say what was read (`2,088,628 training tokens`) and in how long; return the seconds."""
        seconds = time.monotonic() - self.started
        if self.log is not None:
            self.log(f"seqlab: read {what} in {seconds:.1f} s")
        return seconds


def data_files(data) -> list[str]:
    """The input files of a data config (its `option(..., file=True)` fields) given, and its prepared folder."""
    from seqlab.config import file_fields

    return [getattr(data, name) for name in file_fields(data) if getattr(data, name)] + \
        ([data.prepared] if getattr(data, "prepared", "") else [])


def _described(path: Path) -> str:
    """`train.txt (12.4 MB)`, `wt2/ (1.2 GB)` for a folder; the name alone if it cannot be read (the family
    reports that in its own words)."""
    try:
        size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else path.stat().st_size
    except OSError:
        return path.name
    return f"{path.name}{'/' if path.is_dir() else ''} ({size_text(size)})"


def size_text(size: float) -> str:
    """Bytes in decimal units: `532 B`, `12.4 kB`, `12.4 MB`, `1.2 GB`."""
    if size < 1000:
        return f"{size:.0f} B"
    for unit in ("kB", "MB", "GB"):
        size /= 1000
        if round(size, 1) < 1000:
            return f"{size:.1f} {unit}"
    return f"{size / 1000:.1f} TB"


# ---------------------------------------------------------------------------- the command's clock

_command_started: float | None = None       # time.time() when the training command running now began


@contextlib.contextmanager
def command_clock() -> Iterator[None]:
    """Time a training command from now to its end (`seqlab.runs.directory.train_in_run`, which every family's
    training enters before the run directory's lock, the data, the vocabulary and the model): the trainer
    counts its start-up, the seconds from here to its first step, with `startup_seconds`. A bad
    $SEQLAB_PROGRESS_EVERY is refused here, not after minutes of reading the data."""
    global _command_started
    if not on_terminal():
        log_interval()
    _command_started = time.time()
    try:
        yield
    finally:
        _command_started = None


def startup_seconds(now: float) -> float:
    """The seconds from the start of the training command to `now` (a time.time()); 0 outside one (a
    `Trainer` used alone)."""
    return max(0.0, now - _command_started) if _command_started is not None else 0.0
