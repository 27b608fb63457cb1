"""A trained tagger's API (`seqlab.load(run)` of a tagger run): `TrainedTagger` tags sentences (argmax, or
Viterbi with a CRF), streams a file of any size in chunks, and scores a labelled file (accuracy, entity
precision / recall / F1, the most confused tags)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

from seqlab.data.limits import DEFAULT_MAX_TOKENS, InputLimit
from seqlab.data.sniff import EVALUATED
from seqlab.data.stream import CHUNK_SIZE, LineReader, chunked, interactive
from seqlab.data.tags import (
    detect_scheme,
)
from seqlab.decoding import core
from seqlab.errors import SeqlabError, place
from seqlab.families.tagger import FAMILY
from seqlab.families.tagger.config import TaggerTrainConfig, prepare, refuse_stray_tags
from seqlab.families.tagger.conll import FORMATS, Sentence, labelled_sentences
from seqlab.families.tagger.model import Tagger
from seqlab.families.tagger.task import TaggerVocabulary, TaggingTask, best_tags, length_batches, with_lm_features
from seqlab.metrics import mistakes, most_confused
from seqlab.progress import progress_bar
from seqlab.runs.files import FromRun


class TrainedTagger(FromRun):
    """A loaded tagger: tokens in, tags (with their probabilities) out."""

    family = FAMILY

    def __init__(self, model: Tagger, vocabulary: TaggerVocabulary, scheme: str, config: TaggerTrainConfig, device,
                 file_scheme: str | None = None):
        self.model, self.vocabulary, self.scheme, self.config, self.device = model, vocabulary, scheme, config, device
        self.file_scheme = file_scheme or scheme            # the training file's: how a gold file is read

    @torch.no_grad()
    def tag_sentences(self, sentences: list[list[str]], batch_size: int = 64,
                      progress: bool | None = False) -> list[list[tuple[str, float]]]:
        """(tag, probability) for every token of every sentence, batched; an empty sentence gets [].
        `progress`: None or True shows a progress bar over the batches when stderr is a terminal.

        The probability is the tag's softmax probability at its token; with a CRF, the tags come from
        Viterbi and each one's probability is its marginal p(y_t = tag | sentence) under the CRF.

        On a server's inference thread the work is cut into slices with a checkpoint between two: a recurrent
        encoder reads a window of time steps of the whole batch at a time (`RecurrentStack.windowed`, the CRF's
        recursions too, the character encoder a few words at a time), a transformer or window tagger tags a few
        sentences at a time (`core.slices`). The same tags, and probabilities within float rounding (1e-7 to 1e-6)
        of the unsliced pass's, as any other batching of the sentences gives (a packed recurrent pass computes
        the steps where few rows are left with another kernel, whose last digits differ)."""
        results: list[list[tuple[str, float]]] = [[] for _ in sentences]
        items = [Sentence(list(tokens), ["O"] * len(tokens)) for tokens in sentences]
        order = [i for i in sorted(range(len(items)), key=lambda i: len(items[i])) if len(items[i])]
        starts = range(0, len(order), batch_size)
        for k in progress_bar(starts, progress, desc="tagging", unit="batch", leave=False):
            chunk = order[k:k + batch_size]
            lengths = [len(items[i]) for i in chunk]                          # shortest first
            by_rows = self.config.model.encoder not in ("rnn", "lstm", "gru")   # the others read in windows
            for part in core.slices(lengths, (id(self.model), "tag")) if by_rows else [range(len(chunk))]:
                rows = [chunk[j] for j in part]
                for i, tagged in zip(rows, self._tag_batch([items[i] for i in rows]), strict=True):
                    results[i] = tagged
        return results

    def _tag_batch(self, sentences: list[Sentence]) -> list[list[tuple[str, float]]]:
        """(tag, probability) for every token of sentences tagged in one forward pass; their reading and the
        answer's lists are cut into slices too (a few sentences at a time)."""
        lengths = [len(s) for s in sentences]
        encoded = []
        for part in core.slices(lengths, (id(self.model), "read")):
            encoded += [self.vocabulary.encode(sentences[i]) for i in part]
        encoded = with_lm_features(self.model, sentences, encoded)
        batch = self.vocabulary.collate(encoded).to(self.device)
        scores = self.model(batch.words, batch.lengths, batch.chars, batch.lm)   # (B, T, K)
        if self.model.crf is not None:
            probabilities = self.model.crf.marginals(scores.float(), batch.mask)   # (B, T, K)
        else:
            probabilities = torch.softmax(scores.float(), dim=-1)
        best = best_tags(self.model, scores, batch.mask)                   # (B, T)
        chosen = probabilities.gather(-1, best[:, :, None]).squeeze(-1)   # (B, T)
        tagged = []
        for part in core.slices(lengths, (id(self.model), "answer")):
            tagged += [[(self.vocabulary.labels[t], p) for t, p in
                        zip(best[row, :lengths[row]].tolist(), chosen[row, :lengths[row]].tolist(), strict=True)]
                       for row in part]
        return tagged

    def tag(self, tokens: list[str]) -> list[tuple[str, float]]:
        """(tag, probability) for each token of one sentence."""
        return self.tag_sentences([tokens])[0]

    def input_limit(self, max_input_length: int | None = None, long_input: str = "truncate") -> InputLimit:
        """The longest sentence this tagger reads (`seqlab.data.limits`): a transformer's positions, else
        DEFAULT_MAX_TOKENS, unless `max_input_length` says otherwise; longer ones truncated or rejected."""
        model = self.config.model
        hard = model.max_positions if model.encoder == "transformer" else None
        return InputLimit.resolve(max_input_length, hard or DEFAULT_MAX_TOKENS, hard, f"this {model.encoder} tagger",
                                  long_input, "head", "sentence")

    def tag_stream(self, path: str | Path = "-", input_format: str = "text", batch_size: int = 64,
                   chunk_size: int = CHUNK_SIZE, max_input_length: int | None = None, long_input: str = "truncate",
                   what: str = "input file") -> Iterator[list[tuple[list[str], list[tuple[str, float]]]]]:
        """Tag a file (or standard input, "-") a chunk of sentences at a time: each chunk's (tokens, tags)
        pairs, in input order, as soon as it is tagged; memory does not grow with the input.

        input_format: text (a sentence per line, tokens separated by whitespace; an empty line is an
        empty sentence) or conllu / conll (the tokens of a CoNLL-U or CoNLL-2003 file). A chunk holds at
        most `chunk_size` sentences, sorted by length into batches (from a pipe or a terminal the first
        chunk is one batch, then twice as many each time, and a chunk ends early when the input pauses).
        Sentences longer than the limit (`input_limit`) are cut to their first tokens with a warning, or
        refused (long_input="reject")."""
        limit = self.input_limit(max_input_length, long_input)
        with LineReader(path, what, limit.chars) as lines:
            sentences = input_sentences(lines, input_format, limit, path, what)
            for chunk in chunked(sentences, chunk_size, *interactive(lines, batch_size), chars=token_chars):
                yield list(zip(chunk, self.tag_sentences(chunk, batch_size), strict=True))
        limit.warn(place(what, path))

    def evaluate_file(self, path: str | Path, fmt: str | None = None, top_confusions: int = 10,
                      chunk_size: int = CHUNK_SIZE, max_input_length: int | None = None,
                      long_input: str = "truncate", on_predictions: Callable | None = None) -> dict:
        """Accuracy (and entity P/R/F1 for IOB-style tags) on a labelled file, the most frequent
        (gold, predicted) mistakes, and the gold tags training never saw (each token an error).
        `on_predictions(gold, predicted)` is called with each chunk's tag lists (in the run's scheme),
        for figures per sentence (`seqlab.cards.intervals`).

        The file is read twice, a chunk of sentences at a time, in memory that does not grow with it:
        once for its entity scheme (the one under which the fewest tags are invalid), once to tag and
        count. Every figure is a sum over sentences (tokens right, entity spans found / predicted /
        in gold, per type; mistakes by tag pair), so the chunks give the figures of the whole file
        (the loss to float rounding). A sentence over the limit is scored on its first tokens."""
        data = self.config.data
        what = "evaluation file"
        limit = self.input_limit(max_input_length, long_input)
        read = labelled_sentences(None, fmt or data.format, data.label_column or None, path, what, limit.tokens,
                                  EVALUATED)
        source = self.scheme
        if self.scheme != "none":
            with LineReader(path, what, limit.chars, stdin=False) as lines:
                checked = (refuse_stray_tags([s], str(path), what) or s for s in read(lines))
                source = detect_scheme((s.labels for s in checked), prefer=self.file_scheme)
        task = TaggingTask(self.vocabulary, [], [], None, batch_size=1, eval_batch_size=64, seed=0)
        task.keep_predictions = True
        totals: dict = {}
        confused, unseen = Counter(), Counter()
        with LineReader(path, what, limit.chars, stdin=False) as lines:
            for chunk in chunked(read(lines), chunk_size, chars=lambda s: token_chars(s.tokens)):
                for s in chunk:
                    limit.apply(s.tokens, lines.place(s.line), s.line, len(s) + s.dropped)   # reject, or count
                if self.scheme != "none":
                    prepare(chunk, source, self.scheme, str(path))
                encoded = with_lm_features(self.model, chunk, [self.vocabulary.encode(s) for s in chunk])
                batches = length_batches(encoded, self.vocabulary, 64, None)
                for key, value in task.evaluate(self.model, batches, self.device).items():
                    totals[key] = totals.get(key, 0) + value
                confused.update(mistakes(*task.predictions))
                if on_predictions is not None:
                    on_predictions(*task.predictions)
                unseen.update(label for s in chunk for label in s.labels if label not in self.vocabulary.label_index)
        limit.warn(place(what, path))
        result = task.summarize(totals)
        result["confusions"] = [{"gold": g, "predicted": p, "count": n}
                                for g, p, n in most_confused(confused, top_confusions)]
        result["unseen_tags"] = dict(unseen.most_common())
        result["truncated"] = limit.cut
        return result


def token_chars(tokens: list[str]) -> int:
    """A sentence's size in characters, for `chunked`."""
    return sum(map(len, tokens))


def input_sentences(lines: LineReader, fmt: str, limit: InputLimit, path, what: str) -> Iterator[list[str]]:
    """The token lists to tag, one at a time, each within the limit: the lines of a text split at
    whitespace (and at the other line breaks of str.splitlines, as `seqlab tag` always read them), or
    the tokens of CoNLL-U / CoNLL-2003 sentences (for conll, the first column; other columns ignored)."""
    if fmt == "text":
        for line in lines:
            parts = (line.text + "\n").splitlines()
            for k, part in enumerate(parts):
                yield limit.apply(part.split(), lines.place(line.number), line.number,
                                  line_cut=line.cut and k == len(parts) - 1)
        return
    if fmt not in FORMATS:
        raise SeqlabError(f"--input-format {fmt!r}: choose text, {', '.join(FORMATS)}")
    read = labelled_sentences(None, fmt, None if fmt == "conllu" else 0, path, what, limit.tokens, option=None)
    for sentence in read(lines):
        yield limit.apply(sentence.tokens, lines.place(sentence.line), sentence.line, len(sentence) + sentence.dropped)
