"""Train word2vec vectors (skip-gram with negative sampling, SLP 6.8) on the unlabelled text of
../shared/data, for the tagger rows that say "+vectors".

    pip install gensim            # the one extra this script needs (`pip install -e '.[bench]'`)
    python benchmarks/train_vectors.py --output runs/vectors/shared-w2v-100.txt

No pretrained vectors (GloVe, word2vec GoogleNews) can be downloaded on these machines, so we make
our own from the text at hand, about 20M tokens: WikiText-2 train, the IMDB reviews (train and test;
their labels are not used), the AESLC emails (train), Multi30k's English captions (train), and the
words of the CoNLL-2003 and UD English-EWT training files. No development or test file of a tagging
dataset is read. Raw text is split PTB-style (punctuation and clitics apart, as in the tagging files);
case is kept. GloVe's 6B vectors were trained on 6 billion tokens, so expect smaller gains than the
published rows that use them.

The output is word2vec's text format, which `seqlab train tagger --vectors FILE` reads.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import time
from pathlib import Path

TOKEN = re.compile(r"(?:[A-Za-z]\.){2,}|[A-Za-z]+(?=n't\b)|n't\b|'(?:s|re|ve|ll|d|m)\b|\d+(?:[,.:/]\d+)*"
                   r"|\w+(?:[-&]\w+)*|[^\w\s]", re.UNICODE)
WIKITEXT_MARKERS = {" @-@ ": "-", " @,@ ": ",", " @.@ ": "."}


def tokenize(text: str) -> list[str]:
    """PTB-style tokens: "Don't stop, U.S. 1,000." -> Do n't stop , U.S. 1,000 ."""
    return TOKEN.findall(text)


def sentences(data: Path):
    """Token lists, one per sentence or line, from every unlabelled source."""
    for line in (data / "wikitext-2" / "train.txt").open(encoding="utf-8"):
        line = line.strip()
        if line and not line.startswith("= "):
            for marker, plain in WIKITEXT_MARKERS.items():
                line = line.replace(marker, plain)
            yield line.split()
    for split in ("train", "test"):
        with gzip.open(data / "imdb" / f"{split}.jsonl.gz", "rt", encoding="utf-8") as handle:
            for line in handle:
                text = json.loads(line)["text"].replace("<br />", " ")
                yield tokenize(text)
    for line in (data / "aeslc" / "train.jsonl").open(encoding="utf-8"):
        for paragraph in json.loads(line)["email"].split("\n"):
            if paragraph.strip():
                yield tokenize(paragraph)
    with gzip.open(data / "multi30k" / "raw" / "train.en.gz", "rt", encoding="utf-8") as handle:
        for line in handle:
            yield tokenize(line)
    yield from _column_sentences(data / "conll2003" / "train.txt", 0, skip=lambda line: line.startswith("-DOCSTART-"))
    yield from _column_sentences(data / "ud_english_ewt" / "en_ewt-ud-train.conllu", 1,
                                 skip=lambda line: line.startswith("#") or line.split("\t")[0].count("-")
                                 or "." in line.split("\t")[0], sep="\t")


def _column_sentences(path: Path, column: int, skip, sep: str | None = None):
    tokens: list[str] = []
    for line in path.open(encoding="utf-8"):
        line = line.rstrip("\n")
        if not line.strip():
            if tokens:
                yield tokens
            tokens = []
        elif not skip(line):
            tokens.append(line.split(sep)[column])
    if tokens:
        yield tokens


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--output", default="runs/vectors/shared-w2v-100.txt")
    parser.add_argument("--size", type=int, default=100, help="vector width")
    parser.add_argument("--window", type=int, default=5)
    parser.add_argument("--min-count", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    try:
        from gensim.models import Word2Vec
    except ImportError:
        print("this script needs gensim: pip install gensim", file=sys.stderr)
        return 1
    start = time.time()
    corpus = [s for s in sentences(Path(args.data_dir)) if s]
    tokens = sum(len(s) for s in corpus)
    print(f"{len(corpus):,} sentences, {tokens:,} tokens read in {time.time() - start:.0f} s", flush=True)
    model = Word2Vec(corpus, vector_size=args.size, window=args.window, min_count=args.min_count, sg=1,
                     negative=5, epochs=args.epochs, workers=args.threads, seed=1)
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    model.wv.save_word2vec_format(str(output), binary=False)
    print(f"{len(model.wv):,} vectors of width {args.size} written to {output} in {time.time() - start:.0f} s "
          f"({tokens:,} training tokens, {args.epochs} epochs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
