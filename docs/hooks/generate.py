"""The pages of the documentation site generated from the code, so that they cannot drift from it (a MkDocs hook,
`mkdocs.yml`'s `hooks:`; `make docs` builds the site with it):

    reference/cli/          every command and option, from the parsers (`seqlab.cli.main.build_parser`): one page
                            a command
    reference/config.md     every config key of every family with its type, default and range, from the config
                            dataclasses (`seqlab.config.option`)
    reference/errors.md     every message seqlab refuses input with, read from the source (`raise SeqlabError`)
    reference/layout.md     every module of the package and the first line of its docstring
    benchmarks/results/     one page per `benchmarks/results/*.json`, its table rendered from the records, and
                            the figures beside them

and `<!-- results: NAME [column=value ...] -->` in any page: the rows of `benchmarks/results/NAME.json` (those whose
columns hold those values) as a table, in place, with the machine, command and date of each row, so that no figure
of a benchmark is copied into the site by hand; `<!-- explore: views -->`: every view `seqlab explore` shows, from
the families' declarations (each `explain` part's `VIEWS`).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import json
import logging
import posixpath
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))     # notebooks.py, beside this hook
import diagrams  # noqa: E402,F401  (the same: notebooks.diagram_block imports it while a page builds)
import escape  # noqa: E402  (special tokens as text: escape.py, beside this hook)
import notebooks  # noqa: E402  (imported now: MkDocs restores sys.path once its hooks are loaded)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from common import _fmt as benchmark_number  # noqa: E402  (benchmarks/common.py: the results format)

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "seqlab"
RESULTS = ROOT / "benchmarks" / "results"
log = logging.getLogger("mkdocs.hooks.generate")
VIEWS_MARK = "<!-- explore: views -->"
RESULTS_MARK = re.compile(r"<!--\s*results:\s*(\S+)((?:\s+[\w]+=(?:\"[^\"]*\"|\S+))*)\s*-->")


# ------------------------------------------------------------------------------------------- markdown helpers
CODE_SPAN = re.compile(r"(`+).*?\1")


def cell(value) -> str:
    """A table cell: newlines folded, pipes escaped outside code spans (a pipe inside one is text already, and
    a backslash there would show)."""
    text = " ".join(("" if value is None else str(value)).split())
    out, at = [], 0
    for span in CODE_SPAN.finditer(text):
        out += [text[at:span.start()].replace("|", "\\|"), span[0]]
        at = span.end()
    return "".join(out) + text[at:].replace("|", "\\|")


def table(header: list[str], rows: list[list]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|",
            *("| " + " | ".join(cell(v) for v in row) + " |" for row in rows)]


def anchor(words: list[str]) -> str:
    return "-".join(words)


def code(value) -> str:
    """A value as the command line and a config file take it, in a code span: `0.001`, `1 4 16 64`, `""`."""
    if isinstance(value, (list, tuple)):
        value = " ".join(map(str, value))
    return f"`{value}`" if value != "" else '`""`'        # an empty choice: the shell's empty word


def default_in_words(help_text: str) -> str:
    """What a help text says of a default the parser cannot hold ("(default: the bundled Tiny Shakespeare, ...)",
    "(default with the bundled corpus: its last 10%)"): its first clause, or ""."""
    found = re.search(r"\(default(?P<condition> with [^:()]*)?:?\s", help_text or "")
    if not found:
        return ""
    depth, end = 1, found.end()
    while end < len(help_text) and depth:
        depth += {"(": 1, ")": -1}.get(help_text[end], 0)
        end += 1
    said = help_text[found.end():end - 1].split("; ")[0].strip()
    if len(said) > 80:
        said = said.split(": ")[0]
    return f"{found['condition'].strip()}: {said}" if found["condition"] else said


def choices_text(choices) -> str:
    return ", ".join(code(c) for c in choices) if choices else ""


# ------------------------------------------------------------------------------------------------ the commands
def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("seqlab",)):
    """(path, parser, help) of every command and subcommand, depth first, in the order `--help` lists them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {c.dest: c.help for c in action._choices_actions}
            for name, sub in action.choices.items():
                yield path + (name,), sub, helps.get(name)
                yield from commands(sub, path + (name,))


def shown_actions(parser: argparse.ArgumentParser) -> list[tuple[str, list[argparse.Action]]]:
    """(group title, its actions) of a parser as its page shows them: no subcommands, no --help, nothing
    hidden."""
    out = []
    for group in parser._action_groups:
        actions = [a for a in group._group_actions if not isinstance(a, argparse._SubParsersAction)
                   and a.help != argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)]
        if actions:
            out.append(({"positional arguments": "arguments", "options": "options"}.get(group.title, group.title),
                        actions))
    return out


def option_type(action: argparse.Action) -> str:
    """What an option takes: `flag` (no value), its type with its range (`seqlab.cli.options.Number`: "int, at
    least 1"), or its metavar; "(several)" for one or more values."""
    if action.nargs == 0:
        return "flag"
    kind = action.type
    bounds = getattr(kind, "bounds", None)
    if bounds is not None:
        from seqlab.config import range_text

        text = kind.kind.__name__ + (f", {range_text(bounds)}" if range_text(bounds) else "")
    elif isinstance(kind, type):
        text = kind.__name__
    elif kind is None:
        text = "str" if action.choices or not action.metavar else f"str ({action.metavar})"
    else:
        text = getattr(kind, "__name__", action.metavar or action.dest.upper())
    if action.nargs in ("*", "+", argparse.REMAINDER) or isinstance(action, argparse._AppendAction):
        text += {"+": " (one or more)", "*": " (any number)"}.get(action.nargs, " (repeatable)")
    elif action.nargs == "?":
        text += " (optional)"
    return text


@dataclasses.dataclass
class ConfigOption:
    """An option made from a config dataclass's field (`seqlab.cli.options.add_options`): the parser holds no
    default (argparse.SUPPRESS); the config does."""

    task: str                   # the family
    group: str                  # its config group: data, model, train
    field: dataclasses.Field


@functools.cache
def config_options(path: tuple[str, ...]) -> dict[str, ConfigOption]:
    """{dest: ConfigOption} of a command whose options come from a family's config dataclasses (the family
    named in its path: `seqlab train tagger`), or {}."""
    from seqlab.registry import FAMILIES

    task = next((word for word in path[1:] if word in FAMILIES), None)
    if task is None:
        return {}
    pipeline = FAMILIES[task].pipeline
    return {f.name: ConfigOption(task, group, f) for group, cls in pipeline.groups.items()
            for f in dataclasses.fields(cls) if "help" in f.metadata}


def config_value(option: ConfigOption):
    """The default of a config key as `seqlab train` takes it: the family's train_defaults over the field's."""
    from seqlab.config import field_default
    from seqlab.registry import FAMILIES

    base = FAMILIES[option.task].pipeline.train_defaults if option.group == "train" else {}
    return base.get(option.field.name, field_default(option.field))


def by_recipe(path: tuple[str, ...], option: ConfigOption) -> dict[str, object] | None:
    """{architecture: the value a run of `seqlab compare` or `seqlab tune` starts from} (the architecture's
    recipe at the default --size small, else `seqlab train`'s default; "searched" where tune searches it), or
    None for any other command."""
    if path[1] not in ("compare", "tune"):
        return None
    from seqlab.compare.recipes import recipe, recipes
    from seqlab.config import field_default
    from seqlab.registry import FAMILIES
    from seqlab.tuning.space import search_space

    own = {f.name: field_default(f) for f in dataclasses.fields(FAMILIES[option.task].pipeline.groups[option.group])}
    values = {}
    for arch in recipes(option.task):
        options = recipe(option.task, arch, "small")
        if not all({**own, **options}.get(k) in v for k, v in (option.field.metadata.get("when") or {}).items()):
            continue                                       # the option does nothing for this architecture
        searched = path[1] == "tune" and option.field.name in search_space(option.task, arch, options)
        values[arch] = "searched" if searched else options.get(option.field.name, config_value(option))
    return values


def value_text(value, action: argparse.Action, help_text: str = "") -> str:
    """A default as the table shows it: `value` in a code span; on / off for a flag; in words where the parser
    and the config hold none (what the help says, else "none")."""
    if isinstance(value, bool) and (action.nargs == 0 or isinstance(action, argparse.BooleanOptionalAction)):
        return "on" if value else "off"
    if value is None or value == "" or value == [] or value == argparse.SUPPRESS:
        return default_in_words(help_text) or ("required" if action.required else "none")
    if value == 0 and not isinstance(value, bool) and default_in_words(help_text):    # 0: the help says what
        return f"{code(value)}: {default_in_words(help_text)}"
    return code(value)


def option_default(path: tuple[str, ...], action: argparse.Action, help_text: str = "") -> str:
    """The default column: the parser's default, or (an option made from a config key) the config's, per
    architecture for `seqlab compare` and `seqlab tune`, whose recipes set it."""
    option = config_options(path).get(action.dest) if action.default == argparse.SUPPRESS else None
    if option is None:
        if action.nargs == 0 and action.default in (None, False) and not isinstance(action,
                                                                                   argparse.BooleanOptionalAction):
            return "off"
        return value_text(action.default, action, help_text)
    if path[1] in ("compare", "tune") and option.field.name == "epochs":
        return "as many as the budget allows"
    values = by_recipe(path, option)
    if values is None:
        return value_text(config_value(option), action, help_text)
    shown = {arch: value if value == "searched" else value_text(value, action, help_text)
             for arch, value in values.items()}
    if not shown:
        return value_text(config_value(option), action, help_text)
    if len(set(shown.values())) == 1:
        return next(iter(shown.values()))
    groups: dict[str, list[str]] = {}
    for arch, text in shown.items():
        groups.setdefault(text, []).append(arch)
    return "by architecture: " + "; ".join(f"{text} ({', '.join(archs)})" for text, archs in groups.items())


def option_help(path: tuple[str, ...], action: argparse.Action, formatter) -> str:
    """The description: a config key's own help and where it acts (its default and range have their columns),
    else the parser's help."""
    option = config_options(path).get(action.dest) if action.default == argparse.SUPPRESS else None
    if option is None:
        return formatter._expand_help(action) if action.help else ""
    when = option.field.metadata.get("when") or {}
    acts = "; ".join(f"with --{k.replace('_', '-')} {'/'.join(map(str, v))}" for k, v in when.items())
    return option.field.metadata["help"] + (f" (only {acts})" if acts else "")


def option_rows(path: tuple[str, ...], parser: argparse.ArgumentParser) -> list[tuple[str, list[list[str]]]]:
    """(group title, its rows: name, type, choices, default, description) of a command's options."""
    formatter = parser._get_formatter()
    out = []
    for title, actions in shown_actions(parser):
        rows = []
        for a in actions:
            name = ", ".join(f"`{o}`" for o in a.option_strings) or f"`{a.metavar or a.dest}`"
            help_text = option_help(path, a, formatter)
            rows.append([name, option_type(a), choices_text(a.choices), option_default(path, a, help_text),
                         help_text])
        out.append((title, rows))
    return out


CLI_INTRO = ("Generated from seqlab's parsers (`seqlab.cli.main.build_parser`): every command, every option, its "
             "values and its default. The options of `train`, `compare` and `tune` are config keys ([config reference]"
             "(../config.md)): their default is the config's (for `compare` and `tune`, the architecture's recipe "
             "at `--size small`); the command line overrides a `--config` file, which overrides the defaults. Every "
             "error in what you give is one line on stderr and exit status 2.")
COLUMNS_CLI = ["option", "type", "choices", "default", "description"]


def cli_pages() -> dict[str, str]:
    """reference/cli/index.md (every command) and one page per top-level command (reference/cli/COMMAND.md)."""
    from seqlab.cli.main import build_parser

    found = list(commands(build_parser()))
    pages: dict[str, list[str]] = {}
    index = ["# Command line", "", CLI_INTRO, "", "`python -m seqlab ...` is the same as `seqlab ...`.", ""]
    index += ["| command | what it does |", "|---|---|"]
    for path, sub, help in found:
        top = path[1]
        link = f"{top}.md" + ("" if len(path) == 2 else f"#{anchor(list(path))}")
        index.append(f"| [`{' '.join(path)}`]({link}) | {cell(help or sub.description or '')} |")
        page = pages.setdefault(top, [f"# `seqlab {top}`", "", CLI_INTRO, ""])
        page += command_section(path, sub, help, level=1 if len(path) == 2 else 2)
    out = {"reference/cli/index.md": "\n".join(index) + "\n"}
    out.update({f"reference/cli/{top}.md": "\n".join(lines) + "\n" for top, lines in pages.items()})
    return out


def command_section(path, sub, help, level: int) -> list[str]:
    lines = [] if level == 1 else [f"## `{' '.join(path)}` {{#{anchor(list(path))}}}", ""]
    if sub.description or help:
        lines += [sub.description or help, ""]
    usage = sub.format_usage().removeprefix("usage: ").strip()
    lines += ["```text", usage, "```", ""]
    for title, rows in option_rows(path, sub):
        lines += [f"**{title}**", ""] + table(COLUMNS_CLI, rows) + [""]
    return lines


# ------------------------------------------------------------------------------------------------- the configs
COLUMNS_CONFIG = ["key", "type", "choices", "default", "range", "only when", "description"]


def config_default_text(value, help_text: str) -> str:
    """A config key's default as a config file writes it (`true`, `0.001`, `1 4 16 64`), or in words where it has
    none (what the help says, else "none")."""
    if isinstance(value, bool):
        return code(str(value).lower())
    if value is None or value == "" or value == []:
        return default_in_words(help_text) or "none"
    if value == 0 and default_in_words(help_text):
        return f"{code(value)}: {default_in_words(help_text)}"
    return code(value)


def only_when(when: dict | None) -> str:
    return "; ".join(f"{k} in {', '.join(map(str, v))}" for k, v in (when or {}).items())


def config_page() -> str:
    from seqlab.config import element_type, field_default, field_type, range_text
    from seqlab.registry import FAMILIES

    lines = ["# Config keys", "",
             "Generated from the config dataclasses of each family (`seqlab.config.option`). A key is the same on the "
             "command line (`--hidden-size 650`), in a `--config` file (flat, `hidden_size: 650`, or under its group, "
             "`model: {hidden_size: 650}`), in the Python API (`seqlab.LMConfig(hidden_size=650)`) and in a run's "
             "`config.json`. A number outside its range, or not finite, is refused with one line (exit 2); a key that "
             "acts only for some architectures (`only when`) is refused for the others instead of doing nothing.",
             ""]
    for name, family in FAMILIES.items():
        pipeline = family.pipeline
        lines += [f"## `{name}`: {family.summary}", ""]
        for group, cls in pipeline.groups.items():
            lines += [f"### {group} (`{cls.__module__}.{cls.__name__}`) {{#{name}-{group}}}", ""]
            defaults = dict(pipeline.train_defaults or {}) if group == "train" else {}
            rows = []
            for f in dataclasses.fields(cls):
                if "help" not in f.metadata or (group == "model" and f.name in pipeline.derived):
                    continue
                kind = field_type(cls, f)
                item = element_type(kind)
                kind_name = f"{item.__name__} (one or more)" if item else getattr(kind, "__name__", str(kind))
                rows.append([f"`{f.name}`", kind_name, choices_text(f.metadata.get("choices")),
                             config_default_text(defaults.get(f.name, field_default(f)), f.metadata["help"]),
                             range_text(f.metadata), only_when(f.metadata.get("when")), f.metadata["help"]])
            lines += table(COLUMNS_CONFIG, rows) + [""]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------- the errors
def error_messages() -> dict[str, list[tuple[str, int, str]]]:
    """module -> [(file, line, message)] of every message seqlab builds (error_reference.messages: raised, returned
    by a helper, an option_error template, held in a variable), each field as a ‹human placeholder›."""
    error_reference = _error_reference()
    import errors_explained

    found: dict[str, list[tuple[str, int, str]]] = {}
    for m in error_reference.messages(errors_explained.NAMES):
        found.setdefault(m.module, []).append((f"src/seqlab/{m.file}", m.line, m.text))
    return found


def errors_page() -> str:
    """Every message grouped by what the user was doing, with its cause and fix (docs/hooks/errors_explained.py)."""
    return _error_reference().page()


def _error_reference():
    """docs/hooks/error_reference.py, beside this hook (MkDocs restores sys.path once its hooks are loaded)."""
    hooks = str(Path(__file__).resolve().parent)
    if hooks not in sys.path:
        sys.path.insert(0, hooks)
    import error_reference

    return error_reference


# ------------------------------------------------------------------------------------------------- the layout
def layout_page() -> str:
    lines = ["# Layout of the code", "",
             "Every module of `src/seqlab`, generated from the code: the first line of its docstring.", ""]
    rows = []
    for path in sorted(SRC.rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        first = doc.strip().split("\n\n")[0].replace("\n", " ")
        rows.append([f"`{path.relative_to(SRC.parent)}`", first])
    lines += table(["module", "what it holds"], rows)
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------- the benchmarks
def _fmt(value, column: str = "") -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    if isinstance(value, float) and column == "epochs" and value.is_integer():
        return str(int(value))
    return benchmark_number(value)             # as the results' own tables (benchmarks/results/*.md) write it


COLUMNS = ("task", "dataset", "split", "arch", "config", "metric", "value", "stdev", "params", "tokens_per_s",
           "wall_s", "epochs", "target")
SAID_ONCE = ("device", "command", "date")           # under the table, not in it


def records(name: str) -> list[dict]:
    path = RESULTS / f"{name}.json"
    if not path.exists():
        raise ValueError(f"no benchmark results {path}")
    return json.loads(path.read_text(encoding="utf-8"))


def results_table(rows: list[dict], drop: tuple[str, ...] = ()) -> list[str]:
    """The rows as a table (the columns some row fills, those every row holds alike said once under it), then
    each distinct machine, date and command."""
    extra = sorted({k for r in rows for k in r} - set(COLUMNS) - set(SAID_ONCE))     # a benchmark's own fields
    columns = [c for c in (*COLUMNS, *extra) if c not in drop and any(r.get(c) not in (None, "") for r in rows)]
    same = [c for c in columns if len(rows) > 1 and len({json.dumps(r.get(c)) for r in rows}) == 1]
    shown = [c for c in columns if c not in same] or columns
    lines = table(shown, [[_fmt(r.get(c), c) for c in shown] for r in rows])
    if same:
        lines += ["", "Every row: " + ", ".join(f"{c} {_fmt(rows[0].get(c), c)}" for c in same) + "."]
    machines = sorted({f"{r.get('device')} ({r.get('date')})" for r in rows if r.get("device")})
    commands = sorted({r["command"] for r in rows if r.get("command")})
    lines += ["", "Measured on " + "; ".join(machines) + "." if machines else ""]
    if commands:
        lines += ["", "??? note \"" + ("the command" if len(commands) == 1 else f"the {len(commands)} commands") + "\"",
                  ""] + [f"    `{c}`\n" for c in commands]
    return lines


def _title_and_notes(name: str) -> tuple[str, str]:
    """The title and notes the benchmark wrote above its table in results/NAME.md (`benchmarks/common.py`)."""
    md = RESULTS / f"{name}.md"
    if not md.exists():
        return name.replace("_", " "), ""
    text = md.read_text(encoding="utf-8")
    title = text.split("\n", 1)[0].lstrip("# ").strip()
    body = text.split("\n", 1)[1] if "\n" in text else ""
    notes = []
    for line in body.split("\n"):
        if line.startswith("|"):
            break
        if not line.startswith("Generated from"):
            notes.append(line)
    return title, "\n".join(notes).strip()


def result_page(name: str) -> str:
    title, notes = _title_and_notes(name)
    lines = [f"# {title}", "", f"Generated from `benchmarks/results/{name}.json` ({len(records(name))} records).", ""]
    if notes:
        lines += [notes, ""]
    lines += results_table(records(name))
    figures = sorted(RESULTS.glob(f"{name}*.png"))
    for figure in figures:
        lines += ["", f"![{figure.stem}]({figure.name})"]
    return "\n".join(lines) + "\n"


def results_index() -> str:
    lines = ["# Every benchmark result", "",
             "One page per results file of `benchmarks/results/`, generated from its JSON records (each record with "
             "its machine, command and date). The [benchmarks overview](../index.md) says what they mean.", ""]
    rows = []
    for path in sorted(RESULTS.glob("*.json")):
        title, _ = _title_and_notes(path.stem)
        data = json.loads(path.read_text(encoding="utf-8"))
        dates = sorted({r.get("date") for r in data if r.get("date")})
        rows.append([f"[{path.stem}]({path.stem}.md)", title, len(data),
                     f"{dates[0]} – {dates[-1]}" if len(dates) > 1 else (dates[0] if dates else "")])
    lines += table(["results", "what", "records", "measured"], rows)
    return "\n".join(lines) + "\n"


def replace_results(markdown: str, page_uri: str = "benchmarks/index.md") -> str:
    """Each `<!-- results: NAME col=value ... -->` mark replaced by the table of those records, with a link to the
    results page (relative to `page_uri`, the page's own path in the site)."""
    base = posixpath.relpath("benchmarks/results", posixpath.dirname(page_uri) or ".")
    def table_for(match: re.Match) -> str:
        name, filters = match.group(1), match.group(2)
        wanted = {k: v.strip('"') for k, v in re.findall(r'(\w+)=("[^"]*"|\S+)', filters)}
        drop = tuple(c for c in wanted if c in COLUMNS)
        rows = [r for r in records(name) if all(_fmt(r.get(k)) == v or str(r.get(k)) == v for k, v in wanted.items())]
        if not rows:
            raise ValueError(f"<!-- results: {name}{filters} --> matches no record of benchmarks/results/{name}.json")
        return "\n".join(results_table(rows, drop)) + f"\n\n[every figure of this benchmark]({base}/{name}.md)\n"
    return RESULTS_MARK.sub(table_for, markdown)


# ------------------------------------------------------------------------------------------- the explorer's views
def views_table() -> str:
    """Every view of `seqlab explore`, family by family, as each family's `explain` part declares it (`VIEWS`):
    its name, kind, what it shows, the architectures that have it, and whether an ONNX export computes it (or
    why not); the families without views named below."""
    from seqlab.registry import FAMILIES

    rows, without = [], []
    for family in FAMILIES.values():
        if not family.explains:
            without.append(family.title)
            continue
        for spec in family.part("explain").VIEWS:
            rows.append([family.name, f"`{spec.name}`", spec.kind, f"**{spec.title}**: {spec.about}",
                         ", ".join(spec.archs) or "all", "yes" if spec.exported else f"no: {spec.why_not_exported}"])
    lines = table(["family", "view", "kind", "what it shows", "architectures", "on an ONNX export"], rows)
    if without:
        lines += ["", f"Without views (yet): {', '.join(without)}."]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------- the README's table
# (what, results file, the record's key columns, the published figure or the target it is held to)
HEADLINES = [
    ("PTB, 2 x 200 tied LSTM, 40 epochs: test perplexity", "lm_quality",
     {"dataset": "ptb", "split": "test", "config": "ptb-lstm-tied"}, "87.17 (pytorch/examples)"),
    ("PTB, Zaremba et al.'s small LSTM: test perplexity", "lm_quality",
     {"dataset": "ptb", "split": "test", "config": "ptb-lstm-zaremba"}, "114.5"),
    ("Tiny Shakespeare characters, nanoGPT's CPU transformer: valid loss", "lm_quality",
     {"dataset": "tinyshakespeare", "config": "shakespeare-char-transformer"}, "1.88 (nanoGPT)"),
    ("UD English-EWT UPOS, BiLSTM + chars + vectors: test accuracy", "tagging_quality",
     {"split": "test", "config": "ud-pos-bilstm2-256-char-w2v-frozen-unk"}, "95.0"),
    ("CoNLL-2003 NER, BiLSTM-CRF + chars + vectors: test F1", "tagging_quality",
     {"split": "test", "config": "conll2003-ner-bilstm-crf-char-w2v-frozen"}, "87.0"),
    ("SST-2, BiLSTM with max pooling: test accuracy", "classification_quality",
     {"split": "test", "config": "bilstm-max", "metric": "accuracy"}, "84.0"),
    ("IMDB, pooled embeddings of words and bigrams: test accuracy", "classification_quality",
     {"split": "test", "config": "pooled-bigrams", "metric": "accuracy"}, "88.0"),
    ("Multi30k de-en, transformer: test BLEU (tokenised, lower case)", "seq2seq_quality",
     {"split": "test", "config": "transformer", "metric": "bleu_tok_lc"}, "36.0"),
    ("Serving generation at 32 concurrent clients: requests/s against the unbatched server", "serve_load",
     {"config": "this version / earlier, concurrency 32", "metric": "requests_per_s_ratio"}, "4x asked"),
]
README_BEGIN = "<!-- headline figures: generated by `python docs/hooks/generate.py --readme`; do not edit -->"
README_END = "<!-- end of headline figures -->"


def readme_table() -> str:
    """The README's short table of the figures that matter, from the results files (tests/test_docs.py checks
    that the README holds exactly this)."""
    rows = []
    for what, name, key, published in HEADLINES:
        found = [r for r in records(name) if all(r.get(k) == v for k, v in key.items())]
        if len(found) != 1:
            raise ValueError(f"{name}.json: {len(found)} records match {key}, expected 1")
        r = found[0]
        rows.append([what, f"**{_fmt(r['value'])}**", published, f"[{name}](benchmarks/results/{name}.md)"])
    lines = [README_BEGIN, *table(["figure", "seqlab", "published or asked", "results"], rows), README_END]
    return "\n".join(lines)


def write_readme_table(readme: Path = ROOT / "README.md") -> None:
    text = readme.read_text(encoding="utf-8")
    start, end = text.index(README_BEGIN), text.index(README_END) + len(README_END)
    readme.write_text(text[:start] + readme_table() + text[end:], encoding="utf-8")


# ---------------------------------------------------------------------------------------------- the MkDocs hook
GENERATED = {"reference/config.md": config_page, "reference/errors.md": errors_page,
             "reference/layout.md": layout_page, "benchmarks/results/index.md": results_index}


def on_config(config):
    """Each benchmark's results page into the navigation, under Benchmarks > Every result (they are generated, one
    per results file: listing them by hand would drift when a benchmark is added)."""
    def walk(items):
        for k, item in enumerate(items or []):
            if isinstance(item, dict):
                (title, value), = item.items()
                if value == "benchmarks/results/index.md":
                    items[k] = {title: [value] + [{_title_and_notes(p.stem)[0]: f"benchmarks/results/{p.stem}.md"}
                                                  for p in sorted(RESULTS.glob("*.json"))]}
                elif isinstance(value, list):
                    walk(value)
    walk(config["nav"])
    return config


def on_files(files, config):
    from mkdocs.structure.files import File

    for uri, make in GENERATED.items():
        files.append(File.generated(config, uri, content=make()))
    for uri, content in cli_pages().items():
        files.append(File.generated(config, uri, content=content))
    for path in sorted(RESULTS.glob("*.json")):
        files.append(File.generated(config, f"benchmarks/results/{path.stem}.md", content=result_page(path.stem)))
    for path in sorted(RESULTS.glob("*.png")):
        files.append(File.generated(config, f"benchmarks/results/{path.name}", abs_src_path=str(path)))
    for uri in notebook_pages(config["docs_dir"]):
        files.append(File.generated(config, uri.removesuffix(".md") + ".ipynb", content=notebook_json(config, uri)))
    for uri, content in output_images(config["docs_dir"]).items():
        files.append(File.generated(config, uri, content=content))
    files.append(File.generated(config, "tutorials/solutions.md", content=solutions_page()))
    return files


# ----------------------------------------------------------------------------------- the pages' recorded outputs
def output_image_uri(page_uri: str, cell: int, output: int, kind: str) -> str:
    """Where the site keeps a figure a page's cell drew: beside the page, under cell-outputs/PAGE/."""
    stem = posixpath.splitext(page_uri)[0]
    return f"{stem.rsplit('/', 1)[0] + '/' if '/' in stem else ''}cell-outputs/{posixpath.basename(stem)}/" \
           f"{cell}-{output}.{kind}"


def output_images(docs_dir: str) -> dict[str, bytes]:
    import base64

    found = {}
    docs = Path(docs_dir)
    for page in sorted(docs.rglob("*.md")):
        if "hooks" in page.parts:
            continue
        record = notebooks.load_record(page)
        for k, cell in enumerate((record or {}).get("cells", [])):
            for j, output in enumerate(cell["outputs"]):
                uri = str(page.relative_to(docs)).replace("\\", "/")
                if "png" in output:
                    found[output_image_uri(uri, k, j, "png")] = base64.b64decode(output["png"])
                elif "svg" in output:
                    found[output_image_uri(uri, k, j, "svg")] = output["svg"].encode()
    return found


def solutions_page() -> str:
    """tutorials/solutions.md: every exercise's worked solution, for teachers (the tutorials show only hints)."""
    from seqlab import exercises as book

    lines = ["# Solutions to the exercises", "",
             "For teachers, and for students who are done trying: the worked solution of every exercise of the "
             "tutorials. Each tutorial shows its exercises with a check and hints, not these. From a shell: `seqlab "
             "exercises TUTORIAL N --solution`.", ""]
    for tutorial in book.TUTORIALS:
        found = book.exercises(tutorial)
        if not found:
            continue
        lines += [f"## {tutorial} {{#{tutorial}}}", "", f"The exercises of [{tutorial}]({tutorial}.md#exercises).",
                  ""]
        for exercise in found:
            lines += [f"### {exercise.number}. {exercise.title}", "", exercise.solution.strip(), ""]
    return "\n".join(lines)


@functools.cache
def notebook_pages(docs_dir: str) -> tuple[str, ...]:
    """The pages that also open as a notebook: Get started and every tutorial (found once a build)."""
    docs = Path(docs_dir)
    return tuple(["get-started.md"] * (docs / "get-started.md").exists() + sorted(
        str(p.relative_to(docs)) for p in (docs / "tutorials").glob("*.md") if p.name != "index.md"))


def notebook_json(config, uri: str) -> str:
    import nbformat

    return nbformat.writes(notebooks.notebook(Path(config["docs_dir"]) / uri))


def on_page_markdown(markdown, page, config, files):
    markdown, _ = notebooks.expand(markdown, page.file.src_uri)       # docs: source, exercises, diagram
    source = Path(config["docs_dir"]) / page.file.src_uri
    if page.file.abs_src_path and source.exists():                    # a page of docs/, not a generated one
        stem = posixpath.splitext(posixpath.basename(page.file.src_uri))[0]
        markdown, problems = notebooks.render(markdown, source, notebooks.load_record(source),
                                              lambda k, j, kind: f"cell-outputs/{stem}/{k}-{j}.{kind}")
        for problem in problems:
            (log.info if problem.endswith("no recorded outputs") else log.warning)(problem)
    if "<!-- results:" in markdown:
        markdown = replace_results(markdown, page.file.src_uri)
    if VIEWS_MARK in markdown:
        markdown = markdown.replace(VIEWS_MARK, views_table())
    markdown, _ = escape.escape_tokens(markdown)                      # <unk>, </s> shown, not taken for HTML
    if page.file.src_uri in notebook_pages(config["docs_dir"]):
        name = Path(page.file.src_uri).stem
        title, _, rest = markdown.partition("\n")
        markdown = (f"{title}\n\n[Open as a notebook]({name}.ipynb){{ .md-button download }}"
                    f" &nbsp; the same code, cell for cell; CI runs it.\n{rest}")
    return markdown


def on_page_content(html, page, config, files):
    return escape.escape_html_tokens(html)             # a docstring's <unk> (mkdocstrings renders after the pass)


if __name__ == "__main__":
    if sys.argv[1:] == ["--readme"]:
        write_readme_table()
    else:
        sys.exit("usage: python docs/hooks/generate.py --readme   (rewrite the README's table of headline figures)")
