"""onnxruntime vs PyTorch eager: the same task on the same inputs (batched alike, shortest first), one model per
family, with 1 and 2 threads; the time of the whole task (text in, labels / tags / text out), best of
--repeats, and the ratio torch / onnxruntime (above 1: the export is faster).

    python benchmarks/onnx_speed.py                          # small models trained on the test fixtures
    python benchmarks/onnx_speed.py --recipe seq2seq-transformer --recipe seq2seq-lm   # some of them
    python benchmarks/onnx_speed.py --run runs/ner --run runs/de-en   # given runs (their family's inputs)

The fixture models: a BiLSTM classifier (64 wide), a BiLSTM-CRF tagger with character features (64), a 2-layer
LSTM LM (128) generating 200 greedy tokens, and three encoder-decoders translating greedily: a GRU with dot
attention (64), a 2-layer transformer (64 wide, 4 heads) and the separator LM (2 layers, 64 wide). The
transformers' exports re-read their target prefix (and the lm its source) at every step where PyTorch
keeps a KV cache (`seqlab.export.onnx`).
Results: benchmarks/results/onnx_speed.json and .md (`common.write_records`).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

import seqlab  # noqa: E402
from common import device_name, record, write_records  # noqa: E402
from seqlab.cli.main import main as seqlab_main  # noqa: E402
from seqlab.export.onnx import export_onnx  # noqa: E402
from seqlab.export.runtime import load_export  # noqa: E402
from seqlab.families.seq2seq.parallel import read_aligned  # noqa: E402
from seqlab.registry import run_family  # noqa: E402

FIXTURES = Path(__file__).parent.parent / "tests" / "fixtures"
PAIRS = FIXTURES / "seq2seq"
QUIET = ["--no-progress", "--dropout", "0", "--max-steps", "10"]
RECIPES = {
    "classifier": ["classifier", "--train", str(FIXTURES / "classify" / "sentiment.tsv"), "--dev",
                   str(FIXTURES / "classify" / "sentiment.tsv"), "--format", "tsv", "--arch", "lstm",
                   "--bidirectional", "--embedding-size", "64", "--hidden-size", "64"],
    "tagger": ["tagger", "--train", str(FIXTURES / "ner.conll"), "--dev", str(FIXTURES / "ner.conll"), "--format",
               "conll", "--embedding-size", "64", "--hidden-size", "64", "--crf"],
    "lm": ["lm", "--train", str(FIXTURES / "shakespeare_train.txt"), "--valid", str(FIXTURES / "shakespeare_valid.txt"),
           "--arch", "lstm", "--embedding-size", "128", "--hidden-size", "128", "--layers", "2"],
    "seq2seq": ["seq2seq", "--train-src", str(PAIRS / "train.src"), "--train-tgt", str(PAIRS / "train.tgt"),
                "--dev-src", str(PAIRS / "dev.src"), "--dev-tgt", str(PAIRS / "dev.tgt"), "--arch", "gru",
                "--attention", "dot", "--embedding-size", "64", "--hidden-size", "64"],
}
TRANSFORMER = ["--train-src", str(PAIRS / "train.src"), "--train-tgt", str(PAIRS / "train.tgt"), "--dev-src",
               str(PAIRS / "dev.src"), "--dev-tgt", str(PAIRS / "dev.tgt"), "--embedding-size", "64",
               "--num-heads", "4", "--ff-size", "128", "--num-layers", "2", "--max-positions", "64"]
RECIPES["seq2seq-transformer"] = ["seq2seq", *TRANSFORMER, "--arch", "transformer"]
RECIPES["seq2seq-lm"] = ["seq2seq", *TRANSFORMER, "--arch", "lm", "--shared-vocab"]


def workloads(task: str):
    """(what, torch call, onnx call) on the family's fixture inputs, as functions of the loaded models."""
    if task == "classifier":
        texts = [line.split("\t")[1] for line in (FIXTURES / "classify" / "sentiment.tsv").read_text().splitlines()[1:]]
        texts = (texts * 20)[:512]
        return f"{len(texts)} documents", lambda m: m.classify(texts), lambda m: m.classify(texts)
    if task == "tagger":
        sentences = [line.split()[0] for line in (FIXTURES / "ner.conll").read_text().splitlines() if line.strip()
                     and not line.startswith("-DOCSTART-")]
        sentences = [sentences[k:k + 12] for k in range(0, len(sentences), 12)] * 20
        return (f"{len(sentences)} sentences", lambda m: m.tag_sentences(sentences),
                lambda m: m.tag_sentences(sentences))
    if task == "lm":
        return ("200 greedy tokens", lambda m: m.generate("ROMEO:", max_tokens=200, greedy=True),
                lambda m: m.generate("ROMEO:", max_tokens=200))
    sources = [p.source for p in read_aligned(PAIRS / "test.src", PAIRS / "test.tgt")] * 4
    return (f"{len(sources)} sources, greedy", lambda m: m.translate(sources, beam=1),
            lambda m: m.translate(sources))


def best_of(function, repeats: int) -> float:
    function()                                                       # warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="append", default=[], help="a trained run (repeatable); default: fixtures")
    parser.add_argument("--recipe", action="append", choices=tuple(RECIPES), default=[],
                        help="without --run: train and time only these fixture models (repeatable; default: all)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="onnx_speed_"))
    runs = [Path(r) for r in args.run]
    if not runs:
        for name in args.recipe or RECIPES:
            assert seqlab_main(["train", *RECIPES[name], "--output", str(work / name), *QUIET]) == 0
            runs.append(work / name)
    records, words = [], {}
    for run in runs:
        task = run_family(run).name
        export_onnx(run, work / "exports" / run.name, overwrite=True)
        what, with_torch, with_onnx = workloads(task)
        trained = seqlab.load(run)
        arch = trained.config.model.encoder if task == "tagger" else trained.config.model.arch
        for threads in (1, 2):
            torch.set_num_threads(threads)
            exported = load_export(work / "exports" / run.name, threads=threads)
            torch_s = best_of(lambda: with_torch(trained), args.repeats)          # noqa: B023
            onnx_s = best_of(lambda: with_onnx(exported), args.repeats)           # noqa: B023
            base = {"task": task, "dataset": "fixtures" if not args.run else str(run), "split": what, "arch": arch,
                    "config": f"{threads} thread{'s' if threads > 1 else ''}", "params": trained.model.num_parameters(),
                    "device": device_name()}
            records += [record(**base, metric="torch_s", value=round(torch_s, 4)),
                        record(**base, metric="onnxruntime_s", value=round(onnx_s, 4)),
                        record(**base, metric="speedup (torch / onnxruntime)", value=round(torch_s / onnx_s, 2))]
            print(f"{task} {arch} threads={threads}: torch {torch_s:.4f}s, onnxruntime {onnx_s:.4f}s, "
                  f"ratio {torch_s / onnx_s:.2f}", flush=True)
        if task == "seq2seq":                  # how long the outputs are: the transformers re-read them each step
            outputs = with_onnx(exported)
            words[arch] = sum(len(text.split()) for text in outputs) / len(outputs)
    lengths = ", ".join(f"{arch} {n:.1f}" for arch, n in words.items())
    write_records("onnx_speed", records, "onnxruntime vs PyTorch eager (seqlab export --format onnx)",
                  "The whole task on the same inputs, best of --repeats (in the command; default 3) after a warm-up; "
                  "speedup above 1: the export is "
                  "faster. Both sides run the same Python around the model (batching, decoding loop); the tagger's "
                  "CRF (Viterbi and marginals) runs per sentence in numpy on the export, batched in torch. The "
                  "exported transformer encoder-decoder and separator LM re-read their target prefix (the lm its "
                  "source too) at every step where PyTorch extends a KV cache, so their cost grows with the output"
                  + (f"; the greedy outputs here, in words per source: {lengths}" if lengths else "") + ".")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
