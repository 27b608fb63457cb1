"""A sequence-to-sequence model over HTTP: POST /v1/translate and /v1/summarize (each text's output, its
tokens and score, and when asked the attention over the source), the texts of concurrent requests with the
same decoding options decoded in one batch."""

from __future__ import annotations

from fastapi import FastAPI
from pydantic import BaseModel, Field

import seqlab.serve.ui as ui
from seqlab.decoding.options import SearchOptions
from seqlab.serve.routes import Routes
from seqlab.serve.schemas import WordsRequest, option_field


class DecodeRequest(WordsRequest):
    beam: int = option_field(SearchOptions, "beam", 5, "beam size (1: greedy; at most the server's max_beam)",
                             limit="max_beam")
    max_length: int = option_field(SearchOptions, "max_length", description="most output tokens (0: the model's "
                                   "rule; at most the server's max_length)", limit="max_length")
    length_penalty: float = option_field(SearchOptions, "length_penalty", description="rank by log p / "
                                         "length^alpha (at most 10)")
    attention: bool = Field(False, description="return each output token's attention over the source tokens")


class DecodeResult(BaseModel):
    text: str
    tokens: list[str]
    score: float
    source_tokens: list[str] | None = None
    attention: list[list[float]] | None = Field(None, description="(output tokens, source tokens) weights")


class DecodeResponse(BaseModel):
    model: str
    results: list[DecodeResult]


# the web page's forms (`seqlab.serve.ui`): the output and its attention over the source
BEAM = (ui.Group("decoding", "Beam search", (ui.Field("beam", "Beam size (1: greedy)", value=3, blank=1, min=1),)),)
FORMS = (ui.Form("translate", "decoded", "Translation", "Source sentence", "der hund sieht .", groups=BEAM,
                 body={"attention": True}),
         ui.Form("summarize", "decoded", "Summary", "Document", "a long text to summarise", groups=BEAM,
                 body={"attention": True}))


def add_routes(app: FastAPI, routes: Routes) -> None:
    """POST /v1/translate and /v1/summarize: the same decoding, named for the two uses."""

    async def decode(body: DecodeRequest, endpoint: str) -> DecodeResponse:
        routes.served(body, endpoint)                   # beam and max_length within the limits (`limited`)
        cap = routes.limits.max_length                  # the default, 2 x the source + 10, is capped too
        key = (body.model, endpoint, body.beam, body.max_length, body.length_penalty, body.attention, cap)
        outputs = await routes.batcher.submit(key, body.texts())
        return DecodeResponse(model=body.model, results=[
            DecodeResult(text=o.text, tokens=o.tokens, score=o.score,
                         source_tokens=o.source_tokens if body.attention else None,
                         attention=o.attention if body.attention else None)
            for o in outputs])

    @app.post("/v1/translate", response_model=DecodeResponse)
    async def translate(body: DecodeRequest) -> DecodeResponse:
        return await decode(body, "translate")

    @app.post("/v1/summarize", response_model=DecodeResponse)
    async def summarize(body: DecodeRequest) -> DecodeResponse:
        return await decode(body, "summarize")


def run_batch(trained, key: tuple, items: list) -> list:
    """One decoding of the gathered texts of a batch: `key` is (model, endpoint, beam, max_length,
    length_penalty, attention, cap). With max_length 0 each text gets the model's rule, 2 x its source + 10
    tokens within what the decoder holds, at most `cap` (the server's limit: `SearchOptions.length_cap`)."""
    _, _, beam, max_length, length_penalty, attention, cap = key
    return trained.generate(items, beam=beam, max_length=max_length, length_penalty=length_penalty,
                            attention=attention, length_cap=cap)
