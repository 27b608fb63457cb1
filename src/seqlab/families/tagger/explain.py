"""What `seqlab explore` shows of a tagger (`seqlab.contract.views`), each view computed on the tagger's own
forward pass, as `seqlab tag` runs it:

    tags          each word's tag (Viterbi through the CRF, or each word's argmax) and its probability (the
                  CRF's marginal, or the softmax of the scores), the entity it belongs to, the other likely tags
    label-scores  words x tags: the emission scores e_t and each word's tag probabilities
    transitions   the CRF's scores of one tag after another (from the first tag, to the end), CRF taggers only
    lattice       words x tags: Viterbi's v_t(j), the best path's score ending in tag j at word t, and the path
    gates         a recurrent encoder's hidden states and gates per unit and word, each layer and direction
    attention     a transformer encoder's self-attention, each layer and head

The text is one sentence, split at whitespace (as `seqlab tag` reads a line), its words read by the run's
vocabulary (an unknown word is <unk>, spelled by the character features), at most `MAX_TOKENS` of them (and a
transformer's positions). On an export (onnxruntime) the first four come from the graph's emissions and crf.json,
with Viterbi and the marginals of `seqlab.families.tagger.exported`; the encoder's insides are not in the graph.

Torch is imported inside the functions that run PyTorch: an export's views and texts need numpy only.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from seqlab.contract.views import MAX_TOKENS, ExplainOptions, Panel, View, ViewSpec, gate_panels
from seqlab.data.tags import spans
from seqlab.data.vocab import UNK
from seqlab.decoding import core
from seqlab.errors import SeqlabError, SeqlabWarning

ENCODERS = ("rnn", "lstm", "gru", "transformer", "window")            # families/tagger/model.py's
RECURRENT = ("rnn", "lstm", "gru")
WITH_CRF = tuple(f"{e}+crf" for e in ENCODERS)
FORBIDDEN = -1e4 / 2         # a score at or below this holds the CRF's penalty (seqlab.nn.crf.FORBIDDEN): no path
NOT_IN_GRAPH = "the export's graph outputs the emission scores only, not the encoder's "

VIEWS = (
    ViewSpec("tags", "tokens", "Tags",
             "each word's tag as `seqlab tag` gives it (Viterbi through the CRF, SLP 17.4; without one the argmax of "
             "the softmax, 13.3.1) and its probability: the softmax of the scores, or the CRF's marginal "
             "p(y_t | x) by the forward-backward algorithm (SLP 17.5)", exported=True),
    ViewSpec("label-scores", "matrix", "Label scores",
             "words x tags: the emission scores e_t the encoder gives each tag (the logits of SLP 13.3.1, the "
             "CRF's e_t of SLP 17.5), and each word's tag probabilities", exported=True),
    ViewSpec("transitions", "matrix", "CRF transitions",
             "the CRF's score A[i, j] of tag j after tag i, of the first tag (start) and of the last (end) "
             "(SLP 17.5; the HMM's log a_ij of 17.4)", archs=WITH_CRF, exported=True),
    ViewSpec("lattice", "matrix", "Viterbi lattice",
             "words x tags: v_t(j) = max_i v_{t-1}(i) + A[i, j] + e_t(j), the best path's score ending in tag j "
             "at word t (SLP 17.4 in log space, with the CRF's scores), and the path back from the best end",
             archs=WITH_CRF, exported=True),
    ViewSpec("gates", "matrix", "Gates and hidden states",
             "the encoder's hidden state h and gates per unit and word, each layer and direction: the LSTM's add, "
             "forget and output gates and context (SLP 13.20-13.27), the GRU's update and reset gates (9.10-9.13), "
             "the Elman RNN's h (13.1)", archs=(*RECURRENT, *(f"{e}+crf" for e in RECURRENT)),
             why_not_exported=NOT_IN_GRAPH + "gates"),
    ViewSpec("attention", "matrix", "Self-attention",
             "each layer's and head's attention weights softmax(q k / sqrt(d)) of each word over the sentence's "
             "words (SLP 9.20-9.21, without the causal mask)", archs=("transformer", "transformer+crf"),
             why_not_exported=NOT_IN_GRAPH + "attention weights"),
)


def arch(model: Any) -> str:
    """The encoder (`--encoder`), with "+crf" when a CRF decodes: "lstm", "lstm+crf", "transformer", ..."""
    if hasattr(model, "model"):                                        # a TrainedTagger
        encoder, crf = model.config.model.encoder, model.model.crf is not None
    else:                                                              # an ExportedTagger
        encoder, crf = model.config["model"]["encoder"], model.crf is not None
    return f"{encoder}+crf" if crf else encoder


def words_of(text: str, longest: int | None) -> tuple[list[str], bool]:
    """The sentence's words (split at whitespace, as `seqlab tag` splits a line), at most MAX_TOKENS (and
    `longest`, a transformer's positions): (words, whether some were left out)."""
    words = text.split()
    limit = min(MAX_TOKENS, longest or MAX_TOKENS)
    return words[:limit], len(words) > limit


def short(x: float) -> float:
    """A number for the page: 6 significant digits (infinities and NaN kept, as `View.to_json` writes them)."""
    return float(f"{x:.6g}") if math.isfinite(x) else x


def rows(values: Any) -> list[list[float]]:
    """A (R, C) array as lists of short floats."""
    return [[short(float(v)) for v in row] for row in np.asarray(values, dtype=np.float64)]


def reachable(scores: np.ndarray) -> np.ndarray:
    """Scores with those that hold the CRF's penalty (a transition the scheme forbids, a lattice cell no allowed
    path reaches) as -inf, which the page leaves blank."""
    return np.where(scores <= FORBIDDEN, -np.inf, scores)


class Read:
    """What one reading of the sentence gives every view but the encoder's: numpy arrays, from PyTorch or the
    export alike."""

    def __init__(self, words: list[str], labels: list[str], scheme: str, unknown: list[bool], emissions: np.ndarray,
                 probabilities: np.ndarray, path: list[int], crf: tuple[np.ndarray, ...] | None,
                 lattice: np.ndarray | None):
        self.words, self.labels, self.scheme, self.unknown = words, labels, scheme, unknown
        self.emissions, self.probabilities, self.path = emissions, probabilities, path    # (T, K), (T, K), [T]
        self.crf, self.lattice = crf, lattice          # (transitions (K, K), start (K,), end (K,)); v_t (T, K)


def tags_view(spec: ViewSpec, read: Read, options: ExplainOptions) -> View:
    """The words, each one's tag, its probability and the top-k others, and the entity span it is in."""
    tags = [read.labels[k] for k in read.path]
    found = spans(tags) if read.scheme != "none" else []
    entity_of: dict[int, dict] = {}
    for kind, start, end in found:
        span = {"type": kind, "start": start, "end": end, "text": " ".join(read.words[start:end])}
        entity_of.update(dict.fromkeys(range(start, end), span))
    details, values = [], []
    for t, k in enumerate(read.path):
        p = read.probabilities[t]                                                  # (K,)
        best = np.argsort(-p, kind="stable")[:options.top_k]
        detail: dict[str, Any] = {"tag": tags[t], "probability": short(float(p[k])),
                                  "alternatives": [[read.labels[j], short(float(p[j]))] for j in best],
                                  "unknown": read.unknown[t]}
        if read.scheme != "none":
            detail["entity"] = entity_of.get(t)
        details.append(detail)
        values.append(short(float(p[k])))
    what = "the CRF's marginal" if read.crf is not None else "its softmax"
    return View.of(spec, tokens=list(read.words), values=values, details=details,
                   label=f"probability of the tag ({what})",
                   note="" if read.scheme == "none" else
                   f"{len(found)} {'entity' if len(found) == 1 else 'entities'} ({read.scheme} tags)")


def label_scores_view(spec: ViewSpec, read: Read) -> View:
    """Two panels, words x tags: the emission scores and the tag probabilities, the chosen tags marked."""
    if read.crf is not None:
        title, note = "tag probabilities: the CRF's marginals p(y_t = j | x)", \
            "with a CRF the tags are chosen by Viterbi over the scores and transitions, not by each word's scores"
    else:
        title, note = "tag probabilities: softmax of the scores", ""
    panels = [Panel("emission scores e_t(j)", list(read.words), list(read.labels), rows(read.emissions),
                    path=list(read.path)),
              Panel(title, list(read.words), list(read.labels), rows(read.probabilities), range=(0.0, 1.0),
                    path=list(read.path))]
    return View.of(spec, panels=panels, note=note)


def transitions_view(spec: ViewSpec, read: Read) -> View:
    """One panel: rows the previous tag (and <start>), columns the next (and <end>)."""
    assert read.crf is not None
    transitions, start, end = (reachable(np.asarray(x, np.float64)) for x in read.crf)
    K = len(read.labels)
    table = np.full((K + 1, K + 1), np.nan)                                        # (K+1, K+1)
    table[0, :K] = start                                                           # <start> -> j
    table[1:, :K] = transitions                                                    # i -> j
    table[1:, K] = end                                                             # i -> <end>
    panel = Panel("A[i, j]: tag i (row) then tag j (column)", ["<start>", *read.labels], [*read.labels, "<end>"],
                  rows(table))
    forbidden = int(np.isinf(table).sum())
    note = f"{forbidden} blank cells: moves the {read.scheme} scheme forbids, never decoded" if forbidden else ""
    return View.of(spec, panels=[panel], note=note)


def lattice_view(spec: ViewSpec, read: Read) -> View:
    """One panel, words x tags: v_t(j), the Viterbi path marked."""
    assert read.lattice is not None
    panel = Panel("v_t(j): the best path's score ending in tag j at word t", list(read.words), list(read.labels),
                  rows(reachable(read.lattice)), path=list(read.path))
    return View.of(spec, panels=[panel], note="the last tag is the best of v_T(j) + end(j); the others follow the "
                                              "back pointers (blank: no path the scheme allows reaches it)")


def gates_view(spec: ViewSpec, record: list[list[dict[str, Any]]], cell: str, words: list[str],
               options: ExplainOptions) -> View:
    """Per layer and direction: h and each gate, units (rows) x words, the units whose h varies most."""
    panels, note = gate_panels(record, cell, words, options.units)
    return View.of(spec, panels=panels, note=note)


def attention_view(spec: ViewSpec, weights: list[Any], words: list[str]) -> View:
    """Per layer and head: queries (rows) x keys (columns), each row a distribution."""
    panels = []
    for l, (_, w) in enumerate(weights):                                           # (nh, T, T) each
        for head, matrix in enumerate(w.float().cpu().numpy()):
            panels.append(Panel(f"layer {l + 1}, head {head + 1}", list(words), list(words), rows(matrix),
                                range=(0.0, 1.0), group=f"layer {l + 1}"))
    return View.of(spec, panels=panels, lines=True)


def build(specs: Sequence[ViewSpec], read: Read, options: ExplainOptions, inside: dict[str, View]) -> list[View]:
    """The views of `specs`, in their order; `inside`: those already built from the encoder."""
    out = []
    for spec in specs:
        if spec.name in inside:
            out.append(inside[spec.name])
        elif spec.name == "tags":
            out.append(tags_view(spec, read, options))
        elif spec.name == "label-scores":
            out.append(label_scores_view(spec, read))
        elif spec.name == "transitions":
            out.append(transitions_view(spec, read))
        elif spec.name == "lattice":
            out.append(lattice_view(spec, read))
        core.checkpoint()
    return out


def explain(trained: Any, text: str, specs: Sequence[ViewSpec],
            options: ExplainOptions) -> tuple[list[str], list[View], bool]:
    """The views of a `TrainedTagger` on one forward pass of the sentence: the scores as `tag_sentences` computes
    them, the encoder's input kept for the gates (the textbook cells on the layers' own weights,
    `seqlab.nn.inside.recurrent_record`), the attention weights kept by `attention_kept`."""
    import torch

    from seqlab.families.tagger.conll import Sentence
    from seqlab.families.tagger.task import with_lm_features
    from seqlab.nn.inside import attention_kept, kept, recurrent_record

    model, vocabulary, config = trained.model, trained.vocabulary, trained.config.model
    words, truncated = words_of(text, config.max_positions if config.encoder == "transformer" else None)
    names = {s.name for s in specs}
    inside: dict[str, View] = {}
    stack_input: list = []
    hook = model.encoder.rnn.register_forward_pre_hook(lambda _, args: stack_input.append(args[0])) \
        if "gates" in names else None
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", SeqlabWarning)
            sentence = Sentence(words, ["O"] * len(words))
            encoded = with_lm_features(model, [sentence], [vocabulary.encode(sentence)])
            batch = vocabulary.collate(encoded).to(trained.device)
            attention = attention_kept(model.encoder) if "attention" in names else None
            if attention is not None:
                with attention as modules:
                    scores = model(batch.words, batch.lengths, batch.chars, batch.lm)      # (1, T, K)
                    inside["attention"] = attention_view(_spec(specs, "attention"), kept(modules), words)
            else:
                scores = model(batch.words, batch.lengths, batch.chars, batch.lm)          # (1, T, K)
            core.checkpoint()
            scores = scores.float()
            lattice: list = []
            if model.crf is not None:
                probabilities = model.crf.marginals(scores, batch.mask)                      # (1, T, K)
                path = model.crf.decode(scores, batch.mask, trace=lattice)                   # (1, T)
                crf = tuple(p.detach().float().cpu().numpy() for p in
                            (model.crf.transitions + model.crf.transition_penalty,
                             model.crf.start + model.crf.start_penalty, model.crf.end + model.crf.end_penalty))
            else:
                probabilities = torch.softmax(scores, dim=-1)                                 # (1, T, K)
                path, crf = scores.argmax(-1), None                                           # (1, T)
            if "gates" in names:
                record = recurrent_record(model.encoder.rnn, stack_input[0][:1])
                inside["gates"] = gates_view(_spec(specs, "gates"), record, config.encoder, words, options)
    finally:
        if hook is not None:
            hook.remove()
        model.train(was_training)
    read = Read(words, list(vocabulary.labels), trained.scheme, [i == UNK for i in vocabulary.word_ids(words)],
                scores[0].cpu().numpy(), probabilities[0].cpu().numpy(), path[0].tolist(), crf,
                torch.cat(lattice).cpu().numpy() if lattice else None)
    return words, build(specs, read, options, inside), truncated


def explain_exported(exported: Any, text: str, specs: Sequence[ViewSpec],
                     options: ExplainOptions) -> tuple[list[str], list[View], bool]:
    """The views of an `ExportedTagger` from its graph's emissions: Viterbi (`seqlab.decoding.viterbi`) and the
    marginals in numpy, as its `tag_sentences` computes them."""
    from seqlab.decoding.numpy_search import softmax
    from seqlab.decoding.viterbi import NUMPY, viterbi
    from seqlab.families.tagger.exported import crf_marginals

    words, truncated = words_of(text, exported.max_positions)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeqlabWarning)
        emissions = exported.emissions([words])[0]                                    # (T, K)
    core.checkpoint()
    lattice = None
    if exported.crf is not None:
        trace: list = []
        paths, _ = viterbi(emissions[None].astype(np.float64), np.ones((1, len(words)), bool), *exported.crf, NUMPY,
                           trace=trace)                                               # (1, T)
        path, probabilities = paths[0].tolist(), crf_marginals(emissions, len(words), *exported.crf)
        lattice = np.concatenate(trace)                                               # (T, K)
    else:
        probabilities = softmax(emissions.astype(np.float32))                         # (T, K)
        path = probabilities.argmax(axis=-1).tolist()
    vocabulary = exported.vocabulary
    read = Read(words, list(vocabulary.labels), exported.scheme, [i == UNK for i in vocabulary.word_ids(words)],
                emissions, probabilities, path, exported.crf, lattice)
    return words, build(specs, read, options, {}), truncated


def _spec(specs: Sequence[ViewSpec], name: str) -> ViewSpec:
    return next(s for s in specs if s.name == name)


def examples(model: Any, count: int) -> list[str]:
    """Up to `count` sentences of the run's dev file (else its test file), read as the run read them (CoNLL-U or
    CoNLL-2003 columns), their words joined by spaces; [] when neither is at hand (the file moved, a run trained
    on --data)."""
    from seqlab.data.stream import LineReader
    from seqlab.families.tagger.conll import labelled_sentences

    data = dataclasses.asdict(model.config.data) if hasattr(model, "model") else model.config.get("data", {})
    texts: list[str] = []
    for option in ("dev", "test"):
        path = data.get(option) or ""
        if not path or not Path(path).is_file():
            continue
        read = labelled_sentences(None, data.get("format") or "conllu", data.get("label_column") or None, path,
                                  f"{option} file")
        try:
            with warnings.catch_warnings(), LineReader(path, f"{option} file", stdin=False) as lines:
                warnings.simplefilter("ignore", SeqlabWarning)
                for sentence in read(lines):
                    if sentence.tokens:
                        texts.append(" ".join(sentence.tokens))
                    if len(texts) >= count:
                        break
        except (SeqlabError, OSError):
            continue
        if texts:
            break
    return texts[:count]
