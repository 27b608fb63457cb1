"""Multi-node DDP: two torchrun launchers ("nodes") on 127.0.0.1 that meet by c10d rendezvous train to the losses
of one process with the same global batch, and only global rank 0 writes the run directory they share.

    node 0:  torchrun --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:PORT ...  rank ?
    node 1:  the same command                                                                             rank ?
             \\__ c10d rendezvous: each worker gets RANK 0 or 1 (by the launchers' address and pid, not
                 --node-rank, which only the static backend reads); global batch 4 = 2 rows per rank

Each launcher runs in its own session with its output in a file; whatever happens, both are stopped (and their
workers, which torchrun starts in sessions of their own) before the test ends.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import TEST, TRAIN, VALID

TIMEOUT_S = 150          # each command; the two variants take ~35 s together on two cores
# what a stack trace leaves in a log: Python's, PyTorch's C++ one (c10::Error's frames), a C++ log line
# ("[W1128 09:01:16.66 socket.cpp:469] ..."), gloo's abort at exit
TRACE = re.compile(r"Traceback|Exception raised from|frame #\d|^\[[WEF]\d{4}|terminate called", re.MULTILINE)

FILES = ["--train", str(TRAIN), "--valid", str(VALID), "--test", str(TEST), "--tokenizer", "word"]
OPTIONS = ["--arch", "lstm", "--embedding-size", "16", "--hidden-size", "16", "--dropout", "0", "--batch-size", "4",
           "--seq-len", "8", "--max-steps", "6", "--eval-every", "3", "--log-every", "1", "--no-progress",
           "--threads", "1"]

# Loaded by every Python process of a launcher (torchrun itself and its worker) through PYTHONPATH: an audit hook
# (PEP 578) that records each write, creation, rename or removal under $WATCH_DIR, with the process's RANK, to
# $WATCH_LOG (outside the watched folder). Every file seqlab writes goes through Python's open (safetensors'
# bytes, matplotlib's PNG, the JSON lines), so nothing a rank writes escapes it.
WATCHER = '''
import os
import sys

_DIR, _LOG = os.environ.get("WATCH_DIR"), os.environ.get("WATCH_LOG")
_WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_EVENTS = {"open", "os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.truncate", "os.chmod", "os.utime",
           "os.link", "os.symlink", "shutil.rmtree"}


def _inside(path) -> bool:
    if path is None or isinstance(path, int):
        return False
    path = os.path.abspath(os.fsdecode(path))
    return path == _DIR or path.startswith(_DIR + os.sep)


def _record(line: str) -> None:
    with open(_LOG, "a", encoding="utf-8") as handle:     # outside _DIR: this open is not recorded
        handle.write(line + "\\n")


def _hook(event, args):
    if event not in _EVENTS:
        return
    if event == "open":
        path, mode, flags = args
        if not (flags & _WRITES or (isinstance(mode, str) and set(mode) & set("wax+"))):
            return
        paths = [path]
    else:
        paths = list(args[:2]) if event in ("os.rename", "os.link", "os.symlink") else [args[0]]
    inside = [os.fsdecode(p) for p in paths if _inside(p)]
    if inside:
        _record(f"write {os.environ.get('RANK', 'launcher')} {event} {inside[0]}")


if _DIR and _LOG:
    if "RANK" in os.environ:
        _record(f"started {os.environ['RANK']}")
    sys.addaudithook(_hook)
'''


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def children(pid: int) -> list[int]:
    """Every live descendant of `pid` (Linux /proc), so that workers in sessions of their own are found too."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def stop(launcher: subprocess.Popen) -> None:
    """End a launcher still running and its workers: SIGTERM (torchrun passes it on to its workers), then
    SIGKILL to every process of the tree that is left, by pid."""
    if launcher.poll() is not None:
        return
    tree = children(launcher.pid)
    launcher.send_signal(signal.SIGTERM)
    try:
        launcher.wait(timeout=20)
    except subprocess.TimeoutExpired:
        launcher.kill()
        launcher.wait()
    for pid in tree:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def run_nodes(args: list[str], folder: Path, nodes: int = 2, options: Callable[[int], list[str]] = lambda node: [],
              during: Callable[[list[subprocess.Popen]], None] = lambda launchers: None) -> list[tuple[int, str]]:
    """Run `seqlab ARGS` on `nodes` torchrun launchers of one process each, meeting by c10d rendezvous on
    127.0.0.1: [(return code, output)] per launcher, in node order. `options(node)`: more of torchrun's options;
    `during(launchers)` is called every 0.2 s while they run."""
    port, run_id = free_port(), f"seqlab-test-{uuid.uuid4().hex[:8]}"
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    launchers, logs = [], []
    try:
        for node in range(nodes):
            command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(nodes), "--nproc-per-node",
                       "1", "--node-rank", str(node), "--rdzv-backend", "c10d", "--rdzv-endpoint",
                       f"127.0.0.1:{port}", "--rdzv-id", run_id, "--rdzv-conf", "join_timeout=60",
                       "--local-addr", "127.0.0.1", "--max-restarts", "0", *options(node), "-m", "seqlab", *args]
            logs.append(open(folder / f"node{node}.log", "w+", encoding="utf-8"))
            launchers.append(subprocess.Popen(command, stdout=logs[-1], stderr=subprocess.STDOUT, env=environment,
                                              start_new_session=True))
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:          # until all end, or one fails (the others would wait for it)
            during(launchers)
            codes = [launcher.poll() for launcher in launchers]
            if None not in codes or any(codes):
                break
            time.sleep(0.2)
    finally:
        for launcher in launchers:
            stop(launcher)
        for log in logs:
            log.close()
    return [(launcher.returncode, (folder / f"node{node}.log").read_text(encoding="utf-8"))
            for node, launcher in enumerate(launchers)]


def seqlab(args: list[str]) -> subprocess.CompletedProcess:
    """`seqlab ARGS` in one plain process."""
    return subprocess.run([sys.executable, "-m", "seqlab", *args], capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=TIMEOUT_S)


@pytest.mark.slow
@pytest.mark.parametrize("source", ["files", "prepared"])
def test_multinode_two_nodes_equal_one_process(tmp_path, monkeypatch, source):
    """Two torchrun launchers of one process each (gloo), joined by c10d rendezvous on 127.0.0.1 as two nodes
    would be, give the per-step training losses and the validation losses of one process with the same global
    --batch-size; both write to the same --output path, and only global rank 0 writes there.

    files: `seqlab train lm --train ...`, which prepares its data into RUN/prepared on first use (no
    $SEQLAB_CACHE_DIR): rank 0 prepares, rank 1 waits and reads it from the shared run directory.
    prepared: `seqlab prepare lm` once, then `seqlab train lm --data DIR`: each rank reads its rows of every
    global batch from the shards."""
    if source == "files":
        data = FILES
        monkeypatch.setenv("SEQLAB_CACHE_DIR", "")                    # the data cache in the run directory ...
        monkeypatch.setenv("HOME", str(tmp_path / "home"))            # ... and the peak's away from ~/.cache
    else:
        done = seqlab(["prepare", "lm", *FILES, "--output", str(tmp_path / "data"), "--workers", "1",
                       "--no-progress"])
        assert done.returncode == 0, done.stderr
        data = ["--data", str(tmp_path / "data")]
    single = seqlab(["train", "lm", *data, *OPTIONS, "--output", str(tmp_path / "one")])
    assert single.returncode == 0, single.stderr

    run_dir, watch = tmp_path / "two", tmp_path / "watch"
    watch.mkdir()
    (watch / "sitecustomize.py").write_text(WATCHER, encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(watch), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("WATCH_DIR", str(run_dir))
    monkeypatch.setenv("WATCH_LOG", str(tmp_path / "writes.log"))
    nodes = run_nodes(["train", "lm", *data, *OPTIONS, "--output", str(run_dir)], tmp_path)
    for node, (code, output) in enumerate(nodes):
        assert code == 0, f"node {node} exited with {code}:\n{output[-4000:]}"
        assert not TRACE.search(output), f"node {node} ended cleanly, with a stack trace:\n{output[-4000:]}"

    one, two = jsonl(tmp_path / "one" / "train_log.jsonl"), jsonl(run_dir / "train_log.jsonl")
    assert [r["step"] for r in one] == [r["step"] for r in two] == list(range(1, 7))   # one line per step: one writer
    assert [r["loss"] for r in two] == pytest.approx([r["loss"] for r in one], rel=1e-4)
    valid_one, valid_two = jsonl(tmp_path / "one" / "metrics.jsonl"), jsonl(run_dir / "metrics.jsonl")
    assert [(r["step"], r["split"]) for r in valid_two] == [(r["step"], r["split"]) for r in valid_one]
    assert [r["loss"] for r in valid_two] == pytest.approx([r["loss"] for r in valid_one], rel=1e-4)
    if source == "files":
        assert (run_dir / "prepared" / "manifest.json").is_file()

    lines = (tmp_path / "writes.log").read_text(encoding="utf-8").splitlines()
    assert sorted(line for line in lines if line.startswith("started")) == ["started 0", "started 1"]
    writers = {line.split()[1] for line in lines if line.startswith("write")}
    assert writers == {"0"}, [line for line in lines if not line.startswith(("started", "write 0"))]
    assert any(line.endswith("train_log.jsonl") for line in lines)          # the watcher saw rank 0's writes


def rank_of(pid: int) -> int | None:
    """The RANK torchrun gave the worker `pid` (None for a launcher, which has none, or a process gone)."""
    try:
        environment = dict(entry.split(b"=", 1) for entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                           if b"=" in entry)
    except OSError:
        return None
    return int(environment[b"RANK"]) if b"LOCAL_RANK" in environment else None


@pytest.mark.slow
def test_multinode_stopped_worker_ends_the_other_node_within_the_timeout(tmp_path):
    """Two nodes train; at step 3 the worker of global rank 1 is stopped (SIGSTOP, as a hung node would be).
    The other node's worker ends --dist-timeout later (not after gloo's 30 minutes, printing nothing), with one
    line naming rank 1 and no trace of its own, and its launcher exits non-zero. (torchrun's own report of a
    failed worker follows on the launcher's output, with the launcher's traceback: not seqlab's to change.)"""
    timeout = 5
    run_dir, stopped = tmp_path / "run", {}

    def stop_rank_1(launchers):
        log = run_dir / "train_log.jsonl"
        if "at" not in stopped and log.exists() and len(log.read_text(encoding="utf-8").splitlines()) >= 3:
            for node, launcher in enumerate(launchers):
                for pid in children(launcher.pid):
                    if rank_of(pid) == 1:
                        os.kill(pid, signal.SIGSTOP)
                        stopped.update(at=time.monotonic(), node=node)
        for node, launcher in enumerate(launchers):
            if "at" in stopped and launcher.poll() is not None:
                stopped.setdefault(f"ended{node}", time.monotonic())

    nodes = run_nodes(["train", "lm", *FILES, *OPTIONS[:OPTIONS.index("--max-steps")], "--max-steps", "100000",
                       "--eval-every", "100000", "--log-every", "1", "--no-progress", "--threads", "1",
                       "--dist-timeout", str(timeout), "--output", str(run_dir)], tmp_path,
                      options=lambda node: ["--log-dir", str(tmp_path / f"workers{node}"), "--redirects", "2"],
                      during=stop_rank_1)
    assert "at" in stopped, nodes
    survivor = 1 - stopped["node"]
    code, output = nodes[survivor]
    waited = stopped[f"ended{survivor}"] - stopped["at"]
    assert code != 0, output
    assert timeout - 1 <= waited <= timeout + 15, (waited, output)
    [worker_err] = (tmp_path / f"workers{survivor}").rglob("stderr.log")
    err = worker_err.read_text(encoding="utf-8")
    assert err.rstrip().splitlines()[-1].startswith("seqlab: error: rank 1 (pid ") and \
        f"did not answer within {timeout} s (--dist-timeout)" in err.splitlines()[-1], err
    assert sum(line.startswith("seqlab: error") for line in err.splitlines()) == 1, err
    assert not TRACE.search(err), err
