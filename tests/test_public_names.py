"""The names `seqlab` offers (`from seqlab import train_lm, TrainedLM`): the shared ones and those each family
declares (`Family.public`, `train_<family>`), collected from the registry when first asked for, without PyTorch
until a torch name is touched; a family registered later offers its names too."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

import seqlab
from seqlab import registry
from seqlab.errors import SeqlabError

BEFORE = {  # seqlab.__all__ as it was listed by hand (seqlab 0.x, before the families declared theirs)
    "ClassifierConfig", "ClassifierDataConfig", "ClassifierTrainConfig", "LMConfig", "LMDataConfig", "LMTrainConfig",
    "LMTrainOptions", "load", "prepare", "load_classifier", "load_lm", "load_seq2seq", "load_tagger", "Prediction",
    "resolve_classifier_config", "resolve_lm_config", "resolve_seq2seq_config", "resolve_tagger_config",
    "SearchOptions", "Seq2SeqConfig", "Seq2SeqDataConfig", "Seq2SeqTrainConfig", "SeqlabError", "TaggerConfig",
    "TaggerDataConfig", "TaggerTrainConfig", "train_classifier", "train_lm", "train_seq2seq", "train_tagger",
    "TrainConfig", "TrainedClassifier", "TrainedLM", "TrainedSeq2Seq", "TrainedTagger", "tune", "verify_prepared",
    "__version__"}


def test_seqlab_lists_the_same_names_and_imports_no_torch_until_one_is_touched():
    code = ("import json, sys, seqlab; names, listed = seqlab.__all__, dir(seqlab); quiet = 'torch' not in sys.modules;"
            " seqlab.TrainedLM; print(json.dumps([names, listed, quiet, 'torch' in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    names, listed, quiet, loaded = json.loads(done.stdout)
    assert set(names) == BEFORE and BEFORE <= set(listed) and quiet and loaded


def test_seqlab_names_are_the_families_objects():
    for family in registry.FAMILIES.values():
        assert f"train_{family.name}" in seqlab.__all__ and callable(getattr(seqlab, f"train_{family.name}"))
        for name in family.public:
            assert getattr(seqlab, name).__name__ == name
            assert getattr(seqlab, name).__module__.startswith(("seqlab.families.", "seqlab.models."))
    assert seqlab.TrainedLM is registry.family("lm").part("trained").TrainedLM
    with pytest.raises(AttributeError, match="no attribute 'TrainedPoem'"):
        seqlab.TrainedPoem  # noqa: B018


def test_seqlab_offers_a_family_registered_later(tmp_path, monkeypatch):
    (tmp_path / "toypublic").mkdir()
    (tmp_path / "toypublic" / "__init__.py").write_text("")
    (tmp_path / "toypublic" / "trained.py").write_text("class TrainedToy:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    toy = dataclasses.replace(registry.FAMILIES["lm"], name="toy", package="toypublic",
                              public={"TrainedToy": ".trained"})
    monkeypatch.setitem(registry.FAMILIES, "toy", toy)
    assert {"TrainedToy", "train_toy"} <= set(seqlab.__all__) and "TrainedToy" in dir(seqlab)
    assert seqlab.TrainedToy.__module__ == "toypublic.trained"
    monkeypatch.delattr(seqlab, "TrainedToy")
    clash = dataclasses.replace(toy, name="toy2", public={"TrainedLM": ".trained"})
    monkeypatch.setitem(registry.FAMILIES, "toy2", clash)
    with pytest.raises(SeqlabError, match="seqlab.TrainedLM is declared twice"):
        seqlab.__all__  # noqa: B018
