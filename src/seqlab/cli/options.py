"""The CLI's building blocks, shared by the command modules (and the families' `cli` parts): a parser whose
errors are one line, numbers checked against their range, and options made from config dataclasses, so that
every option, numeric ones with their range, is declared once as a dataclass field (`seqlab.config.option`)
and read the same on the command line, in config files and in config.json."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeAlias

from seqlab.config import element_type, field_default, field_type, option, range_text, value_problem
from seqlab.data.limits import CHARS_PER_TOKEN, DEFAULT_MAX_TOKENS, LONG_INPUT, MIN_LINE_CHARS
from seqlab.data.stream import CHUNK_CHARS, CHUNK_SIZE
from seqlab.decoding.options import SearchOptions
from seqlab.errors import SeqlabError

UNREAD_BY = "_seqlab_unread_by"        # the namespace attribute naming the parser that left arguments unread
Commands: TypeAlias = "argparse._SubParsersAction[Parser]"   # what subcommands are added to (a Parser's)
Handler: TypeAlias = Callable[[argparse.Namespace], int]       # what runs a command: its exit status


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: `seqlab train lm: error: argument --lr: must be positive, got -1`, and
    no abbreviated options: `--dev` must not be taken for `--device` (its subcommands' parsers are Parsers too).
    An unknown option is named by the subcommand that could not read it, with its nearest option:
    `seqlab train lm: error: unknown option --epoch; did you mean --epochs? (see seqlab train lm --help)`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def parse_known_args(self, args: Iterable[str] | None = None, namespace: Any = None) -> tuple[Any, list[str]]:
        namespace, extras = super().parse_known_args(args, namespace)
        if extras and not hasattr(namespace, UNREAD_BY):       # the innermost subcommand's parser returns first
            setattr(namespace, UNREAD_BY, self)
        return namespace, extras

    def parse_args(self, args: Iterable[str] | None = None, namespace: Any = None) -> Any:
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            parser = getattr(namespace, UNREAD_BY, self)
            parser.error(parser.unknown(extras))
        return namespace

    def unknown(self, extras: list[str]) -> str:
        """What is wrong with arguments no option of this parser reads: the first unknown option, and the option
        of this parser nearest to it (difflib), if any is near."""
        option = next((token.split("=")[0] for token in extras if token.startswith("--")), None)
        if option is None:
            return f"unrecognized arguments: {' '.join(extras)}"
        known = [name[2:] for name in self._option_string_actions if name.startswith("--")]
        near = difflib.get_close_matches(option[2:], known, n=1, cutoff=0.6)   # the names: "--" alike in all
        return f"unknown option {option}" + (f"; did you mean --{near[0]}?" if near else "")



class Number:
    """An argparse type: an int or a finite float within a range (the keywords of `seqlab.config.option`)."""

    def __init__(self, kind: type, **bounds: Any) -> None:
        self.kind, self.bounds = kind, bounds
        self.__name__ = kind.__name__          # argparse names the type in its messages

    @classmethod
    def of(cls, config_class: type, name: str) -> Number:
        """The type of a config field, with its range."""
        f = {f.name: f for f in dataclasses.fields(config_class)}[name]
        return cls(field_type(config_class, f), **{k: f.metadata.get(k) for k in ("at_least", "above", "at_most",
                                                                                   "below")})

    def __call__(self, text: str) -> Any:
        try:
            value = self.kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expects {'an integer' if self.kind is int else 'a number'}, "
                                             f"got {text!r}") from None
        problem = value_problem(self.kind, self.bounds, value)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return value


def add_options(parser: argparse.ArgumentParser, cls: type, title: str, skip: Sequence[str] = (),
                defaults: dict[str, Any] | None = None) -> None:
    """Every field of a config dataclass as an option of `parser`, under `title`, given only when the user
    gives it (a config file and config.json fill the rest): `seqlab train` and `seqlab compare`."""
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
        kwargs: dict[str, Any] = {"dest": f.name, "default": argparse.SUPPRESS, "help": help_text}
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


def add_number(parser: argparse.ArgumentParser | argparse._ArgumentGroup, cls: type, name: str, *,
               default: Any = dataclasses.MISSING, help: str | None = None,
               flags: tuple[str, ...] = (), metavar: str | None = None) -> None:
    """A numeric option from a field of a config dataclass, the one place it is declared: its help (or
    `help`), its range-checked type and its default (unless `default` says otherwise). `flags`: other names
    for it; a `list[int]` field takes one or more numbers."""
    f = {f.name: f for f in dataclasses.fields(cls)}[name]
    value = field_default(f) if default is dataclasses.MISSING else default
    kind = field_type(cls, f)
    item = element_type(kind)
    shown = "; ".join(part for part in ("" if value is None else f"default: {value}", range_text(f.metadata)) if part)
    bounds = {k: f.metadata.get(k) for k in ("at_least", "above", "at_most", "below")}
    kwargs: dict[str, Any] = {"type": Number(item or kind, **bounds), "default": value,
                              "help": f"{help or f.metadata['help']} ({shown})".replace("%", "%%"), "dest": name}
    if item is not None:
        kwargs["nargs"] = "+"
    if metavar:
        kwargs["metavar"] = metavar
    parser.add_argument(f"--{name.replace('_', '-')}", *flags, **kwargs)


@dataclass
class CommandOptions:
    """The numeric options several commands share (each command adds those it takes, with its own help)."""

    threads: int = option(0, "CPU threads for PyTorch (0: PyTorch's choice: one per core)", at_least=0)
    read_threads: int = option(0, "CPU threads for reading a batch of prompts (generate, completions, score): one "
                                  "wide kernel call per layer, where every core pays, while the token-by-token steps "
                                  "keep --threads (0: every core; on 2 cores it answers about 1.3 times the generate "
                                  "requests at concurrency 32, benchmarks/results/serve_load.md)", at_least=0)
    batch_size: int = option(64, "inputs per batch", at_least=1)
    chunk_size: int = option(CHUNK_SIZE, "inputs read, sorted into batches by length, processed and written at a "
                             f"time (at most {CHUNK_CHARS // 2 ** 20}M characters): memory grows with it, not with "
                             "the input; larger chunks sort better; from a pipe or a terminal the first chunk is one "
                             "batch, then twice as many each time, and a chunk ends early when the input pauses",
                             at_least=1)
    max_input_length: int | None = option(
        None, "the longest input in tokens (default: the model's own: a transformer's positions, a classifier's "
        f"training --max-length, a seq2seq model's --max-source-length; else {DEFAULT_MAX_TOKENS:,}); a line is read "
        f"up to {CHARS_PER_TOKEN} characters per token (at least {MIN_LINE_CHARS:,}), the rest skipped", at_least=1)
    seed: int = option(0, "random seed", at_least=0)


def add_runtime_options(parser: argparse.ArgumentParser, threads_help: str | None = None) -> None:
    """Where a command runs: --device and --threads."""
    group = parser.add_argument_group("runtime")
    group.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda, cuda:N or mps "
                       "(default: auto)")
    add_number(group, CommandOptions, "threads", help=threads_help)


def add_input_options(parser: argparse.ArgumentParser, who: str = "", long_source: bool = False) -> None:
    """How an inference command (and evaluate) reads its input: in chunks, each input within a length;
    `long_source`: --long-input also answers to its earlier seq2seq name; `who`: whom the options act on."""
    group = parser.add_argument_group("input")
    field = {f.name: f for f in dataclasses.fields(CommandOptions)}
    for name in ("chunk_size", "max_input_length"):
        add_number(group, CommandOptions, name, help=who + field[name].metadata["help"],
                   metavar="N" if name == "max_input_length" else None)
    group.add_argument("--long-input", *["--long-source"] * long_source, dest="long_input", choices=LONG_INPUT,
                       default="truncate",
                       help=f"{who}an input over --max-input-length: keep its first tokens (its last for a "
                       "classifier trained with --truncate tail), with a warning naming its line, or stop with an "
                       "error naming it (default: truncate)")


def add_search_options(parser: argparse.ArgumentParser, title: str = "decoding") -> None:
    """Decoding options (`SearchOptions`): greedy, sampling or beam search of a sequence-to-sequence model."""
    group = parser.add_argument_group(title)
    add_number(group, SearchOptions, "beam", default=5)
    for name in ("max_length", "length_penalty"):
        add_number(group, SearchOptions, name)
    group.add_argument("--sample", action="store_true", help="sample each token (with --beam 1)")
    for name in ("temperature", "top_k", "top_p", "seed"):
        add_number(group, SearchOptions, name)


def search_options(args: argparse.Namespace) -> SearchOptions:
    return SearchOptions(**{f.name: getattr(args, f.name) for f in dataclasses.fields(SearchOptions)
                            if hasattr(args, f.name)})


def require_file(args: argparse.Namespace) -> None:
    """The file to score, for a family that reads no --src."""
    if args.file is None:
        raise SeqlabError("seqlab evaluate DIR FILE: the file to score is missing")


def inference_command(commands: Commands, name: str, help: str, reads: str,
                      formats: dict[str, tuple[tuple[str, ...], str]], unit: str, handler: Handler,
                      long_source: bool = False) -> argparse.ArgumentParser:
    """An inference command of a family (`seqlab tag DIR [FILE]`, ...): the run directory, the file (`reads`:
    what a line of it is; standard input by default), --input-format and --output-format (`formats`:
    {option: (choices, help)}, the first choice the default; --input-format also takes `auto`, its default,
    which `input_format` resolves before `handler` runs), the batch size in `unit`s, the input and runtime
    options, and the function that runs it. Returns the parser, for the options of its own."""
    parser = commands.add_parser(name, help=help)
    run_dir_argument(parser)
    parser.add_argument("file", metavar="FILE", nargs="?", default="-",
                        help=f"{reads} (default: - for standard input)")
    for flag, (choices, text) in formats.items():
        if flag == "--input-format":
            named = [choice for choice in choices if choice != "text"]
            parser.add_argument(flag, choices=("auto", *choices), default="auto",
                                help=f"{text}; auto: a file whose extension names one of {', '.join(named)} "
                                f"(.gz too) is read in that format, with the run's columns; any other file, and "
                                f"standard input, as text (default: auto)")
            continue
        parser.add_argument(flag, choices=choices, default=choices[0], help=f"{text} (default: {choices[0]})")
    add_number(parser, CommandOptions, "batch_size", help=f"{unit} per batch")
    add_input_options(parser, long_source=long_source)
    add_runtime_options(parser)
    if "--input-format" in formats:
        choices = formats["--input-format"][0]

        def resolved(args: argparse.Namespace) -> int:
            args.input_format = input_format(args.input_format, args.file, choices)
            return handler(args)
        parser.set_defaults(handler=resolved)
    else:
        parser.set_defaults(handler=handler)
    return parser


def input_format(chosen: str, path: str, choices: tuple[str, ...]) -> str:
    """--input-format `auto` resolved: the format the file's extension names (`reviews.csv`, `test.conllu`,
    `pairs.jsonl.gz`) when it is one of `choices`, else text (one input per line; standard input too), so that
    a table's header row and label column are never read as an input. Any other choice stands."""
    if chosen != "auto":
        return chosen
    suffix = Path(str(path).removesuffix(".gz")).suffix.lstrip(".").lower()
    return suffix if suffix in choices and suffix != "text" else "text"


def run_dir_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="DIR", help="run directory")


def write_chunk(lines: list[str]) -> None:
    """Write a chunk's output lines and flush them: a reader of the pipe sees each chunk at once."""
    sys.stdout.write("".join(lines))
    sys.stdout.flush()


@dataclass(frozen=True)
class EvaluateOption:
    """An option of `seqlab evaluate` as one family takes it, declared in its `cli` part (`EVALUATE_OPTIONS`); the
    command's parser holds each flag once, built from every family's (`seqlab.cli.evaluate`): the choices of all
    that declare it, their helps (one text once; different ones joined by ", or ", then each family's `default`)."""

    flag: str                                   # "--confusions"
    help: str = ""                              # what it does to this family's runs ("": a numeric field's own help)
    default: str = ""                           # this family's default in words, where families differ ("10 streams")
    choices: tuple[str, ...] = ()               # the values it takes for this family's runs
    metavar: str | None = None                  # the value's name in --help ("FILE")
    number: type | None = None                  # a numeric option: the config dataclass whose field of the flag's
    #                                             name gives its type, range, default and help (`add_number`)
    value: str | None = None                    # the parser's default of a non-numeric option


def merged_help(options: list[EvaluateOption]) -> str:
    """The help of one flag declared by several families: each distinct text once, joined by ", or ", then the
    families' own defaults ("parallel streams of a text, or sentences decoded at once (default: 10 streams, 64
    sentences)")."""
    texts = [option.help or field_help(option) for option in options]
    defaults = [option.default for option in options if option.default]
    text = ", or ".join(dict.fromkeys(texts))
    return f"{text} (default: {', '.join(defaults)})" if defaults else text


def field_help(option: EvaluateOption) -> str:
    """A numeric option's help from its config field."""
    if option.number is None:
        return ""
    field = {f.name: f for f in dataclasses.fields(option.number)}[option.flag[2:].replace("-", "_")]
    text: str = field.metadata["help"]
    return text
