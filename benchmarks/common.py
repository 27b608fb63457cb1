"""The one results format of every seqlab benchmark, and the Markdown table generated from it.

Each benchmark writes a JSON array to benchmarks/results/<name>.json, one record per figure:
{task, dataset, split, arch, config, metric, value, params, tokens_per_s, wall_s, device, command, date}
(plus optional fields such as epochs, target, note). A record replaces an earlier one with the same
(task, dataset, split, arch, config, metric), so re-running a benchmark updates its rows.
"""

from __future__ import annotations

import datetime
import json
import os
import shlex
import socket
import sys
from pathlib import Path

import torch

from seqlab.training import flops

RESULTS = Path(__file__).parent / "results"
KEY = ("task", "dataset", "split", "arch", "config", "metric")
COLUMNS = ("task", "dataset", "split", "arch", "config", "metric", "value", "stdev", "params", "tokens_per_s",
           "wall_s", "epochs", "target", "device", "date")


def device_name(device: str | torch.device = "cpu") -> str:
    device = torch.device(device)
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (torch {torch.__version__})"
    return f"{flops.device_name(device)}, {torch.get_num_threads()} threads, {os.cpu_count()} cores " \
           f"(torch {torch.__version__})"


def command_line() -> str:
    return " ".join(shlex.quote(a) for a in ["python", *sys.argv])


def today() -> str:
    return datetime.date.today().isoformat()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 (for a server under test)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def resident_mb(pid: int) -> float:
    """A process's resident memory, in MB (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def record(**fields) -> dict:
    base = {"task": None, "dataset": None, "split": None, "arch": None, "config": None, "metric": None,
            "value": None, "params": None, "tokens_per_s": None, "wall_s": None, "device": None,
            "command": command_line(), "date": today()}
    base.update(fields)
    return base


def write_records(name: str, records: list[dict], title: str, notes: str = "") -> Path:
    """Upsert records into results/<name>.json and regenerate results/<name>.md."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    existing = json.loads(path.read_text()) if path.exists() else []
    keys = {tuple(r.get(k) for k in KEY) for r in records}
    merged = [r for r in existing if tuple(r.get(k) for k in KEY) not in keys] + records
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(merged, indent=1) + "\n")
    tmp.replace(path)
    markdown(name, merged, title, notes)
    return path


def _fmt(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.4g}" if abs(value) < 10 else f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def markdown(name: str, records: list[dict], title: str, notes: str = "") -> Path:
    columns = [c for c in COLUMNS if any(r.get(c) is not None for r in records)]
    lines = [f"# {title}", "", "Generated from `" + name + ".json`; every row's command is in the JSON.", ""]
    if notes:
        lines += [notes.strip(), ""]
    lines.append("| " + " | ".join(columns) + " |")
    lines.append("|" + "|".join("---" for _ in columns) + "|")
    for r in records:
        lines.append("| " + " | ".join(_fmt(r.get(c)).replace("|", "/") for c in columns) + " |")
    commands = sorted({r["command"] for r in records if r.get("command")})
    lines += ["", "Commands:", ""] + [f"- `{c}`" for c in commands]
    path = RESULTS / f"{name}.md"
    path.write_text("\n".join(lines) + "\n")
    return path
