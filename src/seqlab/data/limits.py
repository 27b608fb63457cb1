"""The longest input a trained model reads, and what becomes of a longer one.

    --max-input-length N   tokens per input (a sentence to tag, a document to classify, a source to
                           translate); default: the model's own limit where it has one (a
                           transformer's positions, a classifier's training --max-length, a seq2seq
                           model's --max-source-length), else DEFAULT_MAX_TOKENS
    --long-input P         truncate (keep the first N tokens, or the last N for a classifier trained
                           with --truncate tail; each cut input named in a warning, the first few,
                           and all counted at the end) or reject (stop with an error naming the line);
                           --long-source is the same option under its earlier name

A line is read up to `chars` characters, 64 per token of the limit and never fewer than 65,536 (see
`seqlab.data.stream.LineReader`): a longer line is cut there, whatever its token count, so that one
enormous line never sits whole in memory.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

from seqlab.errors import SeqlabError

LONG_INPUT = ("truncate", "reject")
DEFAULT_MAX_TOKENS = 10_000       # models without a limit of their own (recurrent, pooled, window): generous
CHARS_PER_TOKEN = 64              # characters read per token of the limit ...
MIN_LINE_CHARS = 1 << 16          # ... and never fewer per line
NAMED = 5                         # cut inputs named one by one in warnings; the rest only counted


@dataclass
class InputLimit:
    """`tokens` per input and the policy for longer ones; counts what it saw (see the module docstring).

    noun: what an input is called in messages ("sentence", "document", "source")."""

    tokens: int = DEFAULT_MAX_TOKENS
    long: str = "truncate"
    keep: str = "head"
    noun: str = "input"
    inputs: int = 0
    cut: int = 0
    longest: int = 0
    named: list[str] = field(default_factory=list)

    def __post_init__(self):
        if self.long not in LONG_INPUT:
            raise SeqlabError(f"--long-input {self.long!r}: choose truncate or reject")
        if self.tokens < 1:
            raise SeqlabError(f"--max-input-length {self.tokens}: must be at least 1")

    @classmethod
    def resolve(cls, requested: int | None, default: int, hard: int | None, model: str, long: str = "truncate",
                keep: str = "head", noun: str = "input") -> InputLimit:
        """The limit asked for (None: the model's `default`), refused above `hard`, the most the model
        can read at all (a transformer's positions)."""
        tokens = requested or default
        if hard is not None and tokens > hard:
            raise SeqlabError(f"--max-input-length {tokens}: {model} reads at most {hard:,} tokens (its "
                              "positions); give a smaller limit")
        return cls(tokens, long, keep, noun)

    @property
    def chars(self) -> int:
        """Characters of a line read at most (the rest of a longer line is skipped, the line cut)."""
        return max(CHARS_PER_TOKEN * self.tokens, MIN_LINE_CHARS)

    @property
    def side(self) -> str:
        return "first" if self.keep == "head" else "last"

    def apply(self, tokens: list, where: str, line: int, length: int | None = None, line_cut: bool = False) -> list:
        """The tokens of one input within the limit: as they are, cut (with a warning for the first
        few) or refused. `where`: "input file in.txt:3", the input's `line`; `length`: its true token
        count when `tokens` holds only part of it; `line_cut`: its line was longer than `chars` and cut."""
        self.inputs += 1
        length = len(tokens) if length is None else length
        if length <= self.tokens and not line_cut:
            return tokens
        size = f"longer than {self.chars:,} characters" if line_cut else f"{length:,} tokens"
        if self.long == "reject":
            limit = f"the most read for the model's {self.tokens:,} tokens" if line_cut else \
                f"longer than the model's {self.tokens:,}"
            raise SeqlabError(f"{where}: the {self.noun} is {size}, {limit} (--max-input-length; --long-input "
                              f"truncate keeps its {self.side} {self.tokens:,})")
        self.cut += 1
        self.longest = max(self.longest, length)
        if len(self.named) < NAMED:
            self.named.append(str(line))
            more = "; further ones are only counted" if len(self.named) == NAMED else ""
            warnings.warn(f"{where}: the {self.noun} is {size}; read its {self.side} {self.tokens:,} tokens "
                          f"(--max-input-length){more}", stacklevel=2)
        return tokens[:self.tokens] if self.keep == "head" else tokens[-self.tokens:]

    def report(self, what: str) -> str | None:
        """One line on what was cut, for the end of a reading: None when nothing was."""
        if not self.cut:
            return None
        lines = ", ".join(self.named) + (", ..." if self.cut > len(self.named) else "")
        return (f"{what}: truncated {self.cut:,} of {self.inputs:,} {self.noun}s to their {self.side} "
                f"{self.tokens:,} tokens (--max-input-length; line{'s' * (self.cut > 1)} {lines})")

    def warn(self, what: str) -> None:
        message = self.report(what)
        if message:
            warnings.warn(message, stacklevel=2)
