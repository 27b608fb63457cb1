"""`seqlab serve --runtime onnx EXPORT` at start-up: every way an export folder can be damaged (a graph truncated,
garbage, empty, missing, a folder or a FIFO in its place, another graph than the manifest describes; no
manifest.json, or a damaged one; a vocabulary, label or config file empty, not JSON, or without what the family
reads) is one line on stderr naming the file and what is wrong, and exit status 2, never a traceback; a FIFO is
refused without being opened, so nothing hangs. The checks are `seqlab.export.manifest.check_files`,
`seqlab.export.session.open_graph` and `seqlab.export.protobuf`."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("onnxruntime", reason="serving an export needs onnxruntime (pip install 'seqlab[export]')")

import seqlab  # noqa: E402
from seqlab.cli.main import main  # noqa: E402
from seqlab.export.protobuf import model_problem  # noqa: E402


def free_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


def edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def replace_with_folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


# case -> (what is done to a copy of the export, the file the message names, what it says)
DAMAGE = {
    "truncated graph": (lambda d: (d / "classifier.onnx").write_bytes((d / "classifier.onnx").read_bytes()[:3000]),
                        "classifier.onnx", "is truncated: its 3,000 bytes end inside the ONNX model"),
    "garbage graph": (lambda d: (d / "classifier.onnx").write_bytes(bytes(range(256)) * 20),
                      "classifier.onnx", "is not an ONNX graph"),
    "empty graph": (lambda d: (d / "classifier.onnx").write_bytes(b""), "classifier.onnx",
                    "is empty, not an ONNX graph"),
    "missing graph": (lambda d: (d / "classifier.onnx").unlink(), "classifier.onnx",
                      "is missing: the export's classifier graph (manifest.json names it) is not there"),
    "folder for the graph": (lambda d: replace_with_folder(d / "classifier.onnx"), "classifier.onnx",
                             "is a folder, not a file"),
    "another graph": (lambda d: edit_json(d / "manifest.json", lambda m: m["graphs"]["classifier"].update(
        inputs=["input_ids"])), "classifier.onnx", "is not the graph manifest.json describes: its inputs are"),
    "no manifest": (lambda d: (d / "manifest.json").unlink(), "", "is not a seqlab export: it has no manifest.json (it "
                    "holds ONNX graphs, but not the manifest that names them"),
    "manifest not JSON": (lambda d: (d / "manifest.json").write_text("{"), "manifest.json", "is damaged ("),
    "manifest a list": (lambda d: (d / "manifest.json").write_text("[]"), "manifest.json",
                        "is damaged (it holds no JSON object)"),
    "folder for the manifest": (lambda d: replace_with_folder(d / "manifest.json"), "manifest.json",
                                "is a folder, not a file"),
    "empty vocabulary": (lambda d: (d / "seqlab" / "vocab.json").write_text(""), "seqlab/vocab.json", "is empty"),
    "vocabulary not JSON": (lambda d: (d / "seqlab" / "vocab.json").write_text('{"words": ['), "seqlab/vocab.json:1",
                            "is not valid JSON"),
    "vocabulary a list": (lambda d: (d / "seqlab" / "vocab.json").write_text("[]"), "seqlab/vocab.json",
                          "is damaged (it holds no JSON object)"),
    "missing vocabulary": (lambda d: (d / "seqlab" / "vocab.json").unlink(), "seqlab/vocab.json",
                           "is missing (manifest.json lists it): the export is incomplete"),
    "labels without labels": (lambda d: (d / "seqlab" / "labels.json").write_text("{}"), "seqlab",
                              "labels.json or features.json is damaged ('labels')"),
    "missing config": (lambda d: (d / "config.json").unlink(), "config.json", "is missing"),
    "config without data": (lambda d: edit_json(d / "config.json", lambda c: c.pop("data")), "",
                            "is damaged: its config.json or the run's files (seqlab/) lack what a classifier needs"),
}


@pytest.fixture(autouse=True)
def no_serving(monkeypatch):
    """An export that loads despite its damage makes `main` return 0 at once, not serve until interrupted."""
    monkeypatch.setattr("seqlab.serve.server.serve", lambda *args, **kwargs: None)


@pytest.mark.parametrize("case", DAMAGE)
def test_serve_onnx_refuses_a_damaged_export_in_one_line(classifier_export, tmp_path, capsys, case):
    damage, file, message = DAMAGE[case]
    export = Path(shutil.copytree(classifier_export, tmp_path / "sentiment"))
    damage(export)
    assert main(["serve", "--runtime", "onnx", str(export), "--port", free_port()]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("seqlab: error: "), err
    named = export / file if file else export
    assert (f"{named} " in err or f"{named}: " in err) and message in err, err
    assert "export the run again" in err and "retrain" not in err, err


@pytest.mark.parametrize("where", ["nowhere", "a file"])
def test_serve_onnx_refuses_a_path_that_is_no_folder(tmp_path, capsys, where):
    path = tmp_path / where
    if where == "a file":
        path.write_text("x")
    assert main(["serve", "--runtime", "onnx", str(path), "--port", free_port()]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"{path} {'does not exist' if where == 'nowhere' else 'is a file, not an export directory'}" in err


def test_serve_onnx_refuses_a_run_directory_by_what_it_is(classifier_export, capsys):
    run = classifier_export.parent / "run"
    assert main(["serve", "--runtime", "onnx", str(run), "--port", free_port()]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{run} is a run directory, not an ONNX export" in err


@pytest.mark.parametrize("fifo", ["classifier.onnx", "manifest.json", "seqlab/vocab.json", "config.json"])
def test_serve_onnx_refuses_a_fifo_without_opening_it(classifier_export, tmp_path, fifo):
    """A FIFO where a file belongs would block the first read until a writer came: a real process must answer
    at once (the test's timeout is what a hang would hit)."""
    export = Path(shutil.copytree(classifier_export, tmp_path / "sentiment"))
    (export / fifo).unlink()
    os.mkfifo(export / fifo)
    env = {**os.environ, "PYTHONPATH": str(Path(seqlab.__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-m", "seqlab", "serve", "--runtime", "onnx", str(export), "--port",
                           free_port()], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"{export / fifo} is a FIFO (named pipe), not a file" in done.stderr


def test_export_protobuf_tells_truncated_from_foreign_bytes(classifier_export):
    graph = (classifier_export / "classifier.onnx").read_bytes()
    assert model_problem(graph) is None
    for cut in (1, 100, len(graph) // 2, len(graph) - 1):
        assert model_problem(graph[:cut]).startswith("is truncated"), cut
    for foreign in (b"PK\x03\x04" + graph, b'{"json": true}', b"\x00" * 64, graph[:2] + b"\xff" * 200):
        assert model_problem(foreign).startswith("is not an ONNX graph"), foreign[:8]
    assert model_problem(graph[:2]) == "is not an ONNX graph: it holds no graph"      # ir_version alone
