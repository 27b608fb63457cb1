"""Load test of `seqlab serve` on 127.0.0.1 only: throughput, latency, errors and memory, per endpoint family.

    python benchmarks/serve_load.py --classifier runs/sst2 --tagger runs/pos --seq2seq runs/de-en --lm runs/demo

The server is a separate process (`python -m seqlab serve RUN... --port P`, so client and server do not
share a GIL); the client is one asyncio process (aiohttp: on these 2 cores httpx's client tops out near 340
requests/s against a bare /healthz, aiohttp's near 2,400) that keeps `concurrency` requests in flight. For
each endpoint family and each concurrency (1, 8, 32) it sends --requests requests, a tenth of them
malformed in varied ways (bad JSON, a missing or misspelt field, a wrong type, an unknown model, the wrong
endpoint, a text or list over the limits, a body over the byte limit), and reports requests per second,
p50 / p95 / p99 latency and the answers by status. It checks that no answer is a 5xx, that every malformed
request got a 4xx and every valid one a 200 whose answer equals the Python API's (a sample of 200 texts per
family, computed in this process beforehand), and it reads the server's resident memory idle, after a warm-up
(500 requests of each family at each concurrency, 100 for generation: PyTorch's allocator has then seen
batches of every size) and at the end. The classifier is also served with --max-batch 1 (each request alone)
to measure what dynamic batching gains, and with a model thread on every core (the server's default leaves
one core to its event loop) to measure what that gains; the language model's streamed generation is timed to
its first token. Writes benchmarks/results/serve_load.json and .md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import httpx

sys.path.insert(0, str(Path(__file__).parent))
from common import device_name, free_port, record, resident_mb, write_records  # noqa: E402

TITLE = "seqlab serve under load (127.0.0.1)"
NOTES = __doc__.split("\n\n", 1)[1]
LIMITS = ["--max-chars", "2000", "--max-items", "16", "--max-body-bytes", "65536"]


class Server:
    """`seqlab serve` in a subprocess on 127.0.0.1."""

    def __init__(self, runs: list[str], threads: int, extra: list[str]):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen([sys.executable, "-m", "seqlab", "serve", *runs, "--port", str(self.port),
                                         "--threads", str(threads), *LIMITS, *extra],
                                        stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 300
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"the server stopped: {self.process.stderr.read()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise SystemExit("the server did not start")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def malformed(family: dict, model: str, k: int) -> tuple[str, bytes | dict]:
    """The k-th way of getting a request wrong: (path, body); bytes are sent as they are."""
    endpoint, field = family["endpoint"], family["field"]
    valid = {"model": model, field: family["texts"][0]}
    cases = [
        (endpoint, b'{"model": "' + model.encode() + b'", '),                          # malformed JSON
        (endpoint, {field: family["texts"][0]}),                                       # no model
        (endpoint, {**valid, field: 42}),                                              # a number for a text
        (endpoint, {**valid, "model": "nobody"}),                                      # unknown model
        ("/v1/score" if endpoint != "/v1/score" else "/v1/tag", valid),                # the wrong endpoint
        (endpoint, {**valid, field: "x" * 3000}),                                      # over --max-chars
        (endpoint, {**valid, field: ["a"] * 20} if field == "text" else {**valid, "max_tokens": 100000}),
        (endpoint, {**valid, "colour": "red"}),                                        # a misspelt field
        (endpoint, {**valid, field: "y" * 70000}),                                     # over --max-body-bytes
    ]
    return cases[k % len(cases)]


async def run_load(url: str, family: dict, model: str, n: int, concurrency: int, bad_share: float,
                   seed: int = 0) -> dict:
    rng = random.Random(seed)
    plan = []
    for i in range(n):
        if rng.random() < bad_share:
            plan.append(("bad", *malformed(family, model, i)))
        else:
            text = family["texts"][i % len(family["texts"])]
            plan.append(("good", family["endpoint"], {"model": model, family["field"]: text, **family["options"]}))
    latencies, statuses, wrong = [], {}, []
    queue = iter(enumerate(plan))

    async def worker(client: aiohttp.ClientSession) -> None:
        for i, (kind, path, body) in queue:
            start = time.perf_counter()
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            async with client.post(path, data=data, headers={"content-type": "application/json"}) as response:
                status, answer = response.status, await response.read()
            latencies.append(time.perf_counter() - start)
            statuses[status] = statuses.get(status, 0) + 1
            if kind == "good":
                if status != 200:
                    wrong.append(f"valid request {i}: {status} {answer[:100]!r}")
                else:
                    text = body[family["field"]]
                    expected = family["expected"].get(text)
                    if expected is not None and family["answer"](json.loads(answer)) != expected:
                        wrong.append(f"valid request {i}: answer differs from the Python API's")
            elif not 400 <= status < 500:
                wrong.append(f"malformed request {i} ({path}): {status}")

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(url, connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as client:
        start = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
        wall = time.perf_counter() - start
    latencies.sort()

    def quantile(q: float) -> float:
        return 1000 * latencies[min(len(latencies) - 1, int(q * len(latencies)))]

    return {"requests": n, "wall_s": wall, "requests_per_s": n / wall, "p50_ms": quantile(0.5),
            "p95_ms": quantile(0.95), "p99_ms": quantile(0.99), "statuses": statuses, "wrong": wrong,
            "server_errors": sum(v for k, v in statuses.items() if k >= 500)}


async def first_token_ms(url: str, model: str, prompts: list[str], n: int) -> list[float]:
    times = []
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        for i in range(n):
            start = time.perf_counter()
            async with client.stream("POST", "/v1/generate", json={"model": model, "prompt": prompts[i % len(prompts)],
                                                                  "max_tokens": 20, "stream": True}) as response:
                async for line in response.aiter_lines():
                    if line.startswith("data: "):
                        times.append(1000 * (time.perf_counter() - start))
                        break
    return times


def families(args) -> dict[str, tuple[str, dict]]:
    """{family: (run, spec)}: the endpoint, the field, the texts, the options, and the Python API's answers."""
    import seqlab

    data = Path(args.data_dir)
    out = {}
    if args.classifier:
        lines = (data / "sst/dev.txt").read_text().splitlines()
        texts = [" ".join(t for t in line.replace("(", " ").replace(")", " ").split() if not t.isdigit())
                 for line in lines][:500]
        model = seqlab.load(args.classifier)
        sample = texts[:200]
        out["classify"] = (args.classifier, {
            "endpoint": "/v1/classify", "field": "text", "texts": texts, "options": {},
            "expected": {t: p.label for t, p in zip(sample, model.classify(sample), strict=True)},
            "answer": lambda a: a["results"][0]["label"]})
    if args.tagger:
        sentences = []
        for line in (data / "ud_english_ewt/en_ewt-ud-dev.conllu").read_text().splitlines():
            if line.startswith("# text = "):
                sentences.append(line[len("# text = "):])
        texts = sentences[:500]
        model = seqlab.load(args.tagger)
        sample = texts[:200]
        out["tag"] = (args.tagger, {
            "endpoint": "/v1/tag", "field": "text", "texts": texts, "options": {},
            "expected": {t: [tag for tag, _ in r] for t, r in
                         zip(sample, model.tag_sentences([t.split() for t in sample]), strict=True)},
            "answer": lambda a: a["results"][0]["tags"]})
    if args.seq2seq:
        texts = (data / "multi30k/tok/test_2016_flickr.lc.norm.tok.de").read_text().splitlines()[:500]
        model = seqlab.load(args.seq2seq)
        sample = texts[:200]
        out["translate"] = (args.seq2seq, {
            "endpoint": "/v1/translate", "field": "text", "texts": texts, "options": {"beam": 1},
            "expected": dict(zip(sample, model.translate(sample, beam=1), strict=True)),
            "answer": lambda a: a["results"][0]["text"]})
    if args.lm:
        lines = [line for line in (data / "tinyshakespeare/input.txt").read_text().splitlines() if line.strip()]
        prompts = lines[:300]
        model = seqlab.load(args.lm)
        sample = prompts[:100]
        out["generate"] = (args.lm, {
            "endpoint": "/v1/generate", "field": "prompt", "texts": prompts,
            "options": {"max_tokens": args.generate_tokens, "seed": 1},
            "expected": {p: model.generate(p, max_tokens=args.generate_tokens, seed=1) for p in sample},
            "answer": lambda a: a["text"]})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--classifier", help="a classifier run (the SST-2 BiLSTM)")
    parser.add_argument("--tagger", help="a tagger run (UD English EWT)")
    parser.add_argument("--seq2seq", help="a German -> English run (Multi30k)")
    parser.add_argument("--lm", help="a character language model (Tiny Shakespeare)")
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--requests", type=int, default=10_000, help="requests per family and concurrency")
    parser.add_argument("--generate-requests", type=int, default=1_000, help="the same for /v1/generate")
    parser.add_argument("--generate-tokens", type=int, default=8)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--malformed", type=float, default=0.1, help="share of malformed requests")
    parser.add_argument("--threads", type=int, default=0,
                        help="the server's model threads (0: its default, one per core but one)")
    parser.add_argument("--no-compare", action="store_true", help="skip the classifier with --max-batch 1")
    args = parser.parse_args()
    specs = families(args)
    if not specs:
        parser.error("give at least one of --classifier, --tagger, --seq2seq, --lm")
    cores = len(os.sched_getaffinity(0))
    threads = args.threads or max(1, cores - 1)
    records, machine = [], device_name()
    # the classifier also one request at a time (what batching gains), and with a model thread on every core
    # (what leaving a core to the event loop gains)
    settings = [("batched", [], args.threads)] + ([("one-at-a-time", ["--max-batch", "1"], args.threads),
                                                   (f"batched, {cores} model threads", [], cores)]
                                                  if "classify" in specs and not args.no_compare else [])
    for setting, extra, server_threads in settings:
        wanted = specs if setting == "batched" else {"classify": specs["classify"]}
        server = Server([run for run, _ in wanted.values()], server_threads, extra)
        device = f"{machine} (server: {server_threads or threads} model threads)"
        try:
            names = {run: Path(run).resolve().name for run, _ in wanted.values()}
            idle = resident_mb(server.process.pid)
            for family, (run, spec) in wanted.items():    # warm up: every family at every concurrency, so that
                for concurrency in args.concurrency:      # the batches of every size have been seen once
                    n = 100 if family == "generate" else 500
                    asyncio.run(run_load(server.url, spec, names[run], n, concurrency, args.malformed, seed=1))
            before = resident_mb(server.process.pid)
            for family, (run, spec) in wanted.items():
                n = args.generate_requests if family == "generate" else args.requests
                for concurrency in args.concurrency:
                    result = asyncio.run(run_load(server.url, spec, names[run], n, concurrency, args.malformed))
                    print(json.dumps({"family": family, "setting": setting, "concurrency": concurrency,
                                      **{k: v for k, v in result.items() if k != "wrong"},
                                      "wrong": result["wrong"][:5]}), flush=True)
                    config = f"{setting}, concurrency {concurrency}"
                    base = dict(task="serve", dataset=Path(run).name, split="", arch=family, config=config,
                                device=device, wall_s=round(result["wall_s"], 2))
                    records += [record(**base, metric=metric, value=round(result[metric], 2))
                                for metric in ("requests_per_s", "p50_ms", "p95_ms", "p99_ms")]
                    records.append(record(**base, metric="server_errors_5xx", value=result["server_errors"]))
                    records.append(record(**base, metric="wrong_answers", value=len(result["wrong"]),
                                          note=json.dumps(result["statuses"])))
                    write_records("serve_load", records, TITLE, notes=NOTES)      # as it goes: nothing lost
            if "generate" in wanted and setting == "batched":
                run, spec = wanted["generate"]
                times = asyncio.run(first_token_ms(server.url, names[run], spec["texts"], 100))
                records.append(record(task="serve", dataset=Path(run).name, split="", arch="generate",
                                      config="stream, concurrency 1", metric="first_token_ms_p50",
                                      value=round(statistics.median(times), 2), device=device))
                records.append(record(task="serve", dataset=Path(run).name, split="", arch="generate",
                                      config="stream, concurrency 1", metric="first_token_ms_p99",
                                      value=round(sorted(times)[98], 2), device=device))
            after = resident_mb(server.process.pid)
            records.append(record(task="serve", dataset="all", split="", arch="server", config=setting,
                                  metric="memory_growth_percent", value=round(100 * (after - before) / before, 2),
                                  note=f"resident {idle:.0f} MB idle, {before:.0f} MB after the warm-up, "
                                       f"{after:.0f} MB after the load",
                                  device=device))
        finally:
            server.stop()
    write_records("serve_load", records, TITLE, notes=NOTES)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
