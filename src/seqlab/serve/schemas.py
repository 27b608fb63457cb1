"""The JSON of `seqlab serve`: one pydantic model per request and response, so that every field is typed,
documented in the OpenAPI page (/docs) and checked before a model sees it.

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


class GenerateRequest(Request):
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


class Entity(BaseModel):
    type: str
    start: int
    end: int
    text: str


class TagResult(BaseModel):
    tokens: list[str]
    tags: list[str]
    probabilities: list[float]
    entities: list[Entity] | None = Field(None, description="the entity spans, for IOB-style tags")


class TagResponse(BaseModel):
    model: str
    results: list[TagResult]


class ClassifyResult(BaseModel):
    label: str
    probability: float
    probabilities: dict[str, float]


class ClassifyResponse(BaseModel):
    model: str
    results: list[ClassifyResult]


class DecodeRequest(TextsRequest):
    beam: int = Field(5, ge=1, description="beam size (1: greedy)")
    max_length: int = Field(0, ge=0, description="most output tokens (0: the model's rule)")
    length_penalty: float = Field(1.0, ge=0, allow_inf_nan=False, description="rank by log p / length^alpha")
    attention: bool = Field(False, description="return each output token's attention over the source tokens")


class DecodeResult(BaseModel):
    text: str
    tokens: list[str]
    score: float
    source_tokens: list[str] | None = None
    attention: list[list[float]] | None = Field(None, description="(output tokens, source tokens) weights")


class DecodeResponse(BaseModel):
    model: str
    results: list[DecodeResult]


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
