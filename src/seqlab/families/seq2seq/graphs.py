"""A sequence-to-sequence model's ONNX graphs (`seqlab export RUN --format onnx`), batch and sequence axes
dynamic; `seqlab.families.seq2seq.exported` runs them:

    rnn / lstm / gru (with or without attention):
    encoder.onnx      source (B, S), lengths (B,) -> the memory (outputs, h0[, c0], context[, prepared])
    decoder_step.onnx tokens (B,), h (B, L, D)[, c], the memory -> logits (B, V), h[, c], and with attention
                      the weights (B, S) over the source
    transformer:
    encoder.onnx      source (B, S), lengths (B,) -> k0, v0, k1, ... (B, nh, S, hs), each decoder layer's
                      cross-attention keys and values
    decoder_step.onnx prefix (B, t), mask (B, S), k0, v0, ... -> logits (B, V) and the last layer's
                      cross-attention weights (B, S), averaged over heads, of the last position
    lm (source ⊕ <sep> ⊕ target):
    decoder_step.onnx source (B, S) left-padded, mask (B, S), prefix (B, t) -> logits (B, V) of the last
                      position; each row's positions count from its own first token (clamped to the last
                      position, as PyTorch's), its padding masked out of every key. The left-padding is done
                      in numpy (no encoder graph).

Both transformers re-read their target prefix <s> y_1 .. y_{t-1} (<sep> y_1 .. for the lm) at every step, as
the transformer LM re-reads its window: their state is the prefix. The step graph is the teacher-forced
forward pass, exact and free of in-graph cache writes and per-row cache bookkeeping, at a cost that grows
with the prefix (and, for the lm, the source).

What the export says about itself comes from here too: `files` writes the tokenizer, vocabulary and label
files a user reads without seqlab, `metadata` gives the graphs' metadata_props and `about` the README's part
(`seqlab.export.readme`), whose example tests/test_export_readme.py runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import Tensor

from seqlab.data.vocab import BOS, NEVER_GENERATED, SEP
from seqlab.errors import SeqlabError
from seqlab.export.graphs import Graph, export_graph, layers_first
from seqlab.export.readme import commented
from seqlab.export.tokens import TOKEN_LINES, TOKEN_LIST_NOTE, bpe_tokenizer, token_list, write_tokens
from seqlab.fileio import atomic_write_text
from seqlab.models.base import EncoderDecoderState

MEMORY = ("outputs", "h0", "c0", "context", "prepared")


class EncoderGraph(Graph):
    """source (B, S), lengths (B,) -> the RNN encoder-decoder's memory, in `names` order."""

    def __init__(self, model, names: list[str]):
        super().__init__(model)
        self.names = names

    def forward(self, source: Tensor, lengths: Tensor):
        memory = self.model.encode(source, lengths)
        return tuple(memory[name] for name in self.names)


class DecoderStepGraph(Graph):
    """tokens (B,), h (B, L, D)[, c], the memory it reads -> logits (B, V), h[, c][, weights (B, S)]: one step
    of the RNN decoder (eqs. 13.32-13.37). `inputs` names what it takes, in order: the context c without
    attention; the encoder outputs, their mask and their prepared keys with it (an ONNX graph takes no
    None), and then it also gives the attention weights α_i over the source (eq. 13.36)."""

    def __init__(self, model, inputs: list[str], lstm: bool):
        super().__init__(model)
        self.inputs, self.lstm = inputs, lstm

    def forward(self, *values: Tensor):
        given = dict(zip(self.inputs, values, strict=True))
        memory = {name: given.get(name) for name in ("outputs", "mask", "context", "prepared")}
        h = layers_first(given["h"])                                        # (L, B, D)
        state = (h, layers_first(given["c"])) if self.lstm else h
        logits, new, weights = self.model.step(given["tokens"], EncoderDecoderState(memory, state),
                                               need_weights=True)          # (B, V), (B, S) or None
        parts = new.decoder if self.lstm else (new.decoder,)
        return logits, *(layers_first(part) for part in parts), *(() if weights is None else (weights,))


class TransformerEncoderGraph(Graph):
    """source (B, S), lengths (B,) -> the cross-attention keys and values of every decoder layer, k0, v0,
    k1, ... (B, nh, S, hs): the transformer encoder's output, projected once per sentence."""

    def forward(self, source: Tensor, lengths: Tensor):
        memory = self.model.encode(source, lengths)
        return tuple(memory[f"{kv}{layer}"] for layer in range(len(self.model.decoder)) for kv in "kv")


class TransformerDecoderGraph(Graph):
    """prefix (B, t), mask (B, S), k0, v0, ... -> logits (B, V) and cross-attention weights (B, S) (the last
    layer's, averaged over heads) of the prefix's last position: the decoder re-reads the target prefix
    <s> y_1 .. y_{t-1} at every step, positions 0 .. t-1, as teacher forcing does."""

    def forward(self, prefix: Tensor, mask: Tensor, *keys_values: Tensor):
        memory = {"mask": mask, **{f"{kv}{layer}": keys_values[2 * layer + i]
                                   for layer in range(len(self.model.decoder)) for i, kv in enumerate("kv")}}
        x = self.model._embed(self.model.target_embedding, self.model.target_positions, prefix)   # (B, t, d)
        logits, weights = self.model._decode(x, memory, None, need_weights=True)   # (B, t, V), (B, t, S)
        return logits[:, -1], weights[:, -1]


class SeparatorStepGraph(Graph):
    """source (B, S) left-padded, mask (B, S) True at its real positions, prefix (B, t) = <sep> y_1 ..
    y_{t-1} -> logits (B, V) of the last position: the separator LM re-reads source ⊕ <sep> ⊕ prefix at
    every step, each row's positions counted from its own first token and its padding masked out of every
    key (`SeparatorLM.init_state` and `step`, which fill the same positions and padding into its cache)."""

    def forward(self, source: Tensor, mask: Tensor, prefix: Tensor) -> Tensor:
        lm, S = self.model.lm, source.size(1)
        sequence = torch.cat([source, prefix], dim=1)                              # (B, S + t)
        shift = S - mask.sum(dim=1)                                                # (B,) padding per row
        columns = torch.arange(sequence.size(1), device=source.device)[None, :]    # (1, S + t)
        positions = (columns - shift[:, None]).clamp(0, self.model.config.max_positions - 1)   # (B, S + t)
        padding = torch.cat([~mask, torch.zeros_like(prefix, dtype=torch.bool)], dim=1)       # (B, S + t)
        h = lm.hidden(sequence, positions, None, padding)                          # (B, S + t, D)
        return lm.output(h[:, -1])                                                 # (B, V)


def refuse(saved: dict) -> None:
    """What cannot be exported, from the run's config.json, before anything is loaded."""
    for name in ("copy", "coverage"):          # See et al. 2017's pointer-generator: its step has no graph yet
        if saved.get("model", {}).get(name):
            raise SeqlabError(f"--{name} models cannot be exported to ONNX yet")


def export(trained, out: Path) -> dict:
    """The encoder and decoder-step graphs of the trained model into `out`."""
    arch = trained.config.model.arch
    if arch == "transformer":
        return export_transformer_seq2seq(trained.model, out)
    if arch == "lm":
        return export_separator_lm(trained.model, out)
    return export_rnn_seq2seq(trained.model, out)


def export_transformer_seq2seq(model, out: Path) -> dict:
    source, lengths = torch.tensor([[5, 6, 7], [5, 6, 0]]), torch.tensor([3, 2])
    memory = model.encode(source, lengths)
    kv = [f"{name}{layer}" for layer in range(len(model.decoder)) for name in "kv"]
    kv_axes = {name: {0: "B", 2: "S"} for name in kv}
    graphs = {"encoder": export_graph(TransformerEncoderGraph(model), (source, lengths), out / "encoder.onnx",
                                      ["source", "lengths"], kv, {"source": {0: "B", 1: "S"}, "lengths": {0: "B"},
                                                                  **kv_axes})}
    prefix = torch.tensor([[BOS, 5, 6], [BOS, 6, 5]])      # t > 1: the causal mask is part of the trace
    args = (prefix, memory["mask"], *(memory[name] for name in kv))
    graphs["decoder_step"] = export_graph(TransformerDecoderGraph(model), args, out / "decoder_step.onnx",
                                          ["prefix", "mask", *kv], ["logits", "weights"],
                                          {"prefix": {0: "B", 1: "t"}, "mask": {0: "B", 1: "S"}, **kv_axes,
                                           "logits": {0: "B"}, "weights": {0: "B", 1: "S"}})
    return graphs


def export_separator_lm(model, out: Path) -> dict:
    memory = model.encode(torch.tensor([[5, 6, 7], [5, 6, 0]]), torch.tensor([3, 2]))   # left-padded (B, S)
    prefix = torch.tensor([[SEP, 5, 6], [SEP, 6, 5]])      # t > 1: the causal mask is part of the trace
    return {"decoder_step": export_graph(SeparatorStepGraph(model), (memory["source"], memory["mask"], prefix),
                                         out / "decoder_step.onnx", ["source", "mask", "prefix"], ["logits"],
                                         {"source": {0: "B", 1: "S"}, "mask": {0: "B", 1: "S"},
                                          "prefix": {0: "B", 1: "t"}, "logits": {0: "B"}})}


def export_rnn_seq2seq(model, out: Path) -> dict:
    source, lengths = torch.tensor([[5, 6, 7], [5, 6, 0]]), torch.tensor([3, 2])
    memory = model.encode(source, lengths)
    names = [name for name in MEMORY if name in memory]
    axes = {"source": {0: "B", 1: "S"}, "lengths": {0: "B"}, "outputs": {0: "B", 1: "S"}, "h0": {0: "B"},
            "c0": {0: "B"}, "context": {0: "B"}, "prepared": {0: "B", 1: "S"}}
    graphs = {"encoder": export_graph(EncoderGraph(model, names), (source, lengths), out / "encoder.onnx",
                                      ["source", "lengths"], names, {k: v for k, v in axes.items() if k in
                                                                     ["source", "lengths", *names]})}
    lstm = "c0" in memory
    values = {"tokens": torch.tensor([2, 2]), "h": memory["h0"], "c": memory.get("c0"), **memory}   # (B, L, D)
    states = ["h", "c"] if lstm else ["h"]
    inputs = ["tokens", *states, *(["outputs", "mask", "prepared"] if model.attends else ["context"])]
    outputs = ["logits", *(f"next_{n}" for n in states), *(["weights"] if model.attends else [])]
    step_axes = {"tokens": {0: "B"}, "h": {0: "B"}, "c": {0: "B"}, "outputs": {0: "B", 1: "S"},
                 "mask": {0: "B", 1: "S"}, "context": {0: "B"}, "prepared": {0: "B", 1: "S"}, "logits": {0: "B"},
                 "next_h": {0: "B"}, "next_c": {0: "B"}, "weights": {0: "B", 1: "S"}}
    graphs["decoder_step"] = export_graph(DecoderStepGraph(model, inputs, lstm), tuple(values[n] for n in inputs),
                                          out / "decoder_step.onnx", inputs, outputs,
                                          {k: v for k, v in step_axes.items() if k in inputs + outputs})
    return graphs


# ---------------------------------------------------------------------------- what the export says about itself

SOURCE = "the quick brown fox jumps over the lazy dog ."    # the example's source, unless its words are known


def side_files(v) -> dict[str, tuple[str, object, object]]:
    """{side: (file, tokenizer, vocabulary)}: one file for both sides when they share their vocabulary, else
    source_* and target_*; a `tokenizers` tokenizer.json for BPE, a vocab.txt for words and characters."""
    shared = v.source_vocab is v.target_vocab
    sides = {"source": (v.source_tokenizer, v.source_vocab), "target": (v.target_tokenizer, v.target_vocab)}
    return {side: (f"{'' if shared else side + '_'}{'tokenizer.json' if t.kind == 'bpe' else 'vocab.txt'}", t, vocab)
            for side, (t, vocab) in sides.items()}


def files(trained, out: Path) -> dict[str, str]:
    """The tokenizer and vocabulary files of both sides: {file: what it holds}."""
    described = {}
    for side, (name, tokenizer, vocab) in side_files(trained.vocabulary).items():
        if name in described:                     # shared: the source side wrote it
            continue
        sides = side if name.startswith(side) else "source and target"
        if tokenizer.kind == "bpe":
            atomic_write_text(out / name, bpe_tokenizer(tokenizer, vocab).to_str(pretty=True))
            described[name] = (f"the {sides} side's Hugging Face `tokenizers` tokenizer (byte-level BPE): "
                               f"`encode(text).ids` are the graph's ids of a text, `decode(ids)` the text")
        else:
            write_tokens(out / name, vocab.tokens)
            moses = tokenizer.kind == "moses"
            unit = f"Moses words (sacremoses, {tokenizer.lang!r})" if moses else f"{tokenizer.unit}s"
            described[name] = f"the {sides} side's {len(vocab)} {unit}, specials first, {TOKEN_LINES}"
    return described


def metadata(trained) -> dict:
    """metadata_props of the encoder and decoder-step graphs."""
    v = trained.vocabulary
    return {"scores": "logits of the next target token: log_softmax gives its log-probabilities",
            "source_vocab_size": len(v.source_vocab), "target_vocab_size": len(v.target_vocab),
            "source_tokenizer": v.source_tokenizer.kind, "target_tokenizer": v.target_tokenizer.kind,
            "max_positions": trained.config.model.max_positions}


def about(trained, manifest: dict) -> dict:
    """The README's part of a sequence-to-sequence model (`seqlab.export.readme`)."""
    v, m, arch = trained.vocabulary, trained.config.model, trained.config.model.arch
    V, P = len(v.target_vocab), m.max_positions
    meanings = {
        "source": "each source's token ids, right-padded with <pad> (0)" if arch != "lm" else
                  "each source's token ids, left-padded with <pad> (0): every source ends at the last column",
        "lengths": "each source's number of tokens",
        "outputs": "the encoder's state at each source position (what attention reads)",
        "h0": "the encoder's final hidden state, batch-first (B, layers, width): the decoder's first `h`",
        "c0": "the encoder's final LSTM cell state: the decoder's first `c`",
        "context": "the encoder's final state, read by every decoder step (no attention)",
        "prepared": "the attention's keys, computed once per source",
        "tokens": "the target token read at this step: <s> (2) first, then each output token",
        "h": "the decoder's hidden state before the step: `h0` first, then `next_h`",
        "c": "the decoder's LSTM cell state before the step: `c0` first, then `next_c`",
        "mask": "True at each real source position, False at padding",
        "prefix": "the target tokens so far, <sep> (4) first" if arch == "lm" else
                  "the target tokens so far, <s> (2) first: the graph re-reads them all at each step (no cache)",
        "logits": f"scores of the next target token over the {V} target tokens",
        "next_h": "the hidden state after the step: `h` of the next step",
        "next_c": "the cell state after the step: `c` of the next step",
        "weights": "the attention weights over the source positions of this step (each row sums to 1)"}
    for layer in range(m.num_layers if arch == "transformer" else 0):
        meanings[f"k{layer}"] = f"decoder layer {layer}'s cross-attention keys over the source (B, heads, S, head size)"
        meanings[f"v{layer}"] = f"decoder layer {layer}'s cross-attention values over the source"
    files = side_files(v)
    tokenize = []
    for side, (name, tokenizer, _) in files.items():
        if tokenizer.kind == "bpe":
            tokenize.append(f"The {side} side is byte-level BPE: `Tokenizer.from_file(\"{name}\").encode(text).ids` "
                            "(the `tokenizers` library) are its ids, `decode(ids)` gives text back")
        elif tokenizer.kind == "moses":
            tokenize.append(f"The {side} side reads words as Moses splits them (the `sacremoses` library): "
                            f"`{moses_call(tokenizer, 'text')}`, each its id in {name} (one token per line, the line "
                            f"number its id), or <unk> (1); `{moses_call(tokenizer, 'tokens', back=True)}` joins "
                            "them back into text")
        else:
            unit = "whitespace-separated words (Python's `str.split()`)" if tokenizer.kind == "word" else "characters"
            tokenize.append(f"The {side} side reads {unit}, each its id in {name} (one token per line, the line number "
                            "its id), or <unk> (1)")
    limit = f", cut to its first {trained.config.data.max_source_length} tokens" \
        if trained.config.data.max_source_length else ""
    tokenize[0] += f"{limit}; an empty source reads as one <unk>"
    text = (". ".join(tokenize) + ". The output starts after <s> (2)"
            f"{' (the lm: after the source and <sep> (4))' if arch == 'lm' else ''} and ends at the first </s> (3). "
            f"Token-list files: {TOKEN_LIST_NOTE}.")
    scores = (f"`logits` (B, {V}) are unnormalised scores of the next target token: `log_softmax(logits)` gives its "
              "log-probabilities (natural log); a translation's score in seqlab is their sum. seqlab never generates "
              "<pad>, <s> or <sep> (0, 2, 4: it sets their logits to -inf), and stops at </s> (3) or after 2 x the "
              "source length + 10 tokens" + (f", within the {P} positions" if arch in ("transformer", "lm") else "")
              + "; greedy decoding takes the argmax at each step, as the example does, beam search the best "
              "hypotheses (`seqlab translate --beam`).")
    sample = SOURCE
    if v.source_tokenizer.kind in ("word", "moses") and len(v.source_vocab) > 8:
        sample = v.source_tokenizer.detokenize(v.source_vocab.tokens[5:11])
    attends = f" with {m.attention} attention" if arch not in ("transformer", "lm") and m.attention != "none" else ""
    return {"summary": f"A {arch} sequence-to-sequence model{attends}, from {v.source_tokenizer.unit}s to "
                       f"{v.target_tokenizer.unit}s.",
            "graphs": graph_docs(arch, trained.model.attends),
            "axes": {"B": "the sources of a batch", "S": "the source tokens (of the longest)",
                     "t": "the target tokens so far"},
            "meanings": meanings, "scores": scores, "tokenize": text,
            "example": example(trained, files, sample),
            "prints": f"It prints the ids of the greedy output for {json.dumps(sample)}, then its text: what seqlab "
                      "gives (`seqlab translate RUN --beam 1`)."}


def graph_docs(arch: str, attends: bool) -> dict[str, str]:
    """What each graph computes, in a user's words."""
    if arch == "lm":
        return {"decoder_step": "one step of the separator language model: the sources (left-padded), their mask and "
                                "the target tokens so far after <sep> -> the scores of the next target token; all of "
                                "it is re-read at every step (no cache)"}
    if arch == "transformer":
        return {"encoder": "a batch of sources -> each decoder layer's cross-attention keys and values over them",
                "decoder_step": "one decoder step: the target tokens so far, the source mask and the encoder's keys "
                                "and values -> the scores of the next target token and the cross-attention weights "
                                "over the source (the last layer's, averaged over heads); the target tokens are "
                                "re-read at every step (no cache)"}
    return {"encoder": "a batch of sources -> what the decoder reads: the encoder's state at each source position "
                       "and its final state",
            "decoder_step": "one decoder step: the target token read, the decoder's state before it and the encoder's "
                            "memory -> the scores of the next target token, the state after it"
                            + (", and the attention weights over the source" if attends else "")}


def moses_call(tokenizer, argument: str, back: bool = False) -> str:
    """The sacremoses call of a moses side: `MosesTokenizer("en").tokenize(text, ...)` as
    `seqlab.data.tokenizers.MosesTokenizer` makes it, or (back) its detokenizer's."""
    if back:
        return f'MosesDetokenizer("{tokenizer.lang}").detokenize({argument}, unescape=False)'
    return f'MosesTokenizer("{tokenizer.lang}").tokenize({argument}, aggressive_dash_splits=True, escape=False)'


def example(trained, files: dict, sample: str) -> str:
    """The README's program: the greedy output of `sample`, as `seqlab.families.seq2seq.exported.ExportedSeq2Seq`
    decodes it."""
    arch, P = trained.config.model.arch, trained.config.model.max_positions
    max_source = trained.config.data.max_source_length
    bpe = any(t.kind == "bpe" for _, t, _ in files.values())
    moses = sorted({"MosesTokenizer" if side == "source" else "MosesDetokenizer"
                    for side, (_, t, _) in files.items() if t.kind == "moses"})
    lines = ["import numpy as np", "import onnxruntime as ort", *(["from tokenizers import Tokenizer"] if bpe else []),
             *([f"from sacremoses import {', '.join(moses)}"] if moses else []), ""]
    read = {}
    for side, (name, tokenizer, _) in files.items():
        shared = side == "target" and name == files["source"][0]
        if tokenizer.kind == "bpe":
            lines += ["target_tokenizer = source_tokenizer" if shared else
                      f'{side}_tokenizer = Tokenizer.from_file("{name}")']
            read[side] = "source_tokenizer.encode(text).ids" if side == "source" else "target_tokenizer.decode(output)"
        else:
            lines += ["target_vocab = source_vocab" if shared else f"{side}_vocab = {token_list(name)}"]
            word = tokenizer.kind == "word"
            if side == "source":
                split = {"word": "text.split()", "char": "text"}.get(tokenizer.kind) or moses_call(tokenizer, "text")
                lines += ["index = {token: i for i, token in enumerate(source_vocab)}"]
                read[side] = f"[index.get(token, 1) for token in {split}]"
            elif tokenizer.kind == "moses":
                read[side] = moses_call(tokenizer, "[target_vocab[i] for i in output]", back=True)
            else:
                read[side] = ('" "' if word else '""') + ".join(target_vocab[i] for i in output)"
    cut = f"[:{max_source}]" if max_source else ""
    lines += [f"text = {json.dumps(sample, ensure_ascii=False)}",
              commented(f"ids = {read['source']}{cut} or [1]", "an empty source: one <unk> (1)")]
    if arch != "lm":
        lines += ['encoder = ort.InferenceSession("encoder.onnx")']
    lines += ['decoder = ort.InferenceSession("decoder_step.onnx")',
              commented("source, mask = np.array([ids], np.int64), np.ones((1, len(ids)), bool)", "(1, S)")]
    if arch == "lm":
        lines += [f"limit = min(2 * len(ids) + 10, max({P} - len(ids), 1))"]
    elif arch == "transformer":
        lines += [f"limit = min(2 * len(ids) + 10, {P})"]
    else:
        lines += ["limit = 2 * len(ids) + 10"]
    if arch != "lm":
        lines += ['names = [output.name for output in encoder.get_outputs()]',
                  commented('memory = dict(zip(names, encoder.run(None, {"source": source, "lengths": '
                            'np.array([len(ids)])})))', "k0, v0, ..." if arch == "transformer" else "h0, ...")]
    if arch in ("transformer", "lm"):
        start = 4 if arch == "lm" else 2
        feeds = '{"source": source, "mask": mask, "prefix": np.array([prefix])}' if arch == "lm" else \
            '{**memory, "mask": mask, "prefix": np.array([prefix])}'
        lines += [commented(f"prefix, output = [{start}], []", "<sep> first" if arch == "lm" else "<s> first"),
                  commented("for _ in range(limit):", "greedy: the most likely next token"),
                  f'    logits = decoder.run(["logits"], {feeds})[0][0]']
    else:
        state = '{"h": memory["h0"], "c": memory["c0"]}' if arch == "lstm" else '{"h": memory["h0"]}'
        lines += ['inputs = [value.name for value in decoder.get_inputs()]',
                  'outputs = [value.name for value in decoder.get_outputs()]',
                  commented(f"state, token, output = {state}, 2, []", "<s> first"),
                  commented("for _ in range(limit):", "greedy: the most likely next token"),
                  '    values = {**memory, **state, "mask": mask, "tokens": np.array([token])}',
                  "    out = dict(zip(outputs, decoder.run(None, {name: values[name] for name in inputs})))",
                  '    state = {name: out["next_" + name] for name in state}',
                  '    logits = out["logits"][0]']
    lines += [commented(f"    logits[{list(NEVER_GENERATED)}] = -np.inf", "never <pad>, <s> or <sep>"),
              "    token = int(logits.argmax())",
              commented("    if token == 3:", "</s>: the end"),
              "        break",
              "    output.append(token)"]
    if arch in ("transformer", "lm"):
        lines += ["    prefix.append(token)"]
    lines += ["print(output)", f"print({read['target']})"]
    return "\n".join(lines) + "\n"
