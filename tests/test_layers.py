"""seqlab's layers (docs/hooks/structure.py's LAYERS, bottom up) held to the imports: no import runs up a layer,
none runs from one family into another (but `BETWEEN_FAMILIES`), and none reaches into a family from outside the
families but the registry's."""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs" / "hooks"))

import structure  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_layers_no_import_runs_up():
    assert [str(breach) for breach in structure.breaches()] == []


def test_layers_every_module_is_in_one():
    for name in structure.modules():
        assert 0 <= structure.layer_of(name) < len(structure.LAYERS), name


def test_layers_each_has_rooms():
    held = {room.layer for room in structure.rooms()}
    assert held == set(range(len(structure.LAYERS)))


def test_layers_capability_inits_import_nothing():
    """A capability package's __init__ that the plug-ins layer holds (importing a plug-in runs it) imports
    nothing of seqlab, so that a family's part importing `seqlab.cli.options` does not run the command line."""
    graph = structure.graph()
    inits = [name for layer in structure.LAYERS for name in layer.inits]
    assert inits
    for name in inits:
        assert graph[name] == set(), name


def test_layers_a_breach_is_found():
    """The check could fail: a plug-in importing the registry, and a family importing another's module, are
    breaches."""
    found = structure.breaches({"seqlab.cli.options": {"seqlab.registry"},
                                "seqlab.families.tagger.pipeline": {"seqlab.families.seq2seq.pipeline"},
                                "seqlab.families.tagger.config": {"seqlab.families.lm.features"}})
    assert [(b.importer, b.target) for b in found] == [
        ("seqlab.cli.options", "seqlab.registry"),
        ("seqlab.families.tagger.pipeline", "seqlab.families.seq2seq.pipeline")]


def expected_rooms() -> dict[str, set[str]]:
    """{layer name: the names of its rooms}, read from the code."""
    found: dict[str, set[str]] = {layer.name: set() for layer in structure.LAYERS}
    for room in structure.rooms():
        found[structure.LAYERS[room.layer].name].add(room.name)
    return found


def code_map_rooms(page: str) -> dict[str, set[str]]:
    """{layer name: the rooms named under it} of code.md's tree block: a layer's line is `K name: what`, a room's
    `  name/` or `  name.py` (two spaces; a description's further lines are indented deeper)."""
    block = re.search(r"\{#tree\}.*?```text\n(.*?)```", page, re.S)
    assert block, "docs/reference/code.md has no tree block under {#tree}"
    found: dict[str, set[str]] = {}
    layer = None
    for line in block.group(1).split("\n"):
        if head := re.match(r"(\d+) (.+?): ", line):
            assert int(head.group(1)) == len(found), f"code.md's layer {line!r} is out of order"
            layer = head.group(2)
            found[layer] = set()
        elif room := re.match(r"  (\S+)", line):
            assert layer is not None, f"code.md names {room.group(1)} before any layer"
            found[layer].add(room.group(1).rstrip("/"))
    return found


def readme_rooms(readme: str) -> dict[str, set[str]]:
    """{layer name: the rooms named on its line} of the README's Layout section: `- **name**: `room/`, ...` (a
    line may go on, indented), each room a code span ending in `/` or `.py`."""
    section = re.search(r"^## Layout\n(.*?)^## ", readme, re.S | re.M)
    assert section, "the README has no Layout section"
    items = re.split(r"^- ", section.group(1), flags=re.M)[1:]
    found: dict[str, set[str]] = {}
    for item in items:
        head = re.match(r"\*\*(.+?)\*\*", item)
        assert head, f"the README's Layout item {item[:40]!r} names no layer"
        found[head.group(1)] = {name.rstrip("/") for name in re.findall(r"`([^`\s]+(?:/|\.py))`", item)}
    return found


def test_layers_code_map_names_every_room():
    """code.md's tree and the README's Layout list the layers of LAYERS in their order, each with every room the
    code has in it and no other: neither map can drift from the code."""
    expected = expected_rooms()
    code = code_map_rooms((ROOT / "docs" / "reference" / "code.md").read_text(encoding="utf-8"))
    readme = readme_rooms((ROOT / "README.md").read_text(encoding="utf-8"))
    for where, found in (("docs/reference/code.md's tree", code), ("the README's Layout", readme)):
        assert list(found) == list(expected), f"{where}: the layers are not those of LAYERS, bottom up"
        for layer, rooms in expected.items():
            assert found[layer] == rooms, (f"{where}, layer {layer}: missing {sorted(rooms - found[layer])}, "
                                           f"not rooms {sorted(found[layer] - rooms)}")


def test_layers_code_map_check_could_fail():
    """A room the tree does not name, and a name that is no room, are found."""
    page = "## The tree {#tree}\n\n```text\n0 base: x\n  errors.py   y\n  gone.py\n```\n"
    assert code_map_rooms(page) == {"base": {"errors.py", "gone.py"}}
    readme = "## Layout\n\n- **base**: `errors.py`, `data/`\n  `api.py`\n\n## Next\n"
    assert readme_rooms(readme) == {"base": {"errors.py", "data", "api.py"}}
    assert readme_rooms(readme)["base"] != expected_rooms()["base"]
