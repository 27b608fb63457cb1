"""A trained language model's API (`seqlab.load(run)` of an LM run): `TrainedLM` scores text (perplexity,
bits per character, each token's log probability) and continues prompts (greedy, sampled, beam search). It
offers the audits' capability (`seqlab.contract.Auditable`: `seqlab.harms` calls only those methods)."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

from seqlab.data.batching import StreamBatches, sliding_windows
from seqlab.data.readers import count_characters, encode_lines, read_lines, read_stream
from seqlab.data.tokenizers import Tokenizer
from seqlab.data.vocab import EOS, UNK, Vocab
from seqlab.decoding.core import checkpoint, text_pieces
from seqlab.decoding.search import SamplingOptions, decode_batch, generate_ids, sample_ids
from seqlab.errors import SeqlabError, SeqlabWarning
from seqlab.families.lm import FAMILY
from seqlab.families.lm import stream as lm_stream
from seqlab.families.lm.config import LMTrainConfig
from seqlab.families.lm.task import evaluate_lm, summarize
from seqlab.families.lm.vocab import detokenize_lines, reverse_lines, unknown_tokens_note
from seqlab.progress import Reading, progress_bar
from seqlab.runs.files import FromRun


class TrainedLM(FromRun):
    """A loaded language model with its tokenizer and vocabulary."""

    family = FAMILY

    def __init__(self, model, tokenizer: Tokenizer, vocab: Vocab, config: LMTrainConfig, device):
        self.model, self.tokenizer, self.vocab, self.config, self.device = model, tokenizer, vocab, config, device
        self.decoder = None                  # `compile_decoding`'s compiled step, which sampling then runs on

    def compile_decoding(self, say: Callable[[str], None] | None = None) -> TrainedLM:
        """Compile this transformer's decoding step ahead of time (AOTInductor: tens of seconds, once) for
        `generate` and `stream` to sample and decode greedily on (beam search keeps the model): ~1.4-1.6x the
        tokens/s of the eager step at batch 1 on one CPU thread, the same tokens for the same seed except where
        two tokens tie within float rounding (`seqlab.models.compiled_decoding`). `say` hears how it goes.
        Returns self."""
        compiled = getattr(self.model, "compiled_decoder", None)
        if compiled is None:
            raise SeqlabError(f"--compile: only a transformer's decoding step compiles; this run is "
                              f"{self.config.model.arch!r}: generate without --compile")
        if torch.device(self.device).type != "cpu":
            raise SeqlabError(f"--compile: the compiled decoding step runs on the CPU, not {self.device}: "
                              "generate with --device cpu, or without --compile")
        began = time.perf_counter()
        if say:
            say("compiling the decoding step ahead of time (AOTInductor; tens of seconds) ...")
        self.decoder = compiled()
        if say:
            say(f"compiled in {time.perf_counter() - began:.0f} s")
        return self

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
                      progress: bool | None = False, text_column: str | None = None) -> dict:
        """Tokens, loss (nats/token), bits per token, perplexity and bits per character of a text file;
        `progress` None or True: a line before the file is read through and one when it has been (which
        can take minutes), then a bar over the batches (`seqlab.progress`: a terminal's, or a log's lines).
        A .jsonl (.parquet) file is read as training reads one: the text of each record's field (column)
        `text_column`, by default the run's --text-column; a plain text file takes no `text_column`.

        A text file is read twice and never held whole (`seqlab.families.lm.stream`): once to count its
        tokens, then as the batches need it; the batches, and so the figures, are those
        `evaluate_ids` gives on the file's whole id stream (the recurrent state carried along each
        row of the stream; the transformer's overlapping windows). Records are read whole."""
        what = "evaluation file"
        reading = Reading([path], show=progress is not False)
        records = text_source(path, what, text_column or self.config.data.text_column)
        if records is None and text_column is not None:
            raise SeqlabError(f"--text-column {text_column}: {path} is plain text (one text per line); the option "
                              "names the text field of a .jsonl file or the text column of a .parquet file")
        if self.reverse or records is not None:   # read whole: the streaming reader reads text files left to right
            lines = records_as_read(records, self.reverse) if records is not None else lines_as_read(path, True, what)
            ids, characters = read_stream(lines, self.tokenizer, self.vocab, what)
            reading.done(f"{len(ids):,} tokens")
            bar = progress_bar(None, progress, desc="scoring", unit="batch", leave=False)
            with bar:
                return self.evaluate_ids(ids, batch_size, stride, progress=bar, characters=characters)
        found = lm_stream.survey(path, what, self.tokenizer, self.vocab)
        reading.done(f"{found.tokens:,} tokens")
        context = self.model.context_length
        if context is None:
            seq_len = self.config.train.seq_len
            batches = lm_stream.stream_batches(found, self.tokenizer, self.vocab, batch_size, seq_len)
            count = lm_stream.stream_batch_count(found, batch_size, seq_len)
        else:
            stride = stride or max(1, context // 2)
            batches = lm_stream.window_batches(found, self.tokenizer, self.vocab, batch_size, context, stride)
            count = lm_stream.window_batch_count(found, batch_size, context, stride)
        with progress_bar(None, progress, total=count, desc="scoring", unit="batch", leave=False) as bar:
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

        Tokens are the text's own; one the vocabulary lacks is scored as `<unk>`. A server's scheduler may run other
        work, or stop this one, between two windows (`core.checkpoint`)."""
        token_lines = self.tokenize(text)
        logprobs = []
        for log_probs, targets in self.distributions(encode_lines(token_lines, self.vocab)):
            logprobs.extend(log_probs.gather(-1, targets[:, None])[:, 0].tolist())
        tokens = [t for line in token_lines for t in [*line, "</s>"]]
        return list(zip(tokens, logprobs, strict=True))

    @torch.no_grad()
    def distributions(self, ids: torch.Tensor) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """The model's distribution over the vocabulary before each token of an id stream (one `</s>` per line),
        read from a line start as `score` reads it (the state carried along the stream; the transformer's
        overlapping windows): per window, the natural-log probabilities (n, V) of its n scored positions and
        their targets (n,), in the stream's order. A checkpoint between two windows (`core.checkpoint`)."""
        state = None
        for batch in self._batches(ids, 1, 0):
            checkpoint()
            batch = batch.to(self.device)
            if self.model.context_length is None and state is None:
                state = self.model.init_state(1, self.device)
            logits, new_state = self.model(batch.inputs, state if self.model.context_length is None else None)
            state = new_state if self.model.context_length is None else None
            scored = batch.targets != 0                                                  # (1, T): not padding
            yield torch.log_softmax(logits[scored].float(), dim=-1), batch.targets[scored]   # (n, V), (n,)

    def prompt_ids(self, prompt: str, truncate: bool = False, warn: Callable[[str], None] | None = None) -> list[int]:
        """`</s>` (a line start) + the prompt's tokens; unknown tokens become <unk> with a warning, given to
        `warn` (a server's: for its client, not its log) or by default `warnings.warn` (a SeqlabWarning)."""
        lines = prompt.split("\n")
        tokens: list[str] = []
        for k, line in enumerate(lines):
            tokens.extend(self.tokenizer.tokenize(line))
            if k < len(lines) - 1:
                tokens.append("</s>")
        note = unknown_tokens_note(tokens, self.vocab)
        if note and warn is not None:
            warn(note)
        elif note:
            warnings.warn(note, SeqlabWarning, stacklevel=2)
        ids = [EOS] + self.vocab.encode(tokens)
        window = self.model.context_length
        if truncate and window is not None and len(ids) > window:
            ids = ids[-window:]
        return ids

    def detokenize(self, ids: list[int]) -> str:
        """Ids -> text, `</s>` as a line break."""
        return detokenize_lines(self.tokenizer, self.vocab, ids)

    def check_generates(self) -> None:
        """Refuse generation from a --reverse model (it reads right to left)."""
        if self.reverse:
            raise SeqlabError("this language model was trained with --reverse (it reads right to left): "
                              "generation from it is not supported; generate with a left-to-right model")

    def stream(self, prompt: str, truncate_prompt: bool = False, warn: Callable[[str], None] | None = None,
               **options) -> Iterator[str]:
        """Yield the continuation of `prompt` piece by piece as it is generated (`SamplingOptions` lists the
        options). Generation goes on past line ends (`</s>`, written as line breaks) until `max_tokens`;
        `stop_at_eos=True` stops at the first one. With `beam` > 1, beam search finds the continuation of
        highest (length-normalised) log probability, yielded whole once the search is over. A --reverse
        model is refused (at the first piece, as bad options are). `warn` takes what reading the prompt warns
        of (`prompt_ids`)."""
        self.check_generates()
        sampling = SamplingOptions(**options)
        context = self.prompt_ids(prompt, truncate_prompt, warn)
        model = self.decoder if self.decoder is not None and sampling.beam == 1 else self.model
        ids = generate_ids(model, context, sampling, self.device)
        return (yield from text_pieces(ids, context[1:], self.detokenize, sampling.stop_at_eos, sampling.beam > 1))

    def complete(self, prompts: list[str], options: list[dict | SamplingOptions] | dict | SamplingOptions,
                 top_logprobs: int = 0) -> list:
        """The continuations of many prompts decoded in one batch, each what `generate` gives it alone, as
        `Completion`s (text, ids, tokens, log probabilities, finish reason, warnings): see
        `seqlab.families.lm.completion`. `options`: one `SamplingOptions` (or dict of them) per prompt, or one
        for all."""
        from seqlab.families.lm.completion import complete

        def made(o):
            return o if isinstance(o, SamplingOptions) else SamplingOptions(**o)

        options = [made(o) for o in options] if isinstance(options, list) else made(options)
        return complete(self, prompts, options, top_logprobs)

    def score_texts(self, texts: list[str]) -> list:
        """`score` and `evaluate_text` of many texts in one batch (`seqlab.families.lm.completion.score_texts`)."""
        from seqlab.families.lm.completion import score_texts

        return score_texts(self, texts)

    def generate(self, prompt: str = "", **options) -> str:
        """The prompt's continuation as one string (see `SamplingOptions` for the options: `max_tokens`,
        `greedy`, `temperature`, `top_k`, `top_p`, `seed`, `stop_at_eos`, `beam`, `length_penalty`)."""
        return "".join(self.stream(prompt, **options))

    # ------------------------------------------------------------ the audits' capability (`contract.Auditable`)

    @property
    def context_length(self) -> int | None:
        return self.model.context_length

    @property
    def vocabulary_size(self) -> int:
        return len(self.vocab)

    @property
    def carries_state(self) -> bool:
        from seqlab.models.transformer_lm import TransformerLM

        return not isinstance(self.model, TransformerLM)

    @property
    def state_batch_dim(self) -> int:
        return self.model.state_batch_dim

    def tokenize_lines(self, lines: list[str]) -> list[list[str]]:
        """Each line's tokens as the tokenizer reads a training line (no reversal, no </s>)."""
        return self.tokenizer.tokenize_lines(lines)

    def token_ids(self, tokens: list[str]) -> list[int]:
        return self.vocab.encode(tokens)

    def sample(self, prompt: str, n: int, options: SamplingOptions) -> list[str]:
        """`n` continuations of `prompt` sampled as one batch (`seqlab.decoding.search.sample_ids`: one generator
        seeded with `options.seed`), each made text as `generate` makes it."""
        context = self.prompt_ids(prompt)
        return ["".join(text_pieces(ids, context[1:], self.detokenize, options.stop_at_eos, whole=False))
                for ids in sample_ids(self.model, context, options, n, self.device)]

    def continue_ids(self, prompts: torch.Tensor, steps: int, top_k: int = 0,
                     generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """`seqlab.decoding.search.decode_batch` of the model."""
        return decode_batch(self.model, prompts, steps, top_k, generator)

    def initial_state(self, batch: int):
        return self.model.init_state(batch, self.device)

    def read_ids(self, ids: torch.Tensor, state=None):
        """The model's logits (B, T, V) and state after `ids` (B, T), in evaluation mode."""
        self.model.eval()
        return self.model(ids) if state is None else self.model(ids, state)

    @torch.no_grad()
    def next_log_probs(self, sequences: torch.Tensor) -> torch.Tensor:
        """Transformer: log P(next token | each sequence) (B, V), reading only the last position's output."""
        model = self.model.eval()
        sequences = sequences[:, -model.context_length:]
        positions = torch.arange(sequences.size(1), device=sequences.device)
        h = model.hidden(sequences, positions)[:, -1]                       # (B, D)
        return torch.log_softmax(model.output(h).float(), dim=-1)          # (B, V)


def text_source(path, what: str, column: str):
    """A .jsonl or .parquet file (.gz too) as the `seqlab.data.prepare_text.Source` training reads it, its
    texts in field (column) `column`; None for a plain text file."""
    from seqlab.data.prepare_text import Source

    source = Source(str(path), what, column=column)
    return None if source.fmt == "text" else source


def records_as_read(source, reverse: bool) -> list[str]:
    """The lines of the texts of a .jsonl or .parquet `Source`, as training reads them (a text with line breaks
    is that many lines; reversed for a --reverse run)."""
    from seqlab.data.prepare_text import block_lines

    lines = [line for block in source.blocks() for line in block_lines(*block)]
    return reverse_lines(lines) if reverse else lines


def lines_as_read(path, reverse: bool, what: str) -> list[str]:
    """A file's lines in the order the model reads them (reversed for a --reverse run)."""
    lines = read_lines(path, what)
    return reverse_lines(lines) if reverse else lines
