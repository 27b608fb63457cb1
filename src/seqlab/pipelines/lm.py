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
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm

from seqlab.config import check_fields, option
from seqlab.data import lm_stream
from seqlab.data.batching import StreamBatches, sliding_windows
from seqlab.data.readers import count_characters, default_corpus, encode_lines, read_lines, read_stream
from seqlab.data.tokenizers import TOKENIZERS, Tokenizer, make_tokenizer
from seqlab.data.vocab import EOS, UNK, Vocab
from seqlab.errors import SeqlabError, SeqlabWarning
from seqlab.fileio import atomic_write_json
from seqlab.models.lm import LMConfig, build_lm
from seqlab.pipelines.outputs import text_pieces
from seqlab.pipelines.run_files import FromRun, detokenize_lines, read_tokenizer_and_vocab
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
from seqlab.search import SamplingOptions, generate_ids
from seqlab.tasks.lm import LanguageModelingTask, evaluate_lm, summarize
from seqlab.training import distributed
from seqlab.training.trainer import TrainConfig, Trainer


@dataclass
class LMDataConfig:
    """Where the text comes from and how it becomes tokens (saved under "data")."""

    train: str = option("", "training text file (default: the bundled Tiny Shakespeare, first 90%)", file=True)
    valid: str = option("", "validation text file (default with the bundled corpus: its last 10%)", file=True)
    test: str = option("", "test text file, scored with the best weights at the end", file=True)
    tokenizer: str = option("char", "tokens: characters, whitespace words (PTB, wikitext) or BPE",
                            choices=tuple(TOKENIZERS))
    min_freq: int = option(1, "word / char: keep tokens seen at least this often in training; the rest become "
                              "<unk> (BPE keeps every piece of its model)", at_least=1)
    max_vocab: int = option(0, "word / char: keep at most this many tokens, specials included (0: no limit; "
                               "refused with BPE: use --bpe-vocab-size)", at_least=0)
    bpe_vocab_size: int = option(8000, "BPE: learn merges until the model has this many pieces (the 256 bytes "
                                       "included); the vocabulary is these pieces and the 5 specials", at_least=1)
    canary: str = option("", "plant random secrets in the training text (Carlini et al. 2019): a template with "
                            "one slot, {digits:N} or {letters:N}, e.g. 'my pin is {digits:6}'; its symbols are "
                            "written space-separated with word/BPE tokenizers; see `seqlab audit exposure`")
    canary_repeats: list[int] = option([], "with --canary: one secret per count, inserted that many times "
                                           "(default 1 4 16 64)", at_least=1)
    reverse: bool = option(False, "read every text right to left: the character order of the whole stream is "
                                  "reversed (last line first, each line backwards), for the backward LM of "
                                  "contextual string embeddings (Akbik et al. 2018); evaluation reverses its "
                                  "text the same way", when={"tokenizer": ("char",)})

    def __post_init__(self):
        check_fields(self)
        if self.canary_repeats and not self.canary:
            raise SeqlabError("--canary-repeats needs --canary (the template of the secrets to insert)")
        if self.canary:
            from seqlab.harms.canaries import DEFAULT_REPEATS, parse_template

            parse_template(self.canary)                    # a bad template is refused before any work
            self.canary_repeats = list(self.canary_repeats or DEFAULT_REPEATS)
        if self.train and not self.valid:
            raise SeqlabError("--train needs --valid (a held-out file for perplexity and early stopping)")
        if self.valid and not self.train:
            raise SeqlabError("--valid needs --train")
        if self.reverse and self.tokenizer != "char":
            raise SeqlabError(f"--reverse applies to --tokenizer char only, not {self.tokenizer}: leave it out")


def reverse_lines(lines: list[str]) -> list[str]:
    """The text read right to left: the last line first, each line's characters backwards, so that the
    stream `a b </s> c d </s>` becomes `d c </s> b a </s>` (the backward LM of Akbik et al. 2018, sec. 2.1)."""
    return [line[::-1] for line in reversed(lines)]


@dataclass
class LMTrainOptions(TrainConfig):
    """How to train a language model: the trainer's options and the two that only language models have
    (saved under "train")."""

    output: str = option("runs/lm", "run directory for the config, vocabulary, checkpoints and metrics")
    seq_len: int = option(35, "tokens per segment for truncated BPTT (rnn, lstm, gru, ffn); the "
                          "transformer trains on windows of its context", at_least=1)
    eval_stride: int = option(0, "transformer evaluation: sliding-window stride (default context / 2)", at_least=0)


@dataclass
class LMTrainConfig:
    """A language-model training run: data, model and training options."""

    data: LMDataConfig = field(default_factory=LMDataConfig)
    model: LMConfig = field(default_factory=LMConfig)
    train: LMTrainOptions = field(default_factory=LMTrainOptions)


CONFIG_GROUPS = {"data": LMDataConfig, "model": LMConfig, "train": LMTrainOptions}


def resolve_lm_config(config_file: str | Path | None = None, overrides: dict | None = None,
                         resume: bool = False) -> LMTrainConfig:
    """Defaults < the config file < overrides (the command line). With `resume`, the run's own
    config.json is the base and only options of the `train` group may change."""
    return resolve_run_config(LMTrainConfig, CONFIG_GROUPS, config_file, overrides, resume, read_run_config)


# ---------------------------------------------------------------------------- training

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
        (run_dir / "canaries.json").unlink(missing_ok=True)      # an overwritten run's secrets are not this one's
    if data.canary:
        from seqlab.harms.canaries import plant

        distributed.barrier()
        train_lines, planted = plant(run_dir, train_lines, data.canary, data.canary_repeats, config.train.seed,
                                     data.tokenizer, resume, write=distributed.world()[0] == 0)
        log(f"canaries: {len(planted['secrets'])} secrets of {data.canary!r} inserted "
            f"{'/'.join(str(s['repeats']) for s in planted['secrets'])} times into the training lines "
            f"({'read from' if resume else 'written to'} {run_dir / 'canaries.json'})")
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
        if data.canary:
            from seqlab.harms.canaries import with_alphabet

            vocab = with_alphabet(vocab, planted, data.tokenizer)
    train_ids = encode_lines(train_tokens, vocab)
    valid_ids, valid_characters = read_stream(valid_lines if data.reverse else data.valid or valid_lines,
                                              tokenizer, vocab, "validation file")
    test_ids, test_characters = (read_stream(_read_lines_as_read(data.test, data.reverse, "test file"), tokenizer,
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


def _read_lines_as_read(path, reverse: bool, what: str) -> list[str]:
    """A file's lines in the order the model reads them (reversed for a --reverse run)."""
    lines = read_lines(path, what)
    return reverse_lines(lines) if reverse else lines


def write_run_files(run_dir: Path, config: LMTrainConfig, tokenizer: Tokenizer, vocab: Vocab,
                    overwrite: bool = False) -> None:
    start_run(run_dir, "lm", config, overwrite)
    atomic_write_json(run_dir / "tokenizer.json", tokenizer.to_dict())
    atomic_write_json(run_dir / "vocab.json", vocab.to_dict())


def read_run_config(run_dir: str | Path) -> LMTrainConfig:
    return read_run_config_as(run_dir, "lm", LMTrainConfig, CONFIG_GROUPS)


# ---------------------------------------------------------------------------- a trained model

def load_lm(run_dir: str | Path, device: str = "cpu") -> TrainedLM:
    """A trained language model from its run directory (the best weights)."""
    run_dir = Path(run_dir)
    config = read_run_config(run_dir)
    tokenizer, vocab = read_tokenizer_and_vocab(run_dir)
    check_sizes(run_dir, config, {"vocab_size": ("vocab.json", len(vocab))})
    model, device = load_best(run_dir, build_lm(config.model), device)
    return TrainedLM(model, tokenizer, vocab, config, device).from_run(run_dir)


class TrainedLM(FromRun):
    """A loaded language model with its tokenizer and vocabulary."""

    def __init__(self, model, tokenizer: Tokenizer, vocab: Vocab, config: LMTrainConfig, device):
        self.model, self.tokenizer, self.vocab, self.config, self.device = model, tokenizer, vocab, config, device

    @property
    def unit(self) -> str:
        return self.tokenizer.unit

    @property
    def reverse(self) -> bool:
        """Whether the model was trained with --reverse (it reads text right to left)."""
        return self.config.data.reverse

    def lines(self, text: str) -> list[str]:
        """Text -> its lines (a final newline adds no line), in the order the model reads them: a --reverse
        model gets the last line first, each backwards."""
        lines = text.split("\n")
        if lines and lines[-1] == "" and len(lines) > 1:
            lines.pop()
        return reverse_lines(lines) if self.reverse else lines

    def tokenize(self, text: str) -> list[list[str]]:
        """Text -> the tokens of each line (a final newline adds no line)."""
        return self.tokenizer.tokenize_lines(self.lines(text))

    def encode(self, text: str) -> torch.Tensor:
        """Text -> the id stream the model is scored on (one `</s>` per line)."""
        return encode_lines(self.tokenize(text), self.vocab)

    def _batches(self, ids: torch.Tensor, batch_size: int, stride: int):
        context = self.model.context_length
        if context is None:
            return list(StreamBatches(ids, batch_size, self.config.train.seq_len, exact=True))
        return sliding_windows(ids, batch_size, context, stride or max(1, context // 2))

    def evaluate_ids(self, ids: torch.Tensor, batch_size: int = 10, stride: int = 0, progress=None,
                     characters: int | None = None) -> dict:
        """Tokens, loss (nats/token), bits per token, perplexity and bits per character of an id stream
        (one `</s>` per line). `characters` is the text's character count (`count_characters`); by
        default, that of the text the ids decode to (exact for text the tokenizer gives back unchanged,
        such as characters and BPE; an `<unk>` counts as its 5 letters)."""
        batches = self._batches(ids, batch_size, stride)
        if progress is not None:
            progress.reset(total=len(batches))
        stats = evaluate_lm(self.model, batches, self.model.context_length is None, self.device,
                            progress=progress)
        if characters is None:
            characters = len(self.detokenize(ids.tolist()))
        result = summarize(stats["loss_sum"], stats["tokens"], characters)
        result["unknown"] = int((ids == UNK).sum())
        result["unit"] = self.unit
        return result

    def evaluate_file(self, path: str | Path, batch_size: int = 10, stride: int = 0,
                      progress: bool | None = False) -> dict:
        """Tokens, loss (nats/token), bits per token, perplexity and bits per character of a text file;
        `progress` None or True: a bar over the batches (None: when stderr is a terminal), shown once the
        file has been read through (so a bad file is reported on a clean line).

        The file is read twice and never held whole (`seqlab.data.lm_stream`): once to count its
        tokens, then as the batches need it; the batches, and so the figures, are those
        `evaluate_ids` gives on the file's whole id stream (the recurrent state carried along each
        row of the stream; the transformer's overlapping windows)."""
        what = "evaluation file"
        if self.reverse:      # read whole and reversed: the streaming reader reads left to right only
            lines = _read_lines_as_read(path, True, what)
            ids, characters = read_stream(lines, self.tokenizer, self.vocab, what)
            bar = tqdm(desc="scoring", unit="batch", leave=False, disable=True if progress is False else None)
            with bar:
                return self.evaluate_ids(ids, batch_size, stride, progress=bar, characters=characters)
        found = lm_stream.survey(path, what, self.tokenizer, self.vocab)
        context = self.model.context_length
        if context is None:
            seq_len = self.config.train.seq_len
            batches = lm_stream.stream_batches(found, self.tokenizer, self.vocab, batch_size, seq_len)
            count = lm_stream.stream_batch_count(found, batch_size, seq_len)
        else:
            stride = stride or max(1, context // 2)
            batches = lm_stream.window_batches(found, self.tokenizer, self.vocab, batch_size, context, stride)
            count = lm_stream.window_batch_count(found, batch_size, context, stride)
        with tqdm(total=count, desc="scoring", unit="batch", leave=False,
                  disable=True if progress is False else None) as bar:
            stats = evaluate_lm(self.model, batches, context is None, self.device, progress=bar)
        result = summarize(stats["loss_sum"], stats["tokens"], found.characters)
        result["unknown"] = found.unknown
        result["unit"] = self.unit
        return result

    def perplexity(self, text: str) -> float:
        """exp of the mean negative log-likelihood per token of `text` (SLP 9.1)."""
        return self.evaluate_text(text)["perplexity"]

    def evaluate_text(self, text: str) -> dict:
        """`evaluate_file`'s figures for a string (its lines as a file's lines)."""
        lines = self.lines(text)
        return self.evaluate_ids(encode_lines(self.tokenizer.tokenize_lines(lines), self.vocab), batch_size=1,
                                 characters=count_characters(lines))

    @torch.no_grad()
    def score(self, text: str) -> list[tuple[str, float]]:
        """(token, natural-log probability) for every token of `text`, `</s>` at each line end.

        Tokens are the text's own; one the vocabulary lacks is scored as `<unk>`."""
        token_lines = self.tokenize(text)
        ids = encode_lines(token_lines, self.vocab)
        logprobs = []
        state = None
        for batch in self._batches(ids, 1, 0):
            batch = batch.to(self.device)
            if self.model.context_length is None and state is None:
                state = self.model.init_state(1, self.device)
            logits, new_state = self.model(batch.inputs, state if self.model.context_length is None else None)
            state = new_state if self.model.context_length is None else None
            lp = torch.log_softmax(logits.float(), dim=-1).gather(-1, batch.targets.unsqueeze(-1)).squeeze(-1)
            logprobs.extend(lp[batch.targets != 0].tolist())
        tokens = [t for line in token_lines for t in [*line, "</s>"]]
        return list(zip(tokens, logprobs, strict=True))

    def prompt_ids(self, prompt: str, truncate: bool = False) -> list[int]:
        """`</s>` (a line start) + the prompt's tokens; unknown tokens become <unk> with a warning."""
        lines = prompt.split("\n")
        tokens: list[str] = []
        for k, line in enumerate(lines):
            tokens.extend(self.tokenizer.tokenize(line))
            if k < len(lines) - 1:
                tokens.append("</s>")
        unknown = sorted({t for t in tokens if t not in self.vocab})
        if unknown:
            shown = ", ".join(repr(t) for t in unknown[:5]) + (" ..." if len(unknown) > 5 else "")
            warnings.warn(f"{len(unknown)} prompt token type(s) are not in the vocabulary and are read as "
                          f"<unk>: {shown}", SeqlabWarning, stacklevel=2)
        ids = [EOS] + self.vocab.encode(tokens)
        window = self.model.context_length
        if truncate and window is not None and len(ids) > window:
            ids = ids[-window:]
        return ids

    def detokenize(self, ids: list[int]) -> str:
        """Ids -> text, `</s>` as a line break."""
        return detokenize_lines(self.tokenizer, self.vocab, ids)

    def stream(self, prompt: str, truncate_prompt: bool = False, **options) -> Iterator[str]:
        """Yield the continuation of `prompt` piece by piece as it is generated (`SamplingOptions` lists the
        options). Generation goes on past line ends (`</s>`, written as line breaks) until `max_tokens`;
        `stop_at_eos=True` stops at the first one. With `beam` > 1, beam search finds the continuation of
        highest (length-normalised) log probability, yielded whole once the search is over. A --reverse
        model is refused (at the first piece, as bad options are)."""
        if self.reverse:
            raise SeqlabError("this language model was trained with --reverse (it reads right to left): "
                              "generation from it is not supported; generate with a left-to-right model")
        sampling = SamplingOptions(**options)
        context = self.prompt_ids(prompt, truncate_prompt)
        yield from text_pieces(generate_ids(self.model, context, sampling, self.device), context[1:], self.detokenize,
                               sampling.stop_at_eos, sampling.beam > 1)

    def generate(self, prompt: str = "", **options) -> str:
        """The prompt's continuation as one string (see `SamplingOptions` for the options: `max_tokens`,
        `greedy`, `temperature`, `top_k`, `top_p`, `seed`, `stop_at_eos`, `beam`, `length_penalty`)."""
        return "".join(self.stream(prompt, **options))


PIPELINE = Pipeline(
    name="lm", title="a language model", summary="a language model (ffn, rnn, lstm, gru, transformer)",
    config=LMTrainConfig, groups=CONFIG_GROUPS, train_defaults={}, derived=("vocab_size",),
    resolve=resolve_lm_config, train=train_lm, load=load_lm, evaluate=TrainedLM.evaluate_file,
    next_steps=("seqlab generate {output} --prompt '...'", "seqlab evaluate {output} FILE"))
