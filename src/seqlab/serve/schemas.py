"""The JSON of `seqlab serve` that every family shares (each family's `serve` part defines its own requests
and responses): one pydantic model per request and response, so that every field is typed, documented in
the OpenAPI page (/docs) and checked before a model sees it.

A request names its model by its run directory's name (`GET /v1/models` lists them) and takes one text or
a list of texts; the response lists one result per text, in order.

Every limit on a request is declared once, on its field, and both the OpenAPI document and the server's checks
read it there: a fixed one as the field's type (`Text`: not empty; a list of texts: not empty), a limit of the
server (`ServeLimits`: --max-chars, --max-items, --max-tokens, --max-beam, --max-length) as `limited(...)`, which
`over_limit` checks and `seqlab.serve.openapi` writes into the document with the server's values. An integer's
bound above 2**53 - 1 (a seed's 2**63) is lowered to it (`JSON_INTEGER`).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

# The server's own route of OpenAI's protocol (`seqlab.serve.app`); the families add theirs
# (`seqlab.serve.shapes.openai_routes`).
# Their errors are OpenAI's {"error": {"message", "type", "param", "code"}}; every other route's are
# {"error": "one line"}.
OPENAI_ROUTES = ("/v1/models",)

OPENAI_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                      404: "not_found_error", 408: "timeout_error", 413: "invalid_request_error",
                      422: "invalid_request_error", 429: "rate_limit_error", 504: "timeout_error"}


def openai_error(status: int, message: str, param: str | None = None, code: str | None = None) -> dict:
    """The JSON of an error answer on a route of OpenAI's protocol: OpenAI's {"error": {"message", "type",
    "param", "code"}} (which route speaks which shape: `seqlab.serve.shapes`)."""
    kind = OPENAI_ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": " ".join(str(message).split()), "type": kind, "param": param, "code": code}}


def native_error(message: str) -> dict:
    """The JSON of an error answer on seqlab's own routes: {"error": "one line"}."""
    return {"error": " ".join(str(message).split())}


# The largest integer every JSON reader holds exactly (JavaScript's Number.MAX_SAFE_INTEGER, and a JSON Schema
# validator that compares numbers as doubles): an integer field whose bound is above it (a seed's 2**63) is at most
# this, so that the document's bound means the same to every client (2**63 - 1 is 2**63 as a double).
JSON_INTEGER = 2**53 - 1

LIMIT = "x-seqlab-limit"      # how `limited` marks a field in its JSON schema (`seqlab.serve.openapi` resolves it)


def limited(*names: str, per: str | None = None) -> dict:
    """A request field's `json_schema_extra`: bounded by the server's limits `names` (fields of `ServeLimits`):
    a string (and each string of a list) at most max_chars characters, a list at most max_items items, an integer
    at most its limit; with `per` (another field, a text or a list of texts), the integer times that field's
    number of texts at most the limit. `over_limit` checks a request against them, and the OpenAPI document
    declares them with the server's values."""
    return {LIMIT: {"limits": list(names), "per": per}}


def over_limit(request: BaseModel, limits) -> tuple[str, str] | None:
    """The first field of `request` over a limit of the server (`limited`), as (the field, what is wrong in one
    line); None when every field is within them. An integer the request leaves out whose default is over its
    limit takes the limit (a beam of 5 by default, with --max-beam 4: 4), as the document declares its default."""
    for name, info in type(request).model_fields.items():
        marker = (info.json_schema_extra or {}).get(LIMIT) if isinstance(info.json_schema_extra, dict) else None
        value = getattr(request, name)
        if marker is None or value is None:
            continue
        if isinstance(value, int) and name not in request.model_fields_set and not marker["per"]:
            value = min([value, *(getattr(limits, limit_name) for limit_name in marker["limits"])])
            setattr(request, name, value)
        for limit_name in marker["limits"]:
            limit = getattr(limits, limit_name)
            if isinstance(value, str) and limit_name == "max_chars" and len(value) > limit:
                return name, f"{name} has {len(value):,} characters; the limit is {limit:,} (max_chars)"
            if isinstance(value, list) and limit_name == "max_items" and len(value) > limit:
                return name, f"{name} has {len(value)} items; the limit is {limit} (max_items)"
            if isinstance(value, list) and limit_name == "max_chars":
                for i, text in enumerate(value):
                    if len(text) > limit:
                        return name, (f"{name} {i + 1} has {len(text):,} characters; the limit is {limit:,} "
                                      "(max_chars)")
            if isinstance(value, int) and not isinstance(value, bool):
                per = marker["per"]
                texts = getattr(request, per) if per else None
                count = 1 if texts is None or isinstance(texts, str) else len(texts)
                if value > limit:
                    return name, f"{name} {value} is over the limit of {limit}"
                if value * count > limit:
                    return name, (f"{count} {per}s x {name} {value} = {count * value}; the limit is {limit} "
                                  f"({limit_name})")
    return None


def option_field(cls, name: str, default=dataclasses.MISSING, description: str = "", limit: str | None = None):
    """The request field of the option `name` of the config dataclass `cls` (`seqlab.config.option`), with its
    range as the field's bounds (and a float finite): the range the command line and the Python API check, in
    the OpenAPI document too (an integer's bound above `JSON_INTEGER` lowered to it), and with `limit` at most the
    server's limit of that name (`limited`). `default`: the request's (by default the option's); `description`:
    the request's wording (default: the option's help)."""
    f = {f.name: f for f in dataclasses.fields(cls)}[name]
    bounds = {"ge": f.metadata.get("at_least"), "gt": f.metadata.get("above"), "le": f.metadata.get("at_most"),
              "lt": f.metadata.get("below")}
    if isinstance(f.default, float):
        bounds["allow_inf_nan"] = False
    elif bounds["lt"] is not None and bounds["lt"] > JSON_INTEGER:        # a bound no JSON reader holds: 2**63
        bounds["le"], bounds["lt"] = JSON_INTEGER, None
    value = f.default if default is dataclasses.MISSING else default
    bounds = {k: v for k, v in bounds.items() if v is not None}
    extra = limited(limit) if limit else None
    return Field(value, description=description or f.metadata["help"], json_schema_extra=extra, **bounds)


Text = Annotated[str, StringConstraints(min_length=1)]         # a text that is not empty


def integer_field(annotation) -> bool:
    """Whether a field of this type takes an integer and no other number (int, int | None)."""
    if annotation is int:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        arms = [arm for arm in typing.get_args(annotation) if arm is not type(None)]
        return int in arms and float not in arms
    return False


def integral_numbers(model: type[BaseModel], data):
    """A request's integral JSON number for an integer field (5.0) read as the integer it is (5): JSON has one
    number type, and the OpenAPI document's `"type": "integer"` (JSON Schema's) holds 5.0 to be an integer,
    so a client that writes its integers as floats is answered as the document promises. 5.5, "5" and true
    stay refused (the fields are strict)."""
    if not isinstance(data, dict):
        return data
    fields = model.model_fields
    return {k: int(v) if type(v) is float and math.isfinite(v) and v.is_integer() and k in fields
            and integer_field(fields[k].annotation) else v for k, v in data.items()}


class Request(BaseModel):
    """What every request has: the model, and one text or a list of them. Every field is strict: a number is
    a JSON number (a float field also takes an integer, an integer field an integral number: 5.0), a boolean
    true or false, a text a string; "5", 5.5 or true for an integer is refused (422), not converted."""

    model_config = ConfigDict(extra="forbid", strict=True)   # a misspelt field is an error, not silently ignored

    model: str = Field(description="the run directory's name (GET /v1/models)")

    @model_validator(mode="before")
    @classmethod
    def integral(cls, data):
        return integral_numbers(cls, data)

    def texts(self) -> list[str]:
        text = getattr(self, "text", "")
        return [text] if isinstance(text, str) else list(text)


class TextsRequest(Request):
    text: str | Annotated[list[str], Field(min_length=1)] = Field(
        description="one text, or a list of texts (at least one; at most the server's max_items, each at most "
                    "its max_chars characters)", json_schema_extra=limited("max_chars", "max_items"))


class WordsRequest(TextsRequest):
    """A request whose texts the model reads as words: none may be empty (one of spaces only has no words either,
    which the model refuses, 422)."""

    text: Text | Annotated[list[Text], Field(min_length=1)] = Field(
        description="one text, or a list of texts (at least one; none empty; at most the server's max_items, each "
                    "at most its max_chars characters)", json_schema_extra=limited("max_chars", "max_items"))


class ModelInfo(BaseModel):
    """One model, as OpenAI's API lists a model (id, object, created, owned_by), then seqlab's own fields."""

    id: str = Field(description="the run (or export) directory's name: the `model` of every request")
    object: Literal["model"] = "model"
    created: int = Field(description="when the run or export directory was last written (Unix time)")
    owned_by: str = "seqlab"
    task: str = Field(description="the name of its task family (seqlab's own lm, tagger, classifier and seq2seq, or "
                      "a family registered from outside)")
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
    """An error on a native route (every route but `openai_routes()`)."""

    error: str = Field(description="what is wrong, in one line")


class OpenAIErrorDetail(BaseModel):
    message: str = Field(description="what is wrong, in one line")
    type: str = Field(description="invalid_request_error, authentication_error, not_found_error, timeout_error, ...")
    param: str | None = Field(None, description="the request field at fault, when there is one")
    code: str | None = Field(None, description="a short code, when there is one")


class OpenAIError(BaseModel):
    """An error on an OpenAI-compatible route (`openai_routes()`), in OpenAI's shape."""

    error: OpenAIErrorDetail
