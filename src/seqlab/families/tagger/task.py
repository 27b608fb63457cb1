"""Sequence labelling for the trainer: sentences -> padded batches, the loss as (sum, count), and the
figures (token accuracy; entity precision / recall / F1 when the tags are IOB-style).

The loss is the cross-entropy of each token's gold tag under its softmax (SLP 13.3.1), or with a CRF
the negative log-likelihood of the whole gold sequence (summed over sentences; counted per token, so
the printed loss is per token either way). A gold tag that training never saw (possible in
validation or test files) cannot be scored by the loss and is left out of it, but it counts as an
error in accuracy and F1: no prediction can equal it.
"""

from __future__ import annotations

from collections import Counter
from functools import partial

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from seqlab.data import batching
from seqlab.data.batching import RowBatch
from seqlab.data.tags import split_tag
from seqlab.data.vocab import UNK
from seqlab.errors import SeqlabError
from seqlab.families.tagger.conll import Sentence
from seqlab.families.tagger.vocab import UNKNOWN_LABEL, Encoded, TagBatch, TaggerVocabulary  # noqa: F401  (re-exported)
from seqlab.metrics import PRF, span_scores
from seqlab.nn.lm_features import LM_FEATURE_DTYPE  # noqa: F401  (re-exported)
from seqlab.progress import progress_bar


def length_batches(items: list[Encoded], vocabulary: TaggerVocabulary, batch_size: int,
                   seed: int | None) -> list[TagBatch]:
    """Batches of sentences of similar length (`seqlab.data.batching.length_batches`): shuffled with a
    seed (training), every sentence shortest first without (evaluation)."""
    groups = batching.length_batches([len(item.words) for item in items], batch_size, seed)
    return [vocabulary.collate([items[i] for i in group]) for group in groups]


def with_lm_features(model, sentences: list[Sentence], items: list[Encoded], batch_size: int = 32) -> list[Encoded]:
    """Set each encoded sentence's contextual string embeddings (n, Fl) from the model's frozen LMs
    (`model.lm_features`, Akbik et al. 2018), once: training reuses them every epoch. A model without
    LM features leaves the items as they are."""
    extractor = getattr(model, "lm_features", None)
    if extractor is None:
        return items
    features = extractor.embed([s.tokens for s in sentences], batch_size)
    for item, vectors in zip(items, features, strict=True):
        item.lm = vectors.to(LM_FEATURE_DTYPE)
    return items


class SentenceList:
    """Sentences in memory, encoded once (with their LM features): the items of a split read by position, as
    `PreparedSentences` reads a prepared one. For evaluation files, the API and tests."""

    def __init__(self, vocabulary: TaggerVocabulary, sentences: list[Sentence], model=None):
        self.encoded = with_lm_features(model, sentences, [vocabulary.encode(s) for s in sentences])
        self.lengths = [len(item.words) for item in self.encoded]
        counts = Counter(token for sentence in sentences for token in sentence.tokens)
        self.singletons = torch.tensor(vocabulary.words.encode(sorted(w for w, n in counts.items() if n == 1)),
                                       dtype=torch.long)

    def __len__(self) -> int:
        return len(self.encoded)

    def item(self, i: int) -> Encoded:
        return self.encoded[i]

    def width(self, group: list[int]) -> tuple[int, int]:
        """(T, C) of a batch of these items: the longest sentence, and its characters per word."""
        chars = [self.encoded[i].chars for i in group]
        return max(self.lengths[i] for i in group), max(c.size(1) for c in chars) if chars[0] is not None else 0


class PreparedSentences:
    """A prepared split's sentences (`seqlab.families.tagger.prepare`), each read from the shards when asked for
    (`item(i)`): its ids, its characters spelled from its words, its gold tags, and its LM features (computed
    once for the split into a memory-mapped scratch file) with `model.lm_features`."""

    def __init__(self, split, vocabulary: TaggerVocabulary, model=None):
        from seqlab.data.prepared_items import Items

        self.items, self.vocabulary = Items(split), vocabulary        # checked by `prepare.open_prepared`
        self.lengths = self.items.lengths("words")
        self.word_chars = split.array("word_chars")
        try:
            self.singletons = torch.from_numpy(split.array("singletons")) if "singletons" in split.record \
                else torch.zeros(0, dtype=torch.long)
        except (OSError, ValueError) as error:
            raise SeqlabError(f"{split.folder}: {split.record['singletons']} is damaged ({error}); prepare "
                              "again") from None
        self.lm, self.starts = None, None
        if getattr(model, "lm_features", None) is not None:
            self.lm, self.starts = self._lm_features(model.lm_features)

    def __len__(self) -> int:
        return len(self.items)

    def item(self, i: int) -> Encoded:
        tokens = self.items.texts("tokens", i)
        lm = None
        if self.lm is not None:
            lm = torch.from_numpy(np.array(self.lm[self.starts[i]:self.starts[i + 1]]))         # (n, Fl)
        return Encoded(torch.from_numpy(self.items.column("words", i).astype(np.int64)),
                       torch.from_numpy(self.items.column("tags", i).astype(np.int64)),
                       self.vocabulary.spell(tokens), self.items.texts("gold", i), lm)

    def width(self, group: list[int]) -> tuple[int, int]:
        C = min(self.vocabulary.max_word_chars, max(1, int(self.word_chars[group].max())))
        return int(self.lengths[group].max()), C if self.vocabulary.chars is not None else 0

    def _lm_features(self, extractor, batch_size: int = 32):
        """Every sentence's LM features (tokens, Fl) in a scratch file, computed as `with_lm_features` computes
        them (the same batches of sentences of similar length, so the very same numbers)."""
        import tempfile

        from seqlab.nn.lm_features import sentence_text

        starts = np.concatenate([[0], np.cumsum(self.lengths)])
        key = [len(sentence_text(self.items.texts("tokens", i))) for i in range(len(self))]
        order = sorted((i for i in range(len(self)) if self.lengths[i]), key=key.__getitem__)
        features = np.memmap(tempfile.TemporaryFile(), np.float16, "w+",
                             shape=(max(1, int(starts[-1])), extractor.output_size))
        for k in range(0, len(order), batch_size):
            chunk = order[k:k + batch_size]
            for i, vectors in zip(chunk, extractor.embed([self.items.texts("tokens", i) for i in chunk], batch_size),
                                  strict=True):
                features[starts[i]:starts[i + 1]] = vectors.to(LM_FEATURE_DTYPE).numpy()
        return features, starts


class TagRows(RowBatch):
    """A global training batch (`seqlab.data.batching.RowBatch`): `rows(a, b)` reads and collates those sentences
    alone, padded to the whole batch's width; any other attribute is the whole batch's (`TagBatch`)."""

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.whole(), name)


class UnkDraws:
    """--unk-replace's random draws of an epoch: one generator seeded by (seed, epoch) draws a (B, T) mask per
    batch in batch order; `mask(k)` replays it over the batches' shapes (known from the lengths alone) up to
    batch k, so that reading any batch, in any process, gives the draws of the whole epoch drawn in order."""

    def __init__(self, seed: int, shapes: list[tuple[int, int]], rate: float):
        self.seed, self.shapes, self.rate = seed, shapes, rate
        self.generator, self.next, self.last = None, 0, None

    def mask(self, k: int) -> Tensor:
        if self.generator is None or k < self.next - 1:
            self.generator, self.next = torch.Generator().manual_seed(self.seed), 0
        while self.next <= k:
            self.last = torch.rand(self.shapes[self.next], generator=self.generator) < self.rate    # (B, T)
            self.next += 1
        return self.last


def best_tags(model, scores: Tensor, mask: Tensor) -> Tensor:
    """The best tag ids (B, T) for emission scores (B, T, K): Viterbi through the CRF, or each argmax."""
    if model.crf is not None:
        return model.crf.decode(scores.float(), mask)
    return scores.argmax(-1)


class TaggingTask:
    """Sequence labelling for the trainer (the `seqlab.training.task.Task` contract)."""

    name = "tagger"
    unit = "token"                        # what `count` counts
    batch_unit = "sentences"
    keep_predictions = False        # evaluate() then leaves (gold, predicted) tag lists in self.predictions
    progress: bool | None = False   # a bar over evaluation batches (None: when stderr is a terminal)

    def __init__(self, vocabulary: TaggerVocabulary, train: list[Sentence] | PreparedSentences,
                 valid: list[Sentence] | PreparedSentences, test: list[Sentence] | PreparedSentences | None,
                 batch_size: int, eval_batch_size: int, seed: int, unk_replace: float = 0.0, model=None):
        """The splits: sentences in memory, or prepared splits (`PreparedSentences`, the training path), whose
        training batches are read a global batch at a time. `model`: the tagger, when it has LM features
        (`model.lm_features`): every sentence's are computed here, once, and kept with its ids."""
        self.vocabulary, self.batch_size, self.seed = vocabulary, batch_size, seed
        self.unk_replace = unk_replace
        self.train = train if isinstance(train, PreparedSentences) else SentenceList(vocabulary, train, model)
        self.singletons = self.train.singletons
        self.entity_tags = vocabulary.entity_tags
        self.metric = "f1" if self.entity_tags else "accuracy"
        self.types = sorted({split_tag(label)[1] for label in vocabulary.labels} - {""}) if self.entity_tags else []

        def evaluation_batches(split):
            items = split if isinstance(split, PreparedSentences) else SentenceList(vocabulary, split, model)
            return length_batches([items.item(i) for i in range(len(items))], vocabulary, eval_batch_size, None)

        self.valid_data = evaluation_batches(valid)
        self.test_data = evaluation_batches(test) if test else None
        self._epoch_batches: tuple[int, list[TagRows]] | None = None

    def train_batches(self, epoch: int) -> list[TagRows]:
        """The epoch's global batches, grouped by (seed, epoch) from the lengths alone; a batch's sentences are
        read when its rows are asked for."""
        if self._epoch_batches is None or self._epoch_batches[0] != epoch:
            groups = batching.length_batches(self.train.lengths, self.batch_size, self.seed * 1_000_003 + epoch)
            widths = [self.train.width(group) for group in groups]
            draws = None
            if self.unk_replace > 0 and len(self.singletons):
                # words seen once in training read as <unk> now and then, so that <unk> (every unseen
                # word at test time) gets a trained embedding; the choice depends on seed and epoch only
                shapes = [(len(group), T) for group, (T, _) in zip(groups, widths, strict=True)]
                draws = UnkDraws(self.seed * 7919 + epoch, shapes, self.unk_replace)
            batches = [TagRows(len(group), partial(self._read, group, width, k, draws))
                       for k, (group, width) in enumerate(zip(groups, widths, strict=True))]
            self._epoch_batches = (epoch, batches)
        return self._epoch_batches[1]

    def _read(self, group: list[int], width: tuple[int, int], k: int, draws: UnkDraws | None, start: int,
              stop: int) -> TagBatch:
        """Rows start..stop of global batch k (`group`: its sentences), padded to its width (T, C)."""
        rows = group[start:stop]
        if not rows:
            return self.vocabulary.collate([self.train.item(group[0])], width).rows(0, 0)
        batch = self.vocabulary.collate([self.train.item(i) for i in rows], width)
        if draws is not None:
            chosen = draws.mask(k)[start:start + len(rows)]                                 # (b, T)
            batch.words = batch.words.masked_fill(chosen & torch.isin(batch.words, self.singletons), UNK)
        return batch

    def initial_state(self, model, rows: int, device):
        return None

    @staticmethod
    def count(batch: TagBatch) -> int:
        """The tokens whose gold tag the model knows (in training data: every token)."""
        return int((batch.tags != UNKNOWN_LABEL).sum())

    def loss(self, model, batch: TagBatch, state):
        scores = model(batch.words, batch.lengths, batch.chars, batch.lm)              # (B, T, K)
        loss_sum, count = token_losses(model, scores, batch)
        return loss_sum, count, None

    @torch.no_grad()
    def evaluate(self, model, batches: list[TagBatch], device, rows: slice = slice(None)) -> dict:
        """Summable counts: loss, tokens, tokens right, and entity spans (overall and per type)."""
        was_training = model.training
        model.eval()
        stats = {"loss_sum": 0.0, "tokens": 0, "correct": 0}
        golds, predictions = [], []
        for batch in progress_bar(batches, self.progress, desc="evaluating", unit="batch", leave=False):
            batch = batch.rows(rows.start or 0, rows.stop if rows.stop is not None else len(batch.gold))
            if not batch.gold:
                continue
            batch = batch.to(device)
            scores = model(batch.words, batch.lengths, batch.chars, batch.lm)
            loss_sum, _ = token_losses(model, scores, batch)
            stats["loss_sum"] += float(loss_sum)
            stats["tokens"] += batch.num_tokens
            for gold, ids in zip(batch.gold, best_tags(model, scores, batch.mask).tolist(), strict=True):
                predicted = [self.vocabulary.labels[i] for i in ids[:len(gold)]]
                stats["correct"] += sum(g == p for g, p in zip(gold, predicted, strict=True))
                golds.append(gold)
                predictions.append(predicted)
        model.train(was_training)
        if self.keep_predictions:
            self.predictions = (golds, predictions)
        if self.entity_tags:            # the same keys in every process (the training types), for all_reduce
            scores = span_scores(golds, predictions)
            for suffix, part in [("", scores.overall), *((f"/{k}", scores.by_type.get(k, PRF())) for k in self.types)]:
                for what in ("correct", "predicted", "gold"):
                    stats[f"spans_{what}{suffix}"] = getattr(part, what)
        return stats

    def summarize(self, stats: dict) -> dict:
        tokens = int(stats["tokens"])
        result = {"tokens": tokens, "loss": stats["loss_sum"] / max(tokens, 1),
                  "accuracy": 100.0 * stats["correct"] / max(tokens, 1)}
        if self.entity_tags:
            result.update(span_figures(stats, ""))
            result["by_type"] = {kind: span_figures(stats, "/" + kind) for kind in self.types}
        return result

    def progress_fields(self, loss: float) -> dict:
        return {"loss": f"{loss:.3f}"}

    def describe(self, record: dict) -> str:
        where = f"step {record['step']}" + (f" (epoch {record['epoch']})" if "epoch" in record else "")
        figures = f"accuracy {record['accuracy']:.2f}%"
        if "f1" in record:
            figures = (f"entity F1 {record['f1']:.2f} (precision {record['precision']:.2f}, recall "
                       f"{record['recall']:.2f}), token {figures}")
        return f"{where} {record['split']}: {figures}, loss {record['loss']:.4f} over {record['tokens']:,} tokens"


def token_losses(model, scores: Tensor, batch: TagBatch) -> tuple[Tensor, Tensor]:
    """Summed loss over the batch's tokens, and its count: the tokens with a known gold tag
    (`TaggingTask.count`). With a CRF the loss is each whole sentence's negative log-likelihood, where an
    unseen gold tag (possible only outside training data) is scored as tag 0 (documented)."""
    known = batch.tags != UNKNOWN_LABEL                                       # (B, T); padding too
    if scores.dtype not in (torch.float32, torch.float64):
        scores = scores.float()
    if model.crf is not None:
        tags = batch.tags.clamp(min=0)
        return model.crf.nll(scores, tags, batch.mask).sum(), known.sum()
    loss_sum = F.cross_entropy(scores[known], batch.tags[known], reduction="sum")
    return loss_sum, known.sum()


def span_figures(stats: dict, suffix: str) -> dict:
    """Precision, recall and F1 (percent) with their counts, from the summed span counts."""
    return PRF(*(int(stats[f"spans_{w}{suffix}"]) for w in ("correct", "predicted", "gold"))).as_dict()
