"""Save -> load round trips against the model as it was in memory, and exact resume for every task family.

Round trips: each pipeline is trained through its public function with the trainer it builds recorded,
and one evaluation, at the last step, so that the best weights (model.safetensors) are the last ones. The
weights are copied at that evaluation, from the trainer's own model; `seqlab.load(run)` must give back
every tensor bit for bit and the same outputs (logits, tags, probabilities, translations) on the same input.

Resume: a run killed right after its checkpoint at step k (mid-epoch, dropout on) and resumed must log the
same per-step training losses as an uninterrupted run and end with bitwise-equal weights and optimizer state.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import seqlab
from conftest import Killed, kill_after_evaluation, tiny_config
from seqlab.families.classifier.pipeline import TrainedClassifier
from seqlab.families.lm.trained import TrainedLM
from seqlab.families.seq2seq.pipeline import TrainedSeq2Seq
from seqlab.families.tagger.pipeline import TrainedTagger
from seqlab.runs import skeleton
from seqlab.training.checkpoint import load_tensors
from seqlab.training.trainer import Trainer

FIXTURES = Path(__file__).parent / "fixtures"
POS, NER = str(FIXTURES / "tagging.conllu"), str(FIXTURES / "ner.conll")
SENTIMENT = str(FIXTURES / "classify" / "sentiment.tsv")
PAIRS = FIXTURES / "seq2seq"


class Recorded:
    """The trainer a pipeline builds (every family's, through the one training skeleton), and its model's weights
    copied at each evaluation that was the best."""

    def __init__(self, monkeypatch):
        self.trainer: Trainer | None = None
        self.best: dict[str, torch.Tensor] | None = None
        self.best_step = None
        record = self

        class RecordingTrainer(Trainer):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                record.trainer = self

        monkeypatch.setattr(skeleton, "Trainer", RecordingTrainer)

    def callback(self, event: dict) -> None:
        if event["event"] == "evaluate" and event["best"]:
            self.best = {k: v.detach().clone() for k, v in self.trainer.model.state_dict().items()}
            self.best_step = event["step"]

    @property
    def model(self) -> torch.nn.Module:
        """The trained model in memory, in eval mode; checked to still hold the best weights."""
        model = self.trainer.model.eval()
        assert self.best is not None and self.best_step == self.trainer.position.step
        assert_same_tensors(model.state_dict(), self.best)
        return model


def assert_same_tensors(actual: dict, expected: dict) -> None:
    assert sorted(actual) == sorted(expected)
    for name, tensor in expected.items():
        assert actual[name].dtype == tensor.dtype and torch.equal(actual[name], tensor), name


def assert_loaded_equals_memory(loaded_model: torch.nn.Module, record: Recorded) -> None:
    memory = record.model
    assert_same_tensors(loaded_model.state_dict(), record.best)
    assert sum(p.numel() for p in memory.parameters()) == sum(p.numel() for p in loaded_model.parameters())
    for a, b in zip(memory.parameters(), loaded_model.parameters(), strict=True):    # tied weights stay tied
        assert a.data_ptr() != b.data_ptr() and torch.equal(a, b)


def trained_away_from_init(record: Recorded, seed_model: torch.nn.Module) -> None:
    """The comparison has something to prove: training moved the weights off the seed's initialisation."""
    assert any(not torch.equal(v, record.best[k]) for k, v in seed_model.state_dict().items())


# ------------------------------------------------------------------------------------------- round trips

@pytest.mark.parametrize("arch", ["lstm", "transformer", "ffn"])
def test_roundtrips_lm_load_equals_the_trained_model_in_memory(tmp_path, monkeypatch, arch):
    record = Recorded(monkeypatch)
    run = tmp_path / "run"
    seqlab.train_lm(tiny_config(run, arch, max_steps=6, eval_every=6), callback=record.callback)
    lm = seqlab.load(run)
    assert isinstance(lm, TrainedLM) and not lm.model.training
    assert_loaded_equals_memory(lm.model, record)
    memory = TrainedLM(record.model, lm.tokenizer, lm.vocab, lm.config, lm.device)
    text = "First Citizen:\nWe are accounted poor citizens, the patricians good."
    ids = lm.encode(text)[None, :12]                                                   # (1, T)
    with torch.no_grad():
        expected, _ = record.model(ids)
        logits, _ = lm.model(ids)
    assert torch.equal(logits, expected)                                               # (1, T, V)
    assert lm.score(text) == memory.score(text)
    assert lm.evaluate_text(text) == memory.evaluate_text(text)


@pytest.mark.parametrize("options", [{"encoder": "lstm", "char_features": "lstm", "crf": True},
                                     {"encoder": "transformer", "char_features": "cnn", "num_heads": 2}],
                         ids=["lstm-chars-crf", "transformer-cnn"])
def test_roundtrips_tagger_load_equals_the_trained_model_in_memory(tmp_path, monkeypatch, options):
    record = Recorded(monkeypatch)
    run = tmp_path / "run"
    config = seqlab.resolve_tagger_config(overrides={
        "train": NER, "dev": NER, "format": "conll", "embedding_size": 16, "hidden_size": 16, "dropout": 0.2,
        "batch_size": 2, "lr": 0.02, "max_steps": 6, "eval_every": 6, "progress": False, "output": str(run),
        **options})
    seqlab.train_tagger(config, callback=record.callback)
    tagger = seqlab.load(run)
    assert isinstance(tagger, TrainedTagger)
    assert_loaded_equals_memory(tagger.model, record)
    vocabulary = record.trainer.task.vocabulary                       # what training built, before any file
    assert tagger.vocabulary.words.to_dict() == vocabulary.words.to_dict()
    assert tagger.vocabulary.chars.to_dict() == vocabulary.chars.to_dict()
    assert tagger.vocabulary.labels == vocabulary.labels
    batch = record.trainer.task.valid_data[0]
    with torch.no_grad():
        expected = record.model(batch.words, batch.lengths, batch.chars)            # (B, T, K)
        assert torch.equal(tagger.model(batch.words, batch.lengths, batch.chars), expected)
    memory = TrainedTagger(record.model, vocabulary, tagger.scheme, tagger.config, tagger.device)
    sentences = [["Peter", "Blackburn", "visited", "New", "York", "."], ["EU", "rejects", "Zyxwv", "call"]]
    assert tagger.tag_sentences(sentences) == memory.tag_sentences(sentences)      # tags and probabilities


@pytest.mark.parametrize("options", [{"arch": "lstm", "bidirectional": True, "dropout": 0.2},
                                     {"arch": "transformer", "pooling": "cls", "num_heads": 2},
                                     {"arch": "pooled", "output_layer": "sigmoid"}],
                         ids=["bilstm", "transformer-cls", "pooled-sigmoid"])
def test_roundtrips_classifier_load_equals_the_trained_model_in_memory(tmp_path, monkeypatch, options):
    record = Recorded(monkeypatch)
    run = tmp_path / "run"
    config = seqlab.resolve_classifier_config(overrides={
        "train": SENTIMENT, "dev": SENTIMENT, "format": "tsv", "embedding_size": 16, "hidden_size": 16,
        "batch_size": 4, "lr": 0.02, "max_steps": 8, "eval_every": 8, "progress": False, "output": str(run),
        **options})
    seqlab.train_classifier(config, callback=record.callback)
    classifier = seqlab.load(run)
    assert isinstance(classifier, TrainedClassifier)
    assert_loaded_equals_memory(classifier.model, record)
    vocabulary = record.trainer.task.vocabulary
    assert classifier.vocabulary.words.to_dict() == vocabulary.words.to_dict()
    assert classifier.labels == vocabulary.labels
    batch = record.trainer.task.valid_data[0]
    with torch.no_grad():
        expected = record.model(batch.words, batch.lengths, batch.features)         # (B, K)
        assert torch.equal(classifier.model(batch.words, batch.lengths, batch.features), expected)
    memory = TrainedClassifier(record.model, vocabulary, classifier.config, classifier.device)
    texts = ["a fine film , warm and funny", "boring , dull and far too long", "zyxwv"]
    assert [(p.label, p.probabilities) for p in classifier.classify(texts)] == \
        [(p.label, p.probabilities) for p in memory.classify(texts)]


SEQ2SEQ = {
    "gru-dot": {"arch": "gru", "attention": "dot", "hidden_size": 16},
    "lstm-additive-tied": {"arch": "lstm", "attention": "additive", "tie_embeddings": True, "hidden_size": 16},
    "transformer": {"arch": "transformer", "num_layers": 1, "num_heads": 2, "ff_size": 32},
    "lm": {"arch": "lm", "shared_vocab": True, "num_layers": 1, "num_heads": 2, "ff_size": 32},
}


def seq2seq_config(run, **overrides):
    return seqlab.resolve_seq2seq_config(overrides={
        "train_src": str(PAIRS / "train.src"), "train_tgt": str(PAIRS / "train.tgt"),
        "dev_src": str(PAIRS / "dev.src"), "dev_tgt": str(PAIRS / "dev.tgt"), "embedding_size": 16,
        "batch_size": 16, "eval_batch_size": 40, "lr": 5e-3, "progress": False,
        "output": str(run), **overrides})


@pytest.mark.parametrize("name", list(SEQ2SEQ))
def test_roundtrips_seq2seq_load_equals_the_trained_model_in_memory(tmp_path, monkeypatch, name):
    record = Recorded(monkeypatch)
    run = tmp_path / "run"
    seqlab.train_seq2seq(seq2seq_config(run, max_steps=6, eval_every=6, dropout=0.2, **SEQ2SEQ[name]),
                         callback=record.callback)
    model = seqlab.load(run)
    assert isinstance(model, TrainedSeq2Seq)
    assert_loaded_equals_memory(model.model, record)
    vocabulary = record.trainer.task.vocabulary
    assert model.vocabulary.source_vocab.to_dict() == vocabulary.source_vocab.to_dict()
    assert model.vocabulary.target_vocab.to_dict() == vocabulary.target_vocab.to_dict()
    batch = record.trainer.task.valid_data[0]
    with torch.no_grad():
        expected = record.model(batch.source, batch.source_lengths, batch.target_in)   # (B, T, V)
        assert torch.equal(model.model(batch.source, batch.source_lengths, batch.target_in), expected)
    memory = TrainedSeq2Seq(record.model, vocabulary, model.config, model.device)
    sources = ["der hund sieht .", "der katze klein der ball mag ."]
    for beam in (1, 3):
        loaded = [(o.text, o.score) for o in model.generate(sources, beam=beam)]
        assert loaded == [(o.text, o.score) for o in memory.generate(sources, beam=beam)]


# ------------------------------------------------------------------------------------------ exact resume

def train_log(run: Path) -> list[tuple[int, float]]:
    rows = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    return [(r["step"], r["loss"]) for r in rows]


def checkpoint(run: Path) -> tuple[dict, dict]:
    tensors, meta = load_tensors(run / "checkpoint.safetensors")
    return tensors, json.loads(meta["trainer"])


def assert_resume_is_exact(train, config_for, steps: int, kill_at: int, tmp_path: Path, stop: bool = False) -> None:
    """`train(config, resume=..., callback=...)`; `config_for(run, resume, max_steps)` the run's config. The
    interrupted run dies right after its checkpoint at `kill_at`, which must fall inside an epoch (`stop`:
    it ends there instead, with max_steps=kill_at, and the resume raises max_steps to `steps`)."""
    full, broken = tmp_path / "full", tmp_path / "broken"
    train(config_for(full, False, steps))
    if stop:
        train(config_for(broken, False, kill_at))
    else:
        with pytest.raises(Killed):
            train(config_for(broken, False, steps), callback=kill_after_evaluation(kill_at))
    _, position = checkpoint(broken)
    assert position["step"] == kill_at and position["batch"] > 0          # killed in the middle of an epoch
    assert [s for s, _ in train_log(broken)] == list(range(1, kill_at + 1))
    train(config_for(broken, True, steps), resume=True)
    assert [s for s, _ in train_log(full)] == list(range(1, steps + 1))
    assert train_log(broken) == train_log(full)                            # every step's loss, exactly
    expected, expected_position = checkpoint(full)
    resumed, resumed_position = checkpoint(broken)
    assert resumed_position["step"] == expected_position["step"] == steps
    assert sorted(resumed) == sorted(expected)
    for name, tensor in expected.items():                                  # weights, optimizer state, RNG
        assert torch.equal(resumed[name], tensor), name
    best = {k: v for k, v in load_tensors(full / "model.safetensors")[0].items()}
    assert_same_tensors(load_tensors(broken / "model.safetensors")[0], best)
    valid = [json.loads(line) for line in (full / "metrics.jsonl").read_text().splitlines()]
    again = [json.loads(line) for line in (broken / "metrics.jsonl").read_text().splitlines()]
    if stop:                                    # the stopped run also reported its final figures at kill_at
        again = [r for r in again if not (r.get("final") and r.get("trained_steps", r["step"]) == kill_at)]
    drop = ("elapsed_s",)
    assert [{k: v for k, v in r.items() if k not in drop} for r in again] == \
        [{k: v for k, v in r.items() if k not in drop} for r in valid]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["killed", "stopped"])
def test_roundtrips_tagger_resume_with_char_features_and_word_dropout_equals_uninterrupted(tmp_path, how):
    def config_for(run, resume, max_steps):
        overrides = {"output": str(run), "max_steps": max_steps, "progress": False}
        if resume:
            return seqlab.resolve_tagger_config(overrides=overrides, resume=True)
        return seqlab.resolve_tagger_config(overrides={
            **overrides, "train": POS, "dev": POS, "format": "conllu", "char_features": "lstm", "unk_replace": 0.5,
            "embedding_size": 16, "hidden_size": 16, "char_embedding_size": 8, "char_hidden_size": 8,
            "dropout": 0.3, "batch_size": 2, "lr": 0.01, "eval_every": 5, "log_every": 1, "optimizer": "adamw",
            "schedule": "constant"})              # a cosine schedule's rates depend on max_steps

    assert_resume_is_exact(seqlab.train_tagger, config_for, steps=8, kill_at=5, tmp_path=tmp_path,
                           stop=how == "stopped")


@pytest.mark.slow
def test_roundtrips_classifier_resume_with_shuffled_batches_equals_uninterrupted(tmp_path):
    def config_for(run, resume, max_steps):
        overrides = {"output": str(run), "max_steps": max_steps, "progress": False}
        if resume:
            return seqlab.resolve_classifier_config(overrides=overrides, resume=True)
        return seqlab.resolve_classifier_config(overrides={
            **overrides, "train": SENTIMENT, "dev": SENTIMENT, "format": "tsv", "arch": "gru", "bidirectional": True,
            "embedding_size": 16, "hidden_size": 16, "dropout": 0.3, "batch_size": 4, "lr": 0.01, "eval_every": 9,
            "log_every": 1})

    assert_resume_is_exact(seqlab.train_classifier, config_for, steps=14, kill_at=9, tmp_path=tmp_path)


@pytest.mark.parametrize("name", ["gru-dot", pytest.param("transformer", marks=pytest.mark.slow)])
def test_roundtrips_seq2seq_resume_with_dropout_equals_uninterrupted(tmp_path, name):
    def config_for(run, resume, max_steps):
        if resume:
            return seqlab.resolve_seq2seq_config(overrides={"output": str(run), "max_steps": max_steps,
                                                            "progress": False}, resume=True)
        return seq2seq_config(run, max_steps=max_steps, eval_every=5, log_every=1, dropout=0.3, schedule="cosine",
                              warmup_steps=2, **SEQ2SEQ[name])

    assert_resume_is_exact(seqlab.train_seq2seq, config_for, steps=8, kill_at=5, tmp_path=tmp_path)


@pytest.mark.slow
def test_roundtrips_lm_resume_gives_bitwise_equal_weights(tmp_path):
    """The language model too (its losses are compared in test_trainer): weights and optimizer state."""
    def train(config, resume=False, callback=None):
        return seqlab.train_lm(config, resume=resume, callback=callback)

    def config_for(run, resume, max_steps):
        return tiny_config(run, "lstm", max_steps=max_steps, eval_every=4)

    assert_resume_is_exact(train, config_for, steps=10, kill_at=4, tmp_path=tmp_path)
