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
its first token.

With --baseline-src SRC (the src/ folder of an earlier seqlab, e.g. a `git worktree` of an earlier commit) the
generation load and the mixed load also run against that version's server, in the same run, so that the gain is
a ratio measured side by side. The mixed load (--mixed, with --classifier and the runs of the other endpoints)
runs on a server of its own with `seqlab serve`'s default limits of one request (20,000 characters a text, 64
texts, a body of 1 MB) and sends, for each endpoint kind in turn, one worst-case request (the largest those limits
accept: 50 texts of 20,000 characters to score, tag or classify; a prompt of 20,000 characters continued for 1,024
tokens with beam 16; 50 such prompts to /v1/completions with echo, logprobs and 1,024 tokens; a translation of 16
sources of 2,000 characters with beam 16 and max_length 1,024: longer sources make each step of a beam search of
800 hypotheses hold the model thread for seconds and take gigabytes, a step being what a decoding yields at) and,
while it runs, --mixed-requests classification requests (1,000) at concurrency 8: their p50 / p99 latency, and
what the worst request got (the server stops it at its --request-timeout). --mixed-only runs the mixed loads
alone (a quick check: --mixed-only --mixed-requests 100; --worst to pick kinds).
Writes benchmarks/results/serve_load.json and .md.
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
MIXED_LIMITS = ["--max-chars", "20000", "--max-items", "64", "--max-body-bytes", "1048576"]   # seqlab serve's defaults


class Server:
    """`seqlab serve` in a subprocess on 127.0.0.1."""

    def __init__(self, runs: list[str], threads: int, extra: list[str], src: str | None = None,
                 limits: list[str] = LIMITS):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "PYTHONPATH": str(Path(src).resolve())} if src else None       # an earlier seqlab
        self.process = subprocess.Popen([sys.executable, "-m", "seqlab", "serve", *runs, "--port", str(self.port),
                                         "--threads", str(threads), *limits, *extra],
                                        stderr=subprocess.PIPE, text=True, env=env)
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
            "p95_ms": quantile(0.95), "p99_ms": quantile(0.99), "max_ms": 1000 * latencies[-1],
            "statuses": statuses, "wrong": wrong,
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


async def mixed_load(url: str, path: str, worst: dict, small: dict, model: str, n: int = 1000,
                     concurrency: int = 8) -> dict:
    """One worst-case request (`worst` to `path`) and, while it runs, `n` classification requests at
    `concurrency`: the small requests' latencies, and the worst one's status and time."""
    worst_result = {}

    async def worst_request(client: aiohttp.ClientSession) -> None:
        start = time.perf_counter()
        async with client.post(path, json=worst) as response:
            worst_result["status"], worst_result["answer"] = response.status, (await response.read())[:200]
        worst_result["seconds"] = time.perf_counter() - start

    async with aiohttp.ClientSession(url, timeout=aiohttp.ClientTimeout(total=1800)) as client:
        task = asyncio.create_task(worst_request(client))
        await asyncio.sleep(0.5)                                  # the worst case has started
        result = await run_load(url, small, model, n, concurrency, bad_share=0.0)
        worst_result["running_when_small_ones_ended"] = not task.done()
        await task
    return {**result, "worst": worst_result}


WORK = {"score": "scoring", "tag": "tagging", "classify": "classification", "translate": "translation",
        "generate": "generation", "completions": "completion"}        # the records' names of each kind's worst case


def limit(name: str, limits: list[str] = MIXED_LIMITS) -> int:
    """The value of one of a server's limits ("--max-chars")."""
    return int(limits[limits.index(name) + 1])


def worst_translation(model: str, limits: list[str], max_length: int, beam: int = 16, sources: int = 4) -> dict:
    """The largest translation a server with `limits` accepts: `sources` sources of --max-chars characters of words
    it has never seen, the largest beam and max_length."""
    chars = limit("--max-chars", limits)
    source = " ".join(["zqxv"] * (chars // 5))[:chars]
    return {"model": model, "text": [source] * sources, "beam": beam, "max_length": max_length}


def worst_cases(args, specs: dict, names: dict) -> dict[str, tuple[str, dict, str]]:
    """{endpoint kind: (path, body, what it is)}: the largest request of each kind a server with the default limits
    accepts (MIXED_LIMITS: 20,000 characters a text, as many texts as a body of 1 MB holds, 50), for the runs
    given; a translation, 16 sources of 2,000 characters (LIMITS'), see the module's docstring."""
    chars = limit("--max-chars")
    words = ("a " * chars)[:chars]                    # the most tokens --max-chars characters hold
    shakespeare = (Path(args.data_dir) / "tinyshakespeare/input.txt").read_text()[:chars]

    def most(make) -> int:
        """The most texts `make(n)` (a body) holds within the limits (--max-items, --max-body-bytes)."""
        n = limit("--max-items")
        while n > 1 and len(json.dumps(make(n)).encode()) > limit("--max-body-bytes"):
            n -= 1
        return n

    out = {}
    if "generate" in specs:
        lm = names[specs["generate"][0]]

        def score(n: int) -> dict:
            return {"model": lm, "text": [shakespeare] * n}

        def completions(n: int) -> dict:
            return {"model": lm, "prompt": [shakespeare] * n, "max_tokens": 1024, "echo": True, "logprobs": 5,
                    "seed": 1}

        out["score"] = ("/v1/score", score(most(score)), f"{most(score)} texts x {chars} chars")
        out["generate"] = ("/v1/generate", {"model": lm, "prompt": shakespeare, "max_tokens": 1024, "beam": 16},
                           f"a {chars}-char prompt, beam 16, max_tokens 1024")
        out["completions"] = ("/v1/completions", completions(most(completions)),
                              f"{most(completions)} prompts x {chars} chars, echo, logprobs 5, max_tokens 1024")
    for kind, run in (("tag", "tag"), ("classify", "classify")):
        if run in specs:
            def texts(n: int, model=names[specs[run][0]]) -> dict:
                return {"model": model, "text": [words] * n}

            out[kind] = (f"/v1/{kind}", texts(most(texts)), f"{most(texts)} texts x {len(words.split())} tokens"
                         + (" (the small requests' model)" if kind == "classify" else ""))
    if "translate" in specs:
        small = limit("--max-chars", LIMITS)
        out["translate"] = ("/v1/translate", worst_translation(names[specs["translate"][0]], LIMITS, args.max_length,
                                                               sources=limit("--max-items", LIMITS)),
                            f"{limit('--max-items', LIMITS)} sources x {small} chars, beam 16, max_length "
                            f"{args.max_length}")
    return out


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
    parser.add_argument("--baseline-src", help="the src/ folder of an earlier seqlab: its server runs the generation "
                        "and mixed loads too, side by side")
    parser.add_argument("--mixed", action="store_true", help="the mixed loads: for each endpoint kind whose run is "
                        "given, one worst-case request beside --mixed-requests classifications (needs --classifier)")
    parser.add_argument("--mixed-requests", type=int, default=1_000, help="the small requests of each mixed load")
    parser.add_argument("--mixed-only", action="store_true", help="run the mixed loads alone (implies --mixed)")
    parser.add_argument("--worst", nargs="+", choices=list(WORK), help="only these worst cases in the mixed loads")
    parser.add_argument("--results", default="serve_load", help="the results' name: benchmarks/results/NAME.json "
                        "and .md (another name for a quick check)")
    parser.add_argument("--max-length", type=int, default=1024, help="the worst-case translation's max_length "
                        "(the server's limit)")
    parser.add_argument("--request-timeout", type=float, default=10.0, help="the new server's --request-timeout")
    parser.add_argument("--families", nargs="+", help="only these families' loads (generate, classify, ...)")
    args = parser.parse_args()
    specs = families(args)
    loads = {f: v for f, v in specs.items() if not args.families or f in args.families}
    if not specs:
        parser.error("give at least one of --classifier, --tagger, --seq2seq, --lm")
    cores = len(os.sched_getaffinity(0))
    threads = args.threads or max(1, cores - 1)
    records, machine = [], device_name()
    args.mixed = args.mixed or args.mixed_only
    if args.mixed and "classify" not in specs:
        parser.error("--mixed needs --classifier (its small requests are classifications)")
    if args.mixed_only:
        records += mixed_only(args, specs, threads, machine)
        if args.baseline_src:
            records += baseline(args, specs, threads, machine, records)
        write_records(args.results, records, TITLE, notes=NOTES)
        return 0
    # the classifier also one request at a time (what batching gains), and with a model thread on every core
    # (what leaving a core to the event loop gains)
    settings = [("batched", [], args.threads)] + ([("one-at-a-time", ["--max-batch", "1"], args.threads),
                                                   (f"batched, {cores} model threads", [], cores)]
                                                  if "classify" in specs and not args.no_compare else [])
    for setting, extra, server_threads in settings:
        wanted = specs if setting == "batched" else {"classify": specs["classify"]}
        server = Server([run for run, _ in wanted.values()], server_threads,
                        extra + ["--request-timeout", str(args.request_timeout)])
        device = f"{machine} (server: {server_threads or threads} model threads)"
        try:
            names = {run: Path(run).resolve().name for run, _ in wanted.values()}
            idle = resident_mb(server.process.pid)
            for family, (run, spec) in wanted.items():    # warm up: every family at every concurrency, so that
                if family not in loads:                   # the batches of every size have been seen once
                    continue
                for concurrency in args.concurrency:
                    n = 100 if family == "generate" else 500
                    asyncio.run(run_load(server.url, spec, names[run], n, concurrency, args.malformed, seed=1))
            before = resident_mb(server.process.pid)
            for family, (run, spec) in wanted.items():
                if family not in loads:
                    continue
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
                    write_records(args.results, records, TITLE, notes=NOTES)      # as it goes: nothing lost
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
    if args.mixed:
        records += mixed_only(args, specs, threads, machine)
    if args.baseline_src:
        records += baseline(args, specs, threads, machine, records)
    write_records(args.results, records, TITLE, notes=NOTES)
    return 0


def mixed_only(args, specs: dict, threads: int, machine: str) -> list[dict]:
    """The mixed loads, on a server of this version with the default limits of one request (MIXED_LIMITS)."""
    server = Server([run for run, _ in specs.values()], args.threads, ["--request-timeout", str(args.request_timeout)],
                    limits=MIXED_LIMITS)
    try:
        names = {run: Path(run).resolve().name for run, _ in specs.values()}
        return mixed_records(args, specs, names, server.url, f"{machine} (server: {args.threads or threads} model "
                             "threads)", "batched (this version)")
    finally:
        server.stop()


def mixed_records(args, specs: dict, names: dict, url: str, device: str, setting: str) -> list[dict]:
    """The mixed loads on the server at `url` (one per worst-case endpoint kind), as records."""
    classifier, small = specs["classify"]
    records = []
    for kind, (path, worst, what) in worst_cases(args, specs, names).items():
        if args.worst and kind not in args.worst:
            continue
        result = asyncio.run(mixed_load(url, path, worst, small, names[classifier], args.mixed_requests))
        print(json.dumps({"mixed": setting, "worst": kind, **{k: v for k, v in result.items()
                                                                  if k not in ("wrong", "worst")},
                          "worst_result": {k: str(v) for k, v in result["worst"].items()}}), flush=True)
        base = dict(task="serve", dataset=Path(classifier).name, split="", arch=f"classify + 1 worst {WORK[kind]}",
                    config=f"{setting}, concurrency 8", device=device, wall_s=round(result["wall_s"], 2))
        worst_note = (f"worst case: {what}: {result['worst']['status']} after {result['worst']['seconds']:.1f} s"
                      + ("" if result["worst"]["running_when_small_ones_ended"] else
                         " (it ended before the small requests did)"))
        records += [*(record(**base, metric=m, value=round(result[m], 2), note=worst_note)
                      for m in ("requests_per_s", "p50_ms", "p99_ms", "max_ms")),
                    record(**base, metric="wrong_answers", value=len(result["wrong"]), note=worst_note)]
        write_records(args.results, records, TITLE, notes=NOTES)              # as it goes: nothing lost
    return records


def baseline(args, specs: dict, threads: int, machine: str, records: list) -> list[dict]:
    """The generation and mixed loads against the earlier version's server (`--baseline-src`), and the ratios: the
    generation load on a server with LIMITS, the mixed ones on another with MIXED_LIMITS."""
    out = []
    device = f"{machine} (server: {args.threads or threads} model threads)"
    setting = f"earlier version ({Path(args.baseline_src).resolve().parent.name})"
    if "generate" in specs and not args.mixed_only:
        run, spec = specs["generate"]
        server = Server([run], args.threads, [], src=args.baseline_src)
        try:
            name = Path(run).resolve().name
            for concurrency in args.concurrency:                  # warm up, then the load
                asyncio.run(run_load(server.url, spec, name, 100, concurrency, args.malformed, seed=1))
            for concurrency in args.concurrency:
                result = asyncio.run(run_load(server.url, spec, name, args.generate_requests, concurrency,
                                              args.malformed))
                print(json.dumps({"family": "generate", "setting": setting, "concurrency": concurrency,
                                  **{k: v for k, v in result.items() if k != "wrong"}}), flush=True)
                base = dict(task="serve", dataset=Path(run).name, split="", arch="generate",
                            config=f"{setting}, concurrency {concurrency}", device=device,
                            wall_s=round(result["wall_s"], 2))
                out += [record(**base, metric=m, value=round(result[m], 2))
                        for m in ("requests_per_s", "p50_ms", "p99_ms")]
                now = [r for r in records if r["arch"] == "generate" and r["metric"] == "requests_per_s"
                       and r["config"] == f"batched, concurrency {concurrency}"]
                if now:
                    out.append(record(**{**base, "config": f"this version / earlier, concurrency {concurrency}"},
                                      metric="requests_per_s_ratio",
                                      value=round(now[0]["value"] / result["requests_per_s"], 2)))
        finally:
            server.stop()
    if args.mixed:
        server = Server([run for run, _ in specs.values()], args.threads, [], src=args.baseline_src,
                        limits=MIXED_LIMITS)
        try:
            names = {run: Path(run).resolve().name for run, _ in specs.values()}
            out += mixed_records(args, specs, names, server.url, device, setting)
        finally:
            server.stop()
    return out


if __name__ == "__main__":
    raise SystemExit(main())
