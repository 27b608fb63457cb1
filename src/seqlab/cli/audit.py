"""`seqlab audit KIND RUN ...`: the harms of SLP 9.5 measured on a trained model (`seqlab.harms`): toxic
generation, social bias (CrowS-Pairs), memorisation of the training data, and the exposure of planted
secrets. Each audit's numeric options are declared once, as the fields of its options dataclass."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from seqlab.cli.options import CommandOptions, Commands, add_number, add_runtime_options
from seqlab.config import option
from seqlab.harms.toxicity import ToxicityOptions


@dataclass
class MemorizationOptions:
    """The numeric options of `seqlab audit memorization` (`seqlab.harms.memorization.audit_memorization`)."""

    samples: int = option(1000, "samples drawn for extraction (0: no extraction)", at_least=0)
    top_k: int = option(40, "sample among the k most likely tokens", at_least=1)
    length: int | None = option(None, "units per sample (default: 256 characters for a character model, 64 "
                                      "tokens otherwise)", at_least=1)
    sequences: int = option(1000, "training strings tested for extractable memorisation (0: none)", at_least=0)
    prefix_lengths: list[int] | None = option(None, "prefix lengths k (default: 16 32 64 characters, or 8 16 32 "
                                                    "tokens)", at_least=1)
    suffix_length: int | None = option(None, "units to reproduce after the prefix (default: 50 characters, or 8 "
                                             "tokens)", at_least=1)
    match_length: int | None = option(None, "L: the shortest verbatim training substring that counts (default: 50 "
                                            "characters, or 8 tokens)", at_least=1)
    batch_size: int = option(100, "sequences decoded at once", at_least=1)
    seed: int = option(0, "random seed", at_least=0)


@dataclass
class ExposureOptions:
    """The numeric options of `seqlab audit exposure` (`seqlab.harms.exposure.audit_exposure`)."""

    samples: int = option(10000, "approximate: candidates sampled", at_least=2)
    seed: int = option(0, "approximate: seed of the sample", at_least=0)


def add_parser(commands: Commands) -> None:
    """`seqlab audit KIND RUN ...`: one subcommand per audit (`COMMANDS`)."""
    audit = commands.add_parser("audit", help="measure a trained model's harms (SLP 9.5): toxic generation, social "
                                "bias, memorisation, planted secrets")
    kinds = audit.add_subparsers(dest="audit", required=True, metavar="KIND")
    toxicity = kinds.add_parser("toxicity", help="how toxic a language model's sampled continuations of prompts "
                                "are (Gehman et al. 2020): expected maximum toxicity and toxicity probability")
    toxicity.add_argument("run", metavar="RUN", help="the language model's run directory")
    toxicity.add_argument("--scorer", required=True, metavar="RUN", help="a classifier run that scores toxicity "
                          "(benchmarks/toxicity_scorer.py trains one)")
    toxicity.add_argument("--prompts", required=True, metavar="FILE", help="the prompts, one per line")
    toxicity.add_argument("--toxic-label", default="toxic", help="the scorer's toxic label (default: toxic)")
    for name in ("continuations", "max_tokens", "top_p", "seed"):
        add_number(toxicity, ToxicityOptions, name)
    toxicity.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    bias = kinds.add_parser("bias", help="social bias of a language model on CrowS-Pairs (Nangia et al. 2020): the "
                            "percentage of pairs where it prefers the more stereotyping sentence (50 = no preference)")
    bias.add_argument("run", metavar="RUN", help="the language model's run directory")
    bias.add_argument("--pairs", required=True, metavar="FILE",
                      help="CrowS-Pairs CSV (columns sent_more, sent_less, stereo_antistereo, bias_type)")
    add_number(bias, CommandOptions, "seed", help="seed of the bootstrap intervals")
    bias.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    memorization = kinds.add_parser(
        "memorization", help="training-data leakage of a language model: training text in its samples (Carlini et al. "
        "2021, extraction_top100) and in its greedy continuations of training prefixes (Carlini et al. 2023, "
        "memorized_pct)")
    memorization.add_argument("run", metavar="RUN", help="the language model's run directory")
    memorization.add_argument("--train", required=True, metavar="FILE", help="the training file the model read")
    memorization.add_argument("--reference", metavar="RUN", help="a second language model: also rank the samples by "
                              "log-perplexity(RUN) / log-perplexity(reference)")
    for f in dataclasses.fields(MemorizationOptions):
        add_number(memorization, MemorizationOptions, f.name, metavar="K" if f.name == "prefix_lengths" else None)
    memorization.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bars")
    exposure = kinds.add_parser("exposure", help="how far a language model trained with --canary has memorised its "
                                "planted secrets (Carlini et al. 2019): exposure = log2 |R| - log2 rank")
    exposure.add_argument("run", metavar="RUN", help="the language model's run directory (trained with --canary)")
    exposure.add_argument("--method", choices=("auto", "exact", "approximate"), default="auto",
                          help="rank every candidate (exact, up to 10^6 of them), or fit a skew-normal to a sample "
                          "of candidates' scores (approximate); auto: exact when it can (default: auto)")
    for f in dataclasses.fields(ExposureOptions):
        add_number(exposure, ExposureOptions, f.name)
    for parser in (toxicity, bias, memorization, exposure):
        parser.add_argument("--output", metavar="DIR", help="where the results go (default: RUN/audits)")
        parser.add_argument("--json", action="store_true", help="print the results as one JSON object")
        add_runtime_options(parser)
    audit.set_defaults(handler=lambda args: COMMANDS[args.audit](args))


def audit_toxicity_command(args: argparse.Namespace) -> int:
    """`seqlab audit toxicity`: run the audit, write RUN/audits/toxicity.{json,md}, print the figures."""
    from seqlab.fileio import check_writable
    from seqlab.harms import check_audited
    from seqlab.harms.toxicity import SCORER, ToxicityOptions, audit_toxicity, read_prompts, write_report
    from seqlab.registry import load

    check_audited(args.run, "toxicity", "as RUN")
    check_audited(args.scorer, "toxicity", "as --scorer", needs=SCORER)
    options = ToxicityOptions(args.continuations, args.max_tokens, args.top_p, args.seed, args.toxic_label)
    prompts = read_prompts(args.prompts)
    output = Path(args.output) if args.output else Path(args.run) / "audits"
    check_writable(output, "--output", folder=True)
    result = audit_toxicity(load(args.run, args.device), load(args.scorer, args.device), prompts, options,
                            None if args.progress else False)
    report = write_report(result, options, args.run, args.scorer, args.prompts, output,
                          "seqlab " + " ".join(sys.argv[1:]))
    s = result.summary
    if args.json:
        print(json.dumps(report))
    else:
        print(f"expected maximum toxicity {s['expected_max_toxicity']:.3f} (std {s['expected_max_toxicity_std']:.3f})"
              f", toxicity probability {s['toxicity_probability']:.3f} over {s['prompts']} prompts x "
              f"{options.continuations} continuations; written to {output}/toxicity.json and toxicity.md")
    return 0


def audit_bias_command(args: argparse.Namespace) -> int:
    """`seqlab audit bias`: `seqlab.harms.bias.audit_bias`, then its table (or JSON) and where it went."""
    from seqlab.harms.bias import audit_bias, format_table

    result, paths = audit_bias(args.run, args.pairs, args.output, args.seed, device=args.device,
                               progress=None if args.progress else False)
    if args.json:
        print(json.dumps({k: v for k, v in result.items() if k != "per_pair"}))
        return 0
    print(f"CrowS-Pairs of {args.run} on {args.pairs}: % of pairs where the more stereotyping sentence "
          "scores higher (50 = no preference)")
    print(format_table(result))
    print(f"wrote {', '.join(str(path) for path in paths.values())}")
    return 0


def audit_memorization_command(args: argparse.Namespace) -> int:
    """`seqlab audit memorization`: `seqlab.harms.memorization.audit_memorization`, then its figures (or JSON)."""
    from seqlab.harms.memorization import audit_memorization, format_table

    result, paths = audit_memorization(
        args.run, args.train, args.output, args.reference, args.samples, args.top_k, args.length, args.sequences,
        args.prefix_lengths, args.suffix_length, args.match_length, args.batch_size, args.seed, args.device,
        None if args.progress else False)
    if args.json:
        summary = {**result, "extraction": {k: v for k, v in result.get("extraction", {}).items() if k != "per_sample"}}
        print(json.dumps(summary if "extraction" in result else result))
        return 0
    print(f"memorisation of {args.run} against {args.train}")
    print(format_table(result))
    print(f"wrote {', '.join(str(path) for path in paths.values())}")
    return 0


def audit_exposure_command(args: argparse.Namespace) -> int:
    """`seqlab audit exposure`: `seqlab.harms.exposure.audit_exposure`, then its table (or JSON) and where it
    went."""
    from seqlab.harms.exposure import audit_exposure, format_table

    result, paths = audit_exposure(args.run, args.output, args.device, args.method, args.samples, args.seed)
    if args.json:
        print(json.dumps(result))
        return 0
    how = "exact ranks" if result["method"] == "exact" else f"approximate, {result['candidates_scored']:,} samples"
    print(f"exposure of the canaries of {args.run} ({result['template']!r}, |R| = {result['space']:,}; {how}):")
    print(format_table(result))
    print(f"wrote {', '.join(str(path) for path in paths.values())}")
    return 0


COMMANDS = {"toxicity": audit_toxicity_command, "bias": audit_bias_command,
            "memorization": audit_memorization_command, "exposure": audit_exposure_command}
