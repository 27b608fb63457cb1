"""A language model's ONNX export on onnxruntime, without PyTorch (`seqlab.export.runtime.load_export`).

`ExportedLM` answers as `TrainedLM` does: `stream(prompt, **options)` and `generate` continue a prompt
(greedy, sampled or beam search: the searches of `seqlab.decoding`, on numpy arrays), `score(text)` gives
each token's log probability and `evaluate_text(text)` the text's perplexity and bits per character. Its
step interface, every array of a state batch-first (axis 0), so that following beam hypotheses is
`{k: v[index] for k, v in state.items()}`:

    state = start(B);  logits (B, V), state = step(tokens (B,), state);  reorder(state, index)

Greedy and beam outputs equal the PyTorch model's, the log probabilities within float rounding
(tests/test_serve_onnx.py). Sampling draws from the same distribution with numpy's generator, so a seed gives
another continuation than the PyTorch model's.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator

import numpy as np

from seqlab.data.vocab import EOS, UNK
from seqlab.decoding.core import checkpoint, text_pieces
from seqlab.decoding.numpy_search import SamplingOptions, generate_ids, log_softmax
from seqlab.decoding.options import prompt_too_long
from seqlab.export.session import Exported
from seqlab.families.lm import FAMILY
from seqlab.families.lm.vocab import detokenize_lines, read_tokenizer_and_vocab, unknown_tokens_note


class ExportedLM(Exported):
    family = FAMILY

    def __init__(self, export_dir, threads: int = 0):
        super().__init__(export_dir, threads)
        self.tokenizer, self.vocab = read_tokenizer_and_vocab(self.files)
        self.arch = self.config["model"]["arch"]
        self.context = self.manifest.get("context")
        self.unit = self.tokenizer.unit
        self.cached = functools.lru_cache(maxsize=16)(self._logprobs)      # /v1/score asks twice per text

    # ------------------------------------------------------------------ the step interface

    def start(self, batch_size: int) -> dict:
        """The state before any token (batch-first arrays): what `step` reads and returns."""
        m = self.config["model"]
        if self.arch == "transformer":
            return {"window": np.zeros((batch_size, 0), np.int64)}                 # (B, 0)
        if self.arch == "ffn":
            return {"history": np.full((batch_size, m["context"] - 1), EOS, np.int64)}   # (B, N-1)
        h = np.zeros((batch_size, m["num_layers"], m["hidden_size"]), np.float32)  # (B, L, H)
        return {"h": h, "c": h.copy()} if self.arch == "lstm" else {"h": h}

    def step(self, tokens: np.ndarray, state: dict) -> tuple[np.ndarray, dict]:
        """tokens (B,) int64 after `state` -> logits (B, V) float32, the new state (`LanguageModel.step`)."""
        if self.arch == "transformer":                 # the window, as TransformerLM.step slides its cache
            window = np.concatenate([state["window"], tokens[:, None]], axis=1)   # (B, n + 1)
            if state["window"].shape[1] >= self.context:
                window = window[:, -max(1, self.context // 2):]
            return self.run("step", {"window": window})["logits"], {"window": window}
        out = self.run("step", {"tokens": tokens, **state})
        return out["logits"], {name: out[f"next_{name}"] for name in state}

    def reorder(self, state: dict, index: np.ndarray) -> dict:
        """The rows `index` (B',) of the state, in order (beam search follows its hypotheses with it)."""
        return {name: value[index] for name, value in state.items()}

    def started(self, context: list[int]) -> dict:
        """The state after every token of `context` but the last, which the search feeds (`LanguageModel.start`)."""
        if self.arch == "transformer":       # its state is the window it re-reads: no step to run
            return {"window": np.array([context[:-1]], np.int64)}                  # (1, T - 1) < context
        state = self.start(1)
        for token in context[:-1]:                   # a step per token: a server may run other work between two
            checkpoint()
            _, state = self.step(np.array([token], np.int64), state)
        return state

    # ------------------------------------------------------------------ generation

    def prompt_ids(self, prompt: str, truncate: bool = False, warn=None) -> list[int]:
        """`</s>` (a line start) + the prompt's tokens, as `TrainedLM.prompt_ids` (unknown tokens told to `warn`,
        when given); a prompt over the context is refused, or with `truncate` cut to its end."""
        tokens: list[str] = []
        lines = prompt.split("\n")
        for k, line in enumerate(lines):
            tokens += self.tokenizer.tokenize(line) + (["</s>"] if k < len(lines) - 1 else [])
        note = unknown_tokens_note(tokens, self.vocab)
        if note and warn is not None:
            warn(note)
        ids = [EOS] + self.vocab.encode(tokens)
        if self.context is not None and len(ids) > self.context:
            if not truncate:
                raise prompt_too_long(len(ids), self.context)
            ids = ids[-self.context:]
        return ids

    def detokenize(self, ids: list[int]) -> str:
        """Ids -> text, `</s>` as a line break (`TrainedLM.detokenize`)."""
        return detokenize_lines(self.tokenizer, self.vocab, ids)

    def generate_ids(self, context: list[int], max_tokens: int) -> list[int]:
        """The greedy continuation of `context` (which starts with `</s>`)."""
        return list(generate_ids(Decoder(self), self.started(context), context[-1],
                                 SamplingOptions(max_tokens=max_tokens, greedy=True)))

    def stream(self, prompt: str, truncate_prompt: bool = False, warn=None, **options) -> Iterator[str]:
        """The continuation of `prompt` piece by piece, as `TrainedLM.stream` cuts it (options: those of
        `SamplingOptions`, and `truncate_prompt` and `warn` as there); a bad option or a prompt over the context
        fails at the first `next()`."""
        options = SamplingOptions(**options)
        context = self.prompt_ids(prompt, truncate_prompt, warn)
        return (yield from text_pieces(generate_ids(Decoder(self), self.started(context), context[-1], options),
                               context[1:], self.detokenize, options.stop_at_eos, options.beam > 1))

    def generate(self, prompt: str = "", max_tokens: int = 200, greedy: bool = True, **options) -> str:
        """The continuation of `prompt` as text, greedy unless `greedy=False` (`TrainedLM.generate(prompt,
        greedy=True)`); the other options are `stream`'s."""
        return "".join(self.stream(prompt, max_tokens=max_tokens, greedy=greedy, **options))

    # ------------------------------------------------------------------ scoring

    def logprobs(self, text: str) -> tuple[list[str], list[float], list[int], int]:
        return self.cached(text)

    def _logprobs(self, text: str) -> tuple[list[str], list[float], list[int], int]:
        """The text's tokens (`</s>` at each line end), each one's log probability given the ones before it,
        their ids and the text's character count, as `TrainedLM.score` and `evaluate_text` count them."""
        lines = text.split("\n")
        if len(lines) > 1 and lines[-1] == "":       # a final newline adds no line
            lines.pop()
        token_lines = self.tokenizer.tokenize_lines(lines)
        ids = [i for tokens in token_lines for i in [*self.vocab.encode(tokens), EOS]]
        logprobs = [0.0] * len(ids)

        def keep(p: int, row: np.ndarray) -> None:
            logprobs[p] = float(row[ids[p]])

        self.distributions(ids, keep)
        tokens = [t for line in token_lines for t in [*line, "</s>"]]
        return tokens, logprobs, ids, sum(len(line) for line in lines) + len(lines)

    def distributions(self, ids: list[int], visit) -> None:
        """The model's distribution over the vocabulary before each token of an id stream (one `</s>` per line),
        read from a line start as `TrainedLM.distributions` reads it: `visit(p, log probabilities (V,) float32)`
        for each position p, each once (a transformer's in the order its windows read them)."""
        inputs = [EOS, *ids[:-1]]                    # inputs[p] predicts ids[p]
        if self.context is not None:
            return self._window_distributions(inputs, ids, visit)
        state = self.start(1)                        # a state carried along the stream
        for p, token in enumerate(inputs):
            checkpoint()                             # a server may run other work between two steps
            logits, state = self.step(np.array([token], np.int64), state)
            visit(p, log_softmax(logits.astype(np.float32))[0])

    def _window_distributions(self, inputs: list[int], ids: list[int], visit) -> None:
        """The transformer's distributions as `seqlab.data.batching.sliding_windows` scores them: windows
        of `context` inputs every context / 2 tokens, each target scored in the first window holding it, from
        the inputs of that window up to it. Targets read through windows of the same width run as one batch."""
        context, n = self.context, len(ids)
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
        for width, group in reads.items():
            checkpoint()
            window = np.array([inputs[s:s + width] for s, _ in group], np.int64)            # (m, width)
            # the state before the last input, then the step that reads it (no slide: width <= context)
            logits, _ = self.step(window[:, -1], {"window": window[:, :-1]})                  # (m, V)
            lp = log_softmax(logits.astype(np.float32))
            for row, (_, p) in enumerate(group):
                visit(p, lp[row])

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


class Decoder:
    """An `ExportedLM` as the decoder `seqlab.decoding` drives: its step gives no attention weights; like the
    PyTorch language models, it never generates <unk> (`seqlab.models.base.LanguageModel.never_generated`)."""

    never_generated = (UNK,)

    def __init__(self, runtime: ExportedLM):
        self.runtime = runtime

    def step(self, tokens: np.ndarray, state: dict):
        logits, state = self.runtime.step(tokens, state)                       # (B, V)
        return logits, state, None

    def reorder(self, state: dict, index: np.ndarray) -> dict:
        return self.runtime.reorder(state, index)


RUNTIME = ExportedLM
