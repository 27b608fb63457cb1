"""`seqlab serve` speaks OpenAI's API: the official `openai` client lists the models and asks for completions
of a real server on 127.0.0.1, and gets what the Python API gives (greedy and seeded sampling, log
probabilities, stop strings, streaming); what the protocol has and the models cannot do is refused in OpenAI's
error shape, naming the field. Also: CORS (--cors-origin) and the server-sent events' headers and finish reason."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
openai = pytest.importorskip("openai", reason="the OpenAI-compatible API's tests need the openai client: "
                                              "pip install -e '.[dev]'")
import httpx  # noqa: E402

import seqlab  # noqa: E402
from conftest import serving  # noqa: E402
from seqlab.decoding.options import SamplingOptions  # noqa: E402
from seqlab.families.lm import completion  # noqa: E402
from seqlab.serve.app import create_app, load_runs  # noqa: E402
from seqlab.serve.limits import ServeLimits  # noqa: E402
from seqlab.serve.onnx import OnnxServed  # noqa: E402
from seqlab.serve.served import Served  # noqa: E402

LIMITS = ServeLimits(max_tokens=40, max_items=6, max_chars=300)
PROMPT = "ROMEO:"


class Export:
    """What the listing reads of an ONNX export's runtime."""

    manifest = {"arch": "transformer"}
    parameters = 321


@pytest.fixture(scope="module")
def run(serve_runs) -> Path:
    """The session's tiny language model (`conftest.serve_runs`: a transformer over characters)."""
    return serve_runs["lm"]


@pytest.fixture(scope="module")
def lm(run):
    return seqlab.load(run)


@pytest.fixture(scope="module")
def url(serve_runs, tmp_path_factory):
    models = load_runs([serve_runs["lm"], serve_runs["sentiment"]])
    models["lm-onnx"] = OnnxServed("lm-onnx", "lm", Export(), tmp_path_factory.mktemp("export"), "a language model")
    server, url = serving(create_app(models, LIMITS))
    yield url
    server.should_exit = True


@pytest.fixture(scope="module")
def client(url):
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30)


def test_openai_client_lists_and_retrieves_the_models(client, run):
    listed = {m.id: m for m in client.models.list()}
    assert list(listed) == ["lm", "sentiment", "lm-onnx"]
    lm = listed["lm"]
    assert (lm.object, lm.owned_by, lm.created) == ("model", "seqlab", int(run.stat().st_mtime))
    extra = lm.model_extra
    assert extra["task"] == "lm" and extra["arch"] == "transformer" and extra["parameters"] > 0
    assert extra["endpoints"] == ["/v1/generate", "/v1/score", "/v1/completions"]
    assert "perplexity" in extra["metrics"]["valid"] and extra["summary"].startswith("a language model")
    assert extra["limits"] == dataclasses.asdict(LIMITS)                   # every limit, whatever its name
    assert listed["sentiment"].model_extra["endpoints"] == ["/v1/classify"]
    assert listed["lm-onnx"].model_extra["endpoints"] == ["/v1/generate", "/v1/score"]   # no completions on ONNX
    assert client.models.retrieve("lm").model_dump() == lm.model_dump()
    with pytest.raises(openai.NotFoundError) as missing:
        client.models.retrieve("nobody")
    assert "no model named 'nobody'" in missing.value.message
    assert (missing.value.type, missing.value.param, missing.value.code) == ("not_found_error", "model",
                                                                             "model_not_found")


def test_openai_completion_greedy_is_the_python_api_s(client, lm):
    answer = client.completions.create(model="lm", prompt=PROMPT, max_tokens=12, temperature=0)
    assert answer.id.startswith("cmpl-") and answer.object == "text_completion" and answer.model == "lm"
    (choice,) = answer.choices
    assert choice.text == lm.generate(PROMPT, max_tokens=12, greedy=True) and choice.text
    assert (choice.index, choice.finish_reason, choice.logprobs) == (0, "length", None)
    prompt_tokens = len(lm.prompt_ids(PROMPT)) - 1                           # without the line start
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens, answer.usage.total_tokens) == (
        prompt_tokens, 12, prompt_tokens + 12)
    default = client.completions.create(model="lm", prompt=PROMPT, top_p=0)  # OpenAI's default: 16 tokens
    assert default.choices[0].text == lm.generate(PROMPT, max_tokens=16, greedy=True)


def test_openai_completion_samples_each_choice_with_its_seed(client, lm):
    prompts = [PROMPT, "JULIET: O"]
    answer = client.completions.create(model="lm", prompt=prompts, n=2, seed=11, max_tokens=10, temperature=0.9,
                                       top_p=0.95)
    assert [c.index for c in answer.choices] == [0, 1, 2, 3]
    expected = [lm.generate(p, max_tokens=10, seed=11 + k, temperature=0.9, top_p=0.95) for p in prompts
                for k in range(2)]
    assert [c.text for c in answer.choices] == expected and expected[0] != expected[1]
    again = client.completions.create(model="lm", prompt=prompts, n=2, seed=11, max_tokens=10, temperature=0.9,
                                      top_p=0.95, user="someone")
    assert [c.text for c in again.choices] == expected
    assert answer.usage.prompt_tokens == sum(len(lm.prompt_ids(p)) - 1 for p in prompts)   # each prompt once


def test_openai_completion_logprobs_and_echo_are_the_model_s(client, lm):
    answer = client.completions.create(model="lm", prompt=PROMPT, max_tokens=8, temperature=0, logprobs=3,
                                       echo=True)
    (choice,) = answer.choices
    made = completion.complete(lm, [PROMPT], [SamplingOptions(max_tokens=8, greedy=True)], top_logprobs=3)[0]
    assert choice.text == PROMPT + made.text
    logprobs = choice.logprobs
    tokens, scores = completion.prompt_logprobs(lm, PROMPT)
    assert logprobs.tokens == [*tokens, *made.tokens]
    assert logprobs.token_logprobs[0] is None and logprobs.top_logprobs[0] is None         # OpenAI's first token
    assert logprobs.token_logprobs[1:] == pytest.approx([*scores[1:], *made.logprobs], abs=1e-6)
    for token, logprob, top, offset in zip(logprobs.tokens[len(tokens):], logprobs.token_logprobs[len(tokens):],
                                           logprobs.top_logprobs[len(tokens):],
                                           logprobs.text_offset[len(tokens):], strict=True):
        assert top[token] == logprob and len(top) <= 4 and max(top.values()) == logprob   # greedy: the best
        assert choice.text[offset] == ("\n" if token == "</s>" else token)
    assert logprobs.text_offset[:len(tokens)] == list(range(len(PROMPT)))
    assert answer.usage.completion_tokens == 8
    plain = client.completions.create(model="lm", prompt=PROMPT, max_tokens=0, echo=True)
    assert plain.choices[0].text == PROMPT and plain.usage.completion_tokens == 0


def test_openai_completion_ends_at_the_first_stop_string(client, lm):
    whole = lm.generate(PROMPT, max_tokens=30, greedy=True)
    stop = whole[8:10]
    cut = whole.index(stop)
    answer = client.completions.create(model="lm", prompt=PROMPT, max_tokens=30, temperature=0,
                                       stop=["never in it", stop], logprobs=0)
    (choice,) = answer.choices
    assert (choice.text, choice.finish_reason) == (whole[:cut], "stop")
    assert "".join("\n" if t == "</s>" else t for t in choice.logprobs.tokens) == whole[:cut]
    assert answer.usage.completion_tokens == cut + len(stop)             # a token per character, to the stop's end
    plain = client.completions.create(model="lm", prompt=PROMPT, max_tokens=30, temperature=0, stop=stop)
    assert plain.choices[0].text == whole[:cut] and plain.usage == answer.usage and plain.choices[0].logprobs is None
    chunks = list(client.completions.create(model="lm", prompt=PROMPT, max_tokens=30, temperature=0, stop=stop,
                                            stream=True, stream_options={"include_usage": True}))
    assert chunks.pop().usage == answer.usage                           # the stream stops at the stop string too
    assert "".join(c.choices[0].text for c in chunks) == whole[:cut]
    assert all(stop not in c.choices[0].text for c in chunks) and chunks[-1].choices[0].finish_reason == "stop"
    assert [c.choices[0].finish_reason for c in chunks[:-1]] == [None] * (len(chunks) - 1)


def test_openai_completion_streams_as_the_whole_answer(client, lm):
    chunks = list(client.completions.create(model="lm", prompt=[PROMPT, "JULIET: O"], n=2, seed=5, max_tokens=9,
                                            stream=True, stream_options={"include_usage": True}, logprobs=2))
    *pieces, usage = chunks
    assert usage.choices == [] and usage.usage.completion_tokens == 4 * 9
    whole = client.completions.create(model="lm", prompt=[PROMPT, "JULIET: O"], n=2, seed=5, max_tokens=9,
                                      logprobs=2)
    assert usage.usage == whole.usage and len({c.id for c in chunks}) == 1 and chunks[0].id.startswith("cmpl-")
    for choice in whole.choices:
        mine = [c.choices[0] for c in pieces if c.choices[0].index == choice.index]
        assert "".join(c.text for c in mine) == choice.text
        assert [t for c in mine for t in c.logprobs.tokens] == choice.logprobs.tokens
        assert [o for c in mine for o in c.logprobs.text_offset] == choice.logprobs.text_offset
        assert [c.finish_reason for c in mine] == [None] * (len(mine) - 1) + ["length"]
    echoed = list(client.completions.create(model="lm", prompt=PROMPT, max_tokens=5, temperature=0, echo=True,
                                            stream=True))
    assert echoed[0].choices[0].text == PROMPT
    assert "".join(c.choices[0].text for c in echoed) == PROMPT + lm.generate(PROMPT, max_tokens=5, greedy=True)


def test_openai_completion_accepts_the_harmless_fields_and_nulls(client, url, lm):
    answer = client.completions.create(model="lm", prompt=PROMPT, max_tokens=5, temperature=0, best_of=1,
                                       presence_penalty=0, frequency_penalty=0.0, logit_bias={}, suffix="",
                                       user="someone", n=1)
    assert answer.choices[0].text == lm.generate(PROMPT, max_tokens=5, greedy=True)
    nulls = httpx.post(f"{url}/v1/completions", json={"model": "lm", "prompt": None, "max_tokens": None, "n": None,
                                                      "temperature": None, "top_p": None, "stop": None,
                                                      "logprobs": None, "echo": None, "stream": None, "seed": None})
    assert nulls.status_code == 200 and len(nulls.json()["choices"]) == 1           # OpenAI's defaults
    assert nulls.json()["usage"]["completion_tokens"] == 16


REFUSED = [
    (openai.BadRequestError, {"best_of": 2}, "best_of", "only 1 is supported"),
    (openai.BadRequestError, {"logit_bias": {"5": 10}}, "logit_bias", "not supported"),
    (openai.BadRequestError, {"presence_penalty": 0.5}, "presence_penalty", "not supported"),
    (openai.BadRequestError, {"frequency_penalty": -1}, "frequency_penalty", "not supported"),
    (openai.BadRequestError, {"suffix": " the end"}, "suffix", "do not insert"),
    (openai.BadRequestError, {"model": "sentiment"}, "model", "use POST /v1/classify"),
    (openai.BadRequestError, {"model": "lm-onnx"}, "model", "--runtime onnx"),
    (openai.NotFoundError, {"model": "nobody"}, "model", "no model named 'nobody'"),
    (openai.UnprocessableEntityError, {"prompt": [1, 2, 3]}, "prompt", "token-id arrays are not supported"),
    (openai.UnprocessableEntityError, {"prompt": [[1, 2], [3]]}, "prompt", "token-id arrays are not supported"),
    (openai.UnprocessableEntityError, {"max_tokens": 41}, "max_tokens", "limit of 40"),
    (openai.UnprocessableEntityError, {"n": 4, "prompt": ["a", "b"]}, "n", "limit is 6"),
    (openai.UnprocessableEntityError, {"prompt": "x" * 301}, "prompt", "301 characters"),
    (openai.UnprocessableEntityError, {"prompt": []}, "prompt", "empty list"),
    (openai.UnprocessableEntityError, {"stop": ["a", "b", "c", "d", "e"]}, "stop", "at most 4"),
    (openai.UnprocessableEntityError, {"stop": ""}, "stop", "empty string"),
    (openai.UnprocessableEntityError, {"stop": ["x", ""]}, "stop.1", "empty string"),
    (openai.UnprocessableEntityError, {"stop": "x" * 257}, "stop", "257 characters; at most 256"),
    (openai.UnprocessableEntityError, {"stop": ["y" * 256, "x" * 300]}, "stop.1", "at most 256"),
    (openai.UnprocessableEntityError, {"temperature": 2.5}, "temperature", "less than or equal to 2"),
    (openai.UnprocessableEntityError, {"logprobs": 6}, "logprobs", "less than or equal to 5"),
    (openai.UnprocessableEntityError, {"seed": 2**53, "n": 2}, "seed", "less than or equal to 9007199254740991"),
    (openai.UnprocessableEntityError, {"prompt": "a" * 40, "max_tokens": 1}, "prompt", "longer than"),
]


@pytest.mark.parametrize("error, fields, param, message", REFUSED, ids=[f"{c[2]}-{i}" for i, c in enumerate(REFUSED)])
def test_openai_client_gets_each_refusal_with_its_message(client, error, fields, param, message):
    request = {"model": "lm", "prompt": PROMPT, "max_tokens": 4, **fields}
    with pytest.raises(error) as refused:
        client.completions.create(**request)
    assert message in refused.value.message and "\n" not in refused.value.message
    assert refused.value.param == param
    assert refused.value.type == ("not_found_error" if error is openai.NotFoundError else "invalid_request_error")


MALFORMED = [
    (b'{"model": "lm", "prompt": ', 400, None, "not valid JSON"),
    ({"model": "lm", "max_tokens": "5"}, 422, "max_tokens", "max_tokens: "),
    ({"model": "lm", "max_tokens": True}, 422, "max_tokens", "max_tokens: "),
    ({"model": "lm", "max_tokens": 2.5}, 422, "max_tokens", "max_tokens: "),
    ({"model": "lm", "n": "2"}, 422, "n", "n: "),
    ({"model": "lm", "temperature": "0.5"}, 422, "temperature", "temperature: "),
    ({"model": "lm", "echo": 1}, 422, "echo", "echo: "),
    ({"model": "lm", "stream": "yes"}, 422, "stream", "stream: "),
    ({"model": "lm", "stream_options": {"include_usage": 1}, "stream": True}, 422, "stream_options.include_usage",
     "stream_options.include_usage: "),
    ({"model": "lm", "stream_options": {"include_usage": True}}, 400, "stream_options", "only allowed with stream"),
    ({"model": "lm", "prompt": 5}, 422, "prompt", "a string or a list of strings"),
    ({"model": "lm", "stop": ["a", 5]}, 422, "stop", "a string or a list of strings"),
    ({"model": "lm", "tempreature": 0.5}, 422, "tempreature", "is not a field"),
    ({"prompt": "x"}, 422, "model", "is required"),
    ({"model": "lm", "seed": -1}, 422, "seed", "greater than or equal to 0"),
]


@pytest.mark.parametrize("body, status, param, message", MALFORMED, ids=[f"{c[2]}-{i}" for i, c in
                                                                         enumerate(MALFORMED)])
def test_openai_routes_answer_malformed_requests_in_openai_s_shape(url, body, status, param, message):
    if isinstance(body, bytes):
        response = httpx.post(f"{url}/v1/completions", content=body, headers={"content-type": "application/json"})
    else:
        response = httpx.post(f"{url}/v1/completions", json=body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
    assert message in error["message"] and error["param"] == param
    assert httpx.post(f"{url}/v1/completions", json={"model": "lm", "temperature": 1, "max_tokens": 1}).status_code \
        == 200                                                    # a JSON integer for a float field is fine


def test_openai_client_is_told_that_chat_and_embeddings_are_not_served(client):
    with pytest.raises(openai.NotFoundError) as chat:
        client.chat.completions.create(model="lm", messages=[{"role": "user", "content": "hello"}])
    assert "POST /v1/chat/completions is not served here" in chat.value.message and "not chat models" in \
        chat.value.message and chat.value.code == "unsupported_endpoint"
    with pytest.raises(openai.NotFoundError, match="no embeddings"):
        client.embeddings.create(model="lm", input="hello")


def test_openai_stream_past_the_deadline_ends_with_an_error_event(run):
    server, url = serving(create_app(load_runs([run]), ServeLimits(max_tokens=5000, request_timeout=0.5)))
    try:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        received = []
        with pytest.raises(openai.APIError, match="took longer than the server's limit of 0.5 s"):
            for chunk in client.completions.create(model="lm", prompt=PROMPT, max_tokens=5000, stream=True):
                received.append(chunk.choices[0].text)
        assert 0 < len(received) < 5000                                 # it began, and was stopped
    finally:
        server.should_exit = True


def test_openai_client_without_the_key_gets_an_authentication_error(run):
    server, url = serving(create_app(load_runs([run]), LIMITS, api_key="s3cret"))
    try:
        with pytest.raises(openai.AuthenticationError) as refused:
            openai.OpenAI(base_url=f"{url}/v1", api_key="wrong", max_retries=0).completions.create(
                model="lm", prompt=PROMPT, max_tokens=2)
        assert "API key" in refused.value.message and refused.value.type == "authentication_error"
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=f"{url}/v1", api_key="wrong", max_retries=0).models.retrieve("lm")
        keyed = openai.OpenAI(base_url=f"{url}/v1", api_key="s3cret", max_retries=0)
        assert [m.id for m in keyed.models.list()] == ["lm"]
    finally:
        server.should_exit = True


def requests_total(url: str) -> dict[tuple[str, str], float]:
    """/metrics' seqlab_requests_total: {(endpoint, status): count}."""
    import re

    found = re.findall(r'^seqlab_requests_total\{endpoint="([^"]*)",status="(\d+)"\} (\S+)$',
                       httpx.get(f"{url}/metrics").text, re.MULTILINE)
    return {(endpoint, status): float(n) for endpoint, status, n in found}


def test_serve_metrics_count_a_model_s_route_under_its_template(url):
    """GET /v1/models/{model_id} is one endpoint of /metrics, whatever the model named (so that names cannot grow
    the series), with its statuses; a path no route answers is "other"."""
    before = requests_total(url)
    for name in ("lm", "sentiment", "nobody", "x" * 50):
        httpx.get(f"{url}/v1/models/{name}")
    httpx.get(f"{url}/no/such/path")
    after = requests_total(url)
    assert after[("/v1/models/{model_id}", "200")] - before.get(("/v1/models/{model_id}", "200"), 0) == 2
    assert after[("/v1/models/{model_id}", "404")] - before.get(("/v1/models/{model_id}", "404"), 0) == 2
    assert after[("other", "404")] - before.get(("other", "404"), 0) == 1
    assert not any(endpoint.startswith("/v1/models/") and "{" not in endpoint for endpoint, _ in after)


# ------------------------------------------------------------------------------ what the client reads


@pytest.fixture(scope="module")
def odd(tmp_path_factory):
    """A server of two models whose text is hard to give back: a byte-level BPE model whose pieces are mostly
    single bytes of multi-byte characters (`conftest.bytes_lm_run`), and a word model for which <unk> is the most
    likely next token (`conftest.unk_lm_run`): (client, base url, {name: the Python API's model})."""
    from conftest import bytes_lm_run, unk_lm_run

    folder = tmp_path_factory.mktemp("odd")
    runs = [bytes_lm_run(folder), unk_lm_run(folder)]
    server, url = serving(create_app(load_runs(runs), LIMITS))
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30)
    yield client, url, {run.name: seqlab.load(run) for run in runs}
    server.should_exit = True


def spelt_bytes(token: str) -> bytes:
    """A logprobs token's bytes: its text's UTF-8, or those of a `bytes:\\xNN...` token (part of a character)."""
    if not token.startswith("bytes:"):
        return token.encode()
    return bytes(int(h, 16) for h in token.removeprefix("bytes:").split("\\x")[1:])


def test_openai_logprobs_tokens_are_the_text_not_the_vocabulary_s_pieces(odd):
    """Byte-level BPE tokens as the client reads them: no Ġ, each the text it adds, and a piece of part of a
    character OpenAI's `bytes:\\xNN` spelling; joined, the text (their bytes, the text's UTF-8), and each whole
    token at its offset; top_logprobs spelt alike."""
    client, _, models = odd
    parts = 0
    for seed in range(3):
        answer = client.completions.create(model="bytes", prompt="ROMEO: ô", max_tokens=12, seed=seed,
                                           temperature=1.5, logprobs=3, echo=True)
        (choice,) = answer.choices
        tokens = choice.logprobs.tokens
        assert not any("Ġ" in t for t in tokens) and "".join(tokens).startswith("ROMEO:")   # the line's space: ""
        joined = b"".join(spelt_bytes(t) for t in tokens).decode("utf-8", errors="replace")
        assert joined.rstrip("\ufffd") == choice.text                # but the bytes of a cut character at the end
        for token, offset in zip(tokens, choice.logprobs.text_offset, strict=True):
            parts += token.startswith("bytes:")
            if not token.startswith("bytes:"):
                assert choice.text[offset:offset + len(token)] == token
        assert all(token in top for token, top in zip(tokens[1:], choice.logprobs.top_logprobs[1:], strict=True))
    assert parts > 0                                                              # the bytes spelling was met


def test_openai_stream_is_the_whole_text_and_never_half_a_character(odd):
    """Streamed, a choice's pieces hold a character's bytes back until it is whole and never send the half one
    max_tokens cuts: joined, they are the text of the same request unstreamed, seed by seed."""
    client, _, models = odd
    lm, cut = models["bytes"], 0
    for seed in range(3):
        for max_tokens in (3, 5, 8):
            request = {"model": "bytes", "prompt": "東京", "max_tokens": max_tokens, "seed": seed, "temperature": 1.5}
            chunks = [c.choices[0].text for c in client.completions.create(**request, stream=True)]
            whole = client.completions.create(**request).choices[0].text
            assert "".join(chunks) == whole and not any(c.endswith("\ufffd") for c in chunks)
            (made,) = completion.complete(lm, ["東京"], [SamplingOptions(max_tokens=max_tokens, seed=seed,
                                                                          temperature=1.5)])
            cut += lm.detokenize(made.prompt_ids[1:] + made.ids).endswith("\ufffd")
    assert cut > 0                                                                # max_tokens did cut one


def test_openai_echo_log_probabilities_are_those_of_v1_score(client, url, odd):
    """One definition: echo's log probability of each prompt token is /v1/score's for the same text, exactly."""
    _, odd_url, _ = odd
    for base, model, prompt in ((url, "lm", "ROMEO: O"), (url, "lm", "JULIET:\nO R"), (odd_url, "bytes", "東京 ô")):
        echoed = httpx.post(f"{base}/v1/completions", json={"model": model, "prompt": prompt, "max_tokens": 0,
                                                            "echo": True, "logprobs": 0}).json()
        scored = httpx.post(f"{base}/v1/score", json={"model": model, "text": prompt}).json()["results"][0]
        figures = [t["logprob"] for t in scored["tokens"]][:-1]                 # the text's own last </s> is not
        assert echoed["choices"][0]["logprobs"]["token_logprobs"] == [None, *figures[1:]], (model, prompt)


def test_openai_sampled_completions_never_write_unk(odd):
    """A model for which <unk> is the most likely token (/v1/score gives an unknown word most of the probability)
    samples, greedily and at high temperature, many tokens without ever writing <unk>, streamed or not; it never
    lists it among the top tokens either."""
    client, url, _ = odd
    scored = httpx.post(f"{url}/v1/score", json={"model": "unk", "text": "the zzyzx"}).json()["results"][0]
    assert scored["tokens"][1]["logprob"] > math.log(0.4)                       # <unk> after "the": likely
    answer = client.completions.create(model="unk", prompt=["the", "you"], n=3, max_tokens=40, seed=1,
                                       temperature=1.3, logprobs=5)
    greedy = client.completions.create(model="unk", prompt="the", max_tokens=40, temperature=0)
    streamed = "".join(c.choices[0].text for c in client.completions.create(model="unk", prompt="the", seed=2,
                                                                             max_tokens=40, stream=True))
    texts = [c.text for c in answer.choices] + [greedy.choices[0].text, streamed]
    assert all("<unk>" not in text for text in texts) and sum(len(t.split()) for t in texts) > 40, texts
    assert not any("<unk>" in top or " <unk>" in top for c in answer.choices for top in c.logprobs.top_logprobs)


# ------------------------------------------------------------------------------ CORS


def test_serve_cors_lets_the_given_origins_only(run):
    from fastapi.testclient import TestClient

    models = load_runs([run])
    preflight = {"Origin": "http://app.example.org", "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization, content-type"}
    open_app = TestClient(create_app(models, LIMITS, api_key="k", cors_origins=["http://app.example.org"]))
    allowed = open_app.options("/v1/completions", headers=preflight)
    assert allowed.status_code == 200                                        # no key needed to ask
    assert allowed.headers["access-control-allow-origin"] == "http://app.example.org"
    assert {"authorization", "content-type"} <= {h.strip().lower() for h in
                                                 allowed.headers["access-control-allow-headers"].split(",")}
    other = open_app.options("/v1/completions", headers={**preflight, "Origin": "http://evil.example"})
    assert other.status_code == 400 and "access-control-allow-origin" not in other.headers
    listed = open_app.get("/v1/models", headers={"Origin": "http://app.example.org", "Authorization": "Bearer k"})
    assert listed.status_code == 200 and listed.headers["access-control-allow-origin"] == "http://app.example.org"
    closed = TestClient(create_app(models, LIMITS)).options("/v1/completions", headers=preflight)
    assert "access-control-allow-origin" not in closed.headers                # none by default


def test_serve_cors_refusal_is_an_error_answer_like_every_other(serve_runs):
    """A preflight a real server refuses (an origin not given to --cors-origin, a method or header not allowed) is a
    400 whose body is JSON in the route's shape, one line saying what was refused (not Starlette's plain text),
    with no Access-Control-Allow-Origin; an allowed one still passes."""
    models = load_runs([serve_runs["lm"], serve_runs["sentiment"]])
    server, url = serving(create_app(models, LIMITS, cors_origins=["http://app.example.org"]))
    try:
        asked = {"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"}
        for path, shape in (("/v1/completions", dict), ("/v1/classify", str)):
            refused = httpx.options(f"{url}{path}", headers=asked)
            assert refused.status_code == 400 and refused.headers["content-type"] == "application/json"
            assert "access-control-allow-origin" not in refused.headers
            error = refused.json()["error"]
            message = error["message"] if shape is dict else error
            assert isinstance(error, shape) and "'http://evil.example'" in message and "--cors-origin" in message
            assert "\n" not in message
        openai_error = httpx.options(f"{url}/v1/completions", headers=asked).json()["error"]
        assert (openai_error["type"], openai_error["code"]) == ("invalid_request_error", "cors_refused")
        method = httpx.options(f"{url}/v1/completions", headers={"Origin": "http://app.example.org",
                                                                 "Access-Control-Request-Method": "DELETE"})
        assert method.status_code == 400 and "'DELETE' is not allowed" in method.json()["error"]["message"]
        allowed = httpx.options(f"{url}/v1/completions", headers={**asked, "Origin": "http://app.example.org"})
        assert allowed.status_code == 200 and allowed.headers["access-control-allow-origin"] == "http://app.example.org"
    finally:
        server.should_exit = True


def test_serve_command_takes_cors_origins_and_refuses_a_bad_one(run, monkeypatch, capsys):
    import socket

    import seqlab.serve.server as server
    from conftest import one_line_error, run_seqlab

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    seen = {}
    monkeypatch.setattr(server, "serve", lambda app, *args, **kw: seen.update(app=app))
    code, _ = run_seqlab(["serve", run, "--port", port, "--cors-origin", "https://a.example",
                          "--cors-origin", "http://localhost:3000"], capsys)
    assert code == 0
    (cors,) = [m for m in seen["app"].user_middleware if m.cls.__name__ == "CORS"]
    assert cors.kwargs["allow_origins"] == ["https://a.example", "http://localhost:3000"]
    one_line_error(*run_seqlab(["serve", run, "--port", port, "--cors-origin", "https://a.example/page"], capsys),
                   "--cors-origin 'https://a.example/page'")


# ------------------------------------------------------------------------------ server-sent events


class EndingLM:
    """A stand-in language model whose stream says why it ended (the value its generator returns)."""

    def stream(self, prompt, **options):
        yield "to be"
        return "stop" if options["stop_at_eos"] else "length"


def test_serve_streams_send_no_cache_headers_and_the_finish_reason(run, lm, tmp_path):
    from fastapi.testclient import TestClient

    models = load_runs([run])
    models["ending"] = Served("ending", "lm", EndingLM(), tmp_path)
    app = TestClient(create_app(models, LIMITS))

    def streamed(path: str, body: dict) -> tuple[dict, list[str]]:
        with app.stream("POST", path, json={**body, "stream": True}) as response:
            assert response.status_code == 200
            return response.headers, [line[6:] for line in response.iter_lines() if line.startswith("data: ")]

    for path, body in (("/v1/generate", {"model": "lm", "prompt": PROMPT, "max_tokens": 6, "greedy": True}),
                       ("/v1/completions", {"model": "lm", "prompt": PROMPT, "max_tokens": 6})):
        headers, events = streamed(path, body)
        assert headers["cache-control"] == "no-cache" and headers["x-accel-buffering"] == "no"
        assert headers["content-type"].startswith("text/event-stream") and events[-1] == "[DONE]"
    _, events = streamed("/v1/generate", {"model": "lm", "prompt": PROMPT, "max_tokens": 6, "greedy": True})
    assert json.loads(events[-2]) == {"text": "", "finish_reason": "length"}
    assert "".join(json.loads(e)["text"] for e in events[:-1]) == lm.generate(PROMPT, max_tokens=6, greedy=True)
    for stop_at_eos, reason in ((True, "stop"), (False, "length")):
        _, events = streamed("/v1/generate", {"model": "ending", "max_tokens": 6, "stop_at_eos": stop_at_eos})
        assert [json.loads(e) for e in events[:-1]] == [{"text": "to be"}, {"text": "", "finish_reason": reason}]


# ------------------------------------------------------------------------------ offsets and stop strings


def test_openai_logprobs_tokens_are_the_text_each_adds_and_offsets_where_it_begins():
    from types import SimpleNamespace

    from seqlab.data.tokenizers import WordTokenizer
    from seqlab.families.lm.completion import spell

    words = SimpleNamespace(tokenizer=WordTokenizer())                  # a word model's text: " ".join
    after = " to be\nor not"                                           # after a prompt line ending "that is"
    texts, offsets, tops = spell(words, ["to", "be", "</s>", "or", "not"], ["that", "is"],
                                 [{"to": -1.0, "</s>": -2.0}, {}, {}, {"or": -0.5, "nor": -1.5}, {}])
    assert texts == [" to", " be", "\n", "or", " not"] and "".join(texts) == after
    assert [after[at:at + len(text)] for at, text in zip(offsets, texts, strict=True)] == texts
    assert tops[0] == {" to": -1.0, "\n": -2.0} and tops[3] == {"or": -0.5, "nor": -1.5}   # spelt where they'd go
    assert spell(words, ["to", "be"], [])[:2] == (["to", " be"], [0, 2])  # a line's first word: no space
    assert spell(words, ["x"], ["a", "</s>"])[:2] == (["x"], [0])       # a new line: no space before it


def test_openai_stop_strings_cut_the_text_and_hold_back_what_may_begin_one():
    from seqlab.families.lm.choices import Piece, StopCut

    def piece(text: str) -> Piece:
        return Piece(text, list(text), [-1.0] * len(text), [None] * len(text), list(range(len(text))), len(text))

    cut = StopCut(["END", "\n\n"])
    sent = [cut.add(piece(p)).text for p in ("ab", "cE", "N", "xy")]
    assert sent == ["ab", "c", "", "EN" + "xy"] and not cut.stopped   # "E", "EN" held until "x" shows no END
    cut = StopCut(["END", "\n\n"])
    given = [cut.add(piece(p)) for p in ("one E", "N", "D two")]
    assert [g.text for g in given] == ["one ", "", ""] and cut.stopped and cut.rest().text == ""
    assert given[0].tokens == list("one ") and given[0].offsets == [0, 1, 2, 3]       # the stop's tokens: none
    assert cut.usage() == len("one END")                               # tokens to the end of the stop string
    cut = StopCut(["\n\n"])
    assert cut.add(piece("a\n")).text == "a" and cut.rest().text == "\n" and cut.usage() == 2   # held, then given
