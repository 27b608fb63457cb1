"""What one request to `seqlab serve` may ask for, and how concurrent requests are gathered: options (no web
framework imported)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from seqlab.config import check_fields, option

API_KEY_VARIABLE = "SEQLAB_API_KEY"       # the API key, when --api-key is not given


def available_cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:                                       # macOS, Windows
        return os.cpu_count() or 1


@dataclass
class ServeLimits:
    """What one request may ask for (`seqlab serve` options); a request over a limit gets a 4xx answer."""

    max_body_bytes: int = option(1 << 20, "largest request body, in bytes", at_least=1)
    max_chars: int = option(20_000, "longest text or prompt, in characters", at_least=1)
    max_items: int = option(64, "most texts in one request", at_least=1)
    max_tokens: int = option(1024, "most tokens one generate request may ask for", at_least=1)
    max_beam: int = option(16, "largest beam a request may ask for", at_least=1)
    max_length: int = option(1024, "most output tokens one translate or summarize request may ask for; their "
                                   "default (2 x the source's + 10) is capped here too", at_least=1)
    max_header_bytes: int = option(16 * 1024, "largest request head (its URL and header lines), in bytes: over it, "
                                              "431 and the connection closed", at_least=1024)
    max_headers: int = option(100, "most header lines in one request: over it, 431 and the connection closed",
                              at_least=1)
    header_timeout: float = option(10.0, "seconds a request's head may take to arrive (a new connection's first "
                                         "request: from the connection's opening): then 408 and the connection "
                                         "closed", above=0, at_most=3600)
    body_timeout: float = option(30.0, "seconds a request's body may take to arrive after its head: then 408 and "
                                       "the connection closed", above=0, at_most=3600)
    max_batch: int = option(32, "dynamic batching: most texts of concurrent requests to one model run in one "
                                "forward pass (1: each request alone)", at_least=1)
    max_wait_ms: float = option(5.0, "dynamic batching: how long a request waits for others to join its batch "
                                     "while it is not full", at_least=0, at_most=1000)
    slice_ms: float = option(20.0, "how long one slice of a long request's work (scoring, tagging, classifying, "
                                   "reading a long prompt) runs before the other requests' waiting work gets the "
                                   "model thread, in ms; a slice is also where work stops at its deadline or when "
                                   "its client goes", above=0, at_most=10_000)
    request_timeout: float = option(60.0, "seconds a request may take, waiting included, before it is answered 504 "
                                          "and its work stopped (0: no limit)", at_least=0, at_most=86400)

    def __post_init__(self):
        check_fields(self)
