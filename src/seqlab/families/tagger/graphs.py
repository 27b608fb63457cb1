"""A tagger's ONNX graph (`seqlab export RUN --format onnx`), batch and sequence axes dynamic:

    tagger.onnx   words (B, T), lengths (B,)[, chars (B, T, C)] -> emissions (B, T, K)

With a CRF, crf.json holds the transition, start and end scores (the scheme's penalties added), for
Viterbi and the marginals in numpy (`seqlab.families.tagger.exported`).

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
from seqlab.fileio import atomic_write_json


class TaggerGraph(Graph):
    """words (B, T), lengths (B,)[, chars (B, T, C)] -> emission scores (B, T, K)."""

    def forward(self, words: Tensor, lengths: Tensor, chars: Tensor | None = None) -> Tensor:
        return self.model(words, lengths, chars)                           # (B, T, K)


def refuse(saved: dict) -> None:
    """Nothing in a tagger's config.json stops an export before it is loaded (--lm-features: `export`)."""


def export(trained, out: Path) -> dict:
    """The emissions graph (and crf.json) of the trained tagger into `out`."""
    model = trained.model
    if getattr(model, "lm_features", None) is not None:
        raise SeqlabError("a tagger with --lm-features (character LMs run over each sentence) is not exported "
                          "to ONNX; serve it with seqlab serve instead")
    words, lengths = torch.tensor([[5, 6, 7], [5, 6, 0]]), torch.tensor([3, 2])
    args, inputs = (words, lengths), ["words", "lengths"]
    axes = {"words": {0: "B", 1: "T"}, "lengths": {0: "B"}, "emissions": {0: "B", 1: "T"}}
    if model.chars is not None:
        args += (torch.full((2, 3, 4), 5),)
        inputs.append("chars")
        axes["chars"] = {0: "B", 1: "T", 2: "C"}
    graphs = {"tagger": export_graph(TaggerGraph(model), args, out / "tagger.onnx", inputs, ["emissions"], axes)}
    if model.crf is not None:
        transitions, start, end = (t.detach().float().tolist() for t in model.crf._scores())
        atomic_write_json(out / "crf.json", {"transitions": transitions, "start": start, "end": end})
    return graphs


# ---------------------------------------------------------------------------- what the export says about itself

SENTENCE = ["John", "lives", "in", "Paris", "."]        # the example's sentence


def files(trained, out: Path) -> dict[str, str]:
    """vocab.txt, labels.txt and chars.txt (with character features), of one token per line: {file: what it
    holds}, crf.json's description included."""
    v, model = trained.vocabulary, trained.model
    write_tokens(out / "vocab.txt", v.words.tokens)
    write_tokens(out / "labels.txt", v.labels)
    described = {"vocab.txt": f"the {len(v.words)} words the model knows, specials first, {TOKEN_LINES}",
                 "labels.txt": f"the {len(v.labels)} tags ({trained.scheme}), line k the tag of the emissions' column "
                               "k: one tag per line"}
    if v.chars is not None:
        write_tokens(out / "chars.txt", v.chars.tokens)
        described["chars.txt"] = f"the {len(v.chars)} characters of the words' spelling, specials first: one a line"
    if model.crf is not None:
        described["crf.json"] = ("the CRF's scores of each tag after another, `transitions` (K, K), from tag i "
                                 "(row) to tag j, and of the first and last tag, `start` (K,) and `end` (K,)")
    return described


def metadata(trained) -> dict:
    """metadata_props of the tagger graph."""
    v = trained.vocabulary
    return {"scores": "emissions" + (" of a CRF (crf.json)" if trained.model.crf is not None else
                                     ": softmax over the last axis gives each tag's probability"),
            "vocab_size": len(v.words), "labels": v.labels, "scheme": trained.scheme,
            "char_vocab_size": len(v.chars) if v.chars is not None else 0}


def about(trained, manifest: dict) -> dict:
    """The README's part of a tagger (`seqlab.export.readme`)."""
    v, model, K = trained.vocabulary, trained.model, len(trained.vocabulary.labels)
    encoder = trained.config.model.encoder
    crf = model.crf is not None
    meanings = {"words": "each sentence's word ids, right-padded with <pad> (0)",
                "lengths": "each sentence's number of words",
                "chars": f"each word's character ids (chars.txt), right-padded with <pad> (0) to the batch's longest "
                         f"word, at most {v.max_word_chars} characters (a longer word keeps its first ones)",
                "emissions": f"the score of each tag of labels.txt ({K}) for each word; padding rows are noise"}
    if crf:
        scores = (f"`emissions` (B, T, {K}) are the CRF's scores of each word's tag (SLP 17.4): the tags are the "
                  "sequence of highest total score, emissions plus crf.json's `transitions` from each tag to the next, "
                  "plus `start` for the first and `end` for the last (Viterbi, as the example does); seqlab reports "
                  "each chosen tag's marginal probability (the forward-backward algorithm).")
    else:
        scores = (f"`emissions` (B, T, {K}) are logits: softmax over the last axis gives each tag's probability, "
                  "which seqlab reports, and the argmax is the tag.")
    fallback = " (or, failing that, its lowercase form's)" if v.lowercase_fallback else ""
    tokenize = ("A sentence is a list of words, already tokenized (seqlab reads CoNLL files, one word a line); each "
                f"word is its id in vocab.txt{fallback}, or <unk> (1) when the vocabulary lacks it. "
                f"vocab.txt: {TOKEN_LIST_NOTE}.")
    if v.chars is not None:
        tokenize += " Each word is also spelled: each character its id in chars.txt, or <unk> (1)."
    if encoder == "transformer":
        tokenize += (f" The transformer encoder reads at most {trained.config.model.max_positions} words; seqlab "
                     "refuses a longer sentence.")
    return {"summary": f"A {encoder} tagger{' with a CRF' if crf else ''} of {K} tags ({trained.scheme}).",
            "graphs": {"tagger": "a batch of sentences -> the scores of each word's tags"},
            "axes": {"B": "the sentences of a batch", "T": "the words of the longest", "C": "the characters of the "
                     "longest word"},
            "meanings": meanings, "scores": scores, "tokenize": tokenize, "example": example(v, crf),
            "prints": f"It prints the tags of {' '.join(SENTENCE)!r}, one per word, as `seqlab tag` gives them."}


def example(v, crf: bool) -> str:
    """The README's program: the tags of SENTENCE, as `seqlab.families.tagger.exported.ExportedTagger` finds them
    (its Viterbi lines held to `seqlab.decoding.viterbi`, path and score, by tests/test_viterbi.py)."""
    lookup = "index.get(w, index.get(w.lower(), 1))" if v.lowercase_fallback else "index.get(w, 1)"
    lines = [*(["import json", ""] if crf else []), "import numpy as np", "import onnxruntime as ort", "",
             f"vocab = {token_list('vocab.txt')}",
             f"labels = {token_list('labels.txt')}",
             "index = {word: i for i, word in enumerate(vocab)}",
             'session = ort.InferenceSession("tagger.onnx")',
             f"sentence = {json.dumps(SENTENCE)}",
             commented(f"words = np.array([[{lookup} for w in sentence]], np.int64)", "(1, T): <unk> is 1"),
             'feeds = {"words": words, "lengths": np.array([len(sentence)], np.int64)}']
    if v.chars is not None:
        lines += [f"chars = {token_list('chars.txt')}",
                  "spelling = {char: i for i, char in enumerate(chars)}",
                  commented(f"C = min({v.max_word_chars}, max(len(w) for w in sentence))", "the longest word, cut"),
                  commented('feeds["chars"] = np.zeros((1, len(sentence), C), np.int64)', "(1, T, C), <pad> 0"),
                  "for t, word in enumerate(sentence):",
                  '    feeds["chars"][0, t, :len(word[:C])] = [spelling.get(c, 1) for c in word[:C]]']
    lines += [commented('emissions = session.run(["emissions"], feeds)[0][0]', "(T, K)")]
    if crf:
        lines += ['crf = {k: np.array(v) for k, v in json.load(open("crf.json")).items()}',
                  commented('score, back = crf["start"] + emissions[0], []', "Viterbi (SLP 17.4)"),
                  "for e in emissions[1:]:",
                  commented('    s = score[:, None] + crf["transitions"]', "(K, K): from each tag to each"),
                  "    back.append(s.argmax(0))",
                  "    score = s.max(0) + e",
                  'tags = [int((score + crf["end"]).argmax())]',
                  "for pointers in reversed(back):",
                  "    tags.append(int(pointers[tags[-1]]))",
                  "tags.reverse()"]
    else:
        lines += ["tags = emissions.argmax(-1).tolist()"]
    lines += ['print(" ".join(labels[k] for k in tags))']
    return "\n".join(lines) + "\n"
