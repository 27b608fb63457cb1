"""The tagger end to end through its Python API: train on the fixtures, save, load, tag, evaluate,
resume; entity schemes converted for training; clear errors."""

from pathlib import Path

import pytest

import seqlab
from seqlab.errors import SeqlabError
from seqlab.families.tagger.pipeline import resolve_tagger_config, train_tagger

FIXTURES = Path(__file__).parent / "fixtures"
SMALL = {"embedding_size": 16, "hidden_size": 16, "dropout": 0.0, "batch_size": 2, "eval_batch_size": 3,
         "lr": 0.02, "schedule": "constant", "progress": False, "eval_every": 1000, "log_every": 20}


def config(tmp_path, **overrides):
    return resolve_tagger_config(overrides={**SMALL, "output": str(tmp_path / "run"), "max_steps": 120,
                                            "epochs": 1000, **overrides})


def test_tagger_api_pos_train_load_tag_evaluate(tmp_path):
    pos = str(FIXTURES / "tagging.conllu")
    results = train_tagger(config(tmp_path, train=pos, dev=pos, format="conllu", char_features="lstm"))
    assert results["valid"]["accuracy"] == 100.0
    tagger = seqlab.load(tmp_path / "run")
    assert isinstance(tagger, seqlab.TrainedTagger)
    tags = tagger.tag(["The", "cat", "sat", "on", "the", "mat", "."])
    assert [t for t, _ in tags] == ["DET", "NOUN", "VERB", "ADP", "DET", "NOUN", "PUNCT"]
    assert all(0.0 < p <= 1.0 for _, p in tags)
    assert tagger.tag_sentences([[], ["Dogs", "bark", "loudly", "."]])[0] == []
    unseen = tagger.tag(["Zyxwv", "barked"])                              # unseen words still get tags
    assert len(unseen) == 2
    assert tagger.evaluate_file(pos)["accuracy"] == 100.0
    assert tagger.evaluate_file(FIXTURES / "tagging.conllu", "conllu")["tokens"] == 29


def test_tagger_api_ner_in_bioes_with_crf_and_resume(tmp_path):
    ner = str(FIXTURES / "ner.conll")
    run_config = config(tmp_path, train=ner, dev=ner, format="conll", crf=True, train_scheme="bioes",
                        encoder="gru", max_steps=60)
    train_tagger(run_config)
    more = config(tmp_path, train=ner, dev=ner, format="conll", crf=True, train_scheme="bioes", encoder="gru",
                  max_steps=120)
    results = train_tagger(more, resume=True)
    assert results["valid"]["f1"] == 100.0
    tagger = seqlab.load(tmp_path / "run")
    assert tagger.scheme == "bioes" and "S-ORG" in tagger.vocabulary.labels
    tags = [t for t, _ in tagger.tag(["Peter", "Blackburn", "visited", "New", "York", "."])]
    assert tags == ["B-PER", "E-PER", "O", "B-LOC", "E-LOC", "O"]
    assert tagger.evaluate_file(ner)["f1"] == 100.0                    # IOB2 gold, converted to BIOES


def test_tagger_api_errors(tmp_path):
    with pytest.raises(SeqlabError, match="needs --train and --dev"):
        train_tagger(config(tmp_path))
    ner = str(FIXTURES / "ner.conll")
    train_tagger(config(tmp_path, train=ner, dev=ner, format="conll", max_steps=2))
    with pytest.raises(SeqlabError, match="already holds a run"):
        train_tagger(config(tmp_path, train=ner, dev=ner, format="conll", max_steps=2))
    with pytest.raises(SeqlabError, match="not a language model"):
        seqlab.families.lm.pipeline.load_lm(tmp_path / "run")
    with pytest.raises(SeqlabError, match="unknown option 'layer'"):
        resolve_tagger_config(overrides={"layer": 2})


def test_tagger_invalid_gold_sequence_is_reported_with_its_line_and_scored_like_conlleval(tmp_path, capsys):
    ner = FIXTURES / "ner.conll"
    train_tagger(config(tmp_path, train=str(ner), dev=str(ner), format="conll", max_steps=120))
    tagger = seqlab.load(tmp_path / "run")
    # "EU" (line 3) B-ORG -> I-ORG: an I- after O... no, here an I- opening an entity, which IOB2 forbids
    lines = ner.read_text().splitlines()
    assert lines[2] == "EU NNP O B-ORG"
    lines[2] = "EU NNP O I-ORG"
    broken = tmp_path / "broken.conll"
    broken.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    result = tagger.evaluate_file(broken)
    err = capsys.readouterr().err
    assert "broken.conll:3: 'I-ORG' breaks the IOB2 scheme; read as conlleval reads it" in err
    assert result["f1"] == 100.0               # conlleval reads I-ORG after O as the start of an ORG entity
