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

from seqlab.data.hooks import hook_files, text_hooks
from seqlab.data.tokenizers import Tokenizer
from seqlab.data.vocab import Vocab
from seqlab.errors import SeqlabError
from seqlab.families.contract import Pipeline
from seqlab.families.lm import FAMILY
from seqlab.families.lm.config import CONFIG_GROUPS, LMTrainConfig, read_run_config, resolve_lm_config
from seqlab.families.lm.prepare import for_run, tokenizer_and_vocab
from seqlab.families.lm.task import LanguageModelingTask
from seqlab.families.lm.trained import TrainedLM
from seqlab.families.lm.vocab import read_tokenizer_and_vocab
from seqlab.families.runs import check_sizes, load_best, log, start_run, train_in_run
from seqlab.fileio import atomic_write_json
from seqlab.models.lm import build_lm
from seqlab.progress import Reading, data_files
from seqlab.training import distributed
from seqlab.training.trainer import Trainer


def train_lm(config: LMTrainConfig, resume: bool = False, overwrite: bool = False,
             callback: Callable[[dict], None] | None = None) -> dict:
    """Train a language model into `config.train.output`; return the final valid/test metrics."""
    return train_in_run(config, resume, overwrite, lambda config, run_dir, device: _train_lm(
        config, run_dir, device, resume, overwrite, callback))


def _train_lm(config, run_dir, device, resume, overwrite, callback) -> dict:
    data = config.data
    rank = distributed.world()[0]
    if not resume and rank == 0:
        for name in hook_files():                    # an overwritten run's secrets are not this one's
            (run_dir / name).unlink(missing_ok=True)
    hooks = text_hooks(data, config.train.seed)      # --canary: secrets planted in the training text
    if not data.train and not data.prepared:
        log("no --train given: using the bundled Tiny Shakespeare (its first 90% to train, the rest to validate)")
    reading = Reading(data_files(data), log)        # hashing, preparing or opening them can take minutes
    prepared = for_run(config, run_dir, resume, hooks, rank, distributed.barrier, log)
    for hook in hooks:
        log(hook.describe(run_dir, resume))
    if data.reverse:
        log("--reverse: the model reads the text right to left (each line backwards, the last line first)")
    tokenizer, vocab = tokenizer_and_vocab(prepared)
    if resume:
        _, run_vocab = read_tokenizer_and_vocab(run_dir)
        if run_vocab.tokens != vocab.tokens:
            raise SeqlabError(f"--resume: the prepared data ({prepared.folder}) has another vocabulary than the run "
                              f"in {run_dir}; resume with the data the run was trained on")
    train = prepared.split("train")
    valid_ids = torch.from_numpy(prepared.split("valid").ids().astype(np.int64))
    test = prepared.split("test")
    test_ids = torch.from_numpy(test.ids().astype(np.int64)) if test is not None else None
    reading.done(f"{len(train.tokens):,} training tokens")
    model_config = dataclasses.replace(config.model, vocab_size=len(vocab))
    config = dataclasses.replace(config, model=model_config)
    torch.manual_seed(config.train.seed)
    model = build_lm(model_config).to(device)
    if model_config.output_layer == "adaptive":
        # the clusters follow the training counts, whatever order the vocabulary lists the words in
        moved = model.output.order_by_frequency(torch.from_numpy(train.counts()))
        log(f"adaptive softmax: the head and clusters hold the words by training frequency ({moved:,} words in "
            "another cluster than their id alone would place them: the layer holds the permutation)")
    torch.manual_seed(config.train.seed + rank)
    task = LanguageModelingTask(model, train.tokens, valid_ids, test_ids, config.train.batch_size,
                                config.train.seq_len, config.train.eval_batch_size,
                                config.train.eval_stride, config.train.seed, prepared.split("valid").characters,
                                test.characters if test is not None else 0, config.train.fused_output)
    log(f"vocabulary: {len(vocab):,} {tokenizer.unit} types from {len(train.tokens):,} training tokens; "
        f"{model_config.arch} with {model.num_parameters():,} parameters on {device}; {task.output_note}")
    if rank == 0 and not resume:
        write_run_files(run_dir, config, tokenizer, vocab, overwrite)
    distributed.barrier()
    trainer = Trainer(task, model, config.train, run_dir, device, callback)
    return trainer.fit(resume=resume)


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
