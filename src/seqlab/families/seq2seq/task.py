"""Sequence to sequence for the trainer: pairs -> padded batches, the loss as (sum, count), perplexity.

Encoder-decoders read the source and are trained with teacher forcing (SLP 13.7.1): the decoder
reads <s> y_1 .. y_m and is scored on y_1 .. y_m </s>. The language model (SLP 9.4.1) reads one
sequence x = source <sep> target and is scored on the target and </s> after the separator (or, with
lm_loss "all", on every next token). The loss is the cross-entropy summed over scored tokens; the
trainer divides once by their count. Perplexity is exp of the mean loss per target token (</s>
included), the same tokens for every architecture. Training takes the loss through the decoder's output
layer, plain or fused (`seqlab.training.output_loss`: the same sum, without the (B, T, V) logits);
evaluation through the logits.

A copy model (See et al. 2017) gives log P(w) over the extended vocabulary in place of logits and is scored
on the extended targets (`PairBatch.target_copy_out`): its loss is -log P(w*_t) (eq. 6 over eq. 9's P).
With coverage, training adds λ Σ_i min(a_i^t, c_i^t) per scored target position (eqs. 12-13,
λ = `coverage_weight`); evaluation reports the cross-entropy alone.

Evaluation also decodes the first pairs of a split greedily (--eval-decode N: `EvalSplit.decode`) and scores
them against their references (BLEU, chrF, ROUGE: `seqlab.families.seq2seq.task_metric`), from summable
statistics like the loss. The loss alone picks the best weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

from seqlab.data.batching import length_batches
from seqlab.data.vocab import PAD
from seqlab.decoding.search import SearchOptions
from seqlab.families.seq2seq import task_metric
from seqlab.families.seq2seq.outputs import decode_pairs
from seqlab.families.seq2seq.prepared_pairs import PreparedPairs
from seqlab.families.seq2seq.vocab import EncodedPair, LengthReport, PairBatch, PairVocabulary  # noqa: F401  (re-exported)
from seqlab.progress import progress_bar
from seqlab.training.output_loss import choose_fused_output, fused_token_loss, output_layer


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


def decoder_positions(item: EncodedPair, joint: bool) -> int:
    """The positions the decoder reads for a pair: <s> and the target, or for the lm (joint) the source,
    <sep> and the target."""
    target = len(item.target or ())
    return len(item.source) + 1 + target if joint else 1 + target


def copy_losses(log_probs: Tensor, batch: PairBatch, label_smoothing: float = 0.0, vocab_size: int = 0):
    """(summed -log P(w*_t), scored tokens) of a copy model's log-probabilities (B, T, V + n) over its
    extended targets (See et al. eq. 6). Label smoothing spreads ε over the V words of the vocabulary."""
    targets = batch.target_copy_out                                              # (B, T)
    scored = targets != PAD
    log_p = log_probs.float()
    nll = -log_p.gather(-1, targets[..., None]).squeeze(-1)                      # (B, T)
    if label_smoothing:
        nll = (1 - label_smoothing) * nll - label_smoothing * log_p[..., :vocab_size or None].mean(-1)
    return nll[scored].sum(), int(scored.sum())


def coverage_losses(weights: Tensor, coverage: Tensor, targets: Tensor) -> Tensor:
    """See et al. eq. 12 summed over the scored positions: Σ_t Σ_i min(a_i^t, c_i^t); weights, coverage
    (B, T, S), targets (B, T) (<pad>: not scored)."""
    return torch.minimum(weights, coverage).float().sum(-1)[targets != PAD].sum()


def token_losses(logits: Tensor, batch: PairBatch, label_smoothing: float = 0.0, all_tokens: bool = False):
    """(summed cross-entropy, scored tokens) of a batch's targets (and, for the lm with all_tokens, of
    its next source tokens too)."""
    if batch.source_copy is not None:                 # a copy model's log P(w) over the extended vocabulary
        return copy_losses(logits, batch, label_smoothing)
    V = logits.size(-1)
    flat = logits.float().reshape(-1, V)
    targets = scored_targets(batch, all_tokens)
    loss = F.cross_entropy(flat, targets.reshape(-1), ignore_index=PAD, reduction="sum",
                           label_smoothing=label_smoothing)
    return loss, int((targets != PAD).sum())


@dataclass
class EvalSplit:
    """A split as evaluation reads it: its batches (the loss, over every pair), and the pairs decoded greedily
    for the task's figures (its first --eval-decode pairs) with their reference texts."""

    batches: list[PairBatch]
    decode: list[EncodedPair] = field(default_factory=list)
    references: list[str] = field(default_factory=list)

    def __len__(self) -> int:                   # read as the list of its batches, as before it held more
        return len(self.batches)

    def __getitem__(self, k: int) -> PairBatch:
        return self.batches[k]

    def __iter__(self):
        return iter(self.batches)


class Seq2SeqTask:
    """Sequence to sequence for the trainer (the `seqlab.training.task.Task` contract)."""

    name = "seq2seq"
    unit = "token"                        # what `count` counts
    metric = "loss"
    batch_unit = "pairs"
    progress: bool | None = False

    def __init__(self, vocabulary: PairVocabulary, train: PreparedPairs | list[EncodedPair], valid: list[EncodedPair],
                 test: list[EncodedPair] | None, batch_size: int, eval_batch_size: int, seed: int,
                 label_smoothing: float = 0.0, lm_all_tokens: bool = False, fused_output: str = "auto",
                 coverage_weight: float = 0.0, valid_references: list[str] | None = None,
                 test_references: list[str] | None = None):
        """`valid_references` / `test_references`: the reference texts of the first pairs of each split, which
        every evaluation decodes greedily and scores (none: the loss alone)."""
        self.vocabulary, self.batch_size, self.seed = vocabulary, batch_size, seed
        self.eval_batch_size = eval_batch_size
        self.label_smoothing, self.lm_all_tokens = label_smoothing, lm_all_tokens
        self.coverage_weight = coverage_weight          # λ of See et al. eq. 13 (0: no coverage loss)
        self.encoded_train = train              # prepared pairs read by position (training), or a list in memory
        # the loss's path, once for the run: a training batch is about batch_size x the mean decoder length rows
        mean_length = train.mean_positions() if isinstance(train, PreparedPairs) else \
            sum(decoder_positions(item, vocabulary.joint) for item in train) / max(len(train), 1)
        self.fused_output, self.output_note = choose_fused_output(
            fused_output, round(batch_size * mean_length), len(vocabulary.target_vocab))
        if vocabulary.copy or coverage_weight:        # eq. 9's mixture / eq. 12's attention need the full pass
            self.fused_output = False
            self.output_note = "output layer: plain (copy attention and coverage read the whole decoder pass)"
        self.valid_data = eval_split(valid, vocabulary, eval_batch_size, valid_references or [])
        self.test_data = eval_split(test, vocabulary, eval_batch_size, test_references or []) if test else None
        self._epoch_batches: tuple[int, list[PairBatch]] | None = None

    def train_batches(self, epoch: int):
        if self._epoch_batches is None or self._epoch_batches[0] != epoch:
            seed = self.seed * 1_000_003 + epoch
            train = self.encoded_train
            batches = train.batches(self.batch_size, seed) if isinstance(train, PreparedPairs) else \
                pair_batches(train, self.vocabulary, self.batch_size, seed)
            self._epoch_batches = (epoch, batches)
        return self._epoch_batches[1]

    def initial_state(self, model, rows: int, device):
        return None

    def count(self, batch: PairBatch) -> int:
        """The scored tokens: the targets and </s>, and with the lm's loss "all" the source tokens and
        <sep> too."""
        return int((scored_targets(batch, self.lm_all_tokens) != PAD).sum())

    def loss(self, model, batch: PairBatch, state):
        if batch.source_copy is not None or self.coverage_weight:
            return self.copy_coverage_loss(model, batch)
        if self.fused_output:
            hidden = model(batch.source, batch.source_lengths, batch.target_in, output="hidden")   # (B, T, D)
            targets = scored_targets(batch, self.lm_all_tokens)                                   # (B, T)
            loss, count = fused_token_loss(output_layer(model), hidden, targets, self.label_smoothing)
            return loss, int(count), None
        logits = model(batch.source, batch.source_lengths, batch.target_in)          # (B, T, V)
        loss, count = token_losses(logits, batch, self.label_smoothing, self.lm_all_tokens)
        return loss, count, None

    def copy_coverage_loss(self, model, batch: PairBatch):
        """See et al. eq. 13: -log P(w*_t) + λ Σ_i min(a_i^t, c_i^t), summed over the scored positions."""
        scores, weights, coverage = model(batch.source, batch.source_lengths, batch.target_in,
                                          source_copy=batch.source_copy, attention=True)   # (B, T, V[+n]), (B, T, S) x2
        if batch.source_copy is not None:
            loss, count = copy_losses(scores, batch, self.label_smoothing, len(self.vocabulary.target_vocab))
        else:
            loss, count = token_losses(scores, batch, self.label_smoothing)
        if self.coverage_weight:
            loss = loss + self.coverage_weight * coverage_losses(weights, coverage, batch.target_out)
        return loss, count, None

    @torch.no_grad()
    def evaluate(self, model, data: EvalSplit | list[PairBatch], device, rows: slice = slice(None)) -> dict:
        """Summable: the cross-entropy of the target tokens (no smoothing), their count, and the pairs; with
        pairs to decode, the statistics of their greedy outputs (`task_metric.statistics`)."""
        split = data if isinstance(data, EvalSplit) else EvalSplit(data)
        was_training = model.training
        model.eval()
        loss_sum, tokens, pairs = 0.0, 0, 0
        for batch in progress_bar(split.batches, self.progress, desc="evaluating", unit="batch", leave=False):
            batch = batch.rows(rows.start or 0, rows.stop if rows.stop is not None else len(batch.source))
            if not len(batch.source):
                continue
            batch = batch.to(device)
            extra = {} if batch.source_copy is None else {"source_copy": batch.source_copy}
            loss, count = token_losses(model(batch.source, batch.source_lengths, batch.target_in, **extra), batch)
            loss_sum, tokens, pairs = loss_sum + float(loss), tokens + count, pairs + len(batch.source)
        stats = {"loss_sum": loss_sum, "tokens": tokens, "pairs": pairs}
        if split.decode:
            stats.update(self.decode_statistics(model, split, device, rows))
        model.train(was_training)
        return stats

    def decode_statistics(self, model, split: EvalSplit, device, rows: slice) -> dict:
        """The greedy outputs of the split's pairs to decode (this process's rows of each evaluation batch of
        them), by the family's translate path, as summable statistics against their references."""
        size = self.eval_batch_size
        mine = [k for start in range(0, len(split.decode), size)
                for k in range(start, min(start + size, len(split.decode)))[rows]]
        outputs = decode_pairs(model, self.vocabulary, [split.decode[k] for k in mine], SearchOptions(beam=1), size,
                               device)
        return task_metric.statistics([output.text for output in outputs], [split.references[k] for k in mine])

    def summarize(self, stats: dict) -> dict:
        tokens = int(stats["tokens"])
        loss = stats["loss_sum"] / max(tokens, 1)
        return {"loss": loss, "perplexity": math.exp(min(loss, 50)), "tokens": tokens, "pairs": int(stats["pairs"]),
                **task_metric.figures(stats)}

    def progress_fields(self, loss: float) -> dict:
        return {"loss": f"{loss:.3f}"}

    def describe(self, record: dict) -> str:
        where_ = f"step {record['step']}" + (f" (epoch {record['epoch']})" if "epoch" in record else "")
        return (f"{where_} {record['split']}: loss {record['loss']:.4f}, perplexity {record['perplexity']:.2f} "
                f"over {record['tokens']:,} target tokens ({record['pairs']:,} pairs)" + task_metric.describe(record))


def eval_split(items: list[EncodedPair], vocabulary: PairVocabulary, batch_size: int,
               references: list[str]) -> EvalSplit:
    """A development or test split's batches, shortest first, and its first len(references) pairs to decode."""
    return EvalSplit(pair_batches(items, vocabulary, batch_size, None), items[:len(references)], references)
