"""Adaptive softmax (`seqlab.nn.adaptive_softmax`, `--output-layer adaptive`): equal to torch's
AdaptiveLogSoftmaxWithLoss with copied weights, normalised, its training loss equal to the NLL of its full
log-probabilities (and to the evaluation's figure), every LM arch trains with it, the run round-trips through
save/load, the CLI trains/evaluates/generates with it, and every bad option is one line and exit 2."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

import seqlab
from conftest import ARCHS, TEST, TRAIN, VALID, tiny_config
from seqlab.cli.main import main
from seqlab.data.batching import Batch
from seqlab.data.vocab import PAD
from seqlab.errors import SeqlabError
from seqlab.families.lm.model import LMConfig, build_lm
from seqlab.families.lm.pipeline import train_lm
from seqlab.families.lm.task import LanguageModelingTask, evaluate_lm, token_loss
from seqlab.nn.adaptive_softmax import AdaptiveOutputLayer, AdaptiveSoftmax, default_cutoffs, parse_cutoffs

V, D = 60, 32


def pair(cutoffs=(10, 30), div_value=4.0, seed=0):
    """Torch's module and ours with the same weights (ours loads torch's state_dict: the names match)."""
    torch.manual_seed(seed)
    reference = torch.nn.AdaptiveLogSoftmaxWithLoss(D, V, list(cutoffs), div_value=div_value, head_bias=True)
    ours = AdaptiveSoftmax(D, V, list(cutoffs), div_value)
    missing, unexpected = ours.load_state_dict(reference.state_dict(), strict=False)
    assert missing == ["rank"] and not unexpected
    return reference, ours


def shuffled(layer: AdaptiveSoftmax, seed: int = 1) -> AdaptiveSoftmax:
    """The layer with a frequency order that is not the ids' (as a BPE vocabulary's)."""
    counts = torch.rand(layer.vocab_size, generator=torch.Generator().manual_seed(seed))
    assert layer.order_by_frequency(counts) > 0
    return layer


@pytest.mark.parametrize("cutoffs, div_value", [((10, 30), 4.0), ((5,), 2.0), ((8, 20, 40), 1.0)])
def test_adaptive_softmax_equals_torch(cutoffs, div_value):
    reference, ours = pair(cutoffs, div_value)
    h = torch.randn(3, 7, D)
    torch.testing.assert_close(ours.log_prob(h), reference.log_prob(h.reshape(-1, D)).reshape(3, 7, V),
                               atol=1e-5, rtol=0)
    targets = torch.randint(1, V, (21,), generator=torch.Generator().manual_seed(2))
    loss_sum, count = ours.loss(h, targets.reshape(3, 7))
    expected = reference(h.reshape(-1, D), targets).loss                    # the mean NLL
    assert count == 21
    torch.testing.assert_close(loss_sum / count, expected, atol=1e-5, rtol=0)
    loss_sum.backward()
    (expected * 21).backward()
    for name, parameter in reference.named_parameters():                    # the same gradients
        torch.testing.assert_close(ours.get_parameter(name).grad, parameter.grad, atol=1e-5, rtol=1e-5)


def test_adaptive_softmax_log_prob_is_normalised():
    _, layer = pair()
    for ours in (layer, shuffled(layer)):
        total = ours.log_prob(torch.randn(4, 5, D) * 3).exp().sum(-1)        # (4, 5)
        torch.testing.assert_close(total, torch.ones(4, 5), atol=1e-5, rtol=0)


def test_adaptive_softmax_loss_equals_the_nll_of_log_prob_with_padding_and_a_permutation():
    _, ours = pair((10, 30))
    shuffled(ours)
    h = torch.randn(4, 9, D, requires_grad=True)
    targets = torch.randint(1, V, (4, 9), generator=torch.Generator().manual_seed(3))
    targets[2, 5:] = PAD
    targets[3, :] = PAD
    loss_sum, count = ours.loss(h, targets)
    expected, expected_count = token_loss(ours.log_prob(h), targets)         # cross-entropy of log p = the NLL
    assert int(count) == int(expected_count) == 4 * 9 - 4 - 9
    torch.testing.assert_close(loss_sum, expected, atol=1e-4, rtol=1e-6)
    gathered = -ours.log_prob(h).gather(-1, targets[..., None]).squeeze(-1)[targets != PAD].sum()
    torch.testing.assert_close(loss_sum, gathered, atol=1e-4, rtol=1e-6)
    grad, = torch.autograd.grad(loss_sum, h)
    expected_grad, = torch.autograd.grad(expected, h)
    torch.testing.assert_close(grad, expected_grad, atol=1e-5, rtol=1e-5)
    assert grad[3].abs().max() == 0                                          # an all-padding row has no gradient


def test_adaptive_softmax_permutation_moves_words_between_clusters():
    _, ours = pair((10, 30))
    counts = torch.arange(V, dtype=torch.float)                              # the last id is the most frequent
    ours.order_by_frequency(counts)
    assert ours.rank[V - 1] == 0 and ours.rank[0] == V - 1
    h = torch.randn(2, D)
    head = torch.log_softmax(ours.head(h), -1)
    torch.testing.assert_close(ours.log_prob(h)[:, V - 1], head[:, 0])      # the most frequent id is in the head


def test_adaptive_softmax_cutoffs_parsing_and_defaults():
    assert parse_cutoffs("2000,10000", 33278) == [2000, 10000]
    assert default_cutoffs(33278) == [2486, 7458]                            # fairseq's wikitext-103 fractions
    assert default_cutoffs(10) == [1, 2] and default_cutoffs(2) == [1]
    for text, message in [("10,5", "strictly increasing"), ("0,5", "positive"), ("a,b", "integers"),
                          ("5,60", "below the vocabulary size 60"), ("5,5", "strictly increasing")]:
        with pytest.raises(SeqlabError, match=message):
            parse_cutoffs(text, 60)


def lm(arch: str, **options) -> torch.nn.Module:
    config = LMConfig(arch=arch, vocab_size=V, embedding_size=16, hidden_size=16, num_layers=1, num_heads=2,
                      context=8 if arch == "transformer" else 0, output_layer="adaptive", cutoffs="10,30",
                      **options)
    return build_lm(config)


def task_for(model, seq_len: int = 8) -> LanguageModelingTask:
    ids = torch.randint(5, V, (400,), generator=torch.Generator().manual_seed(0))
    return LanguageModelingTask(model, ids, ids[:100], None, 4, seq_len, 4, 0, 0)


@pytest.mark.parametrize("arch", ARCHS)
def test_adaptive_softmax_every_arch_builds_and_trains_a_step(arch):
    torch.manual_seed(0)
    model = lm(arch)
    assert isinstance(model.output, AdaptiveOutputLayer)
    task = task_for(model)
    assert task.adaptive and not task.fused_output and "adaptive softmax" in task.output_note
    batch = task.train_batches(0)[0]
    state = task.initial_state(model, batch.inputs.size(0), "cpu")
    loss_sum, count, _ = task.loss(model, batch, state)
    (loss_sum / count).backward()
    assert torch.isfinite(loss_sum)
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.output.parameters())
    logits, _ = model(batch.inputs, state)                                   # (B, T, V): log-probabilities
    assert logits.shape == (*batch.inputs.shape, V)
    torch.testing.assert_close(logits.exp().sum(-1), torch.ones(batch.inputs.shape), atol=1e-5, rtol=0)


@pytest.mark.parametrize("arch", ["lstm", "transformer"])
@torch.no_grad()
def test_adaptive_softmax_training_loss_equals_the_evaluation_figure(arch):
    torch.manual_seed(0)
    model = lm(arch, dropout=0.0).eval()
    task = task_for(model)
    shuffled(model.output)
    batches = task.eval_batches(task.valid_data)
    trained = sum(float(task.loss(model, b, task.initial_state(model, b.inputs.size(0), "cpu"))[0])
                  for b in batches) if not task.carries_state else None
    if task.carries_state:                                                   # the state carried across segments
        state, trained = model.init_state(batches[0].inputs.size(0)), 0.0
        for b in batches:
            loss_sum, _, state = task.loss(model, b, state)
            trained += float(loss_sum)
    evaluated = evaluate_lm(model, batches, task.carries_state, "cpu")
    assert trained == pytest.approx(evaluated["loss_sum"], rel=1e-5)


def test_adaptive_softmax_overfits_one_batch():
    torch.manual_seed(0)
    model = build_lm(LMConfig(arch="lstm", vocab_size=V, embedding_size=32, hidden_size=32, num_layers=1,
                              dropout=0.0, output_layer="adaptive", cutoffs="10,30", div_value=2.0))
    batch = Batch(torch.randint(5, V, (4, 8)), torch.randint(5, V, (4, 8)))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.03)
    for _ in range(60):
        optimizer.zero_grad()
        hidden, _ = model(batch.inputs, output="hidden")                     # (B, T, D)
        loss_sum, count = model.output.loss(hidden, batch.targets)
        (loss_sum / count).backward()
        optimizer.step()
    assert float(loss_sum.detach() / count) < 0.1


@pytest.mark.slow
def test_adaptive_softmax_save_load_round_trip(tmp_path):
    config = tiny_config(tmp_path / "run", tokenizer="bpe", max_steps=4)
    config = dataclasses.replace(config, model=dataclasses.replace(config.model, output_layer="adaptive"),
                                 data=dataclasses.replace(config.data, bpe_vocab_size=300))
    train_lm(config)
    saved = json.loads((tmp_path / "run" / "config.json").read_text())["model"]
    assert saved["output_layer"] == "adaptive" and saved["cutoffs"] and saved["div_value"] == 4.0
    trained = seqlab.load(tmp_path / "run")
    assert isinstance(trained.model.output, AdaptiveOutputLayer)
    # BPE pieces are in merge order, not by frequency: the layer holds the training counts' permutation
    assert not torch.equal(trained.model.output.rank, torch.arange(trained.model.output.vocab_size))
    again = seqlab.load(tmp_path / "run")
    ids = trained.encode("First Citizen: we are accounted poor")[None]
    torch.testing.assert_close(trained.model(ids)[0], again.model(ids)[0], atol=0, rtol=0)
    assert trained.perplexity("First Citizen: we are accounted poor citizens") > 1
    assert isinstance(trained.generate("First", max_tokens=5, seed=1), str)


def test_adaptive_softmax_old_configs_load_with_the_full_softmax():
    config = LMConfig(**{"arch": "lstm", "vocab_size": V})                  # a config.json from before the option
    assert config.output_layer == "softmax" and config.cutoffs == "" and config.div_value == 4.0
    assert not isinstance(build_lm(config).output, AdaptiveOutputLayer)


def train_cli(tmp_path, *extra, name="run"):
    output = tmp_path / name
    try:
        code = main(["train", "lm", "--train", str(TRAIN), "--valid", str(VALID), "--test", str(TEST), "--tokenizer",
                     "word", "--output", str(output), "--embedding-size", "16", "--hidden-size", "16", "--layers",
                     "1", "--batch-size", "4", "--seq-len", "8", "--max-steps", "4", "--eval-every", "2",
                     "--no-progress", "--output-layer", "adaptive", *extra])
    except SystemExit as exit:                   # argparse's own checks (a number out of range) exit 2 too
        code = exit.code
    return code, output


@pytest.mark.slow
def test_adaptive_softmax_cli_train_evaluate_generate(tmp_path, capsys):
    code, run = train_cli(tmp_path, "--cutoffs", "20,100")
    assert code == 0
    assert "output layer: adaptive softmax (head 20 words + 2 clusters, cutoffs 20,100" in capsys.readouterr().err
    assert main(["evaluate", str(run), str(TEST), "--json"]) == 0
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    final = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    test = next(m for m in final if m.get("final") and m["split"] == "test")
    assert figures["perplexity"] == pytest.approx(test["perplexity"], rel=1e-5)
    assert main(["generate", str(run), "--prompt", "First", "--max-tokens", "5", "--seed", "1",
                 "--no-stop-at-eos"]) == 0
    assert len(capsys.readouterr().out.split()) == 1 + 5
    assert main(["generate", str(run), "--prompt", "First", "--beam", "3", "--max-tokens", "5"]) == 0


@pytest.mark.parametrize("extra, message", [
    (["--cutoffs", "100,20"], "--cutoffs 100,20: the cutoffs must be strictly increasing"),
    (["--cutoffs", "0,20"], "--cutoffs 0,20: every cutoff must be a positive integer"),
    (["--cutoffs", "20,x"], "--cutoffs '20,x': expects comma-separated integers"),
    (["--cutoffs", "20,100000"], "every cutoff must be below the vocabulary size"),
    (["--tied"], "--tied does not apply to --output-layer adaptive"),
    (["--fused-output", "on"], "--fused-output on does not apply to --output-layer adaptive"),
    (["--div-value", "0.5"], "--div-value: must be at least 1"),
    (["--output-layer", "softmax", "--cutoffs", "20"], "--cutoffs applies to --output-layer adaptive only"),
])
def test_adaptive_softmax_bad_options_are_one_line_and_exit_2(tmp_path, capsys, extra, message):
    code, _ = train_cli(tmp_path, *extra)
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err, err
    assert len([line for line in err.strip().splitlines() if "error" in line]) == 1, err


@pytest.mark.slow
def test_adaptive_softmax_onnx_export_step_equals_pytorch(tmp_path):
    pytest.importorskip("onnxruntime", reason="seqlab export needs onnxruntime (pip install 'seqlab[export]')")
    pytest.importorskip("onnx", reason="seqlab export needs onnx (pip install 'seqlab[export]')")
    from seqlab.export.runtime import load_export

    code, run = train_cli(tmp_path, "--cutoffs", "20,100")
    assert code == 0
    assert main(["export", str(run), "--format", "onnx", "--output", str(tmp_path / "export")]) == 0
    model, onnx = seqlab.load(run).model, load_export(tmp_path / "export")
    prompt = torch.randint(5, model.embedding.num_embeddings, (3, 4), generator=torch.Generator().manual_seed(0))
    state, values = model.start(prompt), onnx.start(3)
    for token in prompt[:, :-1].T:
        _, values = onnx.step(token.numpy(), values)
    tokens = prompt[:, -1]
    for _ in range(3):
        expected, state, _ = model.step(tokens, state)                       # (B, V) log-probabilities
        got, values = onnx.step(tokens.numpy(), values)
        torch.testing.assert_close(torch.from_numpy(got), expected.detach(), atol=1e-4, rtol=0)
        tokens = expected.argmax(-1)


@pytest.mark.slow
def test_adaptive_softmax_serve_answers_as_the_python_api(tmp_path):
    pytest.importorskip("fastapi", reason="seqlab serve needs fastapi (pip install 'seqlab[serve]')")
    from fastapi.testclient import TestClient

    from seqlab.serve.app import create_app

    code, run = train_cli(tmp_path, "--cutoffs", "20,100")
    assert code == 0
    client = TestClient(create_app([run]))
    trained = seqlab.load(run)
    got = client.post("/v1/generate", json={"model": "run", "prompt": "First", "max_tokens": 6, "seed": 3}).json()
    assert got["text"] == trained.generate("First", max_tokens=6, seed=3)
    scored = client.post("/v1/score", json={"model": "run", "text": ["First Citizen"]}).json()["results"][0]
    assert scored["perplexity"] == pytest.approx(trained.perplexity("First Citizen"), rel=1e-5)


def test_adaptive_softmax_gpt2_export_refuses_it_by_name():
    from seqlab.families.lm.hf import check_gpt2_options

    config = LMConfig(arch="transformer", vocab_size=V, norm_position="pre", activation="gelu", bias=False,
                      output_layer="adaptive")
    with pytest.raises(SeqlabError, match="this run has --no-tied, --output-layer adaptive"):
        check_gpt2_options(config)
