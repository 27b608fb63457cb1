"""Sequence to sequence, end to end: `train_seq2seq(config)` and `load_seq2seq(run_dir)`.

    import seqlab
    config = seqlab.resolve_seq2seq_config(overrides={
        "train_src": "train.de", "train_tgt": "train.en", "dev_src": "val.de", "dev_tgt": "val.en",
        "arch": "gru", "attention": "dot", "output": "runs/de-en"})
    seqlab.train_seq2seq(config)
    model = seqlab.load("runs/de-en")
    model.translate(["ein mann schläft ."], beam=5)        # ['a man is sleeping .']

A run directory holds config.json (data, model and train groups, "task": "seq2seq"), tokenizer.json
and vocab.json (source and target; one of each when shared), model.safetensors (the best weights, by
development loss), checkpoint.safetensors (for --resume), metrics.jsonl, train_log.jsonl and curves.png.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm

from seqlab.config import check_fields, option
from seqlab.data.batching import length_batches
from seqlab.data.limits import DEFAULT_MAX_TOKENS, InputLimit
from seqlab.data.parallel import PAIRED_FORMATS, Pair, aligned_pairs, paired_reader, read_aligned, read_paired
from seqlab.data.stream import CHUNK_SIZE, LineReader, chunked, interactive
from seqlab.data.tokenizers import TOKENIZERS, make_tokenizer
from seqlab.data.vocab import UNK
from seqlab.errors import SeqlabError, place
from seqlab.fileio import atomic_write_json
from seqlab.metrics import CorpusScores, bleu, chrf, rouge
from seqlab.models.seq2seq import Seq2SeqConfig, build_model
from seqlab.pipelines.outputs import Output
from seqlab.pipelines.run_files import FromRun, read_pair_vocabulary
from seqlab.pipelines.runs import (
    Pipeline,
    check_sizes,
    load_best,
    log,
    read_run_config_as,
    resolve_run_config,
    start_run,
    train_in_run,
)
from seqlab.progress import progress_bar
from seqlab.search import Hypothesis, SearchOptions, decode
from seqlab.tasks.seq2seq import LengthReport, PairVocabulary, Seq2SeqTask, pair_batches
from seqlab.training import distributed
from seqlab.training.plots import plot_attention
from seqlab.training.trainer import TrainConfig, Trainer

TRAIN_DEFAULTS = {"output": "runs/seq2seq", "epochs": 10, "batch_size": 64, "eval_batch_size": 128,
                  "optimizer": "adam", "lr": 1e-3, "grad_clip": 1.0, "log_every": 50}


@dataclass
class Seq2SeqDataConfig:
    """Where the pairs come from and how they become tokens (saved under "data")."""

    train_src: str = option("", "training sources, one per line (with --train-tgt: line i translates to line i)",
                            file=True)
    train_tgt: str = option("", "training targets, aligned with --train-src", file=True)
    dev_src: str = option("", "development sources: scored every epoch, for the best weights", file=True)
    dev_tgt: str = option("", "development targets", file=True)
    test_src: str = option("", "test sources, scored with the best weights at the end", file=True)
    test_tgt: str = option("", "test targets", file=True)
    train: str = option("", "instead of --train-src/--train-tgt: one file of pairs (--format tsv or jsonl)", file=True)
    dev: str = option("", "instead of --dev-src/--dev-tgt: a file of pairs", file=True)
    test: str = option("", "instead of --test-src/--test-tgt: a file of pairs", file=True)
    format: str = option("jsonl", "files of pairs: tsv (columns by header name or 0-based index) or jsonl",
                         choices=PAIRED_FORMATS)
    source_field: str = option("source", "files of pairs: the source's column or JSON field")
    target_field: str = option("target", "files of pairs: the target's column or JSON field")
    tokenizer: str = option("word", "both sides: word (whitespace-separated, for tokenised text), char, or bpe "
                                    "(byte-level BPE learned on the training split)", choices=tuple(TOKENIZERS))
    source_tokenizer: str = option("", "the source side's tokenizer, if not --tokenizer",
                                   choices=("", *TOKENIZERS))
    target_tokenizer: str = option("", "the target side's tokenizer, if not --tokenizer",
                                   choices=("", *TOKENIZERS))
    shared_vocab: bool = option(False, "one tokenizer and vocabulary learned on both sides (needed by --arch lm "
                                       "and --share-embeddings)")
    bpe_vocab_size: int = option(8000, "bpe: pieces per BPE model (the 256 bytes included); its vocabulary is "
                                       "these pieces and the 5 specials", at_least=1)
    min_freq: int = option(1, "word / char: keep tokens seen at least this often in training; the rest are <unk> "
                              "(BPE keeps every piece of its model)", at_least=1)
    max_vocab: int = option(0, "word / char: keep at most this many tokens per vocabulary, specials included (0: no "
                               "limit; refused when every side is BPE: use --bpe-vocab-size)", at_least=0)
    max_source_length: int = option(0, "longest source in tokens (0: no limit for rnn / lstm / gru; the "
                                       "transformer: --max-positions; lm: what --max-target-length leaves)", at_least=0)
    max_target_length: int = option(0, "longest target in tokens (0: no limit for rnn / lstm / gru; the "
                                       "transformer: --max-positions - 1; lm: --max-positions / 4)", at_least=0)
    long_pairs: str = option("skip", "training pairs over the limits: skip them (counted) or truncate them "
                                     "(development and test pairs are always truncated, counted)",
                             choices=("skip", "truncate"))

    def __post_init__(self):
        check_fields(self)

    def side_tokenizer(self, side: str) -> str:
        return getattr(self, f"{side}_tokenizer") or self.tokenizer


@dataclass
class Seq2SeqTrainConfig:
    """A sequence-to-sequence training run: data, model and training options."""

    data: Seq2SeqDataConfig = field(default_factory=Seq2SeqDataConfig)
    model: Seq2SeqConfig = field(default_factory=Seq2SeqConfig)
    train: TrainConfig = field(default_factory=lambda: TrainConfig(**TRAIN_DEFAULTS))


CONFIG_GROUPS = {"data": Seq2SeqDataConfig, "model": Seq2SeqConfig, "train": TrainConfig}


def resolve_seq2seq_config(config_file: str | Path | None = None, overrides: dict | None = None,
                           resume: bool = False) -> Seq2SeqTrainConfig:
    """Defaults (TRAIN_DEFAULTS for the trainer) < the config file < overrides (the command line)."""
    return resolve_run_config(Seq2SeqTrainConfig, CONFIG_GROUPS, config_file, overrides, resume,
                              read_run_config, TRAIN_DEFAULTS)


def read_pairs(data: Seq2SeqDataConfig, split: str, required: bool = False) -> tuple[list[Pair] | None, str]:
    """A split's pairs (None when not given) and how to name its file in messages."""
    paired, source, target = getattr(data, split), getattr(data, f"{split}_src"), getattr(data, f"{split}_tgt")
    what = {"train": "training", "dev": "development", "test": "test"}[split]
    if paired and (source or target):
        raise SeqlabError(f"give --{split} (a file of pairs) or --{split}-src and --{split}-tgt, not both")
    if paired:
        return read_paired(paired, data.format, data.source_field, data.target_field, f"{what} file"), paired
    if source or target:
        if not (source and target):
            raise SeqlabError(f"--{split}-src and --{split}-tgt go together; only one was given")
        return read_aligned(source, target, f"{what} file"), source
    if required:
        raise SeqlabError(f"sequence to sequence needs {what} pairs: --{split}-src and --{split}-tgt (aligned files) "
                          f"or --{split} (a file of pairs)")
    return None, ""


def resolve_lengths(data: Seq2SeqDataConfig, model: Seq2SeqConfig) -> Seq2SeqDataConfig:
    """Concrete length limits for the architecture (saved, so decoding applies the same ones)."""
    P = model.max_positions
    source, target = data.max_source_length, data.max_target_length
    if model.arch == "transformer":
        source, target = min(source or P, P), min(target or P - 1, P - 1)
    elif model.arch == "lm":
        target = min(target or P // 4, P - 2)
        source = min(source or P - 1 - target, P - 1 - target)       # source <sep> target fits the window
    return dataclasses.replace(data, max_source_length=source, max_target_length=target)


def train_seq2seq(config: Seq2SeqTrainConfig, resume: bool = False, overwrite: bool = False,
                  callback: Callable[[dict], None] | None = None) -> dict:
    """Train a sequence-to-sequence model into `config.train.output`; return the final dev/test figures."""
    return train_in_run(config, resume, overwrite, lambda config, run_dir, device: _train(
        config, run_dir, device, resume, overwrite, callback))


def _train(config: Seq2SeqTrainConfig, run_dir: Path, device, resume: bool, overwrite: bool, callback) -> dict:
    model_config = config.model
    if model_config.arch == "lm" and not config.data.shared_vocab:
        raise SeqlabError("--arch lm reads source <sep> target as one sequence: add --shared-vocab")
    if model_config.share_embeddings and not config.data.shared_vocab:
        raise SeqlabError("--share-embeddings needs one vocabulary for both sides: add --shared-vocab")
    data = resolve_lengths(config.data, model_config)
    config = dataclasses.replace(config, data=data)
    train, train_path = read_pairs(data, "train", required=True)
    dev, dev_path = read_pairs(data, "dev", required=True)
    test, test_path = read_pairs(data, "test")
    init = Path(model_config.init_from) if model_config.init_from and not resume else None
    if init is not None:                          # the ids the weights were trained with
        vocabulary = read_vocabulary(init, read_run_config(init))
    else:
        vocabulary = read_vocabulary(run_dir, config) if resume else build_vocabulary(train, config)
    vocabulary.copy = model_config.copy          # each pair also as ids of the extended vocabulary (See et al.)
    model_config = dataclasses.replace(model_config, source_vocab_size=len(vocabulary.source_vocab),
                                       target_vocab_size=len(vocabulary.target_vocab))
    config = dataclasses.replace(config, model=model_config)
    reports = [LengthReport(), LengthReport(), LengthReport()]
    encoded = [vocabulary.encode(train, train_path, "training file", data.long_pairs, reports[0]),
               vocabulary.encode(dev, dev_path, "development file", "truncate", reports[1]),
               vocabulary.encode(test or [], test_path, "test file", "truncate", reports[2])]
    for report, path in zip(reports, (train_path, dev_path, test_path), strict=True):
        for message in report.messages(path, data.max_source_length, data.max_target_length):
            log(message)
    if not encoded[0]:
        raise SeqlabError(f"{train_path}: no training pair is within the length limits")
    torch.manual_seed(config.train.seed)
    model = build_model(model_config)
    if init is not None:
        initialise_from(model, init)
    model = model.to(device)
    rank = distributed.world()[0]
    torch.manual_seed(config.train.seed + rank)
    sides = (f"{len(vocabulary.source_vocab):,} tokens (shared)" if data.shared_vocab else
             f"{len(vocabulary.source_vocab):,} source / {len(vocabulary.target_vocab):,} target tokens")
    attention = f" with {model_config.attention} attention" if model_config.attention != "none" else ""
    attention += " + copy" * model_config.copy + " + coverage" * model_config.coverage
    task = Seq2SeqTask(vocabulary, encoded[0], encoded[1], encoded[2] or None, config.train.batch_size,
                       config.train.eval_batch_size, config.train.seed, model_config.label_smoothing,
                       model_config.arch == "lm" and model_config.lm_loss == "all", config.train.fused_output,
                       model_config.coverage_weight if model_config.coverage else 0.0)
    log(f"{len(encoded[0]):,} training pairs; vocabulary {sides}; {model_config.arch}{attention} with "
        f"{model.num_parameters():,} parameters on {device}; {task.output_note}")
    if rank == 0 and not resume:
        write_run_files(run_dir, config, vocabulary, overwrite)
    distributed.barrier()
    return Trainer(task, model, config.train, run_dir, device, callback).fit(resume=resume)


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
    tokens seen (--min-freq, --max-vocab), a BPE vocabulary every piece of its BPE model."""
    data = config.data
    if data.max_vocab and {data.side_tokenizer("source"), data.side_tokenizer("target")} == {"bpe"}:
        raise SeqlabError(f"--max-vocab {data.max_vocab}: a BPE vocabulary is every piece of its BPE model; set its "
                          "size with --bpe-vocab-size instead (--max-vocab is for word and char vocabularies)")
    sources, targets = [p.source for p in train], [p.target for p in train]
    if data.shared_vocab:
        if data.side_tokenizer("source") != data.side_tokenizer("target"):
            raise SeqlabError("--shared-vocab needs the same tokenizer on both sides")
        tokenizer = make_tokenizer(data.side_tokenizer("source"), data.bpe_vocab_size)
        tokenizer.fit(sources + targets)
        vocab = tokenizer.vocabulary(tokenizer.tokenize_lines(sources + targets), data.min_freq,
                                     data.max_vocab or None)
        return PairVocabulary(tokenizer, tokenizer, vocab, vocab, config.model.arch == "lm",
                           data.max_source_length, data.max_target_length)
    made = []
    for side, lines in (("source", sources), ("target", targets)):
        tokenizer = make_tokenizer(data.side_tokenizer(side), data.bpe_vocab_size)
        tokenizer.fit(lines)
        made.append((tokenizer, tokenizer.vocabulary(tokenizer.tokenize_lines(lines), data.min_freq,
                                                     data.max_vocab or None)))
    return PairVocabulary(made[0][0], made[1][0], made[0][1], made[1][1], False, data.max_source_length,
                       data.max_target_length)


def write_run_files(run_dir: Path, config: Seq2SeqTrainConfig, vocabulary: PairVocabulary,
                    overwrite: bool = False) -> None:
    start_run(run_dir, "seq2seq", config, overwrite)
    shared = vocabulary.source_vocab is vocabulary.target_vocab
    atomic_write_json(run_dir / "tokenizer.json", {
        "shared": shared, "source": vocabulary.source_tokenizer.to_dict(),
        **({} if shared else {"target": vocabulary.target_tokenizer.to_dict()})})
    atomic_write_json(run_dir / "vocab.json", {
        "shared": shared, "source": vocabulary.source_vocab.tokens,
        **({} if shared else {"target": vocabulary.target_vocab.tokens})})


def read_run_config(run_dir: str | Path) -> Seq2SeqTrainConfig:
    return read_run_config_as(run_dir, "seq2seq", Seq2SeqTrainConfig, CONFIG_GROUPS)


def read_vocabulary(run_dir: Path, config: Seq2SeqTrainConfig) -> PairVocabulary:
    data = config.data
    vocabulary = read_pair_vocabulary(run_dir, config.model.arch == "lm", data.max_source_length,
                                      data.max_target_length)
    vocabulary.copy = config.model.copy
    return vocabulary


# ---------------------------------------------------------------------------- a trained model

def load_seq2seq(run_dir: str | Path, device: str = "cpu") -> TrainedSeq2Seq:
    """A trained sequence-to-sequence model from its run directory (the best weights)."""
    run_dir = Path(run_dir)
    config = read_run_config(run_dir)
    vocabulary = read_vocabulary(run_dir, config)
    check_sizes(run_dir, config, {"source_vocab_size": ("vocab.json (source)", len(vocabulary.source_vocab)),
                                  "target_vocab_size": ("vocab.json (target)", len(vocabulary.target_vocab))})
    model, device = load_best(run_dir, build_model(config.model), device)
    return TrainedSeq2Seq(model, vocabulary, config, device).from_run(run_dir)


class TrainedSeq2Seq(FromRun):
    """A loaded sequence-to-sequence model: sources in, translations (or summaries) out."""

    def __init__(self, model, vocabulary: PairVocabulary, config: Seq2SeqTrainConfig, device):
        self.model, self.vocabulary, self.config, self.device = model, vocabulary, config, device

    def translate(self, texts: list[str] | str, beam: int = 5, **options) -> list[str] | str:
        """The best output for each source text (one text given as a string: one string). Options:
        those of `generate`."""
        if isinstance(texts, str):
            return self.translate([texts], beam, **options)[0]
        return [output.text for output in self.generate(texts, beam=beam, **options)]

    summarize = translate

    def generate(self, texts: list[str], beam: int = 5, max_length: int = 0, length_penalty: float = 1.0,
                 sample: bool = False, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
                 seed: int | None = None, batch_size: int = 64, attention: bool = False,
                 long_source: str = "truncate", progress: bool | None = False, what: str = "input") -> list[Output]:
        """Decode each text: beam search (beam > 1), greedy (beam 1) or sampling (sample=True). Sources
        longer than the model's limit are truncated with a warning (long_source="truncate") or refused
        ("reject"); an empty text is refused."""
        empty = [i for i, t in enumerate(texts) if not t.strip()]
        if empty:
            raise SeqlabError(f"{what} {empty[0] + 1} of {len(texts)} is empty; there is nothing to decode")
        return self.generate_pairs([Pair(t, None, i + 1) for i, t in enumerate(texts)],
                                   SearchOptions(beam=beam, max_length=max_length, length_penalty=length_penalty,
                                                 sample=sample, temperature=temperature, top_k=top_k, top_p=top_p,
                                                 seed=seed), batch_size, attention, long_source, progress, what)

    @torch.no_grad()
    def generate_pairs(self, pairs: list[Pair], options: SearchOptions, batch_size: int = 64,
                       attention: bool = False, long_source: str = "truncate", progress: bool | None = False,
                       what: str = "input") -> list[Output]:
        sources = [dataclasses.replace(p, target=None) for p in pairs]
        encoded, source_tokens, _ = self._encode(sources, long_source, what)
        return self._decode(encoded, source_tokens, options, batch_size, attention, progress)

    def _encode(self, pairs: list[Pair], long_source: str, what: str):
        """The pairs as ids (sources over the limit truncated with a warning, or refused), the source
        tokens (heat map labels; each source is tokenized once) and the length report."""
        if long_source not in ("truncate", "reject"):
            raise SeqlabError(f"--long-source {long_source!r}: choose truncate or reject")
        report = LengthReport()
        source_tokens = self.vocabulary.source_tokens([p.source for p in pairs])
        encoded = self.vocabulary.encode(pairs, what, what, long_source, report, source_tokens)
        for message in report.messages(what, self.vocabulary.max_source, self.vocabulary.max_target):
            warnings.warn(message, stacklevel=4)
        return encoded, source_tokens, report

    def _decode(self, encoded: list, source_tokens: list[list[str]], options: SearchOptions, batch_size: int,
                attention: bool, progress: bool | None) -> list[Output]:
        results: list[Output | None] = [None] * len(encoded)
        groups = length_batches([len(e.source) for e in encoded], batch_size, None)
        for group in progress_bar(groups, progress, desc="decoding", unit="batch", leave=False):
            batch = self.vocabulary.collate([encoded[i] for i in group]).to(self.device)
            hypotheses = decode(self.model, batch.source, batch.source_lengths, options, need_weights=attention,
                                source_copy=batch.source_copy)
            for i, best in zip(group, hypotheses, strict=True):
                results[i] = self._output(best[0], source_tokens[i][:len(encoded[i].source)], encoded[i].oovs)
        return results

    def _output(self, hypothesis: Hypothesis, source_tokens: list[str], oovs: list[str] | None = None) -> Output:
        vocab = self.vocabulary.target_vocab
        V = len(vocab)
        # a copy model's id V + k is the k-th out-of-vocabulary word of its source (See et al. 2017)
        oovs = oovs or []
        tokens = [vocab.tokens[i] if i < V else oovs[i - V] if i - V < len(oovs) else vocab.tokens[UNK]
                  for i in hypothesis.tokens]
        weights = None if hypothesis.attention is None else hypothesis.attention.tolist()
        return Output(self.vocabulary.target_tokenizer.detokenize(tokens), tokens, hypothesis.score,
                      hypothesis.normalized, hypothesis.finished, source_tokens, weights)

    def plot_attention(self, output: Output, path: str | Path, title: str = "") -> Path:
        """The attention weights of a decoded text as a heat map PNG (output tokens by source tokens)."""
        if output.attention is None:
            raise SeqlabError("this output has no attention weights: decode with attention=True (a model with "
                              "attention: an RNN with --attention, or the transformer)")
        targets = output.tokens + (["</s>"] if output.finished else [])
        return plot_attention(output.attention, [_show(t) for t in output.source_tokens], [_show(t) for t in targets],
                              path, title)

    def evaluate_pairs(self, pairs: list[Pair], options: SearchOptions | None = None, batch_size: int = 64,
                       bleu_tokenize: str = "13a", long_source: str = "truncate", progress: bool | None = False,
                       what: str = "evaluation file") -> dict:
        """Decode the sources and score the outputs against the targets: BLEU and chrF (sacrebleu, on the
        detokenised text), ROUGE-1/2/L (F1), and the perplexity of the reference targets."""
        options = options or SearchOptions(beam=5)
        encoded, source_tokens, report = self._encode(pairs, long_source, what)  # once, for both uses
        outputs = self._decode(encoded, source_tokens, options, batch_size, False, progress)
        hypotheses, references = [o.text for o in outputs], [p.target for p in pairs]
        task = Seq2SeqTask(self.vocabulary, [], encoded, None, batch_size=1, eval_batch_size=batch_size, seed=0)
        figures = task.summarize(task.evaluate(self.model, task.valid_data, self.device))
        unknown = sum(i == UNK for e in encoded for i in e.source)
        return {"pairs": len(pairs), "bleu": bleu(hypotheses, references, bleu_tokenize),
                "chrf": chrf(hypotheses, references), **rouge(hypotheses, references),
                "perplexity": figures["perplexity"], "loss": figures["loss"], "target_tokens": figures["tokens"],
                "unknown_source_tokens": unknown, "truncated_sources": report.truncated_sources,
                "beam": options.beam, "bleu_tokenize": bleu_tokenize, "hypotheses": hypotheses}

    def input_limit(self, max_input_length: int | None = None, long_input: str = "truncate") -> InputLimit:
        """The longest source this model reads (`seqlab.data.limits`): its --max-source-length (the
        transformer's positions; what the lm's window leaves), else DEFAULT_MAX_TOKENS, unless
        `max_input_length` says otherwise; longer sources keep their first tokens (with a warning) or
        are refused (long_input="reject", `--long-source reject`)."""
        model = self.config.model
        hard = {"transformer": model.max_positions, "lm": model.max_positions - 1 - self.vocabulary.max_target}
        return InputLimit.resolve(max_input_length, self.vocabulary.max_source or DEFAULT_MAX_TOKENS,
                                  hard.get(model.arch), f"this {model.arch} model", long_input, "head", "source")

    def generate_stream(self, path: str | Path = "-", input_format: str = "text", options: SearchOptions | None = None,
                        batch_size: int = 64, chunk_size: int = CHUNK_SIZE, attention: bool = False,
                        max_input_length: int | None = None, long_input: str = "truncate",
                        what: str = "input file") -> Iterator[list[tuple[Pair, Output]]]:
        """Decode the sources of a file (or standard input, "-") a chunk at a time: each chunk's
        (Pair, Output) in input order, as soon as it is decoded; memory does not grow with the input.

        input_format: text (a source per line) or tsv / jsonl (a file of pairs, its sources read from
        the run's --source-field). A chunk holds at most `chunk_size` sources, sorted by length into
        batches (from a pipe or a terminal the first chunk is one batch, then twice as many each time,
        and a chunk ends early when the input pauses: `seqlab.data.stream.chunked`)."""
        options = options or SearchOptions(beam=5)
        limit = self.input_limit(max_input_length, long_input)
        data = self.config.data
        with LineReader(path, what, limit.chars) as lines:
            if input_format == "text":
                pairs = aligned_pairs(lines, None, path, None, what)
            else:
                pairs = paired_reader(input_format, data.source_field, data.target_field, path, what,
                                      with_targets=False)(lines)
            for chunk in chunked(pairs, chunk_size, *interactive(lines, batch_size),
                                 chars=lambda p: len(p.source)):
                encoded, tokens = self._encode_within(chunk, limit, lines.place, LengthReport())
                yield list(zip(chunk, self._decode(encoded, tokens, options, batch_size, attention, False),
                               strict=True))
        limit.warn(place(what, path))

    def _encode_within(self, pairs: list[Pair], limit: InputLimit, where, report: LengthReport):
        """The pairs as ids, each source cut to the limit first (or refused; `where(line)` names its
        line), targets to the model's --max-target-length (counted in `report`); and the source tokens."""
        tokens = [limit.apply(t, where(p.line), p.line, line_cut=p.cut)
                  for t, p in zip(self.vocabulary.source_tokens([p.source for p in pairs]), pairs, strict=True)]
        vocabulary = copy.copy(self.vocabulary)
        vocabulary.max_source = limit.tokens
        return vocabulary.encode(pairs, "", "", "truncate", report, tokens), tokens

    def evaluate_files(self, source: str | Path, target: str | Path | None = None, fmt: str | None = None,
                       options: SearchOptions | None = None, batch_size: int = 64, bleu_tokenize: str = "13a",
                       long_source: str = "truncate", progress: bool | None = False, chunk_size: int = CHUNK_SIZE,
                       max_input_length: int | None = None, write_hypothesis=None,
                       keep_hypotheses: bool = True, on_predictions: Callable | None = None) -> dict:
        """`evaluate_pairs` on two aligned files, or on one file of pairs (target None; the training
        run's --format and fields unless `fmt` is given), read and decoded a chunk of pairs at a time.

        Memory does not grow with the files: BLEU and chrF are computed from sacrebleu's sentence
        statistics summed over the chunks, ROUGE from summed F1 (`seqlab.metrics.CorpusScores`), the
        perplexity from the summed loss and token count; no hypothesis or reference is kept, unless
        keep_hypotheses (the default, for the result's "hypotheses"). `write_hypothesis` is called with
        each output in order as it is decoded; `on_predictions(references, outputs)` with each chunk's
        texts, for figures per pair (`seqlab.harms.intervals`). The figures are those of the whole files (the
        perplexity to float rounding). A reference line is read up to the same number of characters
        as a source line (`seqlab.data.limits`)."""
        options = options or SearchOptions(beam=5)
        limit = self.input_limit(max_input_length, long_source)
        data, what = self.config.data, "evaluation file"
        scores, report = CorpusScores(bleu_tokenize), LengthReport()
        task = Seq2SeqTask(self.vocabulary, [], [], None, batch_size=1, eval_batch_size=batch_size, seed=0)
        totals: dict = {}
        unknown, hypotheses = 0, []
        with contextlib.ExitStack() as stack:
            if target is None:
                sources = stack.enter_context(LineReader(source, what, limit.chars, stdin=False))
                pairs = paired_reader(fmt or data.format, data.source_field, data.target_field, source, what)(sources)
            else:
                sources = stack.enter_context(LineReader(source, f"{what} source", limit.chars, stdin=False))
                targets = stack.enter_context(LineReader(target, f"{what} target", limit.chars, stdin=False))
                pairs = aligned_pairs(sources, targets, source, target, what)
            bar = stack.enter_context(tqdm(desc="decoding", unit="pair", leave=False,
                                           disable=True if progress is False else None))
            for chunk in chunked(pairs, chunk_size, chars=lambda p: len(p.source) + len(p.target)):
                encoded, tokens = self._encode_within(chunk, limit, sources.place, report)
                texts = [o.text for o in self._decode(encoded, tokens, options, batch_size, False, False)]
                scores.add(texts, [p.target for p in chunk])
                if on_predictions is not None:
                    on_predictions([p.target for p in chunk], texts)
                for key, value in task.evaluate(self.model, pair_batches(encoded, self.vocabulary, batch_size, None),
                                                self.device).items():
                    totals[key] = totals.get(key, 0) + value
                unknown += sum(i == UNK for e in encoded for i in e.source)
                for text in texts:
                    if write_hypothesis is not None:
                        write_hypothesis(text)
                hypotheses.extend(texts if keep_hypotheses else ())
                bar.update(len(chunk))
        limit.warn(place(what, source))
        for message in report.messages(place(what, source), limit.tokens, self.vocabulary.max_target):
            warnings.warn(message, stacklevel=2)
        figures = task.summarize(totals)
        return {"pairs": figures["pairs"], **scores.scores(), "perplexity": figures["perplexity"],
                "loss": figures["loss"], "target_tokens": figures["tokens"], "unknown_source_tokens": unknown,
                "truncated_sources": limit.cut, "beam": options.beam, "bleu_tokenize": bleu_tokenize,
                **({"hypotheses": hypotheses} if keep_hypotheses else {})}


def _show(token: str) -> str:
    """A token as a heat map label: byte-level BPE's space marker as '▁'."""
    return token.replace("Ġ", "▁").replace("Ċ", "\\n")


PIPELINE = Pipeline(
    name="seq2seq", title="a sequence-to-sequence model",
    summary="a sequence-to-sequence model (rnn, lstm, gru encoder-decoders with or without attention, "
            "transformer, or a decoder-only lm over source <sep> target) on aligned files or a file of pairs",
    config=Seq2SeqTrainConfig, groups=CONFIG_GROUPS, train_defaults=TRAIN_DEFAULTS,
    derived=("source_vocab_size", "target_vocab_size"), resolve=resolve_seq2seq_config, train=train_seq2seq,
    load=load_seq2seq, evaluate=TrainedSeq2Seq.evaluate_files,
    next_steps=("seqlab translate {output} FILE --beam 5", "seqlab evaluate {output} --src FILE --tgt FILE"))
