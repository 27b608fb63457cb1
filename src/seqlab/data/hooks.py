"""Training-text hooks: what changes a family's training text before it is tokenised and its vocabulary
after, keeping what it did in the run directory. A pipeline asks its data config for its hooks
(`text_hooks`) and runs them; it never imports what they serve (the canaries of `seqlab.data.canaries` are
measured by `seqlab.harms.exposure`, above every family).

    hook.lines(run_dir, lines, resume, write) -> lines      the training lines, changed (before tokenising)
    hook.placements(run_dir, line_count, resume, write)     the same as {position: line} to plant while the
                                                            text streams into a prepared folder
    hook.key                                                what the planted lines depend on (a cache key's part)
    hook.vocabulary(vocab) -> vocab                         the vocabulary, completed (after building it)
    hook.describe(run_dir, resume) -> str                   one line for the training log
    hook.files                                              what it keeps in the run directory
"""

from __future__ import annotations

from seqlab.data.canaries import Canaries

HOOKS = (Canaries,)         # each: of(data config, seed) -> the hook, or None when its options are off


def text_hooks(data, seed: int) -> list:
    """The hooks a data config asks for, in order."""
    return [hook for kind in HOOKS if (hook := kind.of(data, seed)) is not None]


def hook_files() -> tuple[str, ...]:
    """Every file a hook may keep in a run directory (a run started afresh removes them: an overwritten run's
    are not its own)."""
    return tuple(name for kind in HOOKS for name in kind.files)
