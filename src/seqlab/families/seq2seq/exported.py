"""A sequence-to-sequence model's ONNX export on onnxruntime, without PyTorch
(`seqlab.export.runtime.load_export`): `ExportedSeq2Seq.generate(texts, beam, ...)` decodes as
`TrainedSeq2Seq.generate` does (greedy, sampled or beam search: the searches of `seqlab.decoding`, on numpy
arrays, with the attention over the source when asked), and `translate(texts)` greedily.

Its step interface, every array batch-first (axis 0), so that beam search follows its hypotheses with one
index:

    memory = encode(source ids);  state = start(memory);
    logits (B, V), weights (B, S) | None, state = step(tokens (B,), memory, state);
    memory, state = reorder(memory, state, index)
    source_ids(texts), target_text(ids), source_tokens(ids), limits(lengths), start_token

Greedy and beam outputs equal the PyTorch model's, the scores and attention weights within float rounding
(tests/test_export.py, tests/test_serve_onnx.py).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from seqlab.data.grouping import length_batches
from seqlab.data.vocab import BOS, PAD, SEP
from seqlab.decoding.numpy_search import Hypothesis, SearchOptions, decode, max_lengths
from seqlab.errors import SeqlabError
from seqlab.export.session import Exported, pad
from seqlab.families.seq2seq import FAMILY
from seqlab.families.seq2seq.parallel import Pair
from seqlab.families.seq2seq.vocab import LengthReport, Output, read_pair_vocabulary


@dataclass
class Decoded:
    """One greedy output: its ids (without </s>), whether it ended with </s>, and with attention the
    weights of each output step over the source's real positions (len(ids) + finished, S_b)."""

    ids: list[int]
    finished: bool
    attention: np.ndarray | None = None


class ExportedSeq2Seq(Exported):
    family = FAMILY

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
        self.vocabulary = read_pair_vocabulary(self.files, self.arch == "lm", data["max_source_length"],
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

    def limits(self, lengths: np.ndarray, max_length: int = 0, cap: int = 0) -> np.ndarray:
        """Each source's most output tokens, </s> included (B,), as `seqlab.decoding.search.max_lengths`: max_length
        or 2 x the source length + 10 (at most `cap`), within what the decoder can hold."""
        lengths = np.asarray(lengths, np.int64)
        P = self.config["model"]["max_positions"]
        room = {"transformer": np.full_like(lengths, P), "lm": P - lengths}.get(self.arch)
        return max_lengths(lengths, max_length, room, cap)

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

    # ------------------------------------------------------------------ decoding

    def generate(self, texts: list[str], beam: int = 5, max_length: int = 0, length_penalty: float = 1.0,
                 sample: bool = False, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
                 seed: int | None = None, batch_size: int = 64, attention: bool = False,
                 length_cap: int = 0) -> list[Output]:
        """Decode each text (`TrainedSeq2Seq.generate`): beam search (beam > 1), greedy (beam 1) or sampling
        (sample=True); sources over the model's limit keep their first tokens; an empty text is refused."""
        sources = self.source_ids(texts)
        options = SearchOptions(beam=beam, max_length=max_length, length_penalty=length_penalty, sample=sample,
                                temperature=temperature, top_k=top_k, top_p=top_p, seed=seed, length_cap=length_cap)
        words = self.vocabulary.source_tokens(texts)      # the attention map's columns, as the text has them
        need_weights = attention and self.attends
        results: list[Output | None] = [None] * len(texts)
        for group in length_batches([len(s) for s in sources], batch_size, None):
            hypotheses = self.search([sources[i] for i in group], options, need_weights)
            for i, (best, *_) in zip(group, hypotheses, strict=True):
                tokens = self.vocabulary.target_vocab.decode(best.tokens)
                results[i] = Output(self.target_text(best.tokens), tokens, best.score, best.normalized,
                                    best.finished, words[i][:len(sources[i])],
                                    None if best.attention is None else best.attention.tolist())
        return results

    # ------------------------------------------------------------------ the search, and greedy decoding

    def search(self, sources: list[list[int]], options: SearchOptions | None = None,
               need_weights: bool = False, trace: list[dict] | None = None) -> list[list[Hypothesis]]:
        """Greedy decoding, sampling or beam search of one batch of source ids, by `seqlab.decoding.numpy_search`
        (seqlab.decoding.search's rules in numpy): `options.nbest` hypotheses per source, best first, each with its
        attention over the source with `need_weights` (when the model attends); the beam's tree appended to
        `trace`, if given (`seqlab.decoding.core.beam_steps`)."""
        options = options or SearchOptions()
        memory = self.encode(sources)
        lengths = memory["lengths"]
        return decode(SourceDecoder(self), (memory, self.start(memory)), lengths,
                      self.limits(lengths, options.max_length, options.length_cap), self.start_token, options,
                      need_weights and self.attends, trace)

    def greedy(self, sources: list[list[int]], max_length: int = 0, attention: bool = False) -> list[Decoded]:
        """Greedy decoding of one batch of source ids (`seqlab.decoding.search.greedy`), with the attention weights of
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
    """An `ExportedSeq2Seq` as the decoder `seqlab.decoding.numpy_search` drives: its state is (memory, decoder
    state), so that beam search reorders both."""

    def __init__(self, runtime: ExportedSeq2Seq):
        self.runtime = runtime

    def step(self, tokens: np.ndarray, state: tuple[dict, dict]):
        memory, decoder = state
        logits, weights, decoder = self.runtime.step(tokens, memory, decoder)    # (B, V), (B, S) or None
        return logits, (memory, decoder), weights

    def reorder(self, state: tuple[dict, dict], index: np.ndarray) -> tuple[dict, dict]:
        return self.runtime.reorder(*state, index)


RUNTIME = ExportedSeq2Seq
