"""The classifier model: shapes for every architecture, padding invariance of every pooling, the
bidirectional final states read at the right ends, the losses of eq. 6.25 / 6.27, and overfitting."""

import math

import pytest
import torch
from sklearn.metrics import f1_score, precision_recall_fscore_support

from seqlab.errors import SeqlabError
from seqlab.families.classifier.model import Classifier, ClassifierConfig
from seqlab.families.classifier.task import class_weights, document_losses, probabilities
from seqlab.metrics import classification_scores
from seqlab.nn.pooling import final_states, max_pool, mean_pool

V, K = 30, 3
VARIANTS = [
    ("pooled", {"pooling": "mean"}), ("pooled", {"pooling": "max"}),
    *((cell, {"bidirectional": bi, "pooling": pooling}) for cell in ("rnn", "lstm", "gru")
      for bi in (False, True) for pooling in ("last", "mean", "max")),
    ("lstm", {"bidirectional": True, "pooling": "last", "combine": "sum", "num_layers": 2}),
    ("gru", {"bidirectional": True, "pooling": "last", "combine": "product"}),
    ("transformer", {"pooling": "mean"}), ("transformer", {"pooling": "cls"}), ("transformer", {"pooling": "max"}),
]


def tiny(arch, **options) -> Classifier:
    torch.manual_seed(0)
    defaults = {"vocab_size": V, "num_labels": K, "embedding_size": 12, "hidden_size": 16, "dropout": 0.0,
                "num_heads": 2, "num_features": 5}
    return Classifier(ClassifierConfig(arch=arch, **{**defaults, **options})).eval()


def ragged():
    lengths = torch.tensor([5, 2, 7])
    words = torch.randint(5, V, (3, 7))
    words[torch.arange(7)[None, :] >= lengths[:, None]] = 0
    return words, lengths


@pytest.mark.parametrize("arch, options", VARIANTS)
def test_classifier_model_shapes_and_padding_invariance(arch, options):
    model = tiny(arch, **options)
    words, lengths = ragged()
    scores = model(words, lengths)
    assert scores.shape == (3, K)
    padded = torch.cat([words, torch.zeros(3, 4, dtype=torch.long)], dim=1)   # four more padding positions
    torch.testing.assert_close(model(padded, lengths), scores, atol=1e-5, rtol=1e-5)
    alone = model(words[1:2, :2], lengths[1:2])                                # the short row on its own
    torch.testing.assert_close(alone, scores[1:2], atol=1e-5, rtol=1e-5)


def test_classifier_model_features_arch_and_sigmoid_output():
    model = tiny("features", num_labels=2, output_layer="sigmoid")
    assert model(None, None, torch.randn(4, 5)).shape == (4, 1)
    with pytest.raises(SeqlabError, match="sigmoid is for two classes"):
        tiny("lstm", output_layer="sigmoid")
    with pytest.raises(SeqlabError, match="--pooling cls: the lstm classifier takes last, mean, max"):
        tiny("lstm", pooling="cls")
    with pytest.raises(SeqlabError, match="--pooling last: the pooled classifier takes mean, max"):
        tiny("pooled", pooling="last")


def test_classifier_model_embedding_std_sets_the_initial_scale():
    wide, small = tiny("pooled", embedding_std=1.0), tiny("pooled", embedding_std=0.01)
    assert 0.8 < wide.embedding.weight[1:].std() < 1.2                         # PyTorch's N(0, 1)
    assert 0.008 < small.embedding.weight[1:].std() < 0.012
    assert small.embedding.weight[0].abs().sum() == 0                           # padding stays zero
    with pytest.raises(SeqlabError, match="--embedding-std must be at least 0"):
        tiny("pooled", embedding_std=-0.01)


def test_classifier_model_default_embedding_std_is_small_for_the_pooled_classifier_only():
    """The default (0) stands for 0.01 with pooled embeddings, which max pooling needs to learn at all, and
    for PyTorch's N(0, 1) with every encoder; the config keeps the value it stands for (config.json)."""
    assert ClassifierConfig(arch="pooled").embedding_std == 0.01
    pooled = tiny("pooled", pooling="max")
    assert pooled.config.embedding_std == 0.01
    assert 0.008 < pooled.embedding.weight[1:].std() < 0.012
    for arch in ("rnn", "lstm", "gru", "transformer", "features"):
        assert ClassifierConfig(arch=arch).embedding_std == 1.0
    torch.manual_seed(0)
    untouched = torch.nn.Embedding(V, 12, padding_idx=0).weight                 # the draws of PyTorch's default
    torch.testing.assert_close(tiny("lstm").embedding.weight, untouched, rtol=0, atol=0)


def test_pooling_ignores_padding_and_matches_the_equations():
    h = torch.randn(2, 4, 3)
    lengths = torch.tensor([4, 2])
    torch.testing.assert_close(mean_pool(h, lengths)[1], h[1, :2].mean(0))      # eq. 6.21
    torch.testing.assert_close(max_pool(h, lengths)[1], h[1, :2].amax(0))       # eq. 6.22
    h2 = h.clone()
    h2[1, 2:] = 1e6                                                             # huge values in the padding
    torch.testing.assert_close(mean_pool(h2, lengths), mean_pool(h, lengths))
    torch.testing.assert_close(max_pool(h2, lengths), max_pool(h, lengths))


def test_bidirectional_final_states_use_the_backward_state_at_position_one():
    """The backward direction finishes at the first token: with padding on the right its final state is
    at position 1, not at the padded end; it equals reading the unpadded document right to left."""
    model = tiny("lstm", bidirectional=True, pooling="last", combine="concat")
    words, lengths = ragged()
    embedded = model.embedding(words)
    h, _ = model.encoder.rnn(embedded, lengths=lengths)                        # (B, T, 2H)
    H = model.config.hidden_size
    vector = final_states(h, lengths, "concat")
    for b in range(3):
        n = int(lengths[b])
        alone, _ = model.encoder.rnn(embedded[b:b + 1, :n])                    # no padding at all
        torch.testing.assert_close(vector[b, :H], alone[0, n - 1, :H])          # forward: at the last token
        torch.testing.assert_close(vector[b, H:], alone[0, 0, H:])              # backward: at the first
        if n < 7:
            assert not torch.allclose(vector[b, H:], h[b, -1, H:])              # not the padded end
    torch.testing.assert_close(model.encode(words, lengths), vector)


def test_classifier_losses_are_equations_6_25_and_6_27():
    labels = torch.tensor([1, 0, 1])
    sigmoid = tiny("pooled", num_labels=2, output_layer="sigmoid")
    z = torch.tensor([[2.0], [-1.0], [0.5]])
    s = torch.sigmoid(z[:, 0])
    expected = -(labels * s.log() + (1 - labels) * (1 - s).log()).sum()        # eq. 6.25, summed
    torch.testing.assert_close(document_losses(sigmoid, z, labels, None), expected)
    torch.testing.assert_close(probabilities(sigmoid, z)[:, 1], s)
    softmax = tiny("pooled")
    z = torch.randn(3, K)
    expected = -torch.log_softmax(z, -1)[torch.arange(3), labels].sum()        # eq. 6.27, summed
    torch.testing.assert_close(document_losses(softmax, z, labels, None), expected)
    weights = torch.tensor([1.0, 3.0, 1.0])
    weighted = -(weights[labels] * torch.log_softmax(z, -1)[torch.arange(3), labels]).sum()
    torch.testing.assert_close(document_losses(softmax, z, labels, weights), weighted)


def test_class_weights_balanced_and_explicit():
    from collections import Counter

    counts = Counter({"a": 30, "b": 10})
    torch.testing.assert_close(class_weights("balanced", ["a", "b"], counts), torch.tensor([40 / 60, 40 / 20]))
    torch.testing.assert_close(class_weights("b=2.5", ["a", "b"], counts), torch.tensor([1.0, 2.5]))
    assert class_weights("none", ["a", "b"], counts) is None
    with pytest.raises(SeqlabError, match="'c' is not a class"):
        class_weights("c=2", ["a", "b"], counts)


def test_classification_scores_match_scikit_learn():
    gold = [0, 0, 1, 1, 1, 2, 2, 0, 1, 2]
    predicted = [0, 1, 1, 1, 0, 2, 1, 0, 1, 0]
    matrix = [[0] * 3 for _ in range(3)]
    for g, p in zip(gold, predicted, strict=True):
        matrix[g][p] += 1
    scores = classification_scores(matrix, ["a", "b", "c"])
    precision, recall, f1, support = precision_recall_fscore_support(gold, predicted, zero_division=0)
    for i, label in enumerate("abc"):
        assert scores["per_class"][label]["precision"] == pytest.approx(100 * precision[i])
        assert scores["per_class"][label]["recall"] == pytest.approx(100 * recall[i])
        assert scores["per_class"][label]["f1"] == pytest.approx(100 * f1[i])
        assert scores["per_class"][label]["support"] == support[i]
    assert scores["macro_f1"] == pytest.approx(100 * f1_score(gold, predicted, average="macro"))
    assert scores["accuracy"] == pytest.approx(60.0)


@pytest.mark.parametrize("arch, options", [
    ("features", {}), ("pooled", {"pooling": "mean"}), ("pooled", {"pooling": "max"}),
    ("rnn", {"pooling": "last"}), ("lstm", {"bidirectional": True, "pooling": "last"}),
    ("gru", {"bidirectional": True, "pooling": "max"}), ("lstm", {"pooling": "mean"}),
    ("transformer", {"pooling": "cls", "num_layers": 2}), ("transformer", {"pooling": "mean"}),
    ("lstm", {"output_layer": "sigmoid", "num_labels": 2}),
])
def test_classifier_model_overfits_a_handful_of_documents(arch, options):
    model = tiny(arch, **options).train()
    words, lengths = ragged()
    words = torch.cat([words, words.flip(0)])
    lengths = torch.cat([lengths, lengths.flip(0)])
    words[3:, 0] = 4                                        # the copies differ in their first word only
    labels = torch.tensor([0, 1, 2, 1, 2, 0]) % model.config.num_labels
    features = torch.randn(6, 5)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(300):
        loss = document_losses(model, model(words, lengths, features), labels, None) / 6
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.05, loss.item()
    model.eval()
    assert (probabilities(model, model(words, lengths, features)).argmax(-1) == labels).all()
    assert math.isfinite(loss.item())
