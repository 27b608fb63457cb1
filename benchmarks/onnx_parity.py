"""ONNX exports against PyTorch on the test sets of the README's benchmarks: the same answers, whole test sets.

    python benchmarks/onnx_parity.py --classifier runs/sst2 --tagger runs/pos --seq2seq runs/de-en --lm runs/demo

Each run is exported (`seqlab export --format onnx`, into a temporary directory) and served by both runtimes'
model objects, `seqlab.load(run)` and `seqlab.serve.onnx` (what `seqlab serve --runtime onnx` runs),
which are asked the same questions:

    classifier  SST test (sst/test.txt, all 2,210 sentences): the labels, and each class's probability
    tagger      UD English EWT test (2,077 sentences): the tags, and each tag's probability
    seq2seq     Multi30k test 2016 (1,000 German sentences): greedy and beam-5 translations, their scores, and
                the attention weights of the greedy ones
    lm          Tiny Shakespeare's last 2,000 lines: each line's per-token log-probabilities; greedy
                continuations (100 tokens) of the first 100 of those lines

and reports the share of identical answers and the largest absolute difference of the numbers (the target:
100% identical, differences under 1e-4). Writes benchmarks/results/onnx_parity.json and .md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import device_name, record, write_records  # noqa: E402

TITLE = "ONNX exports against PyTorch on the benchmarks' test sets"
NOTES = __doc__.split("\n\n", 1)[1]


def largest(pairs) -> float:
    """The largest absolute difference over pairs of equal-shaped number lists."""
    worst = 0.0
    for a, b in pairs:
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if a.shape != b.shape:
            return float("inf")
        if a.size:
            worst = max(worst, float(np.abs(a - b).max()))
    return worst


def sst_sentences(path: Path) -> list[str]:
    """The sentences of SST trees: the leaves, in order."""
    return [" ".join(t for t in line.replace("(", " ").replace(")", " ").split() if not t.isdigit())
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def conllu_sentences(path: Path) -> list[list[str]]:
    sentences, words = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            if words:
                sentences.append(words)
            words = []
        elif not line.startswith("#"):
            columns = line.split("\t")
            if columns[0].isdigit():                       # not multiword ranges (1-2) or empty nodes (8.1)
                words.append(columns[1])
    return sentences + ([words] if words else [])


def compare(family: str, torch_model, onnx_model, data: Path) -> list[tuple[str, str, float, int]]:
    """[(config, metric, value, items)] for one family."""
    if family == "classifier":
        texts = sst_sentences(data / "sst/test.txt")
        a, b = torch_model.classify(texts), onnx_model.classify(texts)
        same = sum(x.label == y.label for x, y in zip(a, b, strict=True))
        return [("sst test", "identical_labels_percent", 100 * same / len(texts), len(texts)),
                ("sst test", "max_abs_diff_probability",
                 largest(([x.probabilities[k] for k in sorted(x.probabilities)],
                          [y.probabilities[k] for k in sorted(y.probabilities)]) for x, y in zip(a, b, strict=True)),
                 len(texts))]
    if family == "tagger":
        sentences = conllu_sentences(data / "ud_english_ewt/en_ewt-ud-test.conllu")
        a, b = torch_model.tag_sentences(sentences), onnx_model.tag_sentences(sentences)
        same = sum([t for t, _ in x] == [t for t, _ in y] for x, y in zip(a, b, strict=True))
        return [("ud test", "identical_tag_sequences_percent", 100 * same / len(sentences), len(sentences)),
                ("ud test", "max_abs_diff_probability",
                 largest(([p for _, p in x], [p for _, p in y]) for x, y in zip(a, b, strict=True)), len(sentences))]
    if family == "seq2seq":
        texts = (data / "multi30k/tok/test_2016_flickr.lc.norm.tok.de").read_text(encoding="utf-8").splitlines()
        out = []
        for beam in (1, 5):
            a = torch_model.generate(texts, beam=beam, attention=beam == 1)
            b = onnx_model.generate(texts, beam=beam, attention=beam == 1)
            same = sum(x.text == y.text for x, y in zip(a, b, strict=True))
            config = f"multi30k test2016, beam {beam}"
            out += [(config, "identical_translations_percent", 100 * same / len(texts), len(texts)),
                    (config, "max_abs_diff_score",
                     largest(([x.score], [y.score]) for x, y in zip(a, b, strict=True) if x.text == y.text), same)]
            if beam == 1:
                out.append((config, "max_abs_diff_attention",
                            largest((x.attention, y.attention) for x, y in zip(a, b, strict=True) if x.text == y.text),
                            same))
        return out
    lines = [line for line in (data / "tinyshakespeare/input.txt").read_text(encoding="utf-8").splitlines()
             if line.strip()][-2000:]
    a = [torch_model.score(line) for line in lines]
    b = [onnx_model.score(line) for line in lines]
    same_tokens = sum([t for t, _ in x] == [t for t, _ in y] for x, y in zip(a, b, strict=True))
    prompts = lines[:100]
    same = sum(torch_model.generate(p, max_tokens=100, greedy=True) == onnx_model.generate(p, max_tokens=100,
                                                                                            greedy=True)
               for p in prompts)
    return [("shakespeare last 2,000 lines", "identical_tokens_percent", 100 * same_tokens / len(lines), len(lines)),
            ("shakespeare last 2,000 lines", "max_abs_diff_logprob",
             largest(([p for _, p in x], [p for _, p in y]) for x, y in zip(a, b, strict=True)), len(lines)),
            ("100 prompts, 100 greedy tokens", "identical_continuations_percent", 100 * same / len(prompts),
             len(prompts))]


def main() -> int:
    import seqlab
    from seqlab.export.onnx import export_onnx
    from seqlab.serve.onnx import load_exports

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--classifier", help="an SST-2 classifier run")
    parser.add_argument("--tagger", help="a UD English EWT tagger run")
    parser.add_argument("--seq2seq", help="a Multi30k German -> English run")
    parser.add_argument("--lm", help="a Tiny Shakespeare language model run")
    parser.add_argument("--data-dir", default="../shared/data")
    args = parser.parse_args()
    runs = {family: getattr(args, family) for family in ("classifier", "tagger", "seq2seq", "lm")
            if getattr(args, family)}
    if not runs:
        parser.error("give at least one of --classifier, --tagger, --seq2seq, --lm")
    records = []
    with tempfile.TemporaryDirectory() as scratch:
        for family, run in runs.items():
            start = time.perf_counter()
            export = Path(scratch) / Path(run).resolve().name
            export_onnx(run, export)
            onnx_model = next(iter(load_exports([export]).values())).trained
            results = compare(family, seqlab.load(run), onnx_model, Path(args.data_dir))
            wall = round(time.perf_counter() - start, 1)
            for config, metric, value, items in results:
                print(f"{family:<10} {config:<32} {metric:<34} {value:.6g}  ({items} items)", flush=True)
                records.append(record(task=family, dataset=Path(run).name, split="test", arch="onnx vs torch",
                                      config=config, metric=metric, value=round(value, 8), note=f"{items} items",
                                      wall_s=wall, device=device_name()))
            write_records("onnx_parity", records, TITLE, notes=NOTES)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
