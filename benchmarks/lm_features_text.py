"""Write the text the character LMs of `--lm-features` are trained on (README "Contextual string
embeddings"): training splits only, one sentence a line.

    python benchmarks/lm_features_text.py --output runs/lmdata
    # -> runs/lmdata/ud_conll_train.txt (26,285 lines, 2,079,959 characters) and
    #    runs/lmdata/conll_heldout_lm.txt (the last 300 CoNLL-2003 training sentences: the LMs' validation file)
    python benchmarks/lm_features_text.py --wikitext2 --output runs/lmdata
    # -> also runs/lmdata/ud_conll_wt2_train.txt: the same sentences and wikitext-2's training text
    #    (100,813 lines, 12,534,959 characters)

The CoNLL-2003 training sentences (words joined by spaces, -DOCSTART- dropped) less the last 300, and
the UD English-EWT training sentences (their `# text` lines), shuffled together with a fixed seed. No
development or test file of any dataset is read. With `--wikitext2`, a second file adds wikitext-2's
training text (train.txt only), split into sentences at " . ", headings dropped, its `@-@`, `@,@` and
`@.@` markers joined as the CoNLL files write them ("role-playing", "1,000", "3.5"); its `<unk>` words
stay as they are.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from pathlib import Path

from train_vectors import WIKITEXT_MARKERS  # wikitext's @-@ @,@ @.@ markers, joined as the tagging files write them

SENTENCE_END = re.compile(r"(?<= [.?!]) (?=[A-Z\"'(])")


def conll_sentences(path: Path) -> list[str]:
    sentences, words = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line:
            if words:
                sentences.append(" ".join(words))
                words = []
            continue
        word = line.split()[0]
        if word != "-DOCSTART-":
            words.append(word)
    if words:
        sentences.append(" ".join(words))
    return sentences


def wikitext_sentences(path: Path) -> list[str]:
    sentences = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("="):
            continue
        for marker, joined in WIKITEXT_MARKERS.items():
            line = line.replace(marker, joined)
        sentences.extend(part.strip() for part in SENTENCE_END.split(line) if part.strip())
    return sentences


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--output", default="runs/lmdata")
    parser.add_argument("--held-out", type=int, default=300, help="CoNLL-2003 training sentences held out")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--wikitext2", action="store_true",
                        help="also write ud_conll_wt2_train.txt, with wikitext-2's training text added")
    args = parser.parse_args()
    data, output = Path(args.data_dir), Path(args.output)
    needed = [data / "conll2003" / "train.txt", data / "ud_english_ewt" / "en_ewt-ud-train.conllu"]
    needed += [data / "wikitext-2" / "train.txt"] if args.wikitext2 else []
    missing = [str(path) for path in needed if not path.is_file()]
    if missing:
        print(f"lm_features_text.py: error: missing training file {missing[0]} (see --data-dir)", file=sys.stderr)
        return 2
    conll = conll_sentences(data / "conll2003" / "train.txt")
    ud = [line[len("# text = "):].strip() for line in
          (data / "ud_english_ewt" / "en_ewt-ud-train.conllu").read_text(encoding="utf-8").splitlines()
          if line.startswith("# text = ")]
    train, held_out = conll[:-args.held_out], conll[-args.held_out:]
    lines = ud + train
    random.Random(args.seed).shuffle(lines)
    output.mkdir(parents=True, exist_ok=True)
    (output / "ud_conll_train.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (output / "conll_heldout_lm.txt").write_text("\n".join(held_out) + "\n", encoding="utf-8")
    print(f"{output / 'ud_conll_train.txt'}: {len(lines):,} lines, {sum(len(s) + 1 for s in lines):,} characters; "
          f"{output / 'conll_heldout_lm.txt'}: {len(held_out):,} lines")
    if args.wikitext2:
        more = lines + wikitext_sentences(data / "wikitext-2" / "train.txt")
        random.Random(args.seed).shuffle(more)
        (output / "ud_conll_wt2_train.txt").write_text("\n".join(more) + "\n", encoding="utf-8")
        print(f"{output / 'ud_conll_wt2_train.txt'}: {len(more):,} lines, {sum(len(s) + 1 for s in more):,} characters")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
