"""A tagger's ONNX export on onnxruntime, without PyTorch (`seqlab.export.runtime.load_export`):
`ExportedTagger.tag_sentences(sentences)` gives (tag, probability) per token as `TrainedTagger.tag_sentences`
does: the argmax and its softmax probability, or with a CRF the Viterbi tags and their marginals, in numpy."""

from __future__ import annotations

import json

import numpy as np

from seqlab.data.grouping import length_batches
from seqlab.data.vocab import PAD, UNK
from seqlab.decoding import core
from seqlab.decoding.numpy_search import softmax
from seqlab.decoding.viterbi import NUMPY, viterbi
from seqlab.errors import SeqlabError
from seqlab.export.session import Exported, pad
from seqlab.families.tagger import FAMILY
from seqlab.families.tagger.vocab import read_tagger_vocabulary


def logsumexp(x: np.ndarray, axis: int) -> np.ndarray:
    top = x.max(axis=axis, keepdims=True)
    return (top + np.log(np.exp(x - top).sum(axis=axis, keepdims=True))).squeeze(axis)


def crf_marginals(emissions: np.ndarray, length: int, transitions: np.ndarray, start: np.ndarray,
                  end: np.ndarray) -> np.ndarray:
    """p(y_t = k | x) (T, K) by the forward-backward algorithm in log space."""
    e = emissions[:length].astype(np.float64)
    alpha, beta = np.zeros_like(e), np.zeros_like(e)
    alpha[0] = start + e[0]
    for t in range(1, length):
        alpha[t] = logsumexp(alpha[t - 1][:, None] + transitions, axis=0) + e[t]
    beta[-1] = end
    for t in range(length - 2, -1, -1):
        beta[t] = logsumexp(transitions + (e[t + 1] + beta[t + 1])[None, :], axis=1)
    log_z = logsumexp(alpha[-1] + end, axis=0)
    return np.exp(alpha + beta - log_z)


class ExportedTagger(Exported):
    family = FAMILY

    def __init__(self, export_dir, threads: int = 0):
        super().__init__(export_dir, threads)
        self.vocabulary, self.scheme, _ = read_tagger_vocabulary(self.files)
        self.crf = None
        if self.manifest.get("crf"):
            crf = json.loads((self.dir / "crf.json").read_text())
            self.crf = tuple(np.array(crf[k], np.float64) for k in ("transitions", "start", "end"))
        model = self.config["model"]                                 # config.json's model group
        self.max_positions = model.get("max_positions") if model.get("encoder") == "transformer" else None

    @property
    def extra_parameters(self) -> int:
        """The CRF's transitions (K, K), start (K,) and end (K,) scores, held outside the graph."""
        return 0 if self.crf is None else sum(part.size for part in self.crf)

    def emissions(self, sentences: list[list[str]]) -> np.ndarray:
        """Emission scores (B, T, K) of one batch of non-empty sentences."""
        v = self.vocabulary
        values = {"words": pad([v.word_ids(s) for s in sentences]), "lengths": np.array([len(s) for s in sentences])}
        if v.chars is not None:
            C = max(min(v.max_word_chars, max(len(t) for t in s)) for s in sentences)
            chars = np.full((len(sentences), values["words"].shape[1], C), PAD, dtype=np.int64)
            for b, s in enumerate(sentences):
                width = min(v.max_word_chars, max(len(t) for t in s))
                for t, token in enumerate(s):
                    ids = [v.chars.index.get(ch, UNK) for ch in token[:width]]
                    chars[b, t, :len(ids)] = ids
            values["chars"] = chars
        return self.run("tagger", values)["emissions"]

    def tag_sentences(self, sentences: list[list[str]], batch_size: int = 64) -> list[list[tuple[str, float]]]:
        """(tag, probability) per token, as `TrainedTagger.tag_sentences`: the argmax and its softmax
        probability, or with a CRF the Viterbi tags and their marginals. A sentence longer than a
        transformer tagger's positions is refused, as the PyTorch tagger refuses it."""
        longest = max(map(len, sentences), default=0)
        if self.max_positions is not None and longest > self.max_positions:
            raise SeqlabError(f"a sentence of {longest} tokens is longer than this transformer tagger's "
                              f"{self.max_positions} positions (--max-positions at training); split it")
        results: list[list[tuple[str, float]]] = [[] for _ in sentences]
        order = [i for i in range(len(sentences)) if sentences[i]]
        lengths = [len(sentences[i]) for i in order]
        for group in length_batches(lengths, batch_size, None):
            for part in core.slices([lengths[k] for k in group], (id(self), "tag")):   # on a server: a few at a time
                chunk = [order[group[j]] for j in part]
                scores = self.emissions([sentences[i] for i in chunk])                 # (B, T, K)
                if self.crf is not None:                          # Viterbi (SLP 17.4) of the batch, padding masked
                    real = np.arange(scores.shape[1])[None, :] < np.array([len(sentences[i]) for i in chunk])[:, None]
                    lattice = np.where(real[:, :, None], scores.astype(np.float64), 0.0)        # (B, T, K)
                    paths, _ = viterbi(lattice, real, *self.crf, NUMPY)                         # (B, T)
                for row, i in enumerate(chunk):
                    n = len(sentences[i])
                    if self.crf is not None:
                        tags = paths[row, :n].tolist()
                        p = crf_marginals(scores[row], n, *self.crf)
                    else:
                        p = softmax(scores[row, :n].astype(np.float32))
                        tags = p.argmax(axis=-1).tolist()
                    results[i] = [(self.vocabulary.labels[t], float(p[k, t])) for k, t in enumerate(tags)]
        return results

    def tag(self, tokens: list[str]) -> list[tuple[str, float]]:
        """(tag, probability) for each token of one sentence."""
        return self.tag_sentences([tokens])[0]


RUNTIME = ExportedTagger
