"""The transformer's decoding step compiled ahead of time (`TransformerLM.compiled_decoder`, opt-in): the same
tokens as the eager model, greedy and seeded, past the context (the window slides); what it does not cover is
refused in one line. Compiling takes ~20-40 s on one core: the equality test is slow-marked."""

from __future__ import annotations

import shutil

import pytest
import torch

from conftest import one_line_error, run_seqlab, tiny_config
from seqlab.decoding.search import SamplingOptions, generate_ids
from seqlab.errors import SeqlabError
from seqlab.families.lm.model import LMConfig, build_lm
from seqlab.families.lm.pipeline import train_lm

PROMPT = [3, 10, 11, 12]


def tiny_transformer(**overrides):
    torch.manual_seed(0)
    config = dict(arch="transformer", vocab_size=30, embedding_size=32, num_layers=2, num_heads=2, context=16,
                  dropout=0.0, norm_position="pre", activation="gelu")
    return build_lm(LMConfig(**{**config, **overrides})).eval()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None, reason="no C++ compiler")
def test_compiled_decoding_generates_the_eager_models_tokens():
    model = tiny_transformer()
    decoder = model.compiled_decoder()
    for options in (dict(greedy=True), dict(top_p=0.9, seed=0), dict(temperature=0.7, top_k=8, seed=5)):
        options = SamplingOptions(max_tokens=60, stop_at_eos=False, **options)   # past the context of 16
        assert list(generate_ids(decoder, PROMPT, options)) == list(generate_ids(model, PROMPT, options))
    with torch.inference_mode():                                                 # the logits, within rounding
        state, eager = decoder.start(torch.tensor([PROMPT])), model.start(torch.tensor([PROMPT]))
        token = torch.tensor([PROMPT[-1]])
        for _ in range(20):
            compiled_logits, state, _ = decoder.step(token, state)
            eager_logits, eager, _ = model.step(token, eager)
            assert torch.allclose(compiled_logits, eager_logits, atol=1e-5, rtol=0)
            token = eager_logits.argmax(-1)
    with pytest.raises(SeqlabError, match="one row"):
        decoder.start(torch.tensor([PROMPT, PROMPT]))


@pytest.mark.parametrize("overrides", [dict(positions="rotary"), dict(qk_norm=True)])
def test_compiled_decoding_refuses_what_it_does_not_cover(overrides):
    with pytest.raises(SeqlabError, match="generate without compiling"):
        tiny_transformer(**overrides).compiled_decoder()


def test_compiled_decoding_generate_compile_refuses_a_recurrent_run(tmp_path, capsys):
    """`seqlab generate --compile` of an LSTM run: one line, exit 2, before any compiling."""
    train_lm(tiny_config(tmp_path / "lstm", "lstm", max_steps=2, eval_every=2))
    capsys.readouterr()
    code, err = run_seqlab(["generate", tmp_path / "lstm", "--prompt", "the", "--compile"], capsys)
    one_line_error(code, err, "--compile: only a transformer's decoding step compiles; this run is 'lstm'")
    assert "compiling" not in err


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None, reason="no C++ compiler")
def test_compiled_decoding_generate_compile_prints_what_the_eager_model_does(tmp_path, capsys):
    """`seqlab generate --compile` of a transformer run: the eager run's text for the same seed, sampled and greedy,
    and the compiling said on stderr; beam search (which keeps the model) unchanged."""
    train_lm(tiny_config(tmp_path / "tf", "transformer", max_steps=4, eval_every=4))
    capsys.readouterr()
    from seqlab.cli.main import main

    def generate(argv) -> tuple[str, str]:
        assert main([str(a) for a in argv]) == 0
        captured = capsys.readouterr()
        return captured.out, captured.err

    for options in (["--seed", "3"], ["--greedy"], ["--beam", "3"]):
        argv = ["generate", tmp_path / "tf", "--prompt", "the", "--max-tokens", "40", *options]
        eager, _ = generate(argv)
        compiled, err = generate([*argv, "--compile"])
        assert "compiling the decoding step" in err
        assert compiled == eager and len(eager.split()) > 5
