"""Contextual string embeddings (Akbik et al. 2018) from seqlab's own character LMs: `seqlab train lm
--reverse`, and `--lm-features FWD_RUN [BWD_RUN]` for the tagger and the classifier.

The LMs are tiny (hidden 24) and trained for a few steps on the Shakespeare fixture, once per module."""

import json
import shutil
from pathlib import Path

import pytest
import torch

from seqlab.cli.main import main
from seqlab.data.documents import Document
from seqlab.data.readers import encode_lines, read_lines
from seqlab.data.vocab import EOS
from seqlab.families.classifier.pipeline import load_classifier
from seqlab.families.classifier.task import with_lm_features as document_features
from seqlab.families.lm import pipeline as lm_pipeline
from seqlab.families.lm.features import load_lm_features
from seqlab.families.lm.pipeline import load_lm
from seqlab.families.lm.vocab import reverse_lines
from seqlab.families.tagger.conll import Sentence
from seqlab.families.tagger.pipeline import load_tagger
from seqlab.families.tagger.task import LM_FEATURE_DTYPE, TaggerVocabulary, TaggingTask, with_lm_features
from seqlab.nn.lm_features import sentence_text

FIXTURES = Path(__file__).parent / "fixtures"
TRAIN, VALID = FIXTURES / "shakespeare_train.txt", FIXTURES / "shakespeare_valid.txt"
NER = str(FIXTURES / "ner.conll")
LM = ["--tokenizer", "char", "--arch", "lstm", "--layers", "1", "--embedding-size", "8", "--hidden-size", "24",
      "--seq-len", "16", "--batch-size", "4", "--max-steps", "4", "--eval-every", "4", "--no-progress"]
SMALL = ["--embedding-size", "8", "--hidden-size", "16", "--dropout", "0", "--batch-size", "4", "--lr", "0.02",
         "--schedule", "constant", "--no-progress", "--char-features", "none"]


def train_lm_run(output: Path, *extra: str) -> Path:
    assert main(["train", "lm", "--train", str(TRAIN), "--valid", str(VALID), "--output", str(output),
                 *LM, *extra]) == 0
    return output


@pytest.fixture(scope="module")
def lms(tmp_path_factory) -> tuple[Path, Path]:
    """A forward and a backward (--reverse) character LM."""
    folder = tmp_path_factory.mktemp("lms")
    return train_lm_run(folder / "fwd"), train_lm_run(folder / "bwd", "--reverse")


def direct_states(run: Path, text: str) -> torch.Tensor:
    """The LM run over `</s>` + the characters of `text` by hand: its hidden states (N + 1, D)."""
    trained = load_lm(run)
    ids = torch.tensor([[EOS] + trained.vocab.encode(list(text))])
    with torch.no_grad():
        h, _ = trained.model(ids, None, output="hidden")            # (1, N + 1, D)
    return h[0]


def test_lm_features_equal_a_direct_run_of_the_lms(lms):
    words = ["EU", "rejects", "Zürich", "☃", "call"]                 # ü and ☃: characters the LMs never saw
    text = " EU rejects Zürich ☃ call "
    assert sentence_text(words) == text
    forward, backward = direct_states(lms[0], text), direct_states(lms[1], text[::-1])
    extractor = load_lm_features([str(lms[0]), str(lms[1])])
    features = extractor.embed([words, ["EU"]])
    assert features[0].shape == (5, 48) and features[1].shape == (1, 48)
    expected = []
    start = 1
    for word in words:
        assert text[start:start + len(word)] == word
        last = start + len(word) - 1                                 # the word's last character in `text`
        after_last = forward[last + 1]                                # input 0 is </s>: text[k] is input k + 1
        reversed_first = len(text) - 1 - start                        # the word's first character, read reversed
        after_first = backward[reversed_first + 1]
        expected.append(torch.cat([after_last, after_first]))
        start += len(word) + 1
    torch.testing.assert_close(features[0], torch.stack(expected))
    # one sentence alone or in a padded batch: the same features (the LMs are causal)
    torch.testing.assert_close(extractor.embed([["EU"]])[0], features[1])


def test_lm_features_unknown_characters_read_as_unk(lms):
    extractor = load_lm_features([str(lms[0])])
    snowman, comet = extractor.embed([["a", "☃"], ["a", "☄"]])
    torch.testing.assert_close(snowman, comet)                        # both are <unk> to the LM


def test_lm_features_shapes_in_the_tagger(lms):
    extractor = load_lm_features([str(lms[0]), str(lms[1])])
    sentences = [Sentence(["EU", "rejects", "German", "call"], ["B-ORG", "O", "B-MISC", "O"]),
                 Sentence(["Peter"], ["B-PER"])]
    vocabulary = TaggerVocabulary.build(sentences)
    from seqlab.families.tagger.model import Tagger, TaggerConfig

    model = Tagger(TaggerConfig(vocab_size=len(vocabulary.words), num_labels=len(vocabulary.labels), embedding_size=8,
                                hidden_size=8, char_features="none", lm_feature_size=48), lm_features=extractor)
    items = with_lm_features(model, sentences, [vocabulary.encode(s) for s in sentences])
    assert items[0].lm.shape == (4, 48) and items[0].lm.dtype == LM_FEATURE_DTYPE
    batch = vocabulary.collate(items)
    assert batch.lm.shape == (2, 4, 48) and not batch.lm[1, 1:].any()        # padding: zeros
    assert model(batch.words, batch.lengths, batch.chars, batch.lm).shape == (2, 4, len(vocabulary.labels))
    with pytest.raises(Exception, match="LM features"):
        model(batch.words, batch.lengths, batch.chars)
    assert extractor.embed([[]])[0].shape == (0, 48)


def ner_task_and_model(lms, dropout=0.0):
    from seqlab.families.tagger.conll import read_labelled
    from seqlab.families.tagger.model import Tagger, TaggerConfig

    sentences = read_labelled(NER, "conll", None, "fixture")
    vocabulary = TaggerVocabulary.build(sentences)
    extractor = load_lm_features([str(lms[0]), str(lms[1])])
    torch.manual_seed(0)
    model = Tagger(TaggerConfig(vocab_size=len(vocabulary.words), num_labels=len(vocabulary.labels), embedding_size=8,
                                hidden_size=16, char_features="none", dropout=dropout, lm_feature_size=48),
                   lm_features=extractor)
    task = TaggingTask(vocabulary, sentences, sentences, None, batch_size=4, eval_batch_size=4, seed=0, model=model)
    return task, model


def test_lm_features_frozen_through_a_training_step(lms):
    task, model = ner_task_and_model(lms, dropout=0.5)
    model.train()
    assert not model.lm_features.training and not model.lm_features.forward_lm.training   # no LM dropout
    frozen = {k: v.clone() for k, v in model.lm_features.state_dict().items()}
    trained = {k: v.clone() for k, v in model.named_parameters() if not k.startswith("lm_features.")}
    cached = task.train.item(0).lm.clone()
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.1)
    loss_sum, count, _ = task.loss(model, task.train_batches(1)[0], None)
    (loss_sum / count).backward()
    optimizer.step()
    assert all(torch.equal(v, model.lm_features.state_dict()[k]) for k, v in frozen.items())
    assert all(p.grad is None for p in model.lm_features.parameters())
    assert any(not torch.equal(v, dict(model.named_parameters())[k]) for k, v in trained.items())
    torch.testing.assert_close(task.train.item(0).lm, cached)      # the cache is the features, unchanged


def test_lm_features_tagger_overfits_a_small_batch(lms):
    task, model = ner_task_and_model(lms)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.05)
    batch = task.train_batches(1)[0]
    for _ in range(60):
        optimizer.zero_grad()
        loss_sum, count, _ = task.loss(model, batch, None)
        (loss_sum / count).backward()
        optimizer.step()
    assert float(loss_sum.detach() / count) < 0.05


def test_lm_features_tagger_cli_save_load_is_self_contained(lms, tmp_path, capsys):
    fwd, bwd = tmp_path / "fwd", tmp_path / "bwd"
    shutil.copytree(lms[0], fwd)
    shutil.copytree(lms[1], bwd)
    run = tmp_path / "tagger"
    assert main(["train", "tagger", "--train", NER, "--dev", NER, "--test", NER, "--format", "conll", "--crf",
                 "--lm-features", str(fwd), str(bwd), "--output", str(run), "--max-steps", "40", "--epochs", "100",
                 "--eval-every", "40", *SMALL]) == 0
    config = json.loads((run / "config.json").read_text())
    assert config["data"]["lm_features"] == [str(fwd), str(bwd)] and config["model"]["lm_feature_size"] == 48
    test = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()][-1]
    shutil.rmtree(fwd)                                                # the tagger run no longer needs the LM runs
    shutil.rmtree(bwd)
    capsys.readouterr()
    assert main(["evaluate", str(run), NER, "--json"]) == 0
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert figures["f1"] == pytest.approx(test["f1"]) and figures["loss"] == pytest.approx(test["loss"], rel=1e-4)
    assert main(["train", "tagger", "--output", str(run), "--resume", "--max-steps", "44", "--no-progress"]) == 0
    tagger = load_tagger(run)
    sentence = ["Peter", "Blackburn", "visited", "New", "York", "."]
    assert load_tagger(run).tag(sentence) == tagger.tag(sentence)
    # the reloaded LMs are the trained ones: the same features as a direct run of the original LM weights
    original = load_lm_features([str(lms[0]), str(lms[1])])
    torch.testing.assert_close(tagger.model.lm_features.embed([sentence])[0], original.embed([sentence])[0])
    assert main(["export", str(run), "--output", str(tmp_path / "onnx")]) == 2
    assert "--lm-features" in capsys.readouterr().err


def test_lm_features_refusals(lms, tmp_path, capsys):
    word_lm = tmp_path / "word"
    assert main(["train", "lm", "--train", str(TRAIN), "--valid", str(VALID), "--output", str(word_lm),
                 *LM[2:], "--tokenizer", "word"]) == 0
    damaged = tmp_path / "damaged"
    shutil.copytree(lms[0], damaged)
    (damaged / "model.safetensors").write_bytes(b"not weights")
    cases = [([str(tmp_path / "missing")], "missing"), ([str(word_lm)], "character LM"),
             ([str(lms[1])], "first run must read left to right"), ([str(lms[0]), str(lms[0])], "--reverse"),
             ([str(lms[0]), str(lms[1]), str(lms[1])], "one or two"), ([str(damaged)], "damaged")]
    for paths, message in cases:
        capsys.readouterr()
        code = main(["train", "tagger", "--train", NER, "--dev", NER, "--format", "conll", "--lm-features", *paths,
                     "--output", str(tmp_path / "t"), "--max-steps", "1", *SMALL])
        err = capsys.readouterr().err.strip()
        assert code == 2 and message in err and len(err.splitlines()) == 1, (paths, err)
    sentiment = str(FIXTURES / "classify" / "sentiment.tsv")
    assert main(["train", "classifier", "--train", sentiment, "--dev", sentiment, "--format", "tsv", "--arch",
                 "pooled", "--lm-features", str(lms[0]), "--output", str(tmp_path / "c")]) == 2
    assert "use --arch lstm" in capsys.readouterr().err


def test_lm_reverse_trains_on_the_reversed_stream(lms, tmp_path, monkeypatch, capsys):
    assert reverse_lines(["ab c", "de"]) == ["ed", "c ba"]
    seen = {}
    task = lm_pipeline.LanguageModelingTask

    def spy(model, train_ids, *args, **kwargs):
        seen["train"] = train_ids
        return task(model, train_ids, *args, **kwargs)

    monkeypatch.setattr(lm_pipeline, "LanguageModelingTask", spy)
    run = train_lm_run(tmp_path / "bwd", "--reverse", "--max-steps", "1")
    trained = load_lm(run)
    lines = read_lines(TRAIN)
    expected = encode_lines([list(line[::-1]) for line in reversed(lines)], trained.vocab)
    train = seen["train"]                      # the prepared split's shards, read by position
    assert torch.equal(torch.from_numpy(train.read(0, len(train)).astype("int64")), expected)
    assert json.loads((run / "config.json").read_text())["data"]["reverse"] is True
    # evaluation reads its text reversed too: the file as the model reads it, scored by evaluate_ids
    text = "\n".join(read_lines(VALID)[:5]) + "\n"
    by_text = trained.evaluate_text(text)
    by_ids = trained.evaluate_ids(encode_lines([list(line) for line in reverse_lines(text.splitlines())],
                                               trained.vocab), batch_size=1)
    assert by_text["loss"] == pytest.approx(by_ids["loss"])
    capsys.readouterr()
    assert main(["generate", str(run), "--prompt", "a", "--max-tokens", "3"]) == 2
    assert "--reverse" in capsys.readouterr().err
    assert main(["export", str(run), "--output", str(tmp_path / "onnx")]) == 2
    assert "--reverse" in capsys.readouterr().err and not (tmp_path / "onnx").exists()
    assert main(["train", "lm", "--train", str(TRAIN), "--valid", str(VALID), "--output", str(tmp_path / "w"),
                 "--tokenizer", "word", "--reverse", "--max-steps", "1"]) == 2
    assert "--tokenizer char" in capsys.readouterr().err


def test_lm_features_classifier_cli_round_trip(lms, tmp_path):
    sentiment = str(FIXTURES / "classify" / "sentiment.tsv")
    run = tmp_path / "classifier"
    assert main(["train", "classifier", "--train", sentiment, "--dev", sentiment, "--format", "tsv", "--arch", "lstm",
                 "--no-lowercase", "--lm-features", str(lms[0]), str(lms[1]), "--embedding-size", "8",
                 "--hidden-size", "8", "--max-steps", "10", "--eval-every", "10", "--epochs", "100", "--no-progress",
                 "--output", str(run)]) == 0
    classifier = load_classifier(run)
    texts = ["a fine film , warm and funny", "a dull , lifeless mess", "Zürich ☃"]
    first = [p.probabilities for p in classifier.classify(texts)]
    assert [p.probabilities for p in load_classifier(run).classify(texts)] == first
    # the classifier's LM features are the extractor's for the document's tokens
    vocabulary = classifier.vocabulary
    encoded = document_features(classifier.model, vocabulary.encode_all([Document(texts[0], None, 1)]))
    direct = load_lm_features([str(lms[0]), str(lms[1])]).embed([texts[0].split()])[0]
    torch.testing.assert_close(encoded[0].lm.float(), direct.to(LM_FEATURE_DTYPE).float())
