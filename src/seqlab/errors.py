"""The one error type users see: a clear message, and exit code 2 from the command line."""

from __future__ import annotations

import errno


class SeqlabError(Exception):
    """A problem with the user's input (a file, an option, a run directory).

    The message says what is wrong, where (file and line, or the option), and what to do.
    The command line prints it on one line and exits with status 2.
    """


class SeqlabWarning(UserWarning):
    """Something the user should know that does not stop the work (unknown prompt tokens, an option of a
    config file that does nothing for the chosen architecture); the CLI prints it as one line."""


# what reading a damaged (hand-edited, truncated, foreign) run file raises while its JSON is taken apart
DAMAGED = (KeyError, TypeError, AttributeError, ValueError, IndexError)


def where(path, line: int | None = None) -> str:
    """`path` or `path:line`, for messages."""
    return f"{path}:{line}" if line is not None else str(path)


STDIN = "-"


def place(what: str, path, line: int | None = None) -> str:
    """How a message names a place in the user's input: "input file in.txt:3", or for standard input
    (path "-") "standard input:3"."""
    if str(path) == STDIN:
        return where("standard input", line)
    return f"{what} {where(path, line)}"


# what to do about an operating-system error, by errno
_ADVICE = {
    errno.ENOSPC: "the disk is full: free some space or write somewhere else",
    errno.EDQUOT: "the disk quota is used up: free some space or write somewhere else",
    errno.EFBIG: "the file is over this process's size limit (ulimit -f) or the file system's: raise the limit "
                 "or write somewhere else",
    errno.EACCES: "check the permissions, or choose another path",
    errno.EPERM: "check the permissions, or choose another path",
    errno.EROFS: "the file system is read-only: choose another path",
    errno.ENOTDIR: "a part of the path is a file, not a directory: choose another path",
    errno.EISDIR: "it is a directory: give a file name",
    errno.ENOENT: "a folder on the path does not exist",
    errno.EEXIST: "something is already there: choose another path",
    errno.ENAMETOOLONG: "the name is too long: choose a shorter path",
    errno.EIO: "the device reported an input/output error: check the disk",
    errno.EMFILE: "too many open files: raise the limit (ulimit -n)",
}


def os_error_reason(error: OSError) -> str:
    """What failed and what to do: "No space left on device; the disk is full: free some space ..."."""
    reason = error.strerror or str(error)
    advice = _ADVICE.get(error.errno, "")
    return f"{reason}; {advice}" if advice else reason


def os_error_message(error: OSError) -> str:
    """One line for an operating-system error: the path (when the error names one), what failed and
    what to do."""
    if error.filename is None:
        return os_error_reason(error)
    path = error.filename if error.filename2 is None else f"{error.filename} -> {error.filename2}"
    return f"{path}: {os_error_reason(error)}"
