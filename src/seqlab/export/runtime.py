"""Running an ONNX export (`seqlab.export.onnx`) on onnxruntime: the whole task in numpy, without the run
directory and without PyTorch (text <-> ids through seqlab's own tokenizers and vocabularies, read from
the export's copies of the run's files by the torch-free `seqlab.pipelines.run_files`). Importing this
module and running an export never imports torch (tests/test_export.py checks it in a fresh process).

    from seqlab.export.runtime import load_export
    tagger = load_export("exports/ner")               # an ExportedTagger
    tagger.tag_sentences([["John", "lives", "in", "Paris", "."]])

    ExportedClassifier.classify(texts)                 -> [Prediction]       (as TrainedClassifier.classify)
    ExportedTagger.tag_sentences(sentences)            -> [[(tag, p)]]       argmax, or Viterbi with a CRF
    ExportedLM.generate(prompt, max_tokens)            -> str                greedy (generate_ids: the ids)
    ExportedSeq2Seq.translate(texts)                   -> [str]              greedy

Searches other than greedy (`seqlab.export.decoding`) drive the language models and sequence-to-sequence
models through one step interface, every array of a state or memory dict batch-first (axis 0), so that
following beam hypotheses is `{k: v[index] for k, v in d.items()}`:

    ExportedLM        state = start(B);  logits (B, V), state = step(tokens (B,), state);  reorder(state, index)
    ExportedSeq2Seq   memory = encode(source ids);  state = start(memory);
                      logits (B, V), weights (B, S) | None, state = step(tokens (B,), memory, state);
                      memory, state = reorder(memory, state, index)
                      source_ids(texts), target_text(ids), source_tokens(ids), limits(lengths), start_token

Each result equals the PyTorch model's greedy / argmax / Viterbi one (`seqlab.load(run)`), the scores
within float rounding (tests/test_export.py checks 1e-4). Batches are formed as the PyTorch API forms
them (`length_batches`, shortest first).
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from seqlab.data.grouping import length_batches
from seqlab.data.pair_vocab import LengthReport
from seqlab.data.parallel import Pair
from seqlab.data.text_features import with_ngrams
from seqlab.data.vocab import BOS, EOS, NEVER_GENERATED, PAD, SEP, UNK
from seqlab.errors import SeqlabError
from seqlab.export.decoding import Hypothesis, decode
from seqlab.export.manifest import read_manifest
from seqlab.pipelines.outputs import Prediction
from seqlab.pipelines.run_files import (
    detokenize_lines,
    read_document_vocabulary,
    read_pair_vocabulary,
    read_run_json,
    read_tagger_vocabulary,
    read_tokenizer_and_vocab,
)
from seqlab.search_options import SearchOptions


def onnxruntime():
    try:
        import onnxruntime
    except ImportError:
        raise SeqlabError("running an ONNX export needs onnxruntime: pip install 'seqlab[export]'") from None
    return onnxruntime


class Exported:
    """An export directory's manifest and onnxruntime sessions, one per graph."""

    def __init__(self, export_dir: str | Path, threads: int = 0):
        """`threads`: onnxruntime's intra-op threads (0: its default). `config` is the run's config.json (a
        dict: its "data", "model" and "train" groups)."""
        ort = onnxruntime()
        self.dir = Path(export_dir)
        self.manifest = read_manifest(self.dir)
        self.config = read_run_json(self.dir, self.manifest.get("task"))
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self.sessions = {name: ort.InferenceSession(str(self.dir / graph["file"]), options,
                                                    providers=["CPUExecutionProvider"])
                         for name, graph in self.manifest["graphs"].items()}

    def run(self, graph: str, values: dict) -> dict[str, np.ndarray]:
        """Run one graph on the values it takes (by input name) -> its outputs by name."""
        session = self.sessions[graph]
        feeds = {i.name: values[i.name] for i in session.get_inputs()}
        names = [o.name for o in session.get_outputs()]
        return dict(zip(names, session.run(names, feeds), strict=True))


def pad(rows: list[list[int]], width: int | None = None) -> np.ndarray:
    """Right-padded (B, T) int64 ids."""
    out = np.full((len(rows), width or max(map(len, rows))), PAD, dtype=np.int64)
    for b, row in enumerate(rows):
        out[b, :len(row)] = row
    return out


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def logsumexp(x: np.ndarray, axis: int) -> np.ndarray:
    top = x.max(axis=axis, keepdims=True)
    return (top + np.log(np.exp(x - top).sum(axis=axis, keepdims=True))).squeeze(axis)


def choose(logits: np.ndarray) -> np.ndarray:
    """Greedy: the argmax of logits (B, V), the never-generated ids blocked (`seqlab.processors`)."""
    logits = logits.astype(np.float32).copy()
    logits[:, list(NEVER_GENERATED)] = -np.inf
    return logits.argmax(axis=-1)                                                  # (B,)


# ---------------------------------------------------------------------------- classifier

class ExportedClassifier(Exported):
    def __init__(self, export_dir, threads: int = 0):
        super().__init__(export_dir, threads)
        data = self.config["data"]
        self.vocabulary = read_document_vocabulary(self.dir, data["tokenizer"], data["lowercase"], data["ngrams"],
                                                   data["max_length"], data["truncate"])

    def encode(self, text: str) -> tuple[list[int] | None, list[float] | None]:
        v = self.vocabulary
        tokens = v.cut(v.tokens(text))
        words = v.word_ids(with_ngrams(tokens, v.ngrams) if v.ngrams > 1 else tokens) if v.words else None
        return words, v.features.raw(tokens, None) if v.features else None

    def scores(self, encoded: list) -> np.ndarray:
        """Class scores (B, K) of encoded documents, one batch."""
        if self.vocabulary.features is not None:
            f = self.vocabulary.features
            table = (np.array([e[1] for e in encoded], np.float32) - np.array(f.mean, np.float32)) \
                / np.array(f.std, np.float32)                                         # (B, F)
            return self.run("classifier", {"features": table})["scores"]
        rows = [e[0] for e in encoded]
        return self.run("classifier", {"words": pad(rows), "lengths": np.array([len(r) for r in rows])})["scores"]

    def probabilities(self, scores: np.ndarray) -> np.ndarray:
        """Softmax (eq. 6.27), or [1 - s(z), s(z)] for one sigmoid unit (eq. 6.25)."""
        if self.config["model"]["output_layer"] == "sigmoid":
            p = 1 / (1 + np.exp(-scores[:, 0].astype(np.float32)))                  # (B,)
            return np.stack([1 - p, p], axis=1)
        return softmax(scores.astype(np.float32))

    def classify(self, texts: list[str], batch_size: int = 64):
        """The `Prediction` of each text, as `TrainedClassifier.classify`."""
        if any(not t.strip() for t in texts):
            raise SeqlabError("an empty text: there is nothing to classify")
        encoded = [self.encode(t) for t in texts]
        labels = self.vocabulary.labels
        results = [None] * len(texts)
        lengths = [len(e[0]) if e[0] is not None else 0 for e in encoded]
        for group in length_batches(lengths, batch_size, None):
            p = self.probabilities(self.scores([encoded[i] for i in group]))
            for i, row in zip(group, p.tolist(), strict=True):
                best = int(np.argmax(row))
                results[i] = Prediction(labels[best], row[best], dict(zip(labels, row, strict=True)))
        return results


# ---------------------------------------------------------------------------- tagger

def viterbi(emissions: np.ndarray, length: int, transitions: np.ndarray, start: np.ndarray,
            end: np.ndarray) -> list[int]:
    """The best tag sequence of one sentence's emissions (T, K) (SLP 17.4; `seqlab.nn.crf.CRF.decode`)."""
    delta = start + emissions[0]                                                   # (K,)
    pointers = []
    for t in range(1, length):
        scores = delta[:, None] + transitions                                      # (K, K)
        pointers.append(scores.argmax(axis=0))
        delta = scores.max(axis=0) + emissions[t]
    tags = [int((delta + end).argmax())]
    for back in reversed(pointers):
        tags.append(int(back[tags[-1]]))
    return tags[::-1]


def crf_marginals(emissions: np.ndarray, length: int, transitions: np.ndarray, start: np.ndarray,
                  end: np.ndarray) -> np.ndarray:
    """p(y_t = k | x) (T, K) by the forward-backward algorithm in log space."""
    e = emissions[:length].astype(np.float64)
    alpha, beta = np.zeros_like(e), np.zeros_like(e)
    alpha[0] = start + e[0]
    for t in range(1, length):
        alpha[t] = logsumexp(alpha[t - 1][:, None] + transitions, axis=0) + e[t]
    beta[-1] = end
    for t in range(length - 2, -1, -1):
        beta[t] = logsumexp(transitions + (e[t + 1] + beta[t + 1])[None, :], axis=1)
    log_z = logsumexp(alpha[-1] + end, axis=0)
    return np.exp(alpha + beta - log_z)


class ExportedTagger(Exported):
    def __init__(self, export_dir, threads: int = 0):
        super().__init__(export_dir, threads)
        self.vocabulary, self.scheme, _ = read_tagger_vocabulary(self.dir)
        self.crf = None
        if self.manifest.get("crf"):
            crf = json.loads((self.dir / "crf.json").read_text())
            self.crf = tuple(np.array(crf[k], np.float64) for k in ("transitions", "start", "end"))

    def emissions(self, sentences: list[list[str]]) -> np.ndarray:
        """Emission scores (B, T, K) of one batch of non-empty sentences."""
        v = self.vocabulary
        values = {"words": pad([v.word_ids(s) for s in sentences]), "lengths": np.array([len(s) for s in sentences])}
        if v.chars is not None:
            C = max(min(v.max_word_chars, max(len(t) for t in s)) for s in sentences)
            chars = np.full((len(sentences), values["words"].shape[1], C), PAD, dtype=np.int64)
            for b, s in enumerate(sentences):
                width = min(v.max_word_chars, max(len(t) for t in s))
                for t, token in enumerate(s):
                    ids = [v.chars.index.get(ch, UNK) for ch in token[:width]]
                    chars[b, t, :len(ids)] = ids
            values["chars"] = chars
        return self.run("tagger", values)["emissions"]

    def tag_sentences(self, sentences: list[list[str]], batch_size: int = 64) -> list[list[tuple[str, float]]]:
        """(tag, probability) per token, as `TrainedTagger.tag_sentences`: the argmax and its softmax
        probability, or with a CRF the Viterbi tags and their marginals."""
        results: list[list[tuple[str, float]]] = [[] for _ in sentences]
        order = [i for i in range(len(sentences)) if sentences[i]]
        lengths = [len(sentences[i]) for i in order]
        for group in length_batches(lengths, batch_size, None):
            chunk = [order[k] for k in group]
            scores = self.emissions([sentences[i] for i in chunk])                 # (B, T, K)
            for row, i in enumerate(chunk):
                n = len(sentences[i])
                if self.crf is not None:
                    tags = viterbi(scores[row].astype(np.float64), n, *self.crf)
                    p = crf_marginals(scores[row], n, *self.crf)
                else:
                    p = softmax(scores[row, :n].astype(np.float32))
                    tags = p.argmax(axis=-1).tolist()
                results[i] = [(self.vocabulary.labels[t], float(p[k, t])) for k, t in enumerate(tags)]
        return results

    def tag(self, tokens: list[str]) -> list[tuple[str, float]]:
        """(tag, probability) for each token of one sentence."""
        return self.tag_sentences([tokens])[0]


# ---------------------------------------------------------------------------- language model

class ExportedLM(Exported):
    def __init__(self, export_dir, threads: int = 0):
        super().__init__(export_dir, threads)
        self.tokenizer, self.vocab = read_tokenizer_and_vocab(self.dir)
        self.arch = self.config["model"]["arch"]
        self.context = self.manifest.get("context")

    def prompt_ids(self, prompt: str) -> list[int]:
        """`</s>` (a line start) + the prompt's tokens, as `TrainedLM.prompt_ids`."""
        tokens: list[str] = []
        lines = prompt.split("\n")
        for k, line in enumerate(lines):
            tokens += self.tokenizer.tokenize(line) + (["</s>"] if k < len(lines) - 1 else [])
        ids = [EOS] + self.vocab.encode(tokens)
        if self.context is not None and len(ids) > self.context:
            raise SeqlabError(f"the prompt is {len(ids)} tokens (with the leading </s>), longer than the model's "
                              f"context of {self.context} tokens")
        return ids

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

    def generate_ids(self, context: list[int], max_tokens: int) -> list[int]:
        """The greedy continuation of `context` (which starts with `</s>`)."""
        state = self.start(1)
        for token in context[:-1]:                     # the prompt but its last token, as `LanguageModel.start`
            _, state = self.step(np.array([token]), state)
        tokens, generated = np.array(context[-1:]), []
        for _ in range(max_tokens):
            logits, state = self.step(tokens, state)
            tokens = choose(logits)
            generated.append(int(tokens[0]))
        return generated

    def detokenize(self, ids: list[int]) -> str:
        """Ids -> text, `</s>` as a line break (`TrainedLM.detokenize`)."""
        return detokenize_lines(self.tokenizer, self.vocab, ids)

    def generate(self, prompt: str = "", max_tokens: int = 200) -> str:
        """The greedy continuation of `prompt` as text (`TrainedLM.generate(prompt, greedy=True)`)."""
        context = self.prompt_ids(prompt)
        body = context[1:]
        text = self.detokenize(body + self.generate_ids(context, max_tokens))
        return text[len(self.detokenize(body)) if body else 0:]


# ---------------------------------------------------------------------------- sequence to sequence

@dataclass
class Decoded:
    """One greedy output: its ids (without </s>), whether it ended with </s>, and with attention the
    weights of each output step over the source's real positions (len(ids) + finished, S_b)."""

    ids: list[int]
    finished: bool
    attention: np.ndarray | None = None


class ExportedSeq2Seq(Exported):
    """A sequence-to-sequence export behind one step interface, every array batch-first (axis 0):

        memory = encode(sources)                        the encoder's outputs and mask (B, S), lengths (B,)
        state = start(memory)                           the decoder's state before `start_token` is fed
        logits, weights, state = step(tokens, memory, state)    logits (B, V), weights (B, S) or None
        memory, state = reorder(memory, state, index)   the rows `index` of both (beam search)
    """

    def __init__(self, export_dir, threads: int = 0):
        super().__init__(export_dir, threads)
        data = self.config["data"]
        self.arch = self.config["model"]["arch"]
        self.vocabulary = read_pair_vocabulary(self.dir, self.arch == "lm", data["max_source_length"],
                                               data["max_target_length"])
        self.attends = "weights" in self.manifest["graphs"]["decoder_step"]["outputs"]
        self.start_token = SEP if self.arch == "lm" else BOS        # `Seq2SeqModel.start_token`

    # ------------------------------------------------------------------ text <-> ids

    def source_ids(self, texts: list[str]) -> list[list[int]]:
        """Each text's source ids as `TrainedSeq2Seq.translate` encodes them (sources over the model's limit
        keep their first tokens, with a warning); an empty text is refused."""
        v = self.vocabulary
        empty = [i for i, t in enumerate(texts) if not t.strip()]
        if empty:
            raise SeqlabError(f"input {empty[0] + 1} of {len(texts)} is empty; there is nothing to decode")
        pairs = [Pair(t, None, i + 1) for i, t in enumerate(texts)]
        report = LengthReport()
        encoded = v.encode(pairs, "input", "input", "truncate", report, v.source_tokens(texts))
        for message in report.messages("input", v.max_source, v.max_target):
            warnings.warn(message, stacklevel=2)
        return [e.source for e in encoded]

    def source_tokens(self, ids: list[int]) -> list[str]:
        """The source tokens of ids (the labels of an attention map's columns)."""
        return self.vocabulary.source_vocab.decode(ids)

    def target_text(self, ids: list[int]) -> str:
        """Output ids (without </s>) as detokenized text."""
        v = self.vocabulary
        return v.target_tokenizer.detokenize(v.target_vocab.decode(ids))

    def limits(self, lengths: np.ndarray, max_length: int = 0) -> np.ndarray:
        """Each source's most output tokens, </s> included (B,), as `seqlab.search.max_lengths`: max_length
        or 2 x the source length + 10, within what the decoder can hold."""
        lengths = np.asarray(lengths, np.int64)
        limit = np.full_like(lengths, max_length) if max_length else 2 * lengths + 10
        P = self.config["model"]["max_positions"]
        room = {"transformer": np.full_like(lengths, P), "lm": P - lengths}.get(self.arch)
        return limit if room is None else np.minimum(limit, np.maximum(room, 1))

    # ------------------------------------------------------------------ the step interface

    def encode(self, sources: list[list[int]]) -> dict[str, np.ndarray]:
        """Source ids (B lists) -> the memory, with `mask` (B, S) True at real positions and `lengths` (B,):
        the RNN encoder's outputs and final states; the transformer's cross-attention keys and values
        (B, nh, S, hs) per layer; for the separator LM the sources left-padded (`SeparatorLM.encode`: each
        ends at column S, and so does its mask)."""
        lengths = np.array([len(s) for s in sources], np.int64)
        S = int(lengths.max())
        if self.arch == "lm":
            source = np.full((len(sources), S), PAD, np.int64)                     # (B, S), left-padded
            for b, row in enumerate(sources):
                source[b, S - len(row):] = row
            mask = np.arange(S)[None, :] >= (S - lengths)[:, None]                 # (B, S)
            return {"source": source, "mask": mask, "lengths": lengths}
        memory = self.run("encoder", {"source": pad(sources), "lengths": lengths})
        memory["mask"] = np.arange(S)[None, :] < lengths[:, None]                  # (B, S)
        memory["lengths"] = lengths
        return memory

    def start(self, memory: dict) -> dict[str, np.ndarray]:
        """The decoder's state before the first token: the RNN's h_0^d = c (eq. 13.32), (B, L, D); the
        transformers' target prefix (B, 0), which they re-read at every step."""
        if self.arch in ("transformer", "lm"):
            return {"prefix": np.zeros((len(memory["lengths"]), 0), np.int64)}
        return {"h": memory["h0"], **({"c": memory["c0"]} if "c0" in memory else {})}

    def step(self, tokens: np.ndarray, memory: dict, state: dict):
        """tokens (B,) int64 -> logits (B, V) float32, the attention weights over the source (B, S) of this
        output step (None without attention), the new state."""
        if "prefix" in state:
            prefix = np.concatenate([state["prefix"], tokens[:, None]], axis=1)    # (B, t + 1)
            out = self.run("decoder_step", {**memory, "prefix": prefix})
            return out["logits"], out.get("weights"), {"prefix": prefix}
        out = self.run("decoder_step", {"tokens": tokens, **memory, **state})
        return out["logits"], out.get("weights"), {name: out[f"next_{name}"] for name in state}

    def reorder(self, memory: dict, state: dict, index: np.ndarray) -> tuple[dict, dict]:
        """The rows `index` (B',) of the memory and of the state, in order."""
        return {k: v[index] for k, v in memory.items()}, {k: v[index] for k, v in state.items()}

    # ------------------------------------------------------------------ greedy decoding

    def search(self, sources: list[list[int]], options: SearchOptions | None = None,
               need_weights: bool = False) -> list[list[Hypothesis]]:
        """Greedy decoding, sampling or beam search of one batch of source ids, by `seqlab.export.decoding`
        (seqlab.search's rules in numpy): `options.nbest` hypotheses per source, best first, each with its
        attention over the source with `need_weights` (when the model attends)."""
        options = options or SearchOptions()
        memory = self.encode(sources)
        lengths = memory["lengths"]
        return decode(SourceDecoder(self), (memory, self.start(memory)), lengths,
                      self.limits(lengths, options.max_length), self.start_token, options,
                      need_weights and self.attends)

    def greedy(self, sources: list[list[int]], max_length: int = 0, attention: bool = False) -> list[Decoded]:
        """Greedy decoding of one batch of source ids (`seqlab.search.greedy`), with the attention weights of
        each output step when asked for (and the model attends)."""
        return [Decoded(best.tokens, best.finished, best.attention)
                for best, *_ in self.search(sources, SearchOptions(max_length=max_length), attention)]

    def decode(self, sources: list[list[int]], max_length: int = 0) -> list[list[int]]:
        """Greedy decoding of one batch of source ids: the output ids without </s>."""
        return [d.ids for d in self.greedy(sources, max_length)]

    def translate(self, texts: list[str], batch_size: int = 64, max_length: int = 0) -> list[str]:
        """The greedy output of each source text (`TrainedSeq2Seq.translate(texts, beam=1)`)."""
        sources = self.source_ids(texts)
        results = [""] * len(texts)
        for group in length_batches([len(s) for s in sources], batch_size, None):
            for i, ids in zip(group, self.decode([sources[i] for i in group], max_length), strict=True):
                results[i] = self.target_text(ids)
        return results


class SourceDecoder:
    """An `ExportedSeq2Seq` as the decoder `seqlab.export.decoding` drives: its state is (memory, decoder
    state), so that beam search reorders both."""

    def __init__(self, runtime: ExportedSeq2Seq):
        self.runtime = runtime

    def step(self, tokens: np.ndarray, state: tuple[dict, dict]):
        memory, decoder = state
        logits, weights, decoder = self.runtime.step(tokens, memory, decoder)    # (B, V), (B, S) or None
        return logits, (memory, decoder), weights

    def reorder(self, state: tuple[dict, dict], index: np.ndarray) -> tuple[dict, dict]:
        return self.runtime.reorder(*state, index)


RUNTIMES = {"classifier": ExportedClassifier, "tagger": ExportedTagger, "lm": ExportedLM, "seq2seq": ExportedSeq2Seq}


def load_export(export_dir: str | Path, threads: int = 0):
    """An export directory as an `ExportedClassifier`, `ExportedTagger`, `ExportedLM` or `ExportedSeq2Seq`."""
    task = read_manifest(export_dir).get("task")
    if task not in RUNTIMES:
        raise SeqlabError(f"{export_dir}/manifest.json names the task {task!r}, which this seqlab cannot run")
    return RUNTIMES[task](export_dir, threads)


__all__ = ["load_export", "ExportedClassifier", "ExportedTagger", "ExportedLM", "ExportedSeq2Seq"]
