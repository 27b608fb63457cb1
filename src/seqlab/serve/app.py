"""The HTTP API of `seqlab serve`: an ASGI app (FastAPI) over trained run directories of every task.

    app = create_app(["runs/pos", "runs/sst2"])         # uvicorn seqlab.serve... or seqlab serve RUN ...

Each run is loaded once through the registry (`seqlab.load`) and named by its directory's name. The
endpoints are the task families' (each family's `serve` part adds its own: a language model answers
/v1/generate and /v1/score, a tagger /v1/tag, a classifier /v1/classify, a sequence-to-sequence model
/v1/translate and /v1/summarize); this module holds what they share.
Inference runs on one thread of its own (`seqlab-inference`), so a slow request does not block the event
loop, and PyTorch is called from one thread only: from the many threads of a pool, each thread grew its own
memory (allocator arenas, OpenMP teams) and the server's memory kept growing under load.

With `runtime="onnx"` the directories are ONNX exports (`seqlab export RUN --format onnx`), served on
onnxruntime without PyTorch on the request path (`seqlab.serve.onnx`).

Every problem with a request is a 4xx answer with one line, {"error": "..."}, and the server goes on:
malformed JSON (400), an unknown or misspelt field or a value out of range (422), a body, text, list,
max_tokens or beam over the limits (413 for the body, 422 for the rest), an unknown model (404), an
endpoint the model's family does not answer (400), a missing or wrong API key (401), and anything the
model refuses (a prompt longer than its context, ...: 422).
"""

from __future__ import annotations

import hmac
import json
import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

import seqlab.serve.schemas as schemas
from seqlab.errors import SeqlabError
from seqlab.registry import FAMILIES, load, run_family
from seqlab.serve.batching import Batcher
from seqlab.serve.limits import API_KEY_VARIABLE, ServeLimits
from seqlab.serve.metrics import Metrics, MetricsMiddleware
from seqlab.serve.routes import Routes
from seqlab.serve.served import Served
from seqlab.version import __version__


def load_runs(runs: Iterable[str | Path], device: str = "cpu", runtime: str = "torch",
              threads: int = 0) -> dict[str, Served]:
    """Each run directory loaded, by its name; two runs of one name are refused. With `runtime="onnx"`, each
    is an export directory run on onnxruntime with `threads` per graph (0: its default)."""
    if runtime == "onnx":
        from seqlab.serve.onnx import load_exports

        return load_exports(runs, threads)
    if runtime != "torch":
        raise SeqlabError(f"runtime {runtime!r}: choose torch or onnx")
    from seqlab.info import run_info, summary

    served: dict[str, Served] = {}
    for run in runs:
        run_dir = Path(run)
        name = run_dir.resolve().name
        if (run_dir / "manifest.json").exists() and not (run_dir / "model.safetensors").exists():
            raise SeqlabError(f"{run_dir} is an ONNX export, not a run directory: serve it with --runtime onnx")
        if name in served:
            raise SeqlabError(f"two runs are named {name!r} ({served[name].run_dir} and {run_dir}): the API names "
                              "a model by its directory's name; rename one")
        family = run_family(run_dir)
        served[name] = Served(name, family.name, load(run_dir, device), run_dir, family.title,
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
    metrics = Metrics({"/", "/healthz", "/metrics", "/v1/models", *(f"/v1/{e}" for family in FAMILIES.values()
                                                                   for e in family.endpoints)})
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    inference = ThreadPoolExecutor(max_workers=1, thread_name_prefix="seqlab-inference")
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

    add_error_handlers(app)
    routes = Routes(models, limits, [Depends(authorized)], inference, batcher)

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

    @app.get("/v1/models", response_model=schemas.ModelsResponse, dependencies=routes.dependencies)
    def list_models() -> schemas.ModelsResponse:
        return schemas.ModelsResponse(models=[m.info() for m in models.values()])

    for family in FAMILIES.values():                      # each family's endpoints
        family.part("serve").add_routes(app, routes)
    return app


def run_batch(models: dict[str, Served], key: tuple, items: list) -> list:
    """One forward pass over the gathered texts of a batch (`Batcher`): `key` is (model, endpoint, options),
    and the model's family runs it (its `serve` part's `run_batch`)."""
    served = models[key[0]]
    return FAMILIES[served.task].part("serve").run_batch(served.trained, key, items)


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
