"""Training through the fused output layer (seqlab.training.output_loss): for every language model and every
sequence-to-sequence model, the task's loss and every parameter's gradient equal the plain path's on a
padded batch; `forward(..., output="hidden")` and `OutputLayer.weight_and_bias()` give the logits back;
`--fused-output` is a train option (on / off give the same weights after a step, auto decides once and
says so, old runs load without it); bf16 autocast gives the plain path's figures to bf16 rounding."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import seqlab
from seqlab.cli.main import main
from seqlab.data.batching import Batch
from seqlab.data.tokenizers import WordTokenizer
from seqlab.data.vocab import PAD, Vocab
from seqlab.errors import SeqlabError
from seqlab.families.lm.config import read_run_config
from seqlab.families.lm.model import LMConfig, build_lm
from seqlab.families.lm.task import LanguageModelingTask
from seqlab.families.seq2seq.model import Seq2SeqConfig, build_model
from seqlab.families.seq2seq.parallel import Pair
from seqlab.families.seq2seq.task import PairVocabulary, Seq2SeqTask
from seqlab.nn.fused_output import linear_cross_entropy, should_fuse
from seqlab.training import output_loss
from seqlab.training.checkpoint import load_tensors
from seqlab.training.devices import cpu_supports_bf16
from seqlab.training.output_loss import choose_fused_output, output_layer

FIXTURES = Path(__file__).parent / "fixtures"
V = 29

LM_VARIANTS = {
    "rnn": dict(arch="rnn"), "lstm": dict(arch="lstm"), "gru": dict(arch="gru"), "ffn": dict(arch="ffn"),
    "transformer": dict(arch="transformer"),
    "rnn-tied": dict(arch="rnn", tie_weights=True), "lstm-tied": dict(arch="lstm", tie_weights=True),
    "gru-tied": dict(arch="gru", tie_weights=True), "ffn-tied": dict(arch="ffn", tie_weights=True),
    "transformer-tied": dict(arch="transformer", tie_weights=True),
    "lstm-tied-projected": dict(arch="lstm", tie_weights=True, hidden_size=12),      # H != E: the projection
    "transformer-pre-nobias": dict(arch="transformer", norm_position="pre", bias=False),
    "transformer-pre-nobias-tied": dict(arch="transformer", norm_position="pre", bias=False, tie_weights=True),
}

SEQ2SEQ_VARIANTS = {
    "rnn": dict(arch="rnn"), "rnn-dot": dict(arch="rnn", attention="dot"),
    "lstm-bi-dot-tied": dict(arch="lstm", attention="dot", bidirectional=True, tie_embeddings=True),
    "gru-hidden-readout": dict(arch="gru", attention="bilinear", readout="hidden"),
    "transformer": dict(arch="transformer"), "transformer-tied": dict(arch="transformer", tie_embeddings=True),
    "lm": dict(arch="lm"), "lm-all-tokens": dict(arch="lm", lm_loss="all"),
}


def lm_model(options: dict):
    torch.manual_seed(0)
    config = dict(vocab_size=V, embedding_size=8, hidden_size=8, num_layers=2, dropout=0.1, num_heads=2,
                  context=6 if options["arch"] == "transformer" else 0)
    return build_lm(LMConfig(**{**config, **options}))


def lm_batch() -> Batch:
    """Three rows of 6 tokens, ragged: the last two rows end in padding (targets PAD)."""
    g = torch.Generator().manual_seed(1)
    inputs, targets = torch.randint(5, V, (3, 6), generator=g), torch.randint(5, V, (3, 6), generator=g)
    targets[1, 4:] = PAD
    targets[2, 2:] = PAD
    return Batch(inputs, targets)


@pytest.fixture
def fused_calls(monkeypatch) -> list:
    """The (N, D) shapes of the hidden states every call of linear_cross_entropy by the tasks received."""
    calls = []

    def counted(hidden, *args, **kwargs):
        calls.append(tuple(hidden.shape))
        return linear_cross_entropy(hidden, *args, **kwargs)

    monkeypatch.setattr(output_loss, "linear_cross_entropy", counted)
    return calls


def loss_and_gradients(task, model, batch, state, seed: int = 3):
    """The task's (sum, count, state) and every parameter's gradient after sum.backward(), from `seed`
    (dropout draws the same masks on both paths)."""
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    loss_sum, count, state = task.loss(model, batch, state)
    loss_sum.backward()
    return loss_sum.detach(), int(count), state, {n: p.grad.clone() for n, p in model.named_parameters()}


def assert_same(fused, plain):
    (loss, count, _, grads), (want_loss, want_count, _, want_grads) = fused, plain
    assert count == want_count
    torch.testing.assert_close(loss, want_loss, rtol=1e-5, atol=1e-5)
    assert grads.keys() == want_grads.keys()
    for name, grad in grads.items():
        torch.testing.assert_close(grad, want_grads[name], rtol=1e-5, atol=1e-5, msg=name)


@pytest.mark.parametrize("options", LM_VARIANTS.values(), ids=LM_VARIANTS.keys())
def test_fused_training_lm_loss_and_gradients_equal_the_plain_path(options, fused_calls):
    model = lm_model(options).train()
    batch = lm_batch()
    ids = torch.randint(5, V, (100,))
    tasks = {setting: LanguageModelingTask(model, ids, ids, None, batch_size=3, seq_len=6, eval_batch_size=3,
                                           eval_stride=0, seed=0, fused_output=setting) for setting in ("on", "off")}
    assert tasks["on"].fused_output and not tasks["off"].fused_output
    state = tasks["on"].initial_state(model, 3, "cpu")
    fused = loss_and_gradients(tasks["on"], model, batch, state)
    plain = loss_and_gradients(tasks["off"], model, batch, state)
    assert fused_calls == [(18, model.output.weight_and_bias()[0].size(1))]      # once, the fused path only
    assert_same(fused, plain)
    assert fused[1] == batch.num_tokens == 12
    if state is not None:                      # the carried state is the model's either way
        torch.testing.assert_close(fused[2], plain[2], rtol=0, atol=0)


def tiny_pairs(joint: bool) -> tuple[PairVocabulary, list]:
    words = WordTokenizer()
    texts = [("a b c", "x y"), ("b c", "y z w"), ("c a a b d", "w"), ("d", "z z x x")]
    vocab = Vocab.build(Counter(t for s, g in texts for t in f"{s} {g}".split()))
    vocabulary = PairVocabulary(words, words, vocab, vocab, joint)
    return vocabulary, vocabulary.encode([Pair(s, t, i) for i, (s, t) in enumerate(texts, 1)])


@pytest.mark.parametrize("options", SEQ2SEQ_VARIANTS.values(), ids=SEQ2SEQ_VARIANTS.keys())
def test_fused_training_seq2seq_loss_and_gradients_equal_the_plain_path(options, fused_calls):
    """Label smoothing 0.1, pairs of different lengths (padded sources and targets); the lm scores the
    target only, or every next token (lm_loss all)."""
    vocabulary, items = tiny_pairs(options["arch"] == "lm")
    size = len(vocabulary.target_vocab)
    torch.manual_seed(0)
    model = build_model(Seq2SeqConfig(**{**dict(embedding_size=8, hidden_size=8, num_layers=2, num_heads=2,
                                                 ff_size=16, max_positions=32, dropout=0.1, label_smoothing=0.1,
                                                 source_vocab_size=size, target_vocab_size=size), **options}))
    all_tokens = options.get("lm_loss") == "all"
    tasks = {setting: Seq2SeqTask(vocabulary, items, items, None, batch_size=4, eval_batch_size=4, seed=1,
                                  label_smoothing=0.1, lm_all_tokens=all_tokens, fused_output=setting)
             for setting in ("on", "off")}
    batch = vocabulary.collate(items)
    assert (batch.target_out == PAD).any()                                  # ragged: some positions padded
    fused = loss_and_gradients(tasks["on"], model.train(), batch, None)
    plain = loss_and_gradients(tasks["off"], model, batch, None)
    assert fused_calls == [(batch.target_in.numel(), model.output.weight_and_bias()[0].size(1))]
    assert_same(fused, plain)
    assert fused[1] == tasks["on"].count(batch)


def all_models():
    for name, options in LM_VARIANTS.items():
        yield f"lm-{name}", lm_model(options), lambda model, output: model(lm_batch().inputs, output=output)[0]
    for name, options in SEQ2SEQ_VARIANTS.items():
        vocabulary, items = tiny_pairs(options["arch"] == "lm")
        size = len(vocabulary.target_vocab)
        batch = vocabulary.collate(items)
        model = build_model(Seq2SeqConfig(**{**dict(embedding_size=8, hidden_size=8, num_layers=1, num_heads=2,
                                                     ff_size=16, max_positions=32, source_vocab_size=size,
                                                     target_vocab_size=size), **options}))
        yield f"seq2seq-{name}", model, lambda model, output, batch=batch: model(
            batch.source, batch.source_lengths, batch.target_in, output=output)


@pytest.mark.parametrize("name, model, run", list(all_models()), ids=lambda x: x if isinstance(x, str) else "")
def test_fused_training_hidden_states_and_the_output_weights_give_the_logits(name, model, run):
    """forward(..., output="hidden") (B, T, D) times `model.output.weight_and_bias()` is forward's logits,
    bit for bit (eval mode: no dropout)."""
    model.eval()
    with torch.no_grad():
        logits, hidden = run(model, "logits"), run(model, "hidden")
    weight, bias = model.output.weight_and_bias()
    assert hidden.shape == (*logits.shape[:-1], weight.size(1)) and logits.size(-1) == weight.size(0)
    assert torch.equal(F.linear(hidden, weight, bias), logits)
    assert output_layer(model) is model.output
    with pytest.raises(SeqlabError, match="logits or hidden"):
        run(model, "probabilities")


def test_fused_training_output_layer_is_found_behind_the_trainers_wrappers():
    model = lm_model(dict(arch="gru"))

    class Wrapper(torch.nn.Module):               # stands for torch.compile's OptimizedModule
        def __init__(self, inner):
            super().__init__()
            self._orig_mod = inner

    assert output_layer(Wrapper(model)) is model.output


def test_fused_training_auto_decides_by_should_fuse_and_says_so():
    for rows, vocab in ((700, 33_278), (700, 200_000), (20_000, 200_000), (10, 50)):
        fused, note = choose_fused_output("auto", rows, vocab)
        assert fused == should_fuse(rows, vocab)
        assert note.startswith(f"output layer: {'fused' if fused else 'plain'}") and f"{vocab:,} words" in note
    assert choose_fused_output("on", 10, 200_000)[0] and not choose_fused_output("off", 700, 33_278)[0]
    assert "--fused-output off" in choose_fused_output("off", 700, 33_278)[1]


@pytest.mark.skipif(not cpu_supports_bf16(), reason="this CPU has no bfloat16 kernels")
@pytest.mark.parametrize("arch", ["transformer", "lstm"])
def test_fused_training_under_bf16_autocast_matches_the_plain_path(arch):
    """Under bf16 autocast the output layer's matmuls run in bf16 on both paths (the fused one casts the
    states, W and b as autocast does), the softmax in fp32: the same loss and gradients to bf16 rounding,
    and fp32 gradients on the fp32 parameters."""
    model = lm_model(dict(arch=arch, tie_weights=True, dropout=0.0))
    batch = lm_batch()
    ids = torch.randint(5, V, (100,))
    results = {}
    for setting in ("on", "off"):
        task = LanguageModelingTask(model, ids, ids, None, batch_size=3, seq_len=6, eval_batch_size=3,
                                    eval_stride=0, seed=0, fused_output=setting)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            model.zero_grad(set_to_none=True)
            loss_sum, count, _ = task.loss(model, batch, task.initial_state(model, 3, "cpu"))
        assert loss_sum.dtype == torch.float32
        loss_sum.backward()
        results[setting] = loss_sum.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}
    (loss, grads), (want_loss, want_grads) = results["on"], results["off"]
    torch.testing.assert_close(loss, want_loss, rtol=1e-2, atol=1e-2)
    for name, grad in grads.items():
        assert grad.dtype == torch.float32, name
        scale = float(want_grads[name].abs().max()) + 1e-6
        assert float((grad - want_grads[name]).abs().max()) <= 0.05 * scale, name


# ------------------------------------------------------------------------------ the train option

LM_ARGS = ["train", "lm", "--train", FIXTURES / "shakespeare_train.txt", "--valid", FIXTURES / "shakespeare_valid.txt",
           "--tokenizer", "word", "--arch", "lstm", "--embedding-size", "16", "--hidden-size", "16", "--layers", "1",
           "--tied", "--batch-size", "4", "--seq-len", "8", "--max-steps", "1", "--eval-every", "1",
           "--optimizer", "sgd", "--lr", "1", "--no-progress"]


def test_fused_training_one_step_on_and_off_give_the_same_weights(tmp_path, capsys):
    """`seqlab train lm` one SGD step (dropout on, same seed) through each path: the same weights; config.json
    records the option; the startup line says which path the run took."""
    weights, lines = {}, {}
    for setting in ("on", "off"):
        run = tmp_path / setting
        assert main([str(a) for a in [*LM_ARGS, "--fused-output", setting, "--output", run]]) == 0
        lines[setting] = next(line for line in capsys.readouterr().err.splitlines() if "output layer:" in line)
        assert json.loads((run / "config.json").read_text())["train"]["fused_output"] == setting
        weights[setting], _ = load_tensors(run / "model.safetensors")
    assert "output layer: fused" in lines["on"] and "--fused-output on" in lines["on"]
    assert "output layer: plain" in lines["off"]
    assert weights["on"].keys() == weights["off"].keys()
    for name, tensor in weights["on"].items():
        torch.testing.assert_close(tensor, weights["off"][name], rtol=1e-5, atol=1e-5, msg=name)


def test_fused_training_old_runs_without_the_option_load_as_auto():
    for run in ("lm-bpe", "seq2seq-bpe"):
        config_file = FIXTURES / "old_runs" / run / "config.json"
        assert "fused_output" not in json.loads(config_file.read_text())["train"]
        assert seqlab.load(FIXTURES / "old_runs" / run).config.train.fused_output == "auto"
    assert read_run_config(FIXTURES / "old_runs" / "lm-bpe").train.fused_output == "auto"
