"""Sequence-to-sequence models: shapes, attention over real positions only, padding invariance, the
decoding path equal to the teacher-forced one, the encoder's final state as the decoder's first, and
overfitting a handful of pairs."""

from collections import Counter

import pytest
import torch

from seqlab.data.tokenizers import WordTokenizer
from seqlab.data.vocab import BOS, EOS, PAD, SEP, Vocab
from seqlab.errors import SeqlabError
from seqlab.families.seq2seq.model import Seq2SeqConfig, build_model
from seqlab.families.seq2seq.parallel import Pair
from seqlab.families.seq2seq.task import PairVocabulary, Seq2SeqTask, token_losses
from seqlab.nn.cross_attention import Attention

V = 23
RNN_VARIANTS = [(arch, attention, bi) for arch in ("rnn", "lstm", "gru")
                for attention in ("none", "dot", "bilinear", "additive") for bi in (False, True)]
ALL = [*(dict(arch=a, attention=att, bidirectional=bi) for a, att, bi in RNN_VARIANTS),
       dict(arch="transformer"), dict(arch="transformer", norm_position="post"), dict(arch="lm")]


def tiny(**overrides) -> Seq2SeqConfig:
    base = dict(embedding_size=16, hidden_size=8, num_layers=2, num_heads=2, ff_size=32, max_positions=40,
                source_vocab_size=V, target_vocab_size=V, dropout=0.0)
    return Seq2SeqConfig(**{**base, **overrides})


def name(options: dict) -> str:
    return "-".join(str(v) for v in options.values())


def batch(seed: int = 0):
    """Three right-padded sources of lengths 6, 4 and 2, and targets <s> y (B, 5)."""
    g = torch.Generator().manual_seed(seed)
    source = torch.randint(5, V, (3, 6), generator=g)
    lengths = torch.tensor([6, 4, 2])
    source[1, 4:] = PAD
    source[2, 2:] = PAD
    target_in = torch.randint(5, V, (3, 5), generator=g)
    target_in[:, 0] = BOS
    return source, lengths, target_in


@pytest.mark.parametrize("options", [o for o in ALL if o["arch"] != "lm"], ids=name)
def test_forward_shapes_and_padding_invariance(options):
    """Logits (B, T, V); a padded row's logits equal those of the row run alone. (The lm reads one
    sequence; its padding is checked in test_lm_decoding_equals_teacher_forcing.)"""
    torch.manual_seed(0)
    model = build_model(tiny(**options)).eval()
    source, lengths, target_in = batch()
    logits = model(source, lengths, target_in)
    assert logits.shape == (3, 5, V)
    for b in range(3):
        alone = model(source[b:b + 1, :lengths[b]], lengths[b:b + 1], target_in[b:b + 1])
        torch.testing.assert_close(logits[b:b + 1], alone, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("kind", ["dot", "bilinear", "additive"])
def test_attention_weights_sum_to_one_over_real_positions_and_zero_on_padding(kind):
    torch.manual_seed(0)
    attention = Attention(kind, 8, 8)
    keys = torch.randn(3, 6, 8)
    mask = torch.arange(6)[None, :] < torch.tensor([6, 4, 1])[:, None]
    context, weights = attention(torch.randn(3, 8), keys, mask)
    assert weights.shape == (3, 6) and context.shape == (3, 8)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3))
    assert (weights[~mask] == 0).all()
    assert (weights[mask] > 0).all()
    torch.testing.assert_close(context, (weights[:, :, None] * keys).sum(1))     # eq. 13.37


def test_attention_scores_follow_the_equations():
    """dot: h^d · h^e (13.35); bilinear: h^d W_s h^e (13.38); additive: v^T tanh(W_q h^d + W_k h^e)."""
    torch.manual_seed(0)
    q, keys = torch.randn(1, 4), torch.randn(1, 3, 4)
    mask = torch.ones(1, 3, dtype=torch.bool)
    dot = Attention("dot", 4, 4)
    torch.testing.assert_close(dot(q, keys, mask)[1], torch.softmax(keys[0] @ q[0], 0)[None])
    bilinear = Attention("bilinear", 4, 4)
    W = bilinear.W_s.weight                                                       # (Q, K)
    torch.testing.assert_close(bilinear(q, keys, mask)[1], torch.softmax(q[0] @ W @ keys[0].T, 0)[None])
    additive = Attention("additive", 4, 4)
    scores = additive.v(torch.tanh(additive.W_q(q)[:, None] + additive.W_k(keys)))[0, :, 0]
    torch.testing.assert_close(additive(q, keys, mask)[1], torch.softmax(scores, 0)[None])


def test_dot_attention_needs_equal_widths():
    with pytest.raises(SeqlabError, match="bilinear or additive"):
        Attention("dot", 8, 16)


@pytest.mark.parametrize("options", [o for o in ALL if o["arch"] != "lm"], ids=name)
def test_step_by_step_decoding_equals_teacher_forcing(options):
    """Feeding the target one token at a time through `step` gives the parallel (teacher-forced) logits;
    for the transformer, the KV-cached decoder equals the masked parallel one."""
    torch.manual_seed(0)
    model = build_model(tiny(**options)).eval()
    source, lengths, target_in = batch()
    with torch.no_grad():
        parallel = model(source, lengths, target_in)
        state = model.start(source, lengths)
        steps = []
        for t in range(target_in.size(1)):
            logits, state, _ = model.step(target_in[:, t], state)
            steps.append(logits)
    torch.testing.assert_close(torch.stack(steps, 1), parallel, atol=1e-5, rtol=1e-4)


def test_lm_decoding_equals_teacher_forcing():
    """The lm reads left-padded sources into its cache and continues after <sep>: each row's logits
    equal those of its own sequence source <sep> target run in one parallel pass."""
    torch.manual_seed(0)
    model = build_model(tiny(arch="lm")).eval()
    source, lengths, target_in = batch()
    target = target_in[:, 1:]                                                       # y_1 .. y_4
    with torch.no_grad():
        state = model.start(source, lengths)
        tokens, steps = torch.full((3,), SEP), []
        for t in range(target.size(1)):
            logits, state, _ = model.step(tokens, state)
            steps.append(logits)
            tokens = target[:, t]
        stepped = torch.stack(steps, 1)                                             # (B, 4, V)
        for b in range(3):
            n = int(lengths[b])
            sequence = torch.cat([source[b, :n], torch.tensor([SEP]), target[b, :-1]])[None]
            parallel = model(None, None, sequence)[0, n:]                           # from <sep> on
            torch.testing.assert_close(stepped[b], parallel, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("arch", ["rnn", "lstm", "gru"])
def test_the_encoders_final_state_starts_the_decoder(arch):
    """h_0^d = h_n^e: per layer, the forward state at the last real token beside the backward state at
    the first (eq. 13.32), and without attention that top-layer state is the context of every step."""
    torch.manual_seed(0)
    model = build_model(tiny(arch=arch, bidirectional=True)).eval()
    source, lengths, _ = batch()
    memory = model.encode(source, lengths)
    h0 = model.init_state(memory)
    h0 = h0[0] if arch == "lstm" else h0                                            # (L, B, 2H)
    outputs, _ = model.encoder(model.source_embedding(source), lengths=lengths)     # top layer (B, S, 2H)
    H = 8
    for b in range(3):
        n = int(lengths[b])
        torch.testing.assert_close(h0[-1, b, :H], outputs[b, n - 1, :H])
        torch.testing.assert_close(h0[-1, b, H:], outputs[b, 0, H:])
    torch.testing.assert_close(memory["context"], h0[-1])


def test_textbook_cells_give_the_same_translation_model():
    torch.manual_seed(0)
    fused = build_model(tiny(arch="lstm", attention="additive", bidirectional=True)).eval()
    textbook = build_model(tiny(arch="lstm", attention="additive", bidirectional=True, rnn_impl="textbook")).eval()
    textbook.load_state_dict(fused.state_dict())
    source, lengths, target_in = batch()
    torch.testing.assert_close(textbook(source, lengths, target_in), fused(source, lengths, target_in),
                               atol=1e-5, rtol=1e-4)


def test_bad_model_options_are_refused():
    with pytest.raises(SeqlabError, match="attention"):
        tiny(arch="transformer", attention="dot")
    with pytest.raises(SeqlabError, match="shared-vocab"):
        build_model(tiny(arch="lm", target_vocab_size=V + 1))
    with pytest.raises(SeqlabError, match="shared-vocab"):
        build_model(tiny(arch="gru", share_embeddings=True, target_vocab_size=V + 1))
    with pytest.raises(SeqlabError, match="dropout"):
        tiny(dropout=1.0)
    with pytest.raises(SeqlabError, match="init-range"):
        tiny(init_range=-0.1)


@pytest.mark.parametrize("options", [dict(arch="gru", attention="dot", init_range=0.05), dict(arch="transformer"),
                                     dict(arch="transformer", tie_embeddings=True), dict(arch="lm")], ids=name)
def test_the_same_seed_builds_the_same_model_wherever_it_lies_in_memory(options):
    """Initialisation draws from the seeded RNG in a fixed order: never in the order of a set of modules,
    which follows their memory addresses (twelve models alive at once lie at twelve addresses)."""
    models = []
    for _ in range(12):
        torch.manual_seed(0)
        models.append(build_model(tiny(**options)))
    first = models[0].state_dict()
    for model in models[1:]:
        for key, value in model.state_dict().items():
            assert torch.equal(value, first[key]), key


@pytest.mark.parametrize("share", [False, True])
def test_init_range_draws_embeddings_and_output_uniformly_and_keeps_padding_zero(share):
    torch.manual_seed(0)
    model = build_model(tiny(arch="gru", attention="dot", init_range=0.05, tie_embeddings=True,
                             share_embeddings=share, embedding_size=64))
    for weight in (model.source_embedding.weight, model.target_embedding.weight, model.output.decoder.weight):
        assert weight.abs().max() <= 0.05 and weight[PAD].abs().max() == 0
        assert weight[PAD + 1:].std() > 0.02                      # U(-r, r) has std r / sqrt(3) = 0.029
    assert model.output.decoder.weight is model.target_embedding.weight
    assert model.output.decoder.bias.abs().max() == 0
    torch.manual_seed(0)
    again = build_model(tiny(arch="gru", attention="dot", init_range=0.05, tie_embeddings=True,
                             share_embeddings=share, embedding_size=64))
    for (name, a), b in zip(model.state_dict().items(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b), name                                # the same seed, the same model
    untied = build_model(tiny(arch="gru", init_range=0.05))
    assert untied.output.decoder.weight.abs().max() <= 0.05
    # With PyTorch's N(0, 1) embeddings a tied output layer starts far from uniform; U(-0.1, 0.1) does not.
    source, lengths, target_in = batch()
    for r, low, high in ((0.0, 1.0, None), (0.1, None, 0.2)):
        torch.manual_seed(0)
        model = build_model(tiny(arch="gru", attention="dot", tie_embeddings=True, embedding_size=64, init_range=r))
        spread = model(source, lengths, target_in).std().item()
        assert (low is None or spread > low) and (high is None or spread < high), (r, spread)


def encoder_for(joint: bool) -> PairVocabulary:
    words = WordTokenizer()
    source = Vocab.build(Counter("a b c d".split()))
    target = source if joint else Vocab.build(Counter("w x y z".split()))
    return PairVocabulary(words, words, source, target, joint)


def test_pairs_become_teacher_forcing_batches():
    """Encoder-decoders: the decoder reads <s> y and is scored on y </s>; padding is never scored."""
    vocabulary = encoder_for(joint=False)
    items = vocabulary.encode([Pair("a b c", "w x", 1), Pair("d", "y z w", 2)])
    b = vocabulary.collate(items)
    w, x, y, z = (vocabulary.target_vocab.index[t] for t in "wxyz")
    assert b.source_lengths.tolist() == [3, 1]
    assert b.target_in.tolist() == [[BOS, w, x, PAD], [BOS, y, z, w]]
    assert b.target_out.tolist() == [[w, x, EOS, PAD], [y, z, w, EOS]]
    assert b.num_tokens == 7


def test_the_lm_reads_source_sep_target_and_is_scored_on_the_target():
    vocabulary = encoder_for(joint=True)
    a, bb, c, d = (vocabulary.source_vocab.index[t] for t in "abcd")
    batch_ = vocabulary.collate(vocabulary.encode([Pair("a b", "c d", 1)]))
    assert batch_.target_in.tolist() == [[a, bb, SEP, c, d]]
    assert batch_.target_out.tolist() == [[PAD, PAD, c, d, EOS]]          # after <sep>: the target, </s>
    assert batch_.source_out.tolist() == [[bb, SEP, PAD, PAD, PAD]]       # scored only with lm_loss all
    logits = torch.zeros(1, 5, len(vocabulary.target_vocab))
    assert token_losses(logits, batch_)[1] == 3
    assert token_losses(logits, batch_, all_tokens=True)[1] == 5


def test_long_pairs_are_skipped_or_truncated_and_counted():
    from seqlab.families.seq2seq.task import LengthReport

    vocabulary = encoder_for(joint=False)
    vocabulary.max_source, vocabulary.max_target = 2, 2
    pairs = [Pair("a b", "w x", 1), Pair("a b c", "w", 2), Pair("a", "w x y", 3)]
    report = LengthReport()
    assert len(vocabulary.encode(pairs, "f", "file", "skip", report)) == 1
    assert report.skipped == 2 and "skipped 2 of 3 pairs" in report.messages("f", 2, 2)[0]
    report = LengthReport()
    kept = vocabulary.encode(pairs, "f", "file", "truncate", report)
    assert [len(p.source) for p in kept] == [2, 2, 1] and [len(p.target) for p in kept] == [2, 1, 2]
    assert report.truncated_sources == 1 and report.truncated_targets == 1
    with pytest.raises(SeqlabError, match="file f:2: the source is 3 tokens"):
        vocabulary.encode(pairs, "f", "file", "reject")


@pytest.mark.parametrize("options", [dict(arch="gru"), dict(arch="lstm", attention="dot", bidirectional=True),
                                     dict(arch="rnn", attention="bilinear"), dict(arch="gru", attention="additive"),
                                     dict(arch="transformer"), dict(arch="lm")], ids=name)
def test_overfits_a_handful_of_pairs(options):
    """Six pairs learned to (almost) zero loss: the model, loss and teacher forcing fit together."""
    torch.manual_seed(0)
    joint = options["arch"] == "lm"
    words = WordTokenizer()
    texts = [("a b c", "x y"), ("b c", "y z w"), ("c a a b", "w"), ("d", "z z x"), ("a d", "x w"), ("b", "y")]
    counts = Counter(t for s, g in texts for t in f"{s} {g}".split())
    vocab = Vocab.build(counts)
    vocabulary = PairVocabulary(words, words, vocab, vocab, joint)
    items = vocabulary.encode([Pair(s, t, i) for i, (s, t) in enumerate(texts, 1)])
    model = build_model(tiny(**options, source_vocab_size=len(vocab), target_vocab_size=len(vocab),
                             hidden_size=16, num_layers=1))
    task = Seq2SeqTask(vocabulary, items, items, None, batch_size=6, eval_batch_size=6, seed=1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    data = vocabulary.collate(items)
    for _ in range(150):
        optimizer.zero_grad()
        loss, count, _ = task.loss(model, data, None)
        (loss / count).backward()
        optimizer.step()
    assert task.summarize(task.evaluate(model, task.valid_data, "cpu"))["loss"] < 0.05


@pytest.mark.parametrize("lm_all_tokens", [False, True])
def test_the_trainer_divides_the_loss_by_the_tasks_own_count(tmp_path, lm_all_tokens):
    """`--arch lm --lm-loss all` scores the source tokens too: one SGD step (lr 1, no clipping) moves every
    weight by the gradient of the summed loss over the count the task returns (source and target tokens),
    not over the target tokens alone."""
    import copy

    from seqlab.training.config import TrainConfig
    from seqlab.training.trainer import Trainer

    torch.manual_seed(0)
    words = WordTokenizer()
    texts = [("a b c", "x y"), ("b c", "y z w"), ("c a a b", "w"), ("d", "z z x")]
    vocab = Vocab.build(Counter(t for s, g in texts for t in f"{s} {g}".split()))
    vocabulary = PairVocabulary(words, words, vocab, vocab, joint=True)
    items = vocabulary.encode([Pair(s, t, i) for i, (s, t) in enumerate(texts, 1)])
    model = build_model(tiny(arch="lm", source_vocab_size=len(vocab), target_vocab_size=len(vocab),
                             lm_loss="all" if lm_all_tokens else "target"))
    task = Seq2SeqTask(vocabulary, items, items, None, batch_size=len(items), eval_batch_size=4, seed=1,
                       lm_all_tokens=lm_all_tokens)
    batch = task.train_batches(0)[0]
    loss_sum, count, _ = task.loss(model, batch, None)
    assert int(count) == task.count(batch)
    assert (task.count(batch) > batch.num_tokens) == lm_all_tokens      # num_tokens: the target tokens only
    expected = copy.deepcopy(model)
    loss_sum, count, _ = task.loss(expected, batch, None)
    (loss_sum / count).backward()
    with torch.no_grad():
        for p in expected.parameters():
            p -= p.grad
    config = TrainConfig(output=str(tmp_path), optimizer="sgd", lr=1.0, grad_clip=0.0, schedule="constant",
                         max_steps=1, batch_size=len(items), progress=False)
    Trainer(task, model, config, tmp_path, torch.device("cpu")).fit()
    for (name, got), want in zip(model.named_parameters(), expected.parameters(), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, msg=name)


def test_lm_loads_a_state_dict_saved_before_it_held_a_transformer_lm(tmp_path):
    """SeparatorLM's network is now a TransformerLM held as `lm`: tensors saved under the old names
    (embedding., positions., blocks., final_norm., output.) load through `renamed_parameters` and give
    the same logits."""
    from seqlab.training.checkpoint import load_model, save_tensors

    torch.manual_seed(0)
    model = build_model(tiny(arch="lm")).eval()
    old_names = {name.removeprefix("lm."): t for name, t in model.state_dict().items()}
    assert "embedding.weight" in old_names and "blocks.0.attention.qkv.weight" in old_names
    save_tensors(tmp_path / "old.safetensors", old_names)
    torch.manual_seed(1)
    loaded = build_model(tiny(arch="lm")).eval()
    _, _, target_in = batch()
    assert not torch.equal(loaded(None, None, target_in), model(None, None, target_in))
    load_model(tmp_path / "old.safetensors", loaded)
    assert torch.equal(loaded(None, None, target_in), model(None, None, target_in))
