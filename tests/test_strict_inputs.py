"""Strict inputs (issue 31): every numeric decoding option is refused outside a range in which the searches'
arithmetic stays finite, and works at the extremes inside it (a temperature of 5e-324 or 1e308, a top-p of
5e-324, a top-k of 10^30, a seed of 2^63 - 1), in the processors of both runtimes (PyTorch and numpy, the same
floats), through the command line (exit 2, one line), the Python API (`OptionError`, a SeqlabError), the
PyTorch server and the ONNX server (422 naming the field as a request names it, never a CLI flag); every
request field takes its own JSON type only; a chunked body over the limit is a 413; the prompt's unknown tokens
are told to the client, not written to the server's log."""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import FIXTURES, TRAIN, one_line_error, run_seqlab, serving
from seqlab.config import OptionError
from seqlab.data.vocab import NEVER_GENERATED
from seqlab.decoding import numpy_search, processors, search
from seqlab.decoding.options import SamplingOptions, SearchOptions, prompt_too_long
from seqlab.errors import SeqlabError

TINY = (5e-324, 1e-300, 1e-45, 1e-30)            # temperatures at which sampling is the argmax (ties shared)
HUGE = (1e30, 1e300, 1e308)                      # temperatures at which it is uniform over the unblocked ids
UNKNOWN = "\u2603"                               # a snowman: no character of the fixture corpus


def logits_with_a_tie(V: int = 20) -> torch.Tensor:
    """(3, V) logits, row 0 with two tokens tied at its maximum, row 2 spread over a wide range."""
    logits = torch.randn(3, V, generator=torch.Generator().manual_seed(0)) * 3          # (3, V)
    logits[0, 11] = logits[0, 12] = logits[0].max() + 1
    logits[2] *= 1e6
    return logits


# ------------------------------------------------------------------------------ the processors


@pytest.mark.parametrize("temperature", [*TINY, 0.5, 2.0, *HUGE])
def test_strict_temperature_is_finite_and_the_same_in_both_runtimes(temperature):
    blocked = processors.BlockTokens()(logits_with_a_tie())                            # (3, V)
    got = processors.Temperature(temperature)(blocked)
    twin = numpy_search.temperature(numpy_search.block(logits_with_a_tie().numpy()), temperature)
    assert np.array_equal(got.numpy(), twin)                                           # the same floats
    assert got.dtype == torch.float32 and not got.isnan().any() and not (got == math.inf).any()
    assert got.max(dim=-1).values.tolist() == [0.0] * 3
    assert (got[:, list(NEVER_GENERATED)] == -math.inf).all()
    if temperature not in TINY:                            # below the maximum: -inf only in the limit
        assert torch.isinf(got).sum(dim=-1).tolist() == [len(NEVER_GENERATED)] * 3
    probs = got.softmax(dim=-1)                                                        # (3, V)
    V = got.size(-1)
    if temperature in TINY:                                  # the argmax, ties shared
        assert probs[0, 11].item() == probs[0, 12].item() == 0.5
        assert probs[1:].max(dim=-1).values.tolist() == [1.0, 1.0]
    elif temperature in HUGE:                                # uniform over what can be generated
        free = [i for i in range(V) if i not in NEVER_GENERATED]
        assert torch.allclose(probs[:, free], torch.full((3, len(free)), 1 / len(free)))
        assert probs[:, list(NEVER_GENERATED)].sum() == 0


@pytest.mark.parametrize("p", [5e-324, 1e-300, 1e-45, 1e-40, 1e-10])
def test_strict_a_tiny_top_p_keeps_the_most_likely_token(p):
    logits = processors.BlockTokens()(logits_with_a_tie()[1:])                         # (2, V), no tie
    best = logits.argmax(dim=-1)
    kept = ~torch.isinf(processors.TopP(p)(logits))
    assert kept.sum(dim=-1).tolist() == [1, 1] and kept[torch.arange(2), best].all()
    assert torch.equal(processors.nucleus(logits, p), kept)
    twin = numpy_search.top_p(logits.numpy(), p)
    assert np.array_equal(~np.isinf(twin), kept.numpy())
    drawn = search.nucleus_choose(logits, SamplingOptions(top_p=p), torch.Generator().manual_seed(1))
    assert torch.equal(drawn, best)


@pytest.mark.parametrize("options", [{"temperature": 5e-324}, {"temperature": 1e-300, "top_p": 5e-324},
                                     {"temperature": 1e308}, {"temperature": 1e308, "top_k": 10**30},
                                     {"top_k": 10**30, "top_p": 1e-300}])
def test_strict_sampling_draws_real_tokens_at_the_extremes(options):
    logits = logits_with_a_tie()[1:]                                                   # (2, V)
    best = processors.BlockTokens()(logits).argmax(dim=-1)
    sampling = search.Sampling(**options)
    chain = processors.processors_for(sampling, sample=True)
    twin = numpy_search.processors_for(sampling, sample=True)
    generator, rng = torch.Generator().manual_seed(3), np.random.default_rng(3)
    draws = torch.stack([search.choose_tokens(logits, chain, True, generator) for _ in range(200)])   # (200, 2)
    numpy_draws = np.stack([numpy_search.choose_tokens(logits.numpy(), twin, True, rng) for _ in range(200)])
    for drawn in (draws, torch.from_numpy(numpy_draws)):
        assert not np.isin(drawn.numpy(), NEVER_GENERATED).any()
        if options.get("temperature", 1) < 1 or options.get("top_p", 1) < 1:
            assert torch.equal(drawn, best.expand_as(drawn))
        else:                                                # uniform: most of the 17 tokens come up
            assert len(set(drawn[:, 0].tolist())) > 12


# ------------------------------------------------------------------------------ the options


REFUSED = [("temperature", -0.0), ("temperature", 0.0), ("temperature", math.inf), ("temperature", math.nan),
           ("temperature", "1"), ("top_p", -0.0), ("top_p", 0.0), ("top_p", 1.0000001), ("top_k", -1),
           ("top_k", 2.0), ("seed", 2**63), ("seed", -1), ("seed", True), ("max_tokens", 2**63),
           ("max_tokens", 5.0), ("beam", 2**63), ("beam", 0), ("length_penalty", 10.5),
           ("length_penalty", 1e308), ("length_penalty", -1e-300)]


@pytest.mark.parametrize("name, value", REFUSED, ids=[f"{n}={v!r}" for n, v in REFUSED])
def test_strict_options_refuse_values_outside_their_range_naming_the_option_both_ways(name, value):
    given = {name: value, **({"beam": 2} if name == "length_penalty" else {})}
    with pytest.raises(OptionError) as refused:
        SamplingOptions(**given)
    error = refused.value
    assert isinstance(error, SeqlabError) and error.option == name
    assert str(error).startswith(f"--{name.replace('_', '-')} ")            # the command line's (and Python's)
    assert error.in_api().startswith(f"{name} ") and "--" not in error.in_api()   # a request's


def test_strict_options_take_the_extremes_inside_their_range():
    for given in ({"temperature": 5e-324}, {"temperature": 1.7e308}, {"top_p": 5e-324}, {"top_k": 10**30},
                  {"seed": 2**63 - 1}, {"seed": 0}, {"max_tokens": 0}, {"max_tokens": 2**63 - 1},
                  {"beam": 2, "length_penalty": 10.0}, {"beam": 2, "length_penalty": 0.0}):
        SamplingOptions(**given)
    SearchOptions(max_length=2**63 - 1, beam=3, nbest=3, length_penalty=10.0)
    assert search.core.normalized(-1.0, 2**63 - 1, 10.0) < 0                   # length^10 finite below 2^63


def test_strict_cross_option_errors_name_options_as_their_caller_does():
    with pytest.raises(OptionError) as refused:
        SamplingOptions(beam=2, temperature=0.5)
    assert "--beam 2" in str(refused.value) and "--temperature" in str(refused.value)
    assert refused.value.in_api() == ("beam 2 searches for the most likely continuation and samples nothing: "
                                      "drop greedy, temperature, top_k, top_p and seed, or use beam 1")
    with pytest.raises(OptionError) as refused:
        SearchOptions(beam=2, nbest=3)
    assert refused.value.in_api() == "nbest must be between 1 and beam (2), got 3"
    again = pickle.loads(pickle.dumps(refused.value))                        # a worker's error, sent back
    assert (str(again), again.in_api()) == (str(refused.value), refused.value.in_api())
    with pytest.raises(OptionError) as refused:
        search.core.check_beam_width(30, 28, 3)
    assert str(refused.value).startswith("--beam 30 is larger than the 25 tokens")
    assert refused.value.in_api().startswith("beam 30 is larger than the 25 tokens")
    long = prompt_too_long(20, 16)
    assert str(long).endswith("shorten it or keep its end (--truncate-prompt)") and long.option == "prompt"
    assert long.in_api().endswith("context of 16 tokens; shorten it")


# ------------------------------------------------------------------------------ sequence to sequence decoding


class Scripted:
    """A decoder for both searches (PyTorch's and numpy's): the next logits by the step and the last token,
    from a fixed random table; its state is each row's step."""

    training, attends, start_token = False, False, 2

    def __init__(self, V: int = 12):
        self.table = torch.randn(30, V, V, generator=torch.Generator().manual_seed(4)) * 2   # (steps, last, V)

    def step(self, tokens, state, need_weights: bool = False):
        if isinstance(tokens, np.ndarray):
            logits, state, _ = self.step(torch.from_numpy(tokens), torch.from_numpy(state))
            return logits.numpy(), state.numpy(), None
        return self.table[state, tokens], state + 1, None

    def reorder_state(self, state, index):
        return state[index]

    reorder = reorder_state

    def eval(self):
        return self

    def train(self, mode: bool = True):
        return self

    def start(self, source, lengths):
        return torch.zeros(len(lengths), dtype=torch.long)

    def target_room(self, lengths):
        return None


@pytest.mark.parametrize("temperature", [5e-324, 1e-300, 1e308])
def test_strict_seq2seq_decoding_samples_at_extreme_temperatures_in_both_runtimes(temperature):
    model, source, lengths = Scripted(), torch.zeros(3, 4, dtype=torch.long), torch.tensor([4, 2, 3])
    options = SearchOptions(sample=True, temperature=temperature, seed=2**63 - 1, max_length=12)
    limit = numpy_search.max_lengths(lengths.numpy(), 12)
    greedy = [h[0].tokens for h in search.decode(model, source, lengths, SearchOptions(max_length=12))]
    for decoded in (search.decode(model, source, lengths, options),
                    numpy_search.decode(model, np.zeros(3, np.int64), lengths.numpy(), limit, 2, options)):
        tokens = [h[0].tokens for h in decoded]
        assert all(math.isfinite(h[0].score) and math.isfinite(h[0].normalized) for h in decoded)
        assert not set(NEVER_GENERATED) & {t for row in tokens for t in row}
        if temperature < 1:
            assert tokens == greedy
    beam = search.decode(model, source, lengths, SearchOptions(beam=3, nbest=3, max_length=12, length_penalty=10))
    assert all(math.isfinite(h.normalized) for hyps in beam for h in hyps)


# ------------------------------------------------------------------------------ trained models


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """A tiny character transformer LM (context 16) and a tiny GRU translator, trained for a step or two."""
    from seqlab.families.lm.config import LMDataConfig, LMTrainConfig, LMTrainOptions
    from seqlab.families.lm.model import LMConfig
    from seqlab.families.lm.pipeline import train_lm
    from seqlab.families.seq2seq.config import resolve_seq2seq_config
    from seqlab.families.seq2seq.pipeline import train_seq2seq
    from seqlab.training import trainer

    folder = tmp_path_factory.mktemp("strict")
    lines = TRAIN.read_text().splitlines()
    (folder / "train.txt").write_text("\n".join(lines[:300]) + "\n")
    (folder / "valid.txt").write_text("\n".join(lines[300:310]) + "\n")
    pairs = FIXTURES / "seq2seq"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(trainer, "plot_curves", lambda run_dir: None)
        train_lm(LMTrainConfig(LMDataConfig(train=str(folder / "train.txt"), valid=str(folder / "valid.txt"),
                                            tokenizer="char"),
                               LMConfig(arch="transformer", embedding_size=16, hidden_size=16, num_layers=1,
                                        dropout=0.0, num_heads=2, context=16),
                               LMTrainOptions(output=str(folder / "lm"), max_steps=2, batch_size=4, seq_len=8,
                                              eval_every=2, log_every=1, progress=False)))
        train_seq2seq(resolve_seq2seq_config(overrides={
            "train_src": str(pairs / "train.src"), "train_tgt": str(pairs / "train.tgt"),
            "dev_src": str(pairs / "dev.src"), "dev_tgt": str(pairs / "dev.tgt"), "arch": "gru",
            "embedding_size": 8, "hidden_size": 8, "max_steps": 2, "progress": False,
            "output": str(folder / "de-en")}))                # no model card: a second less than `seqlab train`
    return {"lm": folder / "lm", "de-en": folder / "de-en"}


@pytest.fixture(scope="module")
def lm(runs):
    import seqlab

    return seqlab.load(runs["lm"])


def test_strict_python_api_generates_at_the_extremes(lm, runs):
    import seqlab

    greedy = lm.generate("ROMEO:", max_tokens=12, greedy=True)
    for temperature in (5e-324, 1e-300):
        assert lm.generate("ROMEO:", max_tokens=12, temperature=temperature, seed=2**63 - 1) == greedy
    assert lm.generate("ROMEO:", max_tokens=12, top_p=5e-324, seed=1) == greedy
    assert lm.generate("ROMEO:", max_tokens=12, top_k=10**30, seed=1) == lm.generate("ROMEO:", max_tokens=12, seed=1)
    wild = lm.generate("ROMEO:", max_tokens=40, temperature=1e308, seed=1)
    assert len(wild) >= 30 and "<pad>" not in wild and "<s>" not in wild
    assert lm.generate("ROMEO:", max_tokens=0) == ""
    assert lm.generate("ROMEO:", max_tokens=6, beam=3, length_penalty=10.0)
    for options in ({"temperature": -0.0}, {"temperature": 1e400}, {"top_p": 0.0}, {"max_tokens": 2**63},
                    {"beam": 2, "length_penalty": 11}):
        with pytest.raises(OptionError):
            lm.generate("ROMEO:", **options)
    translator = seqlab.load(runs["de-en"])
    source = ["der hund sieht .", "katze"]
    expected = translator.translate(source, beam=1, max_length=10)
    for temperature in (5e-324, 1e-300):
        assert translator.translate(source, beam=1, sample=True, temperature=temperature, seed=5,
                                    max_length=10) == expected
    assert len(translator.translate(source, beam=1, sample=True, temperature=1e308, max_length=10)) == 2
    with pytest.raises(OptionError, match="--length-penalty"):
        translator.translate(source, beam=2, length_penalty=1e308)


def test_strict_python_api_gives_the_prompt_s_warnings_to_a_caller_who_asks(lm):
    said: list[str] = []
    assert lm.prompt_ids(f"RO{UNKNOWN}", warn=said.append)[-1] == lm.vocab.encode(["<unk>"])[0]
    assert len(said) == 1 and UNKNOWN in said[0]
    with pytest.warns(Warning, match="read as <unk>"):                      # by default, a SeqlabWarning
        lm.prompt_ids(f"RO{UNKNOWN}")


def seqlab_out(argv, capsys) -> str:
    """`seqlab ARGV` in this process, which must succeed without a traceback: its standard output."""
    from seqlab.cli.main import main

    assert main([str(a) for a in argv]) == 0
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return out.out


def test_strict_command_line_generates_at_the_extremes_and_refuses_in_one_line(runs, capsys):
    generate = ["generate", runs["lm"], "--prompt", "ROMEO:", "--max-tokens", "10"]
    greedy = seqlab_out([*generate, "--greedy"], capsys)
    for tiny in (["--temperature", "5e-324"], ["--temperature", "1e-300", "--top-p", "5e-324"]):
        assert seqlab_out([*generate, *tiny, "--seed", "7"], capsys) == greedy
    for extreme in (["--temperature", "1e308"], ["--top-k", str(10**30)], ["--seed", str(2**63 - 1)]):
        assert seqlab_out([*generate, *extreme], capsys).startswith("ROMEO:")
    for bad, flag in ((["--temperature", "-0.0"], "--temperature"), (["--temperature", "1e400"], "--temperature"),
                      (["--top-p", "0"], "--top-p"), (["--seed", str(2**63)], "--seed"),
                      (["--max-tokens", str(10**30)], "--max-tokens"), (["--beam", str(2**63)], "--beam"),
                      (["--beam", "2", "--length-penalty", "11"], "--length-penalty"),
                      (["--beam", "2", "--temperature", "0.5"], "--beam 2")):
        one_line_error(*run_seqlab([*generate, *bad], capsys), flag)
    one_line_error(*run_seqlab(["generate", runs["lm"], "--prompt", "To be, or not to be: that is"], capsys),
                   "keep its end (--truncate-prompt)")
    code, err = run_seqlab(["generate", runs["lm"], "--prompt", f"RO{UNKNOWN}", "--max-tokens", "2"], capsys)
    assert code == 0 and "seqlab: warning:" in err and UNKNOWN in err         # the command line warns
    sources = FIXTURES / "seq2seq" / "dev.src"
    translate = ["translate", runs["de-en"], sources, "--beam", "1", "--max-length", "8"]
    expected = seqlab_out(translate, capsys)
    for tiny in (["--temperature", "5e-324"], ["--top-p", "5e-324"]):
        assert seqlab_out([*translate, "--sample", *tiny], capsys) == expected
    assert len(seqlab_out([*translate, "--sample", "--temperature", "1e308"], capsys).splitlines()) == \
        len(expected.splitlines())
    for bad, flag in ((["--temperature", "0"], "--temperature"), (["--length-penalty", "1e308"], "--length-penalty"),
                      (["--max-length", str(2**63)], "--max-length"), (["--beam", "3", "--sample"], "--beam 1")):
        one_line_error(*run_seqlab([*translate, *bad], capsys), flag)


# ------------------------------------------------------------------------------ the servers


LIMITS = {"max_body_bytes": 4096, "max_tokens": 64, "max_beam": 4}
# 2**53 - 1: the largest seed a request takes (`schemas.JSON_INTEGER`); 2: an int for a float
EXTREMES = [{"temperature": 5e-324}, {"temperature": 1e-300, "top_p": 5e-324}, {"temperature": 1e308},
            {"temperature": 1e308, "top_k": 10**30}, {"seed": 2**53 - 1}, {"temperature": 2}]

# wrong JSON types on every endpoint's fields; validation comes first, so the model need not exist
WRONG_TYPES = [
    ("/v1/generate", {"max_tokens": "5"}, 'max_tokens: expects an integer, got "5"'),
    ("/v1/generate", {"max_tokens": True}, "max_tokens: expects an integer, got true"),
    ("/v1/generate", {"max_tokens": 5.5}, "max_tokens: expects an integer, got 5.5"),
    ("/v1/generate", {"temperature": "0.5"}, "temperature: expects a number"),
    ("/v1/generate", {"temperature": False}, "temperature: expects a number, got false"),
    ("/v1/generate", {"top_k": 1.5}, "top_k: expects an integer"),
    ("/v1/generate", {"top_p": "1"}, "top_p: expects a number"),
    ("/v1/generate", {"seed": "1"}, "seed: expects an integer"),
    ("/v1/generate", {"greedy": 1}, "greedy: expects true or false, got 1"),
    ("/v1/generate", {"greedy": "true"}, "greedy: expects true or false"),
    ("/v1/generate", {"beam": True}, "beam: expects an integer"),
    ("/v1/generate", {"stop_at_eos": 0}, "stop_at_eos: expects true or false"),
    ("/v1/generate", {"stream": "yes"}, "stream: expects true or false"),
    ("/v1/generate", {"prompt": 5}, "prompt: expects a string, got 5"),
    ("/v1/generate", {"prompt": ["a"]}, "prompt: expects a string, got a list"),
    ("/v1/score", {"text": 5}, "text: expects a string or a list of strings, got 5"),
    ("/v1/score", {"text": ["a", 1]}, "text.1: expects a string, got 1"),
    ("/v1/tag", {"text": True}, "text: expects a string or a list of strings, got true"),
    ("/v1/classify", {"text": None}, "text: expects a string or a list of strings, got null"),
    ("/v1/translate", {"beam": "2"}, "beam: expects an integer"),
    ("/v1/translate", {"max_length": 1.5}, "max_length: expects an integer, got 1.5"),
    ("/v1/summarize", {"length_penalty": "1"}, "length_penalty: expects a number"),
    ("/v1/summarize", {"attention": 1}, "attention: expects true or false, got 1"),
    ("/v1/classify", {"model": 5}, "model: expects a string, got 5"),
]
OUT_OF_RANGE = [
    ("/v1/generate", {"temperature": -0.0}, "temperature: must be greater than 0, got -0.0"),
    ("/v1/generate", {"top_p": 0}, "top_p: must be greater than 0"),
    ("/v1/generate", {"seed": 2**63}, "seed: must be less than"),
    ("/v1/generate", {"max_tokens": -1}, "max_tokens: must be greater than or equal to 0"),
    ("/v1/translate", {"length_penalty": 1e308}, "length_penalty: must be less than or equal to 10"),
    ("/v1/translate", {"beam": 0}, "beam: must be greater than or equal to 1"),
]


def app_of(runs, runtime: str = "torch", folders=None):
    from seqlab.serve.app import create_app
    from seqlab.serve.limits import ServeLimits

    return create_app(folders or [runs["lm"], runs["de-en"]], ServeLimits(**LIMITS), runtime=runtime)


@pytest.fixture(scope="module")
def client(runs):
    from fastapi.testclient import TestClient

    return TestClient(app_of(runs))


def check_bad_requests(client, name: str = "lm", translator: str = "de-en") -> None:
    """Every wrong type and out-of-range value: 422, one line naming the field, no command-line flag."""
    for path, fields, message in WRONG_TYPES + OUT_OF_RANGE:
        model = {"/v1/generate": name, "/v1/score": name, "/v1/translate": translator, "/v1/summarize": translator}
        body = {"model": model.get(path, "nobody"),           # validated before the model is looked up
                **({} if path == "/v1/generate" else {"text": "der hund"}), **fields}
        answer = client.post(path, json=body)
        assert answer.status_code == 422, (path, fields, answer.text)
        error = answer.json()["error"]
        assert message in error and "\n" not in error and "--" not in error, (path, fields, error)
    huge = client.post("/v1/generate", content=f'{{"model": "{name}", "temperature": 1e400}}',   # JSON's inf
                       headers={"content-type": "application/json"})
    assert huge.status_code == 422 and huge.json()["error"].startswith("temperature: ")


def check_extremes(client, name: str = "lm") -> None:
    """Each extreme value answers 200 with real text; a tiny temperature or top-p gives the greedy text."""
    base = {"model": name, "prompt": "ROMEO:", "max_tokens": 12}
    greedy = client.post("/v1/generate", json={**base, "greedy": True}).json()["text"]
    nothing = client.post("/v1/generate", json={**base, "max_tokens": 0})
    assert nothing.status_code == 200 and nothing.json()["text"] == ""
    for extreme in EXTREMES:
        answer = client.post("/v1/generate", json={**base, **extreme, "seed": extreme.get("seed", 3)})
        assert answer.status_code == 200, (extreme, answer.text)
        text = answer.json()["text"]
        assert "<pad>" not in text and "<s>" not in text and "<sep>" not in text
        if extreme.get("temperature", 1) < 1:
            assert text == greedy, extreme
    streamed = client.post("/v1/generate", json={**base, "temperature": 1e-300, "stream": True})
    assert streamed.status_code == 200
    pieces = [json.loads(line[6:]) for line in streamed.text.splitlines()
              if line.startswith("data: {")]
    assert "".join(p.get("text", "") for p in pieces) == greedy


def test_strict_server_reads_an_integral_number_as_the_integer_it_is(client):
    """JSON has one number type and the OpenAPI document's "integer" (JSON Schema's) holds 5.0 to be one: an
    integer field takes 5.0 as 5 (the same answer), on seqlab's routes and OpenAI's, and still refuses 5.5."""
    base = {"model": "lm", "prompt": "ROMEO:", "greedy": True}
    as_int = client.post("/v1/generate", json={**base, "max_tokens": 5, "seed": 3})
    as_float = client.post("/v1/generate", json={**base, "max_tokens": 5.0, "seed": 3.0})
    assert as_float.status_code == 200 and as_float.json()["text"] == as_int.json()["text"]
    completion = {"model": "lm", "prompt": "ROMEO:", "temperature": 0}
    as_int = client.post("/v1/completions", json={**completion, "max_tokens": 4, "n": 1, "logprobs": 2})
    as_float = client.post("/v1/completions", json={**completion, "max_tokens": 4.0, "n": 1.0, "logprobs": 2.0})
    assert as_float.status_code == 200, as_float.text
    assert as_float.json()["choices"] == as_int.json()["choices"]
    for fields in ({"max_tokens": 4.5}, {"n": 1.25}, {"temperature": 0, "max_tokens": True}):
        answer = client.post("/v1/completions", json={**completion, **fields})
        assert answer.status_code in (400, 422) and "integer" in answer.text, (fields, answer.text)


def test_strict_torch_server_answers_extremes_and_refuses_wrong_types_in_its_own_words(client):
    check_extremes(client)
    for extreme in ({"beam": 1, "length_penalty": 10}, {"beam": 2, "length_penalty": 10, "max_length": 8},
                    {"beam": 1, "length_penalty": 0}, {"beam": 3, "max_length": 0}):   # 10, 0: ints for a float
        answer = client.post("/v1/translate", json={"model": "de-en", "text": ["der hund sieht .", "katze"],
                                                     **extreme})
        assert answer.status_code == 200 and all(math.isfinite(r["score"]) for r in answer.json()["results"])
    check_bad_requests(client)
    for body, message in (({"beam": 2, "temperature": 0.5}, "beam 2 searches for the most likely continuation "
                                                              "and samples nothing: drop greedy, temperature"),
                          ({"prompt": "To be, or not to be: that is"}, "context of 16 tokens; shorten it")):
        answer = client.post("/v1/generate", json={"model": "lm", **body})
        assert answer.status_code == 422 and "--" not in answer.json()["error"]
        assert message in answer.json()["error"]
    assert client.get("/healthz").status_code == 200


def test_strict_server_tells_the_client_of_unknown_prompt_tokens_and_does_not_log_them(client, capfd):
    capfd.readouterr()
    answer = client.post("/v1/generate", json={"model": "lm", "prompt": f"RO{UNKNOWN}ME{UNKNOWN}", "max_tokens": 3})
    assert answer.status_code == 200
    (warning,) = answer.json()["warnings"]
    assert "1 prompt token type(s) are not in the vocabulary and are read as <unk>" in warning and UNKNOWN in warning
    known = client.post("/v1/generate", json={"model": "lm", "prompt": "ROMEO", "max_tokens": 3})
    assert known.json()["warnings"] == []
    streamed = client.post("/v1/generate", json={"model": "lm", "prompt": f"{UNKNOWN}!", "max_tokens": 3,
                                                 "stream": True})
    assert streamed.status_code == 200
    first = json.loads(streamed.text.split("\n\n")[0].removeprefix("data: "))
    assert first["text"] == "" and UNKNOWN in first["warnings"][0]          # the stream tells them first
    logged = capfd.readouterr()
    assert UNKNOWN not in logged.err + logged.out and "<unk>" not in logged.err


def chunks(body: bytes, size: int = 1000):
    for start in range(0, len(body), size):
        yield body[start:start + size]


def test_strict_a_chunked_body_over_the_limit_is_a_413_on_a_real_server(runs):
    import httpx

    server, url = serving(app_of(runs))
    try:
        with httpx.Client(base_url=url, timeout=10) as http:
            for path, body in (("/v1/score", {"model": "lm", "text": "x" * 5000}),
                               ("/v1/translate", {"model": "de-en", "text": ["der hund"] * 600}),
                               ("/v1/generate", {"model": "lm", "prompt": "y" * 4097})):
                data = json.dumps(body).encode()
                sent = http.post(path, content=chunks(data), headers={"content-type": "application/json"})
                assert sent.request.headers["transfer-encoding"] == "chunked"
                assert sent.status_code == 413, sent.text
                assert sent.json() == {"error": "the body is over the limit of 4,096 bytes"}
                whole = http.post(path, content=data, headers={"content-type": "application/json"})
                assert whole.status_code == 413 and "limit is 4,096" in whole.json()["error"]
            small = http.post("/v1/score", content=chunks(json.dumps({"model": "lm", "text": "To be"}).encode(), 4),
                              headers={"content-type": "application/json"})
            assert small.status_code == 200 and small.json()["results"][0]["tokens"]
            assert http.get("/healthz").status_code == 200
    finally:
        server.should_exit = True


@pytest.mark.slow
def test_strict_onnx_server_answers_extremes_and_refuses_wrong_types_as_the_torch_server(runs, tmp_path, client):
    """The same requests on `seqlab serve --runtime onnx` (the numpy searches): before, an extreme temperature
    answered 200 with `<pad><pad>...`."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from fastapi.testclient import TestClient

    from seqlab.export.onnx import export_onnx

    exports = [export_onnx(runs[name], tmp_path / name).parent for name in ("lm", "de-en")]
    onnx = TestClient(app_of(runs, "onnx", exports))
    check_extremes(onnx)
    check_bad_requests(onnx)
    for extreme in ({"beam": 1, "length_penalty": 10}, {"beam": 2, "length_penalty": 10, "max_length": 8}):
        body = {"model": "de-en", "text": ["der hund sieht .", "katze"], **extreme}
        expected, got = client.post("/v1/translate", json=body).json(), onnx.post("/v1/translate", json=body).json()
        assert [r["text"] for r in got["results"]] == [r["text"] for r in expected["results"]]
    answer = onnx.post("/v1/generate", json={"model": "lm", "prompt": "To be, or not to be: that is"})
    assert answer.status_code == 422 and answer.json()["error"].endswith("context of 16 tokens; shorten it")
    warned = onnx.post("/v1/generate", json={"model": "lm", "prompt": f"RO{UNKNOWN}", "max_tokens": 3})
    assert warned.status_code == 200 and UNKNOWN in warned.json()["warnings"][0]
