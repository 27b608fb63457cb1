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

import torch

from seqlab.data.hooks import hook_files, text_hooks
from seqlab.data.readers import default_corpus, encode_lines, read_lines, read_stream
from seqlab.data.tokenizers import Tokenizer, make_tokenizer
from seqlab.data.vocab import Vocab
from seqlab.errors import SeqlabError
from seqlab.families.contract import Pipeline
from seqlab.families.lm import FAMILY
from seqlab.families.lm.config import CONFIG_GROUPS, LMTrainConfig, read_run_config, resolve_lm_config
from seqlab.families.lm.task import LanguageModelingTask
from seqlab.families.lm.trained import TrainedLM, lines_as_read
from seqlab.families.lm.vocab import read_tokenizer_and_vocab, reverse_lines
from seqlab.families.runs import check_sizes, load_best, log, start_run, train_in_run
from seqlab.fileio import atomic_write_json
from seqlab.models.lm import build_lm
from seqlab.training import distributed
from seqlab.training.trainer import Trainer


def train_lm(config: LMTrainConfig, resume: bool = False, overwrite: bool = False,
             callback: Callable[[dict], None] | None = None) -> dict:
    """Train a language model into `config.train.output`; return the final valid/test metrics."""
    return train_in_run(config, resume, overwrite, lambda config, run_dir, device: _train_lm(
        config, run_dir, device, resume, overwrite, callback))


def _train_lm(config, run_dir, device, resume, overwrite, callback) -> dict:
    data = config.data
    if data.train:
        train_lines = read_lines(data.train, "training file")
        valid_lines = read_lines(data.valid, "validation file")
    else:
        train_lines, valid_lines = default_corpus()
        log(f"no --train given: using the bundled Tiny Shakespeare ({len(train_lines):,} training lines, "
            f"{len(valid_lines):,} validation lines)")
    if data.reverse:
        train_lines, valid_lines = reverse_lines(train_lines), reverse_lines(valid_lines)
        log("--reverse: the model reads the text right to left (each line backwards, the last line first)")
    if not resume and distributed.world()[0] == 0:
        for name in hook_files():                    # an overwritten run's secrets are not this one's
            (run_dir / name).unlink(missing_ok=True)
    hooks = text_hooks(data, config.train.seed)      # --canary: secrets planted in the training text
    for hook in hooks:
        distributed.barrier()
        train_lines = hook.lines(run_dir, train_lines, resume, write=distributed.world()[0] == 0)
        log(hook.describe(run_dir, resume))
    if resume:
        tokenizer, vocab = read_tokenizer_and_vocab(run_dir)
        train_tokens = tokenizer.tokenize_lines(train_lines)
    else:
        if data.tokenizer == "bpe" and data.max_vocab:
            raise SeqlabError(f"--max-vocab {data.max_vocab}: a BPE vocabulary is every piece of its BPE model; "
                              "set its size with --bpe-vocab-size instead (--max-vocab is for word and char)")
        tokenizer = make_tokenizer(data.tokenizer, data.bpe_vocab_size)
        tokenizer.fit(train_lines)
        train_tokens = tokenizer.tokenize_lines(train_lines)
        vocab = tokenizer.vocabulary(train_tokens, data.min_freq, data.max_vocab or None)
        for hook in hooks:
            vocab = hook.vocabulary(vocab)
    train_ids = encode_lines(train_tokens, vocab)
    valid_ids, valid_characters = read_stream(valid_lines if data.reverse else data.valid or valid_lines,
                                              tokenizer, vocab, "validation file")
    test_ids, test_characters = (read_stream(lines_as_read(data.test, data.reverse, "test file"), tokenizer,
                                             vocab, "test file") if data.test else (None, 0))
    model_config = dataclasses.replace(config.model, vocab_size=len(vocab))
    config = dataclasses.replace(config, model=model_config)
    torch.manual_seed(config.train.seed)
    model = build_lm(model_config).to(device)
    if model_config.output_layer == "adaptive":
        # the clusters follow the training counts, whatever order the vocabulary lists the words in
        moved = model.output.order_by_frequency(torch.bincount(train_ids, minlength=len(vocab)))
        log(f"adaptive softmax: the head and clusters hold the words by training frequency ({moved:,} words in "
            "another cluster than their id alone would place them: the layer holds the permutation)")
    rank = distributed.world()[0]
    torch.manual_seed(config.train.seed + rank)
    task = LanguageModelingTask(model, train_ids, valid_ids, test_ids, config.train.batch_size,
                                config.train.seq_len, config.train.eval_batch_size,
                                config.train.eval_stride, config.train.seed, valid_characters, test_characters,
                                config.train.fused_output)
    log(f"vocabulary: {len(vocab):,} {tokenizer.unit} types from {len(train_ids):,} training tokens; "
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
