"""Sequence classification for the trainer: documents -> padded batches, the loss as (sum, count),
and the figures (accuracy, per-class precision / recall / F1, macro-F1, the confusion matrix).

The loss is the cross-entropy of each document's gold class under the softmax (SLP eq. 6.27), or with
one sigmoid unit for two classes the binary cross-entropy (eq. 6.25), summed over documents and
optionally weighted per class (imbalanced data); the trainer divides once by the document count.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import repeat

import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm.auto import tqdm

from seqlab.data.batching import length_batches
from seqlab.data.documents import Document
from seqlab.data.text_features import FeatureExtractor, tokenize, with_ngrams
from seqlab.data.vocab import PAD, UNK, Vocab
from seqlab.errors import SeqlabError, where
from seqlab.metrics import classification_scores


@dataclass
class DocBatch:
    """B right-padded documents: words (B, T) and lengths (B,) (None for the features classifier),
    features (B, F) or None, labels (B,) (-1: none)."""

    words: Tensor | None
    lengths: Tensor | None
    features: Tensor | None
    labels: Tensor

    def rows(self, start: int, stop: int) -> DocBatch:
        def cut(t):
            return None if t is None else t[start:stop]
        return DocBatch(cut(self.words), cut(self.lengths), cut(self.features), self.labels[start:stop])

    def to(self, device) -> DocBatch:
        def move(t):
            return None if t is None else t.to(device)
        return DocBatch(move(self.words), move(self.lengths), move(self.features), self.labels.to(device))

    @property
    def num_tokens(self) -> int:
        """What the loss is averaged over: documents."""
        return len(self.labels)


@dataclass
class EncodedDoc:
    words: Tensor | None          # (n,)
    features: list[float] | None
    label: int


@dataclass
class Truncation:
    """How many documents were longer than the maximum length, and were cut."""

    documents: int = 0
    truncated: int = 0
    longest: int = 0

    def report(self, what: str, max_length: int, keep: str) -> str | None:
        if not self.truncated:
            return None
        return (f"{what}: {self.truncated:,} of {self.documents:,} documents ({self.truncated / self.documents:.1%}) "
                f"are longer than --max-length {max_length} tokens (the longest: {self.longest:,}) and were "
                f"truncated to their {'first' if keep == 'head' else 'last'} {max_length}")


class DocumentVocabulary:
    """Texts -> token ids (or feature vectors) and labels -> class ids; vocabulary, labels, lexicon
    and feature statistics come from the training documents only."""

    def __init__(self, words: Vocab | None, labels: list[str], tokenizer: str = "words", lowercase: bool = True,
                 ngrams: int = 1, max_length: int = 0, truncate: str = "head",
                 features: FeatureExtractor | None = None, lowercase_fallback: bool = False):
        self.words, self.labels, self.tokenizer, self.lowercase = words, labels, tokenizer, lowercase
        self.ngrams, self.max_length, self.truncate, self.features = ngrams, max_length, truncate, features
        self.lowercase_fallback = lowercase_fallback
        self.label_index = {label: i for i, label in enumerate(labels)}

    def tokens(self, text: str) -> list[str]:
        return tokenize(text, self.tokenizer, self.lowercase)

    def cut(self, tokens: list[str], counter: Truncation | None = None) -> list[str]:
        """The first (or last) max_length tokens, counting what was truncated."""
        if counter is not None:
            counter.documents += 1
        if self.max_length and len(tokens) > self.max_length:
            if counter is not None:
                counter.truncated += 1
                counter.longest = max(counter.longest, len(tokens))
            return tokens[:self.max_length] if self.truncate == "head" else tokens[-self.max_length:]
        return tokens

    def word_ids(self, tokens: list[str]) -> list[int]:
        index = self.words.index
        if self.lowercase_fallback:
            ids = [index[t] if t in index else index.get(t.lower(), UNK) for t in tokens]
        else:
            ids = list(map(index.get, tokens, repeat(UNK)))      # a third faster than a comprehension
        return ids or [UNK]                                # a document of no tokens reads as one <unk>

    def label_id(self, document: Document, path, what: str) -> int:
        if document.label is None:
            return -1
        if document.label not in self.label_index:
            raise SeqlabError(f"{what} {where(path, document.line)}: label {document.label!r} never occurs in the "
                              f"training data; the classifier knows {', '.join(map(repr, self.labels))}")
        return self.label_index[document.label]

    def encode_all(self, documents: list[Document], path="", what: str = "file", counter: Truncation | None = None,
                   token_lists: list[list[str]] | None = None) -> list[EncodedDoc]:
        """The documents as ids (and features); `token_lists`: their tokens, when already at hand."""
        encoded = []
        for i, document in enumerate(documents):
            tokens = self.cut(token_lists[i] if token_lists is not None else self.tokens(document.text), counter)
            words = features = None
            if self.words is not None:
                grams = with_ngrams(tokens, self.ngrams) if self.ngrams > 1 else tokens
                words = torch.tensor(self.word_ids(grams), dtype=torch.long)
            if self.features is not None:
                features = self.features.raw(tokens, document.features)
            encoded.append(EncodedDoc(words, features, self.label_id(document, path, what)))
        return encoded

    def collate(self, items: list[EncodedDoc]) -> DocBatch:
        words = lengths = features = None
        if self.words is not None:
            lengths = torch.tensor([len(item.words) for item in items])
            words = torch.full((len(items), int(lengths.max())), PAD, dtype=torch.long)   # (B, T)
            for b, item in enumerate(items):
                words[b, :len(item.words)] = item.words
        if self.features is not None:
            features = self.features([item.features for item in items])                  # (B, F)
        return DocBatch(words, lengths, features, torch.tensor([item.label for item in items]))


def document_batches(items: list[EncodedDoc], vocabulary: DocumentVocabulary, batch_size: int,
                     seed: int | None) -> list[DocBatch]:
    """Batches of documents of similar length (`seqlab.data.batching.length_batches`): shuffled with a
    seed (training), every document shortest first without (evaluation)."""
    groups = length_batches(document_lengths(items), batch_size, seed)
    return [vocabulary.collate([items[i] for i in group]) for group in groups]


def document_lengths(items: list[EncodedDoc]) -> list[int]:
    """Tokens per document (all 0 for the features classifier, whose batches are never padded)."""
    return [0 if item.words is None else len(item.words) for item in items]


def class_weights(spec: str, labels: list[str], counts: Counter) -> Tensor | None:
    """none; balanced (n / (K n_c), as scikit-learn); or "label=weight,..." (unnamed classes weigh 1)."""
    if spec in ("", "none"):
        return None
    if spec == "balanced":
        total = sum(counts.values())
        return torch.tensor([total / (len(labels) * counts[label]) for label in labels])
    weights = {label: 1.0 for label in labels}
    for part in spec.split(","):
        name, _, value = part.partition("=")
        if name.strip() not in weights:
            raise SeqlabError(f"--class-weights: {name.strip()!r} is not a class of the training data "
                              f"({', '.join(labels)})")
        try:
            weights[name.strip()] = float(value)
        except ValueError:
            raise SeqlabError(f"--class-weights: expected none, balanced or label=weight,..., got {spec!r}") from None
    return torch.tensor([weights[label] for label in labels])


def document_losses(model, scores: Tensor, labels: Tensor, weights: Tensor | None) -> Tensor:
    """Summed loss over the documents of a batch: cross-entropy over the softmax (eq. 6.27), or binary
    cross-entropy over one sigmoid unit (eq. 6.25: -[y log s(z) + (1-y) log(1-s(z))])."""
    scores = scores.float()
    weights = None if weights is None else weights.to(scores.device)
    if model.config.output_layer == "sigmoid":
        target = labels.float()
        per_document = F.binary_cross_entropy_with_logits(scores[:, 0], target, reduction="none")   # (B,)
        if weights is not None:
            per_document = per_document * weights[labels]
        return per_document.sum()
    return F.cross_entropy(scores, labels, weight=weights, reduction="sum")


def probabilities(model, scores: Tensor) -> Tensor:
    """Class probabilities (B, K) from the scores: softmax, or [1 - s(z), s(z)] for one sigmoid unit."""
    scores = scores.float()
    if model.config.output_layer == "sigmoid":
        p = torch.sigmoid(scores[:, 0])                                 # (B,)
        return torch.stack([1 - p, p], dim=1)                          # (B, 2)
    return torch.softmax(scores, dim=-1)


class ClassificationTask:
    """Sequence classification for the trainer (the `seqlab.tasks.base.Task` contract)."""

    name = "classifier"
    lower_is_better = False
    batch_unit = "documents"
    progress: bool | None = False      # a bar over evaluation batches (None: when stderr is a terminal)

    def __init__(self, vocabulary: DocumentVocabulary, train: list[EncodedDoc], valid: list[EncodedDoc],
                 test: list[EncodedDoc] | None, batch_size: int, eval_batch_size: int, seed: int,
                 weights: Tensor | None = None, metric: str = "accuracy"):
        self.vocabulary, self.batch_size, self.seed, self.weights = vocabulary, batch_size, seed, weights
        self.metric = metric
        self.encoded_train = train
        self.valid_data = document_batches(valid, vocabulary, eval_batch_size, None)
        self.test_data = document_batches(test, vocabulary, eval_batch_size, None) if test else None
        self._epoch_batches: tuple[int, list[DocBatch]] | None = None

    def train_batches(self, epoch: int) -> list[DocBatch]:
        if self._epoch_batches is None or self._epoch_batches[0] != epoch:
            batches = document_batches(self.encoded_train, self.vocabulary, self.batch_size,
                                       self.seed * 1_000_003 + epoch)
            self._epoch_batches = (epoch, batches)
        return self._epoch_batches[1]

    def initial_state(self, model, rows: int, device):
        return None

    @staticmethod
    def count(batch: DocBatch) -> int:
        """The loss is summed over documents."""
        return len(batch.labels)

    def loss(self, model, batch: DocBatch, state):
        scores = model(batch.words, batch.lengths, batch.features)     # (B, K)
        return document_losses(model, scores, batch.labels, self.weights), len(batch.labels), None

    @torch.no_grad()
    def evaluate(self, model, batches: list[DocBatch], device, rows: slice = slice(None)) -> dict:
        """Summable counts: the loss, documents, and the confusion matrix (gold i predicted as j)."""
        was_training = model.training
        model.eval()
        K = len(self.vocabulary.labels)
        confusion = torch.zeros(K, K, dtype=torch.long)
        loss_sum, documents = 0.0, 0
        for batch in tqdm(batches, desc="evaluating", unit="batch", leave=False,
                          disable=True if self.progress is False else None):
            batch = batch.rows(rows.start or 0, rows.stop if rows.stop is not None else len(batch.labels))
            if not len(batch.labels):
                continue
            batch = batch.to(device)
            scores = model(batch.words, batch.lengths, batch.features)
            known = batch.labels >= 0
            if known.any():
                loss_sum += float(document_losses(model, scores[known], batch.labels[known], self.weights))
            predicted = probabilities(model, scores).argmax(-1)                 # (B,); sigmoid: p > 0.5
            gold, predicted = batch.labels[known].cpu(), predicted[known].cpu()
            confusion.index_put_((gold, predicted), torch.ones_like(gold), accumulate=True)
            documents += int(known.sum())
        model.train(was_training)
        stats = {"loss_sum": loss_sum, "documents": documents}
        for i in range(K):
            for j in range(K):
                stats[f"confusion/{i}/{j}"] = int(confusion[i, j])
        return stats

    def summarize(self, stats: dict) -> dict:
        labels = self.vocabulary.labels
        K = len(labels)
        matrix = [[int(stats[f"confusion/{i}/{j}"]) for j in range(K)] for i in range(K)]
        documents = int(stats["documents"])
        return {"documents": documents, "loss": stats["loss_sum"] / max(documents, 1),
                **classification_scores(matrix, labels)}

    def progress_fields(self, loss: float) -> dict:
        return {"loss": f"{loss:.3f}"}

    def describe(self, record: dict) -> str:
        where_ = f"step {record['step']}" + (f" (epoch {record['epoch']})" if "epoch" in record else "")
        return (f"{where_} {record['split']}: accuracy {record['accuracy']:.2f}%, macro-F1 {record['macro_f1']:.2f}, "
                f"loss {record['loss']:.4f} over {record['documents']:,} documents")
