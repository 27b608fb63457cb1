"""Sequence to sequence from the command line and the Python API, end to end on the synthetic fixture
pairs: every model trains, evaluates, translates and summarizes; save/load, resume, attention heat
maps, and the bad inputs of the issue."""

import io
import json
from pathlib import Path

import pytest

import seqlab
from seqlab.cli.main import main
from seqlab.decoding.search import SearchOptions
from seqlab.families.seq2seq.parallel import Pair

FIXTURES = Path(__file__).parent / "fixtures" / "seq2seq"
SMALL = ["--embedding-size", "32", "--dropout", "0", "--batch-size", "16",
         "--eval-batch-size", "40", "--lr", "5e-3", "--schedule", "constant", "--no-progress"]
MODELS = {
    "rnn": ["--arch", "rnn", "--hidden-size", "32", "--epochs", "2"],
    "lstm-dot-bi": ["--arch", "lstm", "--hidden-size", "32", "--attention", "dot", "--bidirectional", "--epochs", "12"],
    "gru-bilinear": ["--arch", "gru", "--hidden-size", "32", "--attention", "bilinear", "--epochs", "2"],
    "gru-additive-tied": ["--arch", "gru", "--hidden-size", "32", "--attention", "additive", "--tie-embeddings",
                          "--epochs", "2"],
    "transformer": ["--arch", "transformer", "--num-layers", "1", "--num-heads", "2", "--ff-size", "64",
                    "--epochs", "2"],
    "lm": ["--arch", "lm", "--shared-vocab", "--lm-loss", "all", "--num-layers", "1", "--num-heads", "2",
           "--ff-size", "64", "--epochs", "2"],
}


def aligned(split: str) -> list[str]:
    return [f"--{split}-src", str(FIXTURES / f"{split}.src"), f"--{split}-tgt", str(FIXTURES / f"{split}.tgt")]


def train(tmp_path, name: str, *options) -> Path:
    run = tmp_path / name
    assert main(["train", "seq2seq", *aligned("train"), *aligned("dev"), *aligned("test"), "--output", str(run),
                 *SMALL, *options]) == 0
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("seq2seq-runs")
    return {name: train(folder, name, *options) for name, options in MODELS.items()}


@pytest.mark.parametrize("name", list(MODELS))
def test_every_model_trains_evaluates_translates_and_summarizes(runs, name, tmp_path, capsys, monkeypatch):
    run = runs[name]
    for file in ("config.json", "vocab.json", "tokenizer.json", "model.safetensors", "metrics.jsonl", "curves.png"):
        assert (run / file).exists(), file
    hypotheses = tmp_path / "out.txt"
    assert main(["evaluate", str(run), "--src", str(FIXTURES / "test.src"), "--tgt", str(FIXTURES / "test.tgt"),
                 "--json", "--beam", "2", "--hypotheses", str(hypotheses)]) == 0
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert figures["pairs"] == 40 and figures["beam"] == 2
    for metric in ("bleu", "chrf", "rouge1", "rouge2", "rougeL"):
        assert 0 <= figures[metric] <= 100
    assert figures["perplexity"] > 1
    assert len(hypotheses.read_text().splitlines()) == 40
    monkeypatch.setattr("sys.stdin", io.StringIO("der hund sieht .\nder katze klein der ball mag .\n"))
    assert main(["translate", str(run), "-", "--beam", "3"]) == 0
    translated = capsys.readouterr().out.splitlines()
    assert len(translated) == 2
    model = seqlab.load(run)
    assert isinstance(model, seqlab.TrainedSeq2Seq)
    assert model.translate(["der hund sieht .", "der katze klein der ball mag ."], beam=3) == translated
    assert main(["summarize", str(run), str(FIXTURES / "dev.src"), "--beam", "1", "--output-format", "json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["line"] for r in rows] == list(range(1, 41))
    assert [r["text"] for r in rows] == model.summarize((FIXTURES / "dev.src").read_text().splitlines(), beam=1)


def test_an_attention_model_learns_the_toy_language_and_draws_its_alignment(runs, tmp_path, capsys):
    """The bidirectional LSTM with dot attention translates the synthetic test set well, and the heat
    map of a sentence is written, one PNG per input line."""
    run = runs["lstm-dot-bi"]
    assert main(["evaluate", str(run), "--src", str(FIXTURES / "test.src"), "--tgt", str(FIXTURES / "test.tgt")]) == 0
    out = capsys.readouterr().out
    bleu = float(out.split("BLEU:")[1].split()[0])
    assert bleu > 60, out
    assert "perplexity:" in out and "ROUGE F1:" in out
    source = tmp_path / "in.txt"
    source.write_text("der hund klein der katze sieht .\nder mann mag der ball .\n")
    assert main(["translate", str(run), str(source), "--attention-dir", str(tmp_path / "maps")]) == 0
    assert sorted(p.name for p in (tmp_path / "maps").iterdir()) == ["0001.png", "0002.png"]
    model = seqlab.load(run)
    output = model.generate(["der hund klein der katze sieht ."], beam=2, attention=True)[0]
    assert len(output.attention) == len(output.tokens) + output.finished
    assert all(abs(sum(row) - 1) < 1e-4 for row in output.attention)
    assert len(output.attention[0]) == len(output.source_tokens) == 7
    assert model.plot_attention(output, tmp_path / "one.png").stat().st_size > 1000


def test_a_file_of_pairs_trains_and_evaluates_like_aligned_files(tmp_path, capsys):
    run = tmp_path / "paired"
    fields = ["--format", "jsonl", "--source-field", "email", "--target-field", "subject"]
    assert main(["train", "seq2seq", "--train", str(FIXTURES / "train.jsonl"), "--dev", str(FIXTURES / "dev.jsonl"),
                 *fields, "--arch", "gru", "--output", str(run), *SMALL, "--epochs", "1"]) == 0
    assert main(["evaluate", str(run), str(FIXTURES / "test.jsonl"), "--json", "--beam", "1"]) == 0
    paired = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main(["evaluate", str(run), "--src", str(FIXTURES / "test.src"), "--tgt", str(FIXTURES / "test.tgt"),
                 "--json", "--beam", "1"]) == 0
    separate = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert paired["bleu"] == separate["bleu"] and paired["perplexity"] == pytest.approx(separate["perplexity"])
    assert main(["summarize", str(run), str(FIXTURES / "test.jsonl"), "--input-format", "jsonl", "--beam", "1"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 40
    tsv = tmp_path / "tsv"
    assert main(["train", "seq2seq", "--train", str(FIXTURES / "train.tsv"), "--dev", str(FIXTURES / "dev.tsv"),
                 "--format", "tsv", "--arch", "gru", "--output", str(tsv), *SMALL, "--epochs", "1"]) == 0


def test_shared_bpe_and_the_python_api(tmp_path):
    config = seqlab.resolve_seq2seq_config(overrides={
        "train_src": str(FIXTURES / "train.src"), "train_tgt": str(FIXTURES / "train.tgt"),
        "dev_src": str(FIXTURES / "dev.src"), "dev_tgt": str(FIXTURES / "dev.tgt"), "tokenizer": "bpe",
        "bpe_vocab_size": 300, "shared_vocab": True, "share_embeddings": True, "tie_embeddings": True,
        "arch": "gru", "attention": "dot", "embedding_size": 32, "hidden_size": 32, "epochs": 1,
        "output": str(tmp_path / "bpe"), "progress": False})
    results = seqlab.train_seq2seq(config)
    assert results["valid"]["perplexity"] > 1
    model = seqlab.load(tmp_path / "bpe")
    assert model.vocabulary.source_vocab is model.vocabulary.target_vocab
    assert model.model.source_embedding is model.model.target_embedding
    out = model.translate("der hund sieht .")
    assert isinstance(out, str)
    vocab = json.loads((tmp_path / "bpe" / "vocab.json").read_text())
    assert vocab["shared"] and "target" not in vocab


@pytest.mark.slow
def test_resume_from_the_command_line_continues_into_the_next_epoch(tmp_path):
    """(Save -> load against the model in memory, and resume against an uninterrupted run:
    tests/test_roundtrips.py.)"""
    run = train(tmp_path, "resume", "--arch", "gru", "--attention", "dot", "--epochs", "1")
    steps = [json.loads(line)["step"] for line in (run / "train_log.jsonl").read_text().splitlines()]
    assert main(["train", "seq2seq", "--output", str(run), "--resume", "--epochs", "2", "--no-progress"]) == 0
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    periodic = [(r["epoch"], r["step"]) for r in records if not r.get("final")]
    assert periodic == [(1, steps[-1]), (2, 2 * steps[-1])]               # one evaluation per epoch, the same steps
    assert json.loads((run / "train_log.jsonl").read_text().splitlines()[-1])["step"] == 2 * steps[-1]


# ---------------------------------------------------------------------------- bad input, each a clear error

def test_source_and_target_of_different_lengths_are_refused_with_both_counts(tmp_path, capsys):
    short = tmp_path / "short.tgt"
    short.write_text("".join(f"{line}\n" for line in (FIXTURES / "train.tgt").read_text().splitlines()[:250]))
    code = main(["train", "seq2seq", "--train-src", str(FIXTURES / "train.src"), "--train-tgt", str(short),
                 *aligned("dev"), "--output", str(tmp_path / "x"), *SMALL])
    err = capsys.readouterr().err
    assert code == 2 and "has 300 lines but" in err and "has 250" in err


def test_an_empty_source_line_is_refused_with_its_line(tmp_path, capsys):
    source = tmp_path / "train.src"
    lines = (FIXTURES / "train.src").read_text().splitlines()
    lines[6] = "   "
    source.write_text("\n".join(lines) + "\n")
    code = main(["train", "seq2seq", "--train-src", str(source), "--train-tgt", str(FIXTURES / "train.tgt"),
                 *aligned("dev"), "--output", str(tmp_path / "x"), *SMALL])
    assert code == 2 and f"{source}:7: empty line" in capsys.readouterr().err


def test_an_empty_line_to_translate_is_refused(runs, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("der hund sieht .\n\nder mann mag der ball .\n")
    assert main(["translate", str(runs["rnn"]), str(source)]) == 2
    assert f"{source}:2: empty line" in capsys.readouterr().err
    with pytest.raises(seqlab.SeqlabError, match="input 2 of 2 is empty"):
        seqlab.load(runs["rnn"]).translate(["der hund sieht .", " "])


def test_a_source_over_the_limit_is_truncated_with_a_warning_or_rejected(runs, tmp_path, capsys):
    long = " ".join(["der hund klein"] * 20) + " sieht ."            # 62 tokens; the transformer reads 32
    run = runs["transformer"]
    config = json.loads((run / "config.json").read_text())
    assert config["data"]["max_source_length"] == config["model"]["max_positions"]
    source = tmp_path / "long.txt"
    source.write_text(f"der hund sieht .\n{' '.join(['der hund'] * 200)} .\n")
    assert main(["translate", str(run), str(source), "--beam", "1"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 2
    assert "warning" in captured.err and "truncated 1 of 2 sources to their first 256 tokens" in captured.err
    assert main(["translate", str(run), str(source), "--long-source", "reject"]) == 2
    assert f"{source}:2: the source is 401 tokens, longer than the model's 256" in capsys.readouterr().err
    with pytest.warns(UserWarning, match="truncated 1 of 1"):
        seqlab.load(run).translate([long * 5], beam=1)
    with pytest.warns(UserWarning, match="truncated 1 of 2"):
        figures = seqlab.load(run).evaluate_pairs([Pair("der hund sieht .", "the dog sees ."),
                                                   Pair(long * 5, "the dog sees .")], SearchOptions(beam=1))
    assert figures["truncated_sources"] == 1 and figures["pairs"] == 2


def test_decoding_that_never_ends_stops_at_the_maximum_length(runs):
    model = seqlab.load(runs["rnn"])
    output = model.generate(["der hund sieht ."], beam=1, max_length=3)[0]
    assert len(output.tokens) + output.finished <= 3
    output = model.generate(["der hund sieht ."], beam=4, max_length=2)[0]
    assert len(output.tokens) + output.finished <= 2


def test_a_beam_larger_than_the_vocabulary_is_refused(runs, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("der hund sieht .\n")
    assert main(["translate", str(runs["rnn"]), str(source), "--beam", "500"]) == 2
    assert "--beam 500 is larger than the" in capsys.readouterr().err


def test_bad_options_are_refused(tmp_path, capsys):
    cases = [
        (["--arch", "lm"], "add --shared-vocab"),
        (["--arch", "transformer", "--attention", "dot"], "--attention dot is for rnn"),
        (["--share-embeddings"], "--share-embeddings needs one vocabulary"),
        (["--arch", "gru", "--attention", "dot", "--hidden-size", "8", "--bidirectional"], None),
        (["--arch", "transformer", "--hidden-size", "8"], "--hidden-size applies to --arch rnn or lstm or gru only"),
        (["--arch", "gru", "--lm-loss", "all"], "--lm-loss applies to --arch lm only, not gru"),
        (["--train", str(FIXTURES / "train.jsonl")], "not both"),
    ]
    for options, message in cases:
        code = main(["train", "seq2seq", *aligned("train"), *aligned("dev"), "--output", str(tmp_path / "bad"),
                     *SMALL, "--epochs", "1", "--overwrite", *options])
        err = capsys.readouterr().err
        if message is None:
            assert code == 0
        else:
            assert code == 2 and message in err, err
    code = main(["train", "seq2seq", "--train-src", str(FIXTURES / "train.src"), *aligned("dev"),
                 "--output", str(tmp_path / "bad2")])
    assert code == 2 and "go together" in capsys.readouterr().err
    code = main(["train", "seq2seq", "--train", str(FIXTURES / "train.jsonl"), "--dev", str(FIXTURES / "dev.jsonl"),
                 "--output", str(tmp_path / "bad3")])
    assert code == 2 and "source" in capsys.readouterr().err


def test_evaluate_needs_both_sides_and_a_corrupted_model_is_reported(runs, tmp_path, capsys):
    run = runs["rnn"]
    assert main(["evaluate", str(run), "--src", str(FIXTURES / "test.src")]) == 2
    assert "--src and --tgt go together" in capsys.readouterr().err
    assert main(["evaluate", str(run)]) == 2
    assert "needs --src FILE --tgt FILE" in capsys.readouterr().err
    broken = tmp_path / "broken"
    broken.mkdir()
    for file in run.iterdir():
        if file.is_file():
            (broken / file.name).write_bytes(file.read_bytes())
    (broken / "model.safetensors").write_bytes(b"\x00" * 50)
    assert main(["translate", str(broken), str(FIXTURES / "test.src")]) == 2
    assert "corrupted" in capsys.readouterr().err


def test_output_cut_short_by_its_reader_is_not_an_error(runs, monkeypatch):
    """`seqlab translate ... | head -1`: the closed pipe ends the command quietly, with status 0."""
    class ClosedPipe(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr("sys.stdout", ClosedPipe())
    assert main(["translate", str(runs["rnn"]), str(FIXTURES / "test.src"), "--beam", "1"]) == 0
