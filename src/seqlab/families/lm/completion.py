"""Completions: a language model's continuations of many prompts at once, each with its tokens' log probabilities
and the reason it ended, as the HTTP API answers them (`/v1/generate`, `/v1/completions`).

    completions = complete(lm, ["ROMEO:", "JULIET: O"], [SamplingOptions(max_tokens=8, greedy=True)] * 2)

`complete` decodes prompts of different lengths in ONE batch, and each row is what the prompt alone gives
(`TrainedLM.generate` with the same options: the same ids, greedy, beam or sampled with a seed):

- each prompt is read alone (`model.start`, one row), and the started states are merged into one batch
  (`model.merge_states`: an RNN's states side by side; a transformer's KV caches right-aligned, each row at its
  own positions, with a key padding mask over the empty slots);
- every step runs the batch once (the decoding core's one loop, `core.sampling_steps`); each row's token is then
  chosen with its own options (`seqlab.decoding.sampling.RowDraws`): rows that share the processors (temperature,
  top-k, top-p) are processed together, and a row with a seed draws from its own generator, seeded as `generate`
  seeds it, so its draws are the ones it would make alone;
- a row leaves the batch when it has its `max_tokens` (or its </s>, with `stop_at_eos`);
- beam searches that share the beam, the length penalty and stop_at_eos run as one search over their prompts
  (`core.beam_steps`, the search of one prompt's `lm_beam`);
- transformer rows whose prompt and continuation would slide past the context are decoded alone.

The log probabilities have one definition, the model's own distribution over every id (natural log), that of
`score_texts` (`/v1/score`): a prompt's (`prompt_logprobs`, for echo) are its scores, and a generated token's is
its probability before the search blocks the ids it never generates (<pad>, <s>, <sep>, <unk>) or any sampling
processor applies; the `top_logprobs` list the most likely ids the search could choose. `complete_stream` yields
one prompt's continuation piece by piece, and `spell` writes tokens as the text a client reads (OpenAI's
`logprobs.tokens`).
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from seqlab.data.vocab import EOS, SPECIALS
from seqlab.decoding import core
from seqlab.decoding.core import best_first, checkpoint
from seqlab.decoding.options import SamplingOptions
from seqlab.decoding.sampling import RowDraws
from seqlab.decoding.search import ModelDecoder, TorchOps, blocked_tokens, check_prompt, lm_beam_search, reading, seeded
from seqlab.decoding.search import beam_steps as search_beam_steps
from seqlab.errors import SeqlabError

LINE_END = SPECIALS[EOS]        # </s>: how the vocabulary spells a line end


@dataclass
class Completion:
    """One prompt's continuation: the ids the model read (`prompt_ids`, with the leading </s>), the generated
    `ids`, their `text` and `tokens`, each id's natural-log probability under the model (`logprobs`), the
    `top_logprobs` most likely tokens at each step (when asked), why it ended (`finish_reason`: "stop" at a
    </s> with stop_at_eos, else "length") and what the prompt's reading warned of (unknown tokens)."""

    prompt_ids: list[int]
    ids: list[int]
    text: str
    tokens: list[str]
    logprobs: list[float]
    top_logprobs: list[dict[str, float]] | None = None
    finish_reason: str = "length"
    warnings: list[str] = field(default_factory=list)


@dataclass
class Row:
    """One prompt in a batch: its ids, options and generator, and what it has generated so far."""

    prompt_ids: list[int]
    options: SamplingOptions
    warnings: list[str]
    generator: torch.Generator | None = None
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top: list[dict[str, float]] = field(default_factory=list)
    stopped: bool = False

    @property
    def done(self) -> bool:
        return self.stopped or len(self.ids) >= self.options.max_tokens


def read_prompt(trained, prompt: str) -> tuple[list[int], list[str]]:
    """The prompt's ids (`TrainedLM.prompt_ids`) and the warnings its reading gave, as text for the caller
    (not printed: a server tells its client, not its log)."""
    trained.check_generates()
    said: list[str] = []
    return trained.prompt_ids(prompt, warn=said.append), said


@torch.inference_mode()
def complete(trained, prompts: list[str], options: list[SamplingOptions] | SamplingOptions,
             top_logprobs: int = 0) -> list[Completion]:
    """The continuation of each prompt (its own `SamplingOptions`, or one for all), decoded in one batch; each
    as `trained.generate(prompt, **options)` gives it alone, with its log probabilities and finish reason.
    `top_logprobs` > 0 also gives the k most likely tokens at each step."""
    if isinstance(options, SamplingOptions):
        options = [options] * len(prompts)
    if len(options) != len(prompts):
        raise SeqlabError(f"{len(prompts)} prompts and {len(options)} options: give one per prompt")
    model = trained.model
    model.eval()
    rows = []
    for part in core.slices([len(p) for p in prompts], (id(model), "prompts")):   # on a server: a few at a time
        for prompt, option in zip(prompts[part.start:part.stop], options[part.start:part.stop], strict=True):
            ids, said = read_prompt(trained, prompt)
            check_prompt(model, ids)
            rows.append(Row(ids, option, said))
    batched = {id(r) for r in rows if r.options.max_tokens > 0 and model.fits(len(r.prompt_ids), r.options.max_tokens)}
    together = [r for r in rows if r.options.beam == 1 and id(r) in batched]
    beams: dict[tuple, list[Row]] = defaultdict(list)         # beam searches that can run side by side
    for row in rows:
        o = row.options
        if o.beam > 1 and id(row) in batched:
            beams[(o.beam, o.length_penalty, o.stop_at_eos)].append(row)
        elif o.beam > 1:
            beam_row(trained, row)
        elif id(row) not in batched and o.max_tokens > 0:
            decode_rows(trained, [row], top_logprobs)
    if together:
        decode_rows(trained, together, top_logprobs)
    for group in beams.values():
        beam_rows(trained, group)
    return [finished(trained, row, top_logprobs) for row in rows]


def decode_rows(trained, rows: list[Row], top_logprobs: int) -> None:
    """Greedy or sampled decoding of `rows` as one batch until each has its tokens (`Row.done`)."""
    for _ in decode_steps(trained, rows, top_logprobs):
        pass


def decode_steps(trained, rows: list[Row], top_logprobs: int) -> Iterator[None]:
    """`decode_rows` one step per `next()` (the rows grow by one token each, until done)."""
    model, device = trained.model, trained.device
    room = max(row.options.max_tokens for row in rows)
    with reading():
        state = model.start_rows([torch.tensor(row.prompt_ids, device=device) for row in rows], room)  # (B rows)
    tokens = torch.tensor([row.prompt_ids[-1] for row in rows], device=device)                 # (B,)
    for row in rows:
        row.generator = None if row.options.greedy else seeded(row.options.seed, device)
    steps = core.sampling_steps(ModelDecoder(model), TorchOps(device), state, tokens, blocked_tokens(model),
                                RowDraws([row.options for row in rows], [row.generator for row in rows]))
    live = list(range(len(rows)))                            # the rows still in the batch, by index into `rows`
    keep = None
    while live:
        chosen, logits, blocked, _ = steps.send(keep)                                         # (n,), (n, V)
        log_probs = torch.log_softmax(logits.float(), dim=-1)             # (n, V): the model's, as `score_texts`
        picked = log_probs.gather(1, chosen[:, None])[:, 0].tolist()
        choosable = log_probs.masked_fill(blocked == float("-inf"), float("-inf"))           # (n, V)
        tops = choosable.topk(min(top_logprobs, choosable.size(-1)), dim=-1) if top_logprobs else None
        keep = []
        for j, (i, token) in enumerate(zip(live, chosen.tolist(), strict=True)):
            row = rows[i]
            row.ids.append(token)
            row.logprobs.append(picked[j])
            if tops is not None:
                row.top.append({trained.vocab.tokens[t]: v for t, v in
                                zip(tops.indices[j].tolist(), tops.values[j].tolist(), strict=True)
                                if v > float("-inf")})
            row.stopped = row.options.stop_at_eos and token == EOS
            if not row.done:
                keep.append(j)
        yield
        if len(keep) < len(live):                            # finished rows leave the batch
            if not keep:
                return
            live = [live[j] for j in keep]
        else:
            keep = None


def beam_rows(trained, rows: list[Row]) -> None:
    """The beam searches of prompts that share the beam, the length penalty and stop_at_eos, run as one search over
    B sentences (`core.beam_steps`, the search `lm_beam` runs on one prompt): each row's best continuation, as
    `beam_row` finds it alone, and its ids' log probabilities."""
    if len(rows) == 1:
        return beam_row(trained, rows[0])
    model, device = trained.model, trained.device
    o = rows[0].options
    with reading():
        state = model.start_rows([torch.tensor(row.prompt_ids, device=device) for row in rows],
                                 max(row.options.max_tokens for row in rows))
    last = torch.tensor([row.prompt_ids[-1] for row in rows], device=device)                  # (B,)
    limit = torch.tensor([row.options.max_tokens for row in rows])                            # (B,)
    found = search_beam_steps(model, state, last, limit, o.beam, o.length_penalty, ends_at_eos=o.stop_at_eos)
    for row, hypotheses in zip(rows, found, strict=True):
        (best,) = best_first(hypotheses, 1)
        row.ids = list(core.best_continuation(best))
        row.stopped = bool(best.finished)
        row.logprobs = teacher_forced(trained, row.prompt_ids, row.ids)


def beam_row(trained, row: Row) -> None:
    """A beam search's best continuation of one prompt (`generate_ids`' search), and its ids' log probabilities
    under the model, read back one step each."""
    (best,) = lm_beam_search(trained.model, row.prompt_ids, row.options, trained.device)
    row.ids = list(core.best_continuation(best))
    row.stopped = bool(best.finished)
    row.logprobs = teacher_forced(trained, row.prompt_ids, row.ids)


def teacher_forced(trained, prompt_ids: list[int], ids: list[int]) -> list[float]:
    """The log probability of each of `ids` after the prompt and the ids before it (the model's distribution)."""
    model, device = trained.model, trained.device
    if not ids:
        return []
    state = model.start(torch.tensor([prompt_ids], device=device))
    out = []
    fed = torch.tensor([prompt_ids[-1]], device=device)
    for token in ids:
        core.checkpoint()
        logits, state, _ = model.step(fed, state)
        out.append(float(torch.log_softmax(logits.float(), dim=-1)[0, token]))
        fed = torch.tensor([token], device=device)
    return out


def finished(trained, row: Row, top_logprobs: int) -> Completion:
    """A decoded row as a `Completion`: its text as `generate` writes it (the </s> that ended it with stop_at_eos
    not written), its tokens as the vocabulary spells them."""
    text = "".join(core.text_pieces(row.ids, row.prompt_ids[1:], trained.detokenize, row.options.stop_at_eos,
                                    whole=row.options.beam > 1))
    return Completion(row.prompt_ids, row.ids, text, trained.vocab.decode(row.ids), row.logprobs,
                      row.top if top_logprobs else None, "stop" if row.stopped else "length", row.warnings)


@torch.inference_mode()
def complete_stream(trained, prompt: str, options: SamplingOptions, top_logprobs: int = 0) -> Iterator[Completion]:
    """One prompt's continuation as it is generated: a `Completion` per new piece of text (its ids, text and log
    probabilities; a byte-level BPE id that ends half a character waits for the rest, and a half character the
    continuation ends in is never written, as `complete` leaves it out), the last one carrying the finish
    reason. Beam search yields its continuation whole, once the search is over."""
    ids, said = read_prompt(trained, prompt)
    check_prompt(trained.model, ids)
    row = Row(ids, options, said)
    if options.beam > 1 or options.max_tokens == 0:
        if options.beam > 1:
            beam_row(trained, row)
        yield finished(trained, row, top_logprobs)
        return
    trained.model.eval()
    body = ids[1:]
    shown = len(trained.detokenize(body)) if body else 0
    sent = 0                                                  # ids already sent in a piece
    for _ in decode_steps(trained, [row], top_logprobs):
        shown_ids = row.ids[:-1] if row.stopped else row.ids  # the </s> that stops is not written
        text = trained.detokenize(body + shown_ids)
        half = text.endswith("\ufffd")                       # half a UTF-8 character: held for its next bytes
        if half and not row.done:
            continue
        piece = "" if half else text[shown:]                  # at the end, never written (`core.text_pieces`)
        if not piece and not row.done:
            continue
        shown = shown if half else len(text)
        yield piece_of(trained, row, sent, piece, top_logprobs, last=row.done)
        sent = len(row.ids)


def piece_of(trained, row: Row, start: int, text: str, top_logprobs: int, last: bool) -> Completion:
    ids = row.ids[start:]
    return Completion(row.prompt_ids, ids, text, trained.vocab.decode(ids), row.logprobs[start:],
                      row.top[start:] if top_logprobs else None,
                      ("stop" if row.stopped else "length") if last else "", row.warnings if start == 0 else [])


@torch.inference_mode()
def prompt_logprobs(trained, prompt: str) -> tuple[list[str], list[float]]:
    """The prompt's tokens as the text spells them (after the leading </s>; an unknown one is scored as <unk>) and
    each one's log probability given the ones before it (the first one's given the line start </s>), for echoing
    a prompt with its log probabilities: the prompt's scores (`score_texts`, /v1/score's), without the </s> that
    the score puts at the end of the prompt's last line (a prompt's last line has no end)."""
    ids, _ = read_prompt(trained, prompt)
    check_prompt(trained.model, ids)
    (scored,) = score_texts(trained, [prompt])
    cut = len(scored.tokens) - (0 if prompt.endswith("\n") else 1)
    return scored.tokens[:cut], scored.logprobs[:cut]


def spell(trained, tokens: list[str], before: list[str],
          top: list[dict[str, float]] | None = None) -> tuple[list[str], list[int], list[dict[str, float]]]:
    """`tokens` (as the vocabulary spells them, after the tokens `before`) as the text a client reads, OpenAI's
    `logprobs.tokens`: each token's text is what it adds to the text (a word's space before it, "\\n" for </s>, a
    byte-level BPE piece's bytes decoded, without the space a line's first piece reads), so that the tokens
    joined are the text; a token that is part of a character only (half a UTF-8 character, or one that completes
    it) is its bytes, `bytes:\\xe6\\x9d` (OpenAI's convention). Also where each token's text begins in the text
    the tokens add (a part of a character: where that character begins; a byte that is no part of a character
    reads as "\\ufffd"), and `top` (each step's most likely tokens) spelt the same way."""
    tokenizer = trained.tokenizer
    ends = [i for i, token in enumerate(before) if token == LINE_END]
    line = list(before[ends[-1] + 1:] if ends else before)         # the tokens of the line the tokens go on
    written = tokenizer.detokenize(line)
    start = -len(written)                                           # where the text after `before` begins
    texts, offsets, tops = [], [], []
    for k, token in enumerate(tokens):
        checkpoint()                                    # each token detokenizes its line: a server may yield
        # a token whose first byte continues the character the line ends in half of begins where it begins
        continues = written.endswith("\ufffd") and token != LINE_END and \
            0x80 <= (tokenizer.token_bytes(token) or b"\0")[0] < 0xC0
        offsets.append(start + len(written) - continues)
        texts.append(token_text(tokenizer, line, written, token))
        if top is not None:
            best: dict[str, float] = {}
            for other, logprob in top[k].items():                   # most likely first: the first of a spelling
                best.setdefault(token_text(tokenizer, line, written, other), logprob)
            tops.append(best)
        if token == LINE_END:
            start += len(written) + 1
            line, written = [], ""
        else:
            line.append(token)
            written = tokenizer.detokenize(line)
    return texts, offsets, tops


def token_text(tokenizer, line: list[str], written: str, token: str) -> str:
    """What `token` adds to the text `written` of the tokens `line` (see `spell`)."""
    if token == LINE_END:
        return "\n"
    after = tokenizer.detokenize([*line, token])
    if after.startswith(written) and not after.endswith("\ufffd"):     # the text before it unchanged, and whole
        return after[len(written):]
    return "bytes:" + "".join(f"\\x{byte:02x}" for byte in tokenizer.token_bytes(token))


@dataclass
class Scored:
    """A text's tokens (as the text spells them, </s> at each line end), each one's natural-log probability under
    the model, and the text's figures (`TrainedLM.evaluate_text`'s: perplexity, bits per character, ...)."""

    tokens: list[str]
    logprobs: list[float]
    figures: dict


@torch.inference_mode()
def score_texts(trained, texts: list[str]) -> list[Scored]:
    """`TrainedLM.score` and `evaluate_text` of many texts in one batch: the texts' id streams side by side, padded
    at their ends (a causal model's scores of a row never read what follows it). A transformer's text longer than
    its context is scored alone, over the overlapping windows `score` uses.

    On a server's inference thread the pass is cut into slices (`core.slices`) that give the same figures: a
    model that carries a state (the RNNs, the window LM) reads the batch a window of time steps at a time, the
    state carried from one to the next; a transformer reads it a few texts at a time, each padded as in the
    whole batch (each slice's products with at least `core.LEAST_ROWS` rows, whose figures are the whole's)."""
    from seqlab.data.readers import count_characters, encode_lines
    from seqlab.families.lm.task import summarize

    model, device = trained.model, trained.device
    model.eval()
    token_lines, streams = [], []
    for part in core.slices([len(text) for text in texts], (id(model), "texts")):   # on a server: a few at a time
        for text in texts[part.start:part.stop]:
            token_lines.append(trained.tokenize(text))
            streams.append(encode_lines(token_lines[-1], trained.vocab).tolist())
    window = model.context_length
    together = [i for i, ids in enumerate(streams) if window is None or len(ids) <= window]
    logprobs: dict[int, list[float]] = {}
    if together:                                  # row b reads [</s>] + ids[:-1] and is scored on ids, as `score`
        T = max(len(streams[i]) for i in together)
        inputs = torch.zeros(len(together), T, dtype=torch.long, device=device)                   # (B, T)
        targets = torch.zeros(len(together), T, dtype=torch.long, device=device)                  # (B, T)
        for b, i in enumerate(together):
            ids = torch.tensor(streams[i], device=device)
            inputs[b, 0], inputs[b, 1:len(ids)], targets[b, :len(ids)] = EOS, ids[:-1], ids
        picked = torch.empty(len(together), T, device=device)                                     # (B, T)
        pace = (id(model), "score")
        budget = core.slice_budget(pace)          # a pass of several slices runs on the model's own threads
        read = reading if budget is None or len(together) * T <= budget else contextlib.nullcontext
        if window is None:                        # a window of time steps at a time, the state carried
            state = model.init_state(len(together), device)
            for part in core.slices([len(together)] * T, pace, core.least_items(len(together))):
                with read():
                    logits, state = model(inputs[:, part.start:part.stop], state)                 # (B, t, V)
                picked[:, part.start:part.stop] = log_probability(logits, targets[:, part.start:part.stop])
        else:                                     # a few texts at a time
            for part in core.slices([T] * len(together), pace, core.least_items(T)):
                with read():
                    logits, _ = model(inputs[part.start:part.stop], None)                         # (b, T, V)
                picked[part.start:part.stop] = log_probability(logits, targets[part.start:part.stop])
        for b, i in enumerate(together):
            logprobs[i] = picked[b, :len(streams[i])].tolist()
    results = []
    for i, text in enumerate(texts):
        if i not in logprobs:                                     # longer than a transformer's context
            pairs = trained.score(text)
            logprobs[i] = [p for _, p in pairs]
        tokens = [t for line in token_lines[i] for t in [*line, "</s>"]]
        lines = trained.lines(text)
        figures = summarize(-sum(logprobs[i]), len(logprobs[i]), count_characters(lines))
        results.append(Scored(tokens, logprobs[i], figures))
    return results


def log_probability(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Each target's natural-log probability under the logits (B, T, V) -> (B, T)."""
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, targets[..., None])[..., 0]
