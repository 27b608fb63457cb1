"""The HTTP API of `seqlab serve`: an ASGI app (FastAPI) over trained run directories of every task.

    app = create_app(["runs/pos", "runs/sst2"])         # uvicorn seqlab.serve... or seqlab serve RUN ...

Each run is loaded once through the registry (`seqlab.load`) and named by its directory's name. The
endpoints follow the task families: a language model answers /v1/generate and /v1/score, a tagger
/v1/tag, a classifier /v1/classify, a sequence-to-sequence model /v1/translate and /v1/summarize.
Inference runs on one thread of its own (`seqlab-inference`), so a slow request does not block the event
loop, and PyTorch is called from one thread only: from the many threads of a pool, each thread grew its own
memory (allocator arenas, OpenMP teams) and the server's memory kept growing under load.

With `runtime="onnx"` the directories are ONNX exports (`seqlab export RUN --format onnx`), served on
onnxruntime without PyTorch on the request path (`seqlab.serve.onnx_models`).

Every problem with a request is a 4xx answer with one line, {"error": "..."}, and the server goes on:
malformed JSON (400), an unknown or misspelt field or a value out of range (422), a body, text, list,
max_tokens or beam over the limits (413 for the body, 422 for the rest), an unknown model (404), an
endpoint the model's task does not answer (400), a missing or wrong API key (401), and anything the
model refuses (a prompt longer than its context, ...: 422).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

import seqlab.serve.schemas as schemas
from seqlab.errors import SeqlabError
from seqlab.serve.batching import Batcher
from seqlab.serve.limits import API_KEY_VARIABLE, ServeLimits
from seqlab.serve.metrics import Metrics, MetricsMiddleware
from seqlab.serve.served import ENDPOINTS, Served, final_metrics  # noqa: F401  (final_metrics: re-exported)
from seqlab.version import __version__


def load_runs(runs: Iterable[str | Path], device: str = "cpu", runtime: str = "torch",
              threads: int = 0) -> dict[str, Served]:
    """Each run directory loaded, by its name; two runs of one name are refused. With `runtime="onnx"`, each
    is an export directory run on onnxruntime with `threads` per graph (0: its default)."""
    if runtime == "onnx":
        from seqlab.serve.onnx_models import load_exports

        return load_exports(runs, threads)
    if runtime != "torch":
        raise SeqlabError(f"runtime {runtime!r}: choose torch or onnx")
    from seqlab.info import run_info, summary
    from seqlab.registry import load, run_pipeline

    served: dict[str, Served] = {}
    for run in runs:
        run_dir = Path(run)
        name = run_dir.resolve().name
        if (run_dir / "manifest.json").exists() and not (run_dir / "model.safetensors").exists():
            raise SeqlabError(f"{run_dir} is an ONNX export, not a run directory: serve it with --runtime onnx")
        if name in served:
            raise SeqlabError(f"two runs are named {name!r} ({served[name].run_dir} and {run_dir}): the API names "
                              "a model by its directory's name; rename one")
        pipeline = run_pipeline(run_dir)
        served[name] = Served(name, pipeline.name, load(run_dir, device), run_dir, pipeline.title,
                              summary(run_info(run_dir)))
    if not served:
        raise SeqlabError("seqlab serve needs at least one run directory")
    return served


def create_app(runs: Iterable[str | Path] | dict[str, Served], limits: ServeLimits | None = None,
               api_key: str | None = None, device: str = "cpu", runtime: str = "torch") -> FastAPI:
    """The app serving `runs` (run directories, export directories with `runtime="onnx"`, or models loaded
    already by `load_runs`). With `api_key` (or the SEQLAB_API_KEY environment variable) every /v1 request
    needs `Authorization: Bearer KEY`."""
    models = runs if isinstance(runs, dict) else load_runs(runs, device, runtime)
    limits = limits or ServeLimits()
    api_key = api_key or os.environ.get(API_KEY_VARIABLE) or None
    app = FastAPI(title="seqlab", version=__version__,
                  description="The models of Jurafsky & Martin's SLP chapters, trained with seqlab, over HTTP.")
    app.add_middleware(BodyLimit, limit=limits.max_body_bytes)
    metrics = Metrics({"/", "/healthz", "/metrics", "/v1/models", *(f"/v1/{e}" for es in ENDPOINTS.values()
                                                                   for e in es)})
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    inference = ThreadPoolExecutor(max_workers=1, thread_name_prefix="seqlab-inference")

    async def infer(function, *args):
        return await asyncio.get_running_loop().run_in_executor(inference, function, *args)

    batcher = Batcher(lambda key, items: run_batch(models, key, items), limits.max_batch, limits.max_wait_ms / 1000,
                      inference, observe=lambda key, size: metrics.batch(f"/v1/{key[1]}", size))
    app.state.models, app.state.limits, app.state.metrics = models, limits, metrics

    async def authorized(request: Request) -> None:       # async: a plain def would hop to a worker thread
        if api_key is None:
            return
        given = request.headers.get("authorization", "")
        if not (given.startswith("Bearer ") and hmac.compare_digest(given[7:].encode(), api_key.encode())):
            raise HTTPException(401, "a valid API key is needed: send the header 'Authorization: Bearer KEY'",
                                headers={"WWW-Authenticate": "Bearer"})

    def served(request: schemas.Request, endpoint: str) -> Served:
        """The request's model, checked to answer `endpoint`, and its texts checked against the limits."""
        if request.model not in models:
            raise HTTPException(404, f"no model named {request.model!r}; this server has "
                                     f"{', '.join(sorted(models))} (GET /v1/models)")
        model = models[request.model]
        if endpoint not in ENDPOINTS[model.task]:
            answers = " and ".join(f"POST /v1/{e}" for e in ENDPOINTS[model.task])
            raise HTTPException(400, f"model {request.model!r} is {model.title or 'a ' + model.task + ' model'}, "
                                     f"which does not answer /v1/{endpoint}: use {answers}")
        texts = request.texts() if hasattr(request, "text") else [getattr(request, "prompt", "")]
        if len(texts) > limits.max_items:
            raise HTTPException(422, f"{len(texts)} texts in one request; the limit is {limits.max_items}")
        if not texts:
            raise HTTPException(422, "the request has no text: give one text or a non-empty list")
        for i, text in enumerate(texts):
            if len(text) > limits.max_chars:
                raise HTTPException(422, f"text {i + 1} has {len(text):,} characters; the limit is "
                                         f"{limits.max_chars:,}")
        return model

    add_error_handlers(app)
    v1 = [Depends(authorized)]

    @app.get("/healthz")
    def healthz() -> dict:
        return {"status": "ok", "models": len(models)}

    # The web page at / (static/: HTML, CSS and JavaScript that ask /v1 like any client; no key needed to load it)
    static = Path(__file__).parent / "static"
    app.mount("/static", StaticFiles(directory=static), name="static")

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(static / "index.html")

    @app.get("/metrics", response_class=PlainTextResponse)
    def prometheus() -> PlainTextResponse:
        return PlainTextResponse(metrics.render(), media_type="text/plain; version=0.0.4")

    @app.get("/v1/models", response_model=schemas.ModelsResponse, dependencies=v1)
    def list_models() -> schemas.ModelsResponse:
        return schemas.ModelsResponse(models=[m.info() for m in models.values()])

    @app.post("/v1/generate", response_model=schemas.GenerateResponse, dependencies=v1,
              responses={200: {"content": {"text/event-stream": {}}}})
    async def generate(body: schemas.GenerateRequest, request: Request):
        model = served(body, "generate")
        if body.max_tokens > limits.max_tokens:
            raise HTTPException(422, f"max_tokens {body.max_tokens} is over the limit of {limits.max_tokens}")
        if body.beam > limits.max_beam:
            raise HTTPException(422, f"beam {body.beam} is over the limit of {limits.max_beam}")
        options = body.model_dump(exclude={"model", "prompt", "stream"})
        pieces = model.trained.stream(body.prompt, **options)
        first = await infer(next, pieces, None)              # the options and the prompt fail here, as a 4xx
        if not body.stream:
            rest = await infer(lambda: "".join(pieces))
            return schemas.GenerateResponse(model=body.model, text=(first or "") + rest)
        return StreamingResponse(events(first, pieces, request, infer, lambda: inference.submit(pieces.close)),
                                 media_type="text/event-stream")

    @app.post("/v1/score", response_model=schemas.ScoreResponse, dependencies=v1)
    async def score(body: schemas.TextsRequest) -> schemas.ScoreResponse:
        lm = served(body, "score").trained

        def scored(text: str) -> schemas.ScoreResult:
            figures = lm.evaluate_text(text)
            return schemas.ScoreResult(tokens=[schemas.TokenScore(token=t, logprob=p) for t, p in lm.score(text)],
                                       perplexity=figures["perplexity"], bits_per_char=figures.get("bits_per_char"))

        return schemas.ScoreResponse(model=body.model, results=[await infer(scored, t) for t in body.texts()])

    @app.post("/v1/tag", response_model=schemas.TagResponse, dependencies=v1)
    async def tag(body: schemas.TextsRequest) -> schemas.TagResponse:
        from seqlab.data.tags import spans

        tagger = served(body, "tag").trained
        sentences = [text.split() for text in body.texts()]
        results = []
        for tokens, tagged in zip(sentences, await batcher.submit((body.model, "tag"), sentences), strict=True):
            tags = [t for t, _ in tagged]
            entities = None if tagger.scheme == "none" else [
                schemas.Entity(type=kind, start=start, end=end, text=" ".join(tokens[start:end]))
                for kind, start, end in spans(tags)]
            results.append(schemas.TagResult(tokens=tokens, tags=tags, probabilities=[p for _, p in tagged],
                                             entities=entities))
        return schemas.TagResponse(model=body.model, results=results)

    @app.post("/v1/classify", response_model=schemas.ClassifyResponse, dependencies=v1)
    async def classify(body: schemas.TextsRequest) -> schemas.ClassifyResponse:
        served(body, "classify")
        predictions = await batcher.submit((body.model, "classify"), body.texts())
        return schemas.ClassifyResponse(model=body.model, results=[
            schemas.ClassifyResult(label=p.label, probability=p.probability, probabilities=p.probabilities)
            for p in predictions])

    async def decode(body: schemas.DecodeRequest, endpoint: str) -> schemas.DecodeResponse:
        served(body, endpoint)
        if body.beam > limits.max_beam:
            raise HTTPException(422, f"beam {body.beam} is over the limit of {limits.max_beam}")
        key = (body.model, endpoint, body.beam, body.max_length, body.length_penalty, body.attention)
        outputs = await batcher.submit(key, body.texts())
        return schemas.DecodeResponse(model=body.model, results=[
            schemas.DecodeResult(text=o.text, tokens=o.tokens, score=o.score,
                                 source_tokens=o.source_tokens if body.attention else None,
                                 attention=o.attention if body.attention else None)
            for o in outputs])

    @app.post("/v1/translate", response_model=schemas.DecodeResponse, dependencies=v1)
    async def translate(body: schemas.DecodeRequest) -> schemas.DecodeResponse:
        return await decode(body, "translate")

    @app.post("/v1/summarize", response_model=schemas.DecodeResponse, dependencies=v1)
    async def summarize(body: schemas.DecodeRequest) -> schemas.DecodeResponse:
        return await decode(body, "summarize")

    return app


def run_batch(models: dict[str, Served], key: tuple, items: list) -> list:
    """One forward pass over the gathered texts of a batch (`Batcher`): `key` is (model, endpoint, options)."""
    name, endpoint, *options = key
    trained = models[name].trained
    if endpoint == "classify":
        return trained.classify(items)
    if endpoint == "tag":
        return trained.tag_sentences(items)
    beam, max_length, length_penalty, attention = options
    return trained.generate(items, beam=beam, max_length=max_length, length_penalty=length_penalty,
                            attention=attention)


async def events(first: str | None, pieces, request: Request, infer, close):
    """Server-sent events: each piece of text as `data: {"text": ...}`, then `data: [DONE]`; a client that
    goes away stops the generation: `close()` closes the generator on the inference thread, after the step
    it may be running there (closing it from here while it runs would fail)."""
    try:
        piece = first
        while piece is not None:
            yield f"data: {json.dumps({'text': piece}, ensure_ascii=False)}\n\n"
            if await request.is_disconnected():
                return
            piece = await infer(next, pieces, None)
        yield "data: [DONE]\n\n"
    finally:
        close()


def add_error_handlers(app: FastAPI) -> None:
    """Every error as {"error": one line}: validation (422, malformed JSON 400), HTTP errors, SeqlabError (422)."""

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        problem = error.errors()[0] if error.errors() else {}
        if problem.get("type") == "json_invalid":
            return JSONResponse({"error": f"the body is not valid JSON ({problem.get('ctx', {}).get('error', '')})"},
                                status_code=400)
        where = ".".join(str(part) for part in problem.get("loc", ()) if part != "body") or "the body"
        message = problem.get("msg", "invalid request")
        if problem.get("type") == "missing":
            message = "is required"
        elif problem.get("type") == "extra_forbidden":
            message = "is not a field of this request"
        return JSONResponse({"error": f"{where}: {message}"}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": str(error.detail)}, status_code=error.status_code,
                            headers=getattr(error, "headers", None))

    @app.exception_handler(SeqlabError)
    async def refused(request: Request, error: SeqlabError) -> JSONResponse:
        return JSONResponse({"error": " ".join(str(error).split())}, status_code=422)


class BodyTooLarge(Exception):
    pass


class BodyLimit:
    """ASGI middleware: a request body over `limit` bytes gets 413 before the app reads it all (by its
    Content-Length, or counted as it arrives)."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope.get("headers") or ()).get(b"content-length")
        if length is not None:
            if not length.isdigit():
                return await self.reply(send, 400, "the Content-Length header is not a number")
            if int(length) > self.limit:
                return await self.reply(send, 413, f"the body is {int(length):,} bytes; the limit is {self.limit:,}")
        received = 0
        started = False

        async def counted():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge
            return message

        async def sending(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, sending)
        except BodyTooLarge:
            if not started:
                await self.reply(send, 413, f"the body is over the limit of {self.limit:,} bytes")

    @staticmethod
    async def reply(send, status: int, message: str) -> None:
        body = json.dumps({"error": message}).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
