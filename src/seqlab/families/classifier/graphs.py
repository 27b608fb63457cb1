"""A classifier's ONNX graph (`seqlab export RUN --format onnx`), the batch and sequence axes dynamic:

    classifier.onnx   words (B, T), lengths (B,) -> scores (B, K)
                      (the features arch: features (B, F) -> scores (B, K))

`seqlab.families.classifier.exported` runs it.

What the export says about itself comes from here too: `files` writes the tokenizer, vocabulary and label
files a user reads without seqlab, `metadata` gives the graphs' metadata_props and `about` the README's part
(`seqlab.export.readme`), whose example tests/test_export_readme.py runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import Tensor

from seqlab.errors import SeqlabError
from seqlab.export.graphs import Graph, export_graph
from seqlab.export.readme import commented
from seqlab.export.tokens import TOKEN_LINES, TOKEN_LIST_NOTE, token_list, write_tokens


class ClassifierGraph(Graph):
    """words (B, T), lengths (B,) -> class scores (B, K)."""

    def forward(self, words: Tensor, lengths: Tensor) -> Tensor:
        return self.model(words, lengths)                                  # (B, K)


class FeaturesGraph(Graph):
    """features (B, F) -> class scores (B, K)."""

    def forward(self, features: Tensor) -> Tensor:
        return self.model(None, None, features)                            # (B, K)


def refuse(saved: dict) -> None:
    """Nothing in a classifier's config.json stops an export before it is loaded (--lm-features: `export`)."""


def export(trained, out: Path) -> dict:
    """The scores graph of the trained classifier into `out`."""
    if getattr(trained.model, "lm_features", None) is not None:
        raise SeqlabError("a classifier with --lm-features (character LMs run over each document) is not exported "
                          "to ONNX; serve it with seqlab serve instead")
    model, c = trained.model, trained.model.config
    if c.arch == "features":
        features = torch.zeros(2, c.num_features)
        return {"classifier": export_graph(FeaturesGraph(model), (features,), out / "classifier.onnx",
                                           ["features"], ["scores"], {"features": {0: "B"}, "scores": {0: "B"}})}
    words, lengths = torch.tensor([[5, 6, 7], [5, 6, 0]]), torch.tensor([3, 2])
    return {"classifier": export_graph(ClassifierGraph(model), (words, lengths), out / "classifier.onnx",
                                       ["words", "lengths"], ["scores"],
                                       {"words": {0: "B", 1: "T"}, "lengths": {0: "B"}, "scores": {0: "B"}})}


# ---------------------------------------------------------------------------- what the export says about itself

TEXTS = ["a warm and funny film", "a dull mess !"]     # the example's texts


def files(trained, out: Path) -> dict[str, str]:
    """vocab.txt (a classifier over words) and labels.txt, of one token per line: {file: what it holds}."""
    v = trained.vocabulary
    write_tokens(out / "labels.txt", v.labels)
    described = {"labels.txt": f"the {len(v.labels)} classes, line k the class of the scores' column k: one a line"}
    if v.words is not None:
        write_tokens(out / "vocab.txt", v.words.tokens)
        described["vocab.txt"] = (f"the {len(v.words)} tokens the model knows (words"
                                  f"{f' and their 2- to {v.ngrams}-grams' if v.ngrams > 1 else ''}), specials first, "
                                  + TOKEN_LINES)
    if v.features is not None:
        described["seqlab/features.json"] = ("the features' lexicon (word -> class), the training split's `mean` and "
                                             "`std` of each feature, and their `names`")
    return described


def metadata(trained) -> dict:
    """metadata_props of the classifier graph."""
    v, sigmoid = trained.vocabulary, trained.model.config.output_layer == "sigmoid"
    return {"scores": "one logit: sigmoid gives the second class's probability" if sigmoid else
            "logits: softmax gives each class's probability", "labels": v.labels,
            "vocab_size": len(v.words) if v.words is not None else 0,
            "features": v.features.names if v.features is not None else []}


def about(trained, manifest: dict) -> dict:
    """The README's part of a classifier (`seqlab.export.readme`)."""
    v, c, K = trained.vocabulary, trained.model.config, len(trained.vocabulary.labels)
    meanings = {"words": "each text's token ids, right-padded with <pad> (0)",
                "lengths": "each text's number of tokens",
                "features": "each text's feature vector, standardised (minus the training split's mean, over its "
                            "standard deviation: seqlab/features.json)",
                "scores": f"the score of each class of labels.txt ({K})" if c.output_layer != "sigmoid" else
                          "one score: the logit of the second class of labels.txt"}
    if c.output_layer == "sigmoid":
        scores = (f"`scores` (B, 1) are one logit per text (SLP eq. 6.25): its sigmoid is the probability of the "
                  f"second class of labels.txt ({v.labels[1]!r}), one minus it that of the first ({v.labels[0]!r}).")
    else:
        scores = (f"`scores` (B, {K}) are logits over the classes of labels.txt: softmax gives each class's "
                  "probability (SLP eq. 6.27), which seqlab reports; the argmax is the class.")
    how = ("runs of letters and digits (with their inner apostrophes and hyphens) and every other symbol on its own, "
           "HTML tags dropped" if v.tokenizer == "words" else "whitespace-separated words")
    tokenize = (f"A text is read as its tokens, {how}, after lowercasing it" if v.lowercase else
                f"A text is read as its tokens, {how}")
    if v.max_length:
        tokenize += f"; its {'first' if v.truncate == 'head' else 'last'} {v.max_length} tokens are kept"
    if v.words is not None:
        grams = f", followed by their 2- to {v.ngrams}-grams (words joined by a space)" if v.ngrams > 1 else ""
        fallback = " (or, failing that, its lowercase form's)" if v.lowercase_fallback else ""
        tokenize += (f"{grams}; each token is its id in vocab.txt{fallback}, or <unk> (1) when the vocabulary "
                     f"lacks it; a text of no tokens reads as one <unk>. vocab.txt: {TOKEN_LIST_NOTE}. The example "
                     "does it all.")
    else:
        tokenize += ("; the features are computed from the tokens (SLP 6.4.1): for each class of the lexicon the "
                     "count of its words, 1 if a negation is there, the count of first- and second-person pronouns, "
                     "1 if \"!\" is there, ln(the token count); then the columns of the training file, if any; each "
                     "standardised. The example does it all.")
    return {"summary": f"A {c.arch} classifier of {K} classes ({', '.join(v.labels[:6])}"
                       f"{', ...' if K > 6 else ''}).",
            "graphs": {"classifier": "a batch of texts (as token ids, or feature vectors) -> each one's class scores"},
            "axes": {"B": "the texts of a batch", "T": "the tokens of the longest"},
            "meanings": meanings, "scores": scores, "tokenize": tokenize, "example": example(v, c),
            "prints": f"It prints the class of each of {TEXTS!r} and its probability (to 4 places), as `seqlab "
                      "classify` gives them."}


def example(v, c) -> str:
    """The README's program: the classes of TEXTS, as `seqlab.families.classifier.exported.ExportedClassifier`
    finds them."""
    from seqlab.data.words import _TAG, _WORD
    from seqlab.families.classifier.features import NEGATIONS, PRONOUNS

    f = v.features
    cut = "" if not v.max_length else f"[:{v.max_length}]" if v.truncate == "head" else f"[-{v.max_length}:]"
    read = f're.findall(r"{_WORD.pattern}", re.sub(r"{_TAG.pattern}", " ", text))' if v.tokenizer == "words" \
        else "text.split()"
    lines = [*(["import json", "import math"] if f is not None else []), *(["import re"] if v.tokenizer == "words"
                                                                          else []),
             "", "import numpy as np", "import onnxruntime as ort", "",
             f"labels = {token_list('labels.txt')}"]
    if v.words is not None:
        lines += [f"vocab = {token_list('vocab.txt')}", "index = {token: i for i, token in enumerate(vocab)}"]
    else:
        lines += [commented('features = json.load(open("seqlab/features.json", encoding="utf-8"))',
                            "the lexicon, mean and std"),
                  'lexicon = features["lexicon"] or {}', "classes = sorted(set(lexicon.values()))",
                  f"NEGATIONS = {json.dumps(sorted(NEGATIONS))}", f"PRONOUNS = {json.dumps(sorted(PRONOUNS))}"]
        if f.num_columns:
            lines += [commented(f"COLUMNS = [0.0] * {f.num_columns}", "each text's numeric columns, as in training")]
    lines += ['session = ort.InferenceSession("classifier.onnx")', f"texts = {json.dumps(TEXTS)}", "", "",
              "def tokens(text):",
              f'    """A text\'s tokens, as seqlab reads it (--tokenizer {v.tokenizer})."""',
              *(["    text = text.lower()"] if v.lowercase else []),
              f"    return {read}{cut}" if not cut else
              commented(f"    return {read}{cut}", f"--max-length {v.max_length}, {v.truncate}"), "", ""]
    if v.words is not None:
        lookup = "index[t] if t in index else index.get(t.lower(), 1)" if v.lowercase_fallback else "index.get(t, 1)"
        lines += ["def ids(text):", '    """A text\'s ids: each token\'s, or <unk> (1)."""', "    found = tokens(text)",
                  *([commented(f'    found += [" ".join(g) for n in range(2, {v.ngrams + 1}) '
                               "for g in zip(*(found[k:] for k in range(n)))]", "n-grams")] if v.ngrams > 1 else []),
                  commented(f"    return [{lookup} for t in found] or [1]", "no tokens: one <unk>"), "", "",
                  "rows = [ids(text) for text in texts]",
                  commented("words = np.zeros((len(rows), max(map(len, rows))), np.int64)", "(B, T), <pad> is 0"),
                  "for b, row in enumerate(rows):", "    words[b, :len(row)] = row",
                  "lengths = np.array([len(row) for row in rows], np.int64)",
                  commented('scores = session.run(["scores"], {"words": words, "lengths": lengths})[0]', "(B, K)")]
    else:
        columns = " + COLUMNS" if f.num_columns else ""
        lines += ["def vector(text):", '    """SLP 6.4.1\'s features of a text."""', "    t = tokens(text)"]
        lines += ["    return [float(sum(lexicon.get(w) == c for w in t)) for c in classes] + [",
                  "        float(any(w in NEGATIONS for w in t)), float(sum(w in PRONOUNS for w in t)),",
                  f'        float("!" in t), math.log(max(len(t), 1))]{columns}'] if f.lexicon is not None else \
            ["    return COLUMNS"]
        lines += ["", "", 'mean, std = np.array(features["mean"], np.float32), np.array(features["std"], np.float32)',
                  commented("x = (np.array([vector(text) for text in texts], np.float32) - mean) / std", "(B, F)"),
                  commented('scores = session.run(["scores"], {"features": x})[0]', "(B, K)")]
    if c.output_layer == "sigmoid":
        lines += ["p = 1 / (1 + np.exp(-scores[:, 0]))",
                  commented("p = np.stack([1 - p, p], axis=1)", "the first class, the second")]
    else:
        lines += [commented("p = np.exp(scores - scores.max(axis=1, keepdims=True))", "softmax"),
                  "p /= p.sum(axis=1, keepdims=True)"]
    lines += ["for row in p:", "    print(labels[int(row.argmax())], round(float(row.max()), 4))"]
    return "\n".join(lines).lstrip("\n") + "\n"
