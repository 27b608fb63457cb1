"""Sequence classification for the trainer: documents -> padded batches, the loss as (sum, count),
and the figures (accuracy, per-class precision / recall / F1, macro-F1, the confusion matrix).

The loss is the cross-entropy of each document's gold class under the softmax (SLP eq. 6.27), or with
one sigmoid unit for two classes the binary cross-entropy (eq. 6.25), summed over documents and
optionally weighted per class (imbalanced data); the trainer divides once by the document count.
"""

from __future__ import annotations

from collections import Counter

import torch
import torch.nn.functional as F
from torch import Tensor

from seqlab.data.batching import RowBatch, length_batches
from seqlab.errors import SeqlabError
from seqlab.families.classifier.vocab import DocBatch, DocumentVocabulary, EncodedDoc, Truncation  # noqa: F401  (re-exported)
from seqlab.metrics import classification_scores
from seqlab.nn.lm_features import LM_FEATURE_DTYPE
from seqlab.progress import progress_bar
from seqlab.training.output_loss import unwrapped


def with_lm_features(model, items: list[EncodedDoc], batch_size: int = 32) -> list[EncodedDoc]:
    """Set each encoded document's contextual string embeddings (n, Fl) from the model's frozen character
    LMs (`model.lm_features`, Akbik et al. 2018), computed once from the tokens it keeps (training reuses
    them every epoch; half precision, as the tagger's); a document of no tokens (read as one <unk>) gets
    zeros. A model without LM features leaves the items as they are."""
    extractor = getattr(model, "lm_features", None)
    if extractor is None:
        return items
    features = extractor.embed([item.tokens for item in items], batch_size)
    for item, vectors in zip(items, features, strict=True):
        padded = torch.zeros(len(item.words), vectors.size(1))                  # (n, Fl)
        padded[:len(vectors)] = vectors
        item.lm, item.tokens = padded.to(LM_FEATURE_DTYPE), None
    return items


def document_batches(items: list[EncodedDoc], vocabulary: DocumentVocabulary, batch_size: int,
                     seed: int | None) -> list[DocBatch]:
    """Batches of documents of similar length (`seqlab.data.batching.length_batches`): shuffled with a
    seed (training), every document shortest first without (evaluation)."""
    groups = length_batches(document_lengths(items), batch_size, seed)
    return [vocabulary.collate([items[i] for i in group]) for group in groups]


class EncodedDocuments:
    """Encoded documents held in memory (evaluation, tests), read by position like `PreparedDocuments`."""

    def __init__(self, items: list[EncodedDoc]):
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def lengths(self) -> list[int]:
        return document_lengths(self.items)

    def read(self, indices: list[int]) -> list[EncodedDoc]:
        return [self.items[i] for i in indices]


class PreparedDocuments:
    """A prepared split's documents (`seqlab.families.classifier.prepare`), read by position when a batch's rows
    are asked for, never held whole: word ids, the features classifier's raw vectors, the class, and the tokens
    from which the model's frozen character LMs give each word its LM features (computed per batch read)."""

    def __init__(self, items, words: bool, features: bool, model=None):
        self.items, self.words, self.model = items, words, model
        self.width = items.split.record.get("num_features", 0) if features else 0
        self.features = items.streams["features"] if self.width else None

    def __len__(self) -> int:
        return len(self.items)

    def lengths(self) -> list[int]:
        """Tokens per document, from the index (all 0 for the features classifier, as `document_lengths`)."""
        return self.items.lengths("words").tolist() if self.words else [0] * len(self.items)

    def read(self, indices: list[int]) -> list[EncodedDoc]:
        import numpy as np

        lm = getattr(self.model, "lm_features", None) is not None
        docs = []
        for i in indices:
            words = features = None
            if self.words:
                words = torch.from_numpy(self.items.column("words", i).astype(np.int64))           # (n,)
            if self.width:
                features = self.features.read(i * self.width, (i + 1) * self.width).tolist()     # (F,)
            label = int(self.items.column("label", i)[0])
            docs.append(EncodedDoc(words, features, label, self.items.texts("tokens", i) if lm else None))
        return with_lm_features(self.model, docs) if lm else docs


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
    if unwrapped(model).config.output_layer == "sigmoid":   # DDP's and compile's wrappers looked behind
        target = labels.float()
        per_document = F.binary_cross_entropy_with_logits(scores[:, 0], target, reduction="none")   # (B,)
        if weights is not None:
            per_document = per_document * weights[labels]
        return per_document.sum()
    return F.cross_entropy(scores, labels, weight=weights, reduction="sum")


def probabilities(model, scores: Tensor) -> Tensor:
    """Class probabilities (B, K) from the scores: softmax, or [1 - s(z), s(z)] for one sigmoid unit."""
    scores = scores.float()
    if unwrapped(model).config.output_layer == "sigmoid":   # DDP's and compile's wrappers looked behind
        p = torch.sigmoid(scores[:, 0])                                 # (B,)
        return torch.stack([1 - p, p], dim=1)                          # (B, 2)
    return torch.softmax(scores, dim=-1)


class ClassificationTask:
    """Sequence classification for the trainer (the `seqlab.training.task.Task` contract)."""

    name = "classifier"
    unit = "document"                        # what `count` counts
    batch_unit = "documents"
    keep_predictions = False        # evaluate() then leaves (gold, predicted) class indices in self.predictions
    progress: bool | None = False      # a bar over evaluation batches (None: when stderr is a terminal)

    def __init__(self, vocabulary: DocumentVocabulary, train: list[EncodedDoc] | PreparedDocuments,
                 valid: list[EncodedDoc], test: list[EncodedDoc] | None, batch_size: int, eval_batch_size: int,
                 seed: int, weights: Tensor | None = None, metric: str = "accuracy"):
        self.vocabulary, self.batch_size, self.seed, self.weights = vocabulary, batch_size, seed, weights
        self.metric = metric
        self.train = EncodedDocuments(train) if isinstance(train, list) else train
        self.train_lengths = self.train.lengths()
        self.valid_data = document_batches(valid, vocabulary, eval_batch_size, None)
        self.test_data = document_batches(test, vocabulary, eval_batch_size, None) if test else None
        self._epoch_batches: tuple[int, list[RowBatch]] | None = None

    def train_batches(self, epoch: int) -> list[RowBatch]:
        """The epoch's batches of documents of similar length (`document_batches`' grouping, seeded by the
        epoch), each collated from its documents when its rows are asked for: under DDP a process reads only
        its own rows."""
        if self._epoch_batches is None or self._epoch_batches[0] != epoch:
            groups = length_batches(self.train_lengths, self.batch_size, self.seed * 1_000_003 + epoch)
            self._epoch_batches = (epoch, [RowBatch(len(group), self._reader(group)) for group in groups])
        return self._epoch_batches[1]

    def _reader(self, group: list[int]):
        def read(start: int, stop: int) -> DocBatch:
            if start >= stop:                      # no rows for this process: an empty batch of the right shapes
                return self.vocabulary.collate(self.train.read(group[:1])).rows(0, 0)
            return self.vocabulary.collate(self.train.read(group[start:stop]))
        return read

    def initial_state(self, model, rows: int, device):
        return None

    @staticmethod
    def count(batch: DocBatch) -> int:
        """The loss is summed over documents."""
        return len(batch.labels)

    def loss(self, model, batch: DocBatch, state):
        scores = model(batch.words, batch.lengths, batch.features, batch.lm)     # (B, K)
        return document_losses(model, scores, batch.labels, self.weights), len(batch.labels), None

    @torch.no_grad()
    def evaluate(self, model, batches: list[DocBatch], device, rows: slice = slice(None)) -> dict:
        """Summable counts: the loss, documents, and the confusion matrix (gold i predicted as j)."""
        was_training = model.training
        model.eval()
        K = len(self.vocabulary.labels)
        confusion = torch.zeros(K, K, dtype=torch.long)
        loss_sum, documents = 0.0, 0
        golds, predictions = [], []
        for batch in progress_bar(batches, self.progress, desc="evaluating", unit="batch", leave=False):
            batch = batch.rows(rows.start or 0, rows.stop if rows.stop is not None else len(batch.labels))
            if not len(batch.labels):
                continue
            batch = batch.to(device)
            scores = model(batch.words, batch.lengths, batch.features, batch.lm)
            known = batch.labels >= 0
            if known.any():
                loss_sum += float(document_losses(model, scores[known], batch.labels[known], self.weights))
            predicted = probabilities(model, scores).argmax(-1)                 # (B,); sigmoid: p > 0.5
            gold, predicted = batch.labels[known].cpu(), predicted[known].cpu()
            confusion.index_put_((gold, predicted), torch.ones_like(gold), accumulate=True)
            documents += int(known.sum())
            if self.keep_predictions:
                golds += gold.tolist()
                predictions += predicted.tolist()
        model.train(was_training)
        if self.keep_predictions:
            self.predictions = (golds, predictions)
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
