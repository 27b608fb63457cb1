"""Canaries: random secrets planted in a language model's training text (Carlini et al. 2019, "The Secret
Sharer: Evaluating and Testing Unintended Memorization in Neural Networks", USENIX Security, §3-4).

`seqlab train lm --canary "my pin is {digits:6}" --canary-repeats 1 4 16 64` draws one random secret per
repeat count r by filling the template's slot (seeded by the train seed), and inserts its line r times
into the training lines at random positions (seeded) before tokenisation, so the vocabulary sees it.
The run's canaries.json records the template, the space R of candidate fillings, the secrets and where
each was inserted; `seqlab audit exposure` (`seqlab.harms.exposure`) measures how far the model has
memorised each one. A --resume reads canaries.json back: the secrets are never drawn again.

Slots (one per template): `{digits:N}` (N symbols from 0-9, |R| = 10^N) and `{letters:N}` (N symbols
from a-z, |R| = 26^N). With a word or BPE tokenizer the symbols of a filling are written separated by
spaces ("my pin is 3 1 4 1 5 9"), so that each digit is a token of its own: written together, each
6-digit number would be one word, out of the vocabulary for every candidate but the secret. With the
character tokenizer they are written together ("my pin is 314159"): each character is a token anyway.
Every symbol of the slot's alphabet is in the vocabulary (word and char: appended when the training
text, secrets included, never shows it), so that every candidate is a distinct token sequence.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path

from seqlab.errors import SeqlabError
from seqlab.fileio import atomic_write_json, read_text

ALPHABETS = {"digits": "0123456789", "letters": "abcdefghijklmnopqrstuvwxyz"}
MAX_LENGTH = 20                      # symbols in one slot
DEFAULT_REPEATS = (1, 4, 16, 64)
FILE = "canaries.json"
SLOT = re.compile(r"\{([^{}]*)\}")


@dataclass(frozen=True)
class Template:
    """A canary template: the text before its slot, the slot's alphabet and length, the text after."""

    text: str
    before: str
    kind: str
    length: int
    after: str

    @property
    def alphabet(self) -> str:
        return ALPHABETS[self.kind]

    @property
    def space(self) -> int:
        """|R|: the number of candidate fillings."""
        return len(self.alphabet) ** self.length

    def render(self, filling: str, tokenizer: str) -> str:
        """The training line of a filling: its symbols spaced for word and BPE tokenizers (one token each)."""
        return self.before + separator(tokenizer).join(filling) + self.after

    def filling(self, index: int) -> str:
        """The index-th filling in lexicographic order (index in [0, |R|))."""
        symbols = []
        for _ in range(self.length):
            index, k = divmod(index, len(self.alphabet))
            symbols.append(self.alphabet[k])
        return "".join(reversed(symbols))

    def index(self, filling: str) -> int:
        """The position of a filling in lexicographic order (the inverse of `filling`)."""
        value = 0
        for symbol in filling:
            value = value * len(self.alphabet) + self.alphabet.index(symbol)
        return value


def separator(tokenizer: str) -> str:
    """What separates a filling's symbols in the training text: nothing for characters, a space otherwise."""
    return "" if tokenizer == "char" else " "


def parse_template(text: str) -> Template:
    """"my pin is {digits:6}" -> Template; one clear line for a template without a slot, with several, an
    unknown slot or a length out of range."""
    slots = list(SLOT.finditer(text))
    if not slots:
        raise SeqlabError(f"--canary {text!r} has no slot: put one in, such as 'my pin is {{digits:6}}' "
                          f"(slots: {', '.join(f'{{{kind}:N}}' for kind in ALPHABETS)})")
    if len(slots) > 1:
        raise SeqlabError(f"--canary {text!r} has {len(slots)} slots; a template holds exactly one")
    slot = slots[0]
    match = re.fullmatch(r"\s*(\w+)\s*:\s*(-?\d+)\s*", slot.group(1))
    if not match or match.group(1) not in ALPHABETS:
        raise SeqlabError(f"--canary {text!r}: unknown slot {slot.group(0)!r}; the slots are "
                          f"{', '.join(f'{{{kind}:N}}' for kind in ALPHABETS)}")
    length = int(match.group(2))
    if not 1 <= length <= MAX_LENGTH:
        raise SeqlabError(f"--canary {text!r}: the slot's length must be in [1, {MAX_LENGTH}], got {length}")
    if "\n" in text:
        raise SeqlabError(f"--canary {text!r}: a canary is one line (no line breaks)")
    return Template(text, text[:slot.start()], match.group(1), length, text[slot.end():])


def check_repeats(repeats) -> list[int]:
    repeats = list(repeats)
    for r in repeats:
        if isinstance(r, bool) or not isinstance(r, int) or r < 1:
            raise SeqlabError(f"--canary-repeats must be at least 1, got {r}")
    return repeats


def draw(template: Template, repeats: list[int], seed: int, lines: int, tokenizer: str) -> dict:
    """One random secret per repeat count (distinct, uniform over R) and the positions of its r copies
    among the `lines` training lines once inserted (uniform over the lines + copies), seeded by `seed`:
    the record that canaries.json holds."""
    rng = random.Random(f"seqlab-canary:{seed}")
    count = min(len(repeats), template.space)
    if len(repeats) > template.space:
        raise SeqlabError(f"--canary {template.text!r} has only {template.space} fillings, fewer than the "
                          f"{len(repeats)} secrets --canary-repeats asks for")
    indices = rng.sample(range(template.space), count)
    copies = [k for k, r in enumerate(repeats) for _ in range(r)]
    rng.shuffle(copies)
    positions = sorted(rng.sample(range(lines + len(copies)), len(copies)))
    inserted_at: list[list[int]] = [[] for _ in repeats]
    for position, k in zip(positions, copies, strict=True):
        inserted_at[k].append(position)
    secrets = [{"text": template.render(template.filling(i), tokenizer), "filling": template.filling(i),
                "repeats": r, "inserted_at": where}
               for i, r, where in zip(indices, repeats, inserted_at, strict=True)]
    return {"template": template.text, "slots": [{"kind": template.kind, "length": template.length,
                                                  "alphabet": template.alphabet}],
            "space": template.space, "seed": seed, "tokenizer": tokenizer,
            "separator": separator(tokenizer), "training_lines": lines, "secrets": secrets}


def insert(lines: list[str], record: dict) -> list[str]:
    """The training lines with every secret's line at its recorded positions (indices in the result)."""
    placed = {position: secret["text"] for secret in record["secrets"] for position in secret["inserted_at"]}
    total = len(lines) + len(placed)
    if record.get("training_lines", len(lines)) != len(lines) or (placed and max(placed) >= total):
        raise SeqlabError(f"{FILE} was drawn for {record.get('training_lines')} training lines, but the training "
                          f"file has {len(lines)}; start the run again with --overwrite")
    source = iter(lines)
    return [placed[k] if k in placed else next(source) for k in range(total)]


def plant(run_dir: Path, lines: list[str], template: str, repeats: list[int], seed: int, tokenizer: str,
          resume: bool, write: bool = True) -> tuple[list[str], dict]:
    """The training lines with the canaries in: drawn and written to RUN/canaries.json on a fresh run
    (`write`: rank 0), read back from it on --resume (never drawn again)."""
    path = Path(run_dir) / FILE
    if resume:
        if not path.is_file():
            raise SeqlabError(f"--resume: the run in {run_dir} was configured with --canary but has no {FILE}; "
                              "start it again with --overwrite")
        record = read_record(path)
    else:
        record = draw(parse_template(template), check_repeats(repeats), seed, len(lines), tokenizer)
        if write:
            atomic_write_json(path, record)
    return insert(lines, record), record


def with_alphabet(vocab, record: dict, tokenizer: str):
    """The vocabulary with every symbol of the slot's alphabet (word and char tokenizers), appended if training
    left it out (a digit no secret holds, or one under --min-freq): each candidate filling is then a distinct
    token sequence, and a symbol training never showed is scored as itself, not as the shared `<unk>`."""
    from seqlab.data.vocab import Vocab

    if tokenizer == "bpe":
        return vocab                                    # byte-level: every symbol is a piece already
    missing = [symbol for slot in record["slots"] for symbol in slot["alphabet"] if symbol not in vocab]
    return Vocab(vocab.tokens + list(dict.fromkeys(missing))) if missing else vocab


def read_record(path: str | Path) -> dict:
    import json

    try:
        record = json.loads(read_text(path, FILE))
    except json.JSONDecodeError as error:
        raise SeqlabError(f"{path} is not valid JSON ({error.msg}, line {error.lineno})") from None
    if not isinstance(record, dict) or not isinstance(record.get("secrets"), list) or "template" not in record:
        raise SeqlabError(f"{path} is damaged: expected the template and the secrets of a run's canaries")
    return record


class Canaries:
    """The canaries as a training-text hook (`seqlab.data.hooks`): `lines` plants the secrets into the training
    lines before they are tokenised (drawn on a fresh run, read back on --resume), `vocabulary` adds their
    alphabet to the vocabulary after."""

    files = (FILE,)                 # what it keeps in the run directory

    def __init__(self, template: str, repeats: list[int], seed: int, tokenizer: str):
        self.template, self.repeats, self.seed, self.tokenizer = template, repeats, seed, tokenizer
        self.record: dict | None = None

    @classmethod
    def of(cls, data, seed: int) -> Canaries | None:
        """The hook a data config asks for (--canary), or None."""
        return cls(data.canary, data.canary_repeats, seed, data.tokenizer) if getattr(data, "canary", "") else None

    def lines(self, run_dir: Path, lines: list[str], resume: bool, write: bool) -> list[str]:
        lines, self.record = plant(run_dir, lines, self.template, self.repeats, self.seed, self.tokenizer, resume,
                                   write)
        return lines

    def placements(self, run_dir: Path, line_count: int, resume: bool, write: bool) -> dict[int, str]:
        """{position among the training lines once planted: the secret's line}, for preparing the training text
        as it streams (`seqlab.data.prepare_text`): drawn for `line_count` lines and written to canaries.json on
        a fresh run (`write`), read back on --resume."""
        path = Path(run_dir) / FILE
        if resume:
            if not path.is_file():
                raise SeqlabError(f"--resume: the run in {run_dir} was configured with --canary but has no {FILE}; "
                                  "start it again with --overwrite")
            self.record = read_record(path)
            if self.record.get("training_lines") != line_count:
                raise SeqlabError(f"{FILE} was drawn for {self.record.get('training_lines')} training lines, but the "
                                  f"training file has {line_count}; start the run again with --overwrite")
        else:
            self.record = draw(parse_template(self.template), check_repeats(self.repeats), self.seed, line_count,
                               self.tokenizer)
            if write:
                atomic_write_json(path, self.record)
        return {position: secret["text"] for secret in self.record["secrets"] for position in secret["inserted_at"]}

    @property
    def key(self) -> str:
        """What the planted lines depend on, for the prepared data's cache key."""
        return f"canary:{self.template}:{self.repeats}:{self.seed}:{self.tokenizer}"

    def vocabulary(self, vocab):
        return with_alphabet(vocab, self.record, self.tokenizer)

    def describe(self, run_dir: Path, resume: bool) -> str:
        """One line for the training log: what was planted, and where it is recorded."""
        return (f"canaries: {len(self.record['secrets'])} secrets of {self.template!r} inserted "
                f"{'/'.join(str(s['repeats']) for s in self.record['secrets'])} times into the training lines "
                f"({'read from' if resume else 'written to'} {Path(run_dir) / FILE})")
