"""`seqlab serve`: trained models over HTTP.

    from seqlab.serve import create_app
    app = create_app(["runs/pos", "runs/sst2"])      # an ASGI app: uvicorn, a test client, or `seqlab serve`

`app.py` holds the app and its endpoints, `schemas.py` the JSON of every request and response, `limits.py`
what one request may ask for. The web framework (FastAPI) is imported only when an app is made.
"""

from __future__ import annotations

from seqlab.serve.limits import API_KEY_VARIABLE, ServeLimits

__all__ = ["API_KEY_VARIABLE", "ServeLimits", "create_app", "load_runs"]


def __getattr__(name: str):
    if name in ("create_app", "load_runs"):
        from seqlab.serve import app

        return getattr(app, name)
    raise AttributeError(f"module 'seqlab.serve' has no attribute {name!r}")
