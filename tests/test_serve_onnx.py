"""`seqlab serve --runtime onnx`: an export of each task family answers every endpoint as the same run served on
PyTorch does (labels, tags, greedy and beam outputs identical; probabilities, scores and attention within 1e-4),
bad requests get the same 4xx, and no request brings PyTorch into the server. The numpy searches of
`seqlab.decoding.numpy_search` are checked against `seqlab.decoding.search` on a scripted model, and sampling
against the distribution `seqlab.decoding.processors` defines."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("onnxruntime", reason="serving an export needs onnxruntime (pip install 'seqlab[export]')")
pytest.importorskip("onnx", reason="seqlab export needs onnx (pip install 'seqlab[export]')")
import torch  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402
from test_serve import BAD  # noqa: E402

from conftest import FIXTURES, tiny_config, train_serve_runs  # noqa: E402
from seqlab.cli.main import main  # noqa: E402
from seqlab.decoding import numpy_search as decoding  # noqa: E402
from seqlab.decoding import processors, search  # noqa: E402
from seqlab.errors import SeqlabError  # noqa: E402
from seqlab.export.onnx import export_onnx  # noqa: E402
from seqlab.families.lm.pipeline import train_lm  # noqa: E402
from seqlab.serve.app import create_app, load_runs  # noqa: E402
from seqlab.serve.limits import ServeLimits  # noqa: E402
from seqlab.training import trainer  # noqa: E402

PAIRS = FIXTURES / "seq2seq"
TRANSFORMERS = ["seq2seq", "--train-src", str(PAIRS / "train.src"), "--train-tgt", str(PAIRS / "train.tgt"),
                "--dev-src", str(PAIRS / "dev.src"), "--dev-tgt", str(PAIRS / "dev.tgt"), "--embedding-size", "16",
                "--num-heads", "2", "--ff-size", "32", "--max-positions", "32", "--max-steps", "20", "--no-progress",
                "--dropout", "0"]
LIMITS = ServeLimits(max_body_bytes=4096, max_chars=200, max_items=4, max_tokens=64, max_beam=4)
SOURCES = ["der hund sieht .", "der mann mag der katze .", "katze", "ein kleiner hund sieht den großen mann ."]


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, dict[str, Path]]:
    """Tiny runs of each family (and an LSTM language model, whose state is carried, beside the transformer's
    window; the transformer encoder-decoder and the separator LM beside the RNN translator, whose states are
    the target prefix) and their exports: {"runs": {name: dir}, "exports": {name: dir}}."""
    folder = tmp_path_factory.mktemp("serve-onnx")
    with pytest.MonkeyPatch.context() as patch:          # no curves.png after each evaluation: 2/3 of the time
        patch.setattr(trainer, "plot_curves", lambda run_dir: None)
        runs = train_serve_runs(folder)
        train_lm(tiny_config(folder / "lm-lstm", arch="lstm", tokenizer="char", max_steps=4))
        runs["lm-lstm"] = folder / "lm-lstm"
        for arch in ("transformer", "lm"):
            runs[f"de-en-{arch}"] = folder / f"de-en-{arch}"
            assert main(["train", *TRANSFORMERS, "--arch", arch, *(["--shared-vocab"] if arch == "lm" else []),
                         "--output", str(runs[f"de-en-{arch}"])]) == 0
    exports = {name: export_onnx(run, folder / "exports" / name).parent for name, run in runs.items()}
    return {"runs": runs, "exports": exports}


@pytest.fixture(scope="module")
def clients(folders) -> tuple[TestClient, TestClient]:
    """(the PyTorch app, the onnxruntime app) over the same models."""
    return (TestClient(create_app(list(folders["runs"].values()), LIMITS)),
            TestClient(create_app(list(folders["exports"].values()), LIMITS, runtime="onnx")))


def both(clients, path: str, body: dict) -> tuple[dict, dict]:
    """The two apps' answers to one request, both 200."""
    answers = [client.post(path, json=body) for client in clients]
    for answer in answers:
        assert answer.status_code == 200, answer.text
    return answers[0].json(), answers[1].json()


def test_serve_onnx_lists_the_exports_as_the_torch_app_lists_the_runs(clients):
    torch_models, onnx_models = ({m["id"]: m for m in c.get("/v1/models").json()["data"]} for c in clients)
    assert onnx_models.keys() == torch_models.keys() == {"lm", "lm-lstm", "ner", "sentiment", "de-en",
                                                          "de-en-transformer", "de-en-lm"}
    for name, model in onnx_models.items():
        expected = torch_models[name]
        assert (model["task"], model["arch"]) == (expected["task"], expected["arch"])
        assert model["endpoints"] == [e for e in expected["endpoints"] if e != "/v1/completions"]   # PyTorch's only
        assert model["parameters"] == expected["parameters"], name
        assert model["metrics"] == {}                          # an export carries no metrics.jsonl
        assert model["summary"].startswith(expected["summary"].split(" (")[0]) and "the ONNX export of" in \
            model["summary"]
    assert clients[1].get("/healthz").json() == {"status": "ok", "models": 7}


def test_serve_onnx_classifies_and_tags_as_torch(clients):
    texts = ["a warm and funny film", "a dull mess", "bad", "the best film of the year , warm and funny"]
    expected, got = both(clients, "/v1/classify", {"model": "sentiment", "text": texts})
    for e, g in zip(expected["results"], got["results"], strict=True):
        assert g["label"] == e["label"] and g["probability"] == pytest.approx(e["probability"], abs=1e-4)
        assert g["probabilities"] == pytest.approx(e["probabilities"], abs=1e-4)
    sentences = ["John lives in Paris .", "EU rejects German call to boycott British lamb .", "a", "Peter Blackburn"]
    expected, got = both(clients, "/v1/tag", {"model": "ner", "text": sentences})
    for e, g in zip(expected["results"], got["results"], strict=True):
        assert (g["tokens"], g["tags"], g["entities"]) == (e["tokens"], e["tags"], e["entities"])
        assert g["probabilities"] == pytest.approx(e["probabilities"], abs=1e-4)


@pytest.mark.parametrize("model", ["lm", "lm-lstm"])
def test_serve_onnx_generates_greedy_and_beam_as_torch(clients, model):
    for options in ({"greedy": True, "max_tokens": 40}, {"greedy": True, "max_tokens": 30, "stop_at_eos": True},
                    {"beam": 3, "max_tokens": 12}, {"beam": 4, "max_tokens": 10, "stop_at_eos": True},
                    {"top_k": 1, "seed": 4, "max_tokens": 20}):           # top-k 1: the greedy choice
        for prompt in ("", "ROMEO:", "To be\nor"):
            expected, got = both(clients, "/v1/generate", {"model": model, "prompt": prompt, **options})
            assert got["text"] == expected["text"], (prompt, options)
    # the window slides as PyTorch's KV cache does: a prompt filling the transformer's context of 16
    expected, got = both(clients, "/v1/generate", {"model": model, "prompt": "To be, or not t", "greedy": True,
                                                   "max_tokens": 40})
    assert got["text"] == expected["text"]


@pytest.mark.parametrize("model", ["lm", "lm-lstm"])
def test_serve_onnx_scores_as_torch(clients, model):
    texts = ["To be", "To be, or not to be, that is the question:\nWhether 'tis nobler in the mind\n", "Zq§"]
    expected, got = both(clients, "/v1/score", {"model": model, "text": texts})
    for e, g in zip(expected["results"], got["results"], strict=True):
        assert [t["token"] for t in g["tokens"]] == [t["token"] for t in e["tokens"]]
        assert [t["logprob"] for t in g["tokens"]] == pytest.approx([t["logprob"] for t in e["tokens"]], abs=1e-4)
        assert g["perplexity"] == pytest.approx(e["perplexity"], rel=1e-4)
        assert g["bits_per_char"] == pytest.approx(e["bits_per_char"], abs=1e-4)


@pytest.mark.parametrize("model", ["de-en", "de-en-transformer", "de-en-lm"])
def test_serve_onnx_translates_greedy_and_beam_as_torch(clients, model):
    for options in ({"beam": 1}, {"beam": 3}, {"beam": 4, "length_penalty": 0.0}, {"beam": 2, "max_length": 3}):
        for endpoint in ("translate", "summarize"):
            expected, got = both(clients, f"/v1/{endpoint}", {"model": model, "text": SOURCES, "attention": True,
                                                              **options})
            for e, g in zip(expected["results"], got["results"], strict=True):
                assert (g["text"], g["tokens"], g["source_tokens"]) == (e["text"], e["tokens"], e["source_tokens"])
                assert g["score"] == pytest.approx(e["score"], abs=1e-4)
                assert (g["attention"] is None) == (e["attention"] is None) == (model == "de-en-lm")
                assert model == "de-en-lm" or np.allclose(g["attention"], e["attention"], atol=1e-4)
    expected, got = both(clients, "/v1/translate", {"model": model, "text": "der unbekannte hund", "beam": 3})
    assert got["results"][0]["text"] == expected["results"][0]["text"] and got["results"][0]["attention"] is None


def test_serve_onnx_streams_and_samples_reproducibly(clients):
    _, onnx_client = clients
    request = {"model": "lm", "prompt": "ROMEO:", "max_tokens": 20, "seed": 7, "temperature": 0.8, "top_p": 0.9}
    with onnx_client.stream("POST", "/v1/generate", json={**request, "stream": True}) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        events = [line[len("data: "):] for line in response.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]" and len(events) > 2
    streamed = "".join(json.loads(event)["text"] for event in events[:-1])
    assert streamed == onnx_client.post("/v1/generate", json=request).json()["text"]   # the seed repeats it
    other = onnx_client.post("/v1/generate", json={**request, "seed": 8}).json()["text"]
    assert len(streamed) > 0 and other != streamed


@pytest.mark.parametrize("method, path, body, status, message", BAD, ids=[f"{c[1]}-{c[3]}-{i}" for i, c in
                                                                           enumerate(BAD)])
def test_serve_onnx_answers_bad_requests_as_torch(clients, method, path, body, status, message):
    answers = []
    for client in clients:
        if method == "get":
            answers.append(client.get(path))
        elif isinstance(body, bytes):
            answers.append(client.post(path, content=body, headers={"content-type": "application/json"}))
        else:
            answers.append(client.post(path, json=body))
    for answer in answers:
        assert answer.status_code == status, answer.text
        error = answer.json()["error"]
        assert message in error and "\n" not in error


def test_serve_onnx_refuses_what_an_export_cannot_do_with_a_4xx(clients):
    for path, body in (("/v1/translate", {"model": "de-en", "text": ["der hund", " "], "beam": 1}),
                       ("/v1/generate", {"model": "lm", "beam": 2, "seed": 1}),
                       ("/v1/generate", {"model": "lm", "prompt": "x" * 20}),
                       ("/v1/classify", {"model": "sentiment", "text": ["fine", " "]})):
        expected, got = (client.post(path, json=body) for client in clients)
        assert got.status_code == expected.status_code == 422, got.text
        if "prompt" not in body:
            assert got.json() == expected.json()


def test_serve_onnx_answers_a_failure_of_onnxruntime_with_a_422(clients, monkeypatch):
    """An input the graph cannot take (here: words as floats) is one line and 422, not a 500; so is a sentence
    over a transformer tagger's positions, as PyTorch's tagger refuses it."""
    _, onnx_client = clients
    models = onnx_client.app.state.models
    runtime = models["sentiment"].trained
    monkeypatch.setattr(runtime, "scores", lambda encoded: runtime.run("classifier", {
        "words": np.zeros((len(encoded), 2), np.float32), "lengths": np.full(len(encoded), 2)}))
    answer = onnx_client.post("/v1/classify", json={"model": "sentiment", "text": "a fine film"})
    assert answer.status_code == 422 and "the ONNX export cannot run this input (InvalidArgument" in answer.text
    monkeypatch.setattr(models["ner"].trained, "max_positions", 3)
    answer = onnx_client.post("/v1/tag", json={"model": "ner", "text": "John lives in Paris ."})
    assert answer.status_code == 422 and "a sentence of 5 tokens is longer than this transformer" in answer.text
    assert onnx_client.get("/healthz").status_code == 200


def free_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


def test_serve_onnx_command_refuses_a_run_for_onnx_and_an_export_for_torch(folders, capsys):
    runs, exports = folders["runs"], folders["exports"]
    assert main(["serve", "--runtime", "onnx", str(runs["sentiment"]), "--port", free_port()]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a run directory, not an ONNX export" in err and "seqlab export" in err
    assert main(["serve", str(exports["sentiment"]), "--port", free_port()]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is an ONNX export, not a run directory: serve it with --runtime onnx" in err
    assert main(["serve", "--runtime", "onnx", str(exports["sentiment"]), "--device", "cuda", "--port",
                 free_port()]) == 2
    assert "--runtime onnx runs on the CPU" in capsys.readouterr().err
    with pytest.raises(SeqlabError, match="two exports are named"):
        load_runs([exports["lm"], exports["lm"]], runtime="onnx")


# A process serving the exports with `seqlab serve --runtime onnx`, asked once per family by a thread of its own,
# which prints whether PyTorch was imported and the answers' statuses.
PROBE = """
import json, os, sys, threading, time, urllib.request
from seqlab.cli.main import main

def probe(port):
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(url + "/healthz", timeout=1)
            break
        except OSError:
            time.sleep(0.05)
    statuses = []
    for path, body in json.loads(sys.argv[2]):
        request = urllib.request.Request(url + path, json.dumps(body).encode(), {"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            statuses.append(answer.status)
    print(json.dumps({"torch": "torch" in sys.modules, "statuses": statuses}), flush=True)
    os._exit(0)

threading.Thread(target=probe, args=(sys.argv[1],), daemon=True).start()
sys.exit(main(["serve", "--runtime", "onnx", "--port", sys.argv[1], *sys.argv[3:]]))
"""


def test_serve_onnx_serves_every_family_without_importing_torch(folders):
    requests = [("/v1/classify", {"model": "sentiment", "text": "a fine film"}),
                ("/v1/tag", {"model": "ner", "text": "John lives in Paris ."}),
                ("/v1/generate", {"model": "lm", "prompt": "RO", "max_tokens": 5, "beam": 2}),
                ("/v1/generate", {"model": "lm", "max_tokens": 5, "seed": 1}),
                ("/v1/score", {"model": "lm", "text": "To be"}),
                ("/v1/translate", {"model": "de-en", "text": "der hund", "beam": 2, "attention": True})]
    exports = [str(folders["exports"][name]) for name in ("lm", "ner", "sentiment", "de-en")]
    done = subprocess.run([sys.executable, "-c", PROBE, free_port(), json.dumps(requests), *exports],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)})
    report = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
    assert report.get("statuses") == [200] * len(requests), done.stderr[-2000:]
    assert report["torch"] is False


# ---------------------------------------------------------------------------- the numpy searches


def test_decoding_options_and_blocked_ids_are_seqlab_search_s():
    assert decoding.SamplingOptions is search.SamplingOptions and decoding.SearchOptions is search.SearchOptions
    assert decoding.NEVER_GENERATED == processors.NEVER_GENERATED
    for options in ({"beam": 2, "seed": 1}, {"beam": 1, "length_penalty": 0.5}, {"top_p": 0}):
        with pytest.raises(SeqlabError):
            decoding.SamplingOptions(**options)


def test_decoding_processors_equal_seqlab_processors():
    logits = torch.randn(4, 30, generator=torch.Generator().manual_seed(0)) * 3
    logits[0, 7] = logits[0, 8]                                            # a tie
    for options in (search.Sampling(), search.Sampling(temperature=0.7), search.Sampling(top_k=5),
                    search.Sampling(top_p=0.6), search.Sampling(temperature=1.3, top_k=9, top_p=0.8),
                    search.Sampling(top_k=40)):
        for sample in (False, True):
            expected = processors.process(logits, processors.processors_for(options, sample)).numpy()
            got = decoding.process(logits.numpy(), decoding.processors_for(options, sample))
            assert np.array_equal(np.isinf(got), np.isinf(expected))
            assert np.allclose(got[~np.isinf(got)], expected[~np.isinf(expected)], atol=1e-6)


def test_decoding_samples_the_processed_distribution():
    logits = np.random.default_rng(1).normal(size=(1, 12)).astype(np.float32) * 2
    for options in (decoding.Sampling(top_k=3), decoding.Sampling(top_p=0.7, temperature=0.5),
                    decoding.Sampling(temperature=2.0)):
        chain = decoding.processors_for(options, sample=True)
        p = decoding.softmax(decoding.process(logits, chain).astype(np.float64))[0]
        rng = np.random.default_rng(5)
        draws = np.concatenate([decoding.choose_tokens(np.repeat(logits, 500, 0), chain, True, rng)
                                for _ in range(20)])                         # 10,000 draws
        counts = np.bincount(draws, minlength=12) / len(draws)
        assert set(np.flatnonzero(counts)) <= set(np.flatnonzero(p))        # never a token cut off
        assert np.abs(counts - p).max() < 0.02
    greedy = decoding.choose_tokens(logits, decoding.processors_for(None, False), False)
    one = decoding.choose_tokens(logits, decoding.processors_for(decoding.Sampling(top_k=1), True), True,
                                 np.random.default_rng(0))
    assert one.tolist() == greedy.tolist()


class Scripted:
    """A scripted decoder with the same answers for PyTorch's search and the numpy one: the next logits come
    from a fixed table by the last token and the step, so the beams fork, finish on </s> at different steps
    and compete; the 'attention' weights depend on both too. Its state: the step of each row (B,)."""

    def __init__(self, V: int = 9, S: int = 5, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.table = torch.randn(40, V, V, generator=g) * 2                    # (steps, last token, V)
        self.table[:, :, search.EOS] -= 1.0                                   # </s> now and then, not at once
        self.keys = torch.randn(V, S, generator=g)

    def step(self, tokens, state, need_weights: bool = False):                # PyTorch's contract
        if isinstance(tokens, np.ndarray):
            return self.numpy_step(tokens, state)
        weights = torch.softmax(self.keys[tokens] + state[:, None].float(), dim=-1)
        return self.table[state, tokens], state + 1, weights if need_weights else None

    def numpy_step(self, tokens, state):
        logits, state, weights = self.step(torch.from_numpy(tokens), torch.from_numpy(state), True)
        return logits.numpy(), state.numpy(), weights.numpy()

    def reorder_state(self, state, index):
        return state[index]

    reorder = reorder_state
    # what seqlab.decoding.search.decode also asks of a model
    training, attends, start_token = False, True, 2

    def eval(self):
        return self

    def train(self, mode: bool = True):
        return self

    def start(self, source, lengths):
        return torch.zeros(len(lengths), dtype=torch.long)

    def target_room(self, lengths):
        return None


@pytest.mark.parametrize("beam, length_penalty, limits", [(2, 1.0, [6, 3, 9]), (3, 0.0, [12, 12, 12]),
                                                          (4, 1.5, [5, 20, 1])])
def test_decoding_beam_search_equals_seqlab_search(beam, length_penalty, limits):
    model = Scripted(seed=beam)
    B, lengths = len(limits), torch.tensor([5, 3, 4])
    for ends_at_eos in (True, False):
        expected = search.beam_steps(model, torch.zeros(B, dtype=torch.long), torch.full((B,), 2), torch.tensor(limits),
                                     beam, length_penalty, ends_at_eos, True, lengths)
        got = decoding.beam_steps(model, np.zeros(B, np.int64), np.full(B, 2), np.array(limits), beam, length_penalty,
                                  ends_at_eos, True, lengths.numpy())
        for e_hyps, g_hyps in zip(expected, got, strict=True):
            assert [(h.tokens, h.finished) for h in g_hyps] == [(h.tokens, h.finished) for h in e_hyps]
            assert [h.score for h in g_hyps] == pytest.approx([h.score for h in e_hyps], abs=1e-5)
            assert [h.normalized for h in g_hyps] == pytest.approx([h.normalized for h in e_hyps], abs=1e-5)
            for g, e in zip(g_hyps, e_hyps, strict=True):
                assert np.allclose(g.attention, e.attention.numpy(), atol=1e-6)


@pytest.mark.parametrize("options", [{"beam": 1}, {"beam": 1, "max_length": 4, "length_penalty": 0.5},
                                     {"beam": 3, "nbest": 2}, {"beam": 2, "max_length": 7}])
def test_decoding_decode_equals_seqlab_search(options):
    model = Scripted(seed=7)
    source, lengths = torch.zeros(3, 5, dtype=torch.long), torch.tensor([5, 2, 4])
    expected = search.decode(model, source, lengths, search.SearchOptions(**options), need_weights=True)
    limit = decoding.max_lengths(lengths.numpy(), options.get("max_length", 0))
    got = decoding.decode(model, np.zeros(3, np.int64), lengths.numpy(), limit, model.start_token,
                          decoding.SearchOptions(**options), need_weights=True)
    for e_hyps, g_hyps in zip(expected, got, strict=True):
        assert [(h.tokens, h.finished) for h in g_hyps] == [(h.tokens, h.finished) for h in e_hyps]
        for g, e in zip(g_hyps, e_hyps, strict=True):
            assert (g.score, g.normalized) == pytest.approx((e.score, e.normalized), abs=1e-5)
            assert np.allclose(g.attention, e.attention.numpy(), atol=1e-6)
