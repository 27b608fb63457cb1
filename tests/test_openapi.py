"""The OpenAPI document of `seqlab serve` is true to the server: a running server's answers to good and bad
requests on every route, over real sockets, validated against the document it serves (openapi-core: every
status must be declared for its operation, every body must match the declared schema), with and without an
API key; and /docs loads only this server's files.

A longer fuzz run (schemathesis, requests generated from the document) is marked slow.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
from openapi_core import Config, OpenAPI
from openapi_core.datatypes import RequestParameters
from openapi_core.deserializing.media_types.util import plain_loads
from werkzeug.datastructures import Headers, ImmutableMultiDict

from conftest import serving
from seqlab.serve.app import create_app, load_runs
from seqlab.serve.limits import ServeLimits
from seqlab.serve.openapi import SWAGGER_UI_VERSION, VENDOR
from seqlab.serve.shapes import openai_route

KEY = "s3cret"
LIMITS = ServeLimits(max_body_bytes=4096, max_chars=200, max_items=4, max_tokens=16, max_beam=4)

# A good request for every operation with a JSON body (a new one must be added here: the test says so).
GOOD = {
    "/v1/generate": {"model": "lm", "prompt": "ROMEO:", "max_tokens": 4, "seed": 1},
    "/v1/score": {"model": "lm", "text": ["To be", "or not"]},
    "/v1/tag": {"model": "ner", "text": "John lives in Paris ."},
    "/v1/classify": {"model": "sentiment", "text": ["a warm and funny film"]},
    "/v1/translate": {"model": "de-en", "text": "der hund sieht .", "beam": 2, "max_length": 6},
    "/v1/summarize": {"model": "de-en", "text": ["der hund sieht ."], "beam": 1, "max_length": 6, "attention": True},
    "/v1/completions": {"model": "lm", "prompt": "ROMEO:", "max_tokens": 4},
    "/v1/explain": {"model": "lm", "text": "ROMEO:", "views": ["next-token"], "options": {"top_k": 2}},
}
# Good requests the model refuses (422) or a family cannot answer (400): declared, in the route's error shape.
REFUSED = [
    ("/v1/generate", {"model": "lm", "max_tokens": 17}, 422),            # over --max-tokens
    ("/v1/classify", {"model": "sentiment", "text": "y" * 201}, 422),     # over --max-chars
    ("/v1/tag", {"model": "sentiment", "text": "a film"}, 400),          # a classifier does not tag
    ("/v1/translate", {"model": "de-en", "text": "der hund", "beam": 5}, 422),    # over --max-beam
    ("/v1/explain", {"model": "lm", "text": "To be", "views": ["no-such-view"]}, 422),    # a view it has not
]


@pytest.fixture(scope="module")
def models(serve_runs):
    """The session's tiny run of each family (`conftest.serve_runs`): the document is checked, not what they learnt."""
    return load_runs(serve_runs.values())


@pytest.fixture(scope="module", params=[None, KEY], ids=["open", "keyed"])
def server(request, models):
    """A running server (without, then with an API key): (base url, key, its document as openapi-core reads it)."""
    server, url = serving(create_app(models, LIMITS, api_key=request.param))
    document = httpx.get(f"{url}/openapi.json").json()
    yield url, request.param, document, OpenAPI.from_dict(document, config=CONFIG)
    server.should_exit = True


CONFIG = Config(extra_media_type_deserializers={"text/event-stream": plain_loads})


class Call:
    """An httpx request as openapi-core reads one."""

    def __init__(self, request: httpx.Request):
        self.host_url = f"{request.url.scheme}://{request.url.netloc.decode()}"
        self.path, self.method = request.url.path, request.method.lower()
        self.body = request.content or None
        self.content_type = request.headers.get("content-type", "")
        self.parameters = RequestParameters(query=ImmutableMultiDict(request.url.params.multi_items()),
                                            header=Headers(dict(request.headers)), cookie=ImmutableMultiDict())


class Answer:
    """An httpx response as openapi-core reads one."""

    def __init__(self, response: httpx.Response):
        self.status_code, self.data = response.status_code, response.content
        self.content_type = response.headers.get("content-type", "").split(";")[0]
        self.headers = Headers(dict(response.headers))


def send(server, method: str, path: str, body=None, content: bytes | None = None, key: str | None = "") -> tuple:
    """`method path` with a JSON `body` (or raw `content`) and the server's key (`key`: another, None: none);
    the answer validated against the document: (response, the validated request's errors)."""
    url, server_key, _, spec = server
    headers = {"content-type": "application/json"} if body is not None or content is not None else {}
    key = server_key if key == "" else key
    if key is not None:
        headers["authorization"] = f"Bearer {key}"
    if body is not None:
        content = json.dumps(body).encode()
    with httpx.Client(timeout=30) as client:
        request = client.build_request(method, url + path, content=content, headers=headers)
        response = client.send(request)
    assert response.status_code != 500, response.text
    spec.validate_response(Call(request), Answer(response))          # declared, and in the declared schema
    return response, list(spec.iter_request_errors(Call(request)))


def operations(document: dict):
    return [(method, path) for path, items in document["paths"].items() for method in items]


def named(path: str, model: str = "lm") -> str:
    """`path` with its parameters (GET /v1/models/{model_id}) naming `model`."""
    return re.sub(r"\{[^}]*\}", model, path)


def test_openapi_every_good_request_is_valid_and_so_is_its_answer(server):
    document = server[2]
    posts = [path for method, path in operations(document) if method == "post"]
    assert set(posts) <= set(GOOD), f"give {sorted(set(posts) - set(GOOD))} a good request in GOOD"
    for method, path in operations(document):
        response, errors = send(server, method, named(path), GOOD.get(path) if method == "post" else None)
        assert response.status_code == 200 and errors == [], (path, response.text, errors)
    streamed, errors = send(server, "post", "/v1/generate", {**GOOD["/v1/generate"], "stream": True})
    assert streamed.headers["content-type"].startswith("text/event-stream") and errors == []
    assert streamed.text.endswith("data: [DONE]\n\n")


def test_openapi_every_bad_request_gets_a_declared_error_in_its_routes_shape(server):
    document = server[2]
    for method, path in operations(document):
        shape = "OpenAIError" if openai_route(path) else "Error"
        declared = document["paths"][path][method]["responses"]
        assert declared["413"]["content"]["application/json"]["schema"]["$ref"].endswith(f"/{shape}")
        answers = {413: send(server, method, named(path), content=b" " * 5000)[0]}
        if "{" in path:
            answers[404] = send(server, method, named(path, "nope"))[0]
        if method == "post":
            good = GOOD[path]
            answers[400] = send(server, method, path, content=b'{"model": ')[0]
            answers[404] = send(server, method, path, {**good, "model": "nope"})[0]
            missing, errors = send(server, method, path, {})
            assert errors, f"{path}: the document lets a request without a model through"
            unknown, errors = send(server, method, path, {**good, "colour": "blue"})
            assert errors, f"{path}: the document lets a field the server refuses through"
            answers[422] = unknown
            assert missing.status_code == 422
        for status, response in answers.items():
            assert response.status_code == status, (path, status, response.text)
            error = response.json()["error"]
            assert isinstance(error, dict if shape == "OpenAIError" else str) and error, (path, status, error)
    for path, body, status in REFUSED:
        assert send(server, "post", path, body)[0].status_code == status, (path, body)


# The least a request needs (no option that a bound's value could conflict with: a seed beside a beam)
BASE = {**GOOD, "/v1/generate": {"model": "lm", "prompt": "ROMEO:", "max_tokens": 4},
        "/v1/translate": {"model": "de-en", "text": "der hund sieht .", "max_length": 6},
        "/v1/summarize": {"model": "de-en", "text": "der hund sieht .", "max_length": 6}}
# what only the model can refuse of a request the document allows (422): a prompt over its context (16 tokens),
# a text of spaces only (no words), a beam wider than the tokens it can produce
MODEL_REFUSALS = ("longer than the model's context", "there is nothing to", "tokens the model can produce",
                  "model has no view", "the text to explain")   # a view its architecture lacks; a blank text


def member_schemas(schema: dict, shapes: dict) -> list[dict]:
    """The schemas a property's value may follow: each member of its anyOf, $refs followed, with the bounds the
    property declares beside its anyOf (the stricter of both)."""
    found = []
    for member in schema.get("anyOf", [schema]):
        while "$ref" in member:
            member = shapes[member["$ref"].rsplit("/", 1)[-1]]
        member = dict(member)
        for key, stricter in (("maximum", min), ("minimum", max), ("maxLength", min), ("maxProperties", min)):
            if key in schema and member is not schema:
                member[key] = stricter(schema[key], member.get(key, schema[key]))
        found.append(member)
    return found


def edges(schema: dict) -> list[tuple[object, bool]]:
    """Values just inside and just outside each bound the schema of a property declares: (value, inside)."""
    cases: list[tuple[object, bool]] = []
    kind = schema.get("type")
    if kind in ("integer", "number"):
        step = 1 if kind == "integer" else 1e-6
        if "maximum" in schema:
            top = int(schema["maximum"]) if kind == "integer" else schema["maximum"]
            cases += [(top, True), (top + step, False)]
        if "minimum" in schema:
            low = int(schema["minimum"]) if kind == "integer" else schema["minimum"]
            cases += [(low, True), (low - step, False)]
        if "exclusiveMinimum" in schema:
            cases += [(schema["exclusiveMinimum"], False), (schema["exclusiveMinimum"] + step, True)]
    elif kind == "string":
        if "maxLength" in schema:
            cases += [("x" * schema["maxLength"], True), ("x" * (schema["maxLength"] + 1), False)]
        if schema.get("minLength"):
            cases += [("x" * (schema["minLength"] - 1), False), ("x" * schema["minLength"], True)]
    elif kind == "array":
        if "maxItems" in schema:
            cases += [(["x"] * schema["maxItems"], True), (["x"] * (schema["maxItems"] + 1), False)]
        if schema.get("minItems"):
            cases += [(["x"] * (schema["minItems"] - 1), False), (["x"] * schema["minItems"], True)]
        cases += [([value], inside) for value, inside in edges(schema.get("items", {}))]
    elif kind == "object" and "maxProperties" in schema:
        cases += [({}, True), ({str(k): 1.0 for k in range(schema["maxProperties"] + 1)}, False)]
    return cases


@pytest.mark.parametrize("server", [None], ids=["open"], indirect=True)     # the key changes no bound
def test_openapi_declares_every_limit_the_server_enforces(server):
    """The document and the server's checks side by side: for every bound the document declares on a request's
    fields (a maximum, a length, a number of items, each with this server's limits: --max-chars, --max-items,
    --max-tokens, --max-beam, --max-length), the value at the bound is valid for the document and the server
    takes it, and the value past it is invalid for both (a 4xx); so are the bounds that tie two fields (prompts x
    n, stream_options with stream, a beam without sampling options). A request at a bound the model itself
    refuses (a prompt over its context) must be refused by the model, not by a limit."""
    from jsonschema import Draft202012Validator

    url, key, document, _ = server
    shapes, checked = document["components"]["schemas"], 0
    http = httpx.Client(base_url=url, timeout=30, headers={"authorization": f"Bearer {key}"} if key else {})

    def taken(response) -> bool:
        if response.status_code == 200:
            return True
        error = response.json()["error"]
        return any(refusal in (error["message"] if isinstance(error, dict) else error) for refusal in MODEL_REFUSALS)

    def check(path: str, body: dict, inside: bool) -> None:
        name = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        valid = Draft202012Validator({"$ref": name, "components": document["components"]}).is_valid(body)
        response = http.post(path, json=body)
        assert valid == inside, (path, body, "the document's verdict")
        assert taken(response) == inside and (inside or 400 <= response.status_code < 500), (path, body,
                                                                                              response.text)

    for path, base in BASE.items():
        body = request_schema_of(document, path)
        for name, field in body["properties"].items():
            for member in member_schemas(field, shapes):
                for value, inside in edges(member):
                    check(path, {**base, name: value}, inside)
                    checked += 1
    for k in range(1, LIMITS.max_items + 1):                                   # prompts x n <= max_items
        prompts = ["ROMEO:"] * k
        check("/v1/completions", {**BASE["/v1/completions"], "prompt": prompts, "n": LIMITS.max_items // k}, True)
        check("/v1/completions", {**BASE["/v1/completions"], "prompt": prompts, "n": LIMITS.max_items // k + 1},
              False)
    check("/v1/completions", {**BASE["/v1/completions"], "stream_options": {"include_usage": True}}, False)
    check("/v1/completions", {**BASE["/v1/completions"], "stream_options": {"include_usage": True},
                              "stream": True}, True)
    check("/v1/generate", {**BASE["/v1/generate"], "beam": 2}, True)
    for sampling in ({"seed": 1}, {"greedy": True}, {"temperature": 0.5}, {"top_k": 3}, {"top_p": 0.5}):
        check("/v1/generate", {**BASE["/v1/generate"], "beam": 2, **sampling}, False)
    assert checked > 60                                                         # every endpoint's bounds were met
    http.close()


def request_schema_of(document: dict, path: str) -> dict:
    """The JSON schema of POST `path`'s body, its $ref followed."""
    schema = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    return document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]


def test_openapi_declares_the_bearer_scheme_exactly_when_the_server_has_a_key(server):
    url, key, document, _ = server
    schemes = document["components"].get("securitySchemes", {})
    secured = [(m, p) for m, p in operations(document) if document["paths"][p][m].get("security")]
    v1 = [(m, p) for m, p in operations(document) if p.startswith("/v1/")]
    declares_401 = [(m, p) for m, p in operations(document) if "401" in document["paths"][p][m]["responses"]]
    if key is None:
        assert schemes == {} and secured == [] and declares_401 == []
        return
    assert schemes == {"HTTPBearer": {"type": "http", "scheme": "bearer", "description": schemes["HTTPBearer"][
        "description"]}}
    assert secured == v1 == declares_401 and v1
    for method, path in v1:
        body = GOOD.get(path) if method == "post" else None
        for wrong in (None, "wrong"):
            response, errors = send(server, method, named(path), body, key=wrong)
            assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"
            assert errors if wrong is None else True            # no Authorization header: the document says so
    assert send(server, "get", "/healthz", key=None)[0].status_code == 200     # outside /v1: no key


def test_openapi_drops_fastapis_validation_error_and_declares_no_500(server):
    document = server[2]
    text = json.dumps(document)
    assert "HTTPValidationError" not in text and '"detail"' not in text
    for method, path in operations(document):
        responses = document["paths"][path][method]["responses"]
        assert "500" not in responses and "default" not in responses
        assert {"408", "413", "431"} <= set(responses)
        if path.startswith("/v1/"):
            assert "504" in responses
    for path in ("/v1/generate", "/v1/completions"):
        if path in document["paths"]:
            ok = document["paths"][path]["post"]["responses"]["200"]
            assert "text/event-stream" in ok["content"] and "server-sent events" in ok["description"]
    assert document["info"]["license"]["identifier"] == "MIT"


def test_openapi_docs_page_loads_only_this_servers_files(server):
    url = server[0]
    page = httpx.get(f"{url}/docs")
    assert page.status_code == 200 and "SwaggerUIBundle" in page.text
    assert "http://" not in page.text and "https://" not in page.text and "//cdn" not in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    for name in ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png"):
        assert f"{VENDOR}/{name}" in page.text
        served = httpx.get(f"{url}{VENDOR}/{name}")
        assert served.status_code == 200 and len(served.content) > 500
    assert httpx.get(f"{url}/redoc").status_code == 404


def test_openapi_vendored_swagger_ui_is_the_files_its_readme_names():
    """The files /docs loads are swagger-ui-dist's, unchanged: each hash in the vendor folder's README matches."""
    import hashlib

    import seqlab.serve

    folder = Path(seqlab.serve.__file__).parent / "static" / "vendor" / "swagger-ui"
    readme = (folder / "README.md").read_text()
    assert f"Swagger UI {SWAGGER_UI_VERSION}" in readme and f"swagger-ui-dist-{SWAGGER_UI_VERSION}.tgz" in readme
    hashes = dict(re.findall(r"^\| `([^`]+)` \| `([0-9a-f]{64})` \|$", readme, re.MULTILINE))
    assert set(hashes) == {p.name for p in folder.iterdir()} - {"README.md"}
    assert {"swagger-ui-bundle.js", "swagger-ui.css", "LICENSE", "NOTICE"} <= set(hashes)
    for name, digest in hashes.items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, name


@pytest.mark.slow
@pytest.mark.parametrize("key", [None, KEY], ids=["open", "keyed"])
def test_openapi_fuzzed_requests_get_declared_answers(models, key):
    """Requests generated from the document (schemathesis: fitting it, and not), each answered with a declared
    status in its declared schema, never a 5xx; a request that does not fit the document is refused, and one that
    fits it is taken (but what only the model can refuse, `MODEL_REFUSALS`). The model named is one that answers
    the endpoint, so that the fuzz reaches the models and not only the 404."""
    import dataclasses

    import schemathesis
    from hypothesis import HealthCheck, given, settings
    from schemathesis.checks import not_a_server_error
    from schemathesis.generation import GenerationMode
    from schemathesis.specs.openapi.checks import (
        content_type_conformance,
        negative_data_rejection,
        positive_data_acceptance,
        response_schema_conformance,
        status_code_conformance,
    )

    def accepted(ctx, response, case):
        """schemathesis' positive_data_acceptance, but for a refusal only the model can make (a 422 of
        `MODEL_REFUSALS`). (An integer field takes 1.0, which JSON Schema's integer holds to be one.)"""
        if response.status_code == 422 and any(refusal in response.text for refusal in MODEL_REFUSALS):
            return None
        return positive_data_acceptance(ctx, response, case)

    def rejected(ctx, response, case):
        """schemathesis' negative_data_rejection, with a 413 counted as the refusal it is (a body over
        --max-body-bytes is refused before it is read, whatever else is wrong with it)."""
        if response.status_code == 413:
            return None
        return negative_data_rejection(ctx, response, case)

    limits = dataclasses.replace(LIMITS, max_tokens=64, max_beam=8, max_length=16)   # the defaults within them
    server, url = serving(create_app(models, limits, api_key=key))
    headers = {"authorization": f"Bearer {key}"} if key else {}
    checks = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]

    def fuzz(operation, mode):
        """A hypothesis test of `operation` with requests of `mode`."""
        @settings(max_examples=40, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy(mode))
        def check(case):
            if mode == GenerationMode.POSITIVE:                   # a model that answers, so the fuzz reaches it
                if isinstance(case.body, dict) and operation.path in GOOD:
                    case.body["model"] = GOOD[operation.path]["model"]
                for name in case.path_parameters or {}:
                    case.path_parameters[name] = "lm"
            response = case.call(base_url=url, headers=headers, timeout=60)
            more = [rejected] if mode == GenerationMode.NEGATIVE else [accepted]
            case.validate_response(response, checks=checks + more)

        return check

    try:
        for result in schemathesis.openapi.from_url(f"{url}/openapi.json").get_all_operations():
            operation = result.ok()
            with_body = operation.method.upper() == "POST"           # a request that does not fit needs a body
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE) if with_body else (GenerationMode.POSITIVE,):
                fuzz(operation, mode)()
    finally:
        server.should_exit = True
