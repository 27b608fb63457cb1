"""The tagger model: shapes for every encoder, output and character feature; padding never changes a
real token's scores; every encoder overfits a few sentences with softmax and with the CRF."""

import pytest
import torch
import torch.nn.functional as F

from seqlab.errors import SeqlabError
from seqlab.families.tagger.model import ENCODERS, Tagger, TaggerConfig

V, K, C = 30, 5, 12


def tiny(encoder, **overrides):
    settings = {"encoder": encoder, "vocab_size": V, "num_labels": K, "char_vocab_size": C, "embedding_size": 8,
                "hidden_size": 8, "num_heads": 2, "dropout": 0.0, "char_features": "none", "char_embedding_size": 4,
                "char_hidden_size": 4, "window": 1, **overrides}
    torch.manual_seed(0)
    return Tagger(TaggerConfig(**settings))


def ragged_batch():
    """Three sentences of 5, 3 and 1 words, right-padded; each word 1-4 characters."""
    torch.manual_seed(1)
    lengths = torch.tensor([5, 3, 1])
    mask = torch.arange(5)[None, :] < lengths[:, None]
    words = torch.randint(5, V, (3, 5)) * mask
    chars = torch.randint(5, C, (3, 5, 4))
    chars = chars * (torch.arange(4)[None, None, :] < torch.randint(1, 5, (3, 5, 1))) * mask[:, :, None]
    return words, lengths, chars


@pytest.mark.parametrize("encoder", ENCODERS)
@pytest.mark.parametrize("char_features", ["none", "lstm", "cnn"])
def test_tagger_shapes(encoder, char_features):
    model = tiny(encoder, char_features=char_features)
    words, lengths, chars = ragged_batch()
    assert model(words, lengths, chars).shape == (3, 5, K)


@pytest.mark.parametrize("how, width", [("concat", 16), ("sum", 8), ("product", 8), ("mean", 8)])
def test_tagger_bidirectional_combinations(how, width):
    model = tiny("gru", combine=how)
    assert model.output.in_features == width
    words, lengths, _ = ragged_batch()
    assert model(words, lengths).shape == (3, 5, K)


@pytest.mark.parametrize("encoder", ENCODERS)
@pytest.mark.parametrize("char_features", ["none", "lstm", "cnn"])
def test_tagger_padding_never_changes_a_real_token(encoder, char_features):
    model = tiny(encoder, char_features=char_features, num_layers=2).double().eval()
    words, lengths, chars = ragged_batch()
    scores = model(words, lengths, chars)
    for b, n in enumerate(lengths.tolist()):
        alone = model(words[b:b + 1, :n], lengths[b:b + 1], chars[b:b + 1, :n])
        torch.testing.assert_close(scores[b:b + 1, :n], alone, rtol=0, atol=1e-10)


SENTENCES = [([5, 6, 7, 8], [0, 1, 2, 0]), ([9, 6, 10], [3, 1, 4]), ([11, 7, 12, 13, 14], [0, 2, 2, 3, 4])]


def fit(model, steps=150):
    lengths = torch.tensor([len(w) for w, _ in SENTENCES])
    T = int(lengths.max())
    words = torch.zeros(len(SENTENCES), T, dtype=torch.long)
    tags = torch.zeros(len(SENTENCES), T, dtype=torch.long)
    for b, (w, t) in enumerate(SENTENCES):
        words[b, :len(w)], tags[b, :len(t)] = torch.tensor(w), torch.tensor(t)
    chars = (words[:, :, None] + torch.arange(2)) % C * (words[:, :, None] > 0)
    mask = torch.arange(T)[None, :] < lengths[:, None]
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(steps):
        optimizer.zero_grad()
        scores = model(words, lengths, chars)
        if model.crf is not None:
            loss = model.crf.nll(scores, tags, mask).sum() / mask.sum()
        else:
            loss = F.cross_entropy(scores[mask], tags[mask])
        loss.backward()
        optimizer.step()
    model.eval()
    scores = model(words, lengths, chars)
    predicted = model.crf.decode(scores, mask) if model.crf is not None else scores.argmax(-1)
    return bool((predicted[mask] == tags[mask]).all())


@pytest.mark.parametrize("encoder", ENCODERS)
@pytest.mark.parametrize("crf", [False, True])
def test_tagger_overfits_a_few_sentences(encoder, crf):
    assert fit(tiny(encoder, crf=crf, char_features="cnn" if encoder == "lstm" else "none"))


def test_tagger_default_config_has_character_features():
    """A tagger trained with the defaults reads each word's characters (a BiLSTM over them, as every shipped
    recipe): without them unseen words have only the <unk> embedding. `none` still turns them off."""
    assert TaggerConfig().char_features == "lstm"
    torch.manual_seed(0)
    model = Tagger(TaggerConfig(vocab_size=V, num_labels=K, char_vocab_size=C))
    assert model.chars is not None
    words, lengths, chars = ragged_batch()
    with_chars = model(words, lengths, chars)
    other = chars.clone()
    other[0, 0, 0] = (other[0, 0, 0] + 1) % (C - 5) + 5                       # one character of one word changed
    assert not torch.equal(model(words, lengths, other)[0, 0], with_chars[0, 0])
    assert tiny("lstm", char_features="none").chars is None


def test_tagger_bad_configs():
    with pytest.raises(SeqlabError, match="--encoder"):
        TaggerConfig(encoder="cnn")
    with pytest.raises(SeqlabError, match="multiple of --heads"):
        TaggerConfig(encoder="transformer", hidden_size=10, num_heads=4)
    with pytest.raises(SeqlabError, match="character features need"):
        Tagger(TaggerConfig(vocab_size=V, num_labels=K, char_features="lstm"))


def test_tagger_sentences_longer_than_any_in_training():
    words = torch.randint(5, V, (1, 40))
    for encoder in ("lstm", "window"):                          # recurrent and window taggers take any length
        assert tiny(encoder)(words, torch.tensor([40])).shape == (1, 40, K)
    with pytest.raises(SeqlabError, match="longer than this transformer tagger's 16 positions"):
        tiny("transformer", max_positions=16)(words, torch.tensor([40]))
