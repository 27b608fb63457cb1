"""Decoding speed of a trained sequence-to-sequence model: sentences per second, greedy and beam 5.

    python benchmarks/seq2seq_speed.py --run runs/bench/multi30k-transformer
    python benchmarks/seq2seq_speed.py --run runs/bench/multi30k-gru-dot --sentences 1000 --batch-size 64

Decodes the sources of multi30k test_2016_flickr (German, tokenised) with `TrainedSeq2Seq.generate_pairs`
(length-sorted batches, everything but reading the file timed), side by side in one run with:
- a plain PyTorch greedy loop over the same batches (encode, then step + argmax until every row has
  produced </s> or reached the same limit), to show what the search's bookkeeping costs;
- beam 5 one sentence at a time (the first --single sentences), to show what batching buys.
Writes benchmarks/results/seq2seq_speed.json and .md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
import seqlab  # noqa: E402
from common import device_name, record, write_records  # noqa: E402
from seqlab.data.batching import length_batches  # noqa: E402
from seqlab.data.vocab import EOS  # noqa: E402
from seqlab.decoding.processors import BlockTokens  # noqa: E402
from seqlab.decoding.search import SearchOptions, max_lengths  # noqa: E402
from seqlab.families.seq2seq.parallel import read_aligned  # noqa: E402


def timed(work, repeats: int = 1) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


@torch.no_grad()
def plain_greedy(model, batches) -> None:
    """The least a greedy decoder can do: argmax at every step, stop when every row has ended."""
    for source, lengths in batches:
        limit = max_lengths(lengths, SearchOptions(), model)
        state = model.start(source, lengths)
        tokens = torch.full((source.size(0),), model.start_token, dtype=torch.long)
        ended = torch.zeros(source.size(0), dtype=torch.bool)
        for _ in range(int(limit.max())):
            logits, state, _ = model.step(tokens, state)
            tokens = BlockTokens()(logits).argmax(-1)                     # never <pad>, <s>, <sep>, as the search
            ended |= tokens == EOS
            if ended.all():
                break


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, help="a trained multi30k run directory")
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--sentences", type=int, default=1000, help="test sentences to decode")
    parser.add_argument("--single", type=int, default=100, help="sentences decoded one at a time (beam 5)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2, help="timings repeated, the best kept")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = seqlab.load(args.run)
    folder = Path(args.data_dir)
    pairs = read_aligned(folder / "multi30k/tok/test_2016_flickr.lc.norm.tok.de", None, "test file")[:args.sentences]
    encoded = model.vocabulary.encode(pairs)
    groups = length_batches([len(e.source) for e in encoded], args.batch_size, None)
    collated = (model.vocabulary.collate([encoded[i] for i in g]) for g in groups)
    batches = [(b.source, b.source_lengths) for b in collated]
    n = len(pairs)
    figures = {}
    for name, options in (("greedy", SearchOptions(beam=1)), ("beam5", SearchOptions(beam=5))):
        seconds = timed(lambda options=options: model.generate_pairs(pairs, options, args.batch_size), args.repeats)
        figures[name] = n / seconds
    figures["plain_greedy"] = n / timed(lambda: plain_greedy(model.model, batches), args.repeats)
    single = pairs[:args.single]
    seconds = timed(lambda: [model.generate_pairs([p], SearchOptions(beam=5), 1) for p in single], 1)
    figures["beam5_one_at_a_time"] = len(single) / seconds
    arch = model.config.model.arch + (f"-{model.config.model.attention}" if model.config.model.attention != "none"
                                      else "")
    common = {"task": "seq2seq", "dataset": "multi30k-de-en", "split": "test", "arch": arch,
              "config": Path(args.run).name, "params": model.model.num_parameters(),
              "device": device_name("cpu"), "batch_size": args.batch_size}
    rows = [record(**common, metric=f"sentences_per_s_{name}", value=round(value, 1))
            for name, value in figures.items()]
    rows.append(record(**common, metric="greedy_vs_plain_loop",
                       value=round(figures["greedy"] / figures["plain_greedy"], 3)))
    rows.append(record(**common, metric="beam5_batched_vs_one_at_a_time",
                       value=round(figures["beam5"] / figures["beam5_one_at_a_time"], 2)))
    write_records("seq2seq_speed", rows, "Sequence to sequence decoding speed",
                  notes="Sentences per second decoding multi30k test_2016_flickr (German -> English), batches of "
                        "length-sorted sentences, CPU. `plain_greedy` is a bare argmax loop over the same batches; "
                        "`beam5_one_at_a_time` decodes the first --single sentences in batches of one.")
    for r in rows:
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
