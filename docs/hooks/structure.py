"""seqlab's structure read from its code: every module's imports (module level and inside functions, but for type
checking), the layers they are declared in (`LAYERS`, bottom up), and what breaks the layering. The site's layer
diagram (docs/hooks/diagrams.py, `code-layers`, on reference/code.md) is drawn from it, and tests/test_layers.py
holds the code to it:

    python docs/hooks/structure.py            # the layers, their rooms and lines, and any import that runs up

A *room* is a package under `src/seqlab/` (`data`, `serve`, `families/lm`, ...) or a top-level module
(`registry.py`). Every module belongs to exactly one layer: the longest prefix in `LAYERS` that names it, but a
package's `__init__` named in a layer's `inits` (a capability's, which imports nothing) is in that layer alone. An
import may go to its own layer or any layer below, never up. Importing `seqlab.a.b` runs `seqlab/a/__init__.py`
first (Python's rule), so that counts as importing the package too. Two kinds of reaching up are the design, not
breaches, and are drawn apart:

- the families' parts, which the shared capabilities reach at run time through the registry
  (`family.part("serve")`, `family.pipeline`): never an import statement;
- a family using another family's public part (a tagger taking a trained language model's features) names it in
  `BETWEEN_FAMILIES`.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "src" / "seqlab"


@dataclass(frozen=True)
class Layer:
    name: str
    says: str                           # one line: what lives here
    prefixes: tuple[str, ...]           # module names (and their submodules) in it
    inits: tuple[str, ...] = ()         # packages whose __init__ alone is in it (imports nothing), not their modules


# bottom up; a module's layer is the one whose prefix names it most precisely
LAYERS: tuple[Layer, ...] = (
    Layer("base", "errors, atomic writes, what seqlab owns, typed options, progress, the version",
          ("seqlab.errors", "seqlab.version", "seqlab.fileio", "seqlab.owned", "seqlab.config", "seqlab.progress")),
    Layer("data", "files to tokens, vocabularies, prepared shards and batches, family-neutral", ("seqlab.data",)),
    Layer("networks", "building blocks, the metrics, the one decoding core",
          ("seqlab.nn", "seqlab.metrics", "seqlab.decoding")),
    Layer("architectures", "one network per file, keyed by architecture; the Model contract", ("seqlab.models",)),
    Layer("contract and run files", "what a family declares (typed parts); a run's files read without PyTorch",
          ("seqlab.contract", "seqlab.runs.files", "seqlab.runs.records"), inits=("seqlab.runs",)),
    Layer("training", "one loop for every family over the Task contract; devices, checkpoints, DDP, trackers",
          ("seqlab.training",)),
    Layer("runs", "run directories: the lock, config.json, --resume, loading; the one training skeleton",
          ("seqlab.runs",)),
    Layer("plug-ins", "what a family's parts build on: option parsing, routes and schemas, graph helpers, card splits",
          ("seqlab.cli.options",
           "seqlab.serve.routes", "seqlab.serve.schemas", "seqlab.serve.limits", "seqlab.serve.scheduler",
           "seqlab.serve.batching", "seqlab.serve.ui",
           "seqlab.export.graphs", "seqlab.export.readme", "seqlab.export.session", "seqlab.export.tokens",
           "seqlab.export.manifest", "seqlab.export.protobuf", "seqlab.export.folder",
           "seqlab.cards.splits", "seqlab.cards.bootstrap", "seqlab.cards.datasheet",
           "seqlab.compare.pages", "seqlab.compare.inside"),
          # the capability packages' __init__s hold only a docstring: importing a plug-in runs them
          inits=("seqlab.cli", "seqlab.serve", "seqlab.export", "seqlab.cards", "seqlab.compare")),
    Layer("families", "one package per task family: everything that differs between them", ("seqlab.families",)),
    Layer("registry", "the one door: FAMILIES, run_family, load", ("seqlab.registry",)),
    Layer("capabilities", "what every family gets: cards, audits, compare, tune, serve, export, exercises",
          ("seqlab.api", "seqlab.info", "seqlab.cards", "seqlab.harms", "seqlab.compare", "seqlab.tuning",
           "seqlab.serve", "seqlab.export", "seqlab.exercises", "seqlab.examples")),
    Layer("commands", "the command line, one module per command; the package's public face",
          ("seqlab.cli", "seqlab", "seqlab.__main__")),
)

# a family importing another family's module: (importer's family, the module it may import; its package's
# __init__, which the import runs, is named too)
BETWEEN_FAMILIES: tuple[tuple[str, str], ...] = (
    # --lm-features: a tagger or classifier reads a trained language model's states as contextual string
    # embeddings (Akbik et al. 2018). features.py loads an LM run and runs the LM: the LM's own code, not a
    # family-neutral piece, so it stays in families/lm and the two families use it by name.
    ("tagger", "seqlab.families.lm"), ("tagger", "seqlab.families.lm.features"),
    ("classifier", "seqlab.families.lm"), ("classifier", "seqlab.families.lm.features"),
)


def module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(SOURCE.rglob("*.py"))}


def imported(path: Path) -> set[str]:
    """The seqlab modules a file imports anywhere in it (functions included; not under TYPE_CHECKING), with
    `importlib.import_module("seqlab....")` of a constant name."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for child in ast.walk(node))
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name)
              and getattr(node.func, "attr", getattr(node.func, "id", "")) in ("import_module", "__import__")
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.add(node.args[0].value)
    return {name for name in found if name == "seqlab" or name.startswith("seqlab.")}


def graph() -> dict[str, set[str]]:
    """{module: the modules its imports run}, a submodule's import running its packages' __init__s too (but a
    package's own __init__ importing its submodules runs nothing above it)."""
    known = modules()
    edges: dict[str, set[str]] = {}
    for name, path in known.items():
        targets = set()
        for target in imported(path):
            while target not in known and "." in target:        # `from seqlab.x import name`: the module
                target = target.rsplit(".", 1)[0]
            if target not in known:
                continue
            targets.add(target)
            parts = target.split(".")
            targets.update(".".join(parts[:k]) for k in range(2, len(parts)))   # the packages above it
        targets.discard(name)
        # a module's own packages have run before it: not edges
        own = name.split(".")
        targets -= {".".join(own[:k]) for k in range(1, len(own))}
        edges[name] = targets
    return edges


def layer_of(module: str) -> int:
    """The index in LAYERS of the layer holding `module` (the layer naming it in `inits`, else the longest prefix
    naming it)."""
    best, length = -1, -1
    for k, layer in enumerate(LAYERS):
        if module in layer.inits:
            return k
        for prefix in layer.prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > length:
                best, length = k, len(prefix)
    if best < 0:
        raise KeyError(f"{module} is in no layer of docs/hooks/structure.py's LAYERS")
    return best


def family_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "families" else None


@dataclass
class Breach:
    importer: str
    target: str
    why: str

    def __str__(self) -> str:
        return f"{self.importer} -> {self.target}: {self.why}"


def breaches(edges: dict[str, set[str]] | None = None) -> list[Breach]:
    """Every import that runs up a layer, or from one family into another (but `BETWEEN_FAMILIES`), or into a
    family from outside the families but the registry."""
    edges = graph() if edges is None else edges
    found = []
    for importer, targets in sorted(edges.items()):
        for target in sorted(targets):
            low, high = layer_of(importer), layer_of(target)
            mine, theirs = family_of(importer), family_of(target)
            if high > low:
                found.append(Breach(importer, target, f"up from {LAYERS[low].name} to {LAYERS[high].name}"))
            elif theirs and mine and mine != theirs and (mine, target) not in BETWEEN_FAMILIES:
                found.append(Breach(importer, target, f"from the {mine} family into the {theirs} family"))
            elif (target.startswith("seqlab.families") and not importer.startswith("seqlab.families")
                  and importer != "seqlab.registry"):
                found.append(Breach(importer, target, "into a family from outside the registry"))
    return found


@dataclass
class Room:
    name: str                 # "data", "families/lm", "registry.py"
    layer: int
    lines: int
    modules: list[str] = field(default_factory=list)


def room_of(module: str) -> str:
    parts = module.split(".")[1:]
    if not parts:
        return "__init__.py"
    path = SOURCE.joinpath(*parts)
    if path.is_dir():
        return "/".join(parts[:2]) if parts[0] == "families" and len(parts) > 1 else parts[0]
    if len(parts) == 1:
        return f"{parts[0]}.py"
    return "/".join(parts[:2]) if parts[0] == "families" and len(parts) > 2 else parts[0]


def rooms() -> list[Room]:
    """The rooms of every layer, bottom up, each with its lines; a package split over layers (`cli/options.py` is a
    plug-in, the rest of `cli/` a command) is a room in each."""
    found: dict[tuple[str, int], Room] = {}
    for name, path in modules().items():
        key = (room_of(name), layer_of(name))
        room = found.setdefault(key, Room(key[0], key[1], 0))
        room.lines += sum(1 for _ in path.open(encoding="utf-8"))
        room.modules.append(name)
    return sorted(found.values(), key=lambda r: (r.layer, -r.lines, r.name))


def main() -> int:
    for k, layer in enumerate(LAYERS):
        inside = [room for room in rooms() if room.layer == k]
        print(f"{k:2d} {layer.name}: {layer.says}")
        print("     " + ", ".join(f"{room.name} {room.lines}" for room in inside))
    found = breaches()
    print(f"\n{len(found)} imports break the layering" + (":" if found else ""))
    for breach in found:
        print(f"  {breach}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
