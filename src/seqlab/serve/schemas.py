"""The JSON of `seqlab serve` that every family shares (each family's `serve` part defines its own requests
and responses): one pydantic model per request and response, so that every field is typed, documented in
the OpenAPI page (/docs) and checked before a model sees it.

A request names its model by its run directory's name (`GET /v1/models` lists them) and takes one text or
a list of texts; the response lists one result per text, in order.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# The routes that speak OpenAI's protocol (`seqlab.serve.compat`; the last two answer only why they are not
# served): their errors are OpenAI's {"error": {"message", "type", "param", "code"}}; every other route's are
# {"error": "one line"}.
OPENAI_ROUTES = ("/v1/models", "/v1/completions", "/v1/chat/completions", "/v1/embeddings")

OPENAI_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                      404: "not_found_error", 408: "timeout_error", 413: "invalid_request_error",
                      422: "invalid_request_error", 429: "rate_limit_error", 504: "timeout_error"}


def openai_route(path: str) -> bool:
    """Whether `path` is one of `OPENAI_ROUTES` or below one (GET /v1/models/ID)."""
    return any(path == route or path.startswith(route + "/") for route in OPENAI_ROUTES)


def error_body(path: str, status: int, message: str, param: str | None = None, code: str | None = None) -> dict:
    """The JSON of an error answer on `path`: {"error": "one line"}, or on the OpenAI-compatible routes
    (`OPENAI_ROUTES`) OpenAI's {"error": {"message", "type", "param", "code"}}."""
    message = " ".join(str(message).split())
    if not openai_route(path):
        return {"error": message}
    kind = OPENAI_ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def option_field(cls, name: str, default=dataclasses.MISSING, description: str = ""):
    """The request field of the option `name` of the config dataclass `cls` (`seqlab.config.option`), with its
    range as the field's bounds (and a float finite): the range the command line and the Python API check, in
    the OpenAPI document too. `default`: the request's (by default the option's); `description`: the request's
    wording (default: the option's help)."""
    f = {f.name: f for f in dataclasses.fields(cls)}[name]
    bounds = {"ge": f.metadata.get("at_least"), "gt": f.metadata.get("above"), "le": f.metadata.get("at_most"),
              "lt": f.metadata.get("below")}
    if isinstance(f.default, float):
        bounds["allow_inf_nan"] = False
    value = f.default if default is dataclasses.MISSING else default
    bounds = {k: v for k, v in bounds.items() if v is not None}
    return Field(value, description=description or f.metadata["help"], **bounds)


class Request(BaseModel):
    """What every request has: the model, and one text or a list of them. Every field is strict: a number is
    a JSON number (a float field also takes an integer), a boolean true or false, a text a string; "5" or true
    for an integer is refused (422), not converted."""

    model_config = ConfigDict(extra="forbid", strict=True)   # a misspelt field is an error, not silently ignored

    model: str = Field(description="the run directory's name (GET /v1/models)")

    def texts(self) -> list[str]:
        text = getattr(self, "text", "")
        return [text] if isinstance(text, str) else list(text)


class TextsRequest(Request):
    text: str | list[str] = Field(description="one text, or a list of texts")


class ModelInfo(BaseModel):
    """One model, as OpenAI's API lists a model (id, object, created, owned_by), then seqlab's own fields."""

    id: str = Field(description="the run (or export) directory's name: the `model` of every request")
    object: Literal["model"] = "model"
    created: int = Field(description="when the run or export directory was last written (Unix time)")
    owned_by: str = "seqlab"
    task: str = Field(description="the task family: lm, tagger, classifier, seq2seq")
    arch: str
    parameters: int
    endpoints: list[str] = Field(description="the POST endpoints that answer it")
    metrics: dict[str, dict] = Field(description="the final figures of each split the run scored")
    summary: str = Field("", description="one sentence on the run: its model, its training data and its final "
                                         "figures (seqlab info RUN tells more)")
    limits: dict[str, int | float | None] = Field(description="the server's limits on one request (`seqlab serve` "
                                                              "options of the same names)")


class ModelsResponse(BaseModel):
    """GET /v1/models: OpenAI's list of models."""

    object: Literal["list"] = "list"
    data: list[ModelInfo]


class Error(BaseModel):
    """An error on a native route (every route but `OPENAI_ROUTES`)."""

    error: str = Field(description="what is wrong, in one line")


class OpenAIErrorDetail(BaseModel):
    message: str = Field(description="what is wrong, in one line")
    type: str = Field(description="invalid_request_error, authentication_error, not_found_error, timeout_error, ...")
    param: str | None = Field(None, description="the request field at fault, when there is one")
    code: str | None = Field(None, description="a short code, when there is one")


class OpenAIError(BaseModel):
    """An error on an OpenAI-compatible route (`OPENAI_ROUTES`), in OpenAI's shape."""

    error: OpenAIErrorDetail
