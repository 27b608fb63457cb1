"""`seqlab serve`: trained models over HTTP.

    from seqlab.serve.app import create_app
    app = create_app(["runs/pos", "runs/sst2"])      # an ASGI app: uvicorn, a test client, or `seqlab serve`

`app.py` holds the app and its endpoints, `schemas.py` the JSON of every request and response, `limits.py`
what one request may ask for (`ServeLimits`). The web framework (FastAPI) is imported only when an app is made.
What the families' `serve` parts build on: `routes.py`, `schemas.py`, `limits.py`, `scheduler.py`,
`batching.py`. This file imports nothing, so that a family's part importing one of those runs nothing else.
"""
