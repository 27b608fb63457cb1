"""The HTTP server of `seqlab serve`: uvicorn with limits on what one connection may hold before the app sees
a request (`ServeLimits`), so that no client can hold the server by sending slowly or without end.

    serve(create_app(runs, limits), "127.0.0.1", 8000, limits)     # until interrupted (Ctrl-C)
    server(app, "127.0.0.1", 0, limits)                            # the same server, to run and stop (tests)

uvicorn's httptools protocol reads a request's head (its URL and header lines) with no limit on its size, its
number of headers or the time it takes, and the body with no time limit. `LimitedProtocol` adds them:

    connection opened --(header_timeout)--> request line, headers --(body_timeout)--> body --> the app
                                             <= max_header_bytes        408 when late
                                             <= max_headers (431)       (the app's own limit: max_body_bytes, 413)

A head over its limits gets 431, one that arrives too slowly 408, a body that stalls 408 (or a closed
connection once the answer has started), each with {"error": one line}, and the connection is closed. A new
connection must send its first request's head within header_timeout; between requests, uvicorn's keep-alive
timeout closes an idle connection. WebSockets are off (the API has none).
"""

from __future__ import annotations

import asyncio
import gc
import json

import httptools
import uvicorn
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

import seqlab.serve.shapes as shapes
from seqlab.serve.limits import ServeLimits


def settings(host: str, port: int, limits: ServeLimits, log_level: str = "warning") -> dict:
    """uvicorn's settings (`uvicorn.run`'s and `uvicorn.Config`'s keyword arguments) for a server with `limits`."""
    return {"host": host, "port": port, "http": protocol(limits), "ws": "none", "log_level": log_level}


def serve(app, host: str, port: int, limits: ServeLimits, log_level: str = "warning") -> None:
    """Serve `app` on host:port with `limits` until interrupted (`seqlab serve`). What is loaded by then (the
    models, PyTorch, the web framework) is moved out of the garbage collector's sight (`gc.freeze`), so that the
    collections the requests' garbage sets off stay small: 7-11% more generate requests per second at
    concurrency 32 (benchmarks/results/serve_load.md)."""
    gc.collect()
    gc.freeze()
    uvicorn.run(app, **settings(host, port, limits, log_level))


def server(app, host: str, port: int, limits: ServeLimits, log_level: str = "warning") -> uvicorn.Server:
    """The server `serve` runs, not started: `.run()` it (in a thread, say) and set `.should_exit` to stop it."""
    return uvicorn.Server(uvicorn.Config(app, **settings(host, port, limits, log_level)))


def protocol(limits: ServeLimits) -> type[LimitedProtocol]:
    """The protocol class of a server with `limits` (uvicorn makes one instance per connection)."""
    return type("LimitedProtocol", (LimitedProtocol,), {"limits": limits})


class Refused(Exception):
    """Raised in a parser callback to stop parsing a request that `LimitedProtocol.refuse` has answered."""


class LimitedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with limits on a request's head (size, header count, time) and on the time
    its body takes (`ServeLimits`: max_header_bytes, max_headers, header_timeout, body_timeout)."""

    limits: ServeLimits = ServeLimits()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reading_head = False           # between a request's first byte and the end of its headers
        self.head_bytes = 0                 # its URL and header lines parsed so far, in bytes
        self.head_chunks = 0                # the bytes of the chunks received wholly inside the head
        self.header_count = 0
        self.heads_begun = 0                # requests begun on this connection
        self.refused = False
        self.head_timer: asyncio.TimerHandle | None = None
        self.body_timer: asyncio.TimerHandle | None = None

    # ---------------------------------------------------------------------------------------- the connection

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self.head_timer = self.loop.call_later(self.limits.header_timeout, self.head_late)   # its first request

    def connection_lost(self, exc: Exception | None) -> None:
        self.stop_timers()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """uvicorn's, and a head still unfinished after more than max_header_bytes is refused here: httptools
        gathers a header in memory until its line ends, so the limit must not wait for the line."""
        if self.refused:
            return
        self._unset_keepalive_if_required()
        inside, begun = self.reading_head, self.heads_begun   # the chunk is all head if it begins and ends in one
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._unsupported_upgrade_warning()     # WebSockets are off: the request goes on as a plain one
        except httptools.HttpParserError:
            if not self.refused:
                self.logger.warning("Invalid HTTP request received.")
                self.send_400_response("Invalid HTTP request received.")
            return
        if self.reading_head and inside and self.heads_begun == begun:
            self.head_chunks += len(data)
        if self.reading_head and max(self.head_chunks, self.head_bytes) > self.limits.max_header_bytes:
            self.head_too_large()

    # ---------------------------------------------------------------------------------------- the parser

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.reading_head, self.head_bytes, self.head_chunks, self.header_count = True, 0, 0, 0
        self.heads_begun += 1
        if self.head_timer is None:
            self.head_timer = self.loop.call_later(self.limits.header_timeout, self.head_late)

    def on_url(self, url: bytes) -> None:
        self.head_bytes += len(url)
        if self.head_bytes > self.limits.max_header_bytes:
            self.head_too_large()
            raise Refused
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self.head_bytes += len(name) + len(value) + 4                          # "name: value\r\n"
        self.header_count += 1
        if self.header_count > self.limits.max_headers:
            self.refuse(431, f"the request has more than {self.limits.max_headers} headers, the server's limit")
            raise Refused
        if self.head_bytes > self.limits.max_header_bytes:
            self.head_too_large()
            raise Refused
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self.reading_head = False
        self.cancel(self.head_timer)
        self.head_timer = None
        self.body_timer = self.loop.call_later(self.limits.body_timeout, self.body_late)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self.cancel(self.body_timer)
        self.body_timer = None
        super().on_message_complete()

    # ---------------------------------------------------------------------------------------- refusals

    def head_too_large(self) -> None:
        self.refuse(431, f"the request's URL and headers are over the server's limit of "
                         f"{self.limits.max_header_bytes:,} bytes")

    def head_late(self) -> None:
        """The head did not arrive in time: 408 once a request has begun; a connection that sent nothing is
        closed."""
        self.head_timer = None
        if self.reading_head:
            self.refuse(408, f"the request's headers took longer than the server's limit of "
                             f"{self.limits.header_timeout:g} s")
        elif not self.transport.is_closing():
            self.refused = True
            self.transport.close()

    def body_late(self) -> None:
        self.body_timer = None
        if self.cycle is not None and self.cycle.response_started:
            self.refused = True                     # answered already (before reading the body): just close
            self.stop_request()
            self.transport.close()
        else:
            self.refuse(408, f"the request's body took longer than the server's limit of "
                             f"{self.limits.body_timeout:g} s")

    def refuse(self, status: int, message: str) -> None:
        """Answer `status` with {"error": message} and close the connection; the app, if it has the request
        already, sees its client gone."""
        if self.refused or self.transport.is_closing():
            return
        self.refused = True
        self.stop_request()
        path = (self.scope or {}).get("path") or getattr(self, "url", b"").split(b"?")[0].decode("latin-1")
        body = json.dumps(shapes.error_body(path, status, message)).encode()
        head = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            head += [name, b": ", value, b"\r\n"]
        head += [b"content-type: application/json\r\ncontent-length: ", str(len(body)).encode(),
                 b"\r\nconnection: close\r\n\r\n", body]
        self.transport.write(b"".join(head))
        self.transport.close()

    def stop_request(self) -> None:
        """The timers stopped, and a request the app is running marked as disconnected."""
        self.stop_timers()
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.disconnected = True
            self.cycle.message_event.set()

    def stop_timers(self) -> None:
        for timer in (self.head_timer, self.body_timer):
            self.cancel(timer)
        self.head_timer = self.body_timer = None

    @staticmethod
    def cancel(timer: asyncio.TimerHandle | None) -> None:
        if timer is not None:
            timer.cancel()
