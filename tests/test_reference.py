"""The generated reference (docs/hooks/generate.py) read back as a reader reads it: each page rendered to HTML with
the site's Markdown extensions (mkdocs.yml), its tables parsed, and every option row of every command page compared
with the parser's action (name, type, choices, default: the config's where the parser holds none); every row of
the config page with its dataclass field; special tokens (`<unk>`, `</s>`) shown as text on every page, the pages'
own HTML kept."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import html
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import markdown
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "hooks"))

import escape  # noqa: E402
import generate  # noqa: E402


def extensions() -> tuple[list, dict]:
    """mkdocs.yml's Markdown extensions and their settings, as the site renders with them."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    names, settings = [], {}
    for entry in config["markdown_extensions"]:
        name, options = next(iter(entry.items())) if isinstance(entry, dict) else (entry, None)
        names.append(name)
        if options:
            settings[name] = options
    return names, settings


@functools.cache
def renderer() -> markdown.Markdown:
    names, settings = extensions()
    return markdown.Markdown(extensions=names, extension_configs=settings)


def render(text: str) -> str:
    """A page's HTML as the site renders it: the hook's escaping, then mkdocs.yml's extensions."""
    return renderer().reset().convert(escape.escape_tokens(text)[0])


cli_pages = functools.cache(generate.cli_pages)          # the generated pages, made once for these tests


class Tables(HTMLParser):
    """Every table of an HTML page: its rows, each a list of its cells' inner HTML."""

    def __init__(self):
        super().__init__(convert_charrefs=False)
        self.tables: list[list[list[str]]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.cell = []
        elif self.cell is not None:
            self.cell.append(f"<{tag}>")

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append("".join(self.cell).strip())
            self.cell = None
        elif self.cell is not None:
            self.cell.append(f"</{tag}>")

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)

    def handle_entityref(self, name):
        if self.cell is not None:
            self.cell.append(f"&{name};")

    def handle_charref(self, name):
        if self.cell is not None:
            self.cell.append(f"&#{name};")


def tables(page: str) -> list[list[list[str]]]:
    parser = Tables()
    parser.feed(render(page))
    return parser.tables


def codes(cell: str) -> list[str]:
    return [html.unescape(c) for c in re.findall(r"<code>(.*?)</code>", cell)]


def text(cell: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", cell))


def as_written(value) -> str:
    return " ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


# --------------------------------------------------------------------------------------------- the command pages
def expected_type(action: argparse.Action) -> tuple[str, str]:
    """(what the type cell starts with, what it holds too) for an action."""
    if action.nargs == 0:
        return "flag", ""
    bounds = getattr(action.type, "bounds", None)
    if bounds is not None:
        from seqlab.config import range_text

        return action.type.kind.__name__, range_text(bounds)
    if action.type is None:
        return "str", ""
    return getattr(action.type, "__name__", ""), ""


def recipe_values(path, option) -> dict[str, str]:
    """{architecture: the value its run starts from} for `seqlab compare` / `seqlab tune` (recipes at --size
    small), only the architectures the option acts on."""
    from seqlab.compare.recipes import recipe, recipes
    from seqlab.config import field_default
    from seqlab.registry import FAMILIES
    from seqlab.tuning.space import search_space

    pipeline = FAMILIES[option.task].pipeline
    base = {f.name: field_default(f) for f in dataclasses.fields(pipeline.groups[option.group])}
    if option.group == "train":
        base.update(pipeline.train_defaults)
    out = {}
    for arch in recipes(option.task):
        options = {**base, **recipe(option.task, arch, "small")}
        if all(options[k] in v for k, v in (option.field.metadata.get("when") or {}).items()):
            searched = path[1] == "tune" and option.field.name in search_space(
                option.task, arch, recipe(option.task, arch, "small"))
            out[arch] = "searched" if searched else options[option.field.name]
    return out


def check_default(path, action, cell: str) -> str | None:
    """What is wrong with a default cell, or None."""
    from seqlab.registry import FAMILIES

    words = text(cell)
    if action.default == argparse.SUPPRESS:                       # a config key: the config's default
        option = generate.config_options(path)[action.dest]
        if path[1] in ("compare", "tune") and action.dest == "epochs":
            return None if "budget" in words else f"epochs: {words!r}"
        if path[1] in ("compare", "tune"):
            values = recipe_values(path, option)
        else:
            pipeline = FAMILIES[option.task].pipeline
            from seqlab.config import field_default

            train = pipeline.train_defaults if option.group == "train" else {}
            values = {"": train.get(action.dest, field_default(option.field))}
        if words.startswith("by architecture: "):
            said = dict((arch.strip(), value) for value, archs in
                        re.findall(r"(searched|`[^`]*`[^(;]*|[^;(]+?) \(([^)]*)\)", cell.removeprefix(
                            "by architecture: ").replace("<code>", "`").replace("</code>", "`"))
                        for arch in archs.split(","))
            if set(said) != set(values):
                return f"architectures {sorted(said)} against {sorted(values)}"
            return next((f"{arch}: {said[arch]!r} against {value!r}" for arch, value in values.items()
                         if not agrees(action, said[arch], value)), None)
        return next((f"{words!r} against {value!r}" for value in values.values()
                     if not agrees(action, cell.replace("<code>", "`").replace("</code>", "`"), value)), None)
    value = action.default
    if action.nargs == 0 and value in (None, False) and not isinstance(action, argparse.BooleanOptionalAction):
        value = False
    return None if agrees(action, cell.replace("<code>", "`").replace("</code>", "`"), value) else \
        f"{words!r} against the parser's {value!r}"


def agrees(action, said: str, value) -> bool:
    """A default cell (code spans as `...`) says `value`."""
    said = html.unescape(said).strip()
    if value == "searched":
        return said == "searched"
    if isinstance(value, bool) and (action.nargs == 0 or isinstance(action, argparse.BooleanOptionalAction)):
        return said == ("on" if value else "off")
    if value is None or value == "" or value == []:
        return "`" not in said and said != ""                       # in words: what the help says, or none
    found = re.match(r"`([^`]*)`", said)
    return found is not None and found[1] == as_written(value)


def test_reference_every_option_row_of_every_command_page_says_what_the_parser_does():
    from seqlab.cli.main import build_parser

    pages = cli_pages()
    found = list(generate.commands(build_parser()))
    rows, problems = {}, []
    for top in dict.fromkeys(path[1] for path, _, _ in found):
        rendered = tables(pages[f"reference/cli/{top}.md"])
        expected = [(path, group) for path, sub, _ in found if path[1] == top
                    for group in generate.shown_actions(sub)]
        assert len(rendered) == len(expected), f"{top}: {len(rendered)} tables for {len(expected)} option groups"
        for table, (path, (title, actions)) in zip(rendered, expected, strict=True):
            header, *body = table
            assert [text(c) for c in header] == ["option", "type", "choices", "default", "description"], top
            assert len(body) == len(actions), f"{' '.join(path)} {title}: {len(body)} rows for {len(actions)}"
            for row, action in zip(body, actions, strict=True):
                where = f"{' '.join(path)} {action.option_strings or action.dest}"
                assert len(row) == 5, f"{where}: {len(row)} cells: {row}"
                name, kind, choices, default, description = row
                names = action.option_strings or [action.metavar or action.dest]
                if codes(name) != names:
                    problems.append(f"{where}: named {codes(name)}")
                start, holds = expected_type(action)
                if not text(kind).startswith(start) or holds not in text(kind):
                    problems.append(f"{where}: type {text(kind)!r}, expected {start} {holds}")
                if codes(choices) != [str(c) or '""' for c in action.choices or ()] or (not action.choices and choices):
                    problems.append(f"{where}: choices {codes(choices)} against {action.choices}")
                wrong = check_default(path, action, default)
                if wrong:
                    problems.append(f"{where}: default {wrong}")
                if action.help and not text(description).strip():
                    problems.append(f"{where}: no description")
                rows[top] = rows.get(top, 0) + 1
    assert not problems, f"{len(problems)} rows wrong:\n" + "\n".join(problems[:40])
    assert rows["train"] > 300 and rows["compare"] > 300 and rows["tune"] > 300 and sum(rows.values()) > 1000


def test_reference_two_choice_options_show_their_own_default_and_keep_their_description():
    pages = cli_pages()
    train = {text(r[0]): r for t in tables(pages["reference/cli/train.md"]) for r in t[1:]}  # the last family's
    lm = {text(r[0]): r for r in tables(pages["reference/cli/train.md"])[2][1:]}           # train lm's model group
    assert codes(lm["--rnn-impl"][3]) == ["fused"] and codes(lm["--rnn-impl"][2]) == ["fused", "textbook"]
    assert codes(lm["--norm-position"][3]) == ["post"] and "LayerNorm" in text(lm["--norm-position"][4])
    assert text(train["--epochs"][3]) == "10" and text(train["--lr"][1]) == "float, positive"


# ------------------------------------------------------------------------------------------------ the config page
def test_reference_every_row_of_the_config_page_says_what_its_field_does():
    from seqlab.config import field_default, range_text
    from seqlab.registry import FAMILIES

    rendered = iter(tables(generate.config_page()))
    checked = 0
    for family in FAMILIES.values():
        pipeline = family.pipeline
        for group, cls in pipeline.groups.items():
            header, *body = next(rendered)
            assert [text(c) for c in header] == ["key", "type", "choices", "default", "range", "only when",
                                                 "description"]
            fields = [f for f in dataclasses.fields(cls) if "help" in f.metadata
                      and not (group == "model" and f.name in pipeline.derived)]
            assert [codes(r[0])[0] for r in body] == [f.name for f in fields]
            for row, f in zip(body, fields, strict=True):
                assert len(row) == 7, row
                value = (pipeline.train_defaults if group == "train" else {}).get(f.name, field_default(f))
                said = row[3].replace("<code>", "`").replace("</code>", "`")
                if isinstance(value, bool):
                    assert said == f"`{str(value).lower()}`", (f.name, said)
                else:
                    assert agrees(argparse.Action(["--x"], "x"), said, value), (family.name, f.name, said, value)
                assert codes(row[2]) == [str(c) or '""' for c in f.metadata.get("choices") or ()], (f.name, row[2])
                assert text(row[4]) == range_text(f.metadata)
                assert text(row[6]).strip(), f.name
                checked += 1
    assert checked > 250


# ------------------------------------------------------------------------------------------------ special tokens
TOKEN = re.compile(r"<(/?)(unk|s|sep|pad|bos|eos)>")


def test_reference_special_tokens_show_as_text_on_every_page():
    """`<unk>` and `</s>` rendered as text, never as a tag a browser hides, on the generated pages and every page
    of docs/; the HTML the pages write (details, figure, br, sup, div) kept as HTML."""
    pages = {uri: content for uri, content in cli_pages().items()}
    pages["reference/config.md"] = generate.config_page()
    pages["reference/errors.md"] = generate.errors_page()
    pages.update({str(p.relative_to(DOCS)): p.read_text(encoding="utf-8") for p in sorted(DOCS.rglob("*.md"))
                  if "hooks" not in p.parts and p.name != "README.md"})
    escaped = 0
    for uri, page in pages.items():
        if not escape.TAG.search(page):
            continue                                                # nothing like a tag: nothing to show
        out = render(page)
        assert not TOKEN.search(out), f"{uri}: {TOKEN.search(out)[0]} rendered as a tag"
        escaped += escape.escape_tokens(page)[1]
        for tag in ("details", "figure", "br", "sup", "div"):
            assert out.count(f"<{tag}") >= len(re.findall(rf"^[^`]*<{tag}[\s>/]", page, re.M)), (uri, tag)
    assert escaped >= 40


def test_reference_tokens_are_escaped_outside_code_math_and_svg_only():
    page = ("The rest become <unk> (BPE keeps...) and `<unk>` in code, <s> w </s>.\n\n"
            "$P(w \\mid \\text{</s>})$ and <details><summary>more</summary>x<br></details>\n\n"
            "```text\n<pad> <pad>\n```\n\n<svg width=\"1\"><text>a</text>\n<tspan>b</tspan></svg>\n"
            "<!-- docs: a comment <unk> -->\n    <sep> in a tab\n")
    out, count = escape.escape_tokens(page)
    assert count == 4
    assert "become &lt;unk&gt; (BPE" in out and "`<unk>`" in out and "&lt;s&gt; w &lt;/s&gt;" in out
    assert "\\text{</s>}" in out and "<details><summary>more</summary>x<br></details>" in out
    assert "<pad> <pad>" in out and "<text>a</text>" in out and "<tspan>b</tspan>" in out
    assert "comment <unk> -->" in out and "    &lt;sep&gt; in a tab" in out
    assert "become &lt;unk&gt; (BPE keeps...)" in render(page)
    figure = '<figure>\n<svg viewBox="0 0 1 1">\n<title>t</title>\n<text>&lt;s&gt;</text>\n</svg>\n</figure>'
    assert escape.escape_tokens(figure) == (figure, 0)                   # a diagram's inline SVG: as it is
    docstring = "<p><code>&lt;/s&gt;</code> + the prompt; unknown tokens become <unk> with a warning</p>"
    assert escape.escape_html_tokens(docstring) == docstring.replace("<unk>", "&lt;unk&gt;")


def test_reference_generated_pages_are_in_the_navigation():
    """Every generated page of the reference (each command's, config, errors, modules) and the results index in
    mkdocs.yml's nav: a page outside it has an empty sidebar."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    listed = set(re.findall(r"[\w./-]+\.md", str(config["nav"])))
    wanted = {*cli_pages(), *generate.GENERATED}
    assert not wanted - listed, f"generated pages missing from mkdocs.yml's nav: {sorted(wanted - listed)}"


def test_reference_every_results_page_is_put_in_the_navigation_by_the_hook():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    listed = set(re.findall(r"[\w./-]+\.md", str(generate.on_config(config)["nav"])))
    wanted = {f"benchmarks/results/{p.stem}.md" for p in generate.RESULTS.glob("*.json")}
    assert wanted and not wanted - listed, sorted(wanted - listed)
