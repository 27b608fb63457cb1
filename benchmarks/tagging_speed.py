"""Tagging speed on CPU: words per second of a trained tagger over a whole test file, batched.

    python benchmarks/tagging_speed.py --run runs/bench/ud-pos-bilstm-char \
        --file ../shared/data/ud_english_ewt/en_ewt-ud-test.conllu --format conllu
    python benchmarks/tagging_speed.py --run runs/bench/conll2003-ner-bilstm-crf-char \
        --file ../shared/data/conll2003/test.txt --format conll

Times `TrainedTagger.tag_sentences` (what `seqlab tag` and `tagger.tag` run: batching, the encoder,
Viterbi or argmax, probabilities) over every sentence of the file, in rounds that alternate the
batched call (--batch-size sentences per batch) with one sentence at a time over the same file, so
the ratio between them is measured side by side. Reading the file is not timed. Writes
benchmarks/results/tagging_speed.json and .md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
import seqlab  # noqa: E402
from common import device_name, record, write_records  # noqa: E402
from seqlab.families.tagger.conll import read_labelled  # noqa: E402
from tagging_quality import describe  # noqa: E402


def words_per_second(tagger, sentences: list[list[str]], batch_size: int) -> float:
    words = sum(len(s) for s in sentences)
    start = time.perf_counter()
    tagger.tag_sentences(sentences, batch_size)
    return words / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, help="a trained tagger's run directory")
    parser.add_argument("--file", required=True, help="the sentences to tag (a labelled test file)")
    parser.add_argument("--format", choices=("conllu", "conll"), required=True)
    parser.add_argument("--dataset", help="the dataset's name in the results (default: the file's folder)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--unbatched-sentences", type=int, default=500,
                        help="sentences tagged one at a time per round (the unbatched baseline)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    tagger = seqlab.load(args.run)
    sentences = [s.tokens for s in read_labelled(args.file, args.format, None, "file")]
    few = sentences[:: max(1, len(sentences) // args.unbatched_sentences)][: args.unbatched_sentences]
    tagger.tag_sentences(sentences[:200], args.batch_size)                     # warm-up
    batched, single = [], []
    for _ in range(args.rounds):
        batched.append(words_per_second(tagger, sentences, args.batch_size))
        single.append(words_per_second(tagger, few, 1))
    fast, slow = statistics.median(batched), statistics.median(single)
    print(f"{args.run}: {fast:,.0f} words/s batched ({args.batch_size} sentences), {slow:,.0f} words/s one "
          f"sentence at a time; {fast / slow:.1f}x; rounds {[round(x) for x in batched]}")
    common = {"task": "tagging-speed", "dataset": args.dataset or Path(args.file).parent.name, "split": "test",
              "arch": describe(tagger.config), "config": Path(args.run).name, "params": tagger.model.num_parameters(),
              "device": device_name("cpu"), "words": sum(len(s) for s in sentences)}
    records = [record(**common, metric=f"words_per_s_batch{args.batch_size}", value=fast,
                      rounds=[round(x) for x in batched], target=10_000.0),
               record(**common, metric="words_per_s_unbatched", value=slow, rounds=[round(x) for x in single]),
               record(**common, metric="batched_over_unbatched", value=fast / slow)]
    write_records("tagging_speed", records, "Tagging speed on CPU",
                  notes="Words per second of `TrainedTagger.tag_sentences` over the whole test file (median of "
                        "the rounds), batched against one sentence at a time, alternating in one process. "
                        "The issue's target is 10,000 words/s on 2 cores.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
