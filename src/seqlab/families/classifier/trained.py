"""A trained classifier's API (`seqlab.load(run)` of a classifier run): `TrainedClassifier` classifies texts
and documents (each with every class's probability), streams a file of any size in chunks, and scores a
labelled file (accuracy, macro-F1, per-class figures, the confusion matrix)."""

from __future__ import annotations

import copy
import dataclasses
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

from seqlab.data.batching import length_batches
from seqlab.data.documents import Columns, Document, document_reader, text_documents
from seqlab.data.limits import DEFAULT_MAX_TOKENS, InputLimit
from seqlab.data.sniff import EVALUATED
from seqlab.data.stream import CHUNK_SIZE, LineReader, chunked, interactive
from seqlab.decoding import core
from seqlab.errors import SeqlabError, place
from seqlab.families.classifier import FAMILY
from seqlab.families.classifier.config import ClassifierTrainConfig
from seqlab.families.classifier.model import RECURRENT, Classifier
from seqlab.families.classifier.task import (
    ClassificationTask,
    DocumentVocabulary,
    Truncation,
    document_batches,
    document_lengths,
    probabilities,
    with_lm_features,
)
from seqlab.families.classifier.vocab import Prediction
from seqlab.progress import progress_bar
from seqlab.runs.files import FromRun
from seqlab.training.plots import plot_confusion


class TrainedClassifier(FromRun):
    """A loaded classifier: texts in, classes (with their probabilities) out."""

    family = FAMILY

    def __init__(self, model: Classifier, vocabulary: DocumentVocabulary, config: ClassifierTrainConfig, device):
        self.model, self.vocabulary, self.config, self.device = model, vocabulary, config, device

    @property
    def labels(self) -> list[str]:
        return self.vocabulary.labels

    def classify(self, texts: list[str] | str, batch_size: int = 64, progress: bool | None = False):
        """The Prediction for each text (for one text given as a string, one Prediction). Texts longer
        than the training --max-length are truncated as in training, with a warning."""
        if isinstance(texts, str):
            return self.classify([texts], batch_size, progress)[0]
        empty = [i for i, t in enumerate(texts) if not t.strip()]
        if empty:
            raise SeqlabError(f"text {empty[0] + 1} of {len(texts)} is empty; there is nothing to classify")
        return self.classify_documents([Document(t, None, i + 1) for i, t in enumerate(texts)], batch_size, progress)

    def classify_documents(self, documents: list[Document], batch_size: int = 64, progress: bool | None = False,
                           what: str = "input") -> list[Prediction]:
        """The Prediction for each document (its label, if any, is ignored), in order."""
        counter = Truncation()
        unlabelled = [dataclasses.replace(d, label=None) for d in documents]
        encoded = self.vocabulary.encode_all(unlabelled, "", what, counter)
        message = counter.report(what, self.vocabulary.max_length, self.vocabulary.truncate)
        if message:
            warnings.warn(message, stacklevel=2)
        return self._predict(encoded, batch_size, progress)

    @torch.no_grad()
    def _predict(self, encoded: list, batch_size: int, progress: bool | None = False) -> list[Prediction]:
        """Each document's Prediction, batches of similar length. On a server's inference thread the work is cut
        into slices with a checkpoint between two: a recurrent encoder reads a window of time steps of the whole
        batch at a time (`RecurrentStack.windowed`), the other classifiers classify a few documents at a time
        (`core.slices`): the same labels, and probabilities within float rounding of the unsliced pass's, as any
        other batching gives."""
        results: list[Prediction | None] = [None] * len(encoded)
        encoded = with_lm_features(self.model, encoded)
        lengths = document_lengths(encoded)
        groups = length_batches(lengths, batch_size, None)   # shortest first: little padding
        for group in progress_bar(groups, progress, desc="classifying", unit="batch", leave=False):
            costs = [max(1, lengths[i]) for i in group]
            by_rows = self.config.model.arch not in RECURRENT                 # the recurrent ones read in windows
            for part in core.slices(costs, (id(self.model), "classify")) if by_rows else [range(len(group))]:
                rows = [group[j] for j in part]
                batch = self.vocabulary.collate([encoded[i] for i in rows]).to(self.device)
                p = probabilities(self.model, self.model(batch.words, batch.lengths, batch.features, batch.lm))
                for i, row in zip(rows, p.tolist(), strict=True):                                # (B, K)
                    best = max(range(len(row)), key=row.__getitem__)
                    results[i] = Prediction(self.labels[best], row[best], dict(zip(self.labels, row, strict=True)))
        return results

    def input_limit(self, max_input_length: int | None = None, long_input: str = "truncate") -> InputLimit:
        """The longest document this classifier reads (`seqlab.data.limits`): its training --max-length
        (a transformer's is its positions), else DEFAULT_MAX_TOKENS, unless `max_input_length` says
        otherwise; longer ones keep their first (or, trained with --truncate tail, last) tokens."""
        model, data = self.config.model, self.config.data
        hard = model.max_positions - (model.document_pooling == "cls") if model.arch == "transformer" else None
        return InputLimit.resolve(max_input_length, data.max_length or hard or DEFAULT_MAX_TOKENS, hard,
                                  f"this {model.arch} classifier", long_input, data.truncate, "document")

    def columns(self, text_column: str | None = None, label_column: str | None = None,
                header: str | None = None) -> Columns:
        """The columns training read (`--text-column`, `--label-column`, `--header`), with those given here
        instead: how a table or JSON-lines file is read for evaluation and classification."""
        columns = self.config.data.columns
        given = {"text": text_column, "label": label_column, "header": header}
        return dataclasses.replace(columns, **{k: str(v) for k, v in given.items() if v is not None})

    def classify_stream(self, path: str | Path = "-", input_format: str = "text", batch_size: int = 64,
                        chunk_size: int = CHUNK_SIZE, max_input_length: int | None = None, long_input: str = "truncate",
                        what: str = "input file", text_column: str | None = None,
                        header: str | None = None) -> Iterator[list[Prediction]]:
        """Classify a file (or standard input, "-") a chunk of documents at a time: each chunk's
        Predictions, in input order, as soon as they are made; memory does not grow with the input.

        input_format: text (a document per line) or a training format (its labels, if any, ignored), read
        with the run's columns, or `text_column` / `header` (tsv, csv, jsonl) instead.
        A chunk holds at most `chunk_size` documents, sorted by length into batches (from a pipe or a
        terminal the first chunk is one batch, then twice as many each time, and a chunk ends early
        when the input pauses: `seqlab.data.stream.chunked`).
        Documents over the limit (`input_limit`) are truncated with a warning, or refused."""
        limit = self.input_limit(max_input_length, long_input)
        data = self.config.data
        if input_format in ("text", "labeled-lines", "sst-tree") and (text_column is not None or header is not None):
            raise SeqlabError(f"--{'text-column' if text_column is not None else 'header'} names a column of tsv, csv "
                              f"or jsonl input; {path} is read as {input_format} (--input-format)")
        with LineReader(path, what, limit.chars, limit.keep if input_format == "text" else "head") as lines:
            if input_format == "text":
                documents = text_documents(lines, path, what)
            else:
                documents = document_reader(input_format, self.columns(text_column, None, header), path, what,
                                            labelled=False,
                                            sst_classes=data.sst_classes, option=None)(lines)
            for chunk in chunked(documents, chunk_size, *interactive(lines, batch_size),
                                 chars=lambda d: len(d.text)):
                unlabelled = [dataclasses.replace(d, label=None) for d in chunk]
                yield self._predict(self._encode_within(unlabelled, limit, lines.place, path, what), batch_size)
        limit.warn(place(what, path))

    def _encode_within(self, documents: list[Document], limit: InputLimit, where, path, what: str) -> list:
        """The documents as ids, each cut to the limit first (or refused); `where(line)` names a line."""
        vocabulary = copy.copy(self.vocabulary)
        vocabulary.max_length, vocabulary.truncate = limit.tokens, limit.keep
        tokens = [limit.apply(vocabulary.tokens(d.text), where(d.line), d.line, line_cut=d.cut) for d in documents]
        return vocabulary.encode_all(documents, path, what, None, tokens)

    def evaluate_file(self, path: str | Path, fmt: str | None = None, confusion_png: str | Path | None = None,
                      progress: bool | None = False, chunk_size: int = CHUNK_SIZE, max_input_length: int | None = None,
                      long_input: str = "truncate", on_predictions: Callable | None = None,
                      text_column: str | None = None, label_column: str | None = None,
                      header: str | None = None) -> dict:
        """Accuracy, per-class P/R/F1, macro-F1 and the confusion matrix on a labelled file (a label
        training never saw is an error naming its line); optionally the matrix as a PNG heat map.
        The file is read in `fmt` (default: the run's --format) with the run's columns, or `text_column`,
        `label_column`, `header` instead. `on_predictions(gold, predicted)` is called with each chunk's class
        indices, for figures per document (`seqlab.cards.intervals`).

        The file is read a chunk of documents at a time, in memory that does not grow with it; the
        confusion matrix (and the loss) are sums over documents, so the chunks give the figures of the
        whole file (the loss to float rounding)."""
        what = "evaluation file"
        data = self.config.data
        limit = self.input_limit(max_input_length, long_input)
        read = document_reader(fmt or data.format, self.columns(text_column, label_column, header), path, what,
                               sst_classes=data.sst_classes, option=EVALUATED)
        task = ClassificationTask(self.vocabulary, [], [], None, batch_size=1, eval_batch_size=128, seed=0,
                                  metric=data.metric)
        task.keep_predictions = on_predictions is not None
        totals: dict = {}
        bar = progress_bar(None, progress, desc="evaluating", unit="document", leave=False)
        with LineReader(path, what, limit.chars, stdin=False) as lines, bar:
            for chunk in chunked(read(lines), chunk_size, chars=lambda d: len(d.text)):
                encoded = with_lm_features(self.model, self._encode_within(chunk, limit, lines.place, path, what))
                for key, value in task.evaluate(self.model, document_batches(encoded, self.vocabulary, 128, None),
                                                self.device).items():
                    totals[key] = totals.get(key, 0) + value
                if on_predictions is not None:
                    on_predictions(*task.predictions)
                bar.update(len(chunk))
        result = task.summarize(totals)
        result["truncated"] = limit.cut
        limit.warn(place(what, path))
        if confusion_png:
            plot_confusion(result["confusion"], self.labels, confusion_png, f"{Path(path).name}: "
                           f"{result['accuracy']:.2f}% accuracy")
        return result
