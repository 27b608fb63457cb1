"""A language model over HTTP: POST /v1/generate (a prompt's continuation, whole or streamed as server-sent
events) and POST /v1/score (each token's log probability, the text's perplexity and bits per character), OpenAI's
POST /v1/completions (`openai.py`), and the batches of all three (`run_batch`)."""

from __future__ import annotations

import dataclasses

from fastapi import FastAPI, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

import seqlab.serve.ui as ui
from seqlab.decoding.options import SamplingOptions
from seqlab.families.lm import choices, openai
from seqlab.serve.routes import SSE_HEADERS, Routes, events, json_answer
from seqlab.serve.schemas import Request as ModelRequest
from seqlab.serve.schemas import TextsRequest, limited, option_field


class GenerateRequest(ModelRequest):
    # beam search samples nothing: with a beam above 1, the sampling fields keep their defaults (`SamplingOptions`
    # refuses the rest, 422), as the OpenAPI document declares
    model_config = ConfigDict(json_schema_extra={
        "if": {"properties": {"beam": {"minimum": 2}}, "required": ["beam"]},
        "then": {"properties": {"temperature": {"minimum": 1, "maximum": 1}, "top_k": {"maximum": 0},
                                "top_p": {"minimum": 1}, "seed": {"type": "null"}, "greedy": {"const": False}}}})

    prompt: str = Field("", description="the text to continue (empty: start a new line; at most the server's "
                                        "max_chars characters)", json_schema_extra=limited("max_chars"))
    max_tokens: int = option_field(SamplingOptions, "max_tokens", 50, "tokens to generate (at most the server's "
                                   "limit: GET /v1/models)", limit="max_tokens")
    temperature: float = option_field(SamplingOptions, "temperature", description="softmax temperature: any "
                                      "positive number (towards 0: the most likely token; large: uniform)")
    top_k: int = option_field(SamplingOptions, "top_k", description="sample among the k most likely tokens (0: all)")
    top_p: float = option_field(SamplingOptions, "top_p", description="nucleus sampling: probability mass (the most "
                                "likely token is always kept)")
    seed: int | None = option_field(SamplingOptions, "seed", description="random seed for a repeatable sample")
    greedy: bool = Field(False, description="always take the most likely token")
    beam: int = option_field(SamplingOptions, "beam", description="beam search over this many hypotheses (1: "
                             "sampling or greedy; at most the server's limit: GET /v1/models)", limit="max_beam")
    stop_at_eos: bool = Field(False, description="stop at the first line end")
    stream: bool = Field(False, description="send the text piece by piece as server-sent events")


class GenerateResponse(BaseModel):
    model: str
    text: str = Field(description="the continuation (without the prompt)")
    warnings: list[str] = Field([], description="what reading the prompt warned of (its tokens the vocabulary "
                                "lacks, read as <unk>), for the client: the server does not log prompts")


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


# the web page's forms (`seqlab.serve.ui`): a prompt's continuation as it streams, a text's log probabilities
FORMS = (
    ui.Form("generate", "stream", "Generated text", "Prompt", "ROMEO:", text="prompt", body={"stream": True},
            groups=(ui.Group("sampling", "Sampling", (
                ui.Field("max_tokens", "Max tokens", value=60, blank=60, min=0),
                ui.Field("temperature", "Temperature", "number", value=0.8, blank=1, min=0.05, step=0.05),
                ui.Field("top_k", "Top-k (0: all)", value=0, blank=0, min=0),
                ui.Field("seed", "Seed (empty: random)", min=0, placeholder="random"))),)),
    ui.Form("score", "token-scores", "Log-probabilities", "Text to score", "To be, or not to be"))


def add_routes(app: FastAPI, routes: Routes) -> None:
    """POST /v1/completions (OpenAI's, `openai.add_routes`), /v1/generate and /v1/score."""
    openai.add_routes(app, routes)

    @app.post("/v1/generate", response_model=GenerateResponse,
              responses={200: {"content": {"text/event-stream": {}}}})
    async def generate(body: GenerateRequest, request: Request):
        model = routes.served(body, "generate")                   # max_tokens, beam and the prompt: limited
        options = body.model_dump(exclude={"model", "prompt", "stream"})
        if not body.stream:                      # gathered with concurrent requests into one batch (`run_batch`)
            sampling = SamplingOptions(**options)    # checked here: a bad one is this request's 422, not its batch's
            (text, said), = await routes.batcher.submit((body.model, "generate"), [(body.prompt, sampling)])
            return GenerateResponse(model=body.model, text=text, warnings=said)
        said: list[str] = []                                       # the prompt's warnings: told, not logged
        pieces = model.trained.stream(body.prompt, warn=said.append, **options)
        first = await routes.infer(next, pieces, None)            # the options and the prompt fail here, as a 4xx
        return StreamingResponse(events(first, pieces, request, routes.infer,
                                        lambda: routes.inference.submit(pieces.close), warnings=said),
                                 media_type="text/event-stream", headers=SSE_HEADERS)

    @app.post("/v1/score", response_model=ScoreResponse)
    async def score(body: TextsRequest) -> Response:
        routes.served(body, "score")
        scored = await routes.batcher.submit((body.model, "score"), body.texts())     # batched with others' texts
        return await json_answer({"model": body.model}, scored, lambda result: {     # a `ScoreResult` each
            "tokens": [{"token": t, "logprob": p} for t, p in result[0]], "perplexity": result[1]["perplexity"],
            "bits_per_char": result[1].get("bits_per_char")})


def run_batch(trained, key: tuple, items: list) -> list:
    """One batch of the gathered requests (`seqlab.serve.batching`): for "completions", the choices of
    /v1/completions requests of one shape (`choices.generate`); for "generate", (prompt, options) pairs ->
    (text, warnings) each, decoded together (`TrainedLM.complete`: each row what the prompt gives alone); for
    "score", texts -> (token log probabilities, figures) each, scored together. An ONNX export's runtime runs
    them one by one."""
    if key[1] == "completions":                  # /v1/completions: key = (model, endpoint, top, tokens, echo, n)
        return choices.generate(trained, [p for p, _ in items], [o for _, o in items], *key[2:])
    if key[1] == "generate":
        if hasattr(trained, "complete"):
            return [(c.text, c.warnings) for c in trained.complete([p for p, _ in items], [o for _, o in items])]
        said: list[list[str]] = [[] for _ in items]             # the prompts' warnings, for the clients
        return [(trained.generate(prompt, warn=notes.append, **dataclasses.asdict(options)), notes)
                for (prompt, options), notes in zip(items, said, strict=True)]
    if hasattr(trained, "score_texts"):
        return [(list(zip(s.tokens, s.logprobs, strict=True)), s.figures) for s in trained.score_texts(items)]
    return [(trained.score(text), trained.evaluate_text(text)) for text in items]
