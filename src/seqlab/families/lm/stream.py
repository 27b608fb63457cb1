"""A language model's evaluation file as batches, read from the file as the batches need it.

`TrainedLM.evaluate_ids` scores one id stream held whole; `TrainedLM.evaluate_file` reads a file of
any size through this module instead, and gets the very batches `seqlab.data.batching` would cut
from the whole stream, so the very same figures:

  1. `survey` reads the file once: its tokens n (one </s> per line), how many are unknown, and,
     every CHECKPOINT lines, where a line starts (token position, byte offset, line number).
  2. stream models (RNNs and the window LM, which carry a state): `StreamBatches(ids, B, T,
     exact=True)` lays the stream out as B rows of L = ceil(n / B) tokens read side by side,

         row 0   ids[0 : L]      | T | T | ... |       each batch: the next T tokens of every row
         row 1   ids[L : 2L]     | T | T | ... |       (inputs: the tokens before them, </s> first)
         ...

     `stream_batches` opens one reader per row, started at the checkpoint before the row's first
     token, and takes T tokens from each per batch.
  3. the transformer: `sliding_windows` scores windows of the context, each `stride` further on and
     scoring only the tokens no earlier window scored; `window_batches` slides one reader along.

Lines are read in pieces of LINE_CHARS characters. With characters or whitespace words a line of
any length gives the tokens it would give whole (a word split between two pieces is joined again;
only a "word" over LINE_CHARS characters is read as several); BPE needs its lines whole, and a line
over LINE_CHARS is refused with its number.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from seqlab.data.batching import Batch
from seqlab.data.stream import Line, LineReader
from seqlab.data.vocab import EOS, PAD, UNK
from seqlab.errors import SeqlabError

LINE_CHARS = 1 << 20        # characters of a line read at a time
CHECKPOINT = 1024           # lines between two recorded line starts
GROUP = 256                 # lines tokenized together (BPE encodes a batch of lines faster)


@dataclass
class Survey:
    """What one reading of the file found: tokens, </s> tokens, unknown tokens, and line starts as
    (token position, byte offset, line number), every CHECKPOINT lines from the first."""

    path: str
    what: str
    tokens: int = 0
    ends: int = 0
    unknown: int = 0
    characters: int = 0          # as `seqlab.data.readers.count_characters` counts them, for bits per character
    starts: list[tuple[int, int, int]] = field(default_factory=list)


def encoded_lines(lines: LineReader, tokenizer, vocab) -> Iterator[tuple[Line | None, list[int]]]:
    """(the Line where a line starts, or None for the later pieces of a long line; ids): a line's
    token ids and </s>, as `seqlab.data.readers.encode_lines` gives them."""
    group: list[Line] = []
    carry = ""                     # a word begun at the end of the last piece
    in_line = False                # between the pieces of a long line

    def flush():
        for line, tokens in zip(group, tokenizer.tokenize_lines([g.text for g in group]), strict=True):
            yield line, vocab.encode(tokens) + [EOS]
        group.clear()

    for line in lines:
        if not line.more and not in_line:
            group.append(line)
            if len(group) == GROUP:
                yield from flush()
            continue
        yield from flush()
        if tokenizer.kind == "bpe":
            raise SeqlabError(f"{lines.place(line.number)}: a line of more than {LINE_CHARS:,} characters; a BPE "
                              "model reads lines whole: break it into shorter lines")
        if tokenizer.kind == "char":
            tokens = list(line.text)
        else:
            text, carry = carry + line.text, ""
            if line.more:
                cut = len(text)
                while cut and not text[cut - 1].isspace():
                    cut -= 1                                   # the last word may go on in the next piece
                if cut or len(text) <= LINE_CHARS:
                    text, carry = text[:cut], text[cut:]
            tokens = text.split()
        yield (None if in_line else line), vocab.encode(tokens) + ([] if line.more else [EOS])
        in_line = line.more
    yield from flush()


def open_lines(path, what: str, start: tuple[int, int] | None = None) -> LineReader:
    return LineReader(path, what, LINE_CHARS, pieces=True, stdin=False, start=start)


def survey(path, what: str, tokenizer, vocab) -> Survey:
    """Read the file once (see the module docstring); refuse one whose every token is unknown, as
    `seqlab.data.readers.read_stream` does."""
    found = Survey(str(path), what)
    count = 0
    with open_lines(path, what) as lines:
        counted = _Counted(lines)
        for line, ids in encoded_lines(counted, tokenizer, vocab):
            if line is not None:
                if count % CHECKPOINT == 0:
                    found.starts.append((found.tokens, line.offset, line.number))
                count += 1
            found.tokens += len(ids)
            found.ends += ids.count(EOS)
            found.unknown += ids.count(UNK)
    found.characters = counted.characters + found.ends         # each line's characters and its line break
    words = found.tokens - found.ends
    if words and found.unknown == words:
        raise SeqlabError(f"{what} {path}: all {words} tokens are unknown to the vocabulary built from the "
                          "training file; is it the same language and tokenization?")
    return found


class _Counted:
    """A LineReader that counts the characters of the lines (and pieces) it hands on."""

    def __init__(self, lines: LineReader):
        self.lines, self.characters = lines, 0

    def __iter__(self) -> Iterator[Line]:
        for line in self.lines:
            self.characters += len(line.text)
            yield line

    def place(self, number: int) -> str:
        return self.lines.place(number)


class Cursor:
    """The file's ids from one token position on, read as they are taken."""

    def __init__(self, found: Survey, tokenizer, vocab, position: int):
        k = bisect.bisect_right(found.starts, (position, math.inf, math.inf)) - 1
        first, offset, number = found.starts[k]
        self.lines = open_lines(found.path, found.what, (offset, number))
        self.pieces = encoded_lines(self.lines, tokenizer, vocab)
        self.ids: list[int] = []
        self.next = 0                     # the next id of self.ids to take
        self.skip = position - first      # ids to pass over before the position

    def take(self, count: int) -> list[int]:
        """The next `count` ids (fewer at the end of the file)."""
        out: list[int] = []
        while len(out) < count:
            if self.next == len(self.ids):
                piece = next(self.pieces, None)
                if piece is None:
                    break
                self.ids, self.next = piece[1], 0
                passed = min(self.skip, len(self.ids))
                self.next, self.skip = passed, self.skip - passed
                continue
            n = min(count - len(out), len(self.ids) - self.next)
            out.extend(self.ids[self.next:self.next + n])
            self.next += n
        return out

    def close(self) -> None:
        self.lines.close()


def stream_batches(found: Survey, tokenizer, vocab, batch_size: int, seq_len: int) -> Iterator[Batch]:
    """The batches of `StreamBatches(ids, batch_size, seq_len, exact=True)` over the file's ids."""
    n, B, T = found.tokens, batch_size, seq_len
    L = math.ceil(n / B)
    rows: list[list | None] = []                      # per row: its cursor and the last token taken
    try:
        for b in range(B):
            if b * L >= n:
                rows.append(None)                     # a row of padding only (a file of fewer than B tokens)
                continue
            cursor = Cursor(found, tokenizer, vocab, max(b * L - 1, 0))
            rows.append([cursor, EOS if b == 0 else cursor.take(1)[0]])
        for k in range(math.ceil(L / T)):
            width = min(T, L - k * T)
            inputs = torch.full((B, width), PAD, dtype=torch.long)        # (B, T)
            targets = torch.full((B, width), PAD, dtype=torch.long)       # (B, T)
            for b, row in enumerate(rows):
                real = max(0, min(width, n - (b * L + k * T)))          # this row's tokens before the end
                if row is None or not real:
                    continue
                ids = row[0].take(real)
                targets[b, :real] = torch.tensor(ids)
                inputs[b, :real] = torch.tensor([row[1], *ids[:-1]])
                row[1] = ids[-1]
            yield Batch(inputs, targets)
    finally:
        for row in rows:
            if row is not None:
                row[0].close()


def stream_batch_count(found: Survey, batch_size: int, seq_len: int) -> int:
    return math.ceil(math.ceil(found.tokens / batch_size) / seq_len)


def window_batches(found: Survey, tokenizer, vocab, batch_size: int, context: int, stride: int) -> Iterator[Batch]:
    """The batches of `sliding_windows(ids, batch_size, context, stride)` over the file's ids."""
    n, stride = found.tokens, max(1, min(stride, context))
    cursor = Cursor(found, tokenizer, vocab, 0)
    seq, base = [EOS], 0                              # seq[i] is position base + i of [</s>] + ids
    windows: list[tuple[torch.Tensor, torch.Tensor]] = []
    scored_until = start = 0
    try:
        while True:
            stop = min(start + context, n)           # inputs seq[start:stop], targets ids[start:stop]
            seq.extend(cursor.take(stop + 1 - base - len(seq)))
            inputs = torch.full((context,), PAD, dtype=torch.long)
            targets = torch.full((context,), PAD, dtype=torch.long)
            inputs[:stop - start] = torch.tensor(seq[start - base:stop - base])
            fresh = scored_until - start             # targets before this were scored already
            targets[fresh:stop - start] = torch.tensor(seq[scored_until + 1 - base:stop + 1 - base])
            windows.append((inputs, targets))
            scored_until = stop
            if len(windows) == batch_size or stop == n:
                yield Batch(torch.stack([w[0] for w in windows]), torch.stack([w[1] for w in windows]))  # (B, T)
                windows = []
            if stop == n:
                return
            start += stride
            del seq[:start - base]
            base = start
    finally:
        cursor.close()


def window_batch_count(found: Survey, batch_size: int, context: int, stride: int) -> int:
    stride = max(1, min(stride, context))
    windows = 1 + math.ceil(max(0, found.tokens - context) / stride)
    return math.ceil(windows / batch_size)
