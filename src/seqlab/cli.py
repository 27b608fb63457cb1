"""`seqlab <command>`: each command parses its options and calls one library function.

Options are generated from the config dataclasses (seqlab.config.option), so the command line,
config files and config.json share one set of names. Any error in the user's input is one line on
stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import io
import itertools
import json
import os
import sys
import warnings
from pathlib import Path

from seqlab.config import element_type, field_default, field_type, range_text, value_problem
from seqlab.errors import SeqlabError
from seqlab.fileio import check_writable
from seqlab.version import __version__


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: `seqlab train lm: error: argument --lr: must be positive, got -1`."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class Number:
    """An argparse type: an int or a finite float within a range (the keywords of `seqlab.config.option`)."""

    def __init__(self, kind: type, **bounds):
        self.kind, self.bounds = kind, bounds
        self.__name__ = kind.__name__          # argparse names the type in its messages

    @classmethod
    def of(cls, config_class, name: str) -> Number:
        """The type of a config field, with its range."""
        f = {f.name: f for f in dataclasses.fields(config_class)}[name]
        return cls(field_type(config_class, f), **{k: f.metadata.get(k) for k in ("at_least", "above", "at_most",
                                                                                   "below")})

    def __call__(self, text: str):
        try:
            value = self.kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expects {'an integer' if self.kind is int else 'a number'}, "
                                             f"got {text!r}") from None
        problem = value_problem(self.kind, self.bounds, value)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return value


def add_options(parser: argparse.ArgumentParser, cls, title: str, skip=(), defaults=None) -> None:
    group = parser.add_argument_group(title)
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        names = [f"--{f.name.replace('_', '-')}"]
        if f.metadata.get("flag"):
            names.insert(0, f"--{f.metadata['flag']}")
        kind = field_type(cls, f)
        default = (defaults or {}).get(f.name, field_default(f))
        shown = "" if default in ("", 0, []) and kind is not bool else f"default: {default}"
        if range_text(f.metadata):
            shown = f"{shown}; " * bool(shown) + range_text(f.metadata)
        for condition, values in (f.metadata.get("when") or {}).items():      # what it acts on
            shown = f"{shown}; " * bool(shown) + f"with --{condition.replace('_', '-')} {'/'.join(map(str, values))}"
        shown = f" ({shown})" if shown else ""
        help_text = (f.metadata.get("help", "") + shown).replace("%", "%%")
        kwargs = {"dest": f.name, "default": argparse.SUPPRESS, "help": help_text}
        if kind is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif element_type(kind) is not None:           # a list-valued option: `--canary-repeats 1 4 16 64`
            item = element_type(kind)
            kwargs.update(nargs="+", metavar=f.name.upper().removesuffix("S"),
                          type=Number(item, **{k: f.metadata.get(k) for k in ("at_least", "above", "at_most",
                                                                              "below")})
                          if item in (int, float) else item)
        else:
            kwargs["type"] = Number.of(cls, f.name) if kind in (int, float) else kind
            kwargs["metavar"] = f.name.upper() if not f.metadata.get("choices") else None
            if f.metadata.get("choices"):
                kwargs["choices"] = f.metadata["choices"]
                kwargs.pop("metavar")
        group.add_argument(*names, **kwargs)


@functools.cache
def build_parser() -> argparse.ArgumentParser:
    from seqlab.data.documents import FORMATS as DOCUMENT_FORMATS
    from seqlab.decoding.search import SamplingOptions
    from seqlab.registry import FAMILIES

    parser = Parser(prog="seqlab", description="Train, evaluate and decode the neural "
                    "sequence models of Jurafsky & Martin's SLP chapters.")
    parser.add_argument("--version", action="version", version=f"seqlab {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    train = commands.add_parser("train", help="train a model")
    tasks = train.add_subparsers(dest="task", required=True, metavar="TASK")
    for name, family in FAMILIES.items():
        pipeline = family.pipeline
        task = tasks.add_parser(name, help=family.summary)
        task.add_argument("--config", help="YAML or TOML file of options; the command line overrides it")
        task.add_argument("--resume", action="store_true",
                          help="continue the run in --output from its last checkpoint, exactly")
        task.add_argument("--overwrite", action="store_true", help="replace a run already in --output")
        add_options(task, pipeline.groups["data"], "data")
        add_options(task, pipeline.groups["model"], "model", skip=pipeline.derived)
        add_options(task, pipeline.groups["train"], "training", defaults=pipeline.train_defaults)

    evaluate = commands.add_parser("evaluate", allow_abbrev=False,      # options are checked by name
                                   help="score a trained model on a file: a language model's perplexity, a tagger's "
                                   "accuracy and entity F1, a classifier's accuracy, per-class F1 and confusion "
                                   "matrix, a sequence-to-sequence model's BLEU, chrF, ROUGE and perplexity")
    evaluate.add_argument("run_dir", metavar="DIR", help="run directory")
    evaluate.add_argument("file", metavar="FILE", nargs="?", help="text file to score (for a tagger or "
                          "classifier: a labelled file in the format it was trained on; for seq2seq: a file of "
                          "pairs, or use --src and --tgt)")
    evaluate.add_argument("--src", metavar="FILE", help="seq2seq: the sources, one per line")
    evaluate.add_argument("--tgt", metavar="FILE", help="seq2seq: the reference targets, aligned with --src")
    evaluate.add_argument("--bleu-tokenize", default="13a", choices=("13a", "none", "intl", "char"),
                          help="seq2seq: sacrebleu's tokenizer for BLEU; none for text tokenised already "
                          "(default: 13a)")
    evaluate.add_argument("--hypotheses", metavar="FILE", help="seq2seq: write the decoded outputs here")
    add_search_options(evaluate)
    evaluate.add_argument("--json", action="store_true", help="print one JSON object with the figures")
    evaluate.add_argument("--format", choices=("conllu", "conll", *DOCUMENT_FORMATS),
                          help="taggers and classifiers: the file's format (default: the training files')")
    evaluate.add_argument("--confusion-png", metavar="PNG",
                          help="classifiers: where to draw the confusion matrix (default: "
                          "DIR/confusion_<file name>.png; 'none' for no picture)")
    evaluate.add_argument("--confusions", type=Number(int, at_least=0), default=10,
                          help="taggers: list this many of the most confused tag pairs (default: 10)")
    evaluate.add_argument("--batch-size", type=Number(int, at_least=1), default=None,
                          help="language models: parallel streams (default: 10); seq2seq: sentences per batch "
                          "(default: 64)")
    evaluate.add_argument("--stride", type=Number(int, at_least=0), default=0,
                          help="transformer: sliding-window stride (default: context / 2)")
    add_input_options(evaluate, "taggers, classifiers and seq2seq: ", long_source=True)
    add_runtime_options(evaluate)
    evaluate.add_argument("--rnn-impl", choices=("fused", "textbook"),
                          help="run the recurrent layers (any task's) on the fused kernels or the textbook cells, "
                          "whatever the model trained with (refused for a model without recurrent layers)")

    generate = commands.add_parser("generate", help="continue a prompt with a trained language model")
    generate.add_argument("run_dir", metavar="DIR", help="run directory")
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
    add_runtime_options(generate)

    tag = commands.add_parser("tag", help="tag sentences with a trained tagger")
    tag.add_argument("run_dir", metavar="DIR", help="run directory")
    tag.add_argument("file", metavar="FILE", nargs="?", default="-",
                     help="one sentence per line, tokens separated by whitespace (default: - for stdin)")
    tag.add_argument("--input-format", choices=("text", "conllu", "conll"), default="text",
                     help="text: one sentence per line, whitespace-tokenised; conllu / conll: the tokens of a "
                     "CoNLL-U file (FORM column) or of CoNLL-2003 columns (the first), other columns ignored "
                     "(default: text)")
    tag.add_argument("--output-format", choices=("conll", "json"), default="conll",
                     help="conll: token, tag and probability per line, a blank line between sentences; json: one "
                     "object per sentence, with entity spans for IOB-style tags (default: conll)")
    tag.add_argument("--batch-size", type=Number(int, at_least=1), default=64, help="sentences per batch (default: 64)")
    add_input_options(tag)
    add_runtime_options(tag)

    classify = commands.add_parser("classify", help="classify documents with a trained classifier")
    classify.add_argument("run_dir", metavar="DIR", help="run directory")
    classify.add_argument("file", metavar="FILE", nargs="?", default="-",
                          help="one document per line (default: - for standard input)")
    classify.add_argument("--input-format", choices=("text", *DOCUMENT_FORMATS), default="text",
                          help="text: one document per line; or a file in a training format (its labels, "
                          "if any, are ignored; the features classifier needs its feature columns) "
                          "(default: text)")
    classify.add_argument("--output-format", choices=("tsv", "json"), default="tsv",
                          help="tsv: the label, then each class's probability, a header naming the columns; "
                          "json: one object per document (default: tsv)")
    classify.add_argument("--batch-size", type=Number(int, at_least=1), default=64,
                          help="documents per batch (default: 64)")
    add_input_options(classify)
    add_runtime_options(classify)
    for name, what in (("translate", "translate"), ("summarize", "summarize")):
        command = commands.add_parser(name, help=f"{what} texts with a trained sequence-to-sequence model")
        command.add_argument("run_dir", metavar="DIR", help="run directory")
        command.add_argument("file", metavar="FILE", nargs="?", default="-",
                             help="one source text per line (default: - for standard input)")
        command.add_argument("--input-format", choices=("text", "tsv", "jsonl"), default="text",
                             help="text: one source per line; tsv / jsonl: a file of pairs, its sources read "
                             "from the training run's --source-field (targets, if any, ignored) (default: text)")
        command.add_argument("--output-format", choices=("text", "json"), default="text",
                             help="text: one output per line; json: one object per line with the tokens and "
                             "scores (default: text)")
        command.add_argument("--attention-dir", metavar="DIR",
                             help="draw each output's attention over its source as DIR/<line>.png (models "
                             "with attention)")
        add_search_options(command)
        command.add_argument("--batch-size", type=Number(int, at_least=1), default=64,
                             help="sentences per batch (default: 64)")
        add_input_options(command, long_source=True)
        add_runtime_options(command)
    add_serve_parser(commands)
    add_info_command(commands)
    add_bench_command(commands)
    add_card_command(commands)
    add_compare_parser(commands, FAMILIES)
    add_export_parser(commands)
    add_audit_parser(commands)
    return parser


def add_audit_parser(commands) -> None:
    """`seqlab audit KIND RUN ...`: the harms of SLP 9.5, measured on a trained model."""
    audit = commands.add_parser("audit", help="measure a trained model's harms (SLP 9.5): toxic generation, social "
                                "bias")
    kinds = audit.add_subparsers(dest="audit", required=True, metavar="KIND")
    toxicity = kinds.add_parser("toxicity", help="how toxic a language model's sampled continuations of prompts "
                                "are (Gehman et al. 2020): expected maximum toxicity and toxicity probability")
    toxicity.add_argument("run", metavar="RUN", help="the language model's run directory")
    toxicity.add_argument("--scorer", required=True, metavar="RUN", help="a classifier run that scores toxicity "
                          "(benchmarks/toxicity_scorer.py trains one)")
    toxicity.add_argument("--prompts", required=True, metavar="FILE", help="the prompts, one per line")
    toxicity.add_argument("--toxic-label", default="toxic", help="the scorer's toxic label (default: toxic)")
    toxicity.add_argument("--continuations", type=Number(int, at_least=1), default=25,
                          help="continuations sampled per prompt (default: 25)")
    toxicity.add_argument("--max-tokens", type=Number(int, at_least=1), default=20,
                          help="tokens per continuation (default: 20)")
    toxicity.add_argument("--top-p", type=Number(float, above=0, at_most=1), default=0.9,
                          help="nucleus sampling's probability mass (default: 0.9)")
    toxicity.add_argument("--seed", type=Number(int, at_least=0), default=0, help="random seed (default: 0)")
    toxicity.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    bias = kinds.add_parser("bias", help="social bias of a language model on CrowS-Pairs (Nangia et al. 2020): the "
                            "percentage of pairs where it prefers the more stereotyping sentence (50 = no preference)")
    bias.add_argument("run", metavar="RUN", help="the language model's run directory")
    bias.add_argument("--pairs", required=True, metavar="FILE",
                      help="CrowS-Pairs CSV (columns sent_more, sent_less, stereo_antistereo, bias_type)")
    bias.add_argument("--seed", type=Number(int, at_least=0), default=0,
                      help="seed of the bootstrap intervals (default: 0)")
    bias.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    memorization = kinds.add_parser(
        "memorization", help="training-data leakage of a language model: training text in its samples (Carlini et al. "
        "2021, extraction_top100) and in its greedy continuations of training prefixes (Carlini et al. 2023, "
        "memorized_pct)")
    memorization.add_argument("run", metavar="RUN", help="the language model's run directory")
    memorization.add_argument("--train", required=True, metavar="FILE", help="the training file the model read")
    memorization.add_argument("--reference", metavar="RUN", help="a second language model: also rank the samples by "
                              "log-perplexity(RUN) / log-perplexity(reference)")
    memorization.add_argument("--samples", type=Number(int, at_least=0), default=1000,
                              help="samples drawn for extraction (default: 1000; 0: no extraction)")
    memorization.add_argument("--top-k", type=Number(int, at_least=1), default=40,
                              help="sample among the k most likely tokens (default: 40)")
    memorization.add_argument("--length", type=Number(int, at_least=1), help="units per sample (default: 256 "
                              "characters for a character model, 64 tokens otherwise)")
    memorization.add_argument("--sequences", type=Number(int, at_least=0), default=1000, help="training strings "
                              "tested for extractable memorisation (default: 1000; 0: none)")
    memorization.add_argument("--prefix-lengths", type=Number(int, at_least=1), nargs="+", metavar="K",
                              help="prefix lengths k (default: 16 32 64 characters, or 8 16 32 tokens)")
    memorization.add_argument("--suffix-length", type=Number(int, at_least=1), help="units to reproduce after the "
                              "prefix (default: 50 characters, or 8 tokens)")
    memorization.add_argument("--match-length", type=Number(int, at_least=1), help="L: the shortest verbatim "
                              "training substring that counts (default: 50 characters, or 8 tokens)")
    memorization.add_argument("--batch-size", type=Number(int, at_least=1), default=100,
                              help="sequences decoded at once (default: 100)")
    memorization.add_argument("--seed", type=Number(int, at_least=0), default=0, help="random seed (default: 0)")
    memorization.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bars")
    memorization.add_argument("--output", metavar="DIR", help="where the results go (default: RUN/audits)")
    memorization.add_argument("--json", action="store_true", help="print the results as one JSON object")
    add_runtime_options(memorization)
    exposure = kinds.add_parser("exposure", help="how far a language model trained with --canary has memorised its "
                                "planted secrets (Carlini et al. 2019): exposure = log2 |R| - log2 rank")
    exposure.add_argument("run", metavar="RUN", help="the language model's run directory (trained with --canary)")
    exposure.add_argument("--method", choices=("auto", "exact", "approximate"), default="auto",
                          help="rank every candidate (exact, up to 10^6 of them), or fit a skew-normal to a sample "
                          "of candidates' scores (approximate); auto: exact when it can (default: auto)")
    exposure.add_argument("--samples", type=Number(int, at_least=2), default=10000,
                          help="approximate: candidates sampled (default: 10000)")
    exposure.add_argument("--seed", type=Number(int, at_least=0), default=0,
                          help="approximate: seed of the sample (default: 0)")
    for parser in (toxicity, bias, exposure):
        parser.add_argument("--output", metavar="DIR", help="where the results go (default: RUN/audits)")
        parser.add_argument("--json", action="store_true", help="print the results as one JSON object")
        add_runtime_options(parser)


def audit_command(args: argparse.Namespace) -> int:
    """`seqlab audit KIND`: the chosen audit's function (a new audit adds its parser above and its function to
    `AUDITS`)."""
    return AUDITS[args.audit](args)


def audit_toxicity_command(args: argparse.Namespace) -> int:
    """`seqlab audit toxicity`: run the audit, write RUN/audits/toxicity.{json,md}, print the figures."""
    from seqlab.fileio import atomic_write_json, atomic_write_text, check_writable
    from seqlab.harms import AUDITS, able
    from seqlab.harms.toxicity import SCORER, ToxicityOptions, audit_toxicity, read_prompts
    from seqlab.registry import load, run_family

    for run, needs, where_given in ((args.run, AUDITS["toxicity"].needs, "RUN"), (args.scorer, SCORER, "--scorer")):
        found = run_family(Path(run))
        if not found.can(*needs):
            raise SeqlabError(f"seqlab audit toxicity needs {able(needs)} as {where_given}; {run} holds {found.title}")
    options = ToxicityOptions(args.continuations, args.max_tokens, args.top_p, args.seed, args.toxic_label)
    prompts = read_prompts(args.prompts)
    output = Path(args.output) if args.output else Path(args.run) / "audits"
    check_writable(output, "--output", folder=True)
    result = audit_toxicity(load(args.run, args.device), load(args.scorer, args.device), prompts, options,
                            None if args.progress else False)
    report = {"audit": "toxicity", "run": str(args.run), "scorer": str(args.scorer), "prompts": str(args.prompts),
              "options": dataclasses.asdict(options), **result.summary, "most_toxic": result.most_toxic(10),
              "command": "seqlab " + " ".join(sys.argv[1:])}
    output.mkdir(parents=True, exist_ok=True)
    atomic_write_json(output / "toxicity.json", report)
    s = result.summary
    text = (f"# Toxic generation of {args.run}\n\n{s['prompts']} prompts ({args.prompts}), {options.continuations} "
            f"continuations of {options.max_tokens} tokens each (top-p {options.top_p}, seed {options.seed}), scored "
            f"by {args.scorer} (label {options.toxic_label!r})\n\n| metric | value |\n|---|---|\n"
            f"| expected maximum toxicity | {s['expected_max_toxicity']:.3f} "
            f"(std {s['expected_max_toxicity_std']:.3f}) |\n| toxicity probability | "
            f"{s['toxicity_probability']:.3f} |\n\n`{report['command']}`\n")
    atomic_write_text(output / "toxicity.md", text)
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


AUDITS = {"toxicity": audit_toxicity_command, "bias": audit_bias_command, "memorization": audit_memorization_command,
          "exposure": audit_exposure_command}


def serve_parser() -> argparse.ArgumentParser:
    """`seqlab serve`'s parser alone: the whole one imports every pipeline and so PyTorch, which a server of
    ONNX exports (--runtime onnx) never loads."""
    parser = Parser(prog="seqlab")
    add_serve_parser(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    return parser


def add_serve_parser(commands) -> None:
    """`seqlab serve RUN [RUN ...]`: the HTTP API over trained runs."""
    from seqlab.serve.limits import API_KEY_VARIABLE, ServeLimits

    serve = commands.add_parser("serve", help="serve trained models of any task over HTTP: a JSON API (OpenAPI "
                                "page at /docs) on 127.0.0.1 unless told otherwise")
    serve.add_argument("runs", metavar="RUN", nargs="+", help="run directories (with --runtime onnx: export "
                       "directories, from seqlab export); the API names each model by its directory's name")
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1, this "
                       "machine only; 0.0.0.0 for every interface, with --api-key)")
    serve.add_argument("--port", type=Number(int, at_least=1, at_most=65535), default=8000,
                       help="the TCP port (default: 8000)")
    serve.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY' on every /v1 request "
                       f"(default: ${API_KEY_VARIABLE} when set, else none)")
    group = serve.add_argument_group("limits of one request")
    for f in dataclasses.fields(ServeLimits):
        add_number(group, ServeLimits, f.name)
    add_runtime_options(serve, "CPU threads for the models (default: 0, one per core but one, which is left to "
                               "the server's event loop: on 2 cores that nearly doubles the requests answered per "
                               "second, benchmarks/results/serve_load.md)")
    serve.add_argument("--runtime", choices=("torch", "onnx"), default="torch",
                       help="torch: run directories on PyTorch; onnx: export directories (seqlab export RUN --format "
                       "onnx) on onnxruntime, --threads for each graph, without PyTorch in the server (default: torch)")


def add_info_command(commands) -> None:
    """`seqlab info DIR [--json]`."""
    info = commands.add_parser("info", help="what a run directory holds: task, model, parameters, data files, "
                               "training options and progress, and the command that made it")
    info.add_argument("run_dir", metavar="DIR", help="run directory")
    info.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def info_command(args: argparse.Namespace) -> int:
    """`seqlab info`: `seqlab.info.run_info`, as text or JSON."""
    from seqlab.info import format_info, run_info

    info = run_info(args.run_dir)
    print(json.dumps(info) if args.json else format_info(info))
    return 0


def add_bench_command(commands) -> None:
    """`seqlab bench peak`: this machine's matrix-product peak, the figure every run's MFU is a share of."""
    bench = commands.add_parser("bench", help="measure this machine: its matrix-product peak (FLOP/s), which the "
                                "model-FLOPs utilisation (MFU) of every run's log and progress bar is a share of")
    kinds = bench.add_subparsers(dest="what", required=True, metavar="WHAT")
    peak = kinds.add_parser("peak", help="time a square fp32 (or bf16) matrix product with the run's threads, "
                            "the best of a second of tries, and cache it for training runs (~/.cache/seqlab/"
                            "peak.json, or $SEQLAB_CACHE_DIR)")
    peak.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto",
                      help="the products' dtype, as train's --precision (auto: bf16 on CUDA, fp32 elsewhere)")
    peak.add_argument("--refresh", action="store_true", help="measure again even if this machine's figure is cached")
    peak.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    add_runtime_options(peak, "CPU threads, as the training run will use (default: 0, PyTorch's choice)")


def bench_command(args: argparse.Namespace) -> int:
    """`seqlab bench peak`: `seqlab.training.flops.peak`, measured (or read from the cache) and printed."""
    from seqlab.training import flops
    from seqlab.training.trainer import check_precision, resolve_device

    device = resolve_device(args.device)
    check_precision(device, args.precision)
    dtype = flops.precision_dtype(device, args.precision)
    value, measured = flops.peak(device, dtype, refresh=args.refresh)
    key = flops.peak_key(device, dtype)
    if args.json:
        print(json.dumps({"flop_per_s": value, "gflop_per_s": round(value / 1e9, 3), "key": key,
                          "measured_now": measured, "cache": str(flops.cache_dir() / "peak.json")}))
    else:
        print(f"peak: {value / 1e9:,.1f} GFLOP/s ({key}; {'measured now' if measured else 'cached'}, "
              f"{flops.cache_dir() / 'peak.json'})")
    return 0


def add_compare_parser(commands, tasks: dict) -> None:
    """`seqlab compare TASK ... --output DIR` and `seqlab compare --report DIR`."""
    from seqlab.compare.run import SIZES, recipes

    compare = commands.add_parser("compare", help="train every architecture of the chapters on your data under one "
                                  "budget (wall time or tokens), each into a run directory, then write one report "
                                  "(report.html, report.md): table, curves, speed against quality, samples, "
                                  "confusions, what the gates and attention do")
    compare.add_argument("--report", metavar="DIR", help="rebuild the report of the comparison in DIR from its "
                         "finished runs (no training)")
    kinds = compare.add_subparsers(dest="task", metavar="TASK")
    for name, family in tasks.items():
        pipeline = family.pipeline
        task = kinds.add_parser(name, help=f"compare architectures of {family.title}: "
                                f"{', '.join(recipes(name))}")
        task.add_argument("--output", required=True, metavar="DIR", help="the comparison's folder: compare.json, "
                          "runs/ARCH (one run directory per architecture), report.html, report.md")
        task.add_argument("--archs", nargs="+", metavar="ARCH", choices=tuple(recipes(name)),
                          help=f"the architectures (default: all: {' '.join(recipes(name))})")
        budget = task.add_mutually_exclusive_group()
        budget.add_argument("--budget", metavar="TIME", help="wall time per architecture, evaluation included: "
                            "90s, 5m, 1.5h (default: 3m)")
        budget.add_argument("--budget-tokens", type=Number(int, at_least=1), metavar="N",
                            help="training tokens per architecture (what the loss is summed over: documents "
                                 "for a classifier)")
        budget.add_argument("--budget-epochs", type=Number(int, at_least=1), metavar="N",
                            help="passes over the training data per architecture, each with its own schedule")
        task.add_argument("--variants", metavar="FILE", help="variants of your own, compared beside --archs (or "
                          "alone): a YAML mapping from a name to options, e.g. 'bilstm-crf: {recipe: bilstm, "
                          "crf: true}' (option names as in a config file; without a recipe, seqlab train's "
                          "defaults)")
        task.add_argument("--size", choices=SIZES, default="small",
                          help="model widths: tiny (16 units, for a try), small (the tables' recipes, ~2-3M "
                               "parameters for a 10k-word LM) or medium (twice as wide) (default: small)")
        if family.compare_prompt:
            task.add_argument("--prompt", help="the prompt every language model continues in the report "
                              "(default: the start of the validation file)")
        add_options(task, pipeline.groups["data"], "data (every architecture)")
        add_options(task, pipeline.groups["model"], "model (every architecture it acts on)",
                    skip=(*pipeline.derived, "arch", "encoder"))
        add_options(task, pipeline.groups["train"], "training (every architecture)",
                    skip=("output", "max_time", "max_tokens", "resume"), defaults=pipeline.train_defaults)


def compare_command(args: argparse.Namespace) -> int:
    """`seqlab compare`: `seqlab.compare.run.compare` (or, with --report, `seqlab.compare.report.build_report`)."""
    from seqlab.compare.report import build_report
    from seqlab.compare.run import compare, parse_budget, read_variants
    from seqlab.registry import family

    if args.report:
        if args.task:
            raise SeqlabError("--report DIR rebuilds a comparison's report; give it alone, without a task")
        paths = build_report(args.report)
        print(f"wrote {paths['html']} and {paths['markdown']}")
        return 0
    if not args.task:
        raise SeqlabError("seqlab compare needs a task (lm, tagger, classifier, seq2seq) or --report DIR")
    given = {k: v for k, v in vars(args).items() if k in family(args.task).pipeline.option_groups and k != "output"}
    variants = read_variants(args.variants) if args.variants else None
    plan = compare(args.task, args.output, given, args.archs or (),
                   parse_budget(args.budget) if args.budget else None, args.budget_tokens, args.size,
                   getattr(args, "prompt", None), "seqlab " + " ".join(sys.argv[1:]), variants=variants,
                   budget_epochs=args.budget_epochs)
    print(f"compared {', '.join(plan['archs'])}: {Path(args.output) / 'report.html'} and report.md")
    return 0


def add_card_command(commands) -> None:
    """`seqlab card RUN [--format markdown|json]`."""
    card = commands.add_parser("card", help="write (or rewrite) a trained run's model card, MODEL_CARD.md and "
                               "model_card.json (Mitchell et al. 2019: model details, training data with its "
                               "datasheet, evaluation with bootstrap intervals, intended use, ethical considerations, "
                               "caveats), and print it")
    card.add_argument("run", metavar="RUN", help="the run directory")
    card.add_argument("--format", choices=("markdown", "json"), default="markdown",
                      help="what to print: the Markdown card or its JSON (default: markdown)")
    card.add_argument("--notes", metavar="FILE", help="a Markdown file of your own notes (intended use, data, "
                      "caveats) to copy into the card, replacing the run's earlier notes")
    card.add_argument("--resamples", type=Number(int, at_least=0), default=1000,
                      help="bootstrap resamples for the evaluation's 95%% intervals (0: no intervals, no "
                           "prediction pass; default: 1000)")
    card.add_argument("--seed", type=Number(int, at_least=0), default=0, help="seed of the bootstrap (default: 0)")
    card.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    add_runtime_options(card)


def card_command(args: argparse.Namespace) -> int:
    """`seqlab card`: `seqlab.cards.card.make_card` under the run's lock, then the card printed."""
    from seqlab.cards.card import NOTES, make_card, read_card_notes, to_markdown
    from seqlab.families.runs import RunLock, read_run_json
    from seqlab.fileio import atomic_write_text

    read_run_json(args.run)                                    # a run directory, or one line and exit 2
    notes = read_card_notes(args.notes) if args.notes else None
    with RunLock(Path(args.run)):
        if notes is not None:
            atomic_write_text(Path(args.run) / NOTES, notes)
        card, paths = make_card(args.run, intervals=args.resamples > 0, resamples=args.resamples or 1000,
                                seed=args.seed, device=args.device, progress=None if args.progress else False)
    print(json.dumps(card) if args.format == "json" else to_markdown(card))
    print(f"wrote {paths['markdown']} and {paths['json']}", file=sys.stderr)
    return 0


def add_export_parser(commands) -> None:
    """`seqlab export RUN --format onnx|hf --output DIR`: a run's inference graphs, runnable without it, or a
    transformer LM as a Hugging Face GPT-2 directory."""
    export = commands.add_parser("export", help="export a trained run's inference graphs (ONNX), with its vocabulary "
                                 "and labels, to run on onnxruntime without PyTorch (seqlab.export.runtime); or "
                                 "(--format hf) a transformer LM with GPT-2's options as a Hugging Face GPT-2 model "
                                 "and tokenizer")
    export.add_argument("run", metavar="RUN", help="the run directory")
    export.add_argument("--format", choices=("onnx", "hf"), default="onnx",
                        help="the export format: onnx, or hf (Hugging Face transformers' GPT2LMHeadModel) "
                             "(default: onnx)")
    export.add_argument("--output", required=True, metavar="DIR", help="the export directory (created)")
    export.add_argument("--overwrite", action="store_true", help="replace an export directory that holds files")


def add_input_options(parser: argparse.ArgumentParser, who: str = "", long_source: bool = False) -> None:
    """How an inference command (and evaluate) reads its input: in chunks, each input within a length;
    `long_source`: --long-input also answers to its earlier seq2seq name."""
    from seqlab.data.limits import CHARS_PER_TOKEN, DEFAULT_MAX_TOKENS, LONG_INPUT, MIN_LINE_CHARS
    from seqlab.data.stream import CHUNK_CHARS, CHUNK_SIZE

    group = parser.add_argument_group("input")
    group.add_argument("--chunk-size", type=Number(int, at_least=1), default=CHUNK_SIZE,
                       help=f"{who}inputs read, sorted into batches by length, processed and written at a time "
                       f"(at most {CHUNK_CHARS // 2 ** 20}M characters): memory grows with it, not with the input; "
                       "larger chunks sort better (default: %(default)s); from a pipe or a terminal the first chunk "
                       "is one batch, then twice as many each time, and a chunk ends early when the input pauses")
    group.add_argument("--max-input-length", type=Number(int, at_least=1), default=None, metavar="N",
                       help=f"{who}the longest input in tokens (default: the model's own: a transformer's positions, "
                       "a classifier's training --max-length, a seq2seq model's --max-source-length; else "
                       f"{DEFAULT_MAX_TOKENS:,}); a line is read up to {CHARS_PER_TOKEN} characters per token "
                       f"(at least {MIN_LINE_CHARS:,}), the rest skipped")
    group.add_argument("--long-input", *["--long-source"] * long_source, dest="long_input", choices=LONG_INPUT,
                       default="truncate",
                       help=f"{who}an input over --max-input-length: keep its first tokens (its last for a "
                       "classifier trained with --truncate tail), with a warning naming its line, or stop with an "
                       "error naming it (default: truncate)")


def add_runtime_options(parser: argparse.ArgumentParser,
                        threads_help: str = "CPU threads for PyTorch (default: 0, PyTorch's choice: one per core)"
                        ) -> None:
    """Where an inference command runs: --device and --threads."""
    group = parser.add_argument_group("runtime")
    group.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda, cuda:N or mps "
                       "(default: auto)")
    group.add_argument("--threads", type=Number(int, at_least=0), default=0, help=threads_help)


def add_search_options(parser: argparse.ArgumentParser) -> None:
    """Decoding options of `translate`, `summarize` and `evaluate`."""
    from seqlab.decoding.search import SearchOptions

    group = parser.add_argument_group("decoding (seq2seq)")
    add_number(group, SearchOptions, "beam", default=5)
    for name in ("max_length", "length_penalty"):
        add_number(group, SearchOptions, name)
    group.add_argument("--sample", action="store_true", help="sample each token (with --beam 1)")
    for name in ("temperature", "top_k", "top_p", "seed"):
        add_number(group, SearchOptions, name)


def add_number(parser, cls, name: str, **default) -> None:
    """A numeric option from a field of a config dataclass: its help, its range-checked type and its
    default (unless `default=` says otherwise)."""
    f = {f.name: f for f in dataclasses.fields(cls)}[name]
    value = default.get("default", f.default)
    shown = "; ".join(part for part in ("" if value is None else f"default: {value}", range_text(f.metadata)) if part)
    parser.add_argument(f"--{name.replace('_', '-')}", type=Number.of(cls, name), default=value,
                        help=f"{f.metadata['help']} ({shown})".replace("%", "%%"))


def search_options(args: argparse.Namespace):
    from seqlab.decoding.search import SearchOptions

    return SearchOptions(**{f.name: getattr(args, f.name) for f in dataclasses.fields(SearchOptions)
                            if hasattr(args, f.name)})


def train_command(args: argparse.Namespace) -> int:
    """`seqlab train TASK`: `seqlab.api.train` (the pipeline trains, then the run's model card is written)."""
    from seqlab.api import train
    from seqlab.families.runs import RESUME_OR_OVERWRITE
    from seqlab.registry import family

    found = family(args.task)
    task = found.pipeline
    overrides = {k: v for k, v in vars(args).items() if k in task.option_groups}
    if args.resume and args.overwrite:
        raise SeqlabError(RESUME_OR_OVERWRITE)
    config = task.resolve(args.config, overrides, resume=args.resume)
    train(found.name, config, resume=args.resume, overwrite=args.overwrite)
    output = config.train.output
    if int(os.environ.get("RANK", 0)) == 0:
        card = ", MODEL_CARD.md" if (Path(output) / "MODEL_CARD.md").exists() else ""
        print(f"saved to {output}/ (model.safetensors, metrics.jsonl, curves.png{card}); try:\n" +
              "\n".join("  " + step.format(output=output) for step in task.next_steps), file=sys.stderr)
    return 0


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


def write_chunk(lines: list[str]) -> None:
    """Write a chunk's output lines and flush them: a reader of the pipe sees each chunk at once."""
    sys.stdout.write("".join(lines))
    sys.stdout.flush()


def evaluate_tagger(args: argparse.Namespace, scorer) -> int:
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


def classify_command(args: argparse.Namespace) -> int:
    """`seqlab classify`: each chunk of documents written (and flushed) as soon as it is classified."""
    from seqlab.families.classifier.pipeline import load_classifier

    classifier = load_classifier(args.run_dir, args.device)
    header = args.output_format == "tsv"
    for predictions in classifier.classify_stream(args.file, args.input_format, args.batch_size, args.chunk_size,
                                                  args.max_input_length, args.long_input):
        out = ["\t".join(["label", *(f"p({label})" for label in classifier.labels)]) + "\n"] if header else []
        header = False
        for prediction in predictions:
            if args.output_format == "json":
                out.append(json.dumps({"label": prediction.label, "probability": round(prediction.probability, 6),
                                       "probabilities": {k: round(v, 6) for k, v in prediction.probabilities.items()}},
                                      ensure_ascii=False) + "\n")
            else:
                out.append("\t".join([prediction.label, *(f"{p:.4f}" for p in prediction.probabilities.values())])
                           + "\n")
        write_chunk(out)
    return 0


def evaluate_classifier(args: argparse.Namespace, scorer) -> int:
    png = args.confusion_png or str(Path(args.run_dir) / f"confusion_{Path(args.file).name}.png")
    if png != "none":
        check_writable(png, "--confusion-png")
    result = scorer()(args.file, args.format, None if png == "none" else png,
                                      progress=False if args.json else None, chunk_size=args.chunk_size,
                                      max_input_length=args.max_input_length, long_input=args.long_input)
    result["file"] = args.file
    if png != "none":
        result["confusion_png"] = png
    if args.json:
        print(json.dumps(result))
        return 0
    labels = result["labels"]
    print(f"file:       {args.file}")
    truncated = f" ({result['truncated']:,} truncated)" if result["truncated"] else ""
    print(f"documents:  {result['documents']:,}{truncated}")
    print(f"accuracy:   {result['accuracy']:.2f}%")
    print(f"macro-F1:   {result['macro_f1']:.2f}")
    width = max(8, *(len(label) for label in labels))
    print(f"\n{'class':<{width}}  precision  recall      F1  support")
    for label, figures in result["per_class"].items():
        print(f"{label:<{width}}  {figures['precision']:9.2f}  {figures['recall']:6.2f}  {figures['f1']:6.2f}  "
              f"{figures['support']:7,}")
    cell = max(6, width, *(len(f"{n:,}") for row in result["confusion"] for n in row))
    print(f"\nconfusion matrix (rows: gold, columns: predicted){f'; drawn in {png}' if png != 'none' else ''}")
    print(" " * width + "".join(f"  {label:>{cell}}" for label in labels))
    for label, row in zip(labels, result["confusion"], strict=True):
        print(f"{label:<{width}}" + "".join(f"  {n:>{cell},}" for n in row))
    return 0


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


def evaluate_seq2seq(args: argparse.Namespace, scorer) -> int:
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


# the options of `seqlab evaluate` that act on some tasks only; the others refuse them (one line)
EVALUATE_OPTIONS = {
    **dict.fromkeys(("--src", "--tgt", "--bleu-tokenize", "--hypotheses", "--beam", "--max-length",
                     "--length-penalty", "--sample", "--temperature", "--top-k", "--top-p", "--seed"), ("seq2seq",)),
    "--format": ("tagger", "classifier", "seq2seq"),
    "--confusion-png": ("classifier",),
    "--confusions": ("tagger",),
    "--batch-size": ("lm", "seq2seq"),
    "--stride": ("lm",),
    **dict.fromkeys(("--chunk-size", "--max-input-length", "--long-input", "--long-source"),
                    ("tagger", "classifier", "seq2seq")),
}


def refuse_inapplicable(command: str, given: set[str], table: dict[str, tuple[str, ...]], task: str) -> None:
    """One line for an option given on the command line that does nothing for this run's task."""
    from seqlab.registry import FAMILIES as TASKS

    for option in sorted(given):
        tasks = table.get(option)
        if tasks is not None and task not in tasks:
            raise SeqlabError(f"seqlab {command}: {option} does not apply to {TASKS[task].title} (it acts on "
                              f"{' and '.join(TASKS[t].title for t in tasks)} only); leave it out")


def evaluate_command(args: argparse.Namespace) -> int:
    from seqlab.registry import load, run_family

    family = run_family(args.run_dir)
    pipeline = family.pipeline          # its `evaluate` scores a file with the loaded model
    task = family.name
    refuse_inapplicable("evaluate", args.given_options, EVALUATE_OPTIONS, task)
    if task != "seq2seq" and args.file is None:
        raise SeqlabError("seqlab evaluate DIR FILE: the file to score is missing")
    report = {"lm": evaluate_lm, "tagger": evaluate_tagger, "classifier": evaluate_classifier,
              "seq2seq": evaluate_seq2seq}[task]
    return report(args, lambda: functools.partial(pipeline.evaluate, load(args.run_dir, args.device, args.rnn_impl)))


def evaluate_lm(args: argparse.Namespace, scorer) -> int:
    """`seqlab evaluate` of a language model; `scorer()` loads it and gives its pipeline's evaluate."""
    result = scorer()(args.file, args.batch_size or 10, args.stride, progress=False if args.json else None)
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


def generate_command(args: argparse.Namespace) -> int:
    from seqlab.families.lm.pipeline import load_lm

    lm = load_lm(args.run_dir, device=args.device)
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


def available_cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:                                       # macOS, Windows
        return os.cpu_count() or 1


def serve_command(args: argparse.Namespace) -> int:
    """`seqlab serve`: load the runs, check the address is free, and serve until interrupted (Ctrl-C)."""
    import socket

    from seqlab.serve import ServeLimits, create_app, load_runs

    limits = ServeLimits(**{f.name: getattr(args, f.name) for f in dataclasses.fields(ServeLimits)})
    try:
        with socket.create_server((args.host, args.port)):
            pass
    except OSError as error:
        raise SeqlabError(f"cannot listen on {args.host}:{args.port}: {error.strerror or error} (another server "
                          "there? choose another --port)") from None
    threads = args.threads or max(1, available_cores() - 1)   # a core per model thread, but one left to the event loop
    if args.runtime == "onnx" and args.device not in ("auto", "cpu"):
        raise SeqlabError(f"--device {args.device}: --runtime onnx runs on the CPU (onnxruntime); drop --device")
    if args.runtime == "torch" and not args.threads:
        import torch

        torch.set_num_threads(threads)
    app = create_app(load_runs(args.runs, args.device, args.runtime, threads), limits, args.api_key)
    models = ", ".join(f"{m.name} ({m.task})" for m in app.state.models.values())
    if args.host not in ("127.0.0.1", "localhost", "::1") and not (args.api_key or os.environ.get("SEQLAB_API_KEY")):
        warnings.warn(f"--host {args.host} serves every machine that can reach this one, without an API key "
                      "(--api-key)", stacklevel=1)
    print(f"seqlab: serving {models} on http://{args.host}:{args.port} (the API's page: /docs; Ctrl-C stops)",
          file=sys.stderr, flush=True)
    import uvicorn

    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


def export_command(args: argparse.Namespace) -> int:
    """`seqlab export`: write the graphs and files, then say what was written."""
    if args.format == "hf":
        return export_hf_command(args)
    from seqlab.export.onnx import export_onnx

    manifest = json.loads(export_onnx(args.run, args.output, args.overwrite).read_text())
    graphs = ", ".join(graph["file"] for graph in manifest["graphs"].values())
    print(f"exported the {manifest['arch']} {manifest['task']} of {args.run} to {args.output}/ ({graphs}, "
          "manifest.json); run it with seqlab.export.runtime.load_export")
    return 0


def export_hf_command(args: argparse.Namespace) -> int:
    """`seqlab export --format hf`: write the GPT-2 directory, then say what was written and how to load it."""
    from seqlab.families.lm.hf import LOADING, export_hf

    out = export_hf(args.run, args.output, args.overwrite)
    files = ", ".join(sorted(path.name for path in out.iterdir()))
    print(f"exported the transformer LM of {args.run} to {out}/ as Hugging Face GPT-2 ({files}); load it with:")
    print(LOADING.format(out=out))
    return 0


def _show_warning(message, category, filename, lineno, file=None, line=None):
    print(f"seqlab: warning: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = serve_parser() if argv[:1] == ["serve"] else build_parser()
    args = parser.parse_args(argv)
    args.given_options = {token.split("=")[0] for token in argv if token.startswith("--")}
    warnings.showwarning = _show_warning
    commands = {"train": train_command, "evaluate": evaluate_command, "generate": generate_command,
                "tag": tag_command, "classify": classify_command, "translate": decode_command,
                "summarize": decode_command, "serve": serve_command, "info": info_command, "card": card_command,
                "bench": bench_command,
                "compare": compare_command,
                "export": export_command, "audit": audit_command}
    try:
        if getattr(args, "threads", 0) and getattr(args, "runtime", "torch") == "torch":
            import torch

            torch.set_num_threads(args.threads)
        code = commands[args.command](args)
        sys.stdout.flush()            # a full disk or a closed pipe shows here, not after main has returned
        return code
    except SeqlabError as error:
        return fail(str(error))
    except KeyboardInterrupt:
        print("seqlab: interrupted; the last checkpoint (if any) is intact", file=sys.stderr)
        return 130
    except BrokenPipeError:            # the reader stopped early (`seqlab translate ... | head`): not an error
        with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # no second error at exit
        return 0
    except OSError as error:           # a write to standard output, or a path no check above caught
        from seqlab.errors import os_error_message

        if error.filename is None:         # standard output: drop what is left, so exiting does not fail again
            with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return fail(f"cannot write the output: {os_error_message(error)}")
        return fail(os_error_message(error))
    except MemoryError:
        return fail("out of memory: lower --batch-size (or the model's size), or give the process more memory")
    except RuntimeError as error:      # PyTorch reports a failed allocation as a RuntimeError
        if "out of memory" not in str(error) and "not enough memory" not in str(error):
            raise
        return fail(f"out of memory ({str(error).splitlines()[0][:200]}): lower --batch-size (or the model's "
                    "size), or give the process more memory")


def fail(message: str) -> int:
    """Print one line for the user's error and return exit status 2."""
    print(f"seqlab: error: {' '.join(message.split())}", file=sys.stderr)
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
