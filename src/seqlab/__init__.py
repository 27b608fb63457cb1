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
    **dict.fromkeys(["ClassifierDataConfig", "ClassifierTrainConfig", "Prediction", "TrainedClassifier",
                     "load_classifier", "resolve_classifier_config"],
                    "seqlab.families.classifier.pipeline"),
    **dict.fromkeys(["LMDataConfig", "LMTrainConfig", "LMTrainOptions", "TrainedLM", "load_lm"],
                    "seqlab.families.lm.pipeline"),
    **dict.fromkeys(["Seq2SeqDataConfig", "Seq2SeqTrainConfig", "TrainedSeq2Seq", "load_seq2seq",
                     "resolve_seq2seq_config"], "seqlab.families.seq2seq.pipeline"),
    **dict.fromkeys(["TaggerDataConfig", "TaggerTrainConfig", "TrainedTagger", "load_tagger", "resolve_tagger_config"],
                    "seqlab.families.tagger.pipeline"),
    **dict.fromkeys(["train_classifier", "train_lm", "train_seq2seq", "train_tagger"], "seqlab.api"),   # + the card
    "load": "seqlab.registry",
    "SearchOptions": "seqlab.decoding.search",
    "TrainConfig": "seqlab.training.trainer",
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'seqlab' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value                      # once: later lookups find it directly
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = ["ClassifierConfig", "ClassifierDataConfig", "ClassifierTrainConfig", "LMConfig", "LMDataConfig",
           "LMTrainConfig", "LMTrainOptions", "load", "load_classifier", "load_lm", "load_seq2seq", "load_tagger",
           "Prediction", "resolve_classifier_config", "resolve_seq2seq_config", "resolve_tagger_config",
           "SearchOptions", "Seq2SeqConfig", "Seq2SeqDataConfig", "Seq2SeqTrainConfig", "SeqlabError",
           "TaggerConfig", "TaggerDataConfig", "TaggerTrainConfig", "train_classifier", "train_lm", "train_seq2seq",
           "train_tagger", "TrainConfig", "TrainedClassifier", "TrainedLM", "TrainedSeq2Seq", "TrainedTagger",
           "__version__"]
