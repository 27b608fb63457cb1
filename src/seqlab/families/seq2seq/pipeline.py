"""Sequence to sequence, end to end: `train_seq2seq(config)` and `load_seq2seq(run_dir)`.

    import seqlab
    config = seqlab.resolve_seq2seq_config(overrides={
        "train_src": "train.de", "train_tgt": "train.en", "dev_src": "val.de", "dev_tgt": "val.en",
        "arch": "gru", "attention": "dot", "output": "runs/de-en"})
    seqlab.train_seq2seq(config)
    model = seqlab.load("runs/de-en")
    model.translate(["ein mann schläft ."], beam=5)        # ['a man is sleeping .']

Training reads only prepared data (`seqlab.families.seq2seq.prepare`): the folder given with --data, or the
files prepared once into a cache. A run directory holds config.json (data, model and train groups, "task":
"seq2seq"), tokenizer.json and vocab.json (source and target; one of each when shared), model.safetensors
(the best weights, by development loss), checkpoint.safetensors (for --resume), metrics.jsonl, train_log.jsonl
and curves.png, and prepared/ (the cache of its files' prepared data, unless $SEQLAB_CACHE_DIR is set).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from pathlib import Path

from seqlab.contract import Pipeline
from seqlab.data.tokenizers import make_tokenizer
from seqlab.errors import SeqlabError
from seqlab.families.seq2seq import FAMILY
from seqlab.families.seq2seq.config import (
    CONFIG_GROUPS,
    TRAIN_DEFAULTS,
    Seq2SeqTrainConfig,
    read_run_config,
    resolve_lengths,
    resolve_seq2seq_config,
)
from seqlab.families.seq2seq.model import build_model
from seqlab.families.seq2seq.parallel import Pair
from seqlab.families.seq2seq.prepare import check_options, for_run, split_name, vocabulary_of
from seqlab.families.seq2seq.prepared_pairs import PreparedPairs, read_targets
from seqlab.families.seq2seq.prepared_pairs import read_pairs as read_prepared_pairs
from seqlab.families.seq2seq.task import LengthReport, PairVocabulary, Seq2SeqTask
from seqlab.families.seq2seq.text_checks import refuse_raw_text, text_warnings
from seqlab.families.seq2seq.trained import TrainedSeq2Seq
from seqlab.families.seq2seq.vocab import read_pair_vocabulary
from seqlab.fileio import atomic_write_json
from seqlab.runs.directory import (
    check_sizes,
    load_best,
    log,
    start_run,
)
from seqlab.runs.skeleton import Hooks, Run, train_family
from seqlab.training import distributed


def train_seq2seq(config: Seq2SeqTrainConfig, resume: bool = False, overwrite: bool = False,
                  callback: Callable[[dict], None] | None = None) -> dict:
    """Train a sequence-to-sequence model into `config.train.output`; return the final dev/test figures."""
    return train_family(Training, config, resume, overwrite, callback)


class Training(Hooks):
    """The sequence-to-sequence hooks of the training pipeline (`seqlab.runs.skeleton`)."""

    def refuse(self, config: Seq2SeqTrainConfig) -> Seq2SeqTrainConfig:
        model_config = config.model
        if model_config.arch == "lm" and not config.data.shared_vocab:
            raise SeqlabError("--arch lm reads source <sep> target as one sequence: add --shared-vocab")
        if model_config.share_embeddings and not config.data.shared_vocab:
            raise SeqlabError("--share-embeddings needs one vocabulary for both sides: add --shared-vocab")
        return dataclasses.replace(config, data=resolve_lengths(config.data, model_config))

    def start(self, config: Seq2SeqTrainConfig, run: Run) -> None:
        model_config = config.model
        self.init = Path(model_config.init_from) if model_config.init_from and not run.resume else None
        self.given = None                             # the ids the weights were trained with
        if run.resume:
            self.given = read_vocabulary(run.run_dir, config)
        elif self.init is not None:
            self.given = read_vocabulary(self.init, read_run_config(self.init))

    def read(self, config: Seq2SeqTrainConfig, run: Run) -> Seq2SeqTrainConfig:
        data, model_config, run_dir, given, init = config.data, config.model, run.run_dir, self.given, self.init
        prepared = for_run(config, run_dir, given, run.rank, distributed.barrier, log)
        vocabulary = vocabulary_of(prepared, model_config.arch == "lm", data.max_source_length,
                                   data.max_target_length)
        if given is not None and (given.source_vocab.tokens != vocabulary.source_vocab.tokens or
                                  given.target_vocab.tokens != vocabulary.target_vocab.tokens):
            what = f"--resume: the run in {run_dir}" if run.resume else f"--init-from {init}: that run"
            raise SeqlabError(f"{what} has another vocabulary than the prepared data ({prepared.folder}); train "
                              "from the data the run was trained on")
        vocabulary.copy = model_config.copy          # each pair also as ids of the extended vocabulary (See et al.)
        model_config = dataclasses.replace(model_config, source_vocab_size=len(vocabulary.source_vocab),
                                           target_vocab_size=len(vocabulary.target_vocab))
        reports = [LengthReport(), LengthReport(), LengthReport()]
        self.train = PreparedPairs(prepared.split("train"), vocabulary, data.long_pairs, reports[0])
        self.dev = read_prepared_pairs(prepared.split("dev"), vocabulary, reports[1])
        self.test = (read_prepared_pairs(prepared.split("test"), vocabulary, reports[2]) if prepared.split("test")
                     else [])
        run.reading.done(f"{len(self.train):,} training pairs")
        paths = [split_name(prepared, name) for name in ("train", "dev", "test")]
        for report, path in zip(reports, paths, strict=True):
            for message in report.messages(path, data.max_source_length, data.max_target_length):
                log(message)
        if not len(self.train):
            raise SeqlabError(f"{paths[0]}: no training pair is within the length limits")
        if not run.resume:                              # every process: all of them stop
            refuse_raw_text(prepared, vocabulary, data)
        if run.rank == 0 and not run.resume:
            for message in text_warnings(prepared, vocabulary, data):
                warnings.warn(message, stacklevel=2)
        decode = config.train.eval_decode            # the first pairs of dev (and test) decoded at every evaluation
        self.references = [read_targets(prepared.split(name), vocabulary, decode) if decode and prepared.split(name)
                           else [] for name in ("dev", "test")]
        self.vocabulary = vocabulary
        return dataclasses.replace(config, model=model_config)

    def build(self, config: Seq2SeqTrainConfig, run: Run):
        model = build_model(config.model)
        if self.init is not None:
            initialise_from(model, self.init)
        return model.to(run.device)

    def task(self, config: Seq2SeqTrainConfig, model, run: Run) -> Seq2SeqTask:
        model_config, train = config.model, config.train
        return Seq2SeqTask(self.vocabulary, self.train, self.dev, self.test or None, train.batch_size,
                           train.eval_batch_size, train.seed, model_config.label_smoothing,
                           model_config.arch == "lm" and model_config.lm_loss == "all", train.fused_output,
                           model_config.coverage_weight if model_config.coverage else 0.0, *self.references)

    def describe(self, config: Seq2SeqTrainConfig, model, task: Seq2SeqTask, run: Run) -> str:
        model_config, vocabulary = config.model, self.vocabulary
        sides = (f"{len(vocabulary.source_vocab):,} tokens (shared)" if config.data.shared_vocab else
                 f"{len(vocabulary.source_vocab):,} source / {len(vocabulary.target_vocab):,} target tokens")
        attention = f" with {model_config.attention} attention" if model_config.attention != "none" else ""
        attention += " + copy" * model_config.copy + " + coverage" * model_config.coverage
        return (f"{len(self.train):,} training pairs; vocabulary {sides}; {model_config.arch}{attention} with "
                f"{model.num_parameters():,} parameters on {run.device}; {task.output_note}")

    def write_run_files(self, config: Seq2SeqTrainConfig, run: Run) -> None:
        write_run_files(run.run_dir, config, self.vocabulary, run.overwrite)


def initialise_from(model, run: Path) -> None:
    """The best weights of a trained run into `model` (--init-from): every tensor must fit a parameter of
    the same name and shape; the model's own parameters that the run lacks (a coverage attention's w_c,
    See et al. 2017) keep their initial values."""
    from seqlab.training.checkpoint import load_tensors

    if not (run / "model.safetensors").exists():
        raise SeqlabError(f"--init-from {run}: no model.safetensors there (not a trained seq2seq run)")
    tensors, _ = load_tensors(run / "model.safetensors")
    own = model.state_dict()
    wrong = [name for name, t in tensors.items() if name not in own or own[name].shape != t.shape]
    if wrong:
        raise SeqlabError(f"--init-from {run}: its weights do not fit this model ({wrong[0]} and "
                          f"{len(wrong) - 1} more); keep the architecture options of that run")
    model.load_state_dict(tensors, strict=False)


def build_vocabulary(train: list[Pair], config: Seq2SeqTrainConfig) -> PairVocabulary:
    """Tokenizers and vocabularies from the training pairs only: a word or char vocabulary holds the
    tokens seen (--min-freq, --max-vocab), a BPE vocabulary every piece of its BPE model. Training fits them
    streaming, in `seqlab.families.seq2seq.prepare.fit`; this in-memory version is its reference."""
    data = config.data
    check_options(data)
    sources, targets = [p.source for p in train], [p.target for p in train]
    if data.shared_vocab:
        tokenizer = make_tokenizer(data.side_tokenizer("source"), data.bpe_vocab_size, data.source_lang)
        tokenizer.fit(sources + targets)
        vocab = tokenizer.vocabulary(tokenizer.tokenize_lines(sources + targets), data.min_freq,
                                     data.max_vocab or None)
        return PairVocabulary(tokenizer, tokenizer, vocab, vocab, config.model.arch == "lm",
                           data.max_source_length, data.max_target_length)
    made = []
    for side, lines in (("source", sources), ("target", targets)):
        tokenizer = make_tokenizer(data.side_tokenizer(side), data.bpe_vocab_size, getattr(data, f"{side}_lang"))
        tokenizer.fit(lines)
        made.append((tokenizer, tokenizer.vocabulary(tokenizer.tokenize_lines(lines), data.min_freq,
                                                     data.max_vocab or None)))
    return PairVocabulary(made[0][0], made[1][0], made[0][1], made[1][1], False, data.max_source_length,
                       data.max_target_length)


def write_run_files(run_dir: Path, config: Seq2SeqTrainConfig, vocabulary: PairVocabulary,
                    overwrite: bool = False) -> None:
    start_run(run_dir, FAMILY, config, overwrite)
    shared = vocabulary.source_vocab is vocabulary.target_vocab
    atomic_write_json(run_dir / "tokenizer.json", {
        "shared": shared, "source": vocabulary.source_tokenizer.to_dict(),
        **({} if shared else {"target": vocabulary.target_tokenizer.to_dict()})})
    atomic_write_json(run_dir / "vocab.json", {
        "shared": shared, "source": vocabulary.source_vocab.tokens,
        **({} if shared else {"target": vocabulary.target_vocab.tokens})})


def read_vocabulary(run_dir: Path, config: Seq2SeqTrainConfig) -> PairVocabulary:
    data = config.data
    vocabulary = read_pair_vocabulary(run_dir, config.model.arch == "lm", data.max_source_length,
                                      data.max_target_length)
    vocabulary.copy = config.model.copy
    return vocabulary


def load_seq2seq(run_dir: str | Path, device: str = "cpu") -> TrainedSeq2Seq:
    """A trained sequence-to-sequence model from its run directory (the best weights)."""
    run_dir = Path(run_dir)
    config = read_run_config(run_dir)
    vocabulary = read_vocabulary(run_dir, config)
    check_sizes(run_dir, config, {"source_vocab_size": ("vocab.json (source)", len(vocabulary.source_vocab)),
                                  "target_vocab_size": ("vocab.json (target)", len(vocabulary.target_vocab))})
    model, device = load_best(run_dir, build_model(config.model), device)
    return TrainedSeq2Seq(model, vocabulary, config, device).from_run(run_dir)


PIPELINE = Pipeline(
    config=Seq2SeqTrainConfig, groups=CONFIG_GROUPS, train_defaults=TRAIN_DEFAULTS,
    derived=("source_vocab_size", "target_vocab_size"), resolve=resolve_seq2seq_config, train=train_seq2seq,
    load=load_seq2seq, evaluate=TrainedSeq2Seq.evaluate_files,
    next_steps=("seqlab translate {output} FILE --beam 5", "seqlab evaluate {output} --src FILE --tgt FILE"))
