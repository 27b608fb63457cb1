"""A classifier over HTTP: POST /v1/classify (each text's label, its probability and every class's), the
texts of concurrent requests classified in one batch."""

from __future__ import annotations

from fastapi import FastAPI
from pydantic import BaseModel

import seqlab.serve.ui as ui
from seqlab.serve.routes import Routes
from seqlab.serve.schemas import WordsRequest


class ClassifyResult(BaseModel):
    label: str
    probability: float
    probabilities: dict[str, float]


class ClassifyResponse(BaseModel):
    model: str
    results: list[ClassifyResult]


# the web page's form (`seqlab.serve.ui`): a bar per class
FORMS = (ui.Form("classify", "bars", "Classes", "Text", "a warm and funny film"),)


def add_routes(app: FastAPI, routes: Routes) -> None:
    """POST /v1/classify."""

    @app.post("/v1/classify", response_model=ClassifyResponse)
    async def classify(body: WordsRequest) -> ClassifyResponse:
        routes.served(body, "classify")
        predictions = await routes.batcher.submit((body.model, "classify"), body.texts())
        return ClassifyResponse(model=body.model, results=[
            ClassifyResult(label=p.label, probability=p.probability, probabilities=p.probabilities)
            for p in predictions])


def run_batch(trained, key: tuple, items: list) -> list:
    """One forward pass over the gathered texts of a batch."""
    return trained.classify(items)
