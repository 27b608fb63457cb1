"""The one error type users see: a clear message, and exit code 2 from the command line."""

from __future__ import annotations


class SeqlabError(Exception):
    """A problem with the user's input (a file, an option, a run directory).

    The message says what is wrong, where (file and line, or the option), and what to do.
    The command line prints it on one line and exits with status 2.
    """


def where(path, line: int | None = None) -> str:
    """`path` or `path:line`, for messages."""
    return f"{path}:{line}" if line is not None else str(path)
