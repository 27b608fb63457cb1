"""seqlab installed without PyTorch, as the container that serves ONNX exports is (the Dockerfile's onnx stage:
`pip install --no-deps` of the seqlab wheel, then numpy, tokenizers, pyyaml, fastapi, uvicorn and onnxruntime):
`seqlab --help` and `--version` work, `seqlab serve --runtime onnx EXPORT` starts and answers on a real socket,
and every command that needs PyTorch is refused in one line that says so.

Each test runs `python -m seqlab` in a fresh process whose imports cannot find the packages that stage leaves
out (a sitecustomize.py on PYTHONPATH takes them from the path finder, so `import torch` raises
ModuleNotFoundError and `importlib.util.find_spec("torch")` is None, as where they were never installed). Which
packages those are is read from pyproject.toml's dependencies and the Dockerfile's onnx stage, so the test
follows them."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("onnxruntime", reason="serving an export needs onnxruntime (pip install 'seqlab[export]')")

try:
    import tomllib
except ModuleNotFoundError:                # Python 3.10
    tomllib = pytest.importorskip("tomli")

import seqlab  # noqa: E402
from seqlab.cli.main import LAST_COMMANDS, build_parser, torch_commands  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODULES = {"pyyaml": "yaml", "rouge-score": "rouge_score"}      # a distribution -> the module it installs

HIDE = """
import importlib.machinery, sys

HIDDEN = set({hidden!r})


class WithoutThem(importlib.machinery.PathFinder):
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            return None
        return importlib.machinery.PathFinder.find_spec(name, path, target)


sys.meta_path[sys.meta_path.index(importlib.machinery.PathFinder)] = WithoutThem
"""


def requirement_names(requirements) -> set[str]:
    return {re.match(r"[A-Za-z0-9._-]+", r).group().lower() for r in requirements}


def left_out() -> set[str]:
    """The modules of seqlab's dependencies (and its export extra) that the Dockerfile's onnx stage does not
    install."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = requirement_names(project["dependencies"]) | requirement_names(project["optional-dependencies"]["export"])
    stage = (ROOT / "Dockerfile").read_text().split("AS onnx", 1)[1].split("\nFROM ", 1)[0]
    installed = requirement_names(re.findall(r'"([A-Za-z0-9._-]+(?:\[[^\]]*\])?[<>=!~][^"]*)"', stage))
    return {MODULES.get(name, name.replace("-", "_")) for name in wanted - installed}


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    """The environment of a process that cannot import what the onnx stage leaves out."""
    hidden = left_out()
    assert {"torch", "safetensors", "tqdm", "matplotlib", "scipy", "onnx"} <= hidden
    assert not hidden & {"numpy", "tokenizers", "yaml", "fastapi", "uvicorn", "onnxruntime"}
    folder = tmp_path_factory.mktemp("without-torch")
    (folder / "sitecustomize.py").write_text(HIDE.format(hidden=sorted(hidden)))
    source = str(Path(seqlab.__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), source]), "OMP_NUM_THREADS": "1"}


def seqlab_without_torch(env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "seqlab", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=120)


def test_cli_without_torch_cannot_import_it(env):
    done = subprocess.run([sys.executable, "-c", "import importlib.util, seqlab.cli; "
                           "print(importlib.util.find_spec('torch')); import torch"], capture_output=True, text=True,
                          env=env, timeout=60)
    assert done.stdout.strip() == "None" and "No module named 'torch'" in done.stderr


def test_cli_without_torch_prints_help_and_version(env):
    done = seqlab_without_torch(env, "--version")
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, f"seqlab {seqlab.__version__}", "")
    done = seqlab_without_torch(env, "--help")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert "PyTorch is not installed here (pip install torch)" in " ".join(done.stdout.split())
    for command in torch_commands():
        assert re.search(rf"^\s+{command}\s+\(needs PyTorch\)$", done.stdout, re.M), command
    assert re.search(r"^\s+serve\s+serve trained models", done.stdout, re.M)
    done = seqlab_without_torch(env, "serve", "--help")
    assert done.returncode == 0 and "--runtime {torch,onnx}" in done.stdout


@pytest.mark.parametrize("args", [["train", "lm", "--train", "x.txt"], ["generate", "RUN", "--prompt", "a"],
                                  ["export", "RUN", "--format", "onnx"], ["train", "--help"], ["serve", "RUN"]])
def test_cli_without_torch_refuses_what_needs_it_in_one_line(env, args):
    done = seqlab_without_torch(env, *args)
    assert done.returncode == 2 and done.stdout == "", done.stdout
    assert done.stderr.startswith(f"seqlab: error: seqlab {args[0]} needs PyTorch: pip install torch") and \
        done.stderr.count("\n") == 1, done.stderr
    assert "seqlab serve --runtime onnx EXPORT" in done.stderr


def test_cli_without_torch_still_refuses_a_mistyped_command(env):
    done = seqlab_without_torch(env, "trian")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "invalid choice: 'trian'" in done.stderr


def test_cli_without_torch_lists_every_command_of_the_whole_parser():
    commands = next(a for a in build_parser()._actions if isinstance(a.choices, dict)).choices
    assert list(commands) == [*torch_commands()[:-len(LAST_COMMANDS)], "serve", *LAST_COMMANDS]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def ask(url: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    with urllib.request.urlopen(urllib.request.Request(url, data, {"content-type": "application/json"}),
                                timeout=30) as answer:
        return json.loads(answer.read())


def test_serve_onnx_without_torch_answers_on_a_real_socket(env, classifier_export):
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "seqlab", "serve", "--runtime", "onnx", str(classifier_export),
                                "--port", str(port), "--threads", "1"], stderr=subprocess.PIPE, text=True, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline, health = time.time() + 60, None
        while time.time() < deadline and process.poll() is None:
            try:
                health = ask(f"{url}/healthz")
                break
            except OSError:
                time.sleep(0.2)
        assert health == {"status": "ok", "models": 1}
        answer = ask(f"{url}/v1/classify", {"model": "sentiment", "text": "a fine film"})
        assert answer["results"][0]["label"] in ("pos", "neg")
        model = ask(f"{url}/v1/models")["data"][0]
        manifest = json.loads((classifier_export / "manifest.json").read_text())
        assert model["parameters"] == manifest["parameters"] > 0                # counted without onnx or torch
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    assert f"serving sentiment (classifier) on {url}" in err and "Traceback" not in err, err


def test_serve_onnx_without_torch_refuses_a_damaged_export_in_one_line(env, classifier_export, tmp_path):
    export = Path(shutil.copytree(classifier_export, tmp_path / "sentiment"))
    graph = export / "classifier.onnx"
    graph.write_bytes(graph.read_bytes()[:2000])
    done = seqlab_without_torch(env, "serve", "--runtime", "onnx", export, "--port", free_port())
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"{graph} is truncated: its 2,000 bytes end inside the ONNX model" in done.stderr
