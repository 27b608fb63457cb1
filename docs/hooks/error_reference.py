"""The error reference (reference/errors.md) from the source and from errors_explained.py: every message seqlab
refuses input with, found by reading the code, grouped by what the user was doing, each with its cause and its fix.

A message is found wherever the code builds one: a `SeqlabError(...)` or `OptionError(...)` (raised, or returned by a
helper that the caller raises), an `option_error(cls, template, ...)`, and a message held in a variable or returned
by a function (`problem = inapplicable(...)`; `raise SeqlabError(problem)`) is followed to the strings it can be.
Each field of a message (`{path!r}`, `{args.lr}`, `{len(names)}`) is shown as a human placeholder (‹path›, ‹lr›,
‹number of names›), never as Python code; an `OptionError` template's `{name}` is the option's flag (`--name`).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "seqlab"
MAKERS = ("SeqlabError", "OptionError")           # OptionError: SeqlabError's one subclass (seqlab.config)
TEMPLATE_MAKERS = {"option_error": 1}             # a function building an OptionError: its template's argument
WRAPPERS = ("str", "repr", "sorted", "list", "tuple", "set", "_number", "float", "int", "abs", "round", "max", "min")


@dataclasses.dataclass(frozen=True)
class Field:
    """A field of a message: the expression in the source and the words a reader sees."""
    source: str
    words: str


@dataclasses.dataclass(frozen=True)
class Message:
    """One message a line of the source builds."""
    file: str                      # relative to src/seqlab: "runs/files.py"
    line: int
    module: str                    # "seqlab.runs.files"
    parts: tuple                   # str and Field, in order

    @property
    def template(self) -> str:
        """The message with each field as `{expression}` (the source's spelling)."""
        return "".join(p if isinstance(p, str) else "{" + p.source + "}" for p in self.parts)

    @property
    def text(self) -> str:
        """The message as a reader sees it: each field as ‹words›."""
        return "".join(p if isinstance(p, str) else f"‹{p.words}›" for p in self.parts)


# ------------------------------------------------------------------------------------------ the words of a field
ATTRIBUTES = {"msg": "reason", "lineno": "line", "strerror": "reason",       # an exception's fields
              "what": "which file"}                                          # a reader's file role
GENERIC = {"name", "stem", "suffix", "value", "parent", "id", "type", "shape", "dtype", "kind", "path", "text"}


def words(node: ast.expr, names: dict[str, str], file: str = "") -> str:
    """What a field names, in words: `args.lr` -> "lr", `len(names)` -> "number of names"; `names` maps an
    expression (or "file:expression", for one module) to its words where these rules name it badly."""
    source = ast.unparse(node)
    for key in (f"{file}:{source}", source):
        if key in names:
            return names[key]
    return _words(node, names)


def _words(node: ast.expr, names: dict[str, str]) -> str:
    if isinstance(node, ast.Name):
        name = node.id.strip("_").replace("_", " ")
        return name.lower() if len(name) > 1 else name                 # FAMILIES -> families; T stays T
    if isinstance(node, ast.Attribute):
        if node.attr == "__name__":
            return words(node.value, names)
        if node.attr in GENERIC and isinstance(node.value, (ast.Name, ast.Attribute)):
            return f"{words(node.value, names)} {node.attr}"
        name = ATTRIBUTES.get(node.attr, node.attr.strip("_").replace("_", " "))
        return name.lower() if len(name) > 1 and name.isupper() else name
    if isinstance(node, ast.Subscript):
        key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return key.value.replace("_", " ")
        return words(node.value, names)
    if isinstance(node, ast.Call):
        func = node.func.id if isinstance(node.func, ast.Name) else node.func.attr \
            if isinstance(node.func, ast.Attribute) else ""
        if func == "get" and node.args and isinstance(node.args[0], ast.Constant):
            return str(node.args[0].value).replace("_", " ")
        if func == "getattr" and len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
            return node.args[1].value.strip("_").replace("_", " ") if node.args[1].value != "__name__" \
                else words(node.args[0], names)
        if func == "map" and len(node.args) > 1:
            return words(node.args[1], names)
        if func == "len" and node.args:
            return "number of " + words(node.args[0], names)
        if func == "join" and node.args:
            return words(node.args[0], names)
        if func in WRAPPERS and node.args:
            return words(node.args[0], names)
        if isinstance(node.func, ast.Attribute) and func in ("strip", "lower", "upper", "replace", "get", "format",
                                                              "as_posix", "resolve", "item", "tolist", "rstrip"):
            return words(node.func.value, names)
        return func.strip("_").replace("_", " ")
    if isinstance(node, ast.BinOp):
        return words(node.left, names)
    if isinstance(node, ast.UnaryOp):
        return words(node.operand, names)
    if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
        return words(node.elt, names)
    if isinstance(node, ast.IfExp):
        return words(node.body, names)
    if isinstance(node, ast.Compare):
        return words(node.left, names)
    if isinstance(node, ast.BoolOp):
        return words(node.values[0], names)
    return "value"


# -------------------------------------------------------------------------------------------- reading the source
@dataclasses.dataclass
class Module:
    path: Path
    name: str
    tree: ast.Module
    parents: dict
    functions: dict               # top-level name -> FunctionDef
    imports: dict                 # name -> (module, name) of `from seqlab.x import name`


@functools.cache
def module(path: Path) -> Module:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parents: dict = {}
    functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    imports = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("seqlab"):
            for alias in n.names:
                imports[alias.asname or alias.name] = (n.module, alias.name)
    name = ".".join(("seqlab",) + path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
    return Module(path, name, tree, parents, functions, imports)


def module_path(name: str) -> Path | None:
    base = SRC.joinpath(*name.split(".")[1:])
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.exists():
            return path
    return None


def enclosing_function(mod: Module, node: ast.AST):
    if not mod.parents:
        mod.parents.update({child: n for n in ast.walk(mod.tree) for child in ast.iter_child_nodes(n)})
    while node in mod.parents:
        node = mod.parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node
    return None


def func_name(node: ast.Call) -> str:
    return node.func.id if isinstance(node.func, ast.Name) else node.func.attr \
        if isinstance(node.func, ast.Attribute) else ""


def returns(function) -> list[ast.expr]:
    """The values a function returns (not those of functions nested in it)."""
    found, stack = [], list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return) and node.value is not None:
            found.append(node.value)
        stack.extend(ast.iter_child_nodes(node))
    return found


class Reader:
    """Follows a message argument to the texts it can be: a list of parts-tuples (str and Field)."""

    def __init__(self, names: dict[str, str]):
        self.names = names

    def texts(self, mod: Module, node: ast.expr, option: bool, depth: int = 0) -> list[tuple]:
        if depth > 6:
            return []
        if isinstance(node, ast.Constant):
            return [(self.constant(node.value, option),)] if isinstance(node.value, str) else []
        if isinstance(node, ast.JoinedStr):
            texts: list[tuple] = [()]
            for value in node.values:
                if isinstance(value, ast.Constant):
                    choices = [(self.constant(value.value, option),)]
                elif self.wording(value.value):            # {"s" if n > 1 else ""}: a message for each
                    choices = [t for branch in (value.value.body, value.value.orelse)
                               for t in self.texts(mod, branch, option, depth + 1)]
                elif self.fixed(mod, value) is not None:       # {MANIFEST}: a module's constant file name
                    choices = [(self.fixed(mod, value),)]
                else:
                    choices = [(self.field(mod, value.value),)]
                texts = [t + c for t in texts for c in choices]
            return texts
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left = self.texts(mod, node.left, option, depth + 1) or [(self.field(mod, node.left),)]
            right = self.texts(mod, node.right, option, depth + 1) or [(self.field(mod, node.right),)]
            return [a + b for a in left for b in right]
        if isinstance(node, ast.IfExp):
            return self.texts(mod, node.body, option, depth + 1) + self.texts(mod, node.orelse, option, depth + 1)
        if isinstance(node, ast.Name):
            return self.name(mod, node, option, depth)
        if isinstance(node, ast.Call):
            func = func_name(node)
            if isinstance(node.func, ast.Attribute) and func in ("replace", "strip", "rstrip"):
                return self.texts(mod, node.func.value, option, depth + 1)     # problem.replace("{", "{{")
            if isinstance(node.func, ast.Name):
                function, where = self.function(mod, func)
                if function is not None:
                    return [t for value in returns(function) for t in self.texts(where, value, option, depth + 1)]
        return []

    def fixed(self, mod: Module, value: ast.FormattedValue) -> str | None:
        """The text of a field that is a module-level string constant (`{MANIFEST}` -> manifest.json), or None."""
        node = value.value
        if not isinstance(node, ast.Name) or value.format_spec is not None:
            return None
        where, name = mod, node.id
        if not any(isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
                   for n in mod.tree.body) and name in mod.imports:
            other = module_path(mod.imports[name][0])
            if other is None:
                return None
            where, name = module(other), mod.imports[name][1]
        found = [n.value for n in where.tree.body if isinstance(n, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)]
        if len(found) != 1 or not (isinstance(found[0], ast.Constant) and isinstance(found[0].value, str)):
            return None
        return repr(found[0].value) if value.conversion == ord("r") else found[0].value

    def wording(self, node: ast.expr) -> bool:
        """Whether a field is a choice between two wordings (constants or f-strings), not a value."""
        return isinstance(node, ast.IfExp) and all(
            isinstance(b, ast.JoinedStr) or isinstance(b, ast.Constant) and isinstance(b.value, str)
            for b in (node.body, node.orelse))

    def constant(self, text: str, option) -> str:
        if not option:
            return text
        # an OptionError template: "{top_p}" names the option (or what its flags give); "{{" and "}}" are braces
        flags = option if isinstance(option, dict) else {}
        text = re.sub(r"(?<!\{)\{(\w+)\}(?!\})",
                      lambda m: flags.get(m.group(1), "--" + m.group(1).replace("_", "-")), text)
        return text.replace("{{", "{").replace("}}", "}")

    def field(self, mod: Module, node: ast.expr) -> Field:
        return Field(ast.unparse(node), words(node, self.names, str(mod.path.relative_to(SRC))))

    def name(self, mod: Module, node: ast.Name, option: bool, depth: int) -> list[tuple]:
        scope = enclosing_function(mod, node)
        values = []
        for where in ([scope] if scope is not None else []) + [mod.tree]:
            body = ast.walk(where) if where is scope else iter(where.body)
            for n in body:
                if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == node.id for t in n.targets):
                    values.append(n.value)
                elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.target.id == node.id \
                        and n.value is not None:
                    values.append(n.value)
            if values:
                break
        if not values and node.id in mod.imports:
            other = module_path(mod.imports[node.id][0])
            if other is not None:
                target = module(other)
                values = [n.value for n in target.tree.body if isinstance(n, ast.Assign)
                          and any(isinstance(t, ast.Name) and t.id == mod.imports[node.id][1] for t in n.targets)]
                return [t for v in values for t in self.texts(target, v, option, depth + 1)]
        return [t for v in values for t in self.texts(mod, v, option, depth + 1)]

    def function(self, mod: Module, name: str):
        if name in mod.functions:
            return mod.functions[name], mod
        if name in mod.imports:
            other = module_path(mod.imports[name][0])
            if other is not None:
                target = module(other)
                return target.functions.get(mod.imports[name][1]), target
        return None, mod


def messages(names: dict[str, str] | None = None) -> list[Message]:
    """Every message the source builds, in file and line order; `names` maps a field's expression to its words."""
    key = tuple(sorted((names or {}).items()))
    if key not in _FOUND:
        _FOUND[key] = _messages(names or {})
    return list(_FOUND[key])


_FOUND: dict[tuple, list[Message]] = {}


def _messages(names: dict[str, str]) -> list[Message]:
    reader = Reader(names)
    found = []
    for path in sorted(SRC.rglob("*.py")):
        mod = module(path)
        for node in ast.walk(mod.tree):
            if not isinstance(node, ast.Call):
                continue
            func = func_name(node)
            if func in MAKERS and node.args:
                argument = node.args[0]
            elif func in TEMPLATE_MAKERS and len(node.args) > TEMPLATE_MAKERS[func]:
                argument = node.args[TEMPLATE_MAKERS[func]]
            else:
                continue
            option = func != "SeqlabError"
            if func == "OptionError" and len(node.args) > 1 and isinstance(node.args[1], ast.Dict):
                option = {k.value: v.value for k, v in zip(node.args[1].keys, node.args[1].values, strict=True)
                          if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)} or True
            texts = reader.texts(mod, argument, option)
            for parts in dict.fromkeys(texts):
                found.append(Message(str(path.relative_to(SRC)), node.lineno, mod.name, tidy(parts)))
    return sorted(found, key=lambda m: (m.file, m.line))


def tidy(parts: tuple) -> tuple:
    """Adjacent strings joined; a check_fields template's "{" field "}" (the option's name) as the option."""
    out: list = []
    for part in parts:
        if isinstance(part, str) and out and isinstance(out[-1], str):
            out[-1] += part
        elif part != "":
            out.append(part)
    for i in range(1, len(out) - 1):
        if isinstance(out[i], Field) and isinstance(out[i - 1], str) and isinstance(out[i + 1], str) \
                and out[i - 1].endswith("{") and out[i + 1].startswith("}"):
            out[i - 1], out[i], out[i + 1] = out[i - 1][:-1], Field(out[i].source, "option"), out[i + 1][1:]
    return tuple(p for p in out if p != "")


def unresolved() -> list[tuple[str, int, str]]:
    """Every SeqlabError/OptionError built from an argument that no message could be read from."""
    reader, missing = Reader({}), []
    for path in sorted(SRC.rglob("*.py")):
        mod = module(path)
        for node in ast.walk(mod.tree):
            if not (isinstance(node, ast.Call) and func_name(node) in MAKERS and node.args
                    and isinstance(node.func, ast.Name)):
                continue
            function = enclosing_function(mod, node)
            if function is not None and function.name in TEMPLATE_MAKERS:
                continue                                   # option_error's own OptionError(template, ...)
            if not reader.texts(mod, node.args[0], False):
                missing.append((str(path.relative_to(SRC)), node.lineno, ast.unparse(node)))
    return missing


# ------------------------------------------------------------------------------------------ causes and fixes
def explained(entries=None, found: list[Message] | None = None) -> dict:
    """Each entry of errors_explained.ENTRIES -> the messages it covers (those of its files that its pattern
    finds)."""
    import errors_explained

    entries = errors_explained.ENTRIES if entries is None else entries
    found = messages(errors_explained.NAMES) if found is None else found
    return {entry: [m for m in found if re.fullmatch(entry.files, m.file) and re.search(entry.match, m.text)]
            for entry in entries}


def coverage() -> tuple[dict, list[Message], dict]:
    """(entry -> messages, the messages no entry covers, message -> the entries when more than one covers it)."""
    import errors_explained

    found = messages(errors_explained.NAMES)
    covered = explained(errors_explained.ENTRIES, found)
    by_message: dict[Message, list] = {}
    for entry, covers in covered.items():
        for m in covers:
            by_message.setdefault(m, []).append(entry)
    missing = [m for m in found if m not in by_message]
    twice = {m: e for m, e in by_message.items() if len(e) > 1}
    return covered, missing, twice


# ------------------------------------------------------------------------------------------------------ the page
def code(text: str) -> str:
    """`text` as an inline code span, whatever backticks it holds."""
    fence = "``" if "`" in text else "`"
    return f"{fence} {text} {fence}" if fence == "``" or text.startswith(" ") else f"`{text}`"


def anchor(title: str) -> str:
    """The id MkDocs' toc extension gives a heading (its default slugify)."""
    text = re.sub(r"[^\w\s-]", "", re.sub(r"<[^>]+>", "", title)).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def page() -> str:
    import errors_explained

    covered = explained()
    texts = {m.text for covers in covered.values() for m in covers}
    by_group: dict[str, list] = {group: [] for group in errors_explained.GROUPS}
    for entry, covers in covered.items():
        by_group[entry.group].append((entry, covers))
    lines = ["# Error messages", "",
             f"Every message seqlab refuses input with, read from the source: {len(texts)} of them, in "
             f"{len(covered)} entries, grouped by what you were doing. Each says what happened and why seqlab "
             "refuses (**cause**), and what to do next (**fix**). The command line prints the message as one line "
             "on stderr and exits with status 2, never a traceback; from Python it is a `seqlab.SeqlabError` with "
             "the same text. In the messages below, ‹words› stand for what the message names from your input: a "
             "file, a line, an option, a value.", "",
             "To find a message you got, paste it (or its distinctive words) into the search box: it leads to its "
             "entry. How errors look, with real ones run, is in the [errors guide](../guides/errors.md).", ""]
    lines += [f"- [{group}](#{anchor(group)}): {sum(len({m.text for m in c}) for _, c in entries)} messages"
              for group, entries in by_group.items()] + [""]
    for group, entries in by_group.items():
        lines += [f"## {group}", "", errors_explained.GROUPS[group], ""]
        for entry, covers in entries:
            lines += [f"### {entry.title}", ""]
            lines += [f"- {code(text)}" for text in dict.fromkeys(m.text for m in covers)] + [""]
            lines += [f"**Cause.** {entry.cause}", "", f"**Fix.** {entry.fix}", ""]
            modules = ", ".join(f"`{name}`" for name in dict.fromkeys(m.module for m in covers))
            lines += [f"<small>Raised in {modules}.</small>", ""]
    return "\n".join(lines)
