"""A language model's ONNX graph (`seqlab export RUN --format onnx`): one decoding step, the state as inputs
and outputs (batch and sequence axes dynamic):

    rnn / lstm / gru   step.onnx   tokens (B,), h (B, L, H)[, c] -> logits (B, V), h[, c]
    ffn                step.onnx   tokens (B,), history (B, N-1) -> logits (B, V), history
    transformer        step.onnx   window (B, n) -> logits (B, V) of the last position

The transformer re-reads its window of at most `context` tokens at every step instead of carrying a KV
cache: the graph is the training forward pass (no in-graph cache writes, no position or mask bookkeeping),
and it reproduces the PyTorch model's sliding behaviour exactly (when the context is full, it goes on from
its most recent context // 2 tokens), at a cost that grows with the window rather than one token per step.
`seqlab.families.lm.exported` runs it.

What the export says about itself comes from here too: `files` writes the tokenizer, vocabulary and label
files a user reads without seqlab, `metadata` gives the graphs' metadata_props and `about` the README's part
(`seqlab.export.readme`), whose example tests/test_export_readme.py runs.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from seqlab.data.vocab import EOS, NEVER_GENERATED, UNK
from seqlab.errors import SeqlabError
from seqlab.export.graphs import Graph, export_graph, layers_first
from seqlab.export.readme import commented
from seqlab.export.tokens import TOKEN_LINES, TOKEN_LIST_NOTE, token_list, write_tokens
from seqlab.families.lm.hf import hf_tokenizer
from seqlab.fileio import atomic_write_text


class RecurrentStepGraph(Graph):
    """tokens (B,), h (B, L, H)[, c (B, L, H)] -> logits (B, V), h[, c]: one step of an RNN language model."""

    def forward(self, tokens: Tensor, h: Tensor, c: Tensor | None = None):
        state = layers_first(h) if c is None else (layers_first(h), layers_first(c))   # (L, B, H)
        logits, state, _ = self.model.step(tokens, state)                  # (B, V)
        if c is None:
            return logits, layers_first(state)
        return logits, *(layers_first(part) for part in state)


class WindowStepGraph(Graph):
    """tokens (B,), history (B, N-1) -> logits (B, V), history: one step of the window (FFN) LM."""

    def forward(self, tokens: Tensor, history: Tensor):
        logits, history, _ = self.model.step(tokens, history)              # (B, V), (B, N-1)
        return logits, history


class TransformerStepGraph(Graph):
    """window (B, n) -> logits (B, V) of its last position: the transformer LM re-reads its window."""

    def forward(self, window: Tensor) -> Tensor:
        logits, _ = self.model(window, None)                               # (B, n, V)
        return logits[:, -1]                                               # (B, V)


def refuse(saved: dict) -> None:
    """What cannot be exported, from the run's config.json, before anything is loaded."""
    if saved.get("data", {}).get("reverse"):   # the runtime would generate right to left, as `generate` refuses to
        raise SeqlabError("a --reverse language model reads its text right to left: it is a feature extractor for "
                          "--lm-features, not exported to ONNX")


def export(trained, out: Path) -> dict:
    """The step graph of the trained LM into `out`: {"step": its file, inputs and outputs}."""
    model, arch = trained.model, trained.config.model.arch
    tokens, B = torch.tensor([5, 6]), 2
    path = out / "step.onnx"
    if arch == "transformer":
        window = torch.tensor([[EOS, 5, 6], [EOS, 6, 5]])
        return {"step": export_graph(TransformerStepGraph(model), (window,), path, ["window"], ["logits"],
                                     {"window": {0: "B", 1: "n"}, "logits": {0: "B"}})}
    if arch == "ffn":
        history = model.init_state(B)
        return {"step": export_graph(WindowStepGraph(model), (tokens, history), path, ["tokens", "history"],
                                     ["logits", "next_history"], {name: {0: "B"} for name in
                                                                  ("tokens", "history", "logits", "next_history")})}
    state = model.init_state(B)
    lstm = isinstance(state, tuple)
    names = ["h", "c"] if lstm else ["h"]
    args = (tokens, *(layers_first(part) for part in state)) if lstm else (tokens, layers_first(state))
    axes = {"tokens": {0: "B"}, "logits": {0: "B"}, **{n: {0: "B"} for n in names},
            **{f"next_{n}": {0: "B"} for n in names}}
    return {"step": export_graph(RecurrentStepGraph(model), args, path, ["tokens", *names], ["logits", *(
        f"next_{n}" for n in names)], axes)}


# ---------------------------------------------------------------------------- what the export says about itself

PROMPT = "The"           # the example's prompt: one line, short enough for any context
NEW_TOKENS = 40          # the example's continuation


def files(trained, out: Path) -> dict[str, str]:
    """The tokenizer files a user reads without seqlab: tokenizer.json (every tokenizer: it reads the line
    breaks as the model does), and vocab.txt for words and characters. {file: what it holds}."""
    kind, V = trained.tokenizer.kind, len(trained.vocab)
    atomic_write_text(out / "tokenizer.json", hf_tokenizer(trained.tokenizer, trained.vocab))
    described = {"tokenizer.json": f"a Hugging Face `tokenizers` tokenizer ({kind}) that gives the graph's ids of a "
                                   "text, </s> (3) first and at every line break, and decodes them back to text"}
    if kind != "bpe":
        write_tokens(out / "vocab.txt", trained.vocab.tokens)
        described["vocab.txt"] = f"the model's {V} tokens ({trained.tokenizer.unit}s after the specials), {TOKEN_LINES}"
    return described


def metadata(trained) -> dict:
    """metadata_props of the step graph."""
    return {"scores": "logits: log_softmax gives the next token's log-probabilities", "vocab_size": len(trained.vocab),
            "tokenizer": trained.tokenizer.kind,
            "context": getattr(trained.model, "context_length", None) or 0}


def about(trained, manifest: dict) -> dict:
    """The README's part of a language model (`seqlab.export.readme`)."""
    arch, kind, V, m = trained.config.model.arch, trained.tokenizer.kind, len(trained.vocab), trained.config.model
    context = manifest["context"]
    meanings = {
        "tokens": "the token read at this step, one per row",
        "h": "the hidden state before the step, batch-first (B, layers, hidden): zeros before the first token",
        "c": "the LSTM's cell state before the step: zeros before the first token",
        "next_h": "the hidden state after the step: give it as `h` to the next step",
        "next_c": "the cell state after the step: give it as `c` to the next step",
        "history": f"the {m.context - 1} tokens before `tokens`, oldest first: </s> (3) before the text starts",
        "next_history": "the history after the step: give it as `history` to the next step",
        "window": f"the tokens read so far, oldest first, at most {context}: the graph reads them all at each step "
                  "(no cache); the rows of one batch are of one length (no padding mask)",
        "logits": f"scores of the next token over the {V} tokens of the vocabulary",
    }
    if kind == "bpe":
        tokenize = ("`tokenizer.json` is a Hugging Face `tokenizers` file: `Tokenizer.from_file(\"tokenizer.json\")"
                    ".encode(text).ids` are the ids seqlab feeds the model for `text`: </s> (3) first, as seqlab "
                    "starts every text at a line start, then each line's byte-level BPE pieces with </s> for every "
                    "line break (`encode(text, add_special_tokens=False)` leaves out the first </s>); every text has "
                    "ids, none reads as <unk>. `decode(ids)` gives the text back, a </s> as a line break.")
    else:
        units = "whitespace-separated words (Python's `str.split()`)" if kind == "word" else "characters"
        tokenize = (f"`vocab.txt` lists the {V} tokens, {TOKEN_LIST_NOTE}. A line of text is read as its {units}, "
                    "each its id, or <unk> (1) when the vocabulary lacks it; </s> (3) comes before the text and at "
                    "every line break. `tokenizer.json` does the same with the `tokenizers` library "
                    "(`Tokenizer.from_file(\"tokenizer.json\").encode(text).ids`, and `decode(ids)` back).")
    scores = (f"`logits` are unnormalised scores of the next token over the {V} ids (B, {V}): `log_softmax(logits)` "
              "gives the next token's log-probabilities (natural log), which seqlab reports as a text's scores (its "
              "perplexity is exp of their negative mean). Ids 0-4 are the specials <pad>, <unk>, <s>, </s>, <sep>: "
              "</s> (3) ends every line, <unk> (1) stands for what the vocabulary lacks; seqlab never generates "
              "<pad>, <s> or <sep> (it sets their logits to -inf before choosing).")
    if arch == "transformer":
        scores += (f" The transformer reads at most {context} tokens: when its window is full, seqlab goes on from "
                   f"the most recent {max(1, context // 2)}, as the example does.")
    step = {"transformer": "one step of the transformer language model: the tokens read so far (its window) -> the "
                           "scores of the next token; the window is re-read at every step (no cache)",
            "ffn": f"one step of the window (feedforward) language model: the token read and the {m.context - 1} "
                   "before it -> the scores of the next token, and the history after it"}.get(
        arch, f"one step of the {arch} language model: the token read and the state before it -> the scores of the "
              "next token, and the state after it")
    return {"summary": f"A {arch} language model over {trained.tokenizer.unit}s ({V} tokens), for continuing and "
                       "scoring text.", "graphs": {"step": step},
            "axes": {"B": "the rows of a batch", "n": f"the window's tokens (at most {context})"},
            "meanings": meanings, "scores": scores, "tokenize": tokenize,
            "example": example(arch, kind, m, context),
            "prints": f"It prints the ids of the greedy continuation of \"{PROMPT}\" ({NEW_TOKENS} tokens), then the "
                      "prompt and its continuation as text: what seqlab gives (`seqlab generate RUN --prompt "
                      f"\"{PROMPT}\" --greedy --max-tokens {NEW_TOKENS}` continues it so)."}


def example(arch: str, kind: str, m, context: int | None) -> str:
    """The README's program: the greedy continuation of PROMPT with numpy and onnxruntime (and `tokenizers` for
    BPE), as `seqlab.families.lm.exported.ExportedLM.generate` decodes it."""
    lines = ["import numpy as np", "import onnxruntime as ort"]
    if kind == "bpe":
        lines += ["from tokenizers import Tokenizer", "", 'tokenizer = Tokenizer.from_file("tokenizer.json")',
                  commented(f'ids = tokenizer.encode("{PROMPT}").ids', "</s> (3) first: a line start")]
    else:
        read = f"index.get(word, 1) for word in \"{PROMPT}\".split()" if kind == "word" else \
            f"index.get(char, 1) for char in \"{PROMPT}\""
        lines += ["", f"vocab = {token_list('vocab.txt')}", "index = {token: i for i, token in enumerate(vocab)}",
                  commented(f"ids = [3] + [{read}]", "</s> (3), then each id or <unk> (1)")]
    lines += ['session = ort.InferenceSession("step.onnx")']
    if arch == "transformer":
        keep = max(1, context // 2)
        lines += [commented('state = {"window": []}', "the tokens the graph re-reads"), "", "",
                  "def step(token):",
                  '    """Read one token; the scores of the next one (V,)."""',
                  '    window = state["window"] + [token]',
                  commented(f"    if len(window) > {context}:", f"full: go on from the most recent {keep}"),
                  f"        window = window[-{keep}:]",
                  '    state["window"] = window',
                  '    return session.run(["logits"], {"window": np.array([window], np.int64)})[0][0]']
    elif arch == "ffn":
        lines += [commented(f'state = {{"history": np.full((1, {m.context - 1}), 3, np.int64)}}',
                            "the tokens before: </s> (3)"), "", "",
                  "def step(token):",
                  '    """Read one token; the scores of the next one (V,)."""',
                  '    logits, state["history"] = session.run(None, {"tokens": np.array([token], np.int64), **state})',
                  "    return logits[0]"]
    else:
        zeros = f"np.zeros((1, {m.num_layers}, {m.hidden_size}), np.float32)"
        cell = f', "c": {zeros}' if arch == "lstm" else ""
        lines += [commented(f'state = {{"h": {zeros}{cell}}}', "(B, layers, hidden), zeros first"), "", "",
                  "def step(token):",
                  '    """Read one token; the scores of the next one (V,)."""',
                  '    logits, *new = session.run(None, {"tokens": np.array([token], np.int64), **state})',
                  commented('    state.update(zip(["h", "c"], new))', "next_h (and next_c): the state after"),
                  "    return logits[0]"]
    lines += ["", "", "for token in ids[:-1]:", "    step(token)", "logits, generated = step(ids[-1]), []",
              commented(f"for _ in range({NEW_TOKENS}):", "greedy: the most likely next token,"),
              commented(f"    logits[{sorted(NEVER_GENERATED + (UNK,))}] = -np.inf",
                        "never <pad>, <unk>, <s> or <sep>"),
              "    generated.append(int(logits.argmax()))",
              "    logits = step(generated[-1])",
              "print(generated)"]
    if kind == "bpe":
        lines += ["print(tokenizer.decode(ids[1:] + generated))"]
    elif kind == "word":
        lines += ['words = " ".join(vocab[i] for i in ids[1:] + generated)',
                  commented('print("\\n".join(" ".join(line.split()) for line in words.split("</s>")))',
                            "</s>: a line break")]
    else:
        lines += ['print("".join("\\n" if vocab[i] == "</s>" else vocab[i] for i in ids[1:] + generated))']
    return "\n".join(lines) + "\n"
