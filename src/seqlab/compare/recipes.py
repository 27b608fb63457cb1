"""The architectures `seqlab compare` trains and `seqlab tune` starts from: each family's compare recipes
(its `compare` part's RECIPES and TRAIN) at a size, and which of the user's options act on each."""

from __future__ import annotations

from typing import Any

from seqlab.config import inapplicable
from seqlab.errors import SeqlabError
from seqlab.registry import family

SIZES = ("tiny", "small", "medium")
WIDTH = {"tiny": 16, "small": 1, "medium": 2}     # tiny: fixed 16 units (tests, demos); else a multiplier

# Each family's recipes are its `compare` part's: RECIPES, an architecture's model options at size "small", and
# TRAIN, the training options they share (AdamW with a cosine decay over the budget, as the benchmark tables
# train). These widths are multiplied by the size's factor.
SIZED = ("embedding_size", "hidden_size", "ff_size")


def check_given(task: str, given: dict[str, Any], reserved: tuple[str, ...], command: str, instead: str) -> None:
    """The options given to `seqlab compare` or `seqlab tune`: none of those the command sets itself (`reserved`;
    `instead` says what to give), and each an option of the task."""
    for name in reserved:
        if name in given:
            raise SeqlabError(f"--{name.replace('_', '-')} is set by seqlab {command} ({instead})")
    unknown = [name for name in given if name not in family(task).pipeline.option_groups]
    if unknown:
        raise SeqlabError(f"unknown option {unknown[0]!r} for seqlab {command} {task}")


def recipes(task: str) -> dict[str, dict[str, Any]]:
    """{architecture: its model options at size "small"} of a family (its `compare` part's RECIPES)."""
    return family(task).part("compare").RECIPES


def archs(task: str) -> tuple[str, ...]:
    return tuple(recipes(task))


def recipe(task: str, arch: str, size: str) -> dict[str, Any]:
    """The model and training options of one architecture at one size."""
    comparing = family(task).part("compare")
    if arch not in comparing.RECIPES:
        raise SeqlabError(f"--archs: {arch!r} is not an architecture seqlab compares for {task}; choose from "
                          f"{', '.join(comparing.RECIPES)}")
    if size not in SIZES:
        raise SeqlabError(f"--size {size!r}: choose from {', '.join(SIZES)}")
    options = {**comparing.RECIPES[arch], **comparing.TRAIN}
    for name in SIZED:
        if name in options:
            options[name] = WIDTH["tiny"] if size == "tiny" else options[name] * WIDTH[size]
    if size == "tiny":
        options["warmup_steps"] = 0
        if "ff_size" in options:
            options["ff_size"] = 4 * WIDTH["tiny"]
    return comparing.resize(options, size)


def entry_options(task: str, name: str, size: str, variants: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the options a compared entry starts from, the options of its own that win over the user's shared
    ones): an architecture's recipe and nothing; or a variant's recipe (none: seqlab train's defaults) and
    the variant's options."""
    if name not in variants:
        return recipe(task, name, size), {}
    own = {k: v for k, v in variants[name].items() if k != "recipe"}
    base = variants[name].get("recipe")
    return (recipe(task, base, size) if base else {}), own


def applicable_options(task: str, arch: str, size: str, given: dict[str, Any],
                       variants: dict[str, Any] | None = None) -> dict[str, Any]:
    """Of the options the user gave, those that act on this architecture (`--heads` does nothing for an LSTM:
    left out for it, not refused)."""
    pipeline = family(task).pipeline
    options, own = entry_options(task, arch, size, variants or {})
    options = {**options, **given, **own}
    kept = {}
    for name, value in given.items():
        group = pipeline.option_groups[name]
        cls = pipeline.groups[group]
        values = {k: v for k, v in options.items() if pipeline.option_groups.get(k) == group}
        try:
            obj = cls(**values)
        except SeqlabError:
            continue
        if not inapplicable(obj, [name]):
            kept[name] = value
    return kept
