"""Write the module through which mypy checks every family's parts against their protocols (`make typecheck`):
for each family of the registry, and each family defined outside seqlab under tests/families (the worked example
of docs/reference/adding-a-family.md; mypy finds it through its mypy_path), and each part it provides
(`Family.provides`), one assignment of the part's
module to its protocol (`seqlab.contract.parts`), which mypy accepts only when the module declares every name
of the protocol with a compatible type (PEP 544, modules as implementations of protocols).

    python tests/typecheck_parts.py build/typecheck/seqlab_family_parts.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from seqlab.contract import Family
from seqlab.fileio import atomic_write_text
from seqlab.registry import FAMILIES

OUTSIDE = Path(__file__).resolve().parent / "families"


def outside() -> dict[str, Family]:
    """The families under tests/families, by name (each package's FAMILY)."""
    import importlib

    sys.path.insert(0, str(OUTSIDE))
    try:
        found = [importlib.import_module(package.name).FAMILY for package in sorted(OUTSIDE.iterdir())
                 if (package / "__init__.py").exists()]
    finally:
        sys.path.remove(str(OUTSIDE))
    return {family.name: family for family in found}


def source() -> str:
    """The checking module's text, from the registry and the families under tests/families."""
    imports, checks = set(), []
    for name, family in {**FAMILIES, **outside()}.items():
        for part, protocol in family.provides().items():
            module = f"{family.package}.{part}"
            imports.add(f"import {module}")
            checks.append(f"_{name}_{part}: parts.{protocol.__name__} = {module}")
    return "\n".join(['"""Written by tests/typecheck_parts.py from the registry: every family\'s parts, each '
                      'checked against\nits protocol (seqlab.contract.parts). Do not edit."""', "",
                      *sorted(imports), "", "from seqlab.contract import parts", "", *checks, ""])


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/typecheck_parts.py OUTPUT.py")
    out = Path(sys.argv[1])
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, source())
