"""Pairs -> ids for sequence to sequence: `PairVocabulary` (a tokenizer and a vocabulary per side, and the
length limits), the length report, and the batches it collates (`PairBatch`).

Importing it needs no PyTorch: the ONNX runtime (`seqlab.export.runtime`) reads sources into ids with it;
`collate` imports torch when called.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from seqlab.data.tokenizers import Tokenizer, tokenizer_from_dict
from seqlab.data.vocab import BOS, EOS, PAD, SEP, UNK, Vocab
from seqlab.errors import DAMAGED, SeqlabError, where
from seqlab.families.seq2seq.parallel import Pair
from seqlab.fileio import read_json

if TYPE_CHECKING:
    from torch import Tensor


@dataclass
class PairBatch:
    """B pairs, right-padded: source (B, S) and source_lengths (B,); the decoder's input target_in (B, T)
    and what it is scored on, target_out (B, T) (<pad>: not scored). For the language model target_in is
    the whole sequence source <sep> target, target_out scores the target only, and source_out (B, T)
    holds the next source tokens (scored with lm_loss "all").

    With copy attention (See et al. 2017) two more: source_copy (B, S), each source token's id in the
    extended target vocabulary (its target id, or V + k for the k-th distinct source word the target
    vocabulary lacks), and target_copy_out (B, T), target_out with the target's out-of-vocabulary words that
    occur in the source at their extended ids (the rest stay <unk>); `oovs` lists each row's extended words."""

    source: Tensor
    source_lengths: Tensor
    target_in: Tensor
    target_out: Tensor
    source_out: Tensor | None = None
    source_copy: Tensor | None = None
    target_copy_out: Tensor | None = None
    oovs: list[list[str]] | None = None

    def rows(self, start: int, stop: int) -> PairBatch:
        def cut(t):
            return None if t is None else t[start:stop]
        return PairBatch(cut(self.source), cut(self.source_lengths), cut(self.target_in), cut(self.target_out),
                         cut(self.source_out), cut(self.source_copy), cut(self.target_copy_out), cut(self.oovs))

    def to(self, device) -> PairBatch:
        def move(t):
            return None if t is None else t.to(device)
        return PairBatch(move(self.source), move(self.source_lengths), move(self.target_in), move(self.target_out),
                         move(self.source_out), move(self.source_copy), move(self.target_copy_out), self.oovs)

    @property
    def num_tokens(self) -> int:
        """Scored target tokens."""
        return int((self.target_out != PAD).sum())


@dataclass
class EncodedPair:
    """A pair as ids; with copy attention also `PairBatch`'s source_copy and target_copy_out rows and the
    source's out-of-vocabulary words in order of first appearance (their extended ids V, V + 1, ...)."""

    source: list[int]
    target: list[int] | None
    line: int = 0
    source_copy: list[int] | None = None
    target_copy: list[int] | None = None
    oovs: list[str] | None = None


@dataclass
class LengthReport:
    """Pairs over the length limits: skipped (training) or truncated (everything else)."""

    pairs: int = 0
    skipped: int = 0
    truncated_sources: int = 0
    truncated_targets: int = 0

    def messages(self, what: str, max_source: int, max_target: int) -> list[str]:
        out = []
        if self.skipped:
            out.append(f"{what}: skipped {self.skipped:,} of {self.pairs:,} pairs longer than {max_source or 'any'} "
                       f"source / {max_target or 'any'} target tokens (--max-source-length, --max-target-length)")
        if self.truncated_sources:
            out.append(f"{what}: truncated {self.truncated_sources:,} of {self.pairs:,} sources to their first "
                       f"{max_source} tokens (--max-source-length)")
        if self.truncated_targets:
            out.append(f"{what}: truncated {self.truncated_targets:,} of {self.pairs:,} targets to their first "
                       f"{max_target} tokens (--max-target-length)")
        return out


class PairVocabulary:
    """Texts <-> token ids on both sides: a tokenizer and a vocabulary for the source and for the target
    (the same objects when they are shared), and the length limits. With `copy` (the pointer-generator of
    See et al. 2017) each pair also gets its ids in the extended vocabulary (`extend`)."""

    def __init__(self, source_tokenizer: Tokenizer, target_tokenizer: Tokenizer, source_vocab: Vocab,
                 target_vocab: Vocab, joint: bool = False, max_source: int = 0, max_target: int = 0,
                 copy: bool = False):
        self.source_tokenizer, self.target_tokenizer = source_tokenizer, target_tokenizer
        self.source_vocab, self.target_vocab = source_vocab, target_vocab
        self.joint, self.max_source, self.max_target = joint, max_source, max_target
        self.copy = copy

    def extend(self, source: list[str], target: list[str] | None) -> tuple[list[int], list[int] | None, list[str]]:
        """See et al. 2017's extended vocabulary for one pair: the source tokens as target-vocabulary ids,
        each word the target vocabulary lacks as V + its rank among the source's distinct such words; the
        target likewise, where its out-of-vocabulary words occur in the source (else <unk>); and those
        words, in extended-id order."""
        vocab, V = self.target_vocab, len(self.target_vocab)
        extended: dict[str, int] = {}
        for token in source:
            if token not in vocab and token not in extended:
                extended[token] = V + len(extended)
        index = vocab.index
        source_ids = [index[t] if t in index else extended[t] for t in source]
        target_ids = None if target is None else [index[t] if t in index else extended.get(t, UNK) for t in target]
        return source_ids, target_ids, list(extended)

    def source_tokens(self, texts: list[str]) -> list[list[str]]:
        return self.source_tokenizer.tokenize_lines(texts)

    def target_tokens(self, texts: list[str]) -> list[list[str]]:
        return self.target_tokenizer.tokenize_lines(texts)

    def encode(self, pairs: list[Pair], path="", what: str = "file", long: str = "truncate",
               report: LengthReport | None = None, sources: list[list[str]] | None = None) -> list[EncodedPair]:
        """The pairs as ids (`sources`: their source tokens, when already at hand). Pairs over the
        limits are skipped (long="skip"), truncated ("truncate") or refused with their line ("reject",
        sources only)."""
        report = report if report is not None else LengthReport()
        sources = sources if sources is not None else self.source_tokens([p.source for p in pairs])
        targets = self.target_tokens([p.target for p in pairs]) if pairs and pairs[0].target is not None else None
        encoded = []
        for i, pair in enumerate(pairs):
            item = self.within_limits(self.source_vocab.encode(sources[i]),
                                      None if targets is None else self.target_vocab.encode(targets[i]),
                                      long, report, sources[i], None if targets is None else targets[i],
                                      pair.line, path, what)
            if item is not None:
                encoded.append(item)
        return encoded

    def within_limits(self, source: list[int], target: list[int] | None, long: str, report: LengthReport,
                      source_tokens: list[str] | None = None, target_tokens: list[str] | None = None,
                      line: int = 0, path="", what: str = "file") -> EncodedPair | None:
        """One pair's ids (an empty source read as <unk>) within the length limits as `encode` says (None:
        skipped), with its extended ids for copy attention (from its tokens, needed then only)."""
        report.pairs += 1
        source = source or [UNK]
        source_over = self.max_source and len(source) > self.max_source
        target_over = target is not None and self.max_target and len(target) > self.max_target
        if source_over or target_over:
            if long == "skip":
                report.skipped += 1
                return None
            if long == "reject" and source_over:
                raise SeqlabError(f"{what} {where(path, line)}: the source is {len(source):,} tokens, "
                                  f"longer than the model's {self.max_source:,} (use --long-source truncate "
                                  "to keep its beginning)")
            if source_over:
                source = source[:self.max_source]
                report.truncated_sources += 1
            if target_over:
                target = target[:self.max_target]
                report.truncated_targets += 1
        item = EncodedPair(source, target, line)
        if self.copy:
            item.source_copy, item.target_copy, item.oovs = self.extend(
                source_tokens[:len(source)] or ["<unk>"], None if target is None else target_tokens[:len(target)])
        return item

    def collate(self, items: list[EncodedPair], widths: tuple[int, int] = (0, 0)) -> PairBatch:
        """The items as a batch; `widths` (S, T): pad to at least these (a global batch's widths, for the rows
        of it that one process reads: `seqlab.families.seq2seq.prepared_pairs`)."""
        import torch

        B = len(items)
        lengths = torch.tensor([len(item.source) for item in items])
        source = torch.full((B, max(int(lengths.max()), widths[0])), PAD, dtype=torch.long)
        for b, item in enumerate(items):
            source[b, :len(item.source)] = torch.tensor(item.source)
        if self.joint:          # x = source <sep> target </s>: inputs x[:-1], targets x[1:]
            sequences = [item.source + [SEP] + (item.target or []) + [EOS] for item in items]
            T = max(max(len(s) for s in sequences) - 1, widths[1])
            target_in = torch.full((B, T), PAD, dtype=torch.long)
            target_out = torch.full((B, T), PAD, dtype=torch.long)
            source_out = torch.full((B, T), PAD, dtype=torch.long)
            for b, (item, seq) in enumerate(zip(items, sequences, strict=True)):
                n = len(item.source)
                target_in[b, :len(seq) - 1] = torch.tensor(seq[:-1])
                source_out[b, :n] = torch.tensor(seq[1:n + 1])             # next source tokens, then <sep>
                target_out[b, n:len(seq) - 1] = torch.tensor(seq[n + 1:])  # after <sep>: the target, </s>
            return PairBatch(source, lengths, target_in, target_out, source_out)
        T = max(max(len(item.target or []) for item in items) + 1, widths[1])
        target_in = torch.full((B, T), PAD, dtype=torch.long)
        target_out = torch.full((B, T), PAD, dtype=torch.long)
        for b, item in enumerate(items):
            y = item.target or []
            target_in[b, :len(y) + 1] = torch.tensor([BOS] + y)
            target_out[b, :len(y) + 1] = torch.tensor(y + [EOS])
        batch = PairBatch(source, lengths, target_in, target_out)
        if items and items[0].source_copy is not None:      # copy attention: the extended ids (See et al. 2017)
            batch.source_copy = torch.full_like(source, PAD)
            batch.target_copy_out = target_out.clone()
            for b, item in enumerate(items):
                batch.source_copy[b, :len(item.source_copy)] = torch.tensor(item.source_copy)
                if item.target_copy is not None:
                    batch.target_copy_out[b, :len(item.target_copy)] = torch.tensor(item.target_copy)
            batch.oovs = [item.oovs for item in items]
        return batch


def read_pair_vocabulary(run_dir: Path, joint: bool, max_source: int, max_target: int) -> PairVocabulary:
    """A sequence-to-sequence model's tokenizers and vocabularies (one of each when shared); `joint`: the
    lm's source <sep> target sequences; the run's length limits."""
    try:
        tokenizers = read_json(run_dir / "tokenizer.json", "tokenizer file")
        vocabs = read_json(run_dir / "vocab.json", "vocabulary file")
        source_tokenizer = tokenizer_from_dict(tokenizers["source"])
        source_vocab = Vocab(vocabs["source"])
        if tokenizers["shared"]:
            target_tokenizer, target_vocab = source_tokenizer, source_vocab
        else:
            target_tokenizer, target_vocab = tokenizer_from_dict(tokenizers["target"]), Vocab(vocabs["target"])
    except DAMAGED as error:
        raise SeqlabError(f"{run_dir}: tokenizer.json or vocab.json is damaged ({error}); retrain into this "
                          "directory with --overwrite") from None
    return PairVocabulary(source_tokenizer, target_tokenizer, source_vocab, target_vocab, joint, max_source,
                          max_target)


@dataclass
class Output:
    """A decoded text with its tokens, its log probability (summed and length-normalised), whether it
    ended with </s>, and (when asked for) the attention weights (output tokens x source tokens)."""

    text: str
    tokens: list[str]
    score: float
    normalized: float
    finished: bool
    source_tokens: list[str]
    attention: list[list[float]] | None = None
