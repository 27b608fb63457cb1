"""Training as `seqlab train` and `seqlab.train_lm` (and the other families') do it: the family's pipeline
trains into its run directory (`seqlab.families.<name>.pipeline`), then the run gets its model card
(`seqlab.cards.card`), so every run a user trains carries one. The card sits above the pipelines (it reads a
run through them), which is why this step lives here and not in the training loop.

    import seqlab
    results = seqlab.train_lm(seqlab.LMTrainConfig())     # runs/lm, with runs/lm/MODEL_CARD.md
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from seqlab.cards.card import finish_training, read_card_notes
from seqlab.registry import family
from seqlab.training import distributed
from seqlab.training.trackers import check_trackers, log_artifacts


def train(task: str, config, resume: bool = False, overwrite: bool = False,
          callback: Callable[[dict], None] | None = None) -> dict:
    """Train `config` (the config of the family named `task`) and write the run's model card; return the final
    figures. The --card-notes file is read before training, so a missing or empty one costs no training time. A
    resume of a finished run (`seqlab.runs.records.finished_run`) trains nothing and writes nothing: it says so
    and returns the figures the run ended with."""
    from seqlab.runs.records import final_figures, finished_run

    done = finished_run(config.train.output, config.train) if resume else None
    if done is not None:
        if distributed.world()[0] == 0:
            print(done, file=sys.stderr)
        return final_figures(config.train.output)
    notes = read_card_notes(config.train.card_notes) if config.train.card_notes else None
    check_trackers(config.train)              # --log: a tracker's package missing stops here, before any work
    results = family(task).pipeline.train(config, resume=resume, overwrite=overwrite, callback=callback)
    if distributed.world()[0] == 0:
        finish_training(Path(config.train.output), config.train.device, resume, notes, config.train.progress)
        log_artifacts(Path(config.train.output), config.train)       # --log: the card, curves and files; done
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


def prepare(task: str, output: str | Path, workers: int = 0, overwrite: bool = False, progress: bool = True,
            **options) -> Path:
    """Tokenize a family's data files once into a prepared folder of memory-mapped shards (`seqlab prepare`);
    `options` are the family's data options (train=, valid=, test=, tokenizer=, ...). Train from it with the
    data option `prepared` (`--data DIR`).

        seqlab.prepare("lm", "data/wt2", train="wiki.train.tokens", valid="wiki.valid.tokens", tokenizer="word")
        seqlab.train_lm(seqlab.resolve_lm_config(overrides={"prepared": "data/wt2", "arch": "lstm"}))
    """
    from seqlab.errors import SeqlabError

    found = family(task)
    if not found.prepares:
        raise SeqlabError(f"seqlab prepare does not take {found.title} yet")
    part = found.part("prepare")
    refused = [name for name in options if name in part.SKIP]
    if refused:
        raise SeqlabError(f"seqlab prepare {task} does not take --{refused[0].replace('_', '-')}")
    data = found.pipeline.groups["data"](**options)
    folder = part.prepare(data, output, workers=workers, overwrite=overwrite, progress=progress)
    from seqlab.data.prepared import record_command

    record_command(folder, prepare_command(task, data, options, folder))
    return folder


def prepare_command(task: str, data, options: dict, output: str | Path) -> str:
    """The `seqlab prepare` command line that prepares `output` again from the same files (their absolute
    paths) and `options`: what a run that finds a source changed prints (`seqlab.data.prepared_check`)."""
    import shlex

    from seqlab.config import file_fields

    files = set(file_fields(data))
    words = ["seqlab", "prepare", task]
    for name in options:
        value, flag = getattr(data, name), f"--{name.replace('_', '-')}"
        if isinstance(value, bool):
            words.append(flag if value else f"--no-{name.replace('_', '-')}")
        elif isinstance(value, (list, tuple)):
            words += [flag, *map(str, value)]
        elif value not in ("", None):
            words += [flag, str(Path(value).resolve()) if name in files else str(value)]
    words += ["--output", str(Path(output).resolve())]
    return " ".join(shlex.quote(word) for word in words)


def verify_prepared(folder: str | Path) -> dict:
    """Hash every file of a prepared folder again (`seqlab prepare --verify DIR`), whatever its record of
    earlier checks says, and refuse one whose SHA-256 is not the one its manifest lists; return what was
    checked: {"files", "bytes", "hashed", "hashed_bytes", "seconds"}. A run checks only the files that changed
    since the last check (`seqlab.data.prepared_check`)."""
    from seqlab.data.prepared import Prepared

    return Prepared(folder, rehash=True, flag="--verify").checked
