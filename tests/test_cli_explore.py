"""`seqlab explore`: with --text, each run's views of the text summarised on standard output and their JSON
written (--json) as the Python API computes them; without, the server started (a real process on a real socket)
with its Explore tab's URL printed and opened (--open, through $BROWSER); every bad input one line and exit 2."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from conftest import run_seqlab, viewless_run


@pytest.fixture(scope="module")
def viewless(tmp_path_factory):
    with viewless_run(tmp_path_factory.mktemp("viewless")) as run:
        yield run


def test_cli_explore_refuses_each_bad_input_in_one_line(serve_runs, viewless, tmp_path, capsys, monkeypatch):
    lm = serve_runs["lm"]
    other = tmp_path / "notes.json"
    other.write_text('{"mine": true}\n')
    cases = [
        ([tmp_path / "nope", "--text", "To be"], "is not a directory"),
        ([viewless, "--text", "seven seven"], "is a regressor, which has no views to explore"),
        ([viewless], "is a regressor, which has no views to explore"),
        ([lm, "--text", "To be", "--views", "next-token,no-such-view"], "no view 'no-such-view'"),
        ([lm, "--text", "To be", "--views", ","], "--views names no view"),
        ([lm, "--text", "To be", "--top-k", "51"], "argument --top-k: must be in [1, 50], got 51"),
        ([lm, "--text", "To be", "--temperature", "nan"], "argument --temperature"),
        ([lm, "--text", "To be", "--strategy", "nucleus"], "argument --strategy: invalid choice"),
        ([lm, "--text", "To be", "--json", tmp_path / "a-file" / "x.json"], "cannot write --json"),
        ([lm, "--text", "To be", "--json", other], "is not an explanation seqlab wrote"),
        ([lm, "--text", "  \n"], "--text is empty"),
        ([lm, "--text", "x" * 5001], "at most 5,000"),
        ([lm, "--text", "To be", "--port", "9"], "--port is an option of the server"),
        ([lm, "--top-k", "3"], "--top-k goes with --text"),
        ([lm, "--json", "-"], "--json goes with --text"),
    ]
    (tmp_path / "a-file").write_text("a file where a folder is meant")
    for argv, expect in cases:
        code, err = run_seqlab(["explore", *argv], capsys)
        assert code == 2 and "Traceback" not in err, (argv, err)
        assert err.count("\n") == 1 and expect in err, (argv, err)
    assert other.read_text() == '{"mine": true}\n'                      # what the user had is kept
    monkeypatch.setattr(sys, "stdin", open(os.devnull))
    code, err = run_seqlab(["explore", lm, "--text", "-"], capsys)
    assert code == 2 and "standard input held nothing" in err


def test_cli_explore_text_prints_each_view_and_writes_the_python_apis_json(serve_runs, tmp_path, capsys,
                                                                           monkeypatch):
    """Every family's run: the summary names each view the Python API computes, with the table, panels, bars or
    ranked hypotheses of its kind; --json holds `seqlab.load(run).explain(text)`'s JSON (but the seconds), one
    object for a run, a list for several, and replaces only an explanation; --text - reads standard input."""
    import seqlab
    from seqlab.cli.main import main

    texts = {"lm": "ROMEO: to be", "ner": "John lives in Paris .", "sentiment": "a warm and funny film",
             "de-en": "der hund sieht ."}
    for name, run in serve_runs.items():
        out = tmp_path / f"{name}.json"
        assert main(["explore", str(run), "--text", texts[name], "--top-k", "3", "--units", "4", "--json",
                     str(out)]) == 0
        said = capsys.readouterr().out
        own = seqlab.load(run).explain(texts[name], top_k=3, units=4)
        assert own.views, name
        for view in own.views:
            assert f"== {view.title} ({view.name}, {view.kind})" in said, (name, view.name, said)
        header = {"tokens": "token", "matrix": "rows x cols", "bars": "value", "tree": "rank"}
        assert all(header[view.kind] in said for view in own.views)
        written = json.loads(out.read_text())
        expected = json.loads(json.dumps(own.to_json()))
        written.pop("seconds"), expected.pop("seconds")
        assert written == expected, name
    both = tmp_path / "lm.json"                                # an earlier explanation: replaced
    assert main(["explore", str(serve_runs["lm"]), str(serve_runs["sentiment"]), "--text", "To be", "--json",
                 str(both)]) == 0
    assert [e["model"] for e in json.loads(both.read_text())] == ["lm", "sentiment"]
    capsys.readouterr()
    (tmp_path / "stdin.txt").write_text("a warm film\n")
    monkeypatch.setattr(sys, "stdin", open(tmp_path / "stdin.txt"))
    assert main(["explore", str(serve_runs["sentiment"]), "--text", "-", "--json", "-"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["model"] == "sentiment" and printed["views"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_cli_explore_serves_the_page_prints_and_opens_the_explore_tab(serve_runs, tmp_path):
    """A real process: its first line is the Explore tab's URL, which $BROWSER is given once the server
    listens; the server keeps seqlab serve's rules (SEQLAB_API_KEY: /v1 needs the key) and answers the explorer's
    endpoints; Ctrl-C stops it."""
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.py"
    browser.write_text(f"import sys\nopen({str(opened)!r}, 'w').write(sys.argv[1])\n")
    port = free_port()
    env = {**os.environ, "BROWSER": f"{sys.executable} {browser} %s", "SEQLAB_API_KEY": "s3cret",
           "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-m", "seqlab", "explore", str(serve_runs["lm"]), "--port", str(port),
                                "--open", "--threads", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env)
    try:
        url = process.stdout.readline().strip()
        assert url == f"http://127.0.0.1:{port}/#explore", (url, process.stderr.read() if process.poll() else "")
        deadline = time.time() + 60
        while not (opened.exists() and opened.read_text()) and time.time() < deadline:
            time.sleep(0.1)
        assert opened.read_text() == url
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/v1/explain/lm", timeout=30).status_code == 401
        listed = httpx.get(f"{base}/v1/explain/lm", headers={"authorization": "Bearer s3cret"}, timeout=60)
        assert listed.status_code == 200 and listed.json()["views"], listed.text
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    assert "Traceback" not in err and f"seqlab: exploring lm (lm): {url}" in err, err


def test_cli_explore_refuses_an_address_in_use_in_one_line(serve_runs, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        code, err = run_seqlab(["explore", serve_runs["lm"], "--port", taken.getsockname()[1]], capsys)
    assert code == 2 and "cannot listen on 127.0.0.1" in err and err.count("\n") == 1, err


def test_cli_explore_url_names_this_machine_for_every_interface():
    from seqlab.cli.explore import explore_url

    assert explore_url("0.0.0.0", 8000) == "http://127.0.0.1:8000/#explore"
    assert explore_url("::", 80) == "http://[::1]:80/#explore"
    assert explore_url("localhost", 9) == "http://localhost:9/#explore"
