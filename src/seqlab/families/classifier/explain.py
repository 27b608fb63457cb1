"""What `seqlab explore` shows of a classifier (the family's `explain` part, `seqlab.contract.views`):

    classes    bars    P(class | text), as `seqlab classify` gives it                      every arch, exports too
    prefixes   matrix  the distribution after each prefix w_1..w_t (tokens x classes)      every arch, exports too
    occlusion  tokens  each word left out: how much the predicted class's probability drops  every arch, exports too
    gates      matrix  the recurrent encoder's h and gates per layer, direction, unit, token  rnn, lstm, gru
    attention  matrix  the transformer encoder's self-attention per layer and head            transformer
    pooling    tokens  the share of the document vector each position's state supplies      words, not features

Every number comes from the classifier's own forward pass. The distributions (classes, prefixes, occlusion) are
`TrainedClassifier`'s (what `seqlab classify` runs: its vocabulary, batching and `probabilities`) or, on an export,
`ExportedClassifier.predict`'s, over the documents read as token lists: the text, each prefix, the text without
each word, in one batched pass. The gates come from `seqlab.nn.inside.recurrent_record` on the encoder's own
weights and the very input a forward pass gave it (a hook), checked against the fused layers; the attention from
`seqlab.nn.inside.attention_kept` on the same forward pass, whose scores must equal the model's own.

Bounded: at most `MAX_TOKENS` tokens read (a transformer's positions, if fewer); the prefixes and the texts with a
word left out hold at most `WORK` token positions in all (a longer text: evenly spaced positions, said in the
view's note); the attention maps at most `ATTENTION_CELLS` numbers (whole layers, the first ones).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import closing, contextmanager
from itertools import islice
from pathlib import Path
from typing import Any

from seqlab.contract.views import MAX_TOKENS, ExplainOptions, Panel, View, ViewSpec, gate_panels
from seqlab.data.documents import Columns, Document, document_reader
from seqlab.data.stream import LineReader
from seqlab.data.vocab import UNK
from seqlab.data.words import with_ngrams
from seqlab.decoding import core
from seqlab.errors import SeqlabError, SeqlabWarning

RECURRENT = ("rnn", "lstm", "gru")
WORDS = ("pooled", *RECURRENT, "transformer")           # the archs that read words (not feature vectors)
WORK = 1 << 16                # token positions of the prefixes (or the texts with a word left out) of one request
ATTENTION_CELLS = 1 << 20     # numbers of the attention maps sent (whole layers, the first ones)
BATCH = 32                    # documents per batch of the distributions
NOT_IN_GRAPH = "the ONNX graph outputs the class scores only, not the encoder's {}"

VIEWS = (
    ViewSpec("classes", "bars", "Class distribution",
             "P(class | text): the softmax of the head's scores (SLP eq. 6.27; for two classes with one sigmoid unit, "
             "6.25), as seqlab classify gives it", exported=True),
    ViewSpec("prefixes", "matrix", "As the text is read",
             "the class distribution after each prefix w_1..w_t, the classifier run on the prefix alone: for a "
             "left-to-right RNN read at its last state (SLP 13.3.2), the prediction as the text is read",
             exported=True),
    ViewSpec("occlusion", "tokens", "Each word left out",
             "how much the predicted class's probability drops when the word is left out of the text (occlusion; "
             "the distribution without it on hover)", exported=True),
    ViewSpec("gates", "matrix", "Hidden states and gates",
             "the recurrent encoder's hidden state h and gates per token and unit, each layer and direction: Elman "
             "h (SLP 13.1), LSTM forget, add and output gates and context (13.20-13.27), GRU reset and update gates "
             "(9.10-9.13)", archs=RECURRENT, why_not_exported=NOT_IN_GRAPH.format("states and gates")),
    ViewSpec("attention", "matrix", "Self-attention",
             "each layer's and head's attention weights softmax(q_i k_j / sqrt(d_k)) (SLP 9.20-9.21), rows the "
             "queries, columns the keys; the encoder reads both ways (no causal mask)", archs=("transformer",),
             why_not_exported=NOT_IN_GRAPH.format("attention weights")),
    ViewSpec("pooling", "tokens", "What the document vector keeps",
             "the share of the document vector each position's state supplies: under max pooling the components "
             "where it is the largest (SLP eq. 6.22; Conneau et al. 2017), under mean pooling 1/n each (6.21, "
             "13.15), under last-state pooling the final state(s) (13.3.2, Fig. 9.12)", archs=WORDS,
             why_not_exported=NOT_IN_GRAPH.format("states")),
)


def arch(model: Any) -> str:
    """The run's (or the export's) --arch."""
    return _settings(model)["arch"]


def _settings(model: Any) -> dict[str, Any]:
    """The model group of the run's config (a dataclass on PyTorch, the export's config.json dict)."""
    config = model.config
    return config["model"] if isinstance(config, dict) else dataclasses.asdict(config.model)


def _data(model: Any) -> dict[str, Any]:
    config = model.config
    return config["data"] if isinstance(config, dict) else dataclasses.asdict(config.data)


# ---------------------------------------------------------------------------- the text, as the classifier reads it


def read(model: Any, text: str) -> tuple[list[str], bool]:
    """The text's tokens as `seqlab classify` reads them (the run's tokenizer, lowercasing and --max-length cut),
    at most MAX_TOKENS (a transformer: its positions); and whether the text was cut (either way)."""
    v = model.vocabulary
    if v.features is not None and v.features.num_columns:
        raise SeqlabError(f"this classifier also reads {v.features.num_columns} numeric columns of each document "
                          "(--feature-columns); a text alone cannot be explained")
    every = v.tokens(text)
    tokens = v.cut(every)
    if not tokens:
        raise SeqlabError(f"the text has no tokens this classifier reads (--tokenizer {v.tokenizer}): give words")
    settings, limit = _settings(model), MAX_TOKENS
    if settings["arch"] == "transformer":
        limit = min(limit, settings["max_positions"] - (_pooling(settings) == "cls"))
    return tokens[:limit], len(every) > min(len(tokens), limit)


def _pooling(settings: dict[str, Any]) -> str:
    """The document vector's pooling (ClassifierConfig.document_pooling, from the config's dict)."""
    if settings["pooling"] != "auto":
        return settings["pooling"]
    return "last" if settings["arch"] in RECURRENT else "mean"


def distributions(model: Any, token_lists: list[list[str]]) -> list[list[float]]:
    """Each document's class probabilities (in the labels' order), the documents given as token lists: on
    PyTorch through `TrainedClassifier._predict` (what `classify` runs), on an export through
    `ExportedClassifier.predict`."""
    labels = model.vocabulary.labels
    if hasattr(model, "model"):
        documents = [Document("", None, i + 1) for i in range(len(token_lists))]
        encoded = model.vocabulary.encode_all(documents, "", "text", None, token_lists)
        with evaluating(model.model):
            predictions = model._predict(encoded, BATCH)
    else:
        predictions = model.predict([model.encode_tokens(tokens) for tokens in token_lists], BATCH)
    return [[p.probabilities[label] for label in labels] for p in predictions]


@contextmanager
def evaluating(module: Any) -> Iterator[None]:
    """The module in evaluation mode (no dropout) within; its mode put back on leaving."""
    training = module.training
    module.eval()
    try:
        yield
    finally:
        module.train(training)


def spaced(count: int, length: Callable[[int], int]) -> list[int]:
    """The positions 0..count-1 whose documents (of `length(i)` tokens each) are read: all of them when they hold
    at most WORK token positions, else evenly spaced ones that do (the last always among them)."""
    total = sum(max(1, length(i)) for i in range(count))
    if total <= WORK:
        return list(range(count))
    keep = max(1, count * WORK // total)
    return sorted({min(count - 1, round((k + 1) * count / keep) - 1) for k in range(keep)})


# ---------------------------------------------------------------------------- the views


def explain(trained: Any, text: str, specs: Sequence[ViewSpec],
            options: ExplainOptions) -> tuple[list[str], list[View], bool]:
    """The views of `specs` of a trained classifier reading `text` (`seqlab.contract.views.explain`)."""
    return _explain(trained, text, specs, options)


def explain_exported(exported: Any, text: str, specs: Sequence[ViewSpec],
                     options: ExplainOptions) -> tuple[list[str], list[View], bool]:
    """The distributions' views (classes, prefixes, occlusion) of an export, from its graph's scores."""
    return _explain(exported, text, specs, options)


def _explain(model: Any, text: str, specs: Sequence[ViewSpec],
             options: ExplainOptions) -> tuple[list[str], list[View], bool]:
    with warnings.catch_warnings():                    # nothing to the server's stderr
        warnings.simplefilter("ignore", SeqlabWarning)
        tokens, truncated = read(model, text)
        wanted, T = {s.name for s in specs}, len(tokens)
        prefix_at = spaced(T, lambda t: t + 1) if "prefixes" in wanted else []
        left_at = spaced(T, lambda t: T - 1) if "occlusion" in wanted else []
        lists = [tokens, *(tokens[:t + 1] for t in prefix_at), *(tokens[:i] + tokens[i + 1:] for i in left_at)]
        found = distributions(model, lists)                # one batched pass: the text, its prefixes, each word out
        full, prefixes, left = found[0], found[1:1 + len(prefix_at)], found[1 + len(prefix_at):]
        labels = model.vocabulary.labels
        views = []
        for spec in specs:
            core.checkpoint()                              # a server's deadline may stop the work here
            if spec.name == "classes":
                views.append(classes_view(spec, labels, full))
            elif spec.name == "prefixes":
                views.append(prefixes_view(spec, labels, tokens, prefix_at, prefixes))
            elif spec.name == "occlusion":
                views.append(occlusion_view(spec, model, labels, tokens, full, left_at, left, options))
            else:
                views.append(INSIDE[spec.name](spec, model, tokens, options))
    return tokens, views, truncated


def classes_view(spec: ViewSpec, labels: list[str], p: list[float]) -> View:
    best = max(range(len(p)), key=p.__getitem__)
    return View.of(spec, labels=list(labels), values=p, label="probability",
                   note=f"predicted: {labels[best]} ({p[best]:.4f})")


def prefixes_view(spec: ViewSpec, labels: list[str], tokens: list[str], at: list[int],
                  rows: list[list[float]]) -> View:
    path = [max(range(len(row)), key=row.__getitem__) for row in rows]
    panel = Panel("P(class | w_1..w_t)", [tokens[t] for t in at], list(labels), rows, (0.0, 1.0), path)
    note = "row t: the prefix ending at that word; the predicted class marked"
    if len(at) < len(tokens):
        note += (f"; {len(at)} of the {len(tokens)} prefixes, ending at evenly spaced words (they would hold more "
                 f"than {WORK} token positions)")
    return View.of(spec, panels=[panel], note=note)


def occlusion_view(spec: ViewSpec, model: Any, labels: list[str], tokens: list[str], full: list[float],
                   at: list[int], left: list[list[float]], options: ExplainOptions) -> View:
    best = max(range(len(full)), key=full.__getitem__)
    vocabulary = model.vocabulary
    values, details = [float("nan")] * len(tokens), [{} for _ in tokens]
    for i, p in zip(at, left, strict=True):
        ranked = sorted(range(len(p)), key=lambda k: -p[k])
        values[i] = full[best] - p[best]
        details[i] = {"probability": p[best], "label": labels[ranked[0]],
                      "alternatives": [[labels[k], p[k]] for k in ranked[:options.top_k]]}
        if vocabulary.words is not None:
            details[i]["unknown"] = vocabulary.word_ids([tokens[i]])[0] == UNK
    note = (f"the drop in P({labels[best]}) = {full[best]:.4f} when the word is left out (negative: it rises); "
            "on hover, the distribution without it")
    if len(tokens) == 1:
        note += "; a text of one word left without it reads as one <unk>"
    if len(at) < len(tokens):
        note += (f"; {len(at)} of the {len(tokens)} words, evenly spaced, left out (all of them would make more than "
                 f"{WORK} token positions)")
    return View.of(spec, tokens=list(tokens), values=values, details=details,
                   label=f"drop in P({labels[best]})", note=note)


# ---------------------------------------------------------------------------- inside the network (PyTorch only)


def one_batch(trained: Any, tokens: list[str]) -> Any:
    """The text as a batch of one (its LM features too, if the model has them), on the CPU."""
    from seqlab.families.classifier.task import with_lm_features

    v = trained.vocabulary
    encoded = v.encode_all([Document("", None, 1)], "", "text", None, [tokens])
    return v.collate(with_lm_features(trained.model, encoded)).to("cpu")


def rounded(values: Any) -> list:
    """A tensor as lists of floats of 4 decimals (a heat map's payload)."""
    import torch

    return torch.round(values.double(), decimals=4).tolist()


def gates_view(spec: ViewSpec, trained: Any, tokens: list[str], options: ExplainOptions) -> View:
    """Per layer and direction: h and each gate (units x tokens), the units whose h varies most."""
    import torch

    from seqlab.nn.inside import float_cpu, recurrent_record

    model = float_cpu(trained.model)
    stack = model.encoder.rnn
    batch, inputs = one_batch(trained, tokens), []
    handle = stack.register_forward_pre_hook(lambda module, args: inputs.append(args[0]))
    try:
        with evaluating(model), torch.no_grad():
            model(batch.words, batch.lengths, None, batch.lm)            # the stack's input, x (1, T, I)
    finally:
        handle.remove()
    layers = recurrent_record(stack, inputs[0])                           # checked against the fused layers
    bounded = stack.cell != "rnn" or stack.nonlinearity == "tanh"
    panels, note = gate_panels(layers, stack.cell, tokens, options.units, bounded)
    note = "; ".join(n for n in ("each layer and direction read from a zero state", note) if n)
    return View.of(spec, panels=panels, note=note)


def attention_view(spec: ViewSpec, trained: Any, tokens: list[str], options: ExplainOptions) -> View:
    """One panel per layer and head (queries x keys), from the model's forward pass on the textbook path."""
    import torch

    from seqlab.families.classifier.task import probabilities
    from seqlab.nn.inside import attention_kept, float_cpu, kept, same_outputs

    model = float_cpu(trained.model)
    batch = one_batch(trained, tokens)
    with evaluating(model), torch.no_grad():
        own = model(batch.words, batch.lengths, None, batch.lm)           # (1, K)
        with attention_kept(model) as modules:
            scores = model(batch.words, batch.lengths, None, batch.lm)    # (1, K), keeping each head's weights
            weights = kept(modules)                                       # [(name, (nh, T, T))] per layer
    same_outputs(probabilities(model, own), probabilities(model, scores), "attention")
    labels = (["<s>"] if _pooling(_settings(trained)) == "cls" else []) + list(tokens)
    panels, cells, shown = [], 0, 0
    for l, (_, w) in enumerate(weights):
        if shown and cells + w.numel() > ATTENTION_CELLS:
            break
        cells, shown = cells + w.numel(), shown + 1
        for head in range(w.size(0)):
            panels.append(Panel(f"layer {l + 1}, head {head + 1}", labels, labels, rounded(w[head]), (0.0, 1.0),
                                group=f"layer {l + 1}"))
    note = "row i: how query i weighs each key (a distribution over the keys)"
    if "<s>" in labels[:1]:
        note += "; <s> is the classification token the document vector is read at"
    if shown < len(weights):
        note += (f"; layers 1-{shown} of {len(weights)} (the maps of {len(labels)} positions would exceed "
                 f"{ATTENTION_CELLS} numbers: a shorter text shows them all)")
    return View.of(spec, panels=panels, lines=True, note=note)


def pooling_view(spec: ViewSpec, trained: Any, tokens: list[str], options: ExplainOptions) -> View:
    """Per position of the pooled sequence: the share of the document vector's components taken from its state
    (max pooling: where it is the largest, found on the pooled states of the model's forward pass)."""
    import torch

    from seqlab.nn.inside import float_cpu

    model, settings = float_cpu(trained.model), _settings(trained)
    pooling, arch = _pooling(settings), settings["arch"]
    positions = (["<s>"] if pooling == "cls" else []) + list(tokens)
    ngrams = _data(trained)["ngrams"]
    if arch == "pooled" and ngrams > 1:                                   # fastText's bag: the n-grams pooled too
        positions = with_ngrams(positions, ngrams)
    n = len(positions)
    if pooling == "max":
        batch, states = one_batch(trained, tokens), []
        pooled = model.embedding if arch == "pooled" else model.encoder   # the states max pooling reads
        handle = pooled.register_forward_hook(lambda module, args, output: states.append(output))
        try:
            with evaluating(model), torch.no_grad():
                model(batch.words, batch.lengths, None, batch.lm)
        finally:
            handle.remove()
        h = states[0][0] if isinstance(states[0], tuple) else states[0]  # (1, T, F)
        if h.size(1) != n:
            raise SeqlabError(f"max pooling read {h.size(1)} states of {n} positions")
        winners = h[0].argmax(0)                                          # (F,): where each component's max is
        share = (torch.bincount(winners, minlength=n).float() / winners.numel()).tolist()
        note = f"max pooling: the share of the {winners.numel()} components of the document vector each state wins"
    elif pooling == "mean":
        share, note = [1.0 / n] * n, "mean pooling: every state weighs 1/n (nothing more to see here)"
    elif pooling == "cls":
        share, note = [1.0] + [0.0] * (n - 1), "the document vector is the classification token's state"
    elif settings["bidirectional"]:
        share = [0.0] * n
        share[-1] += 0.5
        share[0] += 0.5
        note = ("last-state pooling: the forward direction's final state (after the last word) and the backward "
                "direction's (after the first), combined (Fig. 9.12)")
    else:
        share, note = [0.0] * (n - 1) + [1.0], "last-state pooling: the final state, after the last word (13.3.2)"
    return View.of(spec, tokens=positions, values=share, label="share of the document vector",
                   details=[{"share": s} for s in share], note=note)


INSIDE: dict[str, Callable[[ViewSpec, Any, list[str], ExplainOptions], View]] = {
    "gates": gates_view, "attention": attention_view, "pooling": pooling_view}


# ---------------------------------------------------------------------------- texts to try


def examples(model: Any, count: int) -> list[str]:
    """Up to `count` texts of the run's dev file (else its test file), read as training read it (its format and
    columns); [] when neither is at hand."""
    data = _data(model)
    for option in ("dev", "test"):
        path = data.get(option) or ""
        if not path or not Path(path).is_file():
            continue
        try:
            with closing(_documents(path, data)) as documents:
                return [d.text for d in islice(documents, count)]
        except (SeqlabError, OSError, ValueError):
            return []
    return []


def _documents(path: str, data: dict[str, Any]) -> Generator[Document, None, None]:
    """A file's documents, as `seqlab.families.classifier.config.iter_split` reads them (labels ignored)."""
    from seqlab.families.classifier.encode import is_parquet, parquet_documents

    columns = Columns(data["text_column"], data["label_column"], (), data["header"])
    if is_parquet(path):
        yield from parquet_documents(path, columns, "dev file")
        return
    read = document_reader(data["format"], columns, path, "dev file", labelled=False,
                           sst_classes=data["sst_classes"])
    with LineReader(path, "dev file", stdin=False) as lines:
        yield from read(lines)
