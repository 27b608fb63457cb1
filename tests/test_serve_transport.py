"""`seqlab serve`'s transport, over real sockets against a running server (`seqlab.serve.server`, the one the CLI
starts): limits on a request's head (size, header count, time), a body that stalls, the API key checked before
the body is read, the cap on decode lengths, and keep-alive for requests within the limits."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

import seqlab  # noqa: E402
from conftest import FIXTURES, one_line_error, run_seqlab  # noqa: E402
from seqlab.cli.main import main  # noqa: E402
from seqlab.serve.app import create_app, load_runs  # noqa: E402
from seqlab.serve.limits import ServeLimits  # noqa: E402
from seqlab.serve.server import server  # noqa: E402

KEY = "s3cret"
AUTH = f"Authorization: Bearer {KEY}\r\n"
LIMITS = ServeLimits(max_header_bytes=4096, max_headers=20, header_timeout=0.5, body_timeout=1.0, max_length=12)


@pytest.fixture(scope="module")
def translator(tmp_path_factory) -> Path:
    """A tiny German-English run (an untrained GRU rambles on: its outputs reach any length cap)."""
    folder, pairs = tmp_path_factory.mktemp("transport") / "de-en", FIXTURES / "seq2seq"
    assert main(["train", "seq2seq", "--train-src", str(pairs / "train.src"), "--train-tgt", str(pairs / "train.tgt"),
                 "--dev-src", str(pairs / "dev.src"), "--dev-tgt", str(pairs / "dev.tgt"), "--arch", "gru",
                 "--embedding-size", "8", "--hidden-size", "8", "--max-steps", "2", "--output", str(folder),
                 "--no-progress", "--dropout", "0"]) == 0
    return folder


@pytest.fixture(scope="module")
def port(translator) -> int:
    """A server with short limits (LIMITS) and an API key, on 127.0.0.1: its port."""
    running = server(create_app(load_runs([translator]), LIMITS, api_key=KEY), "127.0.0.1", 0, LIMITS,
                     log_level="error")
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not running.started and time.monotonic() < deadline:
        time.sleep(0.01)
    assert running.started
    yield running.servers[0].sockets[0].getsockname()[1]
    running.should_exit = True
    thread.join(5)


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def read_response(sock: socket.socket) -> tuple[int, dict, bytes] | None:
    """One HTTP response from `sock`: (status, headers, body), or None when the server closed the connection
    (or reset it) instead."""
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, body = data.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        headers = {name.lower(): value.strip() for name, value in (line.split(":", 1) for line in lines[1:])}
        while len(body) < int(headers.get("content-length", 0)):
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
    except ConnectionResetError:
        return None
    return int(lines[0].split()[1]), headers, body


def closed(sock: socket.socket) -> bool:
    """The server has closed the connection (end of file or reset)."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def post(path: str, body: bytes, extra: str = "") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n").encode() + body


GET_HEALTH = b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n"


def test_serve_transport_keeps_normal_requests_alive_on_one_connection(port):
    translate = post("/v1/translate", json.dumps({"model": "de-en", "text": "der hund .", "beam": 1}).encode(), AUTH)
    with connect(port) as sock:
        for request in (GET_HEALTH, translate, GET_HEALTH):
            sock.sendall(request)
            status, headers, body = read_response(sock)
            assert status == 200 and headers.get("connection") != "close", body
        time.sleep(LIMITS.header_timeout + 0.3)     # idle between requests: keep-alive's timeout, not the head's
        sock.sendall(GET_HEALTH)
        assert read_response(sock)[0] == 200
    with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:   # an ordinary client, one pooled connection
        answers = [client.post("/v1/translate", json={"model": "de-en", "text": "der hund .", "beam": 1},
                               headers={"Authorization": f"Bearer {KEY}"}) for _ in range(3)]
    assert [a.status_code for a in answers] == [200] * 3


def test_serve_transport_refuses_a_head_over_its_size_limit(port):
    for request in (f"GET /healthz HTTP/1.1\r\nHost: test\r\nX-Big: {'a' * 5000}\r\n\r\n",
                    f"GET /healthz?{'q' * 5000} HTTP/1.1\r\nHost: test\r\n\r\n",
                    "GET /healthz HTTP/1.1\r\nHost: test\r\n" + "".join(f"X-{i}: {'c' * 300}\r\n" for i in range(14))
                    + "\r\n"):                                          # many headers, over the limit together
        with connect(port) as sock:
            sock.sendall(request.encode())
            status, headers, body = read_response(sock)
            assert status == 431 and headers["connection"] == "close"
            assert json.loads(body) == {"error": "the request's URL and headers are over the server's limit of "
                                                 "4,096 bytes"}
            assert closed(sock)
    with connect(port) as sock:                          # just under the limit: answered; and the server goes on
        sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: test\r\nX-Big: {'a' * 3900}\r\n\r\n".encode())
        assert read_response(sock)[0] == 200


def test_serve_transport_refuses_too_many_headers(port):
    def headers(count: int) -> bytes:                                        # Host and count - 1 others
        return ("GET /healthz HTTP/1.1\r\nHost: test\r\n" + "".join(f"X-{i}: 1\r\n" for i in range(count - 1))
                + "\r\n").encode()

    with connect(port) as sock:
        sock.sendall(headers(LIMITS.max_headers + 1))
        status, _, body = read_response(sock)
        assert status == 431 and json.loads(body) == {"error": "the request has more than 20 headers, the server's "
                                                               "limit"}
        assert closed(sock)
    with connect(port) as sock:
        sock.sendall(headers(LIMITS.max_headers))
        assert read_response(sock)[0] == 200                                 # exactly the limit


def resident_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    pytest.skip("no /proc/self/status: the memory of the process is not measured here")


def test_serve_transport_stops_reading_an_endless_head(port):
    """Four connections each send a header without end (the issue's 100 MB): the server answers 431 (or
    closes) after a little over the limit, so neither it keeps growing nor the clients get far."""
    total, piece = 32 << 20, b"a" * (64 << 10)
    before = resident_bytes()
    sockets, sent = [], []
    for _ in range(4):
        sock = connect(port)
        sockets.append(sock)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: test\r\nX-Endless: ")
        count = 0
        try:
            while count < total:
                sock.sendall(piece)
                count += len(piece)
        except OSError:                                  # reset or broken pipe: the server closed the connection
            pass
        sent.append(count)
    grown = resident_bytes() - before                    # with all four connections still open on this side
    for sock in sockets:
        answer = read_response(sock)
        assert answer is None or answer[0] == 431
        sock.close()
    assert max(sent) < total, sent                       # each was cut off (the kernel's buffers hold a few MB)
    assert grown < 8 << 20, f"the server grew by {grown / 2**20:.1f} MB"
    with connect(port) as sock:
        sock.sendall(GET_HEALTH)
        assert read_response(sock)[0] == 200


def test_serve_transport_closes_a_half_sent_head_after_the_header_timeout(port):
    with connect(port) as sock:
        start = time.monotonic()
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: test\r\nX-Slow: 1\r\n")        # never finished
        status, headers, body = read_response(sock)
        waited = time.monotonic() - start
        assert status == 408 and headers["connection"] == "close"
        assert json.loads(body) == {"error": "the request's headers took longer than the server's limit of 0.5 s"}
        assert LIMITS.header_timeout - 0.1 < waited < LIMITS.header_timeout + 2 and closed(sock)
    with connect(port) as sock:                                                       # a connection that says nothing
        start = time.monotonic()
        assert closed(sock) and time.monotonic() - start < LIMITS.header_timeout + 2


def test_serve_transport_answers_408_when_a_body_stalls(port):
    body = json.dumps({"model": "de-en", "text": "der hund ."}).encode()
    with connect(port) as sock:
        start = time.monotonic()
        sock.sendall(post("/v1/translate", body, AUTH)[:-5])                         # the body's end never comes
        status, headers, answer = read_response(sock)
        waited = time.monotonic() - start
        assert status == 408 and headers["connection"] == "close"
        assert json.loads(answer) == {"error": "the request's body took longer than the server's limit of 1 s"}
        assert LIMITS.body_timeout - 0.1 < waited < LIMITS.body_timeout + 2 and closed(sock)


def test_serve_transport_checks_the_key_before_reading_the_body(port):
    with connect(port) as sock:
        sock.sendall(post("/v1/translate", b"{not json"))                            # no key, malformed JSON
        status, headers, body = read_response(sock)
        assert status == 401 and headers["www-authenticate"] == "Bearer"
        assert json.loads(body) == {"error": "a valid API key is needed: send the header 'Authorization: Bearer KEY'"}
        sock.sendall(post("/v1/translate", b"{not json", "Authorization: Bearer guess\r\n"))
        assert read_response(sock)[0] == 401
        sock.sendall(post("/v1/translate", b"{not json", AUTH))                      # with it: the JSON's turn
        status, _, body = read_response(sock)
        assert status == 400 and "not valid JSON" in json.loads(body)["error"]
    for length in (1000, 500 << 20):          # within the body limit, and far over it: the body is never sent
        with connect(port) as sock:
            sock.sendall(f"POST /v1/translate HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {length}\r\n\r\n".encode())
            assert read_response(sock)[0] == 401      # at once: waiting for the body would be a 408 (with the key)
    with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
        assert client.get("/v1/models").status_code == 401
        preflight = {"Origin": "http://page.example", "Access-Control-Request-Method": "POST"}
        assert client.options("/v1/translate", headers=preflight).status_code != 401   # browsers send it keyless
        assert client.options("/v1/translate").status_code == 401
        request = {"model": "de-en", "text": "der hund .", "beam": 1}
        assert client.post("/v1/translate", json=request, headers={"Authorization": f"bearer {KEY}"}).status_code == 200
        for path in ("/", "/healthz", "/metrics", "/openapi.json", "/static/index.html"):
            assert client.get(path).status_code == 200, path


def test_serve_transport_caps_the_decode_length(port, translator):
    url, auth = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {KEY}"}
    over = httpx.post(f"{url}/v1/summarize", json={"model": "de-en", "text": "der hund .", "max_length": 13},
                      headers=auth)
    assert over.status_code == 422 and over.json() == {"error": "max_length 13 is over the limit of 12"}
    model = seqlab.load(translator)
    short, long = "hund", "der mann sieht der hund und der katze ."       # 2 x 1 + 10 = 12; 2 x 9 + 10 = 28 tokens
    uncapped = model.generate([long], beam=1)[0]
    assert len(uncapped.tokens) >= 12                                       # the rule's length is over the cap
    got = httpx.post(f"{url}/v1/translate", json={"model": "de-en", "text": [short, long], "beam": 1}, headers=auth)
    assert got.status_code == 200
    expected = [model.generate([short], beam=1)[0], model.generate([long], beam=1, max_length=12)[0]]
    assert [r["tokens"] for r in got.json()["results"]] == [e.tokens for e in expected]
    assert len(expected[1].tokens) < len(uncapped.tokens)
    given = httpx.post(f"{url}/v1/translate", json={"model": "de-en", "text": long, "beam": 1, "max_length": 12},
                       headers=auth)
    assert given.json()["results"][0]["tokens"] == expected[1].tokens


def test_serve_transport_options_reach_the_server(translator, monkeypatch, capsys):
    import uvicorn

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    seen = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **settings: seen.update(settings))
    assert main(["serve", str(translator), "--port", str(free), "--max-header-bytes", "2048", "--max-headers", "7",
                 "--header-timeout", "2.5", "--body-timeout", "4", "--max-length", "99"]) == 0
    limits = seen["http"].limits
    assert (limits.max_header_bytes, limits.max_headers, limits.header_timeout, limits.body_timeout,
            limits.max_length) == (2048, 7, 2.5, 4.0, 99)
    assert seen["ws"] == "none" and (seen["host"], seen["port"]) == ("127.0.0.1", free)
    defaults = ServeLimits()
    assert (defaults.max_header_bytes, defaults.max_headers, defaults.header_timeout, defaults.body_timeout,
            defaults.max_length) == (16384, 100, 10.0, 30.0, 1024)
    capsys.readouterr()
    for option, value, message in (("--header-timeout", "0", "--header-timeout: must be in (0, 3600], got 0.0"),
                                   ("--body-timeout", "inf", "--body-timeout: must be a finite number, got inf"),
                                   ("--max-header-bytes", "100", "--max-header-bytes: must be at least 1024, got 100"),
                                   ("--max-headers", "0", "--max-headers: must be at least 1, got 0"),
                                   ("--max-length", "0", "--max-length: must be at least 1, got 0")):
        one_line_error(*run_seqlab(["serve", translator, "--port", free, option, value], capsys), message)
