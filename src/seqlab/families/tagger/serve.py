"""A tagger over HTTP: POST /v1/tag (each token's tag and probability, and the entity spans of IOB-style
tags), the texts of concurrent requests tagged in one batch."""

from __future__ import annotations

from fastapi import FastAPI
from pydantic import BaseModel, Field

from seqlab.data.tags import spans
from seqlab.serve.routes import Routes
from seqlab.serve.schemas import TextsRequest


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


def add_routes(app: FastAPI, routes: Routes) -> None:
    """POST /v1/tag."""

    @app.post("/v1/tag", response_model=TagResponse)
    async def tag(body: TextsRequest) -> TagResponse:
        tagger = routes.served(body, "tag").trained
        sentences = [text.split() for text in body.texts()]
        results = []
        for tokens, tagged in zip(sentences, await routes.batcher.submit((body.model, "tag"), sentences), strict=True):
            tags = [t for t, _ in tagged]
            entities = None if tagger.scheme == "none" else [
                Entity(type=kind, start=start, end=end, text=" ".join(tokens[start:end]))
                for kind, start, end in spans(tags)]
            results.append(TagResult(tokens=tokens, tags=tags, probabilities=[p for _, p in tagged],
                                     entities=entities))
        return TagResponse(model=body.model, results=results)


def run_batch(trained, key: tuple, items: list) -> list:
    """One forward pass over the gathered sentences of a batch."""
    return trained.tag_sentences(items)
