"""A trained sequence-to-sequence model's API (`seqlab.load(run)` of a seq2seq run): `TrainedSeq2Seq`
translates or summarises texts (greedy, sampled, beam search; with the attention over the source when
asked), streams a file of any size in chunks, and scores pairs (BLEU, chrF, ROUGE-1/2/L, perplexity)."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import torch

from seqlab.data.limits import DEFAULT_MAX_TOKENS, InputLimit
from seqlab.data.sniff import EVALUATED
from seqlab.data.stream import CHUNK_SIZE, LineReader, chunked, interactive
from seqlab.data.vocab import UNK
from seqlab.decoding.search import SearchOptions
from seqlab.errors import SeqlabError, place
from seqlab.families.seq2seq import FAMILY
from seqlab.families.seq2seq.config import Seq2SeqTrainConfig
from seqlab.families.seq2seq.outputs import decode_pairs
from seqlab.families.seq2seq.parallel import Pair, aligned_pairs, paired_reader
from seqlab.families.seq2seq.sources import is_parquet, parquet_pairs
from seqlab.families.seq2seq.task import LengthReport, PairVocabulary, Seq2SeqTask, pair_batches
from seqlab.families.seq2seq.vocab import Output
from seqlab.metrics import CorpusScores, bleu, chrf, rouge
from seqlab.progress import progress_bar
from seqlab.runs.files import FromRun
from seqlab.training.plots import plot_attention


class TrainedSeq2Seq(FromRun):
    """A loaded sequence-to-sequence model: sources in, translations (or summaries) out."""

    family = FAMILY

    def __init__(self, model, vocabulary: PairVocabulary, config: Seq2SeqTrainConfig, device):
        self.model, self.vocabulary, self.config, self.device = model, vocabulary, config, device

    def translate(self, texts: list[str] | str, beam: int = 5, **options) -> list[str] | str:
        """The best output for each source text (one text given as a string: one string). Options:
        those of `generate`."""
        if isinstance(texts, str):
            return self.translate([texts], beam, **options)[0]
        return [output.text for output in self.generate(texts, beam=beam, **options)]

    summarize = translate

    def generate(self, texts: list[str], beam: int = 5, max_length: int = 0, length_penalty: float = 1.0,
                 sample: bool = False, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
                 seed: int | None = None, batch_size: int = 64, attention: bool = False,
                 long_source: str = "truncate", progress: bool | None = False, what: str = "input",
                 length_cap: int = 0) -> list[Output]:
        """Decode each text: beam search (beam > 1), greedy (beam 1) or sampling (sample=True). Sources
        longer than the model's limit are truncated with a warning (long_source="truncate") or refused
        ("reject"); an empty text is refused. `length_cap` > 0 caps the default output length (max_length 0)."""
        empty = [i for i, t in enumerate(texts) if not t.strip()]
        if empty:
            raise SeqlabError(f"{what} {empty[0] + 1} of {len(texts)} is empty; there is nothing to decode")
        return self.generate_pairs([Pair(t, None, i + 1) for i, t in enumerate(texts)],
                                   SearchOptions(beam=beam, max_length=max_length, length_penalty=length_penalty,
                                                 sample=sample, temperature=temperature, top_k=top_k, top_p=top_p,
                                                 seed=seed, length_cap=length_cap),
                                   batch_size, attention, long_source, progress, what)

    @torch.no_grad()
    def generate_pairs(self, pairs: list[Pair], options: SearchOptions, batch_size: int = 64,
                       attention: bool = False, long_source: str = "truncate", progress: bool | None = False,
                       what: str = "input") -> list[Output]:
        sources = [dataclasses.replace(p, target=None) for p in pairs]
        encoded, source_tokens, _ = self._encode(sources, long_source, what)
        return self._decode(encoded, source_tokens, options, batch_size, attention, progress)

    def _encode(self, pairs: list[Pair], long_source: str, what: str):
        """The pairs as ids (sources over the limit truncated with a warning, or refused), the source
        tokens (heat map labels; each source is tokenized once) and the length report."""
        if long_source not in ("truncate", "reject"):
            raise SeqlabError(f"--long-source {long_source!r}: choose truncate or reject")
        report = LengthReport()
        source_tokens = self.vocabulary.source_tokens([p.source for p in pairs])
        encoded = self.vocabulary.encode(pairs, what, what, long_source, report, source_tokens)
        for message in report.messages(what, self.vocabulary.max_source, self.vocabulary.max_target):
            warnings.warn(message, stacklevel=4)
        return encoded, source_tokens, report

    def _decode(self, encoded: list, source_tokens: list[list[str]], options: SearchOptions, batch_size: int,
                attention: bool, progress: bool | None) -> list[Output]:
        return decode_pairs(self.model, self.vocabulary, encoded, options, batch_size, self.device, source_tokens,
                            attention, progress)

    def plot_attention(self, output: Output, path: str | Path, title: str = "") -> Path:
        """The attention weights of a decoded text as a heat map PNG (output tokens by source tokens)."""
        if output.attention is None:
            raise SeqlabError("this output has no attention weights: decode with attention=True (a model with "
                              "attention: an RNN with --attention, or the transformer)")
        targets = output.tokens + (["</s>"] if output.finished else [])
        return plot_attention(output.attention, [_show(t) for t in output.source_tokens], [_show(t) for t in targets],
                              path, title)

    def evaluate_pairs(self, pairs: list[Pair], options: SearchOptions | None = None, batch_size: int = 64,
                       bleu_tokenize: str = "13a", long_source: str = "truncate", progress: bool | None = False,
                       what: str = "evaluation file") -> dict:
        """Decode the sources and score the outputs against the targets: BLEU and chrF (sacrebleu, on the
        detokenised text), ROUGE-1/2/L (F1), and the perplexity of the reference targets."""
        options = options or SearchOptions(beam=5)
        encoded, source_tokens, report = self._encode(pairs, long_source, what)  # once, for both uses
        outputs = self._decode(encoded, source_tokens, options, batch_size, False, progress)
        hypotheses, references = [o.text for o in outputs], [p.target for p in pairs]
        task = Seq2SeqTask(self.vocabulary, [], encoded, None, batch_size=1, eval_batch_size=batch_size, seed=0)
        figures = task.summarize(task.evaluate(self.model, task.valid_data, self.device))
        unknown = sum(i == UNK for e in encoded for i in e.source)
        return {"pairs": len(pairs), "bleu": bleu(hypotheses, references, bleu_tokenize),
                "chrf": chrf(hypotheses, references), **rouge(hypotheses, references),
                "perplexity": figures["perplexity"], "loss": figures["loss"], "target_tokens": figures["tokens"],
                "unknown_source_tokens": unknown, "truncated_sources": report.truncated_sources,
                "beam": options.beam, "bleu_tokenize": bleu_tokenize, "hypotheses": hypotheses}

    def input_limit(self, max_input_length: int | None = None, long_input: str = "truncate") -> InputLimit:
        """The longest source this model reads (`seqlab.data.limits`): its --max-source-length (the
        transformer's positions; what the lm's window leaves), else DEFAULT_MAX_TOKENS, unless
        `max_input_length` says otherwise; longer sources keep their first tokens (with a warning) or
        are refused (long_input="reject", `--long-source reject`)."""
        model = self.config.model
        hard = {"transformer": model.max_positions, "lm": model.max_positions - 1 - self.vocabulary.max_target}
        return InputLimit.resolve(max_input_length, self.vocabulary.max_source or DEFAULT_MAX_TOKENS,
                                  hard.get(model.arch), f"this {model.arch} model", long_input, "head", "source")

    def generate_stream(self, path: str | Path = "-", input_format: str = "text", options: SearchOptions | None = None,
                        batch_size: int = 64, chunk_size: int = CHUNK_SIZE, attention: bool = False,
                        max_input_length: int | None = None, long_input: str = "truncate",
                        what: str = "input file") -> Iterator[list[tuple[Pair, Output]]]:
        """Decode the sources of a file (or standard input, "-") a chunk at a time: each chunk's
        (Pair, Output) in input order, as soon as it is decoded; memory does not grow with the input.

        input_format: text (a source per line) or tsv / jsonl (a file of pairs, its sources read from
        the run's --source-field). A chunk holds at most `chunk_size` sources, sorted by length into
        batches (from a pipe or a terminal the first chunk is one batch, then twice as many each time,
        and a chunk ends early when the input pauses: `seqlab.data.stream.chunked`)."""
        options = options or SearchOptions(beam=5)
        limit = self.input_limit(max_input_length, long_input)
        data = self.config.data
        with LineReader(path, what, limit.chars) as lines:
            if input_format == "text":
                pairs = aligned_pairs(lines, None, path, None, what)
            else:
                pairs = paired_reader(input_format, data.source_field, data.target_field, path, what,
                                      with_targets=False, option=None)(lines)
            for chunk in chunked(pairs, chunk_size, *interactive(lines, batch_size),
                                 chars=lambda p: len(p.source)):
                encoded, tokens = self._encode_within(chunk, limit, lines.place, LengthReport())
                yield list(zip(chunk, self._decode(encoded, tokens, options, batch_size, attention, False),
                               strict=True))
        limit.warn(place(what, path))

    def _encode_within(self, pairs: list[Pair], limit: InputLimit, where, report: LengthReport):
        """The pairs as ids, each source cut to the limit first (or refused; `where(line)` names its
        line), targets to the model's --max-target-length (counted in `report`); and the source tokens."""
        tokens = [limit.apply(t, where(p.line), p.line, line_cut=p.cut)
                  for t, p in zip(self.vocabulary.source_tokens([p.source for p in pairs]), pairs, strict=True)]
        vocabulary = copy.copy(self.vocabulary)
        vocabulary.max_source = limit.tokens
        return vocabulary.encode(pairs, "", "", "truncate", report, tokens), tokens

    def evaluate_files(self, source: str | Path, target: str | Path | None = None, fmt: str | None = None,
                       options: SearchOptions | None = None, batch_size: int = 64, bleu_tokenize: str = "13a",
                       long_source: str = "truncate", progress: bool | None = False, chunk_size: int = CHUNK_SIZE,
                       max_input_length: int | None = None, write_hypothesis=None,
                       keep_hypotheses: bool = True, on_predictions: Callable | None = None) -> dict:
        """`evaluate_pairs` on two aligned files, or on one file of pairs (target None; the training
        run's --format and fields unless `fmt` is given; a .parquet file's fields are its columns), read
        and decoded a chunk of pairs at a time.

        Memory does not grow with the files: BLEU and chrF are computed from sacrebleu's sentence
        statistics summed over the chunks, ROUGE from summed F1 (`seqlab.metrics.CorpusScores`), the
        perplexity from the summed loss and token count; no hypothesis or reference is kept, unless
        keep_hypotheses (the default, for the result's "hypotheses"). `write_hypothesis` is called with
        each output in order as it is decoded; `on_predictions(references, outputs)` with each chunk's
        texts, for figures per pair (`seqlab.cards.intervals`). The figures are those of the whole files (the
        perplexity to float rounding). A reference line is read up to the same number of characters
        as a source line (`seqlab.data.limits`)."""
        options = options or SearchOptions(beam=5)
        limit = self.input_limit(max_input_length, long_source)
        data, what = self.config.data, "evaluation file"
        scores, report = CorpusScores(bleu_tokenize), LengthReport()
        task = Seq2SeqTask(self.vocabulary, [], [], None, batch_size=1, eval_batch_size=batch_size, seed=0)
        totals: dict = {}
        unknown, hypotheses = 0, []
        with contextlib.ExitStack() as stack:
            if target is None and is_parquet(source):       # a Parquet file of pairs: its fields' columns
                pairs = parquet_pairs(source, data.source_field, data.target_field, what)
                sources = SimpleNamespace(place=lambda line=None: place(what, source, line))
            elif target is None:
                sources = stack.enter_context(LineReader(source, what, limit.chars, stdin=False))
                pairs = paired_reader(fmt or data.format, data.source_field, data.target_field, source, what,
                                      option=EVALUATED)(sources)
            else:
                sources = stack.enter_context(LineReader(source, f"{what} source", limit.chars, stdin=False))
                targets = stack.enter_context(LineReader(target, f"{what} target", limit.chars, stdin=False))
                pairs = aligned_pairs(sources, targets, source, target, what)
            bar = stack.enter_context(progress_bar(None, progress, desc="decoding", unit="pair", leave=False))
            for chunk in chunked(pairs, chunk_size, chars=lambda p: len(p.source) + len(p.target)):
                encoded, tokens = self._encode_within(chunk, limit, sources.place, report)
                texts = [o.text for o in self._decode(encoded, tokens, options, batch_size, False, False)]
                scores.add(texts, [p.target for p in chunk])
                if on_predictions is not None:
                    on_predictions([p.target for p in chunk], texts)
                for key, value in task.evaluate(self.model, pair_batches(encoded, self.vocabulary, batch_size, None),
                                                self.device).items():
                    totals[key] = totals.get(key, 0) + value
                unknown += sum(i == UNK for e in encoded for i in e.source)
                for text in texts:
                    if write_hypothesis is not None:
                        write_hypothesis(text)
                hypotheses.extend(texts if keep_hypotheses else ())
                bar.update(len(chunk))
        limit.warn(place(what, source))
        for message in report.messages(place(what, source), limit.tokens, self.vocabulary.max_target):
            warnings.warn(message, stacklevel=2)
        figures = task.summarize(totals)
        return {"pairs": figures["pairs"], **scores.scores(), "perplexity": figures["perplexity"],
                "loss": figures["loss"], "target_tokens": figures["tokens"], "unknown_source_tokens": unknown,
                "truncated_sources": limit.cut, "beam": options.beam, "bleu_tokenize": bleu_tokenize,
                **({"hypotheses": hypotheses} if keep_hypotheses else {})}


def _show(token: str) -> str:
    """A token as a heat map label: byte-level BPE's space marker as '▁'."""
    return token.replace("Ġ", "▁").replace("Ċ", "\\n")
