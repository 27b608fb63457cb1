"""seqlab: the neural sequence models of Jurafsky & Martin's SLP, trained and served from one tool.

The names below are imported when first used (PEP 562), so that `import seqlab.x` loads only what
seqlab.x needs: the ONNX runtime (`seqlab.export.runtime`) runs without importing PyTorch."""

from __future__ import annotations

import importlib

from seqlab.errors import SeqlabError
from seqlab.version import __version__

# name -> the module that defines it
_LAZY = {
    "ClassifierConfig": "seqlab.models.classifier",
    "LMConfig": "seqlab.models.lm",
    "Seq2SeqConfig": "seqlab.models.seq2seq",
    "TaggerConfig": "seqlab.models.tagger",
    **dict.fromkeys(["ClassifierDataConfig", "ClassifierTrainConfig", "resolve_classifier_config"],
                    "seqlab.families.classifier.config"),
    **dict.fromkeys(["LMDataConfig", "LMTrainConfig", "LMTrainOptions", "resolve_lm_config"],
                    "seqlab.families.lm.config"),
    **dict.fromkeys(["Seq2SeqDataConfig", "Seq2SeqTrainConfig", "resolve_seq2seq_config"],
                    "seqlab.families.seq2seq.config"),
    **dict.fromkeys(["TaggerDataConfig", "TaggerTrainConfig", "resolve_tagger_config"],
                    "seqlab.families.tagger.config"),
    "load_classifier": "seqlab.families.classifier.pipeline",
    "load_lm": "seqlab.families.lm.pipeline",
    "load_seq2seq": "seqlab.families.seq2seq.pipeline",
    "load_tagger": "seqlab.families.tagger.pipeline",
    "Prediction": "seqlab.families.classifier.vocab",
    "TrainedClassifier": "seqlab.families.classifier.trained",
    "TrainedLM": "seqlab.families.lm.trained",
    "TrainedSeq2Seq": "seqlab.families.seq2seq.trained",
    "TrainedTagger": "seqlab.families.tagger.trained",
    "load": "seqlab.registry",
    "prepare": "seqlab.api",
    "verify_prepared": "seqlab.api",
    "SearchOptions": "seqlab.decoding.options",
    "TrainConfig": "seqlab.training.trainer",
    "tune": "seqlab.tuning.study",
}


# seqlab.train_<family>(config, ...): the family trains, then the run's model card is written (`seqlab.api.train`)
_TRAINERS = {"train_classifier": "classifier", "train_lm": "lm", "train_seq2seq": "seq2seq", "train_tagger": "tagger"}


def __getattr__(name: str):
    if name in _TRAINERS:
        from seqlab.api import trainer

        value = trainer(_TRAINERS[name])
    elif name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    else:
        raise AttributeError(f"module 'seqlab' has no attribute {name!r}")
    globals()[name] = value                      # once: later lookups find it directly
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, *_TRAINERS})


__all__ = ["ClassifierConfig", "ClassifierDataConfig", "ClassifierTrainConfig", "LMConfig", "LMDataConfig",
           "LMTrainConfig", "LMTrainOptions", "load", "prepare", "load_classifier", "load_lm", "load_seq2seq",
           "load_tagger", "Prediction", "resolve_classifier_config", "resolve_lm_config", "resolve_seq2seq_config",
           "resolve_tagger_config",
           "SearchOptions", "Seq2SeqConfig", "Seq2SeqDataConfig", "Seq2SeqTrainConfig", "SeqlabError",
           "TaggerConfig", "TaggerDataConfig", "TaggerTrainConfig", "train_classifier", "train_lm", "train_seq2seq",
           "train_tagger", "TrainConfig", "TrainedClassifier", "TrainedLM", "TrainedSeq2Seq", "TrainedTagger",
           "tune", "verify_prepared", "__version__"]
