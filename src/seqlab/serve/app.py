"""The HTTP API of `seqlab serve`: an ASGI app (FastAPI) over trained run directories of every task.

    app = create_app(["runs/pos", "runs/sst2"])         # uvicorn seqlab.serve... or seqlab serve RUN ...

Each run is loaded once through the registry (`seqlab.load`) and named by its directory's name. The
endpoints are the task families' (each family's `serve` part adds its own: a language model answers
/v1/generate and /v1/score, a tagger /v1/tag, a classifier /v1/classify, a sequence-to-sequence model
/v1/translate and /v1/summarize, a language model OpenAI's POST /v1/completions too); this module holds what they
share, OpenAI's GET /v1/models, which lists every model, and GET /v1/ui, the web page's forms as the families
declare them (`seqlab.serve.ui`).
Inference runs on one thread of its own (`seqlab.serve.scheduler`: a queue per model taken in turn, every search
yielding at each step, work stopped at the request's deadline or when its client goes), so a slow request does
not block the event loop, and PyTorch is called from one thread only: from the many threads of a pool, each
thread grew its own memory (allocator arenas, OpenMP teams) and the server's memory kept growing under load.

With `runtime="onnx"` the directories are ONNX exports (`seqlab export RUN --format onnx`), served on
onnxruntime without PyTorch on the request path (`seqlab.serve.onnx`).

Every problem with a request is a 4xx answer with one line, {"error": "..."}, and the server goes on:
malformed JSON (400), an unknown or misspelt field or a value out of range (422), a body, text, list,
max_tokens or beam over the limits (413 for the body, 422 for the rest), an unknown model (404), an
endpoint the model's family does not answer (400), a missing or wrong API key (401), and anything the
model refuses (a prompt longer than its context, ...: 422), a request past --request-timeout (504). On the
OpenAI-compatible routes the error is OpenAI's {"error": {"message", "type", "param", "code"}}
(`shapes.error_body`).
"""

from __future__ import annotations

import hmac
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import seqlab.serve.schemas as schemas
import seqlab.serve.shapes as shapes
from seqlab.config import OptionError
from seqlab.errors import SeqlabError
from seqlab.registry import FAMILIES, load, run_family
from seqlab.serve.batching import Batcher, Key
from seqlab.serve.explore import add_routes as add_explore_routes
from seqlab.serve.limits import API_KEY_VARIABLE, ServeLimits, available_cores
from seqlab.serve.metrics import Metrics, MetricsMiddleware
from seqlab.serve.openapi import add_docs
from seqlab.serve.routes import Refused, Routes
from seqlab.serve.scheduler import Cancelled, Scheduler, Watch
from seqlab.serve.served import Served
from seqlab.serve.ui import forms
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
               api_key: str | None = None, device: str = "cpu", runtime: str = "torch",
               cors_origins: Iterable[str] = (), read_threads: int = 0) -> FastAPI:
    """The app serving `runs` (run directories, export directories with `runtime="onnx"`, or models loaded
    already by `load_runs`). With `api_key` (or the SEQLAB_API_KEY environment variable) every /v1 request
    needs `Authorization: Bearer KEY`. `cors_origins`: the web origins ("https://app.example.org") whose pages
    may call the API from a browser (CORS; none by default). `read_threads`: the CPU threads that read a batch's
    prompts (0: every core; `seqlab.decoding.core.set_read_threads`)."""
    cors_origins = check_origins(cors_origins)
    models = runs if isinstance(runs, dict) else load_runs(runs, device, runtime)
    limits = limits or ServeLimits()
    api_key = api_key or os.environ.get(API_KEY_VARIABLE) or None
    app = FastAPI(title="seqlab", version=__version__, docs_url=None, redoc_url=None,    # /docs: add_docs
                  description="The models of Jurafsky & Martin's SLP chapters, trained with seqlab, over HTTP.")
    add_docs(app, secured=api_key is not None, limits=limits)   # the OpenAPI document true to the server, /docs
    app.add_middleware(BodyLimit, limit=limits.max_body_bytes)
    app.add_middleware(KeyCheck, key=api_key)           # the key before anything reads a /v1 request's body
    metrics = Metrics(app.router.routes)                # each request counted under its route's template
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    app.add_middleware(Watch, timeout=limits.request_timeout)     # each /v1 request a job: its deadline, its client
    inference = Scheduler(read_threads=read_threads or available_cores(),    # one inference thread, shared fairly
                          slice_seconds=limits.slice_ms / 1000)
    app.state.scheduler = inference
    batcher = Batcher(lambda key, items: run_batch(models, key, items), limits.max_batch, limits.max_wait_ms / 1000,
                      inference, observe=lambda key, size: metrics.batch(f"/v1/{key[1]}", size))
    app.state.models, app.state.limits, app.state.metrics = models, limits, metrics

    add_error_handlers(app)
    routes = Routes(models, limits, inference, batcher)           # the API key: KeyCheck, before the routes

    @app.get("/healthz")
    def healthz() -> dict[str, Any]:
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

    add_model_routes(app, routes)                         # OpenAI's GET /v1/models
    add_explore_routes(app, routes)                       # the explorer's /v1/explain
    for family in FAMILIES.values():                      # each family's endpoints (the LM's OpenAI ones too)
        family.part("serve").add_routes(app, routes)
    page_forms = forms(form for family in FAMILIES.values() for form in family.part("serve").FORMS)

    @app.get("/v1/ui", include_in_schema=False)
    def ui() -> dict[str, Any]:                                     # the page's forms, as the families declare them
        return page_forms
    if cors_origins:                                      # outermost: a preflight carries no key
        app.add_middleware(CORS, allow_origins=cors_origins, allow_methods=list(CORS_METHODS),
                           allow_headers=list(CORS_HEADERS))
    return app


def add_model_routes(app: FastAPI, routes: Routes) -> None:
    """GET /v1/models and GET /v1/models/{model_id}: OpenAI's {"object": "list", "data": [...]} (`Served.info`)."""

    @app.get("/v1/models", response_model=schemas.ModelsResponse)
    def list_models() -> schemas.ModelsResponse:
        return schemas.ModelsResponse(data=[m.info(routes.limits) for m in routes.models.values()])

    @app.get("/v1/models/{model_id}", response_model=schemas.ModelInfo)
    def retrieve_model(model_id: str) -> schemas.ModelInfo:
        return routes.named(model_id).info(routes.limits)


CORS_METHODS = ("GET", "POST")                      # what a page of an allowed origin may send (--cors-origin)
CORS_HEADERS = ("Authorization", "Content-Type")


class CORS(CORSMiddleware):
    """Starlette's CORS middleware, whose refusal of a preflight (an origin not among --cors-origin, a method or a
    header not allowed) is an error answer like every other (`shapes.error_body`: JSON in the route's shape,
    one line saying what was refused), not Starlette's plain text."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        if scope["type"] != "http" or scope["method"] != "OPTIONS" or "origin" not in headers or \
                "access-control-request-method" not in headers:
            return await super().__call__(scope, receive, send)
        response = self.preflight_response(request_headers=headers)
        if response.status_code == 400:                # Starlette's "Disallowed CORS origin, method, headers"
            refused = bytes(response.body).decode().removeprefix("Disallowed CORS ").split(", ")
            why = {"origin": f"the origin {headers['origin']!r} is not one this server lets call it (--cors-origin)",
                   "method": f"the method {headers['access-control-request-method']!r} is not allowed (only "
                             f"{' and '.join(CORS_METHODS)})",
                   "headers": f"the headers {headers.get('access-control-request-headers', '')!r} are not all "
                              f"allowed (only {', '.join(CORS_HEADERS)})",
                   "private-network": "a request from a public page to a private network is not allowed"}
            message = "a browser may not send this request (CORS): " + "; ".join(why.get(r, r) for r in refused)
            kept = {k: v for k, v in response.headers.items() if k not in ("content-length", "content-type")}
            response = error_response(Request(scope), 400, message, code="cors_refused", headers=kept)
        await response(scope, receive, send)


def check_origins(origins: Iterable[str]) -> list[str]:
    """CORS origins, each "*" or a scheme and host (and port) without a path: "https://app.example.org"."""
    checked = []
    for origin in origins:
        scheme, _, host = origin.partition("://")
        if origin != "*" and (scheme not in ("http", "https") or not host or "/" in host or host != host.strip()):
            raise SeqlabError(f"--cors-origin {origin!r}: give an origin as a browser sends it, a scheme and host "
                              "(and port) without a path, e.g. https://app.example.org or http://localhost:3000; or *")
        checked.append(origin)
    return checked


def run_batch(models: dict[str, Served], key: Key, items: list[Any]) -> list[Any]:
    """One forward pass over the gathered texts of a batch (`Batcher`): `key` is (model, endpoint, options),
    and the model's family runs it (its `serve` part's `run_batch`)."""
    served = models[key[0]]
    return FAMILIES[served.task].part("serve").run_batch(served.trained, key, items)


def error_response(request: Request, status: int, message: str, param: str | None = None, code: str | None = None,
                   headers: dict[str, Any] | None = None) -> JSONResponse:
    """An error answer in the shape of the request's route (`shapes.error_body`)."""
    return JSONResponse(shapes.error_body(request.url.path, status, message, param, code), status_code=status,
                        headers=headers)


def add_error_handlers(app: FastAPI) -> None:
    """Every error as {"error": one line} (OpenAI's shape on its routes, `shapes.error_body`): validation (422,
    malformed JSON 400), HTTP errors, SeqlabError (422), `Refused` (its status, naming its field)."""

    @app.exception_handler(Refused)
    async def refused_field(request: Request, error: Refused) -> JSONResponse:
        return error_response(request, error.status, error.message, error.param, error.code)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        problem = error.errors()[0] if error.errors() else {}
        if problem.get("type") == "json_invalid":
            return error_response(request, 400, "the body is not valid JSON "
                                                f"({problem.get('ctx', {}).get('error', '')})")
        where, message = validation_problem(error.errors())
        return error_response(request, 422, f"{where}: {message}", param=where if where != "the body" else None)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        return error_response(request, error.status_code, str(error.detail), headers=getattr(error, "headers", None))

    @app.exception_handler(SeqlabError)
    async def refused(request: Request, error: SeqlabError) -> JSONResponse:
        if isinstance(error, OptionError):        # the options as a request names them: top_p, not --top-p
            return error_response(request, 422, error.in_api(), param=error.option)
        return error_response(request, 422, str(error))

    @app.exception_handler(Cancelled)
    async def stopped(request: Request, error: Cancelled) -> JSONResponse:
        if error.reason == "deadline":
            limit = f" of {error.timeout:g} s" if error.timeout else ""
            return error_response(request, 504, f"the request took longer than the server's limit{limit} "
                                                "(request_timeout); its work was stopped", code="timeout")
        return error_response(request, 499, "the client closed the connection; the work was stopped")


# what a strict field expects, by pydantic's error type: a value of another JSON type is refused, not converted
EXPECTED = {"int_type": "an integer", "float_type": "a number", "bool_type": "true or false", "string_type": "a string",
            "list_type": "a list", "dict_type": "an object"}
# the tags pydantic puts in an error's location for the members of a union (`text: str | list[str]`)
UNION_MEMBERS = {"str": "a string", "int": "an integer", "float": "a number", "bool": "true or false",
                 "list[str]": "a list of strings", "none": "null"}


def validation_problem(problems: Sequence[dict[str, Any]]) -> tuple[str, str]:
    """The first problem pydantic found in a request, as (where: the field's path or "the body", what is wrong
    in words), the value named when it is short: "max_tokens", 'expects an integer, got "5"'. A union field's
    members are not part of its path: a value no member takes is "text: expects a string or a list of
    strings, got 5"; a value one member took further is named where that member stopped ("text.1"), and one a
    member took but found out of its bounds (an empty list) is named as that member found it."""
    def path(problem: dict[str, Any]) -> list[Any]:
        return [part for part in problem.get("loc", ()) if part != "body" and member(part) is None]

    if not problems:
        return "the body", "invalid request"
    field = path(problems[0])[:1]
    alike = [p for p in problems if path(p)[:1] == field]               # a union's members: one problem each
    bounded = [p for p in alike if p.get("type") in BOUNDS]             # of the member whose type took it
    problem = max(bounded or alike, key=lambda p: len(path(p)))         # else the member that got furthest
    where = ".".join(str(part) for part in path(problem)) or "the body"
    kind, value = problem.get("type"), problem.get("input")
    members = [m for m in (member(part) for p in alike for part in p.get("loc", ())) if m is not None]
    if kind == "missing":
        return where, "is required"
    if kind == "extra_forbidden":
        return where, "is not a field of this request"
    if kind in BOUNDS:
        return where, BOUNDS[kind](value, problem.get("ctx", {}))
    if len(members) > 1 and len(path(problem)) == len(field):        # no member took the value
        expected = " or ".join(members)
        return where, f"expects {expected}, got {shown(value)}"
    if kind in EXPECTED:
        return where, f"expects {EXPECTED[kind]}, got {shown(value)}"
    message = str(problem.get("msg", "invalid value")).replace("Input should be", "must be")
    return where, message + (f", got {shown(value)}" if isinstance(value, (int, float, str)) else "")


def member(part: object) -> str | None:
    """What a union's member takes, in words ("a list of strings"), when `part` of an error's location is the tag
    pydantic gives that member ("list[str]"; "list[constrained-str]", a list of `schemas.Text`); else None."""
    if not isinstance(part, str):
        return None
    return UNION_MEMBERS.get(part.replace("constrained-", ""))


# a string's or a list's length out of its field's bounds (`schemas.Text`, a list of texts, stop strings), by
# pydantic's error type: what is wrong, in words
BOUNDS = {
    "string_too_short": lambda value, ctx: "is an empty string" if ctx.get("min_length") == 1 else
    f"has {len(value):,} characters; at least {ctx.get('min_length')}",
    "string_too_long": lambda value, ctx: f"has {len(value):,} characters; at most {ctx.get('max_length'):,}",
    "too_short": lambda value, ctx: "is an empty list: give at least one" if ctx.get("min_length") == 1 else
    f"has {ctx.get('actual_length')} items; at least {ctx.get('min_length')}",
    "too_long": lambda value, ctx: f"has {ctx.get('actual_length')} items; at most {ctx.get('max_length')}"}


def shown(value: object) -> str:
    """A request's value as JSON, cut short (`"5"`, `true`, `1e+308`), or its kind ("a list", "an object")."""
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


class BodyTooLarge(StarletteHTTPException):
    """A body over the limit, found while the app reads it (a chunked body has no Content-Length): an HTTP
    error, so that FastAPI's body parsing passes it on as the 413 it is (any other exception there is its 400)."""

    def __init__(self, limit: int):
        super().__init__(413, f"the body is over the limit of {limit:,} bytes")


class BodyLimit:
    """ASGI middleware: a request body over `limit` bytes gets 413 before the app reads it all (by its
    Content-Length, or counted as it arrives)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope.get("headers") or ()).get(b"content-length")
        if length is not None:
            if not length.isdigit():
                return await send_error(send, scope["path"], 400, "the Content-Length header is not a number")
            if int(length) > self.limit:
                return await send_error(send, scope["path"], 413,
                                        f"the body is {int(length):,} bytes; the limit is {self.limit:,}")
        received = 0
        started = False

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, sending)
        except BodyTooLarge as error:          # read outside FastAPI's handlers (a middleware): answered here
            if not started:
                await send_error(send, scope["path"], 413, error.detail)


async def send_error(send: Send, path: str, status: int, message: str,
                     headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    """An error answer sent by an ASGI middleware, before the app (and its exception handlers) sees the request,
    in the route's shape (`shapes.error_body`)."""
    body = json.dumps(shapes.error_body(path, status, message)).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


class KeyCheck:
    """ASGI middleware: with an API key, a /v1 request without 'Authorization: Bearer KEY' gets 401 before
    anything reads its body (so a malformed or huge body without the key is a 401 too). The page, /static,
    /docs, /openapi.json, /healthz and /metrics stay open, and so does a CORS preflight (OPTIONS with
    Access-Control-Request-Method: browsers send it without credentials)."""

    message = "a valid API key is needed: send the header 'Authorization: Bearer KEY'"

    def __init__(self, app: ASGIApp, key: str | None) -> None:
        self.app, self.key = app, None if key is None else key.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.key is None or not self.guarded(scope) or self.allowed(scope):
            return await self.app(scope, receive, send)
        await send_error(send, scope["path"], 401, self.message, ((b"www-authenticate", b"Bearer"),))

    @staticmethod
    def guarded(scope: Scope) -> bool:
        path = scope["path"]
        preflight = scope["method"] == "OPTIONS" and any(k == b"access-control-request-method"
                                                         for k, _ in scope["headers"])
        return (path == "/v1" or path.startswith("/v1/")) and not preflight

    def allowed(self, scope: Scope) -> bool:
        assert self.key is not None                        # asked only with a key (__call__)
        given = next((value for name, value in scope["headers"] if name == b"authorization"), b"")
        scheme, _, token = given.partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self.key)
