"""seqlab: the neural sequence models of Jurafsky & Martin's SLP, trained and served from one tool."""

__version__ = "0.1.0"

from seqlab.errors import SeqlabError  # noqa: E402
from seqlab.lm import LMDataConfig, LMTrainConfig, TrainedLM, load, train_lm  # noqa: E402
from seqlab.models.lm import LMConfig  # noqa: E402
from seqlab.training.trainer import TrainConfig  # noqa: E402

__all__ = ["LMConfig", "LMDataConfig", "LMTrainConfig", "SeqlabError", "TrainConfig", "TrainedLM",
           "__version__", "load", "train_lm"]
