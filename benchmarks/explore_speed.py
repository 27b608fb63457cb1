"""How long `seqlab explore`'s views take to compute and how large they are, on this machine: for one small run per
family and architecture, each view of a text of about 200 tokens (the run's own development texts, joined), and
the server's answer to POST /v1/explain with every view over HTTP on 127.0.0.1.

    python benchmarks/explore_speed.py                 # tiny runs trained here on `seqlab examples --size tiny`
    python benchmarks/explore_speed.py --runs runs/lm runs/ner --repeats 5

Each run is trained for 5 steps (the views' cost depends on the architecture and the sizes, not on what the
model learnt): embeddings and hidden states of 32 (64 for the transformers' width), each family's default
number of layers (2 for the transformers), a bidirectional encoder for the classifier and the translator. The text is
cut to the words that the model reads as about --tokens tokens. For each view: the median of --repeats calls of
`seqlab.load(run).explain(text, views=[view])` (latency_p50_ms) and the bytes of its JSON as the server sends it
(payload_bytes); for each run: the median time of --repeats POST /v1/explain with every view (the server a
separate process, `seqlab serve RUN... --threads 1`, answered over a real socket), and its answer's bytes.
The options are the defaults (top_k 5, units 32, greedy generation of 12 tokens, beam 4).
Then the page, drawn: the same server's page at /#explore in Debian's headless Chromium (through Playwright; every
request not to 127.0.0.1 blocked; a 1200x900 window), the run chosen, the text typed, Explore pressed with every view
checked, --repeats times after one untimed: for each view, the median of the time its drawing took in the page
(static/explore.js's `data-draw-ms`: building the view's elements, canvas and SVG, before the browser lays them out;
render_p50_ms), and for each run, the median time from the click to every view drawn and painted (the server's
answer included; latency_p50_ms of "Explore in Chromium"). --no-browser skips it, and so does a machine without
Playwright (pip install -e '.[browser]') or Chromium (/usr/bin/chromium, or SEQLAB_CHROMIUM).
Writes benchmarks/results/explore_speed.json and .md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from common import device_name, free_port, record, write_records  # noqa: E402

TITLE = "seqlab explore: the time and size of each view (200 tokens, CPU)"
NOTES = __doc__.split("\n\n", 1)[1]
SMALL = ["--embedding-size", "32", "--hidden-size", "32", "--max-steps", "5", "--no-progress"]
WIDE = ["--embedding-size", "64", "--max-steps", "5", "--no-progress", "--layers", "2"]
# (run name, `seqlab examples` task, the training command's options after `seqlab train`)
RUNS = [
    ("lm-rnn", "lm", ["lm", "--tokenizer", "char", "--arch", "rnn", *SMALL]),
    ("lm-lstm", "lm", ["lm", "--tokenizer", "char", "--arch", "lstm", *SMALL]),
    ("lm-gru", "lm", ["lm", "--tokenizer", "char", "--arch", "gru", *SMALL]),
    ("lm-transformer", "lm", ["lm", "--tokenizer", "char", "--arch", "transformer", "--context", "256", *WIDE]),
    ("ner-lstm-crf", "ner", ["tagger", "--format", "conll", "--encoder", "lstm", *SMALL]),
    ("ner-transformer", "ner", ["tagger", "--format", "conll", "--encoder", "transformer", *WIDE]),
    ("sentiment-bigru", "sentiment", ["classifier", "--format", "tsv", "--arch", "gru", "--bidirectional", *SMALL]),
    ("sentiment-transformer", "sentiment", ["classifier", "--format", "tsv", "--arch", "transformer", *WIDE]),
    ("translation-bigru-dot", "translation", ["seq2seq", "--arch", "gru", "--attention", "dot", "--bidirectional",
                                              *SMALL]),
    ("translation-transformer", "translation", ["seq2seq", "--arch", "transformer", "--num-layers", "2",
                                                *WIDE[:-2]]),
]
DATA = {"lm": ("--train", "train.txt", "--valid", "valid.txt"),
        "ner": ("--train", "train.conll", "--dev", "dev.conll"),
        "sentiment": ("--train", "train.tsv", "--dev", "dev.tsv"),
        "translation": ("--train-src", "train.src", "--train-tgt", "train.tgt", "--dev-src", "dev.src",
                        "--dev-tgt", "dev.tgt")}


def seqlab(*argv) -> None:
    done = subprocess.run([sys.executable, "-m", "seqlab", *map(str, argv)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"seqlab {' '.join(map(str, argv))} failed:\n{done.stderr[-2000:]}")


def train_runs(folder: Path) -> list[Path]:
    """The tiny runs of `RUNS`, trained under `folder` on `seqlab examples --size tiny` data."""
    runs = []
    for name, task, argv in RUNS:
        data = folder / "data" / task
        if not data.exists():
            seqlab("examples", task, data, "--size", "tiny")
        files = [part if part.startswith("--") else data / part for part in DATA[task]]
        started = time.perf_counter()
        if not (folder / name / "model.safetensors").exists():
            seqlab("train", *argv, *files, "--output", folder / name)
        print(f"trained {name} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        runs.append(folder / name)
    return runs


def text_of(trained, family, tokens: int) -> tuple[str, int]:
    """The run's development texts joined, cut to the words that the model reads as about `tokens` tokens: (the
    text, the tokens read)."""
    from seqlab.contract.views import MAX_TEXT_CHARS, explain

    examples = family.part("explain").examples(trained, 200) or ["the cat sat on the mat ."]
    words = " ".join(examples).split()
    while len(words) < 4 * tokens:
        words += words
    first = available(trained, family)[:1]           # the view that counts the tokens read
    count, read = tokens, 0
    for _ in range(4):                              # words -> tokens differ by tokenizer: three corrections
        text = " ".join(words[:count])[:MAX_TEXT_CHARS]
        read = len(explain(trained, text, views=first).tokens)
        if abs(read - tokens) <= tokens // 20:
            break
        count = max(1, round(count * tokens / max(read, 1)))
    return text, read


def available(trained, family) -> list[str]:
    """The views of the model's architecture."""
    from seqlab.contract.views import choose

    part = family.part("explain")
    return [spec.name for spec in choose(part.VIEWS, part.arch(trained), None)]


def payload(explanation) -> int:
    """The bytes of its JSON as the server sends it (rounded to `DIGITS`, at most `MAX_CELLS` numbers)."""
    from seqlab.contract.views import DIGITS, MAX_CELLS

    return len(json.dumps(explanation.to_json(DIGITS, MAX_CELLS), ensure_ascii=False, allow_nan=False,
                          separators=(",", ":")).encode())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", nargs="+", help="run directories to measure (default: tiny ones trained here)")
    parser.add_argument("--tokens", type=int, default=200, help="the text's length in tokens (default: 200)")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per figure, their median reported")
    parser.add_argument("--no-browser", action="store_true", help="skip the page's drawing in headless Chromium")
    parser.add_argument("--workdir", help="where the tiny runs are trained, and kept for the next time (default: "
                        "a temporary folder)")
    args = parser.parse_args()

    import torch

    import seqlab
    from seqlab.contract.views import explain
    from seqlab.registry import run_family

    torch.set_num_threads(1)
    scratch = tempfile.TemporaryDirectory(prefix="explore-speed-")
    runs = [Path(r) for r in args.runs] if args.runs else train_runs(Path(args.workdir or scratch.name))
    device, records, texts, reads, archs = device_name("cpu"), [], {}, {}, {}
    for run in runs:
        family, trained = run_family(run), seqlab.load(run)
        text, read = text_of(trained, family, args.tokens)
        texts[run.name], reads[run.name] = text, read
        archs[run.name] = f"{family.name} {family.part('explain').arch(trained)}"
        base = {"task": "explore", "dataset": run.name, "split": "", "arch": archs[run.name],
                "device": device}
        for view in available(trained, family):
            times, found = [], None
            for _ in range(args.repeats):
                started = time.perf_counter()
                found = explain(trained, text, [view])
                times.append(time.perf_counter() - started)
            median = statistics.median(times)
            config = f"{view} view, {read} tokens"
            records += [record(**base, config=config, metric="latency_p50_ms", value=round(1000 * median, 1),
                               tokens_per_s=round(read / median), wall_s=round(sum(times), 3)),
                        record(**base, config=config, metric="payload_bytes", value=payload(found))]
            print(f"{run.name:24} {view:16} {1000 * median:8.1f} ms {payload(found):9,} bytes", file=sys.stderr)
    chromium = None if args.no_browser else browser_at()
    with served(runs) as url:
        records += http_figures(url, runs, texts, args.repeats, device)
        if chromium:
            records += browser_figures(url, chromium, runs, texts, reads, archs, args.repeats, device)
    write_records("explore_speed", records, TITLE, NOTES)
    return 0


@contextlib.contextmanager
def served(runs: list[Path]):
    """`seqlab serve` of all the runs in another process (one thread, texts up to 5000 characters): its url."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "seqlab", "serve", *map(str, runs), "--port", str(port),
                               "--threads", "1", "--max-chars", "5000"], stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                httpx.get(f"{url}/healthz", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.communicate(timeout=30)


def http_figures(url: str, runs: list[Path], texts: dict[str, str], repeats: int, device: str) -> list[dict]:
    """POST /v1/explain with every view, to the server at `url`: the median time of `repeats` and the answer's
    bytes, per run."""
    records = []
    with httpx.Client(timeout=120) as client:
        for run in runs:
            body = {"model": run.name, "text": texts[run.name]}
            client.post(f"{url}/v1/explain", json=body)                                      # warm
            times, size, answer = [], 0, None
            for _ in range(repeats):
                started = time.perf_counter()
                answer = client.post(f"{url}/v1/explain", json=body)
                times.append(time.perf_counter() - started)
                if answer.status_code != 200:
                    raise SystemExit(f"POST /v1/explain {run.name}: {answer.status_code} {answer.text[:300]}")
                size = len(answer.content)
            found = answer.json()
            median = statistics.median(times)
            config = f"POST /v1/explain, all {len(found['views'])} views, {len(found['tokens'])} tokens"
            base = {"task": "explore", "dataset": run.name, "split": "", "device": device, "config": config,
                    "arch": f"{found['family']} {found['arch']}"}
            records += [record(**base, metric="latency_p50_ms", value=round(1000 * median, 1),
                               wall_s=round(sum(times), 3)),
                        record(**base, metric="payload_bytes", value=size)]
            print(f"{run.name:24} {'HTTP, all':16} {1000 * median:8.1f} ms {size:9,} bytes", file=sys.stderr)
    return records


def browser_at() -> Path | None:
    """Debian's Chromium (SEQLAB_CHROMIUM names another), if it and Playwright are here; else None, said once."""
    chromium = Path(os.environ.get("SEQLAB_CHROMIUM", "/usr/bin/chromium"))
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        print("the page's drawing is not measured: Playwright is missing (pip install -e '.[browser]')",
              file=sys.stderr)
        return None
    if not chromium.is_file():
        print(f"the page's drawing is not measured: no Chromium at {chromium} (apt-get install chromium, or set "
              "SEQLAB_CHROMIUM)", file=sys.stderr)
        return None
    return chromium


# In the page: press Explore, wait until the answer is drawn (the button enabled again) and the next frame painted;
# the milliseconds since the click, the error shown if any, and each view's (name, kind, data-draw-ms).
EXPLORE = """async () => {
  const run = document.getElementById("explore-run");
  const started = performance.now();
  const done = new Promise((resolve) => {
    const watch = new MutationObserver(() => { if (!run.disabled) { watch.disconnect(); resolve(); } });
    watch.observe(run, { attributes: true, attributeFilter: ["disabled"] });
  });
  run.click();
  await done;
  await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
  const ms = performance.now() - started;
  const views = [...document.querySelectorAll("#explore-results article.view")]
    .map((v) => [v.dataset.view, v.dataset.kind, Number(v.dataset.drawMs)]);
  return { ms, error: document.getElementById("explore-error").textContent, views };
}"""


def browser_figures(url: str, chromium: Path, runs: list[Path], texts: dict[str, str], reads: dict[str, int],
                    archs: dict[str, str], repeats: int, device: str) -> list[dict]:
    """Each run explored in the page at `url`/#explore in headless Chromium with every view, `repeats` times after
    one untimed: the median time each view's drawing took (render_p50_ms), and from the click to all drawn."""
    from playwright import sync_api

    records = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium), args=["--no-sandbox"])
        try:
            page = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
            page.set_default_timeout(120_000)
            page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(f"{url}/")
                       or route.request.url.startswith("data:") else route.abort())
            page.goto(f"{url}/#explore")
            page.wait_for_selector("#explore-model option", state="attached")
            for run in runs:
                page.select_option("#explore-model", run.name)
                page.fill("#explore-text", texts[run.name])
                page.eval_on_selector_all("#explore-view-list input:not(:disabled)",
                                          "boxes => boxes.forEach((box) => { box.checked = true; })")
                found, times, draws = None, [], {}
                for attempt in range(repeats + 1):                              # the first untimed
                    found = page.evaluate(EXPLORE)
                    if found["error"]:
                        raise SystemExit(f"Explore {run.name} in the page: {found['error']}")
                    if attempt:
                        times.append(found["ms"] / 1000)
                        for view, kind, ms in found["views"]:
                            draws.setdefault((view, kind), []).append(ms)
                base = {"task": "explore", "dataset": run.name, "split": "", "arch": archs[run.name], "device": device}
                for (view, kind), ms in draws.items():
                    median = statistics.median(ms)
                    records.append(record(**base, config=f"{view} view ({kind}), {reads[run.name]} tokens, "
                                          "drawn in Chromium", metric="render_p50_ms", value=round(median, 1)))
                    print(f"{run.name:24} {view:16} {median:8.1f} ms drawn ({kind})", file=sys.stderr)
                median = statistics.median(times)
                records.append(record(**base, config=f"Explore in Chromium, all {len(draws)} views, "
                                      f"{reads[run.name]} tokens: click to all drawn", metric="latency_p50_ms",
                                      value=round(1000 * median, 1), wall_s=round(sum(times), 3)))
                print(f"{run.name:24} {'page, all':16} {1000 * median:8.1f} ms click to drawn", file=sys.stderr)
        finally:
            browser.close()
    return records


if __name__ == "__main__":
    sys.exit(main())
