"""Shared fixtures: tiny corpora and tiny configurations that train in a second."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

# Commands the tests start as subprocesses (the CLI, torchrun workers) use one thread each too: on two
# busy cores, PyTorch's default of one thread per core makes its threads wait on each other.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# The matrix-product peak that MFU is a share of is measured once for the session (about a second), not
# read from or written to the user's ~/.cache/seqlab (seqlab.training.flops).
os.environ.setdefault("SEQLAB_CACHE_DIR", tempfile.mkdtemp(prefix="seqlab-test-cache-"))

import pytest
import torch

from seqlab.families.lm.config import LMDataConfig, LMTrainConfig, LMTrainOptions
from seqlab.families.lm.model import LMConfig

FIXTURES = Path(__file__).parent / "fixtures"
TRAIN = FIXTURES / "shakespeare_train.txt"
VALID = FIXTURES / "shakespeare_valid.txt"
TEST = FIXTURES / "shakespeare_test.txt"
ARCHS = ("ffn", "rnn", "lstm", "gru", "transformer")


@pytest.fixture(autouse=True)
def _one_thread():
    """Tests are tiny: one thread each avoids oversubscribing the two CI cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tiny_config(output, arch: str = "lstm", tokenizer: str = "word", **train) -> LMTrainConfig:
    model = LMConfig(arch=arch, embedding_size=16, hidden_size=24, num_layers=2, dropout=0.1,
                     num_heads=2, context=16 if arch == "transformer" else 0)
    options = {"output": str(output), "max_steps": 8, "batch_size": 4, "seq_len": 8, "eval_every": 4,
               "log_every": 1, "progress": False, "lr": 3e-3, "warmup_steps": 2}
    options.update(train)
    return LMTrainConfig(LMDataConfig(train=str(TRAIN), valid=str(VALID), test=str(TEST), tokenizer=tokenizer),
                         model, LMTrainOptions(**options))


class Killed(Exception):
    """Stands for the process being killed: raised by `kill_after_evaluation`."""


def kill_after_evaluation(step: int):
    """A training callback that 'kills' the run once the evaluation (and checkpoint) of `step` is written."""
    def callback(event):
        if event["event"] == "evaluate" and event["step"] == step:
            raise Killed
    return callback


def train_serve_runs(folder: Path, lr: float | None = None) -> dict[str, Path]:
    """One tiny run of each task family under `folder` (a language model, an NER tagger, a sentiment classifier
    and a German-English translator), for the tests of `seqlab serve`: {name: run directory}. With `lr` the
    tagger, the classifier and the translator learn their data (0.05: every entity right), not just its shapes."""
    from seqlab.cli.main import main
    from seqlab.families.lm.pipeline import train_lm

    quiet, pairs = ["--no-progress", "--dropout", "0"], FIXTURES / "seq2seq"
    quiet += [] if lr is None else ["--lr", str(lr)]
    train_lm(tiny_config(folder / "lm", arch="transformer", tokenizer="char"))
    ner = str(FIXTURES / "ner.conll")
    assert main(["train", "tagger", "--train", ner, "--dev", ner, "--format", "conll", "--embedding-size", "8",
                 "--hidden-size", "8", "--max-steps", "30", "--output", str(folder / "ner"), *quiet]) == 0
    sentiment = str(FIXTURES / "classify" / "sentiment.tsv")
    assert main(["train", "classifier", "--train", sentiment, "--dev", sentiment, "--format", "tsv",
                 "--embedding-size", "8", "--hidden-size", "8", "--max-steps", "30", "--output",
                 str(folder / "sentiment"), *quiet]) == 0
    assert main(["train", "seq2seq", "--train-src", str(pairs / "train.src"), "--train-tgt", str(pairs / "train.tgt"),
                 "--dev-src", str(pairs / "dev.src"), "--dev-tgt", str(pairs / "dev.tgt"), "--arch", "gru",
                 "--attention", "dot", "--embedding-size", "16", "--hidden-size", "16", "--max-steps", "30",
                 "--output", str(folder / "de-en"), *quiet]) == 0
    return {name: folder / name for name in ("lm", "ner", "sentiment", "de-en")}


MULTIBYTE = "東京の café, naïve 😀 déjà vu\nROMEO: ô mon âme, 東京\n"     # characters of 2, 3 and 4 UTF-8 bytes


def bytes_lm_run(folder: Path) -> Path:
    """A tiny byte-level BPE transformer LM of few merges trained (hardly) on text of multi-byte characters, so that
    its pieces are mostly single bytes and what it generates often ends in half a character: the run directory."""
    import dataclasses

    from seqlab.families.lm.pipeline import train_lm

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "multibyte.txt").write_text(MULTIBYTE * 30, encoding="utf-8")
    config = tiny_config(folder / "bytes", "transformer", "bpe", max_steps=4)
    data = dataclasses.replace(config.data, train=str(folder / "multibyte.txt"), valid=str(folder / "multibyte.txt"),
                               test="", bpe_vocab_size=270)
    train_lm(dataclasses.replace(config, data=data))
    return folder / "bytes"


def unk_lm_run(folder: Path) -> Path:
    """A tiny word LM whose vocabulary keeps 12 words, so that <unk> is most of its training text and its most
    likely next token after anything (a search that did not block it would write it often): the run directory."""
    import dataclasses

    from seqlab.families.lm.pipeline import train_lm

    config = tiny_config(folder / "unk", "lstm", "word", max_steps=30, lr=1e-2)
    train_lm(dataclasses.replace(config, data=dataclasses.replace(config.data, max_vocab=12)))
    return folder / "unk"


@contextlib.contextmanager
def viewless_run(folder: Path):
    """A tiny run of a family without views (the tests' regressor, tests/families/regressor, registered for the
    block): its run directory, for the refusals of `seqlab explore` and /v1/explain."""
    import sys

    from seqlab import registry
    from seqlab.cli.main import build_parser, main

    sys.path.insert(0, str(FIXTURES.parent / "families"))
    try:
        import regressor

        with registry.registered(regressor.FAMILY):
            build_parser.cache_clear()                      # the parser with the family's commands, then without
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "items.tsv").write_text("".join(f"{i % 7}.0\t{' '.join(['seven'] * (i % 7 + 1))}\n"
                                                      for i in range(40)), encoding="utf-8")
            if not (folder / "run" / "model.safetensors").exists():
                assert main(["train", "regressor", "--train", str(folder / "items.tsv"), "--dev",
                             str(folder / "items.tsv"), "--max-steps", "4", "--no-progress", "--output",
                             str(folder / "run")]) == 0
            yield folder / "run"
    finally:
        build_parser.cache_clear()
        sys.path.remove(str(FIXTURES.parent / "families"))


@pytest.fixture(scope="session")
def serve_runs(tmp_path_factory) -> dict[str, Path]:
    """`train_serve_runs` once for the whole session: the serve tests that only read the runs share them."""
    return train_serve_runs(tmp_path_factory.mktemp("serve-runs"))


@pytest.fixture(scope="session")
def classifier_export(tmp_path_factory) -> Path:
    """A tiny classifier's ONNX export (`seqlab export RUN --format onnx`), for the tests of serving exports; its
    run directory is the export folder's sibling, `run`."""
    pytest.importorskip("onnxruntime", reason="serving an export needs onnxruntime (pip install 'seqlab[export]')")
    pytest.importorskip("onnx", reason="seqlab export needs onnx (pip install 'seqlab[export]')")
    from seqlab.cli.main import main
    from seqlab.export.onnx import export_onnx

    folder, sentiment = tmp_path_factory.mktemp("classifier-export"), str(FIXTURES / "classify" / "sentiment.tsv")
    assert main(["train", "classifier", "--train", sentiment, "--dev", sentiment, "--format", "tsv", "--embedding-size",
                 "8", "--hidden-size", "8", "--max-steps", "3", "--no-progress", "--output", str(folder / "run")]) == 0
    return export_onnx(folder / "run", folder / "sentiment").parent


def page_test_chromium() -> Path:
    """Debian's Chromium (SEQLAB_CHROMIUM names another) for a page test module, which is skipped without it or
    without Playwright (pip install -e '.[browser]')."""
    chromium = Path(os.environ.get("SEQLAB_CHROMIUM", "/usr/bin/chromium"))
    pytest.importorskip("playwright.sync_api", reason="the page tests need Playwright: pip install -e '.[browser]'")
    if not chromium.is_file():
        pytest.skip(f"the page tests need Chromium at {chromium}: apt-get install chromium (or set SEQLAB_CHROMIUM)",
                    allow_module_level=True)
    return chromium


def headless_chromium(executable: Path):
    """Chromium at `executable` (Debian's: no browser download) launched headless through Playwright, for the page
    tests' `browser` fixtures (yield from it)."""
    from playwright import sync_api

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(executable), args=["--no-sandbox"])
        yield browser
        browser.close()


def serving(app):
    """A real uvicorn server on 127.0.0.1 (a free port) in a thread: (server, base url)."""
    import socket
    import threading
    import time

    import uvicorn

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.time() + 10
    while not server.started and time.time() < deadline:
        time.sleep(0.02)
    return server, f"http://127.0.0.1:{port}"


def run_seqlab(argv, capsys) -> tuple[int, str]:
    """`seqlab ARGV` in this process: (exit status, stderr)."""
    from seqlab.cli.main import main

    try:
        code = main([str(a) for a in argv])
    except SystemExit as stop:
        code = stop.code
    return code, capsys.readouterr().err


def one_line_error(code: int, err: str, expect: str) -> None:
    """Exit 2 and `expect` in the last line of stderr, without a traceback."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert "Traceback" not in err
    assert expect in lines[-1], lines[-1]
