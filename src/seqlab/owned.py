"""What seqlab wrote, and so what `--overwrite` may replace: seqlab never deletes or replaces a file it did not
write. Each kind of folder it writes carries a file that says so, and names what else it wrote there:

    a run directory      config.json with its "format_version" and "task"      `seqlab.runs.directory`
    an export            manifest.json with its "format" and "files"           `seqlab.export`
    a prepared folder    manifest.json, "format": "seqlab-prepared", "files"   `seqlab.data.prepared`
    example files        .seqlab-examples.json: each file's SHA-256            `seqlab.examples`

Exports and prepared folders written before a "files" list was kept are still recognised by their format
markers (`seqlab.export`, `seqlab.data.prepared` say how). What those kinds share is here: the files of a folder
that no marker accounts for (`strangers`), the refusal of an output that is, holds or lies inside its own
source (`refuse_overlap`), and the move of a folder written beside its place into it (`replace_folder`): a
folder being replaced is renamed aside, the new one renamed in, and only then is the old one removed, so a
failure leaves the old folder, never neither."""

from __future__ import annotations

import os
import shutil
from pathlib import Path, PurePosixPath

from seqlab.errors import SeqlabError, os_error_reason


def files_under(folder: Path) -> list[str]:
    """Every file (and link) under `folder`, as sorted relative POSIX paths, hidden ones included."""
    found = []
    for parent, dirs, names in os.walk(folder):
        found += [PurePosixPath(os.path.relpath(Path(parent) / name, folder)).as_posix() for name in names]
        found += [PurePosixPath(os.path.relpath(Path(parent) / name, folder)).as_posix()
                  for name in dirs if (Path(parent) / name).is_symlink()]
    return sorted(found)


def strangers(folder: Path, known: set[str]) -> list[str]:
    """The files under `folder` that `known` (relative POSIX paths) does not list: what seqlab did not write."""
    return [name for name in files_under(folder) if name not in known]


def listing(names: list[str], limit: int = 3) -> str:
    """"a, b, c and 4 more": a few names for a message."""
    shown = ", ".join(names[:limit])
    return f"{shown} and {len(names) - limit} more" if len(names) > limit else shown


def refuse_overlap(output: Path, source: Path, what: str, option: str = "--output") -> None:
    """Refuse an output folder that is the source folder (`what`: "the run being exported"), lies inside it or
    holds it: writing (or replacing) it would write into, or delete, the source."""
    out, src = Path(output).resolve(), Path(source).resolve()
    if out == src:
        raise SeqlabError(f"{option} {output} is {what} itself: write to a folder of its own")
    if out.is_relative_to(src):
        raise SeqlabError(f"{option} {output} lies inside {what} ({source}): write to a folder of its own, "
                          "outside it")
    if src.is_relative_to(out):
        raise SeqlabError(f"{option} {output} holds {what} ({source}): write to a folder of its own, which does "
                          "not hold it")


def staging_folder(output: Path, what: str) -> Path:
    """A new hidden folder beside `output` (`.NAME.partial-PID`) to write into, after removing those that
    processes no longer running left there (an export killed half-way), and the old folders they had renamed
    aside (`.NAME.old-PID`) once a new one is in place."""
    parent = output.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        kinds = ("partial", "old") if output.exists() else ("partial",)
        for stale in (path for kind in kinds for path in parent.glob(f".{output.name}.{kind}-*")):
            pid = stale.name.rsplit("-", 1)[-1]
            if pid.isdigit() and not alive(int(pid)):
                shutil.rmtree(stale, ignore_errors=True)
        folder = parent / f".{output.name}.partial-{os.getpid()}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
    except OSError as error:
        raise SeqlabError(f"{what} {output}: cannot write there ({os_error_reason(error)})") from None
    return folder


def replace_folder(staging: Path, output: Path, what: str) -> None:
    """Move the complete folder `staging` to `output`: an `output` already there (checked by the caller) is
    renamed aside first and removed only once the new one is in place; if the move fails, it is put back."""
    old = None
    try:
        if output.exists() or output.is_symlink():
            old = output.parent / f".{output.name}.old-{os.getpid()}"
            shutil.rmtree(old, ignore_errors=True)
            os.replace(output, old)
        try:
            os.replace(staging, output)
        except OSError:
            if old is not None:
                os.replace(old, output)
                old = None
            raise
    except OSError as error:
        shutil.rmtree(staging, ignore_errors=True)
        raise SeqlabError(f"{what} {output}: cannot write there ({os_error_reason(error)}); what was there is "
                          "intact") from None
    if old is not None:
        if old.is_symlink():
            old.unlink()
        else:
            shutil.rmtree(old, ignore_errors=True)


def alive(pid: int) -> bool:
    """Whether a process of this id runs (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
