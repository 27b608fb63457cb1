"""Training-data leakage of trained seqlab language models (`seqlab.harms.memorization`): extraction of
training text from unprompted samples (Carlini et al. 2021) and extractable memorisation from training
prefixes (Carlini et al. 2023), each run against the training file it was trained on.

    nice -n 5 python benchmarks/memorization.py --run /work/main/runs/wt2-lstm-1epoch --data-dir ../shared/data

Each run's training file is found under --data-dir by the dataset its config names (wikitext-2 or ptb), or at
the path in its config. With --reference auto, a run is also ranked against another given run trained on the
same file (the next one in the order given). Records go to benchmarks/results/memorization.json and .md:
metric `extraction_top100` (split: the ranking), `samples_with_match` (split: all samples), `windows_with_match`
(the chance level: as many windows of the validation text, same length, with a training match) and
`memorized_pct` / `token_match_pct` (split: the prefix length k); config: the run's name.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
import seqlab  # noqa: E402
from common import device_name, record, write_records  # noqa: E402
from seqlab.data.readers import read_lines  # noqa: E402
from seqlab.harms.memorization import (  # noqa: E402
    TrainingIndex,
    audit_memorization,
    default_match_length,
    format_table,
)

FILES = {"wikitext-2": {"train": "wikitext-2/train.txt", "valid": "wikitext-2/valid.txt"},
         "ptb": {"train": "ptb/ptb.train.txt", "valid": "ptb/ptb.valid.txt"}}


def data_file(run: Path, data_dir: Path, split: str = "train") -> tuple[str, Path]:
    """(dataset name, file) of a run's split: its config's file, found again under `data_dir`."""
    configured = Path(json.loads((run / "config.json").read_text())["data"][split])
    for name, files in FILES.items():
        if name in str(configured):
            return name, data_dir / files[split]
    return configured.parent.name, configured


def chance_matches(run: Path, train: Path, valid: Path, windows: int, length: int, seed: int) -> dict:
    """The calibration the extraction figures need: of `windows` random windows of `length` units of the
    validation text (human text the model never trained on), how many contain a training substring of at least
    L units. Common phrases match by chance; a model's samples matching no more often than this show no
    memorisation by this test."""
    lm = seqlab.load(run)
    index = TrainingIndex.from_lines(read_lines(train, "training file"), lm.tokenizer,
                                     default_match_length(lm.unit))
    stream = index.units("\n".join(read_lines(valid, "validation file")), lm.tokenizer)[0]
    starts = np.random.default_rng(seed).choice(len(stream) - length, size=windows, replace=False)
    found = sum(index.find_codes(stream[s:s + length]) is not None for s in starts)
    return {"windows": windows, "length": length, "with_match": int(found), "match_length": index.length}


def content_hits(hits: list[dict]) -> int:
    """The hits whose matched training substring lies within one line and holds no `<unk>`: text rather than
    wikitext's heading markup (`= = Reception = =` between blank lines) or runs of `<unk>`."""
    return sum("\n" not in h["match"]["text"] and "<unk>" not in h["match"]["text"] for h in hits)


def shown(text: str) -> str:
    return text.replace("\n", " ⏎ ")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="append", required=True, help="a language model's run directory (repeat)")
    parser.add_argument("--data-dir", default="../shared/data", help="the folder holding wikitext-2/ and ptb/")
    parser.add_argument("--reference", choices=("none", "auto"), default="auto",
                        help="auto: rank by the ratio to another given run of the same training file (default)")
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--sequences", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--output", default="/tmp/memorization-benchmark", help="where each audit's own files go")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    runs = [Path(r) for r in args.run]
    found = {run: data_file(run, Path(args.data_dir)) for run in runs}
    records, sections = [], []
    for run in runs:
        dataset, train = found[run]
        others = [r for r in runs if r != run and found[r][1] == train]
        reference = None
        if args.reference == "auto" and others:
            later = [r for r in others if runs.index(r) > runs.index(run)]
            reference = (later or others)[0]
        start = time.perf_counter()
        result, paths = audit_memorization(run, train, Path(args.output) / run.name, reference, args.samples,
                                           sequences=args.sequences, batch_size=args.batch_size, seed=args.seed,
                                           device=args.device)
        wall = time.perf_counter() - start
        config = json.loads((run / "config.json").read_text())
        arch = f"{config['model']['arch']} ({config['data']['tokenizer']})"
        common = {"task": "lm-memorization", "dataset": dataset, "arch": arch, "config": run.name,
                  "wall_s": round(wall, 1), "device": device_name(args.device), "seed": args.seed}
        ex, mem = result["extraction"], result["memorization"]
        for name, ranking in ex["rankings"].items():
            records.append(record(**common, split=f"ranking: {name}", metric="extraction_top100",
                                  value=ranking["extraction_top100"], top=ranking["top"], samples=ex["samples"],
                                  distinct=ranking["distinct_matches"], content=content_hits(ranking["hits"]),
                                  match_length=ex["match_length"],
                                  sample_length=ex["length"], top_k=ex["top_k"],
                                  reference=str(reference) if name == "reference" else None))
        records.append(record(**common, split="all samples", metric="samples_with_match", value=ex["with_match"],
                              samples=ex["samples"], match_length=ex["match_length"], sample_length=ex["length"],
                              top_k=ex["top_k"]))
        chance = chance_matches(run, train, data_file(run, Path(args.data_dir), "valid")[1], ex["samples"],
                                ex["length"], args.seed)
        records.append(record(**common, split="valid windows (chance)", metric="windows_with_match",
                              value=chance["with_match"], windows=chance["windows"], window_length=chance["length"],
                              match_length=chance["match_length"]))
        for k, row in mem["by_prefix"].items():
            for metric in ("memorized_pct", "token_match_pct"):
                records.append(record(**common, split=f"prefix {k}", metric=metric, value=round(row[metric], 2),
                                      sequences=mem["sequences"], suffix_length=mem["suffix_length"]))
        text = (f"{run.name} ({arch}) against {train}" + (f", reference {reference.name}" if reference else "")
                + f"; {wall:.0f} s:\n\n```\n{format_table(result)}\n```\n\nChance level: {chance['with_match']:,} "
                f"of {chance['windows']:,} random {chance['length']}-{ex['unit']} windows of the validation text "
                f"contain a training substring of >= {chance['match_length']} {ex['unit']}s.")
        examples = [h for r in ex["rankings"].values() for h in r["hits"][:3]]
        if examples:
            text += ("\n\nFirst extracted samples of each ranking (the matched training substring, ⏎ a line break; "
                     "its length in units):\n\n" + "\n".join(
                         f"- `{shown(h['match']['text'][:200])}` ({h['match']['length']}, training line "
                         f"{h['match']['train_line']})" for h in examples))
            text += "\n\nContent matches (within one line, no `<unk>`) among the hits: " + ", ".join(
                f"{name} {content_hits(r['hits'])}" for name, r in ex["rankings"].items()) + "."
            content = [h for r in ex["rankings"].values() for h in r["hits"] if content_hits([h])]
            if content:
                text += " They are:\n\n" + "\n".join(sorted({f"- `{h['match']['text']}`" for h in content}))
        sections.append(text)
        print(text, flush=True)
    notes = ("extraction_top100: of the 100 lowest-ranked of the samples (drawn from a line start, top-k sampling), "
             "how many contain a verbatim training substring of at least match_length units (8 words for word "
             "models); rankings: perplexity, log-perplexity / zlib bits, log-perplexity / reference "
             "log-perplexity. samples_with_match: the same count over all samples; windows_with_match: the same "
             "count over as many random windows of the same length of the validation text (human text never "
             "trained on: the chance level of a match). memorized_pct: of `sequences` training positions, the "
             "share whose next suffix_length units greedy decoding reproduces exactly from the k units before "
             "(token_match_pct: the share of those units right).\n\n" + "\n\n".join(sections))
    path = write_records("memorization", records, "Memorisation of seqlab language models", notes)
    print(f"wrote {path} and {path.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
