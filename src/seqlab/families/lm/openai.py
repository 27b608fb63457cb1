"""A language model in OpenAI's API beside seqlab's own, so that the clients and tools built on it work unchanged:

    client = OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="KEY or anything")
    client.models.list()                                   # GET /v1/models (the server's: `seqlab.serve.app`)
    client.completions.create(model="lm", prompt="ROMEO:", max_tokens=20, temperature=0)

POST /v1/completions (OpenAI's legacy text completions) for the language models served on PyTorch (the family's
`openai_endpoints`): one prompt or a list, `n` choices each, sampled (`temperature`, `top_p`, `seed`) or greedy
(`temperature` 0), cut at `stop` strings, streamed as server-sent events, with the tokens' log probabilities
(`logprobs`, `echo`) and the `usage`. The continuations are the family's `completion` part's (`complete`, one
batch for every choice, run by the family's serve `run_batch`; `complete_stream`, one choice at a time), the
Python API's own; `choices.py` makes them.

What OpenAI's protocol has and these models cannot do is refused naming the field, never ignored: a 400 for
`best_of` above 1, `logit_bias`, the presence and frequency penalties and `suffix`, a 422 for a token-id prompt;
`user` is accepted and unused; chat completions and embeddings get a 404 saying so. Errors on these routes are
OpenAI's {"error": {"message", "type", "param", "code"}} (`schemas.openai_error`), so that the official client
raises NotFoundError, BadRequestError, ... with the message.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Literal

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator
from pydantic_core import PydanticCustomError

import seqlab.serve.schemas as schemas
from seqlab.decoding.options import SamplingOptions
from seqlab.errors import SeqlabError
from seqlab.families.lm import FAMILY
from seqlab.families.lm.choices import Piece, StopCut, choice_stream, echo_piece
from seqlab.serve.routes import SSE_HEADERS, Refused, Routes
from seqlab.serve.scheduler import Cancelled, current_job
from seqlab.serve.schemas import JSON_INTEGER, limited

if TYPE_CHECKING:
    from seqlab.serve.served import Served

# OpenAI's routes this server does not answer, and why: a 404 in OpenAI's shape, so that the client shows it (the
# family's `openai_refused`)
NOT_SERVED = {"/v1/chat/completions": "the models continue text, they are not chat models: use POST /v1/completions",
              "/v1/embeddings": "the models give no embeddings"}
MAX_STOPS = 4                 # OpenAI's limit on stop strings
MAX_STOP_CHARS = 256          # seqlab's limit on a stop string's length (OpenAI states none): a stop string is looked
                              # for in the text after every token, so its length bounds that work
MAX_LOGPROBS = 5              # OpenAI's limit on `logprobs`

StopText = Annotated[str, StringConstraints(min_length=1, max_length=MAX_STOP_CHARS)]


# ------------------------------------------------------------------------------ the request and the answer


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    include_usage: bool = Field(False, description="send one more chunk before [DONE], with the request's usage "
                                                   "and no choices")


def texts(value, what: str):
    """A prompt or stop field's value, checked to be a string or a list of strings (a token-id list is refused:
    the text is what the model's tokenizer reads)."""
    if isinstance(value, list) and value and all(isinstance(v, (int, list)) and not isinstance(v, bool)
                                                 for v in value):
        raise PydanticCustomError("token_ids", f"token-id arrays are not supported: send the {what} as text (a "
                                               "string or a list of strings)")
    if value is not None and not isinstance(value, str) and not (
            isinstance(value, list) and all(isinstance(v, str) for v in value)):
        raise PydanticCustomError("texts", "must be a string or a list of strings")
    return value


NULL_AS_DEFAULT = ("max_tokens", "temperature", "top_p", "n", "stream", "echo")   # OpenAI's: null, the default


class CompletionRequest(BaseModel):
    """POST /v1/completions: OpenAI's text completion request. A field of null takes its default."""

    # a misspelt field, or "5" for 5, is an error; stream_options only with stream true (declared here, checked in
    # `completing`)
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={
        "if": {"properties": {"stream_options": {"type": "object"}}, "required": ["stream_options"]},
        "then": {"properties": {"stream": {"const": True}}, "required": ["stream"]}})

    model: str = Field(description="the run directory's name (GET /v1/models)")
    prompt: str | Annotated[list[str], Field(min_length=1)] = Field(
        "", description="the text to continue, or a list of texts (each gets `n` choices); empty: start a new line; "
                        "at most the server's max_items texts of max_chars characters",
        json_schema_extra=limited("max_chars", "max_items"))
    max_tokens: int | None = Field(16, ge=0, le=JSON_INTEGER, json_schema_extra=limited("max_tokens"),
                                   description="tokens to generate for each choice (at most the server's max_tokens)")
    temperature: float | None = Field(1.0, ge=0, le=2, allow_inf_nan=False,
                                      description="softmax temperature; 0: greedy (always the most likely token)")
    top_p: float | None = Field(1.0, ge=0, le=1, allow_inf_nan=False,
                                description="nucleus sampling: sample among the most likely tokens holding this "
                                            "probability; 0: greedy")
    n: int | None = Field(1, ge=1, json_schema_extra=limited("max_items", per="prompt"),
                          description="choices for each prompt (prompts x n at most the server's max_items)")
    stop: StopText | Annotated[list[StopText], Field(max_length=MAX_STOPS)] | None = Field(
        None, description=f"up to {MAX_STOPS} strings of 1 to {MAX_STOP_CHARS} characters: a choice ends before the "
                          "first one it produces (finish_reason \"stop\")")
    seed: int | None = Field(None, ge=0, le=JSON_INTEGER, description="random seed: a repeatable sample; with n > 1, "
                                                                      "choice k of each prompt uses seed + k")
    stream: bool | None = Field(False, description="send the text as server-sent events, piece by piece")
    stream_options: StreamOptions | None = None
    logprobs: int | None = Field(None, ge=0, le=MAX_LOGPROBS,
                                 description="give each token's log probability, and the most likely tokens at "
                                             "each step (this many, and the token chosen)")
    echo: bool | None = Field(False, description="put the prompt before the continuation (and with logprobs, its "
                                                 "tokens' log probabilities)")
    # OpenAI's fields that these models cannot honour: their schemas declare the one value accepted (a request
    # with another is refused, 400, by `completing`)
    best_of: int | None = Field(None, ge=1, json_schema_extra={"maximum": 1},
                                description="refused above 1 (ask for n choices)")
    logit_bias: dict[str, float] | None = Field(None, json_schema_extra={"maxProperties": 0},
                                                description="refused unless empty")
    presence_penalty: float | None = Field(None, ge=-2, le=2, json_schema_extra={"minimum": 0, "maximum": 0},
                                           description="refused unless 0")
    frequency_penalty: float | None = Field(None, ge=-2, le=2, json_schema_extra={"minimum": 0, "maximum": 0},
                                            description="refused unless 0")
    suffix: str | None = Field(None, json_schema_extra={"maxLength": 0},
                               description="refused unless empty: the models continue text, never insert it")
    user: str | None = Field(None, description="accepted and unused")

    @model_validator(mode="before")
    @classmethod
    def null_as_default(cls, data):
        """A null takes the field's default (OpenAI's), as if the field were left out (so a default over the
        server's limit takes the limit, `schemas.over_limit`), an integral number for an integer its integer
        (`schemas.integral_numbers`), and the rest reads the value as it is."""
        if not isinstance(data, dict):
            return data
        given = {k: v for k, v in data.items() if v is not None or k not in NULL_AS_DEFAULT}
        return schemas.integral_numbers(cls, given)

    @field_validator("prompt", mode="before")
    @classmethod
    def prompt_as_text(cls, value):
        return "" if value is None else texts(value, "prompt")

    @field_validator("stop", mode="before")
    @classmethod
    def stop_as_text(cls, value):
        return texts(value, "stop strings")

    def prompts(self) -> list[str]:
        return [self.prompt] if isinstance(self.prompt, str) else list(self.prompt)

    def stops(self) -> list[str]:
        return [] if self.stop is None else [self.stop] if isinstance(self.stop, str) else list(self.stop)


class Logprobs(BaseModel):
    """OpenAI's legacy log probabilities of a choice's tokens."""

    tokens: list[str] = Field(description="the tokens as the text spells them (joined, they are the text): what "
                                          "each adds to it (\"\\n\" for a line end); a token that is part of a "
                                          "character only, its bytes (\"bytes:\\xe6\\x9d\", OpenAI's convention)")
    token_logprobs: list[float | None] = Field(description="each token's natural-log probability given the ones "
                                                           "before it, under the model (as POST /v1/score gives "
                                                           "it; the first prompt token's: null)")
    top_logprobs: list[dict[str, float] | None] = Field(description="the `logprobs` most likely tokens the model "
                                                                    "could choose at each step, and the token "
                                                                    "chosen, spelt as `tokens`")
    text_offset: list[int] = Field(description="where each token's text begins in the choice's text")


class Choice(BaseModel):
    text: str
    index: int
    logprobs: Logprobs | None = None
    finish_reason: Literal["stop", "length"] | None = Field(description='"stop": a stop string ended it; "length": '
                                                                        "max_tokens did")


class Usage(BaseModel):
    prompt_tokens: int = Field(description="the prompts' tokens (each prompt once, whatever n)")
    completion_tokens: int = Field(description="the tokens generated, up to the end of a stop string")
    total_tokens: int


class CompletionResponse(BaseModel):
    """OpenAI's text completion, or one chunk of its stream."""

    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[Choice]
    usage: Usage | None = None
    warnings: list[str] = Field([], description="seqlab's own: what reading the prompts warned of (tokens the "
                                                "vocabulary lacks, read as <unk>)")


# ------------------------------------------------------------------------------ the routes


def add_routes(app: FastAPI, routes: Routes) -> None:
    """POST /v1/completions, and the 404s of OpenAI's routes not served (`NOT_SERVED`)."""
    for path, why in NOT_SERVED.items():
        app.post(path, include_in_schema=False)(not_served(f"POST {path} is not served here: {why}"))

    @app.post("/v1/completions", response_model=CompletionResponse,
              responses={200: {"content": {"text/event-stream": {}}}})
    async def completions(body: CompletionRequest, request: Request):
        served = completing(routes, body)
        prompts, options = body.prompts(), choice_options(body)
        asked = [(p, o) for p in prompts for o in options]                  # choice i: prompt i // n, option i % n
        answer = Answer(body)
        if body.stream:
            return await stream(routes, request, served.trained, asked, answer)
        # gathered with concurrent requests of the same shape into one batch (the family's serve `run_batch`)
        key = (body.model, "completions", answer.top, answer.tokens, answer.want_logprobs and body.echo, len(options))
        pieces = await routes.batcher.submit(key, asked)
        return answer.whole(pieces)


def not_served(message: str) -> Callable[[], None]:
    def route() -> None:
        raise Refused(404, message, code="unsupported_endpoint")

    return route


def completing(routes: Routes, body: CompletionRequest) -> Served:
    """The request's model, checked to answer /v1/completions, and the request checked against the server's
    limits and what the models can do."""
    served = routes.named(body.model)
    job = current_job()
    if job is not None:
        job.key = body.model                          # the scheduler's queue: one per model, taken in turn
    if "completions" not in served.openai_endpoints():
        if served.task == FAMILY.name:                # a language model whose runtime does not answer it
            raise Refused(400, f"model {body.model!r} is served from an ONNX export (--runtime onnx), which does not "
                               "answer /v1/completions: use POST /v1/generate, or serve its run directory",
                          "model", "unsupported_model")
        answers = " and ".join(f"POST {e}" for e in served.endpoints())
        raise Refused(400, f"model {body.model!r} is {served.title or 'a ' + served.task + ' model'}, which does not "
                           f"answer /v1/completions (a language model's): use {answers}", "model",
                      "unsupported_model")
    unsupported = [("best_of", body.best_of not in (None, 1), "only 1 is supported (each choice is one sample): ask "
                                                              "for n choices"),
                   ("logit_bias", bool(body.logit_bias), "is not supported"),
                   ("presence_penalty", body.presence_penalty not in (None, 0), "is not supported (only 0)"),
                   ("frequency_penalty", body.frequency_penalty not in (None, 0), "is not supported (only 0)"),
                   ("suffix", bool(body.suffix), "is not supported: the models continue text, they do not insert it")]
    for name, given, why in unsupported:
        if given:
            raise Refused(400, f"{name} {why}", name, "unsupported_parameter")
    if body.stream_options is not None and not body.stream:
        raise Refused(400, "stream_options is only allowed with stream: true", "stream_options")
    over = schemas.over_limit(body, routes.limits)       # the prompts, max_tokens, n x prompts (`limited`)
    if over is not None:
        raise Refused(422, over[1], over[0])
    return served


def choice_options(body: CompletionRequest) -> list[SamplingOptions]:
    """The `SamplingOptions` of the n choices of a prompt: greedy at temperature 0 (or top_p 0), else sampled,
    choice k with seed + k; stop strings are cut here, not by the model (a line end is text like any other)."""
    if body.temperature == 0 or body.top_p == 0:
        return [SamplingOptions(max_tokens=body.max_tokens, greedy=True)] * body.n
    return [SamplingOptions(temperature=body.temperature, top_p=body.top_p, max_tokens=body.max_tokens,
                            seed=None if body.seed is None else body.seed + k) for k in range(body.n)]


# ------------------------------------------------------------------------------ answers


class Answer:
    """How the answer to one request is written: its id and time, and each choice's logprobs and usage."""

    def __init__(self, body: CompletionRequest):
        self.body = body
        self.id, self.created = f"cmpl-{uuid.uuid4().hex}", int(time.time())
        self.want_logprobs = body.logprobs is not None
        self.top = body.logprobs or 0
        self.stops = body.stops()
        self.tokens = self.want_logprobs or bool(self.stops)     # each token's details: given, or to cut at a stop

    def whole(self, pieces: list[tuple[Piece, Piece]]) -> CompletionResponse:
        choices, prompt_tokens, completion_tokens, warnings = [], 0, 0, []
        n = self.body.n
        for index, (echoed, made) in enumerate(pieces):
            cut = StopCut(self.stops)
            text = Piece()                                  # a new one: the prompt's n choices share `echoed`
            for part in ([echoed] if self.body.echo else []) + [cut.add(made), cut.rest()]:
                text.extend(part)
            choices.append(Choice(text=text.text, index=index, logprobs=self.logprobs(text),
                                  finish_reason="stop" if cut.stopped else made.finish_reason or "length"))
            completion_tokens += cut.usage()
            if index % n == 0:
                prompt_tokens += made.prompt_tokens
                warnings += made.warnings
        return CompletionResponse(id=self.id, created=self.created, model=self.body.model, choices=choices,
                                  usage=usage(prompt_tokens, completion_tokens), warnings=warnings)

    def logprobs(self, piece: Piece) -> Logprobs | None:
        if not self.want_logprobs:
            return None
        return Logprobs(tokens=piece.tokens, token_logprobs=piece.logprobs, top_logprobs=piece.top,
                        text_offset=piece.offsets)

    def chunk(self, index: int, piece: Piece, offset: int, finish_reason: str | None = None) -> str:
        """One server-sent event: a piece of choice `index`, its tokens' offsets moved to `offset` (where the piece
        begins in the choice's text)."""
        moved = Piece(piece.text, piece.tokens, piece.logprobs, piece.top, [offset + at for at in piece.offsets])
        choice = Choice(text=piece.text, index=index, logprobs=self.logprobs(moved), finish_reason=finish_reason)
        return event(CompletionResponse(id=self.id, created=self.created, model=self.body.model, choices=[choice],
                                        warnings=piece.warnings))

    def usage_chunk(self, prompt_tokens: int, completion_tokens: int) -> str:
        return event(CompletionResponse(id=self.id, created=self.created, model=self.body.model, choices=[],
                                        usage=usage(prompt_tokens, completion_tokens)))


def usage(prompt_tokens: int, completion_tokens: int) -> Usage:
    return Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                 total_tokens=prompt_tokens + completion_tokens)


def event(answer: BaseModel) -> str:
    return f"data: {json.dumps(answer.model_dump(), ensure_ascii=False)}\n\n"


def error_event(status: int, message: str) -> str:
    """An error in the middle of a stream, as an event of OpenAI's error (the official client raises it)."""
    body = schemas.openai_error(status, message)
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


async def stream(routes: Routes, request: Request, trained, asked: list[tuple[str, SamplingOptions]],
                 answer: Answer) -> StreamingResponse:
    """The choices as server-sent events, one after the other: each choice's pieces as OpenAI's chunks (the
    prompt first with echo), its last chunk with its finish_reason; then with stream_options.include_usage a
    chunk of the usage; then `data: [DONE]`. Every choice is started (its prompt read, its first piece made)
    before the answer begins, so that a prompt the model refuses is a 4xx, not a broken stream."""
    echo, n = answer.body.echo, answer.body.n
    streams = [choice_stream(trained, prompt, option, answer.top, answer.tokens) for prompt, option in asked]

    def close() -> None:
        for pieces in streams:
            routes.inference.submit(pieces.close)

    try:
        firsts = [await routes.infer(next, pieces, None) for pieces in streams]
        echoed = {i: await routes.infer(echo_piece, trained, asked[i][0], answer.want_logprobs)
                  for i in range(0, len(asked), n)} if echo else {}
    except BaseException:
        close()
        raise

    async def events():
        prompt_tokens = completion_tokens = 0
        try:
            for index, (pieces, piece) in enumerate(zip(streams, firsts, strict=True)):
                cut, offset, finish = StopCut(answer.stops), 0, "length"
                if echo:                                       # the prompt first
                    yield answer.chunk(index, echoed[index - index % n], 0)
                    offset = len(echoed[index - index % n].text)
                if index % n == 0 and piece is not None:
                    prompt_tokens += piece.prompt_tokens
                while piece is not None:
                    finish = piece.finish_reason or finish
                    out = cut.add(piece)
                    out.warnings = piece.warnings
                    if out.text or out.warnings or (out.tokens and answer.want_logprobs):
                        yield answer.chunk(index, out, offset)
                        offset += len(out.text)
                    if cut.stopped or await request.is_disconnected():
                        break
                    piece = await routes.infer(next, pieces, None)
                if await request.is_disconnected():
                    return
                last = cut.rest()
                completion_tokens += cut.usage()
                yield answer.chunk(index, last, offset, "stop" if cut.stopped else finish)
            if answer.body.stream_options is not None and answer.body.stream_options.include_usage:
                yield answer.usage_chunk(prompt_tokens, completion_tokens)
            yield "data: [DONE]\n\n"
        except SeqlabError as error:              # past the answer's start: an error event, as OpenAI's streams send
            yield error_event(422, str(error))
        except Cancelled as error:
            if error.reason == "deadline":
                limit = f" of {error.timeout:g} s" if error.timeout else ""
                yield error_event(504, f"the request took longer than the server's limit{limit} (request_timeout); "
                                       "its work was stopped")
        finally:
            close()

    return StreamingResponse(events(), media_type="text/event-stream", headers=SSE_HEADERS)
