"""A sequence-to-sequence model on the command line: `seqlab translate` and `seqlab summarize` (sources in, one
output per line out, in input order, written chunk by chunk; greedy, sampled or beam search; attention heat
maps) and what `seqlab evaluate` prints of one (BLEU, chrF, ROUGE-1/2/L, perplexity)."""

from __future__ import annotations

import argparse
import contextlib
import json
import warnings
from dataclasses import dataclass
from pathlib import Path

from seqlab.cli.options import (
    EvaluateOption,
    add_search_options,
    inference_command,
    search_options,
    write_chunk,
)
from seqlab.config import option
from seqlab.errors import SeqlabError
from seqlab.families.seq2seq.parallel import PAIRED_FORMATS
from seqlab.fileio import check_writable


@dataclass
class Seq2SeqEvaluateOptions:
    """The numeric options of `seqlab evaluate` for a sequence-to-sequence model (the decoding ones are
    `SearchOptions`')."""

    batch_size: int | None = option(None, "sentences decoded at once", at_least=1)


# the options of `seqlab evaluate` of its own (`Family.evaluate_options` names all it takes)
EVALUATE_OPTIONS = (
    EvaluateOption("--src", "the sources, one per line", metavar="FILE"),
    EvaluateOption("--tgt", "the reference targets, aligned with --src", metavar="FILE"),
    EvaluateOption("--bleu-tokenize", "sacrebleu's tokenizer for BLEU; none for text tokenised already (default: "
                   "13a)", choices=("13a", "none", "intl", "char"), value="13a"),
    EvaluateOption("--hypotheses", "write the decoded outputs here", metavar="FILE"),
    EvaluateOption("--format", "the file's format (default: the training files')", choices=PAIRED_FORMATS),
    EvaluateOption("--batch-size", default="64 sentences", number=Seq2SeqEvaluateOptions),
)


def add_commands(commands) -> None:
    """`seqlab translate DIR [FILE] [options]` and `seqlab summarize` (the same decoding, named for its use)."""
    for name in ("translate", "summarize"):
        command = inference_command(
            commands, name, f"{name} texts with a trained sequence-to-sequence model", "one source text per line",
            {"--input-format": (("text", "tsv", "jsonl"), "text: one source per line; tsv / jsonl: a file of pairs, "
                                "its sources read from the training run's --source-field (targets, if any, "
                                "ignored)"),
             "--output-format": (("text", "json"), "text: one output per line; json: one object per line with the "
                                 "tokens and scores")},
            "sentences", decode_command, long_source=True)
        command.add_argument("--attention-dir", metavar="DIR",
                             help="draw each output's attention over its source as DIR/<line>.png (models "
                             "with attention)")
        add_search_options(command)


def decode_command(args: argparse.Namespace) -> int:
    """`seqlab translate` and `seqlab summarize`: one output per input line, in input order, each chunk
    written (and flushed) as soon as it is decoded."""
    from seqlab.families.seq2seq.pipeline import load_seq2seq

    if args.attention_dir:
        check_writable(args.attention_dir, "--attention-dir", folder=True)
    model = load_seq2seq(args.run_dir, args.device)
    for chunk in model.generate_stream(args.file, args.input_format, search_options(args), args.batch_size,
                                       args.chunk_size, bool(args.attention_dir), args.max_input_length,
                                       args.long_input):
        out = []
        for pair, output in chunk:
            if args.output_format == "json":
                out.append(json.dumps({"line": pair.line, "text": output.text, "tokens": output.tokens,
                                       "score": round(output.score, 4), "normalized_score": round(output.normalized, 4),
                                       "finished": output.finished}, ensure_ascii=False) + "\n")
            else:
                out.append(output.text + "\n")
            if args.attention_dir and output.attention is not None:
                model.plot_attention(output, Path(args.attention_dir) / f"{pair.line:04d}.png",
                                     f"{args.file}:{pair.line}")
        write_chunk(out)
    if args.attention_dir and not model.model.attends:
        warnings.warn(f"--attention-dir: a {model.config.model.arch} model without attention has no weights to draw",
                      stacklevel=1)
    return 0


def report(args: argparse.Namespace, scorer) -> int:
    """`seqlab evaluate` of a sequence-to-sequence model (a file of pairs, or --src and --tgt); `scorer()` loads
    it and gives its pipeline's evaluate."""
    from seqlab.fileio import atomic_text_writer

    if bool(args.src) != bool(args.tgt):
        raise SeqlabError("--src and --tgt go together: the sources and their reference targets")
    if not args.src and not args.file:
        raise SeqlabError("seqlab evaluate needs --src FILE --tgt FILE (aligned files) or a file of pairs")
    if args.hypotheses:
        check_writable(args.hypotheses, "--hypotheses")
    score = scorer()
    with contextlib.ExitStack() as stack:
        write = stack.enter_context(atomic_text_writer(args.hypotheses)).write if args.hypotheses else None
        result = score(args.src or args.file, args.tgt, args.format, options=search_options(args),
                                      batch_size=args.batch_size or 64, bleu_tokenize=args.bleu_tokenize,
                                      long_source=args.long_input, progress=False if args.json else None,
                                      chunk_size=args.chunk_size, max_input_length=args.max_input_length,
                                      write_hypothesis=None if write is None else lambda h: write(h + "\n"),
                                      keep_hypotheses=False)
    result["file"] = args.src or args.file
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"file:        {result['file']}" + (f" -> {args.tgt}" if args.tgt else ""))
    print(f"pairs:       {result['pairs']:,} (beam {result['beam']})")
    print(f"BLEU:        {result['bleu']:.2f} (sacrebleu, tokenize {result['bleu_tokenize']})")
    print(f"chrF:        {result['chrf']:.2f}")
    print(f"ROUGE F1:    1 {result['rouge1']:.2f}  2 {result['rouge2']:.2f}  L {result['rougeL']:.2f}")
    print(f"perplexity:  {result['perplexity']:.2f} over {result['target_tokens']:,} reference target tokens")
    if result["unknown_source_tokens"]:
        print(f"unknown:     {result['unknown_source_tokens']:,} source tokens read as <unk>")
    if result["truncated_sources"]:
        print(f"truncated:   {result['truncated_sources']:,} sources longer than the model's limit")
    return 0
