"""The transformer options of current small-model practice (rotary positions, RMSNorm, SwiGLU, QK-norm) and the
Muon optimizer: each against its reference formula, each overfits a batch, decoding one token at a time equals
the parallel forward, save/load and resume, and the refusals."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F

import seqlab
from conftest import TRAIN, VALID, Killed, kill_after_evaluation, tiny_config
from seqlab.cli.main import main
from seqlab.errors import SeqlabError
from seqlab.families.lm.hf import check_gpt2_options
from seqlab.families.lm.model import LMConfig, build_lm
from seqlab.families.lm.pipeline import train_lm
from seqlab.nn.attention import MultiHeadAttention, Rotary, qk_normalise
from seqlab.nn.transformer import RMSNorm, SwiGLU, TransformerBlock
from seqlab.training.optim import MuonAdamW, make_optimizer, muon_groups, orthogonalise

OPTIONS = {   # name: LMConfig fields
    "rotary": {"positions": "rotary"},
    "rmsnorm": {"norm": "rmsnorm"},
    "swiglu": {"activation": "swiglu"},
    "qk-norm": {"qk_norm": True},
    "untied": {"tie_weights": False},
    "all": {"positions": "rotary", "norm": "rmsnorm", "activation": "swiglu", "qk_norm": True, "bias": False,
            "tie_weights": True},
}


def lm(vocab: int = 20, **fields) -> torch.nn.Module:
    config = LMConfig(arch="transformer", vocab_size=vocab, embedding_size=32, num_layers=2, num_heads=4,
                      context=16, dropout=0.0, norm_position="pre", **fields)
    return build_lm(config)


# ---------------------------------------------------------------- each option against its formula

def test_rmsnorm_is_x_over_its_root_mean_square_times_the_gain():
    x = torch.randn(3, 5, 8)
    norm = RMSNorm(8)
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.5, 2.0, 8))
    expected = x / torch.sqrt((x ** 2).mean(-1, keepdim=True) + 1e-5) * norm.weight    # Zhang & Sennrich eq. 4
    torch.testing.assert_close(norm(x), expected)
    torch.testing.assert_close(norm(x), F.rms_norm(x, (8,), norm.weight, 1e-5))         # PyTorch's own


def test_rotary_equals_multiplying_complex_pairs_by_their_angle():
    """RoFormer eq. 34 as complex numbers: the pair (x_i, x_{i+d/2}) times exp(i m theta_i)."""
    hs, T = 8, 6
    rotary = Rotary(hs, 32)
    x = torch.randn(2, 3, T, hs)
    positions = torch.arange(4, 4 + T)
    theta = 10000 ** (-torch.arange(0, hs, 2).float() / hs)
    z = torch.complex(x[..., : hs // 2], x[..., hs // 2:]) * torch.polar(torch.ones(T, hs // 2),
                                                                           positions[:, None] * theta)
    torch.testing.assert_close(rotary(x, positions), torch.cat([z.real, z.imag], -1))


def test_rotary_scores_depend_only_on_the_distance():
    """q'_m . k'_n is a function of m - n (RoFormer eq. 16): shifting every position leaves the scores equal."""
    rotary = Rotary(16, 64)
    q, k = torch.randn(1, 2, 5, 16), torch.randn(1, 2, 5, 16)
    positions = torch.arange(5)
    scores = rotary(q, positions) @ rotary(k, positions).mT
    shifted = rotary(q, positions + 37) @ rotary(k, positions + 37).mT
    torch.testing.assert_close(scores, shifted, atol=1e-4, rtol=1e-4)
    assert not torch.allclose(scores, q @ k.mT, atol=1e-3)                           # it does rotate


def test_rotary_per_row_positions_equal_one_row_at_a_time():
    rotary = Rotary(8, 32)
    x = torch.randn(2, 3, 4, 8)
    positions = torch.tensor([[0, 1, 2, 3], [5, 6, 7, 8]])
    both = rotary(x, positions)
    for b in range(2):
        torch.testing.assert_close(both[b:b + 1], rotary(x[b:b + 1], positions[b]))


def test_swiglu_feedforward_is_swish_gate_times_value():
    """Shazeer 2020 eq. 6: FFN(x) = (Swish(x W) * x V) W2, W and V stacked in the first linear layer."""
    block = TransformerBlock(16, 2, 12, activation="swiglu", norm_position="pre")
    first, gate, second = block.feedforward
    assert isinstance(gate, SwiGLU) and first.weight.shape == (24, 16) and second.weight.shape == (16, 12)
    x = torch.randn(3, 16)
    W, V = first.weight[:12], first.weight[12:]
    b_W, b_V = first.bias[:12], first.bias[12:]
    expected = (F.silu(x @ W.T + b_W) * (x @ V.T + b_V)) @ second.weight.T + second.bias
    torch.testing.assert_close(block.feedforward(x), expected)


def test_swiglu_default_width_keeps_the_feedforward_parameters():
    """8/3 of 4d wide (rounded up to a multiple of 8): three d x f matrices hold what two d x 4d do."""
    assert LMConfig(arch="transformer", embedding_size=128, activation="swiglu").ff_size == 344
    plain, gated = lm(activation="gelu"), lm(activation="swiglu")
    count = lambda model: sum(p.numel() for p in model.blocks[0].feedforward.parameters())  # noqa: E731
    assert abs(count(gated) - count(plain)) / count(plain) < 0.05


def test_qk_norm_gives_unit_rms_queries_and_keys():
    attention = MultiHeadAttention(16, 2, qk_norm=True)
    q = torch.randn(2, 2, 5, 8) * 7
    normed = qk_normalise(q, attention.q_norm)
    torch.testing.assert_close(normed.pow(2).mean(-1), torch.ones(2, 2, 5), atol=1e-3, rtol=1e-3)
    with torch.no_grad():
        attention.q_norm.fill_(2.0)
    torch.testing.assert_close(qk_normalise(q, attention.q_norm), 2 * normed)


def test_rotary_lm_has_no_position_table_and_the_options_reach_every_block():
    model = lm(**OPTIONS["all"])
    assert model.positions is None
    names = {name for name, _ in model.named_parameters()}
    assert "blocks.1.attention.q_norm" in names and "blocks.1.attention.k_norm" in names
    assert isinstance(model.final_norm, RMSNorm) and isinstance(model.blocks[0].norm1, RMSNorm)
    assert not any(name.endswith("bias") for name in names)


# ---------------------------------------------------------------- the options train, and decode as they train

@pytest.mark.parametrize("name", list(OPTIONS))
def test_each_option_overfits_a_batch(name):
    torch.manual_seed(0)
    model = lm(**OPTIONS[name])
    tokens = torch.randint(4, 20, (4, 16))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(60):
        logits, _ = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 20), tokens[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.1


@pytest.mark.parametrize("name", list(OPTIONS))
def test_decoding_one_token_at_a_time_equals_the_parallel_forward(name):
    """`step` over the KV cache (in eval, the blocks' function-call path, rotary at the cache's position) gives
    what one pass over the whole sequence gives, past the context, where the cache slides."""
    torch.manual_seed(1)
    model = lm(**OPTIONS[name]).eval()
    tokens = torch.randint(4, 20, (3, 12))
    with torch.no_grad():
        expected, _ = model(tokens)
        state = model.start(tokens[:, :1])
        for t in range(12):
            logits, state, _ = model.step(tokens[:, t], state)
            torch.testing.assert_close(logits, expected[:, t], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", list(OPTIONS))
def test_no_position_sees_the_future(name):
    """Changing the tokens after position t leaves the logits up to t as they were (the causal mask holds with
    rotary embeddings and QK-norm)."""
    torch.manual_seed(2)
    model = lm(**OPTIONS[name]).eval()
    tokens = torch.randint(4, 20, (2, 12))
    changed = tokens.clone()
    changed[:, 7:] = torch.randint(4, 20, (2, 5))
    with torch.no_grad():
        before, _ = model(tokens)
        after, _ = model(changed)
    torch.testing.assert_close(before[:, :7], after[:, :7])
    assert not torch.allclose(before[:, 7:], after[:, 7:])


# ---------------------------------------------------------------- Muon

def test_orthogonalise_brings_every_singular_value_near_one():
    """Five Newton-Schulz steps take singular values from 1/300 of the largest to within 0.6-1.3."""
    for shape in [(32, 32), (96, 32), (16, 64)]:
        k = min(shape)
        u, _ = torch.linalg.qr(torch.randn(shape[0], k))
        v, _ = torch.linalg.qr(torch.randn(shape[1], k))
        g = u @ torch.diag(torch.logspace(-1.5, 1, k)) @ v.T                  # condition number 300
        s = torch.linalg.svdvals(orthogonalise(g))
        assert s.min() > 0.6 and s.max() < 1.3, (shape, s.min(), s.max())
        u, _, vh = torch.linalg.svd(g, full_matrices=False)
        assert F.cosine_similarity(orthogonalise(g).flatten(), (u @ vh).flatten(), dim=0) > 0.95   # ~ U V^T


def test_muon_step_equals_pytorchs_muon_and_adamw():
    """Muon's matrices against torch.optim.Muon (match_rms_adamw: the AdamW rate carries over; PyTorch orthogonalises
    in bf16, we in fp32), the rest against torch.optim.AdamW, over three steps."""
    torch.manual_seed(0)
    matrix, vector = torch.nn.Parameter(torch.randn(24, 16)), torch.nn.Parameter(torch.randn(16))
    ours = MuonAdamW([{"params": [matrix], "muon": True, "blocks": 1},
                      {"params": [vector], "muon": False}], lr=0.01, betas=(0.9, 0.95), weight_decay=0.1)
    ref_matrix, ref_vector = torch.nn.Parameter(matrix.detach().clone()), torch.nn.Parameter(vector.detach().clone())
    muon = torch.optim.Muon([ref_matrix], lr=0.01, weight_decay=0.1, adjust_lr_fn="match_rms_adamw")
    adamw = torch.optim.AdamW([ref_vector], lr=0.01, betas=(0.9, 0.95), weight_decay=0.1)
    for step in range(3):
        g = torch.Generator().manual_seed(step)
        grads = torch.randn(24, 16, generator=g), torch.randn(16, generator=g)
        for params, optimizers in (((matrix, vector), (ours,)), ((ref_matrix, ref_vector), (muon, adamw))):
            for p, grad in zip(params, grads, strict=True):
                p.grad = grad.clone()
            for optimizer in optimizers:
                optimizer.step()
    torch.testing.assert_close(vector, ref_vector, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(matrix, ref_matrix, atol=2e-2, rtol=0)           # bf16 against fp32
    assert (matrix - ref_matrix).abs().mean() < 3e-3


def test_muon_takes_the_hidden_matrices_and_splits_qkv():
    model = lm(tie_weights=True)
    groups = muon_groups(model, 0.1)
    names = {id(p): name for name, p in model.named_parameters()}
    by = lambda g: {names[id(p)] for p in g["params"]}  # noqa: E731
    muon1, muon3, decay, no_decay = (by(g) for g in groups)
    assert muon3 == {"blocks.0.attention.qkv.weight", "blocks.1.attention.qkv.weight"}
    assert "blocks.0.attention.out.weight" in muon1 and "blocks.1.feedforward.2.weight" in muon1
    assert decay == {"embedding.weight", "positions.table.weight"}               # output tied to the embedding
    assert all(name.endswith(("bias", "weight")) and "norm" in name or name.endswith("bias") for name in no_decay)
    assert len(muon1 | muon3 | decay | no_decay) == len(names)


def test_muon_splits_qkv_into_three_orthogonal_blocks():
    torch.manual_seed(0)
    model = lm()
    optimizer = make_optimizer(model, "muon", lr=1.0)
    qkv = model.blocks[0].attention.qkv.weight
    before = qkv.detach().clone()
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    qkv.grad = torch.randn_like(qkv)
    optimizer.step()
    update = (before - qkv.detach()) / (0.2 * math.sqrt(32))                   # momentum 0.95: NS((1-mu) G + mu B)
    for block in update.split(32):
        s = torch.linalg.svdvals(block)
        assert s.min() > 0.5 and s.max() < 1.3


def test_muon_resume_equals_uninterrupted(tmp_path):
    options = dict(optimizer="muon", max_steps=8)
    full = tiny_config(tmp_path / "full", "transformer", **options)
    full.model.positions, full.model.norm = "rotary", "rmsnorm"
    train_lm(full)
    broken = tiny_config(tmp_path / "broken", "transformer", **options)
    broken.model.positions, broken.model.norm = "rotary", "rmsnorm"
    with pytest.raises(Killed):
        train_lm(broken, callback=kill_after_evaluation(4))
    train_lm(broken, resume=True)
    read = lambda run: [json.loads(line)["loss"] for line in (run / "train_log.jsonl").read_text().splitlines()]  # noqa: E731
    assert read(tmp_path / "broken") == read(tmp_path / "full")


# ---------------------------------------------------------------- the command line

def test_cli_trains_generates_and_reloads_a_model_with_every_option(tmp_path, capsys):
    run = tmp_path / "run"
    args = ["train", "lm", "--train", str(TRAIN), "--valid", str(VALID), "--tokenizer", "char", "--arch",
            "transformer", "--embedding-size", "16", "--heads", "2", "--layers", "1", "--context", "16",
            "--norm-position", "pre", "--positions", "rotary", "--norm", "rmsnorm", "--activation", "swiglu",
            "--qk-norm", "--optimizer", "muon", "--max-steps", "6", "--batch-size", "4", "--seq-len", "8",
            "--no-progress", "--output", str(run)]
    assert main(args) == 0
    capsys.readouterr()
    config = json.loads((run / "config.json").read_text())["model"]
    assert (config["positions"], config["norm"], config["activation"], config["qk_norm"]) == \
        ("rotary", "rmsnorm", "swiglu", True)
    assert config["ff_size"] == 48
    assert main(["generate", str(run), "--prompt", "the", "--max-tokens", "20", "--seed", "1"]) == 0
    first = capsys.readouterr().out
    assert main(["generate", str(run), "--prompt", "the", "--max-tokens", "20", "--seed", "1"]) == 0
    assert capsys.readouterr().out == first
    trained = seqlab.load(run)
    assert trained.model.positions is None


@pytest.mark.parametrize("args, message", [
    (["--arch", "transformer", "--positions", "rotary", "--embedding-size", "6", "--heads", "2"], "head size"),
    (["--arch", "transformer", "--norm", "batchnorm"], "--norm"),
    (["--arch", "lstm", "--activation", "swiglu"], "swiglu"),
    (["--arch", "lstm", "--qk-norm"], "--qk-norm"),
])
def test_cli_refuses_bad_options_in_one_line(tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as exit_:
        raise SystemExit(main(["train", "lm", "--train", str(TRAIN), "--valid", str(VALID), *args, "--no-progress",
                               "--output", str(tmp_path / "run")]))
    assert exit_.value.code == 2
    assert not (tmp_path / "run").exists()
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and "Traceback" not in err


def test_hf_export_refuses_the_options_gpt2_cannot_hold():
    config = LMConfig(arch="transformer", vocab_size=20, embedding_size=16, num_heads=2, norm_position="pre",
                      activation="gelu", tie_weights=True, bias=False, positions="rotary", qk_norm=True)
    with pytest.raises(SeqlabError, match="--positions rotary.*--qk-norm"):
        check_gpt2_options(config)


@pytest.mark.slow
def test_onnx_export_of_every_option_steps_as_pytorch(tmp_path):
    """The exported step (it re-reads its window) equals `step` over the KV cache, past the context, where both
    slide."""
    import numpy as np

    pytest.importorskip("onnxruntime")
    from seqlab.export.onnx import export_onnx
    from seqlab.export.runtime import load_export

    config = tiny_config(tmp_path / "run", "transformer", tokenizer="char")
    for name, value in OPTIONS["all"].items():
        setattr(config.model, name, value)
    config.model.norm_position = "pre"
    train_lm(config)
    export_onnx(tmp_path / "run", tmp_path / "export")
    model, onnx = seqlab.load(tmp_path / "run").model, load_export(tmp_path / "export")
    prompt = torch.randint(5, model.embedding.num_embeddings, (2, 5), generator=torch.Generator().manual_seed(0))
    state, values = model.start(prompt), onnx.start(2)
    for token in prompt[:, :-1].T:
        _, values = onnx.step(token.numpy(), values)
    tokens = prompt[:, -1]
    for _ in range(24):                                      # the context is 16
        expected, state, _ = model.step(tokens, state)
        got, values = onnx.step(tokens.numpy(), values)
        np.testing.assert_allclose(got, expected.detach().numpy(), atol=1e-4)
        tokens = expected.argmax(-1)
