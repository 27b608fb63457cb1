"""A tagger on the command line: `seqlab tag` (sentences in, a token, its tag and probability per line out,
written chunk by chunk) and what `seqlab evaluate` prints of one (accuracy, entity precision / recall / F1
by type, the tags training never saw, the most confused pairs)."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

from seqlab.cli.options import (
    EvaluateOption,
    inference_command,
    require_file,
    write_chunk,
)
from seqlab.config import option
from seqlab.families.tagger.conll import FORMATS as CONLL_FORMATS


@dataclass
class TaggerEvaluateOptions:
    """The numeric options of `seqlab evaluate` for a tagger."""

    confusions: int = option(10, "list this many of the most confused tag pairs", at_least=0)


# the options of `seqlab evaluate` of its own (`Family.evaluate_options` names all it takes)
EVALUATE_OPTIONS = (
    EvaluateOption("--format", "the file's format (default: the training files')", choices=CONLL_FORMATS),
    EvaluateOption("--confusions", number=TaggerEvaluateOptions),
)


def add_commands(commands) -> None:
    """`seqlab tag DIR [FILE] [options]`."""
    inference_command(commands, "tag", "tag sentences with a trained tagger",
                      "one sentence per line, tokens separated by whitespace",
                      {"--input-format": (("text", "conllu", "conll"), "text: one sentence per line, "
                                          "whitespace-tokenised; conllu / conll: the tokens of a CoNLL-U file (FORM "
                                          "column) or of CoNLL-2003 columns (the first), other columns ignored"),
                       "--output-format": (("conll", "json"), "conll: token, tag and probability per line, a blank "
                                           "line between sentences; json: one object per sentence, with entity "
                                           "spans for IOB-style tags")},
                      "sentences", tag_command)


def tag_command(args: argparse.Namespace) -> int:
    """`seqlab tag`: each chunk of sentences written (and flushed) as soon as it is tagged."""
    from seqlab.data.tags import spans
    from seqlab.families.tagger.pipeline import load_tagger

    tagger = load_tagger(args.run_dir, args.device)
    for chunk in tagger.tag_stream(args.file, args.input_format, args.batch_size, args.chunk_size,
                                   args.max_input_length, args.long_input):
        out = []
        for tokens, tags in chunk:
            if args.output_format == "json":
                record = {"tokens": tokens, "tags": [t for t, _ in tags],
                          "probabilities": [round(p, 4) for _, p in tags]}
                if tagger.scheme != "none":
                    record["entities"] = [{"type": kind, "start": start, "end": end,
                                           "text": " ".join(tokens[start:end])}
                                          for kind, start, end in spans(record["tags"])]
                out.append(json.dumps(record, ensure_ascii=False) + "\n")
            else:
                out.extend(f"{token}\t{label}\t{p:.4f}\n" for token, (label, p) in zip(tokens, tags, strict=True))
                out.append("\n")
        write_chunk(out)
    return 0


def report(args: argparse.Namespace, scorer) -> int:
    """`seqlab evaluate` of a tagger; `scorer()` loads it and gives its pipeline's evaluate."""
    require_file(args)
    result = scorer()(args.file, args.format, args.confusions, args.chunk_size, args.max_input_length,
                                  args.long_input)
    result["file"] = args.file
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"file:      {args.file}")
    print(f"tokens:    {result['tokens']:,}")
    if result["truncated"]:
        print(f"truncated: {result['truncated']:,} sentences longer than the limit, scored on their first tokens")
    print(f"accuracy:  {result['accuracy']:.2f}%")
    if "f1" in result:
        print(f"entities:  precision {result['precision']:.2f}  recall {result['recall']:.2f}  "
              f"F1 {result['f1']:.2f}  ({result['gold']:,} in the file)")
        for kind, figures in result["by_type"].items():
            print(f"  {kind:<8} precision {figures['precision']:6.2f}  recall {figures['recall']:6.2f}  "
                  f"F1 {figures['f1']:6.2f}  ({figures['gold']:,})")
    if result["unseen_tags"]:
        listed = ", ".join(f"{tag} ({n:,})" for tag, n in result["unseen_tags"].items())
        print(f"tags training never saw, each token counted as an error: {listed}")
    if result["confusions"]:
        print("most confused tags (gold -> predicted: tokens):")
        for c in result["confusions"]:
            print(f"  {c['gold']:>10} -> {c['predicted']:<10} {c['count']:,}")
    return 0
