"""Copy attention and coverage (See et al. 2017, the pointer-generator) in the RNN encoder-decoders:
shapes, the final distribution over the extended vocabulary (eqs. 8-9), copying words never seen in
training, the coverage vector and loss (eqs. 10-13), incremental decoding equal to teacher forcing,
beam search, save / load through the command line, and the refusals."""

import json
import random
from pathlib import Path

import pytest
import torch

import seqlab
from seqlab.cli.main import main
from seqlab.data.tokenizers import WordTokenizer
from seqlab.data.vocab import BOS, PAD, UNK
from seqlab.decoding.search import SearchOptions, decode
from seqlab.families.seq2seq.model import Seq2SeqConfig, build_model
from seqlab.families.seq2seq.parallel import Pair
from seqlab.families.seq2seq.pipeline import Seq2SeqTrainConfig, TrainedSeq2Seq
from seqlab.families.seq2seq.task import PairVocabulary, Seq2SeqTask, coverage_losses
from seqlab.models.base import EncoderDecoderState

FIXTURES = Path(__file__).parent / "fixtures" / "seq2seq"
V = 15


def tiny(**overrides) -> Seq2SeqConfig:
    base = dict(arch="gru", attention="dot", copy=True, embedding_size=16, hidden_size=8, dropout=0.0,
                source_vocab_size=V, target_vocab_size=V)
    return Seq2SeqConfig(**{**base, **overrides})


def batch():
    """Three sources of lengths 4, 2, 1; extended ids: row 0 holds two source words out of the target
    vocabulary (V, V + 1), row 1 one (V)."""
    source = torch.tensor([[5, 6, 1, 1], [1, 7, PAD, PAD], [8, PAD, PAD, PAD]])
    lengths = torch.tensor([4, 2, 1])
    source_copy = torch.tensor([[5, 6, V, V + 1], [V, 7, PAD, PAD], [8, PAD, PAD, PAD]])
    target_in = torch.tensor([[BOS, 5, V], [BOS, V, PAD], [BOS, PAD, PAD]])
    return source, lengths, source_copy, target_in


@pytest.mark.parametrize("options", [dict(arch="gru", attention="dot"), dict(arch="lstm", attention="additive",
                                     bidirectional=True, num_layers=2), dict(arch="rnn", attention="bilinear")],
                         ids=["gru-dot", "lstm-additive-bi", "rnn-bilinear"])
def test_copy_attention_gives_a_distribution_over_the_extended_vocabulary(options):
    """log P(w) (B, T, V + n), n the batch's most out-of-vocabulary source words; P sums to 1 (eq. 9)."""
    torch.manual_seed(0)
    model = build_model(tiny(**options, coverage=True))
    source, lengths, source_copy, target_in = batch()
    log_p, weights, coverage = model(source, lengths, target_in, source_copy=source_copy, attention=True)
    assert log_p.shape == (3, 3, V + 2) and weights.shape == coverage.shape == (3, 3, 4)
    assert torch.allclose(log_p.exp().sum(-1), torch.ones(3, 3), atol=1e-5)
    assert (weights[1, :, 2:] == 0).all()                                  # padding gets no attention


def test_copy_attention_mixes_generation_and_copying_by_p_gen():
    """p_gen in (0, 1) (eq. 8); P(w) = p_gen P_vocab(w) + (1 - p_gen) Σ_{i: x_i = w} a_i (eq. 9): with p_gen
    forced to ~0 the distribution is the attention summed by word, with ~1 the vocabulary softmax."""
    torch.manual_seed(0)
    model = build_model(tiny()).eval()
    source, lengths, source_copy, _ = batch()
    state = model.start(source, lengths, source_copy)
    x = torch.randn(3, 16 + 8 + 8) * 100
    p_gen = torch.sigmoid(model.generation_gate(x))
    assert ((p_gen >= 0) & (p_gen <= 1)).all()
    tokens = torch.full((3,), BOS)
    with torch.no_grad():
        for bias, check in ((-60.0, "copy"), (60.0, "vocab")):
            torch.nn.init.zeros_(model.generation_gate.weight)
            torch.nn.init.constant_(model.generation_gate.bias, bias)
            log_p, _, a = model.step(tokens, state, need_weights=True)
            P = log_p.exp()                                                 # (B, V + 2)
            if check == "copy":
                expected = torch.zeros_like(P).scatter_add(1, source_copy, a)
                assert torch.allclose(P, expected, atol=1e-6)
                assert P[0, V] > 0 and P[0, V + 1] > 0 and P[1, V] > 0
            else:
                assert torch.allclose(P.sum(-1), torch.ones(3)) and P[:, V:].max() < 1e-6


def test_copy_and_coverage_steps_equal_teacher_forcing():
    """Feeding the target one token at a time through `step` (coverage carried in the state, extended ids
    read as <unk>) gives the teacher-forced log-probabilities."""
    torch.manual_seed(0)
    model = build_model(tiny(attention="additive", coverage=True)).eval()
    source, lengths, source_copy, target_in = batch()
    with torch.no_grad():
        forced = model(source, lengths, target_in, source_copy=source_copy)                    # (B, T, V + 2)
        state = model.start(source, lengths, source_copy)
        for t in range(target_in.size(1)):
            log_p, state, _ = model.step(target_in[:, t], state)
            real = target_in[:, t] != PAD
            assert torch.allclose(log_p[real], forced[real, t], atol=1e-5)


def test_coverage_is_the_sum_of_past_attention_and_beam_reorders_it():
    torch.manual_seed(0)
    model = build_model(tiny(copy=False, coverage=True, attention="bilinear")).eval()
    source, lengths, _, target_in = batch()
    target_in = target_in.clamp(max=V - 1)                    # no extended ids without copy
    with torch.no_grad():
        _, weights, coverage = model(source, lengths, target_in, attention=True)
        assert torch.equal(coverage[:, 0], torch.zeros(3, 4))                                  # c^0 = 0 (eq. 10)
        assert torch.allclose(coverage[:, 2], weights[:, 0] + weights[:, 1])
        state = model.start(source, lengths)
        _, state, a = model.step(target_in[:, 0], state)
        reordered = model.reorder_state(state, torch.tensor([2, 0]))
    assert isinstance(reordered, EncoderDecoderState)
    assert torch.equal(reordered.decoder[1], a[[2, 0]])


def test_coverage_loss_is_the_sum_of_min_attention_coverage_on_a_hand_example():
    """See et al. eq. 12: Σ_t Σ_i min(a_i^t, c_i^t). a^1 = (.5, .5, 0), c^1 = 0; a^2 = (.2, .7, .1),
    c^2 = (.5, .5, 0): 0 + (.2 + .5 + 0) = 0.7; the padded third step is not scored."""
    weights = torch.tensor([[[0.5, 0.5, 0.0], [0.2, 0.7, 0.1], [0.3, 0.3, 0.4]]])
    coverage = torch.tensor([[[0.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.7, 1.2, 0.1]]])
    targets = torch.tensor([[7, 8, PAD]])
    assert coverage_losses(weights, coverage, targets).item() == pytest.approx(0.7)


def test_the_extended_vocabulary_of_a_pair():
    """Source words the target vocabulary lacks get V, V + 1, ... in order of first appearance; target
    words that occur in the source get the same ids, the others stay <unk>."""
    words = WordTokenizer()
    vocab = words.vocabulary([["a", "b"]])
    vocabulary = PairVocabulary(words, words, vocab, vocab, copy=True)
    (item,) = vocabulary.encode([Pair("a zebra b okapi zebra", "okapi a gnu", 1)])
    n = len(vocab)
    a, b = vocab.index["a"], vocab.index["b"]
    assert item.source == [a, UNK, b, UNK, UNK]
    assert item.source_copy == [a, n, b, n + 1, n] and item.oovs == ["zebra", "okapi"]
    assert item.target == [UNK, a, UNK] and item.target_copy == [n + 1, a, UNK]
    b_ = vocabulary.collate([item])
    assert b_.target_copy_out.tolist() == [[n + 1, a, UNK, 3]] and b_.target_out.tolist() == [[UNK, a, UNK, 3]]


# ------------------------------------------------------------------ copying words never seen in training

COMMON = "the a of to in and is it".split()


def copy_task_pairs(n: int, seed: int) -> list[Pair]:
    """target = source: 1-3 words, each a common word or (half the time) a word seen once (<unk> in the
    vocabulary), so copying what the encoder reads as <unk> is worth learning."""
    rng = random.Random(seed)
    pairs = []
    for i in range(n):
        words = [rng.choice(COMMON) if rng.random() < 0.5 else f"rare{seed}x{i}x{j}" for j in range(rng.randint(1, 3))]
        pairs.append(Pair(" ".join(words), " ".join(words), i + 1))
    return pairs


@pytest.fixture(scope="module")
def copy_task():
    """A copy model and a plain one trained on the copy task (same data, seed and steps)."""
    train = copy_task_pairs(128, 0)
    words = WordTokenizer()
    vocab = words.vocabulary(words.tokenize_lines([p.source for p in train]), max_size=5 + len(COMMON))
    trained = {}
    for copy in (True, False):
        torch.manual_seed(0)
        vocabulary = PairVocabulary(words, words, vocab, vocab, copy=copy)
        config = tiny(copy=copy, embedding_size=16, hidden_size=16, source_vocab_size=len(vocab),
                      target_vocab_size=len(vocab))
        model = build_model(config)
        encoded = vocabulary.encode(train)
        task = Seq2SeqTask(vocabulary, encoded, encoded[:8], None, batch_size=32, eval_batch_size=32, seed=0)
        optimizer = torch.optim.Adam(model.parameters(), lr=2e-2)
        for epoch in range(30):
            for b in task.train_batches(epoch):
                loss, count, _ = task.loss(model, b, None)
                (loss / count).backward()
                optimizer.step()
                optimizer.zero_grad()
        trained[copy] = TrainedSeq2Seq(model.eval(), vocabulary, Seq2SeqTrainConfig(model=config), "cpu")
    return trained


UNSEEN = ["zebra okapi", "the gnu of", "yak in narwhal", "ibex"]


@pytest.mark.parametrize("beam", [1, 3])
def test_a_copy_model_copies_unseen_source_words_that_the_plain_model_cannot(copy_task, beam):
    """Words never seen in training (each <unk> to the encoder) come out exactly, by greedy decoding and
    beam search; the plain model can only write <unk> for them."""
    assert copy_task[True].translate(UNSEEN, beam=beam) == UNSEEN
    plain = copy_task[False].translate(UNSEEN, beam=beam)
    assert all("<unk>" in out and "zebra" not in out and "gnu" not in out for out in plain)


def test_a_copy_model_keeps_its_attention_heat_maps(copy_task, tmp_path):
    (out,) = copy_task[True].generate(["zebra okapi"], beam=3, attention=True)
    assert out.tokens == ["zebra", "okapi"] and len(out.attention) == 3 and len(out.attention[0]) == 2
    assert copy_task[True].plot_attention(out, tmp_path / "map.png").exists()


def test_copied_ids_decode_through_the_search_as_extended_ids(copy_task):
    trained = copy_task[True]
    (item,) = trained.vocabulary.encode([Pair("zebra okapi", None, 1)])
    b = trained.vocabulary.collate([item])
    (best,), = decode(trained.model, b.source, b.source_lengths, SearchOptions(beam=1), source_copy=b.source_copy)
    n = len(trained.vocabulary.target_vocab)
    assert item.oovs == ["zebra", "okapi"] and best.tokens == [n, n + 1]        # V + 0, V + 1


# ------------------------------------------------------------------------------ the command line

SMALL = ["--embedding-size", "16", "--hidden-size", "16", "--dropout", "0", "--batch-size", "32", "--epochs", "1",
         "--no-progress", "--threads", "1"]


def aligned(split: str) -> list[str]:
    return [f"--{split}-src", str(FIXTURES / f"{split}.src"), f"--{split}-tgt", str(FIXTURES / f"{split}.tgt")]


@pytest.fixture(scope="module")
def copy_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("copy-runs") / "copy"
    assert main(["train", "seq2seq", *aligned("train"), *aligned("dev"), "--output", str(run), "--arch", "gru",
                 "--attention", "additive", "--copy", "--coverage", "--coverage-weight", "0.5", "--max-vocab", "20",
                 *SMALL]) == 0
    return run


def test_a_copy_coverage_run_saves_loads_evaluates_and_translates(copy_run, capsys):
    run = copy_run
    saved = json.loads((run / "config.json").read_text())["model"]
    assert saved["copy"] is True and saved["coverage"] is True and saved["coverage_weight"] == 0.5
    capsys.readouterr()
    assert main(["evaluate", str(run), "--src", str(FIXTURES / "test.src"), "--tgt", str(FIXTURES / "test.tgt"),
                 "--json", "--beam", "2"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["pairs"] == 40 and figures["perplexity"] > 1
    model = seqlab.load(run)
    assert model.config.model.copy and model.vocabulary.copy
    out = model.translate(["der hund zebra sieht .", "der mann mag der katze ."], beam=2)
    assert all(isinstance(o, str) and "<unk>" not in o for o in out)        # a copy model never writes <unk>
    # a word the 20-token vocabulary lacks can only come out by copying
    (item,) = model.vocabulary.encode([Pair("der hund zebra sieht .", None, 1)])
    assert "zebra" in item.oovs


def test_runs_without_the_fields_load_as_plain_models():
    config = seqlab.load(FIXTURES.parent / "old_runs" / "seq2seq-bpe").config.model
    assert config.copy is False and config.coverage is False and config.coverage_weight == 1.0


@pytest.mark.parametrize("options, message", [
    (["--arch", "gru", "--attention", "none", "--copy"], "--copy needs attention over the source"),
    (["--arch", "lstm", "--coverage"], "--coverage needs attention over the source"),
    (["--arch", "transformer", "--copy"], "--copy"),
    (["--arch", "transformer", "--coverage"], "--coverage"),
    (["--arch", "gru", "--attention", "dot", "--coverage-weight", "-1"], "--coverage-weight"),
])
def test_bad_copy_options_are_refused_in_one_line(tmp_path, capsys, options, message):
    try:
        code = main(["train", "seq2seq", *aligned("train"), *aligned("dev"), "--output", str(tmp_path / "bad"),
                     *options, *SMALL])
    except SystemExit as exit_:                        # argparse's own checks (a value out of range) exit
        code = exit_.code
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and len(err.splitlines()) == 1, err


def test_onnx_export_of_a_copy_model_is_refused_in_one_line(copy_run, tmp_path, capsys):
    code = main(["export", str(copy_run), "--output", str(tmp_path / "onnx"), "--format", "onnx"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "--copy models cannot be exported to ONNX yet" in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "onnx").exists()


def test_the_aeslc_copy_configs_are_the_measured_recipe():
    """configs/aeslc-gru-copy.yaml holds the options of the AESLC copy row; the coverage one adds coverage."""
    from seqlab.families.seq2seq.pipeline import resolve_seq2seq_config

    folder = Path(__file__).parent.parent / "configs"
    measured = {"arch": "gru", "attention": "additive", "copy": True, "bidirectional": True, "tie_embeddings": True,
                "share_embeddings": True, "init_range": 0.1, "embedding_size": 256, "hidden_size": 256,
                "dropout": 0.3, "tokenizer": "word", "shared_vocab": True, "max_vocab": 30000,
                "max_source_length": 100, "max_target_length": 32, "long_pairs": "truncate", "epochs": 4,
                "batch_size": 32, "eval_batch_size": 64}
    assert resolve_seq2seq_config(folder / "aeslc-gru-copy.yaml") == resolve_seq2seq_config(None, measured)
    coverage = resolve_seq2seq_config(None, {**measured, "coverage": True, "coverage_weight": 1.0})
    assert resolve_seq2seq_config(folder / "aeslc-gru-copy-coverage.yaml") == coverage


def test_serve_answers_with_a_copy_model_as_the_python_api_does(copy_run):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from seqlab.serve.app import create_app

    client = TestClient(create_app([copy_run]))
    sources = ["der hund zebra sieht .", "der mann mag der katze ."]
    model = client.get("/v1/models").json()["data"][0]["id"]
    decoded = client.post("/v1/translate", json={"model": model, "text": sources, "beam": 2}).json()["results"]
    assert [d["text"] for d in decoded] == seqlab.load(copy_run).translate(sources, beam=2)


def test_init_from_a_trained_copy_run_adds_coverage_at_zero(tmp_path):
    """--init-from (See et al. add coverage to a trained pointer-generator): the run's weights, w_c as
    initialised (zero: the coverage model starts as the copy model); weights that do not fit are refused."""
    from seqlab.errors import SeqlabError
    from seqlab.families.seq2seq.pipeline import initialise_from
    from seqlab.training.checkpoint import save_model

    torch.manual_seed(0)
    copy_model = build_model(tiny(attention="additive"))
    (tmp_path / "run").mkdir()
    save_model(tmp_path / "run" / "model.safetensors", copy_model)
    torch.manual_seed(1)
    coverage_model = build_model(tiny(attention="additive", coverage=True))
    initialise_from(coverage_model, tmp_path / "run")
    for name, value in copy_model.state_dict().items():
        assert torch.equal(coverage_model.state_dict()[name], value), name
    assert torch.equal(coverage_model.attention.w_c, torch.zeros(8))
    with pytest.raises(SeqlabError, match="do not fit"):
        initialise_from(build_model(tiny(attention="additive", hidden_size=16)), tmp_path / "run")
