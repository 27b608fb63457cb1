"""Sequence labelling for the trainer: sentences -> padded batches, the loss as (sum, count), and the
figures (token accuracy; entity precision / recall / F1 when the tags are IOB-style).

The loss is the cross-entropy of each token's gold tag under its softmax (SLP 13.3.1), or with a CRF
the negative log-likelihood of the whole gold sequence (summed over sentences; counted per token, so
the printed loss is per token either way). A gold tag that training never saw (possible in
validation or test files) cannot be scored by the loss and is left out of it, but it counts as an
error in accuracy and F1: no prediction can equal it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm.auto import tqdm

from seqlab.data import batching
from seqlab.data.conll import Sentence
from seqlab.data.tags import is_entity_tagset, split_tag
from seqlab.data.vocab import PAD, UNK, Vocab
from seqlab.metrics import PRF, span_scores

UNKNOWN_LABEL = -1


@dataclass
class TagBatch:
    """B right-padded sentences: words (B, T), lengths (B,), tags (B, T) (-1: padding or a tag
    training never saw), chars (B, T, C) or None, and the gold tag strings."""

    words: Tensor
    lengths: Tensor
    tags: Tensor
    chars: Tensor | None
    gold: list[list[str]]

    def rows(self, start: int, stop: int) -> TagBatch:
        chars = self.chars[start:stop] if self.chars is not None else None
        return TagBatch(self.words[start:stop], self.lengths[start:stop], self.tags[start:stop], chars,
                        self.gold[start:stop])

    def to(self, device) -> TagBatch:
        chars = self.chars.to(device) if self.chars is not None else None
        return TagBatch(self.words.to(device), self.lengths.to(device), self.tags.to(device), chars, self.gold)

    @property
    def mask(self) -> Tensor:
        return torch.arange(self.words.size(1), device=self.words.device)[None, :] < self.lengths[:, None]

    @property
    def num_tokens(self) -> int:
        return int(self.lengths.sum())


@dataclass
class Encoded:
    """One sentence as ids: words (n,), tags (n,), chars (n, C) or None, and its gold tag strings."""

    words: Tensor
    tags: Tensor
    chars: Tensor | None
    gold: list[str]


class TaggerVocabulary:
    """Words, characters and tags -> ids, with vocabularies from the training sentences only."""

    def __init__(self, words: Vocab, labels: list[str], chars: Vocab | None = None, max_word_chars: int = 20,
                 lowercase_fallback: bool = False):
        """`lowercase_fallback`: a word not in the vocabulary reads as its lowercase form when that is
        (set with pretrained vectors, whose files are often lowercased)."""
        self.words, self.labels, self.chars, self.max_word_chars = words, labels, chars, max_word_chars
        self.lowercase_fallback = lowercase_fallback
        self.label_index = {label: i for i, label in enumerate(labels)}

    @classmethod
    def build(cls, sentences: list[Sentence], min_freq: int = 1, max_size: int | None = None,
              char_features: bool = False) -> TaggerVocabulary:
        words = Vocab.build(Counter(t for s in sentences for t in s.tokens), min_freq, max_size)
        labels = sorted({label for s in sentences for label in s.labels})
        chars = Vocab.build(Counter(c for s in sentences for t in s.tokens for c in t)) if char_features else None
        return cls(words, labels, chars)

    @property
    def entity_tags(self) -> bool:
        return is_entity_tagset(self.labels)

    def word_ids(self, tokens: list[str]) -> list[int]:
        if not self.lowercase_fallback:
            return self.words.encode(tokens)
        index = self.words.index
        return [index[t] if t in index else index.get(t.lower(), UNK) for t in tokens]

    def encode(self, sentence: Sentence) -> Encoded:
        """One sentence as ids, once: training re-batches the same encodings every epoch."""
        chars = None
        if self.chars is not None:
            C = min(self.max_word_chars, max((len(t) for t in sentence.tokens), default=1))
            index = self.chars.index
            spelled = [[index.get(c, UNK) for c in token[:C]] for token in sentence.tokens]
            chars = torch.tensor([ids + [PAD] * (C - len(ids)) for ids in spelled],
                                 dtype=torch.long).reshape(len(sentence), C)        # (n, C)
        return Encoded(torch.tensor(self.word_ids(sentence.tokens), dtype=torch.long),
                       torch.tensor([self.label_index.get(label, UNKNOWN_LABEL) for label in sentence.labels],
                                    dtype=torch.long), chars, sentence.labels)

    def collate(self, items: list[Encoded]) -> TagBatch:
        """Encoded sentences -> one right-padded batch."""
        B, T = len(items), max(len(item.words) for item in items)
        words = torch.full((B, T), PAD, dtype=torch.long)
        tags = torch.full((B, T), UNKNOWN_LABEL, dtype=torch.long)
        chars = None
        if self.chars is not None:
            chars = torch.full((B, T, max(item.chars.size(1) for item in items)), PAD, dtype=torch.long)
        for b, item in enumerate(items):
            n = len(item.words)
            words[b, :n], tags[b, :n] = item.words, item.tags
            if chars is not None:
                chars[b, :n, :item.chars.size(1)] = item.chars
        lengths = torch.tensor([len(item.words) for item in items])
        return TagBatch(words, lengths, tags, chars, [item.gold for item in items])

    def batch(self, sentences: list[Sentence]) -> TagBatch:
        return self.collate([self.encode(s) for s in sentences])


def length_batches(items: list[Encoded], vocabulary: TaggerVocabulary, batch_size: int,
                   seed: int | None) -> list[TagBatch]:
    """Batches of sentences of similar length (`seqlab.data.batching.length_batches`): shuffled with a
    seed (training), every sentence shortest first without (evaluation)."""
    groups = batching.length_batches([len(item.words) for item in items], batch_size, seed)
    return [vocabulary.collate([items[i] for i in group]) for group in groups]


def best_tags(model, scores: Tensor, mask: Tensor) -> Tensor:
    """The best tag ids (B, T) for emission scores (B, T, K): Viterbi through the CRF, or each argmax."""
    if model.crf is not None:
        return model.crf.decode(scores.float(), mask)
    return scores.argmax(-1)


class TaggingTask:
    """Sequence labelling for the trainer (the `seqlab.tasks.base.Task` contract)."""

    name = "tagger"
    lower_is_better = False
    batch_unit = "sentences"
    keep_predictions = False        # evaluate() then leaves (gold, predicted) tag lists in self.predictions
    progress: bool | None = False   # a bar over evaluation batches (None: when stderr is a terminal)

    def __init__(self, vocabulary: TaggerVocabulary, train: list[Sentence], valid: list[Sentence],
                 test: list[Sentence] | None, batch_size: int, eval_batch_size: int, seed: int,
                 unk_replace: float = 0.0):
        self.vocabulary, self.batch_size, self.seed = vocabulary, batch_size, seed
        self.unk_replace = unk_replace
        counts = Counter(token for sentence in train for token in sentence.tokens)
        self.singletons = torch.tensor(vocabulary.words.encode(sorted(w for w, n in counts.items() if n == 1)),
                                       dtype=torch.long)
        self.entity_tags = vocabulary.entity_tags
        self.metric = "f1" if self.entity_tags else "accuracy"
        self.types = sorted({split_tag(label)[1] for label in vocabulary.labels} - {""}) if self.entity_tags else []
        self.encoded_train = [vocabulary.encode(s) for s in train]
        self.valid_data = length_batches([vocabulary.encode(s) for s in valid], vocabulary, eval_batch_size, None)
        self.test_data = length_batches([vocabulary.encode(s) for s in test], vocabulary, eval_batch_size, None) \
            if test else None
        self._epoch_batches: tuple[int, list[TagBatch]] | None = None

    def train_batches(self, epoch: int) -> list[TagBatch]:
        if self._epoch_batches is None or self._epoch_batches[0] != epoch:
            batches = length_batches(self.encoded_train, self.vocabulary, self.batch_size,
                                     self.seed * 1_000_003 + epoch)
            if self.unk_replace > 0 and len(self.singletons):
                # words seen once in training read as <unk> now and then, so that <unk> (every unseen
                # word at test time) gets a trained embedding; the choice depends on seed and epoch only
                generator = torch.Generator().manual_seed(self.seed * 7919 + epoch)
                for batch in batches:
                    chosen = torch.rand(batch.words.shape, generator=generator) < self.unk_replace
                    batch.words = batch.words.masked_fill(chosen & torch.isin(batch.words, self.singletons), UNK)
            self._epoch_batches = (epoch, batches)
        return self._epoch_batches[1]

    def initial_state(self, model, rows: int, device):
        return None

    @staticmethod
    def count(batch: TagBatch) -> int:
        """The tokens whose gold tag the model knows (in training data: every token)."""
        return int((batch.tags != UNKNOWN_LABEL).sum())

    def loss(self, model, batch: TagBatch, state):
        scores = model(batch.words, batch.lengths, batch.chars)              # (B, T, K)
        loss_sum, count = token_losses(model, scores, batch)
        return loss_sum, count, None

    @torch.no_grad()
    def evaluate(self, model, batches: list[TagBatch], device, rows: slice = slice(None)) -> dict:
        """Summable counts: loss, tokens, tokens right, and entity spans (overall and per type)."""
        was_training = model.training
        model.eval()
        stats = {"loss_sum": 0.0, "tokens": 0, "correct": 0}
        golds, predictions = [], []
        for batch in tqdm(batches, desc="evaluating", unit="batch", leave=False,
                          disable=True if self.progress is False else None):
            batch = batch.rows(rows.start or 0, rows.stop if rows.stop is not None else len(batch.gold))
            if not batch.gold:
                continue
            batch = batch.to(device)
            scores = model(batch.words, batch.lengths, batch.chars)
            loss_sum, _ = token_losses(model, scores, batch)
            stats["loss_sum"] += float(loss_sum)
            stats["tokens"] += batch.num_tokens
            for gold, ids in zip(batch.gold, best_tags(model, scores, batch.mask).tolist(), strict=True):
                predicted = [self.vocabulary.labels[i] for i in ids[:len(gold)]]
                stats["correct"] += sum(g == p for g, p in zip(gold, predicted, strict=True))
                golds.append(gold)
                predictions.append(predicted)
        model.train(was_training)
        if self.keep_predictions:
            self.predictions = (golds, predictions)
        if self.entity_tags:            # the same keys in every process (the training types), for all_reduce
            scores = span_scores(golds, predictions)
            for suffix, part in [("", scores.overall), *((f"/{k}", scores.by_type.get(k, PRF())) for k in self.types)]:
                for what in ("correct", "predicted", "gold"):
                    stats[f"spans_{what}{suffix}"] = getattr(part, what)
        return stats

    def summarize(self, stats: dict) -> dict:
        tokens = int(stats["tokens"])
        result = {"tokens": tokens, "loss": stats["loss_sum"] / max(tokens, 1),
                  "accuracy": 100.0 * stats["correct"] / max(tokens, 1)}
        if self.entity_tags:
            result.update(span_figures(stats, ""))
            result["by_type"] = {kind: span_figures(stats, "/" + kind) for kind in self.types}
        return result

    def progress_fields(self, loss: float) -> dict:
        return {"loss": f"{loss:.3f}"}

    def describe(self, record: dict) -> str:
        where = f"step {record['step']}" + (f" (epoch {record['epoch']})" if "epoch" in record else "")
        figures = f"accuracy {record['accuracy']:.2f}%"
        if "f1" in record:
            figures = (f"entity F1 {record['f1']:.2f} (precision {record['precision']:.2f}, recall "
                       f"{record['recall']:.2f}), token {figures}")
        return f"{where} {record['split']}: {figures}, loss {record['loss']:.4f} over {record['tokens']:,} tokens"


def token_losses(model, scores: Tensor, batch: TagBatch) -> tuple[Tensor, Tensor]:
    """Summed loss over the batch's tokens, and its count: the tokens with a known gold tag
    (`TaggingTask.count`). With a CRF the loss is each whole sentence's negative log-likelihood, where an
    unseen gold tag (possible only outside training data) is scored as tag 0 (documented)."""
    known = batch.tags != UNKNOWN_LABEL                                       # (B, T); padding too
    if scores.dtype not in (torch.float32, torch.float64):
        scores = scores.float()
    if model.crf is not None:
        tags = batch.tags.clamp(min=0)
        return model.crf.nll(scores, tags, batch.mask).sum(), known.sum()
    loss_sum = F.cross_entropy(scores[known], batch.tags[known], reduction="sum")
    return loss_sum, known.sum()


def span_figures(stats: dict, suffix: str) -> dict:
    """Precision, recall and F1 (percent) with their counts, from the summed span counts."""
    return PRF(*(int(stats[f"spans_{w}{suffix}"]) for w in ("correct", "predicted", "gold"))).as_dict()
