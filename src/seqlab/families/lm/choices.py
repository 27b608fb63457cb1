"""The choices of OpenAI's POST /v1/completions (`seqlab.families.lm.openai`), made on the server's inference
thread: each choice's continuation from the family's `completion` part (`complete`, one batch for every choice;
`complete_stream`, one choice piece by piece) as a `Piece` (its text and, with logprobs, its tokens as the text
spells them, their log probabilities and offsets), the prompt echoed, and `StopCut`, which cuts a choice before
its first stop string as its pieces come.

Importing it needs no PyTorch (the `completion` part is imported when a choice is made).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from seqlab.decoding.options import SamplingOptions


@dataclass
class Piece:
    """Text of one choice and, with logprobs, its tokens: what one answer or one chunk carries."""

    text: str = ""
    tokens: list[str] = field(default_factory=list)
    logprobs: list[float | None] = field(default_factory=list)
    top: list[dict[str, float] | None] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)        # where each token's text begins in `text`
    ids: int = 0                                            # tokens generated (the usage counts them)
    prompt_tokens: int = 0
    finish_reason: str = ""
    warnings: list[str] = field(default_factory=list)

    def extend(self, other: Piece) -> None:
        shift = len(self.text)
        self.text += other.text
        self.tokens += other.tokens
        self.logprobs += other.logprobs
        self.top += other.top
        self.offsets += [shift + at for at in other.offsets]


def generate(trained, prompts: list[str], options: list[SamplingOptions], top: int, tokens: bool,
             echo_scores: bool, n: int) -> list[tuple[Piece, Piece]]:
    """Every choice at once (prompt i's n choices are rows i*n .. i*n+n-1), decoded in one batch by the family's
    `complete`: for each, its prompt (`echo_piece`; with `echo_scores`, its tokens' log probabilities) and its
    continuation (with `tokens`, its tokens' details: `continuation`)."""
    completion = family_part(trained)
    done = completion.complete(trained, prompts, options, top_logprobs=top)
    firsts = range(0, len(prompts), n)                      # each prompt's first choice
    echoed = {i: echo_piece(trained, prompts[i], echo_scores) for i in firsts}
    before = {i: trained.vocab.decode(done[i].prompt_ids[1:]) if tokens else [] for i in firsts}
    return [(echoed[i - i % n], continuation(trained, c, tokens, before[i - i % n])) for i, c in enumerate(done)]


def choice_stream(trained, prompt: str, option: SamplingOptions, top: int, tokens: bool) -> Iterator[Piece]:
    """One choice's continuation piece by piece (the family's `complete_stream`), with `tokens` each with its
    tokens' details (`continuation`)."""
    completion = family_part(trained)
    before: list[str] | None = None
    for made in completion.complete_stream(trained, prompt, option, top_logprobs=top):
        if before is None:
            before = trained.vocab.decode(made.prompt_ids[1:]) if tokens else []
        piece = continuation(trained, made, tokens, before)
        if tokens:
            before += made.tokens
        yield piece


def family_part(trained):
    """The family's `completion` part (`complete`, `complete_stream`, `spell`, `prompt_logprobs`), imported when
    a choice is made (it needs PyTorch)."""
    from seqlab.families.lm import completion

    return completion


def continuation(trained, made, tokens: bool, before: list[str]) -> Piece:
    """A `Completion` (or one piece of it) as a `Piece`: with `tokens`, its tokens as the text spells them, their
    log probabilities, the most likely tokens at each step (and the one chosen) and where each token's text begins
    (the family's `spell`; `before`: the tokens before them), for `logprobs`, and to cut at a stop string and count
    the tokens up to it."""
    piece = Piece(made.text, ids=len(made.ids), prompt_tokens=len(made.prompt_ids) - 1,
                  finish_reason=made.finish_reason, warnings=list(made.warnings))
    if tokens:
        tops = made.top_logprobs or [{} for _ in made.tokens]
        tops = [{**best, token: logprob} for best, token, logprob in zip(tops, made.tokens, made.logprobs,
                                                                         strict=True)]
        piece.tokens, piece.offsets, piece.top = family_part(trained).spell(trained, made.tokens, before, tops)
        piece.logprobs = list(made.logprobs)
    return piece


def echo_piece(trained, prompt: str, logprobs: bool) -> Piece:
    """The prompt as a choice's text begins with it (`echo`): with `logprobs`, its tokens as the text spells them
    (the family's `spell`) and their log probabilities, /v1/score's for the same text, the first one's null
    (OpenAI's: no token before it)."""
    if not logprobs:
        return Piece(prompt)
    completion = family_part(trained)
    tokens, scores = completion.prompt_logprobs(trained, prompt)
    texts, offsets, _ = completion.spell(trained, tokens, [])
    scores = [None, *scores[1:]] if scores else []
    return Piece(prompt, texts, scores, [None if s is None else {t: s} for t, s in zip(texts, scores, strict=True)],
                 offsets)


# ------------------------------------------------------------------------------ stop strings


class StopCut:
    """A choice's continuation as its pieces come, cut before the first stop string: `add` gives what may be sent
    now (text that may begin a stop string is held back until the next piece tells), `stopped` once a stop
    string has appeared (nothing of it is sent), `rest` what is left at the end."""

    def __init__(self, stops: list[str]):
        self.stops = stops
        self.text = ""                  # the continuation so far (cut at the stop string, once found)
        self.sent = 0                   # characters of it given out
        self.waiting = Piece()          # the tokens not given out yet (offsets in `text`)
        self.starts: list[int] = []     # every token's offset, for the usage
        self.generated = 0              # tokens generated
        self.stop_end: int | None = None

    @property
    def stopped(self) -> bool:
        return self.stop_end is not None

    def add(self, piece: Piece) -> Piece:
        if self.stopped:
            return Piece()
        begin = len(self.text)
        self.text += piece.text
        self.generated += piece.ids
        self.starts += [begin + at for at in piece.offsets]
        self.waiting.tokens += piece.tokens
        self.waiting.logprobs += piece.logprobs
        self.waiting.top += piece.top
        self.waiting.offsets += [begin + at for at in piece.offsets]
        found = [(at, at + len(stop)) for stop in self.stops if (at := self.text.find(stop, self.sent)) >= 0]
        if found:
            at, self.stop_end = min(found)
            self.text = self.text[:at]
            return self.give(at)
        held = max((k for stop in self.stops for k in range(1, len(stop))
                    if self.text.endswith(stop[:k]) and len(self.text) - k >= self.sent), default=0)
        return self.give(len(self.text) - held)

    def rest(self) -> Piece:
        return self.give(len(self.text))

    def give(self, end: int) -> Piece:
        """The text up to `end` not given out yet, with the tokens that begin before `end` (at the end, all)."""
        waiting, every = self.waiting, end == len(self.text) and not self.stopped
        take = [i for i, at in enumerate(waiting.offsets) if at < end or every]
        out = Piece(self.text[self.sent:end], [waiting.tokens[i] for i in take], [waiting.logprobs[i] for i in take],
                    [waiting.top[i] for i in take], [waiting.offsets[i] - self.sent for i in take])
        keep = [] if self.stopped else [i for i in range(len(waiting.offsets)) if i not in set(take)]
        self.waiting = Piece(tokens=[waiting.tokens[i] for i in keep], logprobs=[waiting.logprobs[i] for i in keep],
                             top=[waiting.top[i] for i in keep], offsets=[waiting.offsets[i] for i in keep])
        self.sent = end
        return out

    def usage(self) -> int:
        """The tokens generated, up to the one that ends the stop string."""
        if not self.stopped or not self.starts:
            return self.generated
        return sum(1 for at in self.starts if at < self.stop_end)


