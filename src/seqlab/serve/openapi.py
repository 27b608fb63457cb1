"""The OpenAPI document of `seqlab serve`, true to what the server answers, and its page, /docs, served from
files the package ships (Swagger UI, `static/vendor/swagger-ui/`), so that it works on a machine without
internet.

    app = FastAPI(..., docs_url=None, redoc_url=None)
    add_docs(app, secured=api_key is not None, limits=limits)   # GET /docs, and app.openapi() made honest

FastAPI's own document declares one error, its {"detail": [...]} validation error (422), which this server
never sends. `honest` rewrites it from what every route shares, not route by route, so that an endpoint a
family adds tomorrow is described as truly as today's: each operation declares every error status it can
give, with the schema its route answers in (`schemas.Error`, {"error": "one line"}, or on the OpenAI-compatible
routes, `schemas.OPENAI_ROUTES`, OpenAI's `schemas.OpenAIError`); with an API key, the bearer security scheme
and its requirement on every /v1 operation (Swagger UI's Authorize button); an operation whose request has
a `stream` field answers server-sent events (text/event-stream) too; and every request field bounded by a limit
of the server (`schemas.limited`) declares it with this server's value (`declare_limits`), so that a request the
document allows is one the server's checks allow (but what only the model can tell: a prompt longer than its
context, a text without a word; and an integer written 5.0, which JSON Schema counts as an integer and the server
refuses as a client's mistake).

A 500 is not declared: it is never meant (a bug), and the tests fail on one.
"""

from __future__ import annotations

import copy
import json

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from pydantic.json_schema import models_json_schema

import seqlab.serve.schemas as schemas
from seqlab.serve.limits import ServeLimits
from seqlab.serve.shapes import openai_route

SWAGGER_UI_VERSION = "5.35.0"           # static/vendor/swagger-ui/README.md: where the files come from
VENDOR = "/static/vendor/swagger-ui"    # where the app's /static mount serves them
SECURITY_SCHEME = "HTTPBearer"

# What each error status means, on any route that can give it (`declared` says which can).
ERRORS = {
    400: "the body is not valid JSON, or it asks what this server or model does not do (an endpoint of another "
         "task's models, an option not supported)",
    401: "the API key is missing or wrong: send the header 'Authorization: Bearer KEY'",
    404: "no model of the name the request gives (GET /v1/models lists them)",
    408: "the request's headers or body took longer to arrive than the server's limit (--header-timeout, "
         "--body-timeout)",
    413: "the body is over the server's limit (--max-body-bytes)",
    422: "a field is missing, misspelt, of the wrong type (an integer field takes 5, not 5.0, which JSON Schema's "
         "integer allows, nor \"5\") or out of range, a text or list is over a limit, or the model refuses the "
         "request (a prompt longer than its context, a text without a word, ...)",
    431: "the request's URL and headers are over the server's limits (--max-header-bytes, --max-headers)",
    504: "the request took longer than the server's limit (--request-timeout); its work was stopped",
}

# The 200 of a streaming operation: text/event-stream without a schema, since OpenAPI 3.1 has no way to describe
# the events that tools read alike (one reads a schema there as the whole text, another as each event's).
SSE = ('; with "stream": true, server-sent events (text/event-stream): one `data: {JSON}` line per piece, then '
       "`data: [DONE]`")

# Swagger UI's page: everything from this server (a second guard, beside the files being local).
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
                           "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'")


def add_docs(app: FastAPI, secured: bool, limits=None) -> None:
    """GET /docs (Swagger UI from the package's files) and `app.openapi()` rewritten by `honest`; `secured`: the
    server needs an API key on /v1; `limits`: its `ServeLimits` (the defaults when None)."""
    build = app.openapi                 # FastAPI's own, which caches what it returns in app.openapi_schema

    def openapi() -> dict:
        if app.openapi_schema is None:
            app.openapi_schema = honest(build(), secured, limits or ServeLimits())
        return app.openapi_schema

    app.openapi = openapi

    @app.get("/docs", include_in_schema=False)
    async def docs(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")    # behind a proxy that serves the app under a prefix
        page = get_swagger_ui_html(openapi_url=root + app.openapi_url, title=f"{app.title}: the HTTP API",
                                   swagger_js_url=f"{root}{VENDOR}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{root}{VENDOR}/swagger-ui.css",
                                   swagger_favicon_url=f"{root}{VENDOR}/favicon-32x32.png",
                                   swagger_ui_parameters={"validatorUrl": None})
        page.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
        return page


def honest(document: dict, secured: bool, limits: ServeLimits) -> dict:
    """`document` (FastAPI's) with every operation's error statuses and schemas, the bearer scheme when
    `secured`, text/event-stream on the streaming operations, and the request fields' bounds from `limits`
    (`declare_limits`); a new dict."""
    document = copy.deepcopy(document)
    components = document.setdefault("components", {})
    shapes = components.setdefault("schemas", {})
    declare_limits(shapes, limits)
    _, definitions = models_json_schema([(schemas.Error, "validation"), (schemas.OpenAIError, "validation")],
                                        ref_template="#/components/schemas/{model}")
    shapes.update(definitions["$defs"])
    if secured:
        components["securitySchemes"] = {SECURITY_SCHEME: {
            "type": "http", "scheme": "bearer",
            "description": "the server's API key (seqlab serve --api-key, or SEQLAB_API_KEY), on every /v1 request"}}
    for path, operations in document.get("paths", {}).items():
        for operation in operations.values():
            body = request_schema(operation, shapes)
            responses = operation.setdefault("responses", {})
            responses.pop("422", None)                           # FastAPI's {"detail": [...]}: never sent here
            shape = "OpenAIError" if openai_route(path) else "Error"
            own = [int(status) for status in responses if status.isdigit() and int(status) in ERRORS]
            for status in sorted({*declared(path, operation, body, secured), *own}):
                responses[str(status)] = error_response(status, shape)
            if secured and path.startswith("/v1/"):
                operation["security"] = [{SECURITY_SCHEME: []}]
            if "stream" in body.get("properties", {}):
                ok = responses.setdefault("200", {"description": "Successful Response"})
                ok.setdefault("content", {})["text/event-stream"] = {}
                ok["description"] = ok.get("description", "Successful Response").split(";")[0] + SSE
            operation["responses"] = dict(sorted(responses.items()))
    unused(shapes, ("HTTPValidationError", "ValidationError"), document)
    document["info"]["license"] = {"name": "MIT", "identifier": "MIT"}
    return document


def declare_limits(shapes: dict, limits: ServeLimits) -> None:
    """Each request field that `schemas.limited` marks, its mark replaced by the bounds `limits` give it, as
    `schemas.over_limit` checks them: max_chars the maxLength of its strings (a list's too), max_items the
    maxItems of its lists, another limit an integer's maximum; with `per`, one `if`/`then` for each number of
    texts k of the other field where the integer's maximum (limit // k) drops."""
    for shape in shapes.values():
        for name, field in shape.get("properties", {}).items():
            marker = field.pop(schemas.LIMIT, None)
            if marker is None:
                continue
            for limit_name in marker["limits"]:
                bound(field, limit_name, getattr(limits, limit_name))
                default = field.get("default")
                if type(default) is int and limit_name != "max_chars" and not marker.get("per"):
                    field["default"] = min(default, getattr(limits, limit_name))    # a default over it: the limit
            if marker.get("per"):
                (limit_name,) = marker["limits"]
                top, per = getattr(limits, limit_name), marker["per"]
                shape.setdefault("allOf", []).extend(
                    {"if": {"properties": {per: {"type": "array", "minItems": k}}, "required": [per]},
                     "then": {"properties": {name: {"maximum": top // k}}}}
                    for k in range(2, top + 1) if top // k < top // (k - 1))


def bound(schema: dict, limit_name: str, limit: int) -> None:
    """`schema` (and each member of its anyOf) bounded by the server's limit `limit_name` (see `declare_limits`)."""
    for member in schema.get("anyOf", []):
        bound(member, limit_name, limit)
    kind = schema.get("type")
    if kind == "string" and limit_name == "max_chars":
        schema["maxLength"] = min(limit, schema.get("maxLength", limit))
    elif kind == "array":
        if limit_name == "max_items":
            schema["maxItems"] = min(limit, schema.get("maxItems", limit))
        bound(schema.get("items", {}), limit_name, limit)
    elif kind == "integer" and limit_name != "max_chars":
        schema["maximum"] = min(limit, schema.get("maximum", limit))
        if schema.get("exclusiveMaximum", limit + 1) <= limit:
            schema["maximum"] = min(schema["maximum"], schema.pop("exclusiveMaximum") - 1)
        schema.pop("exclusiveMaximum", None)


def declared(path: str, operation: dict, body: dict, secured: bool) -> list[int]:
    """The error statuses an operation on `path` can give: 408, 413 and 431 on every one (the HTTP server's
    limits and the body's, checked before any route); with a JSON body 400 and 422; 404 when the body or the
    path names a model; on /v1, 401 when `secured` and 504 (the request's deadline). A route declares any other
    it gives in its `responses` (`responses={400: {}}`: GET /v1/explain/{model} of a family without views),
    which `honest` writes as these are."""
    statuses = [408, 413, 431]
    if body:
        statuses += [400, 422]
    if "model" in body.get("properties", {}) or any(p.get("in") == "path" for p in operation.get("parameters", [])):
        statuses.append(404)
    if path.startswith("/v1/"):
        statuses += ([401] if secured else []) + [504]
    return sorted(statuses)


def error_response(status: int, shape: str) -> dict:
    """The response object of an error `status` whose body is the schema `shape`."""
    response = {"description": ERRORS[status],
                "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{shape}"}}}}
    if status == 401:
        response["headers"] = {"WWW-Authenticate": {"description": "Bearer", "schema": {"type": "string"}}}
    return response


def request_schema(operation: dict, shapes: dict) -> dict:
    """The JSON schema of an operation's JSON body ({} when it has none), its $ref followed."""
    schema = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
    while "$ref" in schema:
        schema = shapes.get(schema["$ref"].rsplit("/", 1)[-1], {})
    return schema


def unused(shapes: dict, names: tuple[str, ...], document: dict) -> None:
    """Drop the schemas `names` from `shapes` once nothing in `document` refers to them."""
    for name in names:
        if name in shapes and f'"#/components/schemas/{name}"' not in json.dumps(document):
            del shapes[name]
