"""`GET /metrics`: what the server has done, in Prometheus' text format (version 0.0.4), written by hand
(three metric families do not need a client library).

    seqlab_requests_total{endpoint, status}          requests answered, by endpoint and HTTP status
    seqlab_request_seconds{endpoint}                 a histogram of the time to the last byte of the answer
    seqlab_batch_size{endpoint}                      a histogram of the texts run in one forward pass

An endpoint is a route of the app under its template (/v1/classify, /v1/models/{model_id}: every model's path
counted as one) or "other" (a path no route answers, a static file), so that arbitrary paths cannot grow the
series without bound.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections import Counter, defaultdict

from starlette.routing import Route

SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class Histogram:
    def __init__(self, bounds: tuple):
        self.bounds, self.counts, self.sum, self.count = bounds, [0] * (len(bounds) + 1), 0.0, 0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1

    def lines(self, name: str, labels: str) -> list[str]:
        out, cumulative = [], 0
        for bound, count in zip((*self.bounds, "+Inf"), self.counts, strict=True):
            cumulative += count
            out.append(f'{name}_bucket{{{labels},le="{bound}"}} {cumulative}')
        return [*out, f"{name}_sum{{{labels}}} {self.sum:.6f}", f"{name}_count{{{labels}}} {self.count}"]


class Metrics:
    """The counts and histograms of the app whose routes are `routes` (its router's list, read as it grows: the
    routes are added after the middleware)."""

    def __init__(self, routes: list):
        self.routes = routes
        self.requests: Counter = Counter()
        self.seconds: dict[str, Histogram] = defaultdict(lambda: Histogram(SECONDS))
        self.batches: dict[str, Histogram] = defaultdict(lambda: Histogram(SIZES))

    def endpoint(self, path: str) -> str:
        """The template of the route that answers `path` (whatever the method), or "other"."""
        for route in self.routes:
            if isinstance(route, Route) and route.path_regex.match(path):
                return route.path
        return "other"

    def request(self, path: str, status: int, seconds: float) -> None:
        endpoint = self.endpoint(path)
        self.requests[endpoint, status] += 1
        self.seconds[endpoint].observe(seconds)

    def batch(self, endpoint: str, size: int) -> None:
        self.batches[endpoint].observe(size)

    def render(self) -> str:
        lines = ["# HELP seqlab_requests_total Requests answered, by endpoint and HTTP status.",
                 "# TYPE seqlab_requests_total counter"]
        lines += [f'seqlab_requests_total{{endpoint="{e}",status="{s}"}} {n}'
                  for (e, s), n in sorted(self.requests.items())]
        lines += ["# HELP seqlab_request_seconds Time from the request to the last byte of its answer.",
                  "# TYPE seqlab_request_seconds histogram"]
        for endpoint, histogram in sorted(self.seconds.items()):
            lines += histogram.lines("seqlab_request_seconds", f'endpoint="{endpoint}"')
        lines += ["# HELP seqlab_batch_size Texts run in one forward pass (dynamic batching).",
                  "# TYPE seqlab_batch_size histogram"]
        for endpoint, histogram in sorted(self.batches.items()):
            lines += histogram.lines("seqlab_batch_size", f'endpoint="{endpoint}"')
        return "\n".join(lines) + "\n"


class MetricsMiddleware:
    """ASGI middleware: counts and times every HTTP request (streams to their last byte)."""

    def __init__(self, app, metrics: Metrics):
        self.app, self.metrics = app, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start, status = time.perf_counter(), 500

        async def sending(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self.metrics.request(scope.get("path", ""), status, time.perf_counter() - start)
