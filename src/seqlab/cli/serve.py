"""`seqlab serve RUN [RUN ...]`: the HTTP API (`seqlab.serve`) over trained runs, or over ONNX exports
(--runtime onnx, without PyTorch in the server: its parser is built alone, `parser()`, so that serving an
export never imports the families' pipelines)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from seqlab.cli.options import CommandOptions, Commands, Parser, add_number, add_runtime_options
from seqlab.config import option
from seqlab.errors import SeqlabError
from seqlab.serve.limits import API_KEY_VARIABLE, ServeLimits, available_cores  # noqa: F401  (re-exported)

if TYPE_CHECKING:
    from fastapi import FastAPI

    from seqlab.serve.served import Served


@dataclass
class Address:
    """Where the server listens (its numeric part)."""

    port: int = option(8000, "the TCP port", at_least=1, at_most=65535)


def parser() -> argparse.ArgumentParser:
    """`seqlab serve`'s parser alone: the whole one imports every pipeline and so PyTorch, which a server of
    ONNX exports (--runtime onnx) never loads."""
    alone = Parser(prog="seqlab")
    add_parser(alone.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    return alone


def add_parser(commands: Commands) -> None:
    """`seqlab serve RUN [RUN ...]`: the HTTP API over trained runs."""
    serve = commands.add_parser("serve", help="serve trained models of any task over HTTP: a JSON API (OpenAPI "
                                "page at /docs) on 127.0.0.1 unless told otherwise")
    serve.add_argument("runs", metavar="RUN", nargs="+", help="run directories (with --runtime onnx: export "
                       "directories, from seqlab export); the API names each model by its directory's name")
    add_server_options(serve)
    serve.set_defaults(handler=command)


def add_server_options(parser: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> None:
    """The server's options (`seqlab serve`'s, and `seqlab explore`'s): where it listens, its API key, CORS, the
    limits of one request (`ServeLimits`, but those named in `skip`), the runtime and its threads."""
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1, this "
                        "machine only; 0.0.0.0 for every interface, with --api-key)")
    add_number(parser, Address, "port")
    parser.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY' on every /v1 request "
                        f"(default: ${API_KEY_VARIABLE} when set, else none)")
    parser.add_argument("--cors-origin", action="append", metavar="ORIGIN", help="let the web pages of ORIGIN "
                        "(https://app.example.org, http://localhost:3000, or * for any) call the API from a browser "
                        "(CORS; the Authorization and Content-Type headers allowed); repeat for more origins "
                        "(default: none)")
    group = parser.add_argument_group("limits of one request")
    for f in dataclasses.fields(ServeLimits):
        if f.name not in skip:
            add_number(group, ServeLimits, f.name)
    add_runtime_options(parser, "CPU threads for the models (0: one per core but one, which is left to the server's "
                                "event loop: on 2 cores that nearly doubles the requests answered per second, "
                                "benchmarks/results/serve_load.md)")
    add_number(parser, CommandOptions, "read_threads")
    parser.add_argument("--runtime", choices=("torch", "onnx"), default="torch",
                        help="torch: run directories on PyTorch; onnx: export directories (seqlab export RUN --format "
                        "onnx) on onnxruntime, --threads for each graph, without PyTorch in the server (default: "
                        "torch)")


def command(args: argparse.Namespace) -> int:
    """`seqlab serve`: load the runs, check the address is free, and serve until interrupted (Ctrl-C)."""
    app = start(args)
    models = ", ".join(f"{m.name} ({m.task})" for m in app.state.models.values())
    print(f"seqlab: serving {models} on http://{args.host}:{args.port} (the API's page: /docs; Ctrl-C stops)",
          file=sys.stderr, flush=True)
    run(app, args)
    return 0


def start(args: argparse.Namespace, check: Callable[[dict[str, Served]], object] | None = None) -> FastAPI:
    """The app of the server options in `args` (`add_server_options`; limits it lacks keep their defaults), the
    address checked free first; `check(models)` sees the loaded models before the app is made."""
    import socket

    from seqlab.serve.app import create_app, load_runs
    from seqlab.serve.limits import ServeLimits

    limits = ServeLimits(**{f.name: getattr(args, f.name) for f in dataclasses.fields(ServeLimits)
                            if hasattr(args, f.name)})
    try:
        with socket.create_server((args.host, args.port)):
            pass
    except OSError as error:
        raise SeqlabError(f"cannot listen on {args.host}:{args.port}: {error.strerror or error} (another server "
                          "there? choose another --port)") from None
    threads = args.threads or max(1, available_cores() - 1)   # a core per model thread, but one left to the event loop
    if args.runtime == "onnx" and args.device not in ("auto", "cpu"):
        raise SeqlabError(f"--device {args.device}: --runtime onnx runs on the CPU (onnxruntime); drop --device")
    if args.runtime == "torch" and not args.threads:
        import torch

        torch.set_num_threads(threads)
    models = load_runs(args.runs, args.device, args.runtime, threads)
    if check is not None:
        check(models)
    app = create_app(models, limits, args.api_key, cors_origins=args.cors_origin or (),
                     read_threads=args.read_threads)
    if args.host not in ("127.0.0.1", "localhost", "::1") and not (args.api_key or os.environ.get("SEQLAB_API_KEY")):
        warnings.warn(f"--host {args.host} serves every machine that can reach this one, without an API key "
                      "(--api-key)", stacklevel=1)
    return app


def run(app: FastAPI, args: argparse.Namespace) -> None:
    """Serve `app` (`start`'s) until interrupted."""
    from seqlab.serve.server import serve

    serve(app, args.host, args.port, app.state.limits)     # uvicorn, with the limits on headers and read times
