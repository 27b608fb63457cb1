"""Toxic generation of a language model (Gehman et al. 2020's protocol, `seqlab.harms.toxicity`): expected
maximum toxicity and toxicity probability over prompts made from wikitext-2's test split.

    python benchmarks/toxicity_audit.py --run runs/wt2 --scorer runs/toxicity-scorer

The prompts: wikitext-2 test lines that are paragraphs (not headings, at least 12 words), 500 of them drawn
with random.Random(2020), each cut to its first half of words (at most 12), as RealToxicityPrompts cuts its
sentences in two; they are written to --prompts-out for reuse. Each gets 25 continuations of 20 tokens
sampled with top-p 0.9, scored by the toxicity scorer (benchmarks/toxicity_scorer.py: a BiLSTM trained on
Davidson et al.'s tweets, toxic = hate or offensive). The scorer is a crude, Twitter-domain stand-in for the
Perspective API, so the figures are comparable between seqlab models, not with the paper's.
Results: benchmarks/results/toxicity_audit.json and .md.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import seqlab  # noqa: E402
from common import device_name, record, write_records  # noqa: E402
from seqlab.harms.toxicity import ToxicityOptions, audit_toxicity  # noqa: E402

TITLE = "Toxic generation: expected maximum toxicity (Gehman et al. 2020's protocol)"
NOTES = __doc__.split("\n\n", 1)[1]


def wikitext_prompts(data_dir: Path, n: int, seed: int = 2020) -> list[str]:
    lines = [line.split() for line in (data_dir / "wikitext-2/test.txt").read_text(encoding="utf-8").splitlines()]
    paragraphs = [words for words in lines if len(words) >= 12 and words[0] != "="]
    chosen = random.Random(seed).sample(paragraphs, n)
    return [" ".join(words[:min(12, len(words) // 2)]) for words in chosen]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, help="the language model run")
    parser.add_argument("--scorer", required=True, help="the toxicity scorer run (toxicity_scorer.py)")
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--prompts", type=int, default=500)
    parser.add_argument("--continuations", type=int, default=25)
    parser.add_argument("--prompts-out", default="runs/toxicity-prompts.txt")
    args = parser.parse_args()
    prompts = wikitext_prompts(Path(args.data_dir), args.prompts)
    Path(args.prompts_out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.prompts_out).write_text("\n".join(prompts) + "\n", encoding="utf-8")
    start = time.perf_counter()
    result = audit_toxicity(seqlab.load(args.run), seqlab.load(args.scorer), prompts,
                            ToxicityOptions(continuations=args.continuations))
    wall = round(time.perf_counter() - start, 1)
    config = f"{len(prompts)} wikitext-2 test prompts, {args.continuations} x 20 tokens, top-p 0.9"
    records = [record(task="lm", dataset="wikitext-2", split="test", arch=Path(args.run).name, config=config,
                      metric=metric, value=round(result.summary[metric], 4), wall_s=wall, device=device_name(),
                      note=f"scorer {Path(args.scorer).name}")
               for metric in ("expected_max_toxicity", "expected_max_toxicity_std", "toxicity_probability")]
    for r in records:
        print(f"{r['metric']:<28} {r['value']}")
    for row in result.most_toxic(5):
        print(f"{row['toxicity']:.3f}  {row['prompt']} || {row['continuation']}")
    write_records("toxicity_audit", records, TITLE, notes=NOTES)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
