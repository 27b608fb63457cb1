"""What `seqlab explore` shows of a sequence-to-sequence model (`seqlab.contract.views`), each view computed on the
model's own passes: the beam search `seqlab translate --beam K` runs (its tree, `seqlab.decoding.core.beam_steps`'
trace), the attention that search kept (the alignment), and what one teacher-forced forward over the best output
holds inside (the transformer's attention per layer and head, `seqlab.nn.inside.attention_kept`; an RNN's gates
per layer and direction, `seqlab.nn.inside.recurrent_record` on the inputs and start state its stacks were
given, caught by hooks; the pointer-generator's p_gen and the coverage of See et al. 2017).

    beam-tree        tree    every architecture; on an export too (the numpy search keeps the same tree)
    alignment        matrix  models that attend (RNNs with --attention, the transformer); on an export too
    cross-attention  matrix  the transformer: each decoder layer and head
    attention        matrix  the transformer's encoder and decoder self-attention; the lm's over source <sep> output
    gates            matrix  RNN encoder-decoders: the encoder's layers and directions, and the decoder's
    copy             tokens  --copy models: p_gen per output token
    coverage         matrix  --coverage models: c^t per output token and source token

Torch-free at import: an export's server (numpy, onnxruntime) imports it for `explain_exported`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from seqlab.contract.views import MAX_TOKENS, ExplainOptions, Panel, View, ViewSpec, gate_panels
from seqlab.data.vocab import EOS, UNK
from seqlab.errors import SeqlabError, SeqlabWarning
from seqlab.families.seq2seq.parallel import Pair
from seqlab.families.seq2seq.vocab import EncodedPair, LengthReport, PairVocabulary

RECURRENT = ("rnn", "lstm", "gru")
RNN_ARCHS = tuple(f"{cell}{more}" for cell in RECURRENT
                  for more in ("", "+attention", "+attention+copy", "+attention+coverage",
                               "+attention+copy+coverage"))
ATTENDING = (*(a for a in RNN_ARCHS if "+attention" in a), "transformer")
NO_COPY_EXPORT = "copy and coverage models cannot be exported to ONNX yet"

VIEWS = (
    ViewSpec("beam-tree", "tree", "Beam search",
             "the beam search of `seqlab translate --beam K`: at each step the 2K best extensions of the K "
             "prefixes, kept, ended or dropped, and the finished hypotheses ranked by log p / length^α (SLP 13.4, "
             "Fig. 13.8)", exported=True),
    ViewSpec("alignment", "matrix", "Alignment",
             "the attention α over the source of each output token of the best translation, as the search kept it "
             "(SLP eqs. 13.34-13.37; the transformer's: its last cross-attention layer, its heads averaged)",
             archs=ATTENDING, exported=True),
    ViewSpec("cross-attention", "matrix", "Cross-attention",
             "each decoder layer's and head's attention from the output over the source, teacher-forced on the best "
             "output (SLP eqs. 9.20-9.21, 13.8)", archs=("transformer",),
             why_not_exported="the decoder-step graph outputs the last layer's weights averaged over its heads, not "
                              "each layer's and head's"),
    ViewSpec("attention", "matrix", "Self-attention",
             "each layer's and head's self-attention, the encoder's over the source and the decoder's (causal) over "
             "the output it read; the lm's over source <sep> output (SLP eqs. 9.20-9.21)",
             archs=("transformer", "lm"),
             why_not_exported="the graphs output the logits and the cross-attention, not the self-attention weights"),
    ViewSpec("gates", "matrix", "Gates and hidden states",
             "each RNN layer's hidden state and gates (LSTM: SLP eqs. 13.20-13.27; GRU: 9.10-9.13; Elman: 13.1) per "
             "token and unit, in the encoder (each direction) and in the decoder (teacher-forced on the best output, "
             "from h_0^d = h_n^e, eq. 13.32)", archs=RNN_ARCHS,
             why_not_exported="the graphs output the states, not the gates"),
    ViewSpec("copy", "tokens", "Copy or generate",
             "the pointer-generator's p_gen = σ(w_c·c_t + w_s·s_t + w_x·x_t + b) per output token: the probability "
             "of writing from the vocabulary rather than copying a source word (See et al. 2017, eqs. 8-9)",
             archs=tuple(a for a in RNN_ARCHS if "+copy" in a), why_not_exported=NO_COPY_EXPORT),
    ViewSpec("coverage", "matrix", "Coverage",
             "the coverage c^t = Σ_{t' < t} a^{t'} of each source token before each output token, which feeds the "
             "attention scores (See et al. 2017, eqs. 10-11)",
             archs=tuple(a for a in RNN_ARCHS if "+coverage" in a), why_not_exported=NO_COPY_EXPORT),
)
INSIDE = {"cross-attention", "attention", "gates", "copy", "coverage"}      # the views of the teacher-forced pass


def _model_options(model: Any) -> dict[str, Any]:
    """The model group of a run's config (a trained model's dataclass, an export's config.json)."""
    import dataclasses

    return dataclasses.asdict(model.config.model) if hasattr(model, "model") else dict(model.config["model"])


def arch(model: Any) -> str:
    """The architecture with what shapes its views: "gru", "gru+attention", "lstm+attention+copy+coverage",
    "transformer", "lm"."""
    options = _model_options(model)
    name = options["arch"]
    if name in RECURRENT and options.get("attention", "none") != "none":
        name += "+attention" + "+copy" * bool(options.get("copy")) + "+coverage" * bool(options.get("coverage"))
    return name


# ------------------------------------------------------------------------------ the text, and what the search found


def show(token: str) -> str:
    """A token as a label: byte-level BPE's space marker as '▁' (as `TrainedSeq2Seq.plot_attention` labels)."""
    return token.replace("Ġ", "▁").replace("Ċ", "\\n")


def read_source(vocabulary: PairVocabulary, text: str) -> tuple[list[str], EncodedPair, bool]:
    """The text's source tokens as `translate` reads them, cut to the model's --max-source-length and to
    `MAX_TOKENS`; its ids (a copy model's extended ids too); whether it was cut."""
    tokens = vocabulary.source_tokens([text])[0] or ["<unk>"]         # none (a tokenizer's blank): <unk>, as encode
    limit = min(MAX_TOKENS, vocabulary.max_source or MAX_TOKENS)
    truncated = len(tokens) > limit
    tokens = tokens[:limit]
    (encoded,) = vocabulary.encode([Pair(text, None, 1)], "text", "text", "truncate", LengthReport(), [tokens])
    return tokens, encoded, truncated


def spell(vocabulary: PairVocabulary, ids: Sequence[int], oovs: Sequence[str] | None = None) -> list[str]:
    """Target ids as tokens: a copy model's id V + k is its source's k-th out-of-vocabulary word."""
    vocab, oovs = vocabulary.target_vocab, oovs or []
    V = len(vocab)
    return [vocab.tokens[i] if i < V else oovs[i - V] if i - V < len(oovs) else vocab.tokens[UNK] for i in ids]


def _round(values: Any) -> Any:
    """Floats (nested lists) to 5 significant digits: the payload's size, not its meaning."""
    if isinstance(values, list):
        return [_round(v) for v in values]
    return float(f"{values:.5g}")


def tree_view(spec: ViewSpec, trace: list[dict], vocabulary: PairVocabulary, options: ExplainOptions,
              oovs: Sequence[str] | None = None) -> View:
    """The beam's tree from `beam_steps`' trace: each node's token spelt, the finished hypotheses best first (by
    the normalised score, as `best_first` ranks them; the first is what `translate --beam K` writes)."""
    nodes = [entry for entry in trace if "id" in entry]
    by_id = {node["id"]: node for node in nodes}
    finished = []
    for entry in trace:
        if "finished" not in entry:
            continue
        ids, node = [], by_id.get(entry["finished"])
        while node is not None:
            ids.append(node["token"])
            node = by_id.get(node["parent"]) if node["parent"] is not None else None
        ids.reverse()
        if entry["ended"] and ids and ids[-1] == EOS:
            ids = ids[:-1]
        tokens = spell(vocabulary, ids, oovs)
        finished.append({"node": entry["finished"], "tokens": [show(t) for t in tokens],
                         "text": vocabulary.target_tokenizer.detokenize(tokens), "score": _round(entry["score"]),
                         "normalized": _round(entry["normalized"]), "ended": entry["ended"]})
    finished = [dict(f, rank=rank) for rank, f in enumerate(sorted(finished, key=lambda f: -f["normalized"]), 1)]
    shown = [{"id": n["id"], "parent": n["parent"], "step": n["step"], "score": _round(n["score"]),
              "status": n["status"], "token": "</s>" if n["token"] == EOS else show(spell(vocabulary, [n["token"]],
                                                                                           oovs)[0])}
             for n in nodes]
    return View.of(spec, nodes=shown, finished=finished,
                   label=f"the prefix's log probability; finished ranked by log p / length^α "
                         f"(K = {options.beam}, α = {options.length_penalty:g})",
                   note=f"{len(shown)} candidates over {1 + max((n['step'] for n in nodes), default=-1)} steps")


def alignment_view(spec: ViewSpec, weights: Any, rows: list[str], cols: list[str]) -> View:
    """One panel: the search's attention, output tokens x source tokens."""
    values = _round([[float(w) for w in row] for row in weights])
    return View.of(spec, panels=[Panel("attention over the source per output token", rows, cols, values, (0.0, 1.0))],
                   lines=True)


def produced(vocabulary: PairVocabulary, best: Any, oovs: Sequence[str] | None = None) -> list[str]:
    """The best hypothesis's output tokens, with the </s> that ended it: the rows of its alignment."""
    return [show(t) for t in spell(vocabulary, best.tokens, oovs)] + ["</s>"] * bool(best.finished)


# ------------------------------------------------------------------------------ PyTorch


def explain(trained: Any, text: str, specs: Sequence[ViewSpec],
            options: ExplainOptions) -> tuple[list[str], list[View], bool]:
    """The views of `specs` for a `TrainedSeq2Seq` reading `text`: the beam search `translate --beam
    options.beam` runs (`seqlab.decoding.search.decode`, the one path of `TrainedSeq2Seq.generate`), then one
    teacher-forced forward over its best output for the views inside."""
    import torch

    from seqlab.decoding.core import checkpoint
    from seqlab.decoding.search import SearchOptions, decode

    vocabulary, model = trained.vocabulary, trained.model
    names = {s.name for s in specs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeqlabWarning)
        tokens, encoded, truncated = read_source(vocabulary, text)
        batch = vocabulary.collate([encoded]).to(trained.device)
        trace: list[dict] | None = [] if "beam-tree" in names else None
        search = SearchOptions(beam=options.beam, length_penalty=options.length_penalty)
        with torch.no_grad():
            ((best, *_),) = decode(model, batch.source, batch.source_lengths, search, "alignment" in names,
                                   batch.source_copy, trace)
        checkpoint()
        inside = record(trained, batch, best) if names & INSIDE else {}
    source = [show(t) for t in tokens]
    rows = produced(vocabulary, best, encoded.oovs)
    inputs = ["<s>", *rows[:len(rows) - 1]]                  # what the decoder read at each output step
    views = []
    for spec in specs:
        checkpoint()
        if spec.name == "beam-tree":
            views.append(tree_view(spec, trace or [], vocabulary, options, encoded.oovs))
        elif spec.name == "alignment":
            views.append(alignment_view(spec, best.attention.tolist(), rows, source))
        elif spec.name == "cross-attention":
            views.append(heads_view(spec, inside["cross"], rows, source, ""))
        elif spec.name == "attention":
            views.append(self_attention_view(spec, inside, source, inputs))
        elif spec.name == "gates":
            views.append(gates_view(spec, inside, source, inputs, options, model))
        elif spec.name == "copy":
            views.append(copy_view(spec, inside, rows, source))
        elif spec.name == "coverage":
            values = _round(inside["coverage"].tolist())
            views.append(View.of(spec, panels=[Panel("coverage c^t before each output token", rows, source,
                                                     values)], lines=False))
    return source, views, truncated


def record(trained: Any, batch: Any, best: Any) -> dict[str, Any]:
    """One teacher-forced forward of the model over the best output (the decoder reads <s> y_1 ... y_{n-1},
    n = the output's tokens with its </s>), in eval, recording what the views inside show: the transformers'
    attention weights per layer and head; an RNN's stacks' inputs and start states (forward pre-hooks), then
    their gates and states (`recurrent_record`, checked against the fused layers), the attention a and the
    coverage of each step, and a copy model's p_gen (a hook on its generation gate)."""
    import torch

    from seqlab.nn.inside import attention_kept, kept, recurrent_record

    model, device = trained.model, trained.device
    name = trained.config.model.arch
    n = len(best.tokens) + bool(best.finished)
    fed = ([model.start_token] + list(best.tokens))[:n]
    was_training = model.training
    model.eval()
    found: dict[str, Any] = {}
    try:
        with torch.no_grad():
            if name == "lm":                                 # one sequence: source <sep> the output it read
                length = int(batch.source_lengths[0])
                sequence = torch.tensor([batch.source[0, :length].tolist() + fed], device=device)   # fed[0]: <sep>
                with attention_kept(model.lm) as modules:
                    model(None, None, sequence)
                    found["self"] = kept(modules)
                return found
            target_in = torch.tensor([fed], device=device)                     # (1, n)
            if name == "transformer":
                with attention_kept(model) as modules:
                    model(batch.source, batch.source_lengths, target_in)
                    weights = kept(modules)
                found["cross"] = [w for module, w in weights if module.endswith("cross_attention")]
                found["encoder"] = [w for module, w in weights if module.startswith("encoder.")]
                found["decoder"] = [w for module, w in weights if module.endswith(".self_attention")]
                return found
            calls: dict[str, list] = {"encoder": [], "decoder": [], "gate": []}
            hooks = [model.encoder.rnn.register_forward_pre_hook(lambda _, args: calls["encoder"].append(args)),
                     model.decoder.register_forward_pre_hook(lambda _, args: calls["decoder"].append(args))]
            if model.copy:
                hooks.append(model.generation_gate.register_forward_hook(
                    lambda _, args, out: calls["gate"].append(out)))
            try:
                if model.attends:
                    _, attention, coverage = model(batch.source, batch.source_lengths, target_in,
                                                   source_copy=batch.source_copy, attention=True)
                    found["attention"], found["coverage"] = attention[0], coverage[0]      # (n, S) each
                else:
                    model(batch.source, batch.source_lengths, target_in)
            finally:
                for hook in hooks:
                    hook.remove()
            found["encoder"] = recurrent_record(model.encoder.rnn, calls["encoder"][0][0])
            decoder_in = torch.cat([args[0] for args in calls["decoder"]], dim=1)          # (1, n, E + C)
            found["decoder"] = recurrent_record(model.decoder, decoder_in, state=calls["decoder"][0][1])
            if calls["gate"]:
                found["p_gen"] = torch.sigmoid(calls["gate"][0][0, :, 0].float())          # (n,), eq. 8
            return found
    finally:
        model.train(was_training)


def heads_view(spec: ViewSpec, weights: list, rows: list[str], cols: list[str], where: str) -> View:
    """A panel per layer and head of attention weights, grouped by layer, with their line view."""
    return View.of(spec, panels=heads(weights, rows, cols, where), lines=True)


def heads(weights: list, rows: list[str], cols: list[str], where: str) -> list[Panel]:
    """Each layer's (nh, T, S) weights, in order, as a panel per head, rows x cols, group "{where}layer L"."""
    panels = []
    for layer, w in enumerate(weights):
        for head, values in enumerate(w.tolist()):                            # (T, S) per head
            group = f"{where}layer {layer + 1}"
            panels.append(Panel(f"{group}, head {head + 1}", rows, cols, _round(values), (0.0, 1.0), group=group))
    return panels


def self_attention_view(spec: ViewSpec, inside: dict, source: list[str], inputs: list[str]) -> View:
    """The lm's self-attention over source <sep> output, or the transformer's encoder's over the source and
    its decoder's over what it read: a panel per layer and head."""
    if "self" in inside:
        sequence = [*source, "<sep>", *inputs[1:]]
        return heads_view(spec, [w for _, w in inside["self"]], sequence, sequence, "")
    panels = heads(inside["encoder"], source, source, "encoder ") + heads(inside["decoder"], inputs, inputs,
                                                                          "decoder ")
    return View.of(spec, panels=panels, lines=True,
                   note="the decoder's queries and keys are the tokens it read: <s>, then the output")


def gates_view(spec: ViewSpec, inside: dict, source: list[str], inputs: list[str], options: ExplainOptions,
               model: Any) -> View:
    """Per stack, layer and direction: the hidden state h and each gate, units x tokens, the `options.units`
    units whose h varies most (the same units in each panel of a group)."""
    panels, notes = [], []
    for stack, cols, module in (("encoder", source, model.encoder.rnn), ("decoder", inputs, model.decoder)):
        bounded = module.cell != "rnn" or module.nonlinearity == "tanh"
        found, note = gate_panels(inside[stack], module.cell, cols, options.units, bounded, stack=f"{stack} ")
        panels += found
        notes.append(note)
    return View.of(spec, panels=panels, note="; ".join(n for n in notes if n) or "every unit")


def copy_view(spec: ViewSpec, inside: dict, rows: list[str], source: list[str]) -> View:
    p_gen = inside["p_gen"].tolist()
    attention = inside["attention"].tolist()                                   # (n, S)
    details = []
    for t, p in enumerate(p_gen):
        weights = attention[t]
        top = max(range(len(weights)), key=weights.__getitem__)
        details.append({"p_gen": _round(p), "copy": _round(1 - p), "attended": source[top],
                        "attention": _round(weights[top])})
    return View.of(spec, tokens=rows, values=_round(p_gen), details=details,
                   label="p_gen: the probability of writing from the vocabulary (1 - p_gen: of copying)")


# ------------------------------------------------------------------------------ an export (numpy)


def explain_exported(exported: Any, text: str, specs: Sequence[ViewSpec],
                     options: ExplainOptions) -> tuple[list[str], list[View], bool]:
    """The views declared `exported` on an `ExportedSeq2Seq`: its numpy beam search (`ExportedSeq2Seq.search`,
    the one of its `generate`) with its tree, and the attention that search kept."""
    from seqlab.decoding.numpy_search import SearchOptions

    vocabulary = exported.vocabulary
    names = {s.name for s in specs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeqlabWarning)
        tokens, encoded, truncated = read_source(vocabulary, text)
        trace: list[dict] | None = [] if "beam-tree" in names else None
        search = SearchOptions(beam=options.beam, length_penalty=options.length_penalty)
        ((best, *_),) = exported.search([encoded.source], search, "alignment" in names, trace)
    source = [show(t) for t in tokens]
    views = []
    for spec in specs:
        if spec.name == "beam-tree":
            views.append(tree_view(spec, trace or [], vocabulary, options))
        elif spec.name == "alignment":
            views.append(alignment_view(spec, best.attention.tolist(), produced(vocabulary, best), source))
    return source, views, truncated


# ------------------------------------------------------------------------------ texts to try


def examples(model: Any, count: int) -> list[str]:
    """Up to `count` sources of the run's development pairs (else its test pairs), read as training read them;
    [] when neither is at hand (prepared data, a file gone). A file named relative to where training ran is
    looked for there, then in the model's folder (an export's config names its files without their folders)."""
    import dataclasses
    from pathlib import Path

    from seqlab.families.seq2seq.config import Seq2SeqDataConfig
    from seqlab.families.seq2seq.sources import pair_files

    trained = hasattr(model, "model")
    given = dataclasses.asdict(model.config.data) if trained else dict(model.config.get("data", {}))
    known = {f.name: f.default for f in dataclasses.fields(Seq2SeqDataConfig)}
    data = SimpleNamespace(**{**known, **{k: v for k, v in given.items() if k in known}})
    folder = getattr(model, "run_dir", None) if trained else getattr(model, "dir", None)
    for split in ("dev", "test"):
        for option in (split, f"{split}_src", f"{split}_tgt"):
            name = getattr(data, option)
            if name and not Path(name).exists() and folder is not None and (Path(folder) / name).is_file():
                setattr(data, option, str(Path(folder) / name))
        try:
            files = pair_files(data, split)
            if files is None:
                continue
            texts = []
            for pair in files.check().pairs():
                texts.append(pair.source)
                if len(texts) >= count:
                    break
            return texts
        except (SeqlabError, OSError):
            continue
    return []
