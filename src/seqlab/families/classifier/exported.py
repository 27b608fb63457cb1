"""A classifier's ONNX export on onnxruntime, without PyTorch (`seqlab.export.runtime.load_export`):
`ExportedClassifier.classify(texts)` gives each text's `Prediction`, as `TrainedClassifier.classify` does."""

from __future__ import annotations

import numpy as np

from seqlab.data.grouping import length_batches
from seqlab.data.words import with_ngrams
from seqlab.decoding import core
from seqlab.decoding.numpy_search import softmax
from seqlab.errors import SeqlabError
from seqlab.export.session import Exported, pad
from seqlab.families.classifier import FAMILY
from seqlab.families.classifier.vocab import Prediction, read_document_vocabulary


class ExportedClassifier(Exported):
    family = FAMILY

    def __init__(self, export_dir, threads: int = 0):
        super().__init__(export_dir, threads)
        data = self.config["data"]
        self.vocabulary = read_document_vocabulary(self.files, data["tokenizer"], data["lowercase"], data["ngrams"],
                                                   data["max_length"], data["truncate"])

    def encode(self, text: str) -> tuple[list[int] | None, list[float] | None]:
        v = self.vocabulary
        return self.encode_tokens(v.cut(v.tokens(text)))

    def encode_tokens(self, tokens: list[str]) -> tuple[list[int] | None, list[float] | None]:
        """A document's tokens (already read and cut) -> its ids (with n-grams) and / or feature vector."""
        v = self.vocabulary
        words = v.word_ids(with_ngrams(tokens, v.ngrams) if v.ngrams > 1 else tokens) if v.words else None
        return words, v.features.raw(tokens, None) if v.features else None

    def scores(self, encoded: list) -> np.ndarray:
        """Class scores (B, K) of encoded documents, one batch."""
        if self.vocabulary.features is not None:
            f = self.vocabulary.features
            table = (np.array([e[1] for e in encoded], np.float32) - np.array(f.mean, np.float32)) \
                / np.array(f.std, np.float32)                                         # (B, F)
            return self.run("classifier", {"features": table})["scores"]
        rows = [e[0] for e in encoded]
        return self.run("classifier", {"words": pad(rows), "lengths": np.array([len(r) for r in rows])})["scores"]

    def probabilities(self, scores: np.ndarray) -> np.ndarray:
        """Softmax (eq. 6.27), or [1 - s(z), s(z)] for one sigmoid unit (eq. 6.25)."""
        if self.config["model"]["output_layer"] == "sigmoid":
            p = 1 / (1 + np.exp(-scores[:, 0].astype(np.float32)))                  # (B,)
            return np.stack([1 - p, p], axis=1)
        return softmax(scores.astype(np.float32))

    def classify(self, texts: list[str], batch_size: int = 64):
        """The `Prediction` of each text, as `TrainedClassifier.classify`; an empty text is refused."""
        empty = [i for i, t in enumerate(texts) if not t.strip()]
        if empty:
            raise SeqlabError(f"text {empty[0] + 1} of {len(texts)} is empty; there is nothing to classify")
        return self.predict([self.encode(t) for t in texts], batch_size)

    def predict(self, encoded: list, batch_size: int = 64) -> list[Prediction]:
        """The `Prediction` of each encoded document (`encode`, `encode_tokens`), in order, in batches of similar
        length."""
        labels = self.vocabulary.labels
        results: list = [None] * len(encoded)
        lengths = [len(e[0]) if e[0] is not None else 0 for e in encoded]
        for group in length_batches(lengths, batch_size, None):
            for part in core.slices([max(1, lengths[i]) for i in group], (id(self), "classify")):   # on a server
                rows = [group[j] for j in part]                                                  # a few at a time
                p = self.probabilities(self.scores([encoded[i] for i in rows]))
                for i, row in zip(rows, p.tolist(), strict=True):
                    best = int(np.argmax(row))
                    results[i] = Prediction(labels[best], row[best], dict(zip(labels, row, strict=True)))
        return results


RUNTIME = ExportedClassifier
