"""Every shipped config file parses, validates and builds its model (as litgpt tests its configs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from seqlab.errors import SeqlabError
from seqlab.families.classifier.model import Classifier
from seqlab.families.classifier.pipeline import resolve_classifier_config
from seqlab.families.lm.config import resolve_lm_config
from seqlab.families.lm.model import build_lm
from seqlab.families.tagger.model import Tagger
from seqlab.families.tagger.pipeline import resolve_tagger_config

ALL = sorted((Path(__file__).parent.parent / "configs").glob("*.yaml"))
TAGGER_CONFIGS = [p for p in ALL if "tagging_quality.py" in p.read_text()]   # their run command says so
CLASSIFIER_CONFIGS = [p for p in ALL if "classification_quality.py" in p.read_text()]
CONFIGS = [p for p in ALL if p not in TAGGER_CONFIGS + CLASSIFIER_CONFIGS
           and "seq2seq_quality.py" not in p.read_text()]


def test_configs_are_shipped():
    assert len(CONFIGS) >= 8


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_configs_parse_and_build(path):
    config = resolve_lm_config(path)
    assert path.read_text().startswith("#"), "each config starts with a comment saying how to run it"
    model = build_lm(config.model.__class__(**{**config.model.__dict__, "vocab_size": 100}))
    assert model.num_parameters() > 0


@pytest.mark.parametrize("path", TAGGER_CONFIGS, ids=lambda p: p.name)
def test_configs_tagger_parse_and_build(path):
    config = resolve_tagger_config(path)
    assert path.read_text().startswith("#"), "each config starts with a comment saying how to run it"
    model = Tagger(config.model.__class__(**{**config.model.__dict__, "vocab_size": 100, "num_labels": 5,
                                             "char_vocab_size": 20}))
    assert model.num_parameters() > 0


def test_configs_tagger_configs_found():
    assert len(TAGGER_CONFIGS) >= 2


def test_configs_command_line_overrides_the_file(tmp_path):
    config = resolve_lm_config(CONFIGS[0], {"hidden_size": 7, "epochs": 2})
    assert config.model.hidden_size == 7 and config.train.epochs == 2
    with pytest.raises(SeqlabError, match="unknown option"):
        resolve_lm_config(None, {"hiden_size": 7})


def test_configs_best_pos_recipe_is_the_measured_command():
    """configs/ud-pos-bilstm2-char-w2v-frozen.yaml says it is the -w2v config with the options the results
    row was measured with; keep that true."""
    folder = Path(__file__).parent.parent / "configs"
    shipped = resolve_tagger_config(folder / "ud-pos-bilstm2-char-w2v-frozen.yaml")
    measured = resolve_tagger_config(folder / "ud-pos-bilstm-char-w2v.yaml", {
        "freeze_embeddings": True, "num_layers": 2, "hidden_size": 256, "unk_replace": 0.5})
    assert shipped == measured


@pytest.mark.parametrize("path", CLASSIFIER_CONFIGS, ids=lambda p: p.name)
def test_configs_classifier_parse_and_build(path):
    config = resolve_classifier_config(path)
    assert path.read_text().startswith("#"), "each config starts with a comment saying how to run it"
    model = Classifier(config.model.__class__(**{**config.model.__dict__, "vocab_size": 100, "num_labels": 2}))
    assert model.num_parameters() > 0


def test_configs_classifier_recipes_are_the_measured_commands():
    """The shipped classifier configs hold the options their results rows were measured with."""
    folder = Path(__file__).parent.parent / "configs"
    sst2 = resolve_classifier_config(None, {
        "format": "sst-tree", "sst_classes": 2, "phrases": True, "tokenizer": "whitespace", "arch": "lstm",
        "bidirectional": True, "pooling": "max", "embedding_size": 300, "hidden_size": 150, "epochs": 6})
    assert resolve_classifier_config(folder / "sst2-bilstm-max-phrases.yaml") == sst2
    imdb = resolve_classifier_config(None, {           # embedding_std 1.0: the pooled default when measured
        "format": "jsonl", "arch": "pooled", "ngrams": 2, "min_freq": 3, "embedding_size": 64, "hidden_size": 64,
        "lr": 1e-2, "epochs": 6, "batch_size": 64, "embedding_std": 1.0})
    assert resolve_classifier_config(folder / "imdb-pooled-bigrams.yaml") == imdb


SEQ2SEQ_CONFIGS = [p for p in ALL if "seq2seq_quality.py" in p.read_text()]


@pytest.mark.parametrize("path", SEQ2SEQ_CONFIGS, ids=lambda p: p.name)
def test_configs_seq2seq_parse_and_build(path):
    from seqlab.families.seq2seq.model import build_model
    from seqlab.families.seq2seq.pipeline import resolve_seq2seq_config

    config = resolve_seq2seq_config(path)
    assert path.read_text().startswith("#"), "each config starts with a comment saying how to run it"
    target = 100 if config.data.shared_vocab else 90           # one vocabulary for both sides when shared
    model = build_model(config.model.__class__(**{**config.model.__dict__, "source_vocab_size": 100,
                                                  "target_vocab_size": target}))
    assert model.num_parameters() > 0


def test_configs_seq2seq_recipes_are_the_measured_commands():
    """The shipped seq2seq configs hold the options their results rows were measured with."""
    from seqlab.families.seq2seq.pipeline import resolve_seq2seq_config

    folder = Path(__file__).parent.parent / "configs"
    transformer = resolve_seq2seq_config(None, {
        "arch": "transformer", "embedding_size": 256, "num_layers": 3, "num_heads": 8, "ff_size": 512,
        "dropout": 0.1, "label_smoothing": 0.1, "min_freq": 2, "raw_text": "refuse", "batch_size": 128, "lr": 5e-4,
        "warmup_steps": 400, "epochs": 12})
    assert resolve_seq2seq_config(folder / "multi30k-transformer.yaml") == transformer
    gru = resolve_seq2seq_config(None, {
        "arch": "gru", "attention": "dot", "embedding_size": 256, "hidden_size": 256, "bidirectional": True,
        "tie_embeddings": True, "dropout": 0.3, "label_smoothing": 0.1, "min_freq": 2, "raw_text": "refuse",
        "batch_size": 64,
        "lr": 1e-3, "epochs": 8})
    assert resolve_seq2seq_config(folder / "multi30k-gru-dot.yaml") == gru
