"""`seqlab explore RUN [RUN ...]`: look inside trained models as they read a text (`seqlab.contract.views`: the
views each family declares, computed on the model's own forward pass).

Without --text, the server of `seqlab serve` (its options: 127.0.0.1 by default, --api-key, the limits), whose
page's Explore tab (http://127.0.0.1:PORT/#explore) shows each run's views; --open opens the tab in the browser
once the server listens. With --text, no server: each run's views of the text are computed here (what
`seqlab.load(run).explain(text)` gives), a summary of each printed (a tokens view as a table; a matrix view its
panels' shapes and largest cells; a bars view its distribution; a tree view its finished hypotheses ranked), and
with --json FILE the explanation's JSON written ('-': standard output), as POST /v1/explain answers it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seqlab.cli.options import Commands, add_number
from seqlab.cli.serve import add_server_options
from seqlab.contract.views import MAX_TEXT_CHARS, ExplainOptions, Explanation, View
from seqlab.errors import SeqlabError

if TYPE_CHECKING:
    from seqlab.serve.served import Served

# the server's limit of the same name as an option of the views (tokens generated step by step): `seqlab serve`
# sets it; the explorer's server keeps its default
SERVER_SKIPS = ("max_tokens",)


def add_parser(commands: Commands) -> None:
    """`seqlab explore RUN [RUN ...]`: the server with the page's Explore tab, or (--text) the views printed."""
    explore = commands.add_parser("explore", help="look inside trained models as they read a text: the page's "
                                  "Explore tab on a local server, or with --text the views printed here")
    explore.add_argument("runs", metavar="RUN", nargs="+", help="run directories (with --runtime onnx: export "
                         "directories, from seqlab export), of families that have views")
    known = set(explore._option_string_actions)
    text = explore.add_argument_group("without a server: one text's views (--text)")
    text.add_argument("--text", default=None, help="the text to look inside the models with ('-': standard "
                      f"input; at most {MAX_TEXT_CHARS:,} characters): print each view instead of serving the page")
    text.add_argument("--views", default=None, metavar="NAME[,NAME...]", help="the views to compute, by name "
                      "(default: every view the model's architecture has; docs/guides/explore.md lists them)")
    text.add_argument("--json", default=None, metavar="FILE", help="also write the explanation's JSON (as POST "
                      "/v1/explain answers; a list of them for several runs) to FILE, atomically ('-': standard "
                      "output, instead of the summary); an existing FILE is replaced only if it holds one")
    for f in dataclasses.fields(ExplainOptions):
        if f.metadata["choices"]:
            text.add_argument(f"--{f.name.replace('_', '-')}", choices=f.metadata["choices"], default=f.default,
                              help=f"{f.metadata['help']} (default: {f.default})")
        else:
            add_number(text, ExplainOptions, f.name)
    text_flags = set(explore._option_string_actions) - known
    known = set(explore._option_string_actions)
    explore.add_argument("--open", action="store_true", help="open the Explore tab in the web browser once the "
                         "server listens (the webbrowser module: $BROWSER, else the system's)")
    add_server_options(explore, skip=SERVER_SKIPS)
    server_flags = set(explore._option_string_actions) - known - {"--device", "--threads", "--runtime"}

    def handler(args: argparse.Namespace) -> int:
        return command(args, text_flags, server_flags)
    explore.set_defaults(handler=handler)


def command(args: argparse.Namespace, text_flags: set[str], server_flags: set[str]) -> int:
    """`seqlab explore`: the options of one way checked not given with the other, then the server or --text."""
    given: set[str] = getattr(args, "given_options", set())
    if args.text is None:
        stray = sorted(given & (text_flags - {"--text"}))
        if stray:
            raise SeqlabError(f"{stray[0]} goes with --text (the views of one text, printed); without it seqlab "
                              "explore serves the page, whose Explore tab sets the views and options")
        return serve_page(args)
    stray = sorted(given & server_flags)
    if stray:
        raise SeqlabError(f"{stray[0]} is an option of the server, which --text does not start: drop one of them")
    return explain_text(args)


def serve_page(args: argparse.Namespace) -> int:
    """The server of `seqlab serve` over the runs, each of a family with views; its Explore tab's URL printed,
    and opened with --open once the server listens."""
    from seqlab.cli import serve

    app = serve.start(args, check=refuse_viewless)
    url = explore_url(args.host, args.port)
    models = ", ".join(f"{m.name} ({m.task})" for m in app.state.models.values())
    print(f"seqlab: exploring {models}: {url} (the API's page: /docs; Ctrl-C stops)", file=sys.stderr, flush=True)
    print(url, flush=True)
    if args.open:
        open_when_listening(url, args.host, args.port)
    serve.run(app, args)
    return 0


def refuse_viewless(models: dict[str, Served]) -> None:
    """Each loaded model's family has views (an `explain` part), or one line names the first that has none."""
    from seqlab.registry import FAMILIES

    for served in models.values():
        family = FAMILIES[served.task]
        if not family.explains:
            raise SeqlabError(f"{served.run_dir} is {family.title}, which has no views to explore")


def explore_url(host: str, port: int) -> str:
    """The Explore tab's URL on a server listening on host:port (on every interface: this machine's)."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/#explore"


def open_when_listening(url: str, host: str, port: int, wait: float = 120.0) -> None:
    """Open `url` in the web browser from a thread, as soon as host:port accepts a connection (within `wait`
    seconds: a server that never listens opens nothing)."""
    import socket
    import threading
    import time
    import webbrowser

    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)

    def opener() -> None:
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                with socket.create_connection((host, port), timeout=1):
                    break
            except OSError:
                time.sleep(0.1)
        else:
            return
        if not webbrowser.open(url):
            print(f"seqlab: warning: no web browser to open; open {url}", file=sys.stderr, flush=True)

    threading.Thread(target=opener, name="seqlab-open-browser", daemon=True).start()


def read_text(value: str) -> str:
    """--text's text: the option's value, or standard input for '-'; refused when empty or too long."""
    text = sys.stdin.read() if value == "-" else value
    if not text.strip():
        raise SeqlabError("--text is empty" + (" (standard input held nothing)" if value == "-" else "")
                          + ": give the text to look inside the models with")
    if len(text) > MAX_TEXT_CHARS:
        raise SeqlabError(f"--text has {len(text):,} characters; at most {MAX_TEXT_CHARS:,} are explained")
    return text


def check_json_output(path: str) -> None:
    """--json FILE can be written, and replacing it loses nothing: it does not exist, or holds an explanation
    (an earlier --json's)."""
    from seqlab.fileio import check_writable

    check_writable(path, "--json")
    target = Path(path)
    if not target.exists():
        return
    try:
        held = json.loads(target.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        held = None
    if not all(isinstance(e, dict) and {"model", "views"} <= set(e) for e in
               (held if isinstance(held, list) and held else [held])):
        raise SeqlabError(f"--json {path} exists and is not an explanation seqlab wrote: choose another file (it "
                          "is kept)")


def explain_text(args: argparse.Namespace) -> int:
    """--text: each run's views of the text, summarised on standard output, and their JSON with --json."""
    from seqlab.contract.views import explain
    from seqlab.serve.app import load_runs

    text = read_text(args.text)
    views = None if args.views is None else [v.strip() for v in args.views.split(",") if v.strip()]
    if views == []:
        raise SeqlabError("--views names no view: give one or more names, separated by commas")
    options = ExplainOptions(**{f.name: getattr(args, f.name) for f in dataclasses.fields(ExplainOptions)})
    if args.json not in (None, "-"):
        check_json_output(args.json)
    models = load_runs(args.runs, args.device, args.runtime, args.threads)
    refuse_viewless(models)
    found = [explain(served.trained, text, views, options, name) for name, served in models.items()]
    if args.json != "-":
        sys.stdout.write("\n".join(summary(explanation) for explanation in found))
    each = [e.to_json() for e in found]
    data: dict[str, Any] | list[dict[str, Any]] = each[0] if len(each) == 1 else each
    if args.json == "-":
        sys.stdout.write(json.dumps(data, ensure_ascii=False, allow_nan=False) + "\n")
    elif args.json is not None:
        from seqlab.fileio import atomic_write_json

        atomic_write_json(args.json, data)
        print(f"seqlab: wrote {args.json}", file=sys.stderr)
    return 0


def summary(explanation: Explanation) -> str:
    """An explanation in words: its model, the tokens read, and each view summarised by its kind."""
    cut = f", the first {len(explanation.tokens)} read" if explanation.truncated else ""
    lines = [f"{explanation.model} ({explanation.family}, {explanation.arch}): {len(explanation.tokens)} tokens"
             f"{cut}, {len(explanation.views)} views in {explanation.seconds:.2f} s", ""]
    for view in explanation.views:
        lines.append(f"== {view.title} ({view.name}, {view.kind})")
        lines += [f"   {line}" for line in (view.about, view.note) if line]
        lines += {"tokens": tokens_lines, "matrix": matrix_lines, "bars": bars_lines, "tree": tree_lines}[view.kind](
            view)
        lines.append("")
    return "\n".join(lines) + "\n"


def number(value: object) -> str:
    """A value of a view, short: 4 significant digits (an integer as it is; None, NaN's JSON, as -)."""
    if value is None:
        return "-"
    if isinstance(value, bool) or isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Rows under a header, each column as wide as its widest cell (the last one left ragged)."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in [header, *rows]]


def tokens_lines(view: View) -> list[str]:
    """A tokens view: what its values are, then one row per token: its value and each detail (a list of [token,
    probability] pairs, the alternatives, as "token 0.31, ...")."""
    keys: list[str] = []
    for detail in view.details:
        keys += [key for key in detail if key not in keys and key != "token"]     # the token: its own column
    rows = []
    for i, token in enumerate(view.tokens):
        detail = view.details[i] if i < len(view.details) else {}
        row = [str(i), repr(token)[1:-1] or " ", number(view.values[i] if i < len(view.values) else None)]
        for key in keys:
            value = detail.get(key)
            if isinstance(value, list):
                value = ", ".join(f"{pair[0]!s} {number(pair[1])}" if isinstance(pair, list | tuple) and
                                  len(pair) == 2 else number(pair) for pair in value)
            row.append(number(value) if not isinstance(value, str) else value)
        rows.append(row)
    return ([f"   value: {view.label}"] if view.label else []) + table(["#", "token", "value", *keys], rows)


def matrix_lines(view: View) -> list[str]:
    """A matrix view: each panel's group, title, shape (rows x columns) and largest cell (where), and its
    highlighted path."""
    rows = []
    for panel in view.panels:
        cells = [(value, r, c) for r, row in enumerate(panel.values) for c, value in enumerate(row)
                 if value is not None and value == value]
        if cells:
            value, r, c = max(cells)
            largest = f"{number(value)} at {panel.rows[r]} x {panel.cols[c]}"
        else:
            largest = "-"
        path = "" if panel.path is None else " ".join(panel.cols[c] for c in panel.path)
        rows.append([panel.group, panel.title, f"{len(panel.rows)} x {len(panel.cols)}", largest, path])
    header = ["group", "panel", "rows x cols", "largest cell", "path"]
    keep = [i for i in range(len(header)) if any(row[i] for row in rows) or i in (1, 2, 3)]
    lines = table([header[i] for i in keep], [[row[i] for i in keep] for row in rows])
    return lines + (["   (rows and columns are tokens: the page draws lines between them too)"] if view.lines else [])


def bars_lines(view: View) -> list[str]:
    """A bars view: each label's value, largest first, with a bar."""
    pairs = sorted(zip(view.labels, view.values, strict=True), key=lambda pair: -(pair[1] or 0))
    top = max((abs(v) for _, v in pairs if v is not None), default=0) or 1
    rows = [[label, number(value), "#" * round(30 * abs(value or 0) / top)] for label, value in pairs]
    return ([f"   value: {view.label}"] if view.label else []) + table(["label", "value", ""], rows)


def tree_lines(view: View) -> list[str]:
    """A tree view: how many nodes the search kept, ended and dropped, then its finished hypotheses ranked."""
    counts: dict[str, int] = {}
    for node in view.nodes:
        counts[str(node.get("status"))] = counts.get(str(node.get("status")), 0) + 1
    lines = [f"   {len(view.nodes)} nodes: " + ", ".join(f"{n} {status}" for status, n in counts.items())]
    lines += [f"   score: {view.label}"] if view.label else []
    finished = sorted(view.finished, key=lambda f: f.get("rank", 0))
    return lines + table(["rank", "score", "normalized", "text"],
                         [[str(f.get("rank", "")), number(f.get("score")), number(f.get("normalized")),
                           repr(str(f.get("text", " ".join(map(str, f.get("tokens", []))))))] for f in finished])
