"""A regressor over HTTP: POST /v1/regress (each text's number), the texts of concurrent requests in one batch."""

from __future__ import annotations

from fastapi import FastAPI
from pydantic import BaseModel

from seqlab.serve.routes import Routes
from seqlab.serve.schemas import WordsRequest


class RegressResponse(BaseModel):
    model: str
    values: list[float]

FORMS = ()         # no form on the served page: none of its views (text, tokens, spans, bars) draws a number


def add_routes(app: FastAPI, routes: Routes) -> None:
    """POST /v1/regress."""

    @app.post("/v1/regress", response_model=RegressResponse)
    async def regress(body: WordsRequest) -> RegressResponse:
        routes.served(body, "regress")
        values = await routes.batcher.submit((body.model, "regress"), body.texts())
        return RegressResponse(model=body.model, values=values)


def run_batch(trained, key: tuple, items: list) -> list:
    """One forward pass over the gathered texts of a batch."""
    return trained.predict(items)
