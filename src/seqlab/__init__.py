"""seqlab: the neural sequence models of Jurafsky & Martin's SLP, trained and served from one tool."""

from seqlab.errors import SeqlabError  # noqa: E402
from seqlab.models.classifier import ClassifierConfig  # noqa: E402
from seqlab.models.lm import LMConfig  # noqa: E402
from seqlab.models.seq2seq import Seq2SeqConfig  # noqa: E402
from seqlab.models.tagger import TaggerConfig  # noqa: E402
from seqlab.pipelines.classifier import (  # noqa: E402
    ClassifierDataConfig,
    ClassifierTrainConfig,
    Prediction,
    TrainedClassifier,
    load_classifier,
    resolve_classifier_config,
    train_classifier,
)
from seqlab.pipelines.lm import LMDataConfig, LMTrainConfig, LMTrainOptions, TrainedLM, load_lm, train_lm  # noqa: E402
from seqlab.pipelines.seq2seq import (  # noqa: E402
    Seq2SeqDataConfig,
    Seq2SeqTrainConfig,
    TrainedSeq2Seq,
    load_seq2seq,
    resolve_seq2seq_config,
    train_seq2seq,
)
from seqlab.pipelines.tagger import (  # noqa: E402
    TaggerDataConfig,
    TaggerTrainConfig,
    TrainedTagger,
    load_tagger,
    resolve_tagger_config,
    train_tagger,
)
from seqlab.registry import load  # noqa: E402
from seqlab.search import SearchOptions  # noqa: E402
from seqlab.training.trainer import TrainConfig  # noqa: E402
from seqlab.version import __version__  # noqa: E402, F401

__all__ = ["ClassifierConfig", "ClassifierDataConfig", "ClassifierTrainConfig", "LMConfig", "LMDataConfig",
           "LMTrainConfig", "LMTrainOptions", "load", "load_classifier", "load_lm", "load_seq2seq", "load_tagger",
           "Prediction", "resolve_classifier_config", "resolve_seq2seq_config", "resolve_tagger_config",
           "SearchOptions", "Seq2SeqConfig", "Seq2SeqDataConfig", "Seq2SeqTrainConfig", "SeqlabError",
           "TaggerConfig", "TaggerDataConfig", "TaggerTrainConfig", "train_classifier", "train_lm", "train_seq2seq",
           "train_tagger", "TrainConfig", "TrainedClassifier", "TrainedLM", "TrainedSeq2Seq", "TrainedTagger",
           "__version__"]
