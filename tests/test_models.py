"""Every language model: shapes, incremental decoding = full pass, overfitting, causality, tying.

Tiny configurations (vocab 30, width 16-24, batch 3), float64 where values are compared.
"""

from __future__ import annotations

import math

import pytest
import torch

from conftest import ARCHS
from seqlab.data.vocab import EOS, PAD
from seqlab.decoding.search import SamplingOptions, blocked_tokens, generate_ids
from seqlab.errors import SeqlabError
from seqlab.families.lm.model import LMConfig, build_lm
from seqlab.families.lm.task import token_loss
from seqlab.nn.recurrent import dropout
from seqlab.nn.transformer import PositionalEmbedding

V, B, T = 30, 3, 11
LENGTHS = (11, 8, 5)                  # a ragged batch: rows padded at the end with PAD


def config(arch: str, **overrides) -> LMConfig:
    options = {"arch": arch, "vocab_size": V, "embedding_size": 16, "hidden_size": 24, "num_layers": 2,
               "dropout": 0.0, "num_heads": 2, "context": 16 if arch == "transformer" else 0}
    options.update(overrides)
    return LMConfig(**options)


def model_for(arch: str, seed: int = 0, **overrides):
    torch.manual_seed(seed)
    return build_lm(config(arch, **overrides)).double().eval()


def tokens(seed: int = 1, lengths=LENGTHS) -> torch.Tensor:
    """(B, T) real tokens (never PAD), each row padded after its length."""
    g = torch.Generator().manual_seed(seed)
    batch = torch.randint(PAD + 1, V, (len(lengths), max(lengths)), generator=g)
    for row, length in enumerate(lengths):
        batch[row, length:] = PAD
    return batch


def full_pass(model, batch: torch.Tensor) -> torch.Tensor:
    state = None if model.context_length else model.init_state(batch.size(0))
    with torch.no_grad():
        return model(batch, state)[0]


def chunked(model, batch: torch.Tensor, sizes) -> torch.Tensor:
    """Logits from `model` over consecutive chunks of `sizes` tokens, the state carried."""
    assert sum(sizes) == batch.size(1)
    state, outputs, start = model.init_state(batch.size(0)), [], 0
    for size in sizes:
        with torch.no_grad():
            logits, state = model(batch[:, start:start + size], state)
        assert logits.shape == (batch.size(0), size, V)
        outputs.append(logits)
        start += size
    return torch.cat(outputs, dim=1)


@pytest.mark.parametrize("arch", ARCHS)
def test_models_logits_shape_and_padding_invariance(arch):
    model = model_for(arch)
    batch = tokens()
    logits = full_pass(model, batch)
    assert logits.shape == (B, T, V)
    assert logits.dtype == torch.float64 and torch.isfinite(logits).all()
    # a row's real positions do not depend on its trailing padding nor on the other rows
    for row, length in enumerate(LENGTHS):
        alone = full_pass(model, batch[row:row + 1, :length])
        torch.testing.assert_close(logits[row:row + 1, :length], alone, rtol=0, atol=1e-12)


@pytest.mark.parametrize("arch", ARCHS)
def test_models_step_by_token_equals_full_pass(arch):
    model = model_for(arch)
    batch = tokens()
    expected = full_pass(model, batch)
    torch.testing.assert_close(chunked(model, batch, [1] * T), expected, rtol=0, atol=1e-10)


@pytest.mark.parametrize("sizes", [(3, 1, 5, 2), (1, 6, 4), (T,)], ids=["3+1+5+2", "1+6+4", "all"])
@pytest.mark.parametrize("arch", ARCHS)
def test_models_step_by_uneven_chunks_equals_full_pass(arch, sizes):
    model = model_for(arch)
    batch = tokens()
    torch.testing.assert_close(chunked(model, batch, sizes), full_pass(model, batch), rtol=0, atol=1e-10)


@pytest.mark.parametrize("arch", ARCHS)
def test_models_causality_future_token_never_changes_past_logits(arch):
    model = model_for(arch)
    batch = tokens(lengths=(T, T, T))
    logits = full_pass(model, batch)
    for t in range(T - 1):
        changed = batch.clone()
        changed[:, t + 1] = (changed[:, t + 1] - PAD) % (V - 1) + PAD + 1     # another real token
        assert (changed[:, t + 1] != batch[:, t + 1]).all()
        new = full_pass(model, changed)
        torch.testing.assert_close(new[:, :t + 1], logits[:, :t + 1], rtol=0, atol=1e-12)
        assert (new[:, t + 1] - logits[:, t + 1]).abs().max() > 1e-6      # the model does read it


@pytest.mark.parametrize("arch", ARCHS)
def test_models_overfit_tiny_corpus(arch):
    """A fixed random sequence of 40 tokens, repeated as a batch of 3, is learned by heart."""
    torch.manual_seed(0)
    model = build_lm(LMConfig(arch=arch, vocab_size=20, embedding_size=16, hidden_size=32, num_layers=1,
                              dropout=0.0, num_heads=2, context=40 if arch == "transformer" else 0))
    g = torch.Generator().manual_seed(1234)
    batch = torch.randint(PAD + 1, 20, (41,), generator=g).repeat(3, 1)     # (3, 41)
    inputs, targets = batch[:, :-1], batch[:, 1:]                           # (3, 40)

    def mean_loss():
        state = None if model.context_length else model.init_state(3)
        loss_sum, count = token_loss(model(inputs, state)[0], targets)
        assert int(count) == 120
        return loss_sum / count

    start = mean_loss().item()
    assert start > 2.0                                   # about ln 20 = 3.0 before training
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(300):
        loss = mean_loss()
        if loss.item() < 0.05:
            break
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        assert mean_loss().item() < 0.1


TIE_CASES = [(arch, hidden) for arch in ARCHS for hidden in (16, 24) if arch != "transformer" or hidden == 16]


@pytest.mark.parametrize(("arch", "hidden_size"), TIE_CASES,
                         ids=[f"{arch}-{'H=E' if h == 16 else 'H!=E'}" for arch, h in TIE_CASES])
def test_models_tied_weights_share_the_embedding(arch, hidden_size):
    """The transformer's width is its embedding size: it never needs the projection."""
    tied = model_for(arch, tie_weights=True, hidden_size=hidden_size)
    untied = model_for(arch, tie_weights=False, hidden_size=hidden_size)
    E = 16
    H = E if arch == "transformer" else hidden_size
    decoder = tied.output.decoder
    assert decoder.weight is tied.embedding.weight
    assert decoder.weight.data_ptr() == tied.embedding.weight.data_ptr()
    assert untied.output.decoder.weight is not untied.embedding.weight
    assert (tied.output.projection is not None) == (H != E)
    assert untied.output.projection is None
    if H != E:
        assert tied.output.projection.weight.shape == (E, H)
    # untied: a (V, H) output matrix; tied: the embedding, plus an (E, H) projection when H != E
    assert untied.num_parameters() - tied.num_parameters() == V * H - (E * H if H != E else 0)

    # the decoder reads the embedding it shares, before and after a training step
    batch = tokens(lengths=(T, T, T))
    with torch.no_grad():
        tied.embedding.weight[PAD + 1] += 1.0
    assert torch.equal(decoder.weight[PAD + 1], tied.embedding.weight[PAD + 1])
    tied.train()
    optimizer = torch.optim.SGD(tied.parameters(), lr=0.1)
    state = None if tied.context_length else tied.init_state(B)
    loss_sum, count = token_loss(tied(batch[:, :-1], state)[0], batch[:, 1:])
    (loss_sum / count).backward()
    optimizer.step()
    assert decoder.weight is tied.embedding.weight


@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_models_transformer_variants_build_run_and_decode(norm_position, positions):
    model = model_for("transformer", norm_position=norm_position, positions=positions)
    assert isinstance(model.final_norm, torch.nn.LayerNorm) == (norm_position == "pre")
    assert all(block.pre_norm == (norm_position == "pre") for block in model.blocks)
    batch = tokens()
    logits = full_pass(model, batch)
    assert logits.shape == (B, T, V) and torch.isfinite(logits).all()
    torch.testing.assert_close(chunked(model, batch, [4, 1, 6]), logits, rtol=0, atol=1e-10)
    # positions matter: the same token at two positions gets different logits
    same = torch.full((1, 4), 7)
    out = full_pass(model, same)
    assert (out[0, 0] - out[0, 3]).abs().max() > 1e-6


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_models_transformer_without_bias_has_no_bias_and_decodes_exactly(norm_position):
    """--no-bias (GPT-style): no additive bias anywhere; still causal, cached decoding = full pass."""
    model = model_for("transformer", norm_position=norm_position, bias=False, tie_weights=True)
    with_bias = model_for("transformer", norm_position=norm_position, tie_weights=True)
    assert not [name for name, _ in model.named_parameters() if name.endswith("bias")]
    assert [name for name, _ in with_bias.named_parameters() if name.endswith("bias")]
    batch = tokens()
    logits = full_pass(model, batch)
    torch.testing.assert_close(chunked(model, batch, [3, 1, 7]), logits, rtol=0, atol=1e-10)
    changed = batch.clone()
    changed[:, 5] = (changed[:, 5] + 1) % V
    torch.testing.assert_close(full_pass(model, changed)[:, :5], logits[:, :5], rtol=0, atol=0)


def test_models_transformer_sinusoidal_positions_follow_vaswani():
    d = 6
    table = PositionalEmbedding(10, d, "sinusoidal")(torch.arange(10))      # (10, d)
    for pos in range(10):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_models_transformer_textbook_attention_equals_sdpa(norm_position):
    sdpa = model_for("transformer", attention_impl="sdpa", norm_position=norm_position)
    textbook = model_for("transformer", seed=5, attention_impl="textbook", norm_position=norm_position)
    batch = tokens()
    assert (full_pass(sdpa, batch) - full_pass(textbook, batch)).abs().max() > 1e-3   # seeds differ
    textbook.load_state_dict(sdpa.state_dict())
    assert all(block.attention.impl == "textbook" for block in textbook.blocks)
    expected = full_pass(sdpa, batch)
    torch.testing.assert_close(full_pass(textbook, batch), expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(chunked(textbook, batch, [3, 1, 7]), expected, rtol=0, atol=1e-10)


def test_models_transformer_refuses_past_context():
    model = model_for("transformer", context=8)
    with pytest.raises(SeqlabError, match="at most 8 tokens"):
        full_pass(model, tokens(lengths=(9, 9, 9)))
    state = model.init_state(1)
    model(torch.full((1, 6), 7), state)
    with pytest.raises(SeqlabError, match="at most 8 tokens; 9"):
        model(torch.full((1, 3), 7), state)


@pytest.mark.parametrize("arch", ARCHS)
def test_models_greedy_generation_equals_argmax_of_full_pass(arch):
    """`generate_ids` with its carried state picks what a fresh full pass over the history picks."""
    model = model_for(arch)
    context = [EOS, 9, 12, 5]
    options = SamplingOptions(max_tokens=8, greedy=True, stop_at_eos=False)
    generated = list(generate_ids(model, context, options))
    history = list(context)
    for token in generated:
        logits = full_pass(model, torch.tensor([history]))[0, -1].clone()
        logits[list(blocked_tokens(model).ids)] = float("-inf")      # <pad>, <s>, <sep>, <unk>
        assert token == int(logits.argmax())
        history.append(token)
    assert len(generated) == 8


def test_models_transformer_generation_past_context_re_encodes_recent_half():
    """Past its context the cache is rebuilt from the last context/2 tokens; each pick still equals
    the argmax of a full pass over the tokens the cache holds."""
    model = model_for("transformer", context=8)
    context = [EOS, 9, 12, 5, 17, 6]
    generated = list(generate_ids(model, context, SamplingOptions(max_tokens=20, greedy=True,
                                                                  stop_at_eos=False)))
    assert len(generated) == 20
    history, window = list(context), list(context)
    for token in generated:
        logits = full_pass(model, torch.tensor([window]))[0, -1].clone()
        logits[list(blocked_tokens(model).ids)] = float("-inf")      # <pad>, <s>, <sep>, <unk>
        assert token == int(logits.argmax())
        history.append(token)
        window = history[-4:] if len(window) >= 8 else [*window, token]
        assert len(window) <= 8


def test_models_variational_dropout_one_mask_per_sequence():
    torch.manual_seed(0)
    x = torch.rand(B, 9, 200, dtype=torch.float64) + 0.5                    # never zero
    y = dropout(x, 0.4, training=True, variational=True)
    zeroed = y == 0                                                         # (B, T, D)
    assert torch.equal(zeroed, zeroed[:, :1].expand_as(zeroed))           # the same at every time step
    assert not torch.equal(zeroed[0], zeroed[1])                            # each row its own mask
    assert 0.3 < zeroed.double().mean().item() < 0.5
    torch.testing.assert_close(y[~zeroed], x[~zeroed] / 0.6)

    standard = dropout(x, 0.4, training=True, variational=False) == 0
    assert not torch.equal(standard, standard[:, :1].expand_as(standard))
    assert dropout(x, 0.4, training=False, variational=True) is x


def test_models_variational_dropout_in_recurrent_lm():
    """The embedding dropout mask of a variational RNN LM is shared across time steps."""
    torch.manual_seed(0)
    model = build_lm(config("lstm", dropout=0.5, variational_dropout=True)).train()
    seen = []
    model.rnn.register_forward_hook(lambda module, inputs, output: seen.append(inputs[0]))
    model(tokens(lengths=(T, T, T)), None)
    zeroed = seen[0] == 0                                                   # (B, T, E)
    assert zeroed.any()
    assert torch.equal(zeroed, zeroed[:, :1].expand_as(zeroed))


@pytest.mark.parametrize(("overrides", "message"), [
    ({"arch": "cnn"}, "--arch must be one of .*, got .cnn."),
    ({"arch": "transformer", "embedding_size": 10, "num_heads": 4}, "multiple of --heads"),
    ({"dropout": 1.0}, "--dropout must be in"),
    ({"dropout": -0.1}, "--dropout must be in"),
    ({"arch": "gru", "gru_reset": "before", "rnn_impl": "fused"}, "--rnn-impl textbook"),
    ({"arch": "lstm", "activation": "relu"}, "does not apply to --arch lstm"),
    ({"arch": "transformer", "activation": "tanh"}, "does not apply to --arch transformer"),
    ({"arch": "ffn", "activation": "gelu"}, "does not apply to --arch ffn"),
    ({"hidden_size": 0}, "--hidden-size must be at least 1"),
    ({"arch": "lstm", "bias": False}, "--no-bias applies to --arch transformer only"),
], ids=["arch", "heads", "dropout-1", "dropout-neg", "gru-before-fused", "lstm-relu", "transformer-tanh",
        "ffn-gelu", "hidden-0", "lstm-no-bias"])
def test_models_config_validation_errors(overrides, message):
    options = {"arch": "lstm", "vocab_size": V}
    options.update(overrides)
    with pytest.raises(SeqlabError, match=message):
        LMConfig(**options)


def test_models_config_accepts_the_book_gru_on_the_textbook_path():
    model = build_lm(LMConfig(arch="gru", vocab_size=V, embedding_size=8, hidden_size=8,
                              gru_reset="before", rnn_impl="textbook"))
    assert model.rnn.gru_reset == "before" and model.rnn.impl == "textbook"
    assert LMConfig(arch="rnn", activation="relu").activation == "relu"
    with pytest.raises(SeqlabError, match="vocabulary size"):
        build_lm(LMConfig(arch="lstm"))


def test_models_architectures_and_exercises_import_no_family():
    """models/ holds architectures keyed by their name, and the exercises are shared modules: neither imports a
    family (type-checking imports included); a family's model config reaches them only as an argument."""
    import ast
    from pathlib import Path

    source = Path(__file__).resolve().parent.parent / "src" / "seqlab"
    found = []
    for path in sorted([*(source / "models").glob("*.py"), *(source / "exercises").glob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += [f"{path.name}: {name}" for name in names if name.startswith("seqlab.families")]
    assert not found, found
    assert not {"lm.py", "tagger.py", "classifier.py", "seq2seq.py"} & {p.name for p in (source / "models").iterdir()}


@pytest.mark.parametrize("arch", ["ffn", "rnn", "gru", "transformer"])
def test_models_own_configs_build_the_family_configs_weights(arch):
    """An architecture built from its own small config draws the same initial weights, in the same order, as
    from the language-model family's config (build_lm without --init-range)."""
    from seqlab.models.ffn_lm import FeedforwardLM, FeedforwardLMConfig
    from seqlab.models.rnn_lm import RecurrentLM, RecurrentLMConfig
    from seqlab.models.transformer_lm import TransformerLM, TransformerLMConfig

    torch.manual_seed(3)
    family = build_lm(config(arch, init_range=0.0) if arch != "transformer" else config(arch))
    torch.manual_seed(3)
    if arch == "ffn":
        own = FeedforwardLM(FeedforwardLMConfig(vocab_size=V, embedding_size=16, hidden_size=24, dropout=0.0))
    elif arch == "transformer":
        own = TransformerLM(TransformerLMConfig(vocab_size=V, embedding_size=16, num_layers=2, num_heads=2,
                                                ff_size=64, context=16))
    else:
        own = RecurrentLM(RecurrentLMConfig(arch=arch, vocab_size=V, embedding_size=16, hidden_size=24, dropout=0.0))
    ours, theirs = own.state_dict(), family.state_dict()
    assert list(ours) == list(theirs)
    assert all(torch.equal(ours[name], theirs[name]) for name in ours)
    with pytest.raises(SeqlabError, match="must be a multiple of --heads"):
        TransformerLMConfig(vocab_size=V, embedding_size=30, num_layers=1, num_heads=4, ff_size=8, context=8)
