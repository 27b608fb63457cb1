"""`seqlab <command>`: each command parses its options and calls one library function.

One module per command, or group of commands; each adds its parser (`add_parser`), which names the function
that runs it (`handler`):

    examples.py    seqlab examples TASK DIR: a small dataset of a task written, and the command that trains on it
    prepare.py     seqlab prepare FAMILY: its data files into memory-mapped shards, once
    train.py       seqlab train FAMILY: options generated from the family's config dataclasses
    evaluate.py    seqlab evaluate: the options any family takes; the family's `cli` part reports
    serve.py       seqlab serve (its parser also alone: serving ONNX exports never imports PyTorch)
    explore.py     seqlab explore: the page's Explore tab on a local server, or one text's views printed
    export.py      seqlab export --format onnx, or a format a family offers
    runs.py        seqlab info, seqlab card, seqlab bench peak
    compare.py     seqlab compare FAMILY, seqlab compare --report
    tune.py        seqlab tune FAMILY: an architecture's options searched with Optuna
    audit.py       seqlab audit toxicity | bias | memorization | exposure
    options.py     what they share: one-line parser errors, ranged numbers, options from dataclasses

The inference commands are the families' (`generate`, `tag`, `classify`, `translate`, `summarize`: each
family's `cli` part, `seqlab.families.<name>.cli`). Any error in the user's input is one line on stderr and
exit status 2.

In an install without PyTorch (the container that serves ONNX exports: `pip install --no-deps seqlab` beside
onnxruntime, fastapi, ...), the whole parser cannot be built: `--help` and `--version` then come from a parser
that lists every command (`without`), `seqlab serve --runtime onnx` runs, and every other command is refused
in one line that names the missing package ("seqlab train needs PyTorch: pip install torch").
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.metadata
import importlib.util
import io
import os
import re
import sys
import warnings
from typing import TextIO

from seqlab.cli import serve
from seqlab.cli.options import Commands, Parser
from seqlab.errors import SeqlabError
from seqlab.version import __version__

# seqlab's own commands, before the families' and after serve, in the order --help lists them: what an install
# without PyTorch lists and refuses (tests/test_torch_free.py holds them to build_parser's)
FIRST_COMMANDS = ("examples", "prepare", "train", "evaluate")
LAST_COMMANDS = ("explore", "info", "bench", "card", "compare", "tune", "export", "audit", "exercises")

# a module seqlab imports -> (what a message calls it, what to pip install), where they are not its own name
PACKAGES = {"torch": ("PyTorch", "torch"), "yaml": ("PyYAML", "pyyaml"), "rouge_score": ("rouge-score", "rouge-score"),
            "onnx": ("onnx", "'seqlab[export]'"), "onnxruntime": ("onnxruntime", "'seqlab[export]'")}


def top_parser(note: str = "") -> tuple[argparse.ArgumentParser, Commands]:
    """seqlab's parser, --version, and the action its commands are added to."""
    parser = Parser(prog="seqlab", description="Train, evaluate and decode the neural sequence models of Jurafsky & "
                    f"Martin's SLP chapters.{note}")
    parser.add_argument("--version", action="version", version=f"seqlab {__version__}")
    return parser, parser.add_subparsers(dest="command", required=True, metavar="COMMAND")


@functools.cache
def build_parser() -> argparse.ArgumentParser:
    """The whole command line: every command, the families' inference commands among them."""
    from seqlab.cli import audit, compare, evaluate, examples, exercises, explore, export, prepare, runs, train, tune
    from seqlab.registry import FAMILIES

    parser, commands = top_parser()
    examples.add_parser(commands)
    prepare.add_parser(commands)
    train.add_parser(commands)
    evaluate.add_parser(commands)
    for family in FAMILIES.values():
        family.part("cli").add_commands(commands)
    serve.add_parser(commands)
    explore.add_parser(commands)
    runs.add_parser(commands)
    compare.add_parser(commands)
    tune.add_parser(commands)
    export.add_parser(commands)
    audit.add_parser(commands)
    exercises.add_parser(commands)
    return parser


def missing_package(error: ModuleNotFoundError) -> tuple[str, str] | None:
    """(its name, what to pip install) of the package an import did not find; None for a module of seqlab's own,
    which is a bug, not a gap in the install. Without PyTorch the package is PyTorch, whichever import failed
    first, and what to install is every requirement of seqlab's that is missing (an install made with
    `pip install --no-deps seqlab`, as the ONNX server's container is, lacks several)."""
    module = (error.name or "").partition(".")[0]
    if not module or module == "seqlab":
        return None
    if importlib.util.find_spec("torch") is None:
        module = "torch"
    name, pip = PACKAGES.get(module, (module, module))
    absent = missing_requirements()
    return name, " ".join(absent) if pip in absent else pip


def missing_requirements() -> list[str]:
    """The requirements of the installed seqlab (not its extras) whose distributions are not installed; none
    where seqlab runs from a checkout that was not installed."""
    try:
        requirements = importlib.metadata.requires("seqlab") or []
    except importlib.metadata.PackageNotFoundError:
        return []
    absent = []
    for requirement in requirements:
        if ";" in requirement:                   # an extra's, or one for other Pythons
            continue
        match = re.match(r"[A-Za-z0-9._-]+", requirement)
        assert match is not None, requirement    # a requirement starts with its distribution's name
        name = match.group()
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            absent.append(name)
    return absent


def needs(command: str, package: tuple[str, str]) -> str:
    """The one line that refuses a command whose package is not installed."""
    name, pip = package
    hint = " (without it, seqlab serves ONNX exports: seqlab serve --runtime onnx EXPORT)" if name == "PyTorch" else ""
    return f"seqlab {command} needs {name}: pip install {pip}{hint}"


def torch_commands() -> list[str]:
    """Every command but serve, in --help's order (the families' inference commands from the registry, which
    imports no PyTorch)."""
    from seqlab.registry import FAMILIES

    return [*FIRST_COMMANDS, *(c for family in FAMILIES.values() for c in family.commands), *LAST_COMMANDS]


def without(package: tuple[str, str]) -> argparse.ArgumentParser:
    """The command line of an install that lacks a package the whole parser imports (PyTorch, in the container
    that serves ONNX exports): --version, seqlab serve, and every other command listed as needing it (`main`
    refuses them before parsing)."""
    name, pip = package
    parser, commands = top_parser(f" {name} is not installed here (pip install {pip}): of the commands below, "
                                  "seqlab serve --runtime onnx runs (ONNX exports), the others need it.")
    names = torch_commands()
    for command in names[:names.index(LAST_COMMANDS[0])]:
        commands.add_parser(command, help=f"(needs {name})", add_help=False)
    serve.add_parser(commands)
    for command in LAST_COMMANDS:
        commands.add_parser(command, help=f"(needs {name})", add_help=False)
    return parser


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: TextIO | None = None, line: str | None = None) -> None:
    print(f"seqlab: warning: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        parser = serve.parser() if argv[:1] == ["serve"] else build_parser()
    except ModuleNotFoundError as error:           # an install without PyTorch: the ONNX server's
        package = missing_package(error)
        if package is None:
            raise
        if argv[:1] and argv[0] in torch_commands():
            return fail(needs(argv[0], package))
        parser = without(package)
    else:
        if argv[:1] == ["train"]:
            from seqlab.cli.train import with_family

            try:
                argv = with_family(argv)          # `seqlab train --config best.yaml`: the family the file names
            except SeqlabError as error:
                return fail(str(error))
    args = parser.parse_args(argv)
    args.given_options = {token.split("=")[0] for token in argv if token.startswith("--")}
    warnings.showwarning = _show_warning
    try:
        if getattr(args, "threads", 0) and getattr(args, "runtime", "torch") == "torch":
            import torch

            torch.set_num_threads(args.threads)
        code: int = args.handler(args)
        sys.stdout.flush()            # a full disk or a closed pipe shows here, not after main has returned
        return code
    except SeqlabError as error:
        return fail(str(error))
    except ModuleNotFoundError as error:          # a package the command imports is not installed (PyTorch, ...)
        package = missing_package(error)
        if package is None:
            raise
        return fail(needs(args.command, package))
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
