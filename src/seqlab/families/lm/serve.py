"""A language model over HTTP: POST /v1/generate (a prompt's continuation, whole or streamed as server-sent
events) and POST /v1/score (each token's log probability, the text's perplexity and bits per character)."""

from __future__ import annotations

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from seqlab.serve.routes import Routes, events
from seqlab.serve.schemas import Request as ModelRequest
from seqlab.serve.schemas import TextsRequest


class GenerateRequest(ModelRequest):
    prompt: str = Field("", description="the text to continue (empty: start a new line)")
    max_tokens: int = Field(50, ge=0, description="tokens to generate")
    temperature: float = Field(1.0, gt=0, allow_inf_nan=False, description="softmax temperature")
    top_k: int = Field(0, ge=0, description="sample among the k most likely tokens (0: all)")
    top_p: float = Field(1.0, gt=0, le=1, allow_inf_nan=False, description="nucleus sampling: probability mass")
    seed: int | None = Field(None, ge=0, lt=2**63, description="random seed for a repeatable sample")
    greedy: bool = Field(False, description="always take the most likely token")
    beam: int = Field(1, ge=1, description="beam search over this many hypotheses (1: sampling or greedy)")
    stop_at_eos: bool = Field(False, description="stop at the first line end")
    stream: bool = Field(False, description="send the text piece by piece as server-sent events")


class GenerateResponse(BaseModel):
    model: str
    text: str = Field(description="the continuation (without the prompt)")


class TokenScore(BaseModel):
    token: str
    logprob: float = Field(description="natural-log probability of the token given the ones before it")


class ScoreResult(BaseModel):
    tokens: list[TokenScore]
    perplexity: float
    bits_per_char: float | None = None


class ScoreResponse(BaseModel):
    model: str
    results: list[ScoreResult]


def add_routes(app: FastAPI, routes: Routes) -> None:
    """POST /v1/generate and /v1/score."""

    @app.post("/v1/generate", response_model=GenerateResponse, dependencies=routes.dependencies,
              responses={200: {"content": {"text/event-stream": {}}}})
    async def generate(body: GenerateRequest, request: Request):
        model = routes.served(body, "generate")
        if body.max_tokens > routes.limits.max_tokens:
            raise HTTPException(422, f"max_tokens {body.max_tokens} is over the limit of {routes.limits.max_tokens}")
        routes.check_beam(body.beam)
        options = body.model_dump(exclude={"model", "prompt", "stream"})
        pieces = model.trained.stream(body.prompt, **options)
        first = await routes.infer(next, pieces, None)            # the options and the prompt fail here, as a 4xx
        if not body.stream:
            rest = await routes.infer(lambda: "".join(pieces))
            return GenerateResponse(model=body.model, text=(first or "") + rest)
        return StreamingResponse(events(first, pieces, request, routes.infer,
                                        lambda: routes.inference.submit(pieces.close)),
                                 media_type="text/event-stream")

    @app.post("/v1/score", response_model=ScoreResponse, dependencies=routes.dependencies)
    async def score(body: TextsRequest) -> ScoreResponse:
        lm = routes.served(body, "score").trained

        def scored(text: str) -> ScoreResult:
            figures = lm.evaluate_text(text)
            return ScoreResult(tokens=[TokenScore(token=t, logprob=p) for t, p in lm.score(text)],
                               perplexity=figures["perplexity"], bits_per_char=figures.get("bits_per_char"))

        return ScoreResponse(model=body.model, results=[await routes.infer(scored, t) for t in body.texts()])
