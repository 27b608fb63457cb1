"""A fifth family from outside seqlab (tests/families/regressor: sequence regression, a text -> the mean of the
digits it spells, trained with the squared error) is trained, evaluated, exported to ONNX and served, on PyTorch
and on onnxruntime, through the CLI and the HTTP API, with nothing in src/seqlab/ written for it: it registers as
a third-party package would, through the entry-point group `seqlab.families` (a .dist-info folder on the path),
and in a process through `seqlab.registry.register`. The proof that the wall between the families and the shared
modules holds, in the default suite (~10 s on two cores).

Where the time goes: a `seqlab` process spends ~3 s importing PyTorch before it reads its options, and training
spends ~2 s more on the optimizer's and the plots' imports (its 80 steps take ~0.2 s). So `seqlab train`,
`seqlab evaluate` and `seqlab export` are each a process, as a user runs them (the last two at once), and so is
`seqlab serve --runtime onnx` (it imports no PyTorch: up in ~1.5 s); `seqlab regress` and the server of the run
on PyTorch run in this process, which has PyTorch already, with the family registered here.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("onnxruntime", reason="serving an export needs onnxruntime (pip install 'seqlab[export]')")
pytest.importorskip("onnx", reason="seqlab export needs onnx (pip install 'seqlab[export]')")

from seqlab import registry  # noqa: E402
from seqlab.errors import SeqlabError  # noqa: E402

FAMILIES_DIR = Path(__file__).resolve().parent / "families"
WORDS = "zero one two three four five six seven eight nine".split()


def write_items(path: Path, count: int, seed: int) -> None:
    """`count` lines 'MEAN<TAB>words', the words spelling 1-6 digits and MEAN their mean."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as out:
        for _ in range(count):
            digits = [rng.randrange(10) for _ in range(rng.randint(1, 6))]
            out.write(f"{sum(digits) / len(digits):.4f}\t{' '.join(WORDS[d] for d in digits)}\n")


def install(site: Path, value: str = "regressor:FAMILY") -> None:
    """What `pip install` of a package declaring the family would leave on the path: its .dist-info folder,
    whose entry_points.txt names the family in the group seqlab.families."""
    info = site / "seqlab_regressor-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: seqlab-regressor\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[seqlab.families]\nregressor = {value}\n")


@contextlib.contextmanager
def registered_here():
    """The family registered in this process, as a script would do it: tests/families on the path, then
    `registry.registered(regressor.FAMILY)` (removed again after the block)."""
    sys.path.insert(0, str(FAMILIES_DIR))
    try:
        import regressor

        with registry.registered(regressor.FAMILY):
            yield regressor
    finally:
        sys.path.remove(str(FAMILIES_DIR))


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """The installed family, its data, the environment of the CLI's processes, and a run trained by
    `seqlab train regressor`: {"env", "run", "data", "site"}."""
    folder = tmp_path_factory.mktemp("fifth")
    install(folder / "site")
    for name, count, seed in (("train", 160, 1), ("dev", 30, 2), ("test", 30, 3)):
        write_items(folder / f"{name}.tsv", count, seed)
    path = os.pathsep.join([str(folder / "site"), str(FAMILIES_DIR), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}
    run = folder / "run"
    done = finish(start(env, "train", "regressor", "--train", folder / "train.tsv", "--dev", folder / "dev.tsv",
                        "--test", folder / "test.tsv", "--lr", "0.05", "--max-steps", "80", "--eval-every", "80",
                        "--no-progress", "--output", run))
    assert "saved to" in done.stderr and "seqlab regress" in done.stderr, done.stderr
    return {"env": env, "run": run, "data": folder, "site": folder / "site"}


@pytest.fixture(scope="module")
def commands(setup):
    """`seqlab evaluate` and `seqlab export` of the trained run, each a process (the family found through its
    entry point), started at once, and meanwhile `seqlab regress` by the command line in this process, the
    family registered here: {command: its finished process}."""
    env, run, data = setup["env"], setup["run"], setup["data"]
    started = {"evaluate": start(env, "evaluate", run, data / "test.tsv", "--json"),
               "export": start(env, "export", run, "--format", "onnx", "--output", data / "export")}
    texts = data / "texts.txt"
    texts.write_text("nine nine\none\n")
    done = {"regress": seqlab_here("regress", run, texts)}
    return done | {command: finish(process) for command, process in started.items()}


def seqlab_here(*argv) -> subprocess.CompletedProcess:
    """`seqlab ARGV` by seqlab's command line (`seqlab.cli.main.main`) in this process, with the family
    registered here: the command line built after `registry.register` has the family's commands."""
    from seqlab.cli.main import build_parser, main

    out, err = io.StringIO(), io.StringIO()
    with registered_here(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        build_parser.cache_clear()              # built (and cached) again with the family, and again without it
        try:
            code = main([str(a) for a in argv])
        finally:
            build_parser.cache_clear()
    assert code == 0 and "Traceback" not in err.getvalue(), err.getvalue()
    return subprocess.CompletedProcess(["seqlab", *argv], code, out.getvalue(), err.getvalue())


def start(env: dict, *argv) -> subprocess.Popen:
    """`seqlab ARGV` started in a process of its own."""
    return subprocess.Popen([sys.executable, "-m", "seqlab", *map(str, argv)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def finish(process: subprocess.Popen) -> subprocess.CompletedProcess:
    """`process` waited for: exit status 0, no traceback."""
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert "Traceback" not in err, err
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_fifth_family_trains_evaluates_and_exports_through_the_cli(setup, commands):
    run, export = setup["run"], setup["data"] / "export"
    config = json.loads((run / "config.json").read_text())
    assert config["task"] == "regressor" and config["model"]["vocab_size"] == 15
    assert (run / "MODEL_CARD.md").exists() and "| test | mse |" in (run / "MODEL_CARD.md").read_text()
    figures = json.loads(commands["evaluate"].stdout)
    assert figures["items"] == 30 and figures["mse"] < 1.0          # the variance of the means is ~3.5
    values = [float(v) for v in commands["regress"].stdout.split()]
    assert values[0] > 7.0 and values[1] < 3.0
    assert "exported the mean regressor" in commands["export"].stdout
    manifest = json.loads((export / "manifest.json").read_text())
    assert manifest["task"] == "regressor" and manifest["graphs"]["regressor"]["outputs"] == ["values"]
    assert (export / "README.md").exists() and (export / "seqlab" / "vocab.json").exists()


def ask(url: str, model: str) -> list[float]:
    """A server's answers of the family: POST /v1/regress's values (checked below), GET /v1/models listing the
    family's endpoint, and another family's endpoint refused with the family's own."""
    import httpx

    answer = httpx.post(f"{url}/v1/regress", json={"model": model, "text": ["nine nine", "one"]}, timeout=30)
    assert answer.status_code == 200, answer.text
    listed = httpx.get(f"{url}/v1/models").json()["data"][0]
    assert listed["task"] == "regressor" and listed["endpoints"] == ["/v1/regress"]
    wrong = httpx.post(f"{url}/v1/classify", json={"model": model, "text": "nine"})
    assert wrong.status_code == 400 and "POST /v1/regress" in wrong.json()["error"]
    return answer.json()["values"]


@contextlib.contextmanager
def served_here(run: Path):
    """`run` served on a real socket by seqlab's server (`seqlab.serve.server.server`, the one `seqlab serve`
    runs) on a thread of this process, the family registered here: the server's URL."""
    from seqlab.serve.app import create_app
    from seqlab.serve.limits import ServeLimits
    from seqlab.serve.server import server

    with registered_here():
        limits, port = ServeLimits(), free_port()
        served = server(create_app([run], limits), "127.0.0.1", port, limits)
        thread = threading.Thread(target=served.run, daemon=True)
        thread.start()
        try:
            deadline = time.time() + 30
            while not served.started and thread.is_alive() and time.time() < deadline:
                time.sleep(0.02)
            yield f"http://127.0.0.1:{port}"
        finally:
            served.should_exit = True
            thread.join(timeout=30)


def test_fifth_family_is_served_over_http_on_pytorch_and_onnxruntime(setup, commands):
    """Both servers at once, each on a real socket: the export by a `seqlab serve --runtime onnx` process (the
    family found through its entry point), the run on PyTorch by the same server in this process (a process
    would import PyTorch again: ~4 s). POST /v1/regress answers the same numbers on the run and on its
    export."""
    import httpx

    run, export, port = setup["run"], setup["data"] / "export", free_port()
    process = start(setup["env"], "serve", "--runtime", "onnx", export, "--port", port)
    answers = {}
    try:
        with served_here(run) as url:
            answers["torch"] = ask(url, run.name)
        url, deadline = f"http://127.0.0.1:{port}", time.time() + 90
        while process.poll() is None and time.time() < deadline:
            try:
                httpx.get(f"{url}/healthz", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        answers["onnx"] = ask(url, export.name)
    finally:
        process.send_signal(signal.SIGINT)
        err = process.communicate(timeout=30)[1]
    assert answers["torch"] == pytest.approx(answers["onnx"], abs=1e-4)
    assert answers["torch"][0] > 7.0
    assert "serving export (regressor) on http://127.0.0.1:" in err and "Traceback" not in err, err


def test_fifth_family_registers_in_a_process_and_leaves_again(setup):
    """`registered(FAMILY)`: the registry finds it by name and a run by its directory, and `seqlab.load` loads
    it; after the block it is gone. A second family of a taken name, something that is not a Family, and
    removing a built-in family are refused in one line each."""
    with registered_here() as regressor:
        assert registry.family("regressor") is regressor.FAMILY is registry.run_family(setup["run"])
        trained = registry.load(setup["run"])
        assert type(trained).__name__ == "TrainedRegressor" and trained.predict("nine nine") > 7.0
        with pytest.raises(SeqlabError, match="registered already"):
            registry.register(regressor.FAMILY)
    assert "regressor" not in registry.FAMILIES and str(FAMILIES_DIR) not in sys.path
    with pytest.raises(SeqlabError, match="unknown task 'regressor'"):
        registry.family("regressor")
    with pytest.raises(SeqlabError, match="is a seqlab.contract.Family, not dict"):
        registry.register({"name": "x"})
    with pytest.raises(SeqlabError, match="cannot be removed"):
        registry.unregister("lm")


def test_fifth_family_that_cannot_load_is_left_out_with_one_warning(tmp_path, monkeypatch, capsys):
    """An installed family whose module is not there: one warning line, and seqlab's own families stay."""
    install(tmp_path, "no_such_family_module:FAMILY")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = dict(registry.FAMILIES)
    registry.register_installed()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the family 'regressor' (no_such_family_module:FAMILY" in err
    assert "is left out: No module named 'no_such_family_module'" in err
    assert registry.FAMILIES == before
