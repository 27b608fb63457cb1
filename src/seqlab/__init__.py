"""seqlab: the neural sequence models of Jurafsky & Martin's SLP, trained and served from one tool.

The names below are imported when first used (PEP 562), so that `import seqlab.x` loads only what
seqlab.x needs: the ONNX runtime (`seqlab.export.runtime`) runs without importing PyTorch. The shared names are
listed here; each family declares its own (`Family.public`: `TrainedLM`, `load_lm`, its config classes, ...), and
`train_<family>` is `seqlab.api.train` with the family named, for every family of `seqlab.registry`."""

from __future__ import annotations

import importlib

from seqlab.errors import SeqlabError as SeqlabError
from seqlab.version import __version__ as __version__

# name -> the module that defines it: the names that belong to no family
_SHARED = {
    "load": "seqlab.registry",
    "prepare": "seqlab.api",
    "verify_prepared": "seqlab.api",
    "SearchOptions": "seqlab.decoding.options",
    "TrainConfig": "seqlab.training.config",
    "tune": "seqlab.tuning.study",
}


def _names() -> dict[str, tuple[str, str | None]]:
    """Every lazy name -> (the module that defines it, the package a relative module is read from); a trainer
    `train_<family>` -> ("", the family's name)."""
    from seqlab.registry import FAMILIES

    names: dict[str, tuple[str, str | None]] = {name: (module, None) for name, module in _SHARED.items()}
    for family in FAMILIES.values():
        for name, module in {f"train_{family.name}": "", **family.public}.items():
            if name in names or name in ("SeqlabError", "__version__"):
                raise SeqlabError(f"seqlab.{name} is declared twice (the {family.name} family's public names "
                                  "and another's): give it another name")
            names[name] = (module, family.name) if not module else (module, family.package)
    return names


def __getattr__(name: str):
    if name == "__all__":
        return sorted({*_names(), "SeqlabError", "__version__"})
    names = _names()
    if name not in names:
        raise AttributeError(f"module 'seqlab' has no attribute {name!r}")
    module, package = names[name]
    if not module:                               # seqlab.train_<family>: the family trains, then the run's card
        from seqlab.api import trainer

        value = trainer(package)
    else:
        value = getattr(importlib.import_module(module, package), name)
    globals()[name] = value                      # once: later lookups find it directly
    return value


def __dir__() -> list[str]:
    present = set(globals())                     # before _names() imports the registry (and its submodules)
    return sorted({*present, *_names(), "__all__"})
