"""The explorer's endpoints (`seqlab explore`, and the Explore tab of the page at /): what a served model shows
inside (`seqlab.contract.views`), computed by its family's `explain` part on the model's own forward pass.

    GET  /v1/explain/{model}   the views its architecture has (on an export: those computed from the graphs'
                               outputs, and why the others are not), the options and their bounds, texts to try
    POST /v1/explain           {"model", "text", "views": [names] (default: all), "options": {...}}: the
                               `Explanation` as JSON

Bounded as the other endpoints: the text at most `MAX_TEXT_CHARS` characters (and the server's max_chars), read
up to `MAX_TOKENS` tokens; the work on the inference thread, in turn with the other requests, stopped at the
request's deadline (request_timeout: 504); heat maps of many units summarised to the `units` that vary most;
the numbers sent rounded to `DIGITS` significant digits, and matrix panels past `MAX_CELLS` numbers in all left
out (each view's note says so).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Literal

from fastapi import FastAPI
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from seqlab.contract import views as explore
from seqlab.errors import SeqlabError
from seqlab.registry import FAMILIES
from seqlab.serve.routes import Refused, Routes
from seqlab.serve.scheduler import current_job
from seqlab.serve.schemas import Request, Text, integral_numbers, limited, option_field

EXAMPLES = 20            # texts to try, of the run's dev set


def options_model() -> type[BaseModel]:
    """The request's "options", one field per `ExplainOptions` field, with its help, default and range (the
    dataclass is where they are declared; `ExplainOptions.from_dict` checks them again)."""
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(explore.ExplainOptions):
        if f.metadata["choices"]:
            fields[f.name] = (Literal[f.metadata["choices"]], Field(f.default, description=f.metadata["help"]))
        else:
            fields[f.name] = (type(f.default), option_field(explore.ExplainOptions, f.name))
    model = create_model("ExplainOptions", __config__=ConfigDict(extra="forbid", strict=True),
                         __doc__="What a reader sets beside the text (`seqlab.contract.views.ExplainOptions`).",
                         __validators__={"integral": model_validator(mode="before")(
                             classmethod(lambda cls, data: integral_numbers(cls, data)))}, **fields)
    return model


ExplainOptionsBody = options_model()


class ExplainRequest(Request):
    """POST /v1/explain's body."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"model": "my-run", "text": "the cat sat on the mat", "views": ["next-token"], "options": {"top_k": 5}}]})

    text: Text = Field(description=f"the text to look inside the model with (at most {explore.MAX_TEXT_CHARS} "
                                   "characters, and the server's max_chars; read up to "
                                   f"{explore.MAX_TOKENS} tokens)", max_length=explore.MAX_TEXT_CHARS,
                       json_schema_extra=limited("max_chars"))
    views: list[str] | None = Field(None, description="the views to compute (GET /v1/explain/{model}); default all")
    options: ExplainOptionsBody | None = Field(None, description="the options of the views (each has a "  # type: ignore[valid-type]
                                                                 "default)")


class ViewInfo(BaseModel):
    """A view a model has (`seqlab.contract.views.ViewSpec`)."""

    name: str = Field(description="the name POST /v1/explain's `views` takes")
    kind: Literal[explore.KINDS] = Field(description="how the page draws it: tokens, matrix, bars or tree")
    title: str
    about: str = Field(description="what it shows, with the book's equations")
    archs: list[str] = Field(description="the architectures that have it (empty: all)")
    exported: bool = Field(description="whether it is computed on an ONNX export")
    why_not_exported: str = Field(description="where not: why")


class NotOnExport(BaseModel):
    name: str
    title: str
    why: str = Field(description="why an export cannot compute it")


class OptionInfo(BaseModel):
    default: Any
    min: float | None = None
    max: float | None = None
    integer: bool | None = None
    choices: list[str] | None = None


class ExplainViews(BaseModel):
    """GET /v1/explain/{model}: what POST /v1/explain can show of the model."""

    model: str
    family: str
    arch: str
    runtime: Literal["torch", "onnx"]
    views: list[ViewInfo] = Field(description="the views of its architecture (on an export: those it computes)")
    not_on_export: list[NotOnExport] = Field(description="on an export, the views it cannot compute, and why")
    options: dict[str, OptionInfo] = Field(description="each option's default and bounds")
    examples: list[str] = Field(description="texts to try, from the run's dev set (empty when its file is gone)")
    limits: dict[str, int] = Field(description="max_chars: the longest text; max_tokens: the tokens read of it")


Numbers = list[float | None]           # NaN and infinities are null


class PanelBody(BaseModel):
    """One heat map of a matrix view (`seqlab.contract.views.Panel`)."""

    title: str
    rows: list[str]
    cols: list[str]
    values: list[Numbers] = Field(description="rows x columns")
    range: list[float] | None = Field(description="the colour scale's ends (null: the values' own)")
    path: list[int] | None = Field(description="a highlighted column per row (a Viterbi path), or null")
    group: str = Field(description="panels of one group are chosen between (a layer, a head)")
    strip: Numbers | None = Field(None, description="a value per column drawn above the heat map (a recurrent "
                                                    "layer's hidden-state norms ||h_t||), or null")
    strip_label: str = Field("", description="what the strip's values are")


class ViewBody(BaseModel):
    """One view (`seqlab.contract.views.View.to_json`): beside its name, kind, title, about and note, only the
    fields of its kind: tokens (tokens, values, details, label), matrix (panels, lines), bars (labels, values,
    label), tree (nodes, finished, label)."""

    name: str
    kind: Literal[explore.KINDS]
    title: str
    about: str
    note: str = Field(description="what was left out or summarised")
    label: str | None = Field(None, description="what `values` are (tokens, bars, tree)")
    tokens: list[str] | None = None
    values: Numbers | None = Field(None, description="a value per token (tokens) or per label (bars)")
    details: list[dict[str, Any]] | None = Field(None, description="per token: its probability, rank, alternatives")
    panels: list[PanelBody] | None = None
    lines: bool | None = Field(None, description="rows and columns are tokens: a line view too")
    labels: list[str] | None = None
    nodes: list[dict[str, Any]] | None = Field(None, description="the search's nodes: id, parent, token, score, "
                                                                 "step, status (kept, ended, dropped, late)")
    finished: list[dict[str, Any]] | None = Field(None, description="the finished hypotheses ranked: node, tokens, "
                                                                    "text, score, normalized, rank")


class ExplanationBody(BaseModel):
    """POST /v1/explain: what the model showed (`seqlab.contract.views.Explanation.to_json`)."""

    model: str
    family: str
    arch: str
    tokens: list[str] = Field(description="the text's tokens as the model read them")
    truncated: bool = Field(description=f"the text had more than {explore.MAX_TOKENS} tokens: its first were read")
    seconds: float = Field(description="the time the views took")
    views: list[ViewBody]


def option_bounds() -> dict[str, dict[str, Any]]:
    """Each option's default and bounds, as the page's inputs take them (`ExplainOptions`' fields)."""
    out: dict[str, dict[str, Any]] = {}
    for f in dataclasses.fields(explore.ExplainOptions):
        if f.metadata["choices"]:
            out[f.name] = {"default": f.default, "choices": list(f.metadata["choices"])}
        else:
            out[f.name] = {"default": f.default, "min": f.metadata["at_least"], "max": f.metadata["at_most"],
                           "integer": isinstance(f.default, int)}
    return out


def add_routes(app: FastAPI, routes: Routes) -> None:
    """GET /v1/explain/{model} and POST /v1/explain."""

    def family_of(name: str):
        served = routes.named(name)
        family = FAMILIES[served.task]
        if not family.explains:
            raise Refused(400, f"model {name!r} is {family.title}, which has no views to explore", "model")
        job = current_job()
        if job is not None:
            job.key = name                                  # the scheduler's queue: one per model
        return served, family

    @app.get("/v1/explain/{model_id}", response_model=ExplainViews, response_model_exclude_none=True,
             responses={400: {}})
    async def views(model_id: str) -> dict:
        """What POST /v1/explain can show of this model."""
        served, family = family_of(model_id)
        part = family.part("explain")
        exported = not hasattr(served.trained, "model")
        arch = part.arch(served.trained)
        declared = [s for s in part.VIEWS if not s.archs or arch in s.archs]
        shown = [dataclasses.asdict(s) for s in declared if s.exported or not exported]
        left = [{"name": s.name, "title": s.title, "why": s.why_not_exported} for s in declared
                if exported and not s.exported]
        examples = await routes.infer(part.examples, served.trained, EXAMPLES)
        return {"model": model_id, "family": family.name, "arch": arch, "runtime": "onnx" if exported else "torch",
                "views": shown, "not_on_export": left, "options": option_bounds(), "examples": examples,
                "limits": {"max_chars": min(explore.MAX_TEXT_CHARS, routes.limits.max_chars),
                           "max_tokens": explore.MAX_TOKENS}}

    @app.post("/v1/explain", response_model=ExplanationBody)
    async def explain(request: ExplainRequest) -> Response:
        """Look inside a model as it reads a text: the views asked for (`seqlab.contract.views`)."""
        served, _ = family_of(request.model)
        limit = min(explore.MAX_TEXT_CHARS, routes.limits.max_chars)
        if len(request.text) > limit:
            raise Refused(422, f"text has {len(request.text)} characters; this server explains at most {limit}",
                          "text")
        try:
            options = explore.ExplainOptions.from_dict(request.options.model_dump() if request.options else None)
        except SeqlabError as error:
            raise Refused(422, str(error), "options") from None
        found = await routes.infer(explore.explain, served.trained, request.text, request.views, options,
                                   request.model)
        # bounded (a few MB at most), and written as FastAPI writes a response model's JSON, without validating a
        # heat map's cells one by one first
        answer = found.to_json(explore.DIGITS, explore.MAX_CELLS)
        return Response(json.dumps(answer, ensure_ascii=False, allow_nan=False, separators=(",", ":")),
                        media_type="application/json")
