"""What a family's HTTP endpoints are built on (each family's `serve` part adds its own, `add_routes(app,
routes)`): `Routes` checks a request against the limits and finds its model, runs a call on the server's one
inference thread, and gathers concurrent requests into batches; `events` streams text as server-sent events;
`Refused` is an error answer naming the request's field (OpenAI's shape on OpenAI's routes).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fastapi import HTTPException, Request, Response

import seqlab.serve.schemas as schemas
from seqlab.serve.batching import Batcher
from seqlab.serve.limits import ServeLimits
from seqlab.serve.scheduler import Cancelled, Scheduler, current_job

if TYPE_CHECKING:        # the app's (seqlab.serve.served reads the registry): only what the families call on it
    from seqlab.serve.served import Served


class Refused(Exception):
    """A request refused: an error answer (`shapes.error_body`: in OpenAI's shape on OpenAI's routes) naming the
    field at fault (`param`) and a short `code`."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code


@dataclass
class Routes:
    """The app's models, limits and machinery, as the families' endpoints use them."""

    models: dict[str, Served]
    limits: ServeLimits
    inference: Scheduler           # the one thread PyTorch is called from, shared fairly
    batcher: Batcher               # `await batcher.submit((model, endpoint, *options), items)`

    async def infer(self, function: Callable, *args):
        """`function(*args)` on the inference thread, awaited (until the request's deadline, or its client goes:
        then `scheduler.Cancelled`)."""
        future = asyncio.get_running_loop().run_in_executor(self.inference, function, *args)
        # its outcome read once it comes, whoever awaits it: a request whose client went away (its task cancelled
        # while it waited) leaves the work's `Cancelled` unread, which asyncio would log as a traceback
        future.add_done_callback(lambda done: done.cancelled() or done.exception())
        job = current_job()
        return await (future if job is None else job.wait(future))

    def named(self, name: str) -> Served:
        """The model of the name, or a 404 naming the field `model` (`Refused`)."""
        if name not in self.models:
            raise Refused(404, f"no model named {name!r}; this server has {', '.join(sorted(self.models))} "
                               "(GET /v1/models)", "model", "model_not_found")
        return self.models[name]

    def served(self, request: schemas.Request, endpoint: str) -> Served:
        """The request's model, checked to answer `endpoint`, and the request checked against the server's limits
        (its fields' `schemas.limited`: its texts, max_tokens, beam, ...)."""
        models = self.models
        if request.model not in models:
            raise HTTPException(404, f"no model named {request.model!r}; this server has "
                                     f"{', '.join(sorted(models))} (GET /v1/models)")
        model = models[request.model]
        job = current_job()
        if job is not None:
            job.key = request.model                   # the scheduler's queue: one per model, taken in turn
        answered = model.answers()
        if endpoint not in answered:
            answers = " and ".join(f"POST /v1/{e}" for e in answered)
            raise HTTPException(400, f"model {request.model!r} is {model.title or 'a ' + model.task + ' model'}, "
                                     f"which does not answer /v1/{endpoint}: use {answers}")
        over = schemas.over_limit(request, self.limits)
        if over is not None:
            raise HTTPException(422, over[1])
        return model


async def json_answer(fields: dict, results: list, render: Callable) -> Response:
    """The JSON answer {**fields, "results": [render(r) for r in results]}, as FastAPI writes a response model's
    (the same separators, no NaN), written one result at a time with the event loop free between two: a score of
    64 texts of 20,000 characters holds 1.3 million tokens, which as pydantic objects took the loop 5 s, every
    other request waiting. The route keeps its `response_model` for the OpenAPI document."""
    def dumps(value) -> str:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))

    parts = [dumps({**fields, "results": []})[:-3], "["]             # {"model":"x","results":[
    for i, result in enumerate(results):
        parts.append(("," if i else "") + dumps(render(result)))
        await asyncio.sleep(0)                                        # the other requests, between two results
    parts.append("]}")
    return Response("".join(parts), media_type="application/json")


# Every server-sent-event response's headers: no cache may keep the stream, and no proxy may buffer it (nginx
# holds a response until it is whole unless told X-Accel-Buffering: no).
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


async def events(first, pieces, request: Request, infer, close, warnings: list[str] | None = None):
    """Server-sent events: each piece of text as `data: {"text": ...}`, then why the text ended, `data: {"text":
    "", "finish_reason": "length" or "stop"}` ("stop": the model's </s> ended it, with stop_at_eos), then
    `data: [DONE]`; `warnings` (the prompt's unknown tokens), when there are any, come first as `data: {"text": "",
    "warnings": [...]}`. A piece is a string, or an object with `text` and `finish_reason` (a `Completion`; the last
    one's reason counts); a generator of strings may return the reason (the value of its StopIteration;
    "length" when it returns none). A client that goes away stops the generation: `close()` closes the
    generator on the inference thread, after the step it may be running there (closing it from here while it
    runs would fail)."""
    finish = {"reason": "length"}

    def advance():
        try:
            return next(pieces)
        except StopIteration as end:
            if isinstance(end.value, str):
                finish["reason"] = end.value
            return None

    try:
        if warnings:                                          # what reading the prompt warned of, first
            yield f"data: {json.dumps({'text': '', 'warnings': warnings}, ensure_ascii=False)}\n\n"
        piece = first
        while piece is not None:
            text = piece if isinstance(piece, str) else piece.text
            if getattr(piece, "finish_reason", None):
                finish["reason"] = piece.finish_reason
            if text:
                yield f"data: {json.dumps({'text': text}, ensure_ascii=False)}\n\n"
            if await request.is_disconnected():
                return
            try:
                piece = await infer(advance)
            except Cancelled as stopped:                      # past the request's deadline (or its client gone)
                if stopped.reason == "deadline":
                    message = (f"the stream took longer than the server's limit of {stopped.timeout or 0:g} s "
                               "(request_timeout); it was stopped")
                    yield f"data: {json.dumps({'error': message})}\n\n"
                    yield "data: [DONE]\n\n"
                return
        yield f"data: {json.dumps({'text': '', 'finish_reason': finish['reason']})}\n\n"
        yield "data: [DONE]\n\n"
    finally:
        close()
