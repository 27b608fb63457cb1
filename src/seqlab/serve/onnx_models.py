"""`seqlab serve --runtime onnx EXPORT_DIR...`: export directories (`seqlab export RUN --format onnx`) served
without PyTorch on the request path.

Each adapter gives the app (`seqlab.serve.app`) what it calls on a run's API object (TrainedClassifier,
TrainedTagger, TrainedLM, TrainedSeq2Seq), on top of onnxruntime (`seqlab.export.runtime`) and the numpy
searches of `seqlab.export.decoding`:

    OnnxClassifier   classify(texts) -> [Prediction]
    OnnxTagger       tag_sentences(sentences) -> [[(tag, p)]], scheme
    OnnxLM           stream(prompt, **options) -> text pieces; score(text); evaluate_text(text)
    OnnxSeq2Seq      generate(texts, beam, max_length, length_penalty, attention) -> [Output]

The answers are the PyTorch model's (tests/test_serve_onnx.py): labels, tags, greedy and beam outputs
identical, probabilities, scores and attention weights within 1e-4. Sampling draws from the same
distribution with numpy's generator, so a seed gives another continuation than the PyTorch server's.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import seqlab.serve.schemas as schemas
from seqlab.data.grouping import length_batches
from seqlab.data.vocab import EOS, UNK
from seqlab.errors import SeqlabError
from seqlab.export.decoding import SamplingOptions, SearchOptions, generate_ids, log_softmax
from seqlab.pipelines.outputs import Output, text_pieces
from seqlab.serve.served import ENDPOINTS, Served, final_metrics

TITLES = {"lm": "a language model", "tagger": "a tagger", "classifier": "a classifier",     # the pipelines' titles
          "seq2seq": "a sequence-to-sequence model"}


def load_exports(exports: Iterable[str | Path], threads: int = 0) -> dict[str, Served]:
    """Each export directory loaded on onnxruntime, by its name; two of one name, or a run directory, are
    refused. `threads`: onnxruntime's threads per graph (0: its default)."""
    from seqlab.export.runtime import load_export

    served: dict[str, Served] = {}
    for export in exports:
        export_dir = Path(export)
        name = export_dir.resolve().name
        if name in served:
            raise SeqlabError(f"two exports are named {name!r} ({served[name].run_dir} and {export_dir}): the API "
                              "names a model by its directory's name; rename one")
        if not (export_dir / "manifest.json").exists() and (export_dir / "config.json").exists():
            raise SeqlabError(f"{export_dir} is a run directory, not an ONNX export: serve it with --runtime torch, "
                              f"or export it (seqlab export {export_dir} --format onnx --output DIR) and serve DIR")
        runtime = load_export(export_dir, threads)
        task = runtime.manifest["task"]
        adapter = ADAPTERS[task](runtime)
        summary = (f"{TITLES[task]} ({runtime.manifest.get('arch')}, {adapter.parameters:,} parameters): the ONNX "
                   f"export of {runtime.manifest.get('source_run', 'a run')}, on onnxruntime")
        served[name] = OnnxServed(name, task, adapter, export_dir, TITLES[task], summary)
    if not served:
        raise SeqlabError("seqlab serve needs at least one export directory")
    return served


@dataclass
class OnnxServed(Served):
    """A loaded export: GET /v1/models reads its task and arch from the manifest, and counts its parameters."""

    def info(self) -> schemas.ModelInfo:
        manifest = self.trained.runtime.manifest
        return schemas.ModelInfo(name=self.name, task=self.task, arch=str(manifest.get("arch", "")),
                                 parameters=self.trained.parameters,
                                 endpoints=[f"/v1/{e}" for e in ENDPOINTS[self.task]],
                                 metrics=final_metrics(self.run_dir), summary=self.summary)


def count_parameters(runtime) -> int:
    """The model's parameters: the manifest's count, or the float initializers of its graphs, each distinct
    tensor once (a weight that two graphs hold counts once), plus a CRF's scores; 0 without the onnx package."""
    if "parameters" in runtime.manifest:
        return int(runtime.manifest["parameters"])
    try:
        import onnx
    except ImportError:
        return 0
    seen: set[tuple] = set()
    total = 0
    for graph in runtime.manifest["graphs"].values():
        model = onnx.load(str(runtime.dir / graph["file"]), load_external_data=False)
        for tensor in model.graph.initializer:
            if tensor.data_type not in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16):
                continue                                  # shapes and indexes, not weights
            key = (tuple(tensor.dims), tensor.raw_data or bytes(np.array(tensor.float_data, np.float32)))
            if key not in seen:
                seen.add(key)
                total += math.prod(tensor.dims)
    if getattr(runtime, "crf", None) is not None:
        total += sum(part.size for part in runtime.crf)   # transitions (K, K), start (K,), end (K,)
    return total


@contextlib.contextmanager
def runtime_errors():
    """onnxruntime's failure on an input as a SeqlabError: the request gets a 422 with one line, not a 500."""
    try:
        yield
    except Exception as error:
        if type(error).__module__ != "onnxruntime.capi.onnxruntime_pybind11_state":
            raise
        raise SeqlabError(f"the ONNX export cannot run this input ({type(error).__name__}: "
                          f"{str(error).splitlines()[0][:300] if str(error) else 'no message'})") from None


class Adapter:
    """What every adapter has: the runtime and the parameter count."""

    def __init__(self, runtime):
        self.runtime = runtime
        self.parameters = count_parameters(runtime)


# ---------------------------------------------------------------------------- classifier and tagger

class OnnxClassifier(Adapter):
    def classify(self, texts: list[str], batch_size: int = 64) -> list:
        """The `Prediction` of each text (`TrainedClassifier.classify`)."""
        empty = [i for i, t in enumerate(texts) if not t.strip()]
        if empty:
            raise SeqlabError(f"text {empty[0] + 1} of {len(texts)} is empty; there is nothing to classify")
        with runtime_errors():
            return self.runtime.classify(texts, batch_size)


class OnnxTagger(Adapter):
    def __init__(self, runtime):
        super().__init__(runtime)
        self.scheme = runtime.scheme
        model = runtime.config["model"]                              # config.json's model group
        self.max_positions = model.get("max_positions") if model.get("encoder") == "transformer" else None

    def tag_sentences(self, sentences: list[list[str]], batch_size: int = 64) -> list[list[tuple[str, float]]]:
        """(tag, probability) for every token (`TrainedTagger.tag_sentences`)."""
        longest = max(map(len, sentences), default=0)
        if self.max_positions is not None and longest > self.max_positions:     # as the PyTorch tagger refuses it
            raise SeqlabError(f"a sentence of {longest} tokens is longer than this transformer tagger's "
                              f"{self.max_positions} positions (--max-positions at training); split it")
        with runtime_errors():
            return self.runtime.tag_sentences(sentences, batch_size)


# ---------------------------------------------------------------------------- language model

class OnnxLM(Adapter):
    """An exported language model: generation (greedy, sampled, beam) and scoring with its step graph."""

    def __init__(self, runtime):
        super().__init__(runtime)
        self.unit = runtime.tokenizer.unit
        self.cached = functools.lru_cache(maxsize=16)(self._logprobs)      # /v1/score asks twice per text

    # the decoder `seqlab.export.decoding` drives
    def step(self, tokens: np.ndarray, state: dict):
        logits, state = self.runtime.step(tokens, state)                       # (B, V)
        return logits, state, None

    def reorder(self, state: dict, index: np.ndarray) -> dict:
        return self.runtime.reorder(state, index)

    def started(self, context: list[int]) -> dict:
        """The state after every token of `context` but the last, which the search feeds (`LanguageModel.start`)."""
        if self.runtime.arch == "transformer":       # its state is the window it re-reads: no step to run
            return {"window": np.array([context[:-1]], np.int64)}                  # (1, T - 1) < context
        state = self.runtime.start(1)
        for token in context[:-1]:
            _, state = self.runtime.step(np.array([token], np.int64), state)
        return state

    def stream(self, prompt: str, **options) -> Iterator[str]:
        """The continuation of `prompt` piece by piece, as `TrainedLM.stream` cuts it (options: those of
        `SamplingOptions`); a bad option or a prompt over the context fails at the first `next()`."""
        options = SamplingOptions(**options)
        context = self.runtime.prompt_ids(prompt)
        with runtime_errors():
            yield from text_pieces(generate_ids(self, self.started(context), context[-1], options), context[1:],
                                   self.runtime.detokenize, options.stop_at_eos, options.beam > 1)

    def generate(self, prompt: str = "", **options) -> str:
        return "".join(self.stream(prompt, **options))

    def logprobs(self, text: str) -> tuple[list[str], list[float], list[int], int]:
        with runtime_errors():
            return self.cached(text)

    def _logprobs(self, text: str) -> tuple[list[str], list[float], list[int], int]:
        """The text's tokens (`</s>` at each line end), each one's log probability given the ones before it,
        their ids and the text's character count, as `TrainedLM.score` and `evaluate_text` count them."""
        lines = text.split("\n")
        if len(lines) > 1 and lines[-1] == "":       # a final newline adds no line
            lines.pop()
        token_lines = self.runtime.tokenizer.tokenize_lines(lines)
        ids = [i for tokens in token_lines for i in [*self.runtime.vocab.encode(tokens), EOS]]
        inputs = [EOS, *ids[:-1]]                    # inputs[p] predicts ids[p]
        if self.runtime.context is None:             # a state carried along the stream
            state, logprobs = self.runtime.start(1), []
            for token, target in zip(inputs, ids, strict=True):
                logits, state = self.runtime.step(np.array([token], np.int64), state)
                logprobs.append(float(log_softmax(logits.astype(np.float32))[0, target]))
        else:
            logprobs = self._window_logprobs(inputs, ids)
        tokens = [t for line in token_lines for t in [*line, "</s>"]]
        return tokens, logprobs, ids, sum(len(line) for line in lines) + len(lines)

    def _window_logprobs(self, inputs: list[int], ids: list[int]) -> list[float]:
        """The transformer's log probabilities as `seqlab.data.batching.sliding_windows` scores them: windows
        of `context` inputs every context / 2 tokens, each target scored in the first window holding it, from
        the inputs of that window up to it. Targets read through windows of the same width run as one batch."""
        context, n = self.runtime.context, len(ids)
        stride = max(1, context // 2)                       # `TrainedLM._batches`' default
        reads: dict[int, list[tuple[int, int]]] = {}          # width -> [(window start, target position)]
        start, scored = 0, 0
        while True:
            stop = min(start + context, n)
            for p in range(scored, stop):
                reads.setdefault(p + 1 - start, []).append((start, p))
            scored = stop
            if stop == n:
                break
            start += stride
        logprobs = [0.0] * n
        for width, group in reads.items():
            window = np.array([inputs[s:s + width] for s, _ in group], np.int64)            # (m, width)
            # the state before the last input, then the step that reads it (no slide: width <= context)
            logits, _ = self.runtime.step(window[:, -1], {"window": window[:, :-1]})         # (m, V)
            lp = log_softmax(logits.astype(np.float32))
            for row, (_, p) in enumerate(group):
                logprobs[p] = float(lp[row, ids[p]])
        return logprobs

    def score(self, text: str) -> list[tuple[str, float]]:
        """(token, natural-log probability) for every token of `text`, `</s>` at each line end (`TrainedLM.score`)."""
        tokens, logprobs, _, _ = self.logprobs(text)
        return list(zip(tokens, logprobs, strict=True))

    def evaluate_text(self, text: str) -> dict:
        """Tokens, loss (nats/token), bits per token, perplexity and bits per character of a text
        (`TrainedLM.evaluate_text`)."""
        _, logprobs, ids, characters = self.logprobs(text)
        loss_sum, count = -math.fsum(logprobs), len(logprobs)
        loss = loss_sum / max(count, 1)
        figures = {"tokens": count, "loss": loss, "bits_per_token": loss / math.log(2),
                   "perplexity": math.exp(min(loss, 700.0))}
        if characters:
            figures["characters"] = characters
            figures["bits_per_char"] = loss_sum / characters / math.log(2)
        return {**figures, "unknown": ids.count(UNK), "unit": self.unit}


# ---------------------------------------------------------------------------- sequence to sequence

class OnnxSeq2Seq(Adapter):
    """An exported encoder-decoder: greedy decoding, sampling and beam search over its decoder step."""

    def generate(self, texts: list[str], beam: int = 5, max_length: int = 0, length_penalty: float = 1.0,
                 sample: bool = False, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
                 seed: int | None = None, batch_size: int = 64, attention: bool = False) -> list[Output]:
        """Decode each text (`TrainedSeq2Seq.generate`): beam search (beam > 1), greedy (beam 1) or sampling
        (sample=True); sources over the model's limit keep their first tokens; an empty text is refused."""
        sources = self.runtime.source_ids(texts)
        options = SearchOptions(beam=beam, max_length=max_length, length_penalty=length_penalty, sample=sample,
                                temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
        words = self.runtime.vocabulary.source_tokens(texts)      # the attention map's columns, as the text has them
        need_weights = attention and self.runtime.attends
        results: list[Output | None] = [None] * len(texts)
        for group in length_batches([len(s) for s in sources], batch_size, None):
            with runtime_errors():
                hypotheses = self.runtime.search([sources[i] for i in group], options, need_weights)
            for i, (best, *_) in zip(group, hypotheses, strict=True):
                tokens = self.runtime.vocabulary.target_vocab.decode(best.tokens)
                results[i] = Output(self.runtime.target_text(best.tokens), tokens, best.score, best.normalized,
                                    best.finished, words[i][:len(sources[i])],
                                    None if best.attention is None else best.attention.tolist())
        return results

    def translate(self, texts: list[str] | str, beam: int = 5, **options) -> list[str] | str:
        if isinstance(texts, str):
            return self.translate([texts], beam, **options)[0]
        return [output.text for output in self.generate(texts, beam=beam, **options)]


ADAPTERS = {"classifier": OnnxClassifier, "tagger": OnnxTagger, "lm": OnnxLM, "seq2seq": OnnxSeq2Seq}
