"""A tagger over HTTP: POST /v1/tag (each token's tag and probability, and the entity spans of IOB-style
tags), the texts of concurrent requests tagged in one batch."""

from __future__ import annotations

from fastapi import FastAPI, Response
from pydantic import BaseModel, Field

import seqlab.serve.ui as ui
from seqlab.data.tags import spans
from seqlab.serve.routes import Routes, json_answer
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


# the web page's form (`seqlab.serve.ui`): each token's tag, the entity spans in a colour per type
FORMS = (ui.Form("tag", "spans", "Tags", "Sentence (tokens split at spaces)", "Peter Blackburn visited New York .",
                 style={"hues": {"PER": 12, "LOC": 140, "ORG": 220, "MISC": 285}}),)


def add_routes(app: FastAPI, routes: Routes) -> None:
    """POST /v1/tag."""

    @app.post("/v1/tag", response_model=TagResponse)
    async def tag(body: TextsRequest) -> Response:
        tagger = routes.served(body, "tag").trained
        sentences = [text.split() for text in body.texts()]
        tagged = await routes.batcher.submit((body.model, "tag"), sentences)

        def result(k: int) -> dict:                                     # a `TagResult`
            tokens, tags = sentences[k], [t for t, _ in tagged[k]]
            entities = None if tagger.scheme == "none" else [
                {"type": kind, "start": start, "end": end, "text": " ".join(tokens[start:end])}
                for kind, start, end in spans(tags)]
            return {"tokens": tokens, "tags": tags, "probabilities": [p for _, p in tagged[k]], "entities": entities}

        return await json_answer({"model": body.model}, list(range(len(sentences))), result)


def run_batch(trained, key: tuple, items: list) -> list:
    """One forward pass over the gathered sentences of a batch."""
    return trained.tag_sentences(items)
