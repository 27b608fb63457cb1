"""Training as `seqlab train` and `seqlab.train_lm` (and the other families') do it: the family's pipeline
trains into its run directory (`seqlab.families.<name>.pipeline`), then the run gets its model card
(`seqlab.cards.card`), so every run a user trains carries one. The card sits above the pipelines (it reads a
run through them), which is why this step lives here and not in the training loop.

    import seqlab
    results = seqlab.train_lm(seqlab.LMTrainConfig())     # runs/lm, with runs/lm/MODEL_CARD.md
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from seqlab.cards.card import finish_training, read_card_notes
from seqlab.registry import family
from seqlab.training import distributed


def train(task: str, config, resume: bool = False, overwrite: bool = False,
          callback: Callable[[dict], None] | None = None) -> dict:
    """Train `config` (the config of the family named `task`) and write the run's model card; return the final
    figures. The --card-notes file is read before training, so a missing or empty one costs no training time."""
    notes = read_card_notes(config.train.card_notes) if config.train.card_notes else None
    results = family(task).pipeline.train(config, resume=resume, overwrite=overwrite, callback=callback)
    if distributed.world()[0] == 0:
        finish_training(Path(config.train.output), config.train.device, resume, notes, config.train.progress)
    return results


def trainer(task: str) -> Callable:
    """`seqlab.train_<task>(config, resume=False, overwrite=False, callback=None)`: `train` for one family."""
    title = family(task).title

    def train_family(config, resume: bool = False, overwrite: bool = False,
                     callback: Callable[[dict], None] | None = None) -> dict:
        return train(task, config, resume, overwrite, callback)

    train_family.__name__ = train_family.__qualname__ = f"train_{task}"
    train_family.__doc__ = f"Train {title} from its config and write its model card; return the final figures."
    return train_family
