"""A fifth family from outside seqlab (tests/families/regressor: sequence regression, a text -> the mean of the
digits it spells, trained with the squared error) is trained, evaluated, exported to ONNX and served, on PyTorch
and on onnxruntime, through the CLI and the HTTP API, with nothing in src/seqlab/ written for it: it registers as
a third-party package would, through the entry-point group `seqlab.families` (a .dist-info folder on the path),
and in a process through `seqlab.registry.register`. The proof that the wall between the families and the shared
modules holds."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
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
    done = seqlab_cli(env, "train", "regressor", "--train", folder / "train.tsv", "--dev", folder / "dev.tsv",
                      "--test", folder / "test.tsv", "--lr", "0.05", "--max-steps", "120", "--eval-every", "60",
                      "--no-progress", "--output", run)
    assert "saved to" in done.stderr and "seqlab regress" in done.stderr, done.stderr
    return {"env": env, "run": run, "data": folder, "site": folder / "site"}


def seqlab_cli(env: dict, *argv, code: int = 0, stdin: str | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "seqlab", *map(str, argv)], capture_output=True, text=True,
                          env=env, input=stdin, timeout=120)
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
def test_fifth_family_trains_evaluates_and_exports_through_the_cli(setup):
    env, run, data = setup["env"], setup["run"], setup["data"]
    config = json.loads((run / "config.json").read_text())
    assert config["task"] == "regressor" and config["model"]["vocab_size"] == 15
    assert (run / "MODEL_CARD.md").exists() and "| test | mse |" in (run / "MODEL_CARD.md").read_text()
    figures = json.loads(seqlab_cli(env, "evaluate", run, data / "test.tsv", "--json").stdout)
    assert figures["items"] == 30 and figures["mse"] < 1.0          # the variance of the means is ~3.5
    values = [float(v) for v in seqlab_cli(env, "regress", run, stdin="nine nine\none\n").stdout.split()]
    assert values[0] > 7.0 and values[1] < 3.0
    export = data / "export"
    said = seqlab_cli(env, "export", run, "--format", "onnx", "--output", export).stdout
    assert "exported the mean regressor" in said
    manifest = json.loads((export / "manifest.json").read_text())
    assert manifest["task"] == "regressor" and manifest["graphs"]["regressor"]["outputs"] == ["values"]
    assert (export / "README.md").exists() and (export / "seqlab" / "vocab.json").exists()


def serve(env: dict, runtime: str, folder: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    return subprocess.Popen([sys.executable, "-m", "seqlab", "serve", "--runtime", runtime, str(folder), "--port",
                             str(port)], stderr=subprocess.PIPE, text=True, env=env), port


@pytest.mark.slow
def test_fifth_family_is_served_over_http_on_pytorch_and_onnxruntime(setup):
    """Both servers at once (each a real process on a real socket): POST /v1/regress answers the same numbers on
    the run and on its export, GET /v1/models lists the family's endpoint, and another family's endpoint is
    refused with the family's own."""
    import httpx

    env, run, export = setup["env"], setup["run"], setup["data"] / "export"
    if not (export / "manifest.json").exists():
        seqlab_cli(env, "export", run, "--format", "onnx", "--output", export)
    servers = {"torch": serve(env, "torch", run), "onnx": serve(env, "onnx", export)}
    answers = {}
    try:
        for runtime, (process, port) in servers.items():
            url, deadline = f"http://127.0.0.1:{port}", time.time() + 90
            while time.time() < deadline and process.poll() is None:
                try:
                    httpx.get(f"{url}/healthz", timeout=1)
                    break
                except httpx.HTTPError:
                    time.sleep(0.2)
            model = run.name if runtime == "torch" else export.name
            answer = httpx.post(f"{url}/v1/regress", json={"model": model, "text": ["nine nine", "one"]}, timeout=30)
            assert answer.status_code == 200, answer.text
            answers[runtime] = answer.json()["values"]
            listed = httpx.get(f"{url}/v1/models").json()["data"][0]
            assert listed["task"] == "regressor" and listed["endpoints"] == ["/v1/regress"]
            wrong = httpx.post(f"{url}/v1/classify", json={"model": model, "text": "nine"})
            assert wrong.status_code == 400 and "POST /v1/regress" in wrong.json()["error"]
    finally:
        for process, _ in servers.values():
            process.send_signal(signal.SIGINT)
        errors = {runtime: process.communicate(timeout=30)[1] for runtime, (process, _) in servers.items()}
    assert answers["torch"] == pytest.approx(answers["onnx"], abs=1e-4)
    assert answers["torch"][0] > 7.0
    for err in errors.values():
        assert "(regressor) on http://127.0.0.1:" in err and "Traceback" not in err, err


@pytest.mark.slow
def test_fifth_family_registers_in_a_process_and_leaves_again(setup):
    """`registered(FAMILY)`: the registry finds it by name and a run by its directory, and `seqlab.load` loads
    it; after the block it is gone. A second family of a taken name, something that is not a Family, and
    removing a built-in family are refused in one line each."""
    sys.path.insert(0, str(FAMILIES_DIR))
    try:
        import regressor

        with registry.registered(regressor.FAMILY):
            assert registry.family("regressor") is regressor.FAMILY is registry.run_family(setup["run"])
            trained = registry.load(setup["run"])
            assert type(trained).__name__ == "TrainedRegressor" and trained.predict("nine nine") > 7.0
            with pytest.raises(SeqlabError, match="registered already"):
                registry.register(regressor.FAMILY)
        assert "regressor" not in registry.FAMILIES
        with pytest.raises(SeqlabError, match="unknown task 'regressor'"):
            registry.family("regressor")
    finally:
        sys.path.remove(str(FAMILIES_DIR))
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
