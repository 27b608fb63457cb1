"""`seqlab <command>`: each command parses its options and calls one library function.

One module per command, or group of commands; each adds its parser (`add_parser`), which names the function
that runs it (`handler`):

    examples.py    seqlab examples TASK DIR: a small dataset of a task written, and the command that trains on it
    prepare.py     seqlab prepare FAMILY: its data files into memory-mapped shards, once
    train.py       seqlab train FAMILY: options generated from the family's config dataclasses
    evaluate.py    seqlab evaluate: the options any family takes; the family's `cli` part reports
    serve.py       seqlab serve (its parser also alone: serving ONNX exports never imports PyTorch)
    export.py      seqlab export --format onnx, or a format a family offers
    runs.py        seqlab info, seqlab card, seqlab bench peak
    compare.py     seqlab compare FAMILY, seqlab compare --report
    tune.py        seqlab tune FAMILY: an architecture's options searched with Optuna
    audit.py       seqlab audit toxicity | bias | memorization | exposure
    options.py     what they share: one-line parser errors, ranged numbers, options from dataclasses

The inference commands are the families' (`generate`, `tag`, `classify`, `translate`, `summarize`: each
family's `cli` part, `seqlab.families.<name>.cli`). Any error in the user's input is one line on stderr and
exit status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import os
import sys
import warnings

from seqlab.cli import serve
from seqlab.cli.options import Parser
from seqlab.cli.serve import available_cores  # noqa: F401  (re-exported)
from seqlab.errors import SeqlabError
from seqlab.version import __version__


@functools.cache
def build_parser() -> argparse.ArgumentParser:
    """The whole command line: every command, the families' inference commands among them."""
    from seqlab.cli import audit, compare, evaluate, examples, export, prepare, runs, train, tune
    from seqlab.registry import FAMILIES

    parser = Parser(prog="seqlab", description="Train, evaluate and decode the neural "
                    "sequence models of Jurafsky & Martin's SLP chapters.")
    parser.add_argument("--version", action="version", version=f"seqlab {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    examples.add_parser(commands)
    prepare.add_parser(commands)
    train.add_parser(commands)
    evaluate.add_parser(commands)
    for family in FAMILIES.values():
        family.part("cli").add_commands(commands)
    serve.add_parser(commands)
    runs.add_parser(commands)
    compare.add_parser(commands)
    tune.add_parser(commands)
    export.add_parser(commands)
    audit.add_parser(commands)
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None):
    print(f"seqlab: warning: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["train"]:
        from seqlab.cli.train import with_family

        try:
            argv = with_family(argv)          # `seqlab train --config best.yaml`: the family the file names
        except SeqlabError as error:
            return fail(str(error))
    parser = serve.parser() if argv[:1] == ["serve"] else build_parser()
    args = parser.parse_args(argv)
    args.given_options = {token.split("=")[0] for token in argv if token.startswith("--")}
    warnings.showwarning = _show_warning
    try:
        if getattr(args, "threads", 0) and getattr(args, "runtime", "torch") == "torch":
            import torch

            torch.set_num_threads(args.threads)
        code = args.handler(args)
        sys.stdout.flush()            # a full disk or a closed pipe shows here, not after main has returned
        return code
    except SeqlabError as error:
        return fail(str(error))
    except KeyboardInterrupt:
        print("seqlab: interrupted; the last checkpoint (if any) is intact", file=sys.stderr)
        return 130
    except BrokenPipeError:            # the reader stopped early (`seqlab translate ... | head`): not an error
        with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # no second error at exit
        return 0
    except OSError as error:           # a write to standard output, or a path no check above caught
        from seqlab.errors import os_error_message

        if error.filename is None:         # standard output: drop what is left, so exiting does not fail again
            with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return fail(f"cannot write the output: {os_error_message(error)}")
        return fail(os_error_message(error))
    except MemoryError:
        return fail("out of memory: lower --batch-size (or the model's size), or give the process more memory")
    except RuntimeError as error:      # PyTorch reports a failed allocation as a RuntimeError
        if "out of memory" not in str(error) and "not enough memory" not in str(error):
            raise
        return fail(f"out of memory ({str(error).splitlines()[0][:200]}): lower --batch-size (or the model's "
                    "size), or give the process more memory")


def fail(message: str) -> int:
    """Print one line for the user's error and return exit status 2."""
    print(f"seqlab: error: {' '.join(message.split())}", file=sys.stderr)
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
