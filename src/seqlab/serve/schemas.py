"""The JSON of `seqlab serve` that every family shares (each family's `serve` part defines its own requests
and responses): one pydantic model per request and response, so that every field is typed, documented in
the OpenAPI page (/docs) and checked before a model sees it.

A request names its model by its run directory's name (`GET /v1/models` lists them) and takes one text or
a list of texts; the response lists one result per text, in order.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Request(BaseModel):
    """What every request has: the model, and one text or a list of them."""

    model_config = ConfigDict(extra="forbid")       # a misspelt field is an error, not silently ignored

    model: str = Field(description="the run directory's name (GET /v1/models)")

    def texts(self) -> list[str]:
        text = getattr(self, "text", "")
        return [text] if isinstance(text, str) else list(text)


class TextsRequest(Request):
    text: str | list[str] = Field(description="one text, or a list of texts")


class ModelInfo(BaseModel):
    name: str
    task: str
    arch: str
    parameters: int
    endpoints: list[str]
    metrics: dict[str, dict] = Field(description="the final figures of each split the run scored")
    summary: str = Field("", description="one sentence on the run: its model, its training data and its final "
                                         "figures (seqlab info RUN tells more)")


class ModelsResponse(BaseModel):
    models: list[ModelInfo]


class Error(BaseModel):
    error: str = Field(description="what is wrong, in one line")
