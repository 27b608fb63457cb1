"""The shared encoders (seqlab.nn.encoders): models written before them (under the old parameter names)
load and score as they did (to 1e-5: the scores were recorded on another CPU), a fresh build under a seed
draws the same weights, the bidirectional combinations, the final vector of Fig. 9.12, the transformer's
masks and its position limit."""

import json
from pathlib import Path

import pytest
import torch

from seqlab.errors import SeqlabError
from seqlab.families.classifier.model import Classifier, ClassifierConfig
from seqlab.families.seq2seq.model import Seq2SeqConfig, build_model
from seqlab.families.tagger.model import Tagger, TaggerConfig
from seqlab.nn.encoders import RecurrentEncoder, TransformerEncoder
from seqlab.nn.pooling import final_states
from seqlab.training.checkpoint import load_model_tensors, load_tensors, model_tensors, renamed

OLD_MODELS = Path(__file__).parent / "fixtures" / "old_models"
FIXTURES = sorted(OLD_MODELS.glob("*.safetensors"))
BUILD = {"tagger": lambda c: Tagger(TaggerConfig(**c)), "classifier": lambda c: Classifier(ClassifierConfig(**c)),
         "seq2seq": lambda c: build_model(Seq2SeqConfig(**c))}


def old_model(path: Path):
    """The fixture's weights (old names), the batch, the scores of commit aaf12cf, and a fresh model."""
    tensors, metadata = load_tensors(path)
    checks = {name[len("check."):]: t for name, t in tensors.items() if name.startswith("check.")}
    weights = {name: t for name, t in tensors.items() if not name.startswith("check.")}
    torch.manual_seed(0)
    model = BUILD[metadata["kind"]](json.loads(metadata["config"])).eval()
    return model, weights, checks


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_encoders_old_parameter_names_load_and_score_identically(path):
    model, weights, checks = old_model(path)
    assert set(weights) - set(model.state_dict()), "the fixture should hold at least one old name"
    load_model_tensors(model, weights, path)
    order = ("source", "lengths", "target_in") if "source" in checks else ("words", "lengths", "chars")
    inputs = [checks[name] for name in order if name in checks]
    with torch.no_grad():
        # the scores were recorded on another CPU: its kernels may round differently (measured: at most 1e-6 on
        # outputs of size ~1; a weight loaded under the wrong name changes them by ~1e-1)
        torch.testing.assert_close(model(*inputs), checks["output"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_encoders_a_seeded_build_draws_the_old_weights_in_the_old_order(path):
    model, weights, _ = old_model(path)
    today = renamed(model, weights)
    assert set(today) == set(model_tensors(model))
    embeddings = ("source_embedding.weight", "target_embedding.weight")
    for name, t in model_tensors(model).items():
        if path.stem.startswith("seq2seq-transformer") and name in embeddings:
            # commit aaf12cf drew the two embeddings in the order of a set of modules (memory addresses)
            assert any(torch.equal(t, today[old]) for old in embeddings), name
        else:
            assert torch.equal(t, today[name]), name


def test_encoders_renamed_maps_a_prefix_onto_a_longer_one_once():
    """encoder.0. -> encoder.blocks.0.; a name that exists today is left alone, even under an old prefix."""
    model, _, _ = old_model(OLD_MODELS / "seq2seq-transformer-pre.safetensors")
    names = renamed(model, {"encoder.0.norm1.weight": 1, "encoder.blocks.1.norm1.weight": 2,
                            "encoder_norm.bias": 3, "decoder_norm.bias": 4})
    assert names == {"encoder.blocks.0.norm1.weight": 1, "encoder.blocks.1.norm1.weight": 2,
                     "encoder.final_norm.bias": 3, "decoder_norm.bias": 4}


def ragged(width: int = 5):
    torch.manual_seed(3)
    lengths = torch.tensor([6, 2, 4])
    x = torch.randn(3, 6, width)
    return x, lengths


@pytest.mark.parametrize("how", ["concat", "sum", "product", "mean"])
@pytest.mark.parametrize("cell", ["rnn", "lstm", "gru"])
def test_encoders_recurrent_combines_both_directions(cell, how):
    """SLP 9.2.6: the states at t are [h^f ; h^b], h^f + h^b, h^f * h^b or their mean; the final vector
    is the forward state at the last real token and the backward state at the first (Fig. 9.12)."""
    torch.manual_seed(0)
    encoder = RecurrentEncoder(cell, 5, 7, num_layers=2, bidirectional=True, combine=how).eval()
    x, lengths = ragged()
    h, final = encoder(x, lengths)
    raw, _ = encoder.rnn(x, lengths=lengths)                                   # (B, T, 2H)
    forward, backward = raw.chunk(2, dim=-1)
    expected = {"concat": raw, "sum": forward + backward, "product": forward * backward,
                "mean": (forward + backward) / 2}[how]
    assert h.shape == (3, 6, encoder.output_size) and encoder.output_size == (14 if how == "concat" else 7)
    assert torch.equal(h, expected)
    assert torch.equal(encoder.final_vector(final), final_states(raw, lengths, how))


def test_encoders_recurrent_forward_only_final_vector_is_the_last_real_state():
    torch.manual_seed(0)
    encoder = RecurrentEncoder("gru", 5, 7, impl="textbook").eval()
    x, lengths = ragged()
    h, final = encoder(x, lengths)
    assert encoder.output_size == 7
    assert torch.equal(encoder.final_vector(final), h[torch.arange(3), lengths - 1])
    full, _ = encoder(x)                                                       # no lengths: every row is T long
    torch.testing.assert_close(full[0], h[0])


@pytest.mark.parametrize("norm_position", ["pre", "post"])
def test_encoders_transformer_masks_padding_and_projects(norm_position):
    torch.manual_seed(0)
    encoder = TransformerEncoder(8, 2, 2, 16, norm_position=norm_position, input_size=5, max_positions=6).eval()
    assert isinstance(encoder.final_norm, torch.nn.LayerNorm) == (norm_position == "pre")
    x, lengths = ragged()
    h = encoder(x, lengths)                                                    # (B, T, D)
    assert h.shape == (3, 6, 8)
    mask = torch.arange(6)[None, :] < lengths[:, None]
    assert torch.equal(encoder(x, mask=mask), h)
    for b in range(3):                                                         # padding changes no real state
        n = int(lengths[b])
        torch.testing.assert_close(encoder(x[b:b + 1, :n])[0], h[b, :n], atol=1e-5, rtol=1e-4)
    with pytest.raises(SeqlabError, match="7 positions are more than this transformer encoder's 6"):
        encoder(torch.randn(1, 7, 5))


def test_encoders_transformer_without_positions_or_projection_is_the_blocks_alone():
    torch.manual_seed(0)
    encoder = TransformerEncoder(8, 1, 2, 16, positions=None, max_positions=2).eval()
    assert encoder.positions is None and isinstance(encoder.project, torch.nn.Identity)
    x = torch.randn(2, 5, 8)                                                   # longer than max_positions: no table
    expected = encoder.final_norm(encoder.blocks[0](x))
    assert torch.equal(encoder(x), expected)


def test_encoders_transformer_seq2seq_seeded_builds_are_identical():
    """The two embeddings are drawn source first (they were drawn in the order of a set of modules)."""
    config = Seq2SeqConfig(arch="transformer", embedding_size=16, num_layers=1, num_heads=2, ff_size=32,
                           source_vocab_size=23, target_vocab_size=19)
    builds = []
    for _ in range(4):
        torch.manual_seed(0)
        builds.append(build_model(config).state_dict())
    for build in builds[1:]:
        assert all(torch.equal(build[name], builds[0][name]) for name in build)
