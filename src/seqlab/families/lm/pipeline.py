"""Language modelling, end to end: `train_lm(config)` and `load_lm(run_dir)`.

    import seqlab
    results = seqlab.train_lm(seqlab.LMTrainConfig())          # the bundled corpus, char-level LSTM
    lm = seqlab.load("runs/lm")
    lm.perplexity("To be, or not to be")
    print(lm.generate("ROMEO:", max_tokens=200, temperature=0.8, seed=1))

A run directory holds config.json (the three config groups and a format version), tokenizer.json,
vocab.json, model.safetensors (the best weights), checkpoint.safetensors (the last training state,
for --resume), metrics.jsonl, train_log.jsonl and curves.png.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from seqlab.contract import Pipeline
from seqlab.data.hooks import hook_files, text_hooks
from seqlab.data.tokenizers import Tokenizer
from seqlab.data.vocab import Vocab
from seqlab.errors import SeqlabError
from seqlab.families.lm import FAMILY
from seqlab.families.lm.config import CONFIG_GROUPS, LMTrainConfig, read_run_config, resolve_lm_config
from seqlab.families.lm.model import build_lm
from seqlab.families.lm.prepare import for_run, tokenizer_and_vocab
from seqlab.families.lm.task import LanguageModelingTask
from seqlab.families.lm.trained import TrainedLM
from seqlab.families.lm.vocab import read_tokenizer_and_vocab
from seqlab.fileio import atomic_write_json
from seqlab.runs.directory import check_sizes, load_best, log, start_run
from seqlab.runs.skeleton import Hooks, Run, train_family
from seqlab.training import distributed


def train_lm(config: LMTrainConfig, resume: bool = False, overwrite: bool = False,
             callback: Callable[[dict], None] | None = None) -> dict:
    """Train a language model into `config.train.output`; return the final valid/test metrics."""
    return train_family(Training, config, resume, overwrite, callback)


class Training(Hooks):
    """The language model's hooks of the training pipeline (`seqlab.runs.skeleton`)."""

    def start(self, config: LMTrainConfig, run: Run) -> None:
        if not run.resume and run.rank == 0:
            for name in hook_files():                # an overwritten run's secrets are not this one's
                (run.run_dir / name).unlink(missing_ok=True)
        self.hooks = text_hooks(config.data, config.train.seed)      # --canary: secrets planted in the training text
        if not config.data.train and not config.data.prepared:
            log("no --train given: using the bundled Tiny Shakespeare (its first 90% to train, the rest to validate)")

    def read(self, config: LMTrainConfig, run: Run) -> LMTrainConfig:
        data, run_dir = config.data, run.run_dir
        prepared = for_run(config, run_dir, run.resume, self.hooks, run.rank, distributed.barrier, log)
        for hook in self.hooks:
            log(hook.describe(run_dir, run.resume))
        if data.reverse:
            log("--reverse: the model reads the text right to left (each line backwards, the last line first)")
        self.tokenizer, self.vocab = tokenizer_and_vocab(prepared)
        if run.resume:
            _, run_vocab = read_tokenizer_and_vocab(run_dir)
            if run_vocab.tokens != self.vocab.tokens:
                raise SeqlabError(f"--resume: the prepared data ({prepared.folder}) has another vocabulary than the "
                                  f"run in {run_dir}; resume with the data the run was trained on")
        self.prepared, self.train = prepared, prepared.split("train")
        self.valid_ids = torch.from_numpy(prepared.split("valid").ids().astype(np.int64))
        self.test = prepared.split("test")
        self.test_ids = torch.from_numpy(self.test.ids().astype(np.int64)) if self.test is not None else None
        run.reading.done(f"{len(self.train.tokens):,} training tokens")
        return dataclasses.replace(config, model=dataclasses.replace(config.model, vocab_size=len(self.vocab)))

    def build(self, config: LMTrainConfig, run: Run):
        model = build_lm(config.model).to(run.device)
        if config.model.output_layer == "adaptive":
            # the clusters follow the training counts, whatever order the vocabulary lists the words in
            moved = model.output.order_by_frequency(torch.from_numpy(self.train.counts()))
            log(f"adaptive softmax: the head and clusters hold the words by training frequency ({moved:,} words in "
                "another cluster than their id alone would place them: the layer holds the permutation)")
        return model

    def task(self, config: LMTrainConfig, model, run: Run) -> LanguageModelingTask:
        train, test = config.train, self.test
        return LanguageModelingTask(model, self.train.tokens, self.valid_ids, self.test_ids, train.batch_size,
                                    train.seq_len, train.eval_batch_size, train.eval_stride, train.seed,
                                    self.prepared.split("valid").characters, test.characters if test is not None
                                    else 0, train.fused_output)

    def describe(self, config: LMTrainConfig, model, task: LanguageModelingTask, run: Run) -> str:
        return (f"vocabulary: {len(self.vocab):,} {self.tokenizer.unit} types from {len(self.train.tokens):,} training "
                f"tokens; {config.model.arch} with {model.num_parameters():,} parameters on {run.device}; "
                f"{task.output_note}")

    def write_run_files(self, config: LMTrainConfig, run: Run) -> None:
        write_run_files(run.run_dir, config, self.tokenizer, self.vocab, run.overwrite)


def write_run_files(run_dir: Path, config: LMTrainConfig, tokenizer: Tokenizer, vocab: Vocab,
                    overwrite: bool = False) -> None:
    start_run(run_dir, FAMILY, config, overwrite)
    atomic_write_json(run_dir / "tokenizer.json", tokenizer.to_dict())
    atomic_write_json(run_dir / "vocab.json", vocab.to_dict())


def load_lm(run_dir: str | Path, device: str = "cpu") -> TrainedLM:
    """A trained language model from its run directory (the best weights)."""
    run_dir = Path(run_dir)
    config = read_run_config(run_dir)
    tokenizer, vocab = read_tokenizer_and_vocab(run_dir)
    check_sizes(run_dir, config, {"vocab_size": ("vocab.json", len(vocab))})
    model, device = load_best(run_dir, build_lm(config.model), device)
    return TrainedLM(model, tokenizer, vocab, config, device).from_run(run_dir)


PIPELINE = Pipeline(
    config=LMTrainConfig, groups=CONFIG_GROUPS, train_defaults={}, derived=("vocab_size",),
    resolve=resolve_lm_config, train=train_lm, load=load_lm, evaluate=TrainedLM.evaluate_file,
    next_steps=("seqlab generate {output} --prompt '...'", "seqlab evaluate {output} FILE"))
