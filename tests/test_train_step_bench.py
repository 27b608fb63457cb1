"""benchmarks/train_step.py: its plain-PyTorch contenders are the same models as seqlab's. nanoGPT's GPT (written out
as its model.py writes it) and pytorch/examples' RNNModel, given seqlab's weights, give seqlab's logits, so the side
by side compares loops and kernels, not models; the nanoGPT loop's learning-rate schedule is train.py's; the quick
mode runs end to end (slow) without writing results."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from seqlab.families.lm.model import LMConfig, build_lm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import train_step  # noqa: E402

V = 37


def seqlab_transformer(num_layers: int = 2):
    torch.manual_seed(0)
    return build_lm(LMConfig(arch="transformer", vocab_size=V, embedding_size=32, num_layers=num_layers,
                             num_heads=4, context=16, dropout=0.0, norm_position="pre", activation="gelu",
                             positions="learned", tie_weights=True, bias=False))


def test_train_step_nanogpt_model_equals_seqlab_transformer():
    ours = seqlab_transformer().eval()
    gpt = train_step.GPT(train_step.GPTConfig(block_size=16, vocab_size=V, n_layer=2, n_head=4, n_embd=32)).eval()
    assert sum(p.numel() for p in gpt.parameters()) == sum(p.numel() for p in ours.parameters())
    with torch.no_grad():
        gpt.transformer.wte.weight.copy_(ours.embedding.weight)             # tied: lm_head too
        gpt.transformer.wpe.weight.copy_(ours.positions.table.weight)
        gpt.transformer.ln_f.weight.copy_(ours.final_norm.weight)
        for block, theirs in zip(ours.blocks, gpt.transformer.h, strict=True):
            theirs.ln_1.weight.copy_(block.norm1.weight)
            theirs.attn.c_attn.weight.copy_(block.attention.qkv.weight)    # W^Q, W^K, W^V stacked alike
            theirs.attn.c_proj.weight.copy_(block.attention.out.weight)
            theirs.ln_2.weight.copy_(block.norm2.weight)
            theirs.mlp.c_fc.weight.copy_(block.feedforward[0].weight)
            theirs.mlp.c_proj.weight.copy_(block.feedforward[2].weight)
        tokens = torch.randint(0, V, (3, 16))
        logits, loss = gpt(tokens, tokens)
        expected, _ = ours(tokens)
    torch.testing.assert_close(logits, expected, atol=1e-5, rtol=1e-5)
    assert math.isfinite(float(loss))


def test_train_step_examples_model_equals_seqlab_lstm():
    torch.manual_seed(0)
    ours = build_lm(LMConfig(arch="lstm", vocab_size=V, embedding_size=24, hidden_size=24, num_layers=2,
                             dropout=0.2, tie_weights=True)).eval()
    theirs = train_step.RNNModel(V, 24, 24, 2, 0.2).eval()
    with torch.no_grad():
        theirs.encoder.weight.copy_(ours.embedding.weight)                  # tied: the decoder's too
        theirs.decoder.bias.copy_(ours.output.decoder.bias)
        for layer, lstm in enumerate(ours.rnn.layers):
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                getattr(theirs.rnn, f"{name}_l{layer}").copy_(getattr(lstm, f"{name}_l0"))
        tokens = torch.randint(0, V, (3, 10))                               # (B, T)
        log_probs, _ = theirs(tokens.t(), theirs.init_hidden(3))            # seq-first: (T * B, V)
        logits, _ = ours(tokens, ours.init_state(3))                        # (B, T, V)
    expected = torch.log_softmax(logits, -1).transpose(0, 1).reshape(-1, V)
    torch.testing.assert_close(log_probs, expected, atol=1e-5, rtol=1e-5)


def test_train_step_nanogpt_schedule_is_seqlabs_cosine():
    """The same cosine as seqlab's Schedule over the steps run (nanoGPT's lr_decay_iters = max_iters): equal from
    the end of the warm-up on (nanoGPT warms up as (it + 1) / (warmup + 1), seqlab as (step + 1) / warmup)."""
    from seqlab.training.optim import Schedule

    c = dict(train_step.NANOGPT, lr_decay_iters=200)
    schedule = Schedule("cosine", c["learning_rate"], 200, c["warmup_iters"], min_lr=c["min_lr"])
    for step in (100, 150, 199):
        assert train_step.get_lr(step, c) == pytest.approx(schedule.lr(step, 0), rel=1e-6)
    assert train_step.get_lr(0, c) == pytest.approx(c["learning_rate"] / 101)


@pytest.mark.slow
def test_train_step_quick_runs_and_writes_nothing(tmp_path):
    data = Path(os.environ.get("SEQLAB_DATA", ROOT.parent / "shared" / "data"))
    if not (data / "tinyshakespeare").exists() or not (data / "wikitext-2").exists():
        pytest.skip(f"needs tinyshakespeare and wikitext-2 under {data}")
    results = ROOT / "benchmarks" / "results" / "train_step.json"
    before = results.read_bytes() if results.exists() else None
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "train_step.py"), "--quick", "--data-dir",
                           str(data)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "seqlab trainer / plain nanoGPT-style loop" in done.stdout
    assert "seqlab trainer / plain pytorch/examples loop" in done.stdout
    assert (results.read_bytes() if results.exists() else None) == before
