"""The resident memory of `seqlab serve` with the same four models on each runtime: PyTorch (run directories) and
onnxruntime (their exports, `seqlab export RUN --format onnx`).

    python benchmarks/serve_memory.py --runs runs/sst2 runs/pos runs/de-en runs/lm --exports exports/{sst2,pos,de-en,lm}

Each server is a separate process (`python -m seqlab serve ... --runtime R --threads 1`); its resident memory
(VmRSS) is read once /healthz answers (the models loaded) and again after one request per family (the first
inference allocates its buffers), with its start-up time and whether libtorch is mapped into it
(/proc/PID/maps). Writes benchmarks/results/serve_memory.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from common import device_name, free_port, record, resident_mb, write_records  # noqa: E402

TITLE = "seqlab serve: resident memory per runtime"
NOTES = __doc__.split("\n\n", 1)[1]
ASK = {"classifier": ("/v1/classify", {"text": "a fine , moving film"}),
       "tagger": ("/v1/tag", {"text": "The cat sat on the mat ."}),
       "lm": ("/v1/generate", {"prompt": "ROMEO:", "max_tokens": 20, "seed": 1}),
       "seq2seq": ("/v1/translate", {"text": "ein mann schläft .", "beam": 4})}


def measure(directories: list[str], runtime: str) -> dict:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "seqlab", "serve", *directories, "--runtime", runtime,
                                "--threads", "1", "--port", str(port)], stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        while True:
            if process.poll() is not None:
                raise SystemExit(f"the {runtime} server stopped: {process.stderr.read()}")
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        ready_s = time.perf_counter() - started
        loaded = resident_mb(process.pid)
        for model in httpx.get(f"{url}/v1/models").json()["models"]:
            path, body = ASK[model["task"]]
            answer = httpx.post(url + path, json={"model": model["name"], **body}, timeout=60)
            assert answer.status_code == 200, answer.text
        warm = resident_mb(process.pid)
        torch_mapped = "libtorch" in Path(f"/proc/{process.pid}/maps").read_text()
    finally:
        process.terminate()
        process.wait(timeout=30)
    return {"loaded_mb": loaded, "warm_mb": warm, "ready_s": ready_s, "torch_mapped": torch_mapped}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", nargs="+", required=True, help="run directories, one per family")
    parser.add_argument("--exports", nargs="+", required=True, help="their exports, in the same order")
    args = parser.parse_args()
    records, device = [], device_name()
    for runtime, directories in (("torch", args.runs), ("onnx", args.exports)):
        result = measure(directories, runtime)
        print(json.dumps({"runtime": runtime, **result}), flush=True)
        base = dict(task="serve", dataset="+".join(Path(d).name for d in directories), split="", arch="server",
                    config=f"--runtime {runtime}", device=device, wall_s=round(result["ready_s"], 2),
                    note=f"libtorch mapped: {'yes' if result['torch_mapped'] else 'no'}")
        records += [record(**base, metric="resident_mb_loaded", value=round(result["loaded_mb"], 1)),
                    record(**base, metric="resident_mb_after_one_request_each", value=round(result["warm_mb"], 1))]
    write_records("serve_memory", records, TITLE, notes=NOTES)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
