"""Pairs read as ids -> decoded outputs: the searches of `seqlab.decoding.search` (greedy, sampling, beam) over
batches of sources of similar length, each best hypothesis as an `Output` (its tokens, a copy model's source words
given back, the text its target tokenizer joins). The one decoding path of `TrainedSeq2Seq` (translate,
summarize, evaluate) and of training's evaluation (`seqlab.families.seq2seq.task`, --eval-decode)."""

from __future__ import annotations

from seqlab.data.batching import length_batches
from seqlab.data.vocab import UNK
from seqlab.decoding.search import Hypothesis, SearchOptions, decode
from seqlab.families.seq2seq.vocab import EncodedPair, Output, PairVocabulary
from seqlab.progress import progress_bar


def decode_pairs(model, vocabulary: PairVocabulary, encoded: list[EncodedPair], options: SearchOptions,
                 batch_size: int, device, source_tokens: list[list[str]] | None = None, attention: bool = False,
                 progress: bool | None = False) -> list[Output]:
    """Each pair's best output, in the pairs' order (`source_tokens`: each source's tokens, an output's heat map
    labels; `attention`: keep the attention weights)."""
    results: list[Output | None] = [None] * len(encoded)
    groups = length_batches([len(e.source) for e in encoded], batch_size, None)
    for group in progress_bar(groups, progress, desc="decoding", unit="batch", leave=False):
        batch = vocabulary.collate([encoded[i] for i in group]).to(device)
        hypotheses = decode(model, batch.source, batch.source_lengths, options, need_weights=attention,
                            source_copy=batch.source_copy)
        for i, best in zip(group, hypotheses, strict=True):
            tokens = source_tokens[i][:len(encoded[i].source)] if source_tokens is not None else []
            results[i] = output_of(vocabulary, best[0], tokens, encoded[i].oovs)
    return results


def output_of(vocabulary: PairVocabulary, hypothesis: Hypothesis, source_tokens: list[str],
              oovs: list[str] | None = None) -> Output:
    """A hypothesis as an `Output`: its ids as target tokens, joined by the target tokenizer."""
    vocab = vocabulary.target_vocab
    V = len(vocab)
    # a copy model's id V + k is the k-th out-of-vocabulary word of its source (See et al. 2017)
    oovs = oovs or []
    tokens = [vocab.tokens[i] if i < V else oovs[i - V] if i - V < len(oovs) else vocab.tokens[UNK]
              for i in hypothesis.tokens]
    weights = None if hypothesis.attention is None else hypothesis.attention.tolist()
    return Output(vocabulary.target_tokenizer.detokenize(tokens), tokens, hypothesis.score, hypothesis.normalized,
                  hypothesis.finished, source_tokens, weights)
