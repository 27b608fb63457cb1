"""Which shape an error answer of `seqlab serve` takes on each route: OpenAI's {"error": {"message", "type",
"param", "code"}} on the routes of OpenAI's protocol (the server's own `schemas.OPENAI_ROUTES`, and those each
family declares: its `openai_endpoints` and the `openai_refused` it answers only with why they are not served),
seqlab's {"error": "one line"} on every other. The shapes themselves are `seqlab.serve.schemas`' (a family's
endpoints build theirs there); this module reads the registry to tell the routes apart."""

from __future__ import annotations

from seqlab.registry import FAMILIES
from seqlab.serve.schemas import OPENAI_ROUTES, native_error, openai_error


def openai_routes() -> tuple[str, ...]:
    """The routes that speak OpenAI's protocol: `OPENAI_ROUTES`, and those each family declares (its
    `openai_endpoints`, and the `openai_refused` it answers only with why they are not served)."""
    return OPENAI_ROUTES + tuple(f"/v1/{path}" for family in FAMILIES.values()
                                 for path in (*family.openai_endpoints, *family.openai_refused))


def openai_route(path: str) -> bool:
    """Whether `path` is one of `openai_routes()` or below one (GET /v1/models/ID)."""
    return any(path == route or path.startswith(route + "/") for route in openai_routes())


def error_body(path: str, status: int, message: str, param: str | None = None, code: str | None = None) -> dict:
    """The JSON of an error answer on `path`: {"error": "one line"}, or on the OpenAI-compatible routes
    (`openai_routes`) OpenAI's {"error": {"message", "type", "param", "code"}}."""
    return openai_error(status, message, param, code) if openai_route(path) else native_error(message)
