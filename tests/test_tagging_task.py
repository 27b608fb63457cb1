"""The tagging task under the one trainer: encoding from the training split only, length-bucketed
batches, overfitting the fixtures (POS accuracy, NER F1 with a constrained CRF), unseen tags."""

import json
import random
from pathlib import Path

import pytest
import torch

from seqlab.data.tags import allowed_transitions, invalid_positions
from seqlab.data.vocab import UNK
from seqlab.families.tagger.conll import Sentence, read_conll, read_conllu
from seqlab.families.tagger.model import Tagger, TaggerConfig
from seqlab.families.tagger.task import UNKNOWN_LABEL, TaggerVocabulary, TaggingTask, best_tags, length_batches
from seqlab.metrics import span_scores
from seqlab.training.config import TrainConfig
from seqlab.training.trainer import Trainer

FIXTURES = Path(__file__).parent / "fixtures"


def test_tagging_encoder_uses_the_training_split_only():
    train = [Sentence(["the", "cat"], ["DET", "NOUN"])]
    vocabulary = TaggerVocabulary.build(train, char_features=True)
    batch = vocabulary.batch([Sentence(["the", "dog", "ran"], ["DET", "NOUN", "VERB"]), Sentence(["cat"], ["NOUN"])])
    assert batch.words.shape == (2, 3) and batch.lengths.tolist() == [3, 1]
    assert batch.words[0, 1] == UNK                                      # "dog" never seen in training
    assert batch.tags[0].tolist() == [0, 1, UNKNOWN_LABEL]              # VERB never seen: -1
    assert batch.tags[1, 1:].eq(UNKNOWN_LABEL).all()                     # padding
    assert batch.chars.shape == (2, 3, 3) and batch.chars[0, 1, 0] == UNK   # 'd' unseen
    assert vocabulary.labels == ["DET", "NOUN"] and not vocabulary.entity_tags


def test_tagging_batches_cover_every_sentence_once_and_repeat_with_the_seed():
    sentences = [Sentence(["w"] * n, ["X"] * n) for n in range(1, 42)]
    vocabulary = TaggerVocabulary.build(sentences)
    items = [vocabulary.encode(s) for s in sentences]
    first = length_batches(items, vocabulary, 4, seed=7)
    torch.manual_seed(123)                                                # the global RNGs play no part
    random.seed(123)
    again = length_batches(items, vocabulary, 4, seed=7)
    assert [b.lengths.tolist() for b in first] == [b.lengths.tolist() for b in again]
    assert len(first) == 10 and all(len(b.gold) == 4 for b in first)    # whole batches for training
    seen = [n for b in first for n in b.lengths.tolist()]
    assert len(set(seen)) == 40 and set(seen) <= set(range(1, 42))       # 40 of the 41, none twice
    other = length_batches(items, vocabulary, 4, seed=8)
    assert [b.lengths.tolist() for b in other] != [b.lengths.tolist() for b in first]   # the seed decides
    evaluation = length_batches(items, vocabulary, 4, seed=None)
    lengths = [n for b in evaluation for n in b.lengths.tolist()]
    assert lengths == list(range(1, 42))                                 # every sentence, shortest first


def train_tagger(tmp_path, train, valid, **model):
    model = {"char_features": "none", **model}
    vocabulary = TaggerVocabulary.build(train, char_features=model["char_features"] != "none")
    config = TaggerConfig(vocab_size=len(vocabulary.words), num_labels=len(vocabulary.labels),
                          char_vocab_size=len(vocabulary.chars) if vocabulary.chars else 0, embedding_size=16,
                          hidden_size=16, dropout=0.0, **model)
    constraints = None
    if config.crf and vocabulary.entity_tags:
        constraints = tuple(torch.tensor(m) for m in allowed_transitions(vocabulary.labels, "iob2"))
    torch.manual_seed(0)
    tagger = Tagger(config, constraints)
    task = TaggingTask(vocabulary, train, valid, None, batch_size=2, eval_batch_size=3, seed=1)
    train_config = TrainConfig(output=str(tmp_path), optimizer="adam", lr=0.02, schedule="constant", epochs=1000,
                               max_steps=120, eval_every=1000, progress=False, log_every=20, grad_clip=5.0)
    results = Trainer(task, tagger, train_config, tmp_path, torch.device("cpu")).fit()
    return results, tagger, task


def test_tagging_overfits_pos_fixture(tmp_path):
    sentences = read_conllu(FIXTURES / "tagging.conllu")
    results, _, task = train_tagger(tmp_path, sentences, sentences, encoder="lstm", char_features="cnn")
    assert task.metric == "accuracy"
    assert results["valid"]["accuracy"] == 100.0
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["final"] and rows[-1]["accuracy"] == 100.0


@pytest.mark.parametrize("encoder", ["gru", "transformer", "window"])
def test_tagging_overfits_ner_fixture_with_a_constrained_crf(tmp_path, encoder):
    sentences = read_conll(FIXTURES / "ner.conll")
    results, tagger, task = train_tagger(tmp_path, sentences, sentences, encoder=encoder, crf=True)
    assert task.metric == "f1"
    assert results["valid"]["f1"] == 100.0 and results["valid"]["gold"] == 7
    assert results["valid"]["by_type"]["PER"]["f1"] == 100.0
    tagger.eval()
    for batch in task.valid_data:
        for ids, n in zip(best_tags(tagger, tagger(batch.words, batch.lengths), batch.mask).tolist(),
                          batch.lengths.tolist(), strict=True):
            assert invalid_positions([task.vocabulary.labels[i] for i in ids[:n]], "iob2") == []


def test_tagging_unseen_gold_tag_is_an_error_not_a_crash(tmp_path):
    train = read_conll(FIXTURES / "ner.conll")
    valid = [Sentence(["EU", "rejects"], ["B-GPE", "O"]), Sentence(["Peter", "Blackburn"], ["B-PER", "I-PER"])]
    results, tagger, task = train_tagger(tmp_path, train, valid, encoder="lstm")
    figures = results["valid"]
    assert figures["accuracy"] < 100.0 and figures["gold"] == 2 and figures["recall"] <= 50.0
    tagger.eval()
    batch = task.valid_data[0]
    predicted = [[task.vocabulary.labels[i] for i in ids[:n]] for ids, n in
                 zip(best_tags(tagger, tagger(batch.words, batch.lengths), batch.mask).tolist(),
                     batch.lengths.tolist(), strict=True)]
    reference = span_scores(batch.gold, predicted).overall
    assert (figures["recall"], figures["precision"]) == (reference.recall, reference.precision)


def test_tagging_unk_replace_touches_only_singletons_and_repeats_with_the_seed():
    sentences = [Sentence(["the", "cat", "sat"], ["D", "N", "V"]), Sentence(["the", "dog", "sat"], ["D", "N", "V"])]
    vocabulary = TaggerVocabulary.build(sentences)
    task = TaggingTask(vocabulary, sentences, sentences, None, batch_size=2, eval_batch_size=2, seed=3, unk_replace=1.0)
    words = task.train_batches(0)[0].words
    assert sorted(vocabulary.words.decode(words.flatten().tolist())) == ["<unk>", "<unk>", "sat", "sat", "the", "the"]
    kept = TaggingTask(vocabulary, sentences, sentences, None, batch_size=2, eval_batch_size=2, seed=3)
    assert (kept.train_batches(0)[0].words != UNK).all()
    many = [Sentence(["the", f"w{i}"], ["D", "N"]) for i in range(100)]          # 100 words seen once
    vocabulary = TaggerVocabulary.build(many)
    half = [TaggingTask(vocabulary, many, many, None, 100, 2, seed=3, unk_replace=0.5) for _ in range(2)]
    first = half[0].train_batches(1)[0].words
    torch.manual_seed(123)                                                # the global RNG plays no part
    second = half[1].train_batches(1)[0].words
    assert torch.equal(first, second) and 25 < int((first == UNK).sum()) < 75
    other = TaggingTask(vocabulary, many, many, None, 100, 2, seed=4, unk_replace=0.5).train_batches(1)[0].words
    assert not torch.equal(other == UNK, first == UNK)                   # another seed, other words replaced
    assert not torch.equal(half[0].train_batches(2)[0].words == UNK, first == UNK)    # and another epoch
