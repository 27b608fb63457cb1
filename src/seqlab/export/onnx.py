"""`seqlab export RUN --format onnx`: a trained run's inference graphs as ONNX files, with everything needed
to run them without the run directory (`seqlab.export.runtime` runs them on onnxruntime).

What is exported, per task (batch and sequence axes dynamic; opset 17):

    classifier   classifier.onnx   words (B, T), lengths (B,) -> scores (B, K)        (features arch:
                                   features (B, F) -> scores (B, K))
    tagger       tagger.onnx       words (B, T), lengths (B,)[, chars (B, T, C)] -> emissions (B, T, K);
                                   with a CRF, crf.json holds the transition, start and end scores (the
                                   scheme's penalties added) for Viterbi in numpy
    lm           step.onnx         one decoding step, the state as inputs and outputs:
                                     rnn / lstm / gru   tokens (B,), h (B, L, H)[, c] -> logits (B, V), h[, c]
                                     ffn                tokens (B,), history (B, N-1) -> logits (B, V), history
                                     transformer        window (B, n) -> logits (B, V) of the last position
                                   The transformer re-reads its window of at most `context` tokens at every
                                   step instead of carrying a KV cache: the graph is the training forward
                                   pass (no in-graph cache writes, no position or mask bookkeeping), and
                                   it reproduces the PyTorch model's sliding behaviour exactly (when the
                                   context is full, it goes on from its most recent context // 2 tokens),
                                   at a cost that grows with the window rather than one token per step.
    seq2seq      rnn / lstm / gru (with or without attention):
                 encoder.onnx      source (B, S), lengths (B,) -> the memory (outputs, h0[, c0], context
                                   [, prepared])
                 decoder_step.onnx tokens (B,), h (B, L, D)[, c], the memory -> logits (B, V), h[, c], and with
                                   attention the weights (B, S) over the source
                 transformer:
                 encoder.onnx      source (B, S), lengths (B,) -> k0, v0, k1, ... (B, nh, S, hs), each decoder
                                   layer's cross-attention keys and values
                 decoder_step.onnx prefix (B, t), mask (B, S), k0, v0, ... -> logits (B, V) and the last layer's
                                   cross-attention weights (B, S), averaged over heads, of the last position
                 lm (source ⊕ <sep> ⊕ target):
                 decoder_step.onnx source (B, S) left-padded, mask (B, S), prefix (B, t) -> logits (B, V) of
                                   the last position; each row's positions count from its own first token
                                   (clamped to the last position, as PyTorch's), its padding masked out of
                                   every key. The left-padding is done in numpy (no encoder graph).
                 Both transformers re-read their target prefix <s> y_1 .. y_{t-1} (<sep> y_1 .. for the lm) at
                 every step, as the transformer LM re-reads its window: their state is the prefix. The step
                 graph is the teacher-forced forward pass, exact and free of in-graph cache writes and
                 per-row cache bookkeeping, at a cost that grows with the prefix (and, for the lm, the source).

Every state and memory tensor is batch-first (the recurrent states are transposed inside the graphs), so
beam search selects the rows of any of them with one index on axis 0.

The export directory holds the .onnx files, manifest.json (task, arch, each graph's inputs and outputs,
the seqlab, torch and opset versions), and the run's config.json and vocabulary, tokenizer and label files.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import torch
from torch import Tensor, nn

from seqlab.data.vocab import BOS, EOS, SEP
from seqlab.errors import SeqlabError
from seqlab.export import prepare_output
from seqlab.export.manifest import FORMAT_VERSION, read_manifest  # noqa: F401  (read_manifest: re-exported)
from seqlab.fileio import atomic_write_json
from seqlab.models.base import EncoderDecoderState
from seqlab.nn.attention import MultiHeadAttention
from seqlab.nn.recurrent import RecurrentStack
from seqlab.version import __version__

OPSET = 17
# the run's files an export carries (those that exist): the vocabulary, tokenizer, labels and config
RUN_FILES = ("config.json", "vocab.json", "tokenizer.json", "labels.json", "chars.json", "features.json")


# ---------------------------------------------------------------------------- the graphs

class ClassifierGraph(nn.Module):
    """words (B, T), lengths (B,) -> class scores (B, K)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, words: Tensor, lengths: Tensor) -> Tensor:
        return self.model(words, lengths)                                  # (B, K)


class FeaturesGraph(ClassifierGraph):
    """features (B, F) -> class scores (B, K)."""

    def forward(self, features: Tensor) -> Tensor:
        return self.model(None, None, features)                            # (B, K)


class TaggerGraph(ClassifierGraph):
    """words (B, T), lengths (B,)[, chars (B, T, C)] -> emission scores (B, T, K)."""

    def forward(self, words: Tensor, lengths: Tensor, chars: Tensor | None = None) -> Tensor:
        return self.model(words, lengths, chars)                           # (B, T, K)


def layers_first(h: Tensor) -> Tensor:
    """(B, L, H) <-> (L, B, H): the graphs' states are batch-first, the recurrent stacks' layer-first."""
    return h.transpose(0, 1)


class RecurrentStepGraph(ClassifierGraph):
    """tokens (B,), h (B, L, H)[, c (B, L, H)] -> logits (B, V), h[, c]: one step of an RNN language model."""

    def forward(self, tokens: Tensor, h: Tensor, c: Tensor | None = None):
        state = layers_first(h) if c is None else (layers_first(h), layers_first(c))   # (L, B, H)
        logits, state, _ = self.model.step(tokens, state)                  # (B, V)
        if c is None:
            return logits, layers_first(state)
        return logits, *(layers_first(part) for part in state)


class WindowStepGraph(ClassifierGraph):
    """tokens (B,), history (B, N-1) -> logits (B, V), history: one step of the window (FFN) LM."""

    def forward(self, tokens: Tensor, history: Tensor):
        logits, history, _ = self.model.step(tokens, history)              # (B, V), (B, N-1)
        return logits, history


class TransformerStepGraph(ClassifierGraph):
    """window (B, n) -> logits (B, V) of its last position: the transformer LM re-reads its window."""

    def forward(self, window: Tensor) -> Tensor:
        logits, _ = self.model(window, None)                               # (B, n, V)
        return logits[:, -1]                                               # (B, V)


MEMORY = ("outputs", "h0", "c0", "context", "prepared")


class EncoderGraph(ClassifierGraph):
    """source (B, S), lengths (B,) -> the RNN encoder-decoder's memory, in `names` order."""

    def __init__(self, model, names: list[str]):
        super().__init__(model)
        self.names = names

    def forward(self, source: Tensor, lengths: Tensor):
        memory = self.model.encode(source, lengths)
        return tuple(memory[name] for name in self.names)


class DecoderStepGraph(ClassifierGraph):
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


class TransformerEncoderGraph(ClassifierGraph):
    """source (B, S), lengths (B,) -> the cross-attention keys and values of every decoder layer, k0, v0,
    k1, ... (B, nh, S, hs): the transformer encoder's output, projected once per sentence."""

    def forward(self, source: Tensor, lengths: Tensor):
        memory = self.model.encode(source, lengths)
        return tuple(memory[f"{kv}{layer}"] for layer in range(len(self.model.decoder)) for kv in "kv")


class TransformerDecoderGraph(ClassifierGraph):
    """prefix (B, t), mask (B, S), k0, v0, ... -> logits (B, V) and cross-attention weights (B, S) (the last
    layer's, averaged over heads) of the prefix's last position: the decoder re-reads the target prefix
    <s> y_1 .. y_{t-1} at every step, positions 0 .. t-1, as teacher forcing does."""

    def forward(self, prefix: Tensor, mask: Tensor, *keys_values: Tensor):
        memory = {"mask": mask, **{f"{kv}{layer}": keys_values[2 * layer + i]
                                   for layer in range(len(self.model.decoder)) for i, kv in enumerate("kv")}}
        x = self.model._embed(self.model.target_embedding, self.model.target_positions, prefix)   # (B, t, d)
        logits, weights = self.model._decode(x, memory, None, need_weights=True)   # (B, t, V), (B, t, S)
        return logits[:, -1], weights[:, -1]


class SeparatorStepGraph(ClassifierGraph):
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


# ---------------------------------------------------------------------------- exporting

@contextlib.contextmanager
def quiet_stderr():
    """File descriptor 2 to a temporary file while the exporter runs: its C++ side warns that the packed
    sequences' ops have no shape inference (they become the RNN ops' sequence_lens, checked by the tests);
    what it wrote is shown if the export fails."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            held.seek(0)
            sys.stderr.write(held.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def export_graph(module: nn.Module, args: tuple, path: Path, inputs: list[str], outputs: list[str],
                 axes: dict[str, dict[int, str]]) -> dict:
    """One graph to `path` (the TorchScript-based exporter, `dynamo=False`: torch 2.13's default dynamo
    exporter needs onnxscript, which seqlab does not depend on, and the recurrent encoders' packed sequences
    export as ONNX's own RNN ops with per-row lengths only through this one); its inputs and outputs."""
    module.eval()
    with warnings.catch_warnings(), torch.no_grad(), quiet_stderr():
        warnings.simplefilter("ignore")                      # tracer warnings about Python-side shape checks
        torch.onnx.export(module, args, str(path), input_names=inputs, output_names=outputs,
                          dynamic_axes=axes, opset_version=OPSET, dynamo=False)
    return {"file": path.name, "inputs": inputs, "outputs": outputs}


def prepare_for_export(model: nn.Module) -> None:
    """The same parameters, on the implementations that trace with dynamic shapes: every recurrent stack
    on PyTorch's kernels, which export as ONNX's RNN / LSTM / GRU ops (the book's GRU variant, reset before
    U, has no kernel and stays on the cells); self-attention on the textbook code with an explicit causal
    mask (the fused kernel's `is_causal` is chosen from the shapes in Python, which a trace freezes)."""
    for module in model.modules():
        if isinstance(module, RecurrentStack) and module.gru_reset == "after":
            module.set_impl("fused")
        if isinstance(module, MultiHeadAttention):
            module.impl = "textbook"


def export_classifier(trained, out: Path) -> dict:
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


def export_tagger(trained, out: Path) -> dict:
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


def export_lm(trained, out: Path) -> dict:
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


def export_seq2seq(trained, out: Path) -> dict:
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


EXPORTERS = {"classifier": export_classifier, "tagger": export_tagger, "lm": export_lm, "seq2seq": export_seq2seq}


def arch_of(trained, task: str) -> str:
    model = trained.config.model
    return model.encoder if task == "tagger" else model.arch


def export_onnx(run_dir: str | Path, output: str | Path, overwrite: bool = False) -> Path:
    """Export the run's inference graphs to `output` (see the module's docstring); returns the manifest's path."""
    from seqlab.pipelines.runs import read_run_json
    from seqlab.registry import load, run_pipeline

    saved = read_run_json(Path(run_dir))
    for name in ("copy", "coverage"):          # See et al. 2017's pointer-generator: its step has no graph yet
        if saved.get("model", {}).get(name):
            raise SeqlabError(f"--{name} models cannot be exported to ONNX yet")
    if saved.get("data", {}).get("reverse"):   # the runtime would generate right to left, as `generate` refuses to
        raise SeqlabError("a --reverse language model reads its text right to left: it is a feature extractor for "
                          "--lm-features, not exported to ONNX")
    try:
        import onnx  # noqa: F401  (torch.onnx.export writes through it)
    except ImportError:
        raise SeqlabError("seqlab export --format onnx needs the onnx package: pip install 'seqlab[export]'") from None
    run_dir, out = Path(run_dir), Path(output)
    task = run_pipeline(run_dir).name
    trained = load(run_dir)
    arch = arch_of(trained, task)
    prepare_output(out, overwrite)
    prepare_for_export(trained.model)
    trained.model.eval()
    graphs = EXPORTERS[task](trained, out)
    for name in RUN_FILES:
        if (run_dir / name).exists():
            shutil.copyfile(run_dir / name, out / name)
    manifest = {"format": "onnx", "format_version": FORMAT_VERSION, "task": task, "arch": arch, "graphs": graphs,
                "files": sorted(p.name for p in out.iterdir()), "crf": (out / "crf.json").exists(),
                "context": getattr(trained.model, "context_length", None), "seqlab_version": __version__,
                "torch_version": torch.__version__, "opset": OPSET, "source_run": str(run_dir.resolve())}
    atomic_write_json(out / "manifest.json", manifest)
    return out / "manifest.json"
