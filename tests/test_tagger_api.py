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


@pytest.mark.slow
def test_tagger_defaults_are_the_tuned_recipes_and_entity_tags_get_a_crf(tmp_path, capsys):
    """The defaults train what the tuned recipes train (configs/ud-pos-bilstm-char.yaml for plain tags,
    conll2003-ner-bilstm-crf-char.yaml for entity tags: benchmarks/results/defaults_new_data.md measures them
    against the old defaults at 3 and 5 epochs); the transformer encoder keeps its own rate and warm-up; a CRF is
    on for entity tags and off for plain ones unless asked."""
    from seqlab.config import to_dict
    given = {"train": "a", "dev": "b"}
    default, pos = to_dict(resolve_tagger_config(overrides=given)), to_dict(
        resolve_tagger_config(FIXTURES.parents[1] / "configs" / "ud-pos-bilstm-char.yaml", overrides=given))
    assert default["data"].pop("label_column") == "" and pos["data"].pop("label_column") == "upos"   # upos either way
    assert default == pos
    configs = FIXTURES.parents[1] / "configs"
    ner = to_dict(resolve_tagger_config(configs / "conll2003-ner-bilstm-crf-char.yaml", overrides=given))
    default = to_dict(resolve_tagger_config(overrides={**given, "format": "conll"}))
    assert default["model"].pop("crf") is None and ner["model"].pop("crf") is True                 # None: auto
    assert default == ner
    transformer = resolve_tagger_config(overrides={**given, "encoder": "transformer"}).train
    assert (transformer.lr, transformer.warmup_steps) == (1e-3, 500)
    assert resolve_tagger_config(overrides={**given, "encoder": "transformer", "lr": 3e-3}).train.lr == 3e-3
    ner_file, pos_file = str(FIXTURES / "ner.conll"), str(FIXTURES / "tagging.conllu")
    for data, crf, options in ((ner_file, True, {"format": "conll"}), (pos_file, False, {}),
                               (ner_file, False, {"format": "conll", "crf": False})):
        run = tmp_path / f"run-{crf}-{len(options)}"
        train_tagger(resolve_tagger_config(overrides={"train": data, "dev": data, "output": str(run),
                                                      "max_steps": 2, "progress": False, **options}))
        assert (seqlab.load(run).model.crf is not None) == crf
        assert seqlab.load(run).config.model.crf is crf                  # config.json holds what was chosen
