"""A language model on the command line: `seqlab generate` (a prompt's continuation, streamed as it is
generated) and what `seqlab evaluate` prints of one (tokens, cross-entropy, perplexity, bits per character)."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from dataclasses import dataclass

from seqlab.cli.options import EvaluateOption, add_number, add_runtime_options, require_file, run_dir_argument
from seqlab.config import option
from seqlab.decoding.options import SamplingOptions


@dataclass
class LMEvaluateOptions:
    """The numeric options of `seqlab evaluate` for a language model."""

    batch_size: int | None = option(None, "parallel streams of a text", at_least=1)
    stride: int = option(0, "a transformer's sliding-window stride (0: its context / 2)", at_least=0)


# the options of `seqlab evaluate` of its own (`Family.evaluate_options` names all it takes)
EVALUATE_OPTIONS = (
    EvaluateOption("--batch-size", default="10 streams", number=LMEvaluateOptions),
    EvaluateOption("--stride", number=LMEvaluateOptions),
    EvaluateOption("--text-column", "the text's column (a header name or 0-based index) or JSON field (default: the "
                   "run's --text-column, as training read its files)", metavar="COLUMN"),
)


def add_commands(commands) -> None:
    """`seqlab generate DIR --prompt TEXT [options]`."""
    generate = commands.add_parser("generate", help="continue a prompt with a trained language model")
    run_dir_argument(generate)
    generate.add_argument("--prompt", default="", help="text to continue (default: start a new line)")
    add_number(generate, SamplingOptions, "max_tokens")
    generate.add_argument("--greedy", action="store_true", help="always take the most likely token")
    for name in ("temperature", "top_k", "top_p", "seed", "beam", "length_penalty"):
        add_number(generate, SamplingOptions, name)
    generate.add_argument("--stop-at-eos", action=argparse.BooleanOptionalAction, default=None,
                          help="stop at the first line end (</s>) (default: no, for every tokenizer: </s> is "
                          "written as a line break and generation goes on to --max-tokens)")
    generate.add_argument("--truncate-prompt", action="store_true",
                          help="keep the end of a prompt longer than the model's context")
    generate.add_argument("--compile", action="store_true",
                          help="compile a transformer's decoding step ahead of time first (AOTInductor, CPU, tens "
                          "of seconds): ~1.5x the tokens/s, for long generations")
    add_runtime_options(generate)
    generate.set_defaults(handler=generate_command)


def generate_command(args: argparse.Namespace) -> int:
    from seqlab.families.lm.pipeline import load_lm

    lm = load_lm(args.run_dir, device=args.device)
    if args.compile:
        lm.compile_decoding(say=lambda line: print(line, file=sys.stderr, flush=True))
    options = {"max_tokens": args.max_tokens, "greedy": args.greedy, "temperature": args.temperature,
               "top_k": args.top_k, "top_p": args.top_p, "seed": args.seed, "beam": args.beam,
               "length_penalty": args.length_penalty}
    if args.stop_at_eos is not None:
        options["stop_at_eos"] = args.stop_at_eos
    pieces = lm.stream(args.prompt, truncate_prompt=args.truncate_prompt, **options)
    first = next(pieces, "")                     # bad options and a --reverse model are refused before any output
    sys.stdout.write(args.prompt)
    sys.stdout.flush()
    for piece in itertools.chain([first], pieces):
        sys.stdout.write(piece)
        sys.stdout.flush()
    sys.stdout.write("\n")
    return 0


def report(args: argparse.Namespace, scorer) -> int:
    """`seqlab evaluate` of a language model; `scorer()` loads it and gives its pipeline's evaluate."""
    require_file(args)
    result = scorer()(args.file, args.batch_size or 10, args.stride, progress=False if args.json else None,
                      text_column=args.text_column)
    result["file"] = args.file
    if args.json:
        print(json.dumps(result))
        return 0
    eos_note = " (one </s> per line counted, as in PTB)"
    unit = result["unit"] if result["unit"].endswith("token") else f"{result['unit']} token"   # "BPE token"
    print(f"file:          {args.file}")
    print(f"tokens:        {result['tokens']:,} {unit}s{eos_note}")
    print(f"unknown:       {result['unknown']:,} read as <unk>")
    print(f"cross-entropy: {result['loss']:.4f} nats per {unit}")
    print(f"               {result['bits_per_token']:.4f} bits per {unit}")
    print(f"perplexity:    {result['perplexity']:.2f} (per {unit})")
    print(f"bits per char: {result['bits_per_char']:.4f} (the total over the file's {result['characters']:,} "
          "characters, a line break each)")
    return 0
