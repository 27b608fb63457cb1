"""Sequence to sequence for the trainer: pairs -> padded batches, the loss as (sum, count), perplexity.

Encoder-decoders read the source and are trained with teacher forcing (SLP 13.7.1): the decoder
reads <s> y_1 .. y_m and is scored on y_1 .. y_m </s>. The language model (SLP 9.4.1) reads one
sequence x = source <sep> target and is scored on the target and </s> after the separator (or, with
lm_loss "all", on every next token). The loss is the cross-entropy summed over scored tokens; the
trainer divides once by their count. Perplexity is exp of the mean loss per target token (</s>
included), the same tokens for every architecture.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm.auto import tqdm

from seqlab.data.batching import length_batches
from seqlab.data.parallel import Pair
from seqlab.data.tokenizers import Tokenizer
from seqlab.data.vocab import BOS, EOS, PAD, SEP, UNK, Vocab
from seqlab.errors import SeqlabError, where


@dataclass
class PairBatch:
    """B pairs, right-padded: source (B, S) and source_lengths (B,); the decoder's input target_in (B, T)
    and what it is scored on, target_out (B, T) (<pad>: not scored). For the language model target_in is
    the whole sequence source <sep> target, target_out scores the target only, and source_out (B, T)
    holds the next source tokens (scored with lm_loss "all")."""

    source: Tensor
    source_lengths: Tensor
    target_in: Tensor
    target_out: Tensor
    source_out: Tensor | None = None

    def rows(self, start: int, stop: int) -> PairBatch:
        def cut(t):
            return None if t is None else t[start:stop]
        return PairBatch(cut(self.source), cut(self.source_lengths), cut(self.target_in), cut(self.target_out),
                         cut(self.source_out))

    def to(self, device) -> PairBatch:
        def move(t):
            return None if t is None else t.to(device)
        return PairBatch(move(self.source), move(self.source_lengths), move(self.target_in), move(self.target_out),
                         move(self.source_out))

    @property
    def num_tokens(self) -> int:
        """Scored target tokens."""
        return int((self.target_out != PAD).sum())


@dataclass
class EncodedPair:
    source: list[int]
    target: list[int] | None
    line: int = 0


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
    (the same objects when they are shared), and the length limits."""

    def __init__(self, source_tokenizer: Tokenizer, target_tokenizer: Tokenizer, source_vocab: Vocab,
                 target_vocab: Vocab, joint: bool = False, max_source: int = 0, max_target: int = 0):
        self.source_tokenizer, self.target_tokenizer = source_tokenizer, target_tokenizer
        self.source_vocab, self.target_vocab = source_vocab, target_vocab
        self.joint, self.max_source, self.max_target = joint, max_source, max_target

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
            report.pairs += 1
            source = self.source_vocab.encode(sources[i]) or [UNK]
            target = None if targets is None else self.target_vocab.encode(targets[i])
            source_over = self.max_source and len(source) > self.max_source
            target_over = target is not None and self.max_target and len(target) > self.max_target
            if source_over or target_over:
                if long == "skip":
                    report.skipped += 1
                    continue
                if long == "reject" and source_over:
                    raise SeqlabError(f"{what} {where(path, pair.line)}: the source is {len(source):,} tokens, "
                                      f"longer than the model's {self.max_source:,} (use --long-source truncate "
                                      "to keep its beginning)")
                if source_over:
                    source = source[:self.max_source]
                    report.truncated_sources += 1
                if target_over:
                    target = target[:self.max_target]
                    report.truncated_targets += 1
            encoded.append(EncodedPair(source, target, pair.line))
        return encoded

    def collate(self, items: list[EncodedPair]) -> PairBatch:
        B = len(items)
        lengths = torch.tensor([len(item.source) for item in items])
        source = torch.full((B, int(lengths.max())), PAD, dtype=torch.long)
        for b, item in enumerate(items):
            source[b, :len(item.source)] = torch.tensor(item.source)
        if self.joint:          # x = source <sep> target </s>: inputs x[:-1], targets x[1:]
            sequences = [item.source + [SEP] + (item.target or []) + [EOS] for item in items]
            T = max(len(s) for s in sequences) - 1
            target_in = torch.full((B, T), PAD, dtype=torch.long)
            target_out = torch.full((B, T), PAD, dtype=torch.long)
            source_out = torch.full((B, T), PAD, dtype=torch.long)
            for b, (item, seq) in enumerate(zip(items, sequences, strict=True)):
                n = len(item.source)
                target_in[b, :len(seq) - 1] = torch.tensor(seq[:-1])
                source_out[b, :n] = torch.tensor(seq[1:n + 1])             # next source tokens, then <sep>
                target_out[b, n:len(seq) - 1] = torch.tensor(seq[n + 1:])  # after <sep>: the target, </s>
            return PairBatch(source, lengths, target_in, target_out, source_out)
        T = max(len(item.target or []) for item in items) + 1
        target_in = torch.full((B, T), PAD, dtype=torch.long)
        target_out = torch.full((B, T), PAD, dtype=torch.long)
        for b, item in enumerate(items):
            y = item.target or []
            target_in[b, :len(y) + 1] = torch.tensor([BOS] + y)
            target_out[b, :len(y) + 1] = torch.tensor(y + [EOS])
        return PairBatch(source, lengths, target_in, target_out)


def pair_lengths(items: list[EncodedPair]) -> list[int]:
    """The length batches are grouped by: source and target tokens together."""
    return [len(item.source) + len(item.target or ()) for item in items]


def pair_batches(items: list[EncodedPair], vocabulary: PairVocabulary, batch_size: int,
                 seed: int | None) -> list[PairBatch]:
    """Batches of pairs of similar length: shuffled with a seed (training), shortest first without."""
    groups = length_batches(pair_lengths(items), batch_size, seed)
    return [vocabulary.collate([items[i] for i in group]) for group in groups]


def scored_targets(batch: PairBatch, all_tokens: bool = False) -> Tensor:
    """What each position is scored on (B, T), <pad> where nothing is: the target (and </s>), and for the
    lm with all_tokens the next source token too."""
    if all_tokens and batch.source_out is not None:
        return torch.where(batch.target_out != PAD, batch.target_out, batch.source_out)
    return batch.target_out


def token_losses(logits: Tensor, batch: PairBatch, label_smoothing: float = 0.0, all_tokens: bool = False):
    """(summed cross-entropy, scored tokens) of a batch's targets (and, for the lm with all_tokens, of
    its next source tokens too)."""
    V = logits.size(-1)
    flat = logits.float().reshape(-1, V)
    targets = scored_targets(batch, all_tokens)
    loss = F.cross_entropy(flat, targets.reshape(-1), ignore_index=PAD, reduction="sum",
                           label_smoothing=label_smoothing)
    return loss, int((targets != PAD).sum())


class Seq2SeqTask:
    """Sequence to sequence for the trainer (the `seqlab.tasks.base.Task` contract)."""

    name = "seq2seq"
    lower_is_better = True
    metric = "loss"
    batch_unit = "pairs"
    progress: bool | None = False

    def __init__(self, vocabulary: PairVocabulary, train: list[EncodedPair], valid: list[EncodedPair],
                 test: list[EncodedPair] | None, batch_size: int, eval_batch_size: int, seed: int,
                 label_smoothing: float = 0.0, lm_all_tokens: bool = False):
        self.vocabulary, self.batch_size, self.seed = vocabulary, batch_size, seed
        self.label_smoothing, self.lm_all_tokens = label_smoothing, lm_all_tokens
        self.encoded_train = train
        self.valid_data = pair_batches(valid, vocabulary, eval_batch_size, None)
        self.test_data = pair_batches(test, vocabulary, eval_batch_size, None) if test else None
        self._epoch_batches: tuple[int, list[PairBatch]] | None = None

    def train_batches(self, epoch: int) -> list[PairBatch]:
        if self._epoch_batches is None or self._epoch_batches[0] != epoch:
            batches = pair_batches(self.encoded_train, self.vocabulary, self.batch_size, self.seed * 1_000_003 + epoch)
            self._epoch_batches = (epoch, batches)
        return self._epoch_batches[1]

    def initial_state(self, model, rows: int, device):
        return None

    def count(self, batch: PairBatch) -> int:
        """The scored tokens: the targets and </s>, and with the lm's loss "all" the source tokens and
        <sep> too."""
        return int((scored_targets(batch, self.lm_all_tokens) != PAD).sum())

    def loss(self, model, batch: PairBatch, state):
        logits = model(batch.source, batch.source_lengths, batch.target_in)          # (B, T, V)
        loss, count = token_losses(logits, batch, self.label_smoothing, self.lm_all_tokens)
        return loss, count, None

    @torch.no_grad()
    def evaluate(self, model, batches: list[PairBatch], device, rows: slice = slice(None)) -> dict:
        """Summable: the cross-entropy of the target tokens (no smoothing), their count, and the pairs."""
        was_training = model.training
        model.eval()
        loss_sum, tokens, pairs = 0.0, 0, 0
        for batch in tqdm(batches, desc="evaluating", unit="batch", leave=False,
                          disable=True if self.progress is False else None):
            batch = batch.rows(rows.start or 0, rows.stop if rows.stop is not None else len(batch.source))
            if not len(batch.source):
                continue
            batch = batch.to(device)
            loss, count = token_losses(model(batch.source, batch.source_lengths, batch.target_in), batch)
            loss_sum, tokens, pairs = loss_sum + float(loss), tokens + count, pairs + len(batch.source)
        model.train(was_training)
        return {"loss_sum": loss_sum, "tokens": tokens, "pairs": pairs}

    def summarize(self, stats: dict) -> dict:
        tokens = int(stats["tokens"])
        loss = stats["loss_sum"] / max(tokens, 1)
        return {"loss": loss, "perplexity": math.exp(min(loss, 50)), "tokens": tokens, "pairs": int(stats["pairs"])}

    def progress_fields(self, loss: float) -> dict:
        return {"loss": f"{loss:.3f}"}

    def describe(self, record: dict) -> str:
        where_ = f"step {record['step']}" + (f" (epoch {record['epoch']})" if "epoch" in record else "")
        return (f"{where_} {record['split']}: loss {record['loss']:.4f}, perplexity {record['perplexity']:.2f} "
                f"over {record['tokens']:,} target tokens ({record['pairs']:,} pairs)")
