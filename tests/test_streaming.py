"""tag, classify, translate, summarize and evaluate read their input in chunks: the same output as
reading it whole, in every input format; the first output before standard input is closed; bad
bytes, a byte-order mark and too-long lines on standard input; evaluation in chunks equal to
evaluation of the whole file, for every task. Tiny models trained on the fixtures, once."""

import io
import json
import os
import select
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import seqlab
from conftest import TEST, tiny_config
from seqlab.cli.main import main
from seqlab.data.documents import read_documents, read_texts
from seqlab.data.readers import read_stream
from seqlab.data.tags import detect_scheme, spans
from seqlab.decoding.search import SearchOptions
from seqlab.families.classifier.task import ClassificationTask
from seqlab.families.lm.pipeline import train_lm
from seqlab.families.seq2seq.parallel import Pair, read_aligned, read_paired
from seqlab.families.tagger.conll import read_labelled
from seqlab.families.tagger.pipeline import prepare
from seqlab.families.tagger.task import TaggingTask
from seqlab.metrics import confusions

FIXTURES = Path(__file__).parent / "fixtures"
SMALL = ["--embedding-size", "16", "--hidden-size", "16", "--dropout", "0", "--lr", "0.02", "--schedule",
         "constant", "--no-progress", "--eval-every", "1000"]
SOURCES = (FIXTURES / "seq2seq" / "dev.src").read_text().splitlines()
TARGETS = (FIXTURES / "seq2seq" / "dev.tgt").read_text().splitlines()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A POS tagger, a NER tagger with a CRF, an LSTM classifier, a GRU translator with attention and
    two language models, each trained for a few steps."""
    folder = tmp_path_factory.mktemp("streaming-runs")
    pos, ner = str(FIXTURES / "tagging.conllu"), str(FIXTURES / "ner.conll")
    tsv = str(FIXTURES / "classify" / "sentiment.tsv")
    commands = {
        "pos": ["tagger", "--train", pos, "--dev", pos, "--max-steps", "30", "--batch-size", "2", *SMALL],
        "ner": ["tagger", "--train", ner, "--dev", ner, "--format", "conll", "--crf", "--max-steps", "30",
                "--batch-size", "2", *SMALL],
        "clf": ["classifier", "--train", tsv, "--dev", tsv, "--arch", "lstm", "--max-steps", "20", "--batch-size",
                "4", *SMALL],
        "s2s": ["seq2seq", "--train-src", str(FIXTURES / "seq2seq" / "train.src"), "--train-tgt",
                str(FIXTURES / "seq2seq" / "train.tgt"), "--dev-src", str(FIXTURES / "seq2seq" / "dev.src"),
                "--dev-tgt", str(FIXTURES / "seq2seq" / "dev.tgt"), "--arch", "gru", "--attention", "dot",
                "--max-steps", "20", "--batch-size", "16", *SMALL]}
    for name, command in commands.items():
        assert main(["train", *command, "--output", str(folder / name)]) == 0, name
    for arch, tokenizer in (("lstm", "word"), ("transformer", "char")):
        train_lm(tiny_config(folder / f"lm-{arch}", arch, tokenizer, max_steps=2, progress=False))
    return {name: folder / name for name in (*commands, "lm-lstm", "lm-transformer")}


def output_of(capsys, argv: list[str]) -> str:
    assert main(argv) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def same_lines(chunked: str, whole: str) -> None:
    """Line by line equal, but for the last digit of a printed probability or score, which a different
    batch (another chunk's neighbours, other padding) may round the other way."""
    a, b = chunked.splitlines(), whole.splitlines()
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        if x != y:
            fx, fy = x.replace("\t", " ").split(" "), y.replace("\t", " ").split(" ")
            assert len(fx) == len(fy) and all(u == v or abs(float(u.strip('",}{')) - float(v.strip('",}{'))) <= 2e-4
                                              for u, v in zip(fx, fy, strict=True)), (x, y)


# ---------------------------------------------------------------- the same output as reading it whole

@pytest.mark.parametrize("input_format, output_format", [("text", "conll"), ("text", "json"), ("conllu", "conll"),
                                                         ("conll", "json")])
def test_streaming_tag_output_equals_the_whole_input_output(runs, tmp_path, capsys, input_format, output_format):
    run = runs["ner" if input_format == "conll" else "pos"]
    if input_format == "text":
        path = tmp_path / "in.txt"
        path.write_text("The cat sat .\n\nDogs bark\floudly .\nThe dog sat on the mat .\n" * 5)
        sentences = [line.split() for line in path.read_text().splitlines()]
    else:
        path = FIXTURES / ("tagging.conllu" if input_format == "conllu" else "ner.conll")
        sentences = [s.tokens for s in read_labelled(path, input_format, None if input_format == "conllu" else 0)]
    tagger = seqlab.load(run)
    tagged = tagger.tag_sentences(sentences)                  # the whole input at once, as seqlab tag did
    whole = []
    for tokens, tags in zip(sentences, tagged, strict=True):
        if output_format == "json":
            record = {"tokens": tokens, "tags": [t for t, _ in tags], "probabilities": [round(p, 4) for _, p in tags]}
            if tagger.scheme != "none":
                record["entities"] = [{"type": k, "start": s, "end": e, "text": " ".join(tokens[s:e])}
                                      for k, s, e in spans(record["tags"])]
            whole.append(json.dumps(record, ensure_ascii=False) + "\n")
        else:
            whole.extend([*(f"{t}\t{label}\t{p:.4f}\n" for t, (label, p) in zip(tokens, tags, strict=True)), "\n"])
    argv = ["tag", str(run), str(path), "--input-format", input_format, "--output-format", output_format]
    assert output_of(capsys, argv) == "".join(whole)              # one chunk: byte for byte
    same_lines(output_of(capsys, [*argv, "--chunk-size", "2", "--batch-size", "3"]), "".join(whole))


def write_documents(folder: Path) -> dict[str, Path]:
    """The classification fixture's documents in every format the classifier reads."""
    rows = [line.split("\t")[1:3] for line in (FIXTURES / "classify" / "sentiment.tsv").read_text().splitlines()[1:]]
    files = {"text": "\n".join(text for text, _ in rows),
             "tsv": "text\tlabel\n" + "\n".join(f"{text}\t{label}" for text, label in rows),
             "csv": "text,label\n" + "\n".join(f'"{text}",{label}' for text, label in rows),
             "jsonl": "\n".join(json.dumps({"text": text, "label": label}) for text, label in rows),
             "labeled-lines": "\n".join(f"{label} {text}" for text, label in rows)}
    paths = {fmt: folder / f"documents.{fmt}" for fmt in files}
    for fmt, text in files.items():
        paths[fmt].write_text(text + "\n")
    return {**paths, "sst-tree": FIXTURES / "classify" / "sst.txt"}


@pytest.mark.parametrize("input_format", ["text", "tsv", "csv", "jsonl", "labeled-lines", "sst-tree"])
def test_streaming_classify_output_equals_the_whole_input_output(runs, tmp_path, capsys, input_format):
    path = write_documents(tmp_path)[input_format]
    classifier = seqlab.load(runs["clf"])
    data = classifier.config.data
    documents = read_texts(path) if input_format == "text" else \
        read_documents(path, input_format, data.columns, labelled=False)
    predictions = classifier.classify_documents(documents)
    whole = "\t".join(["label", "p(neg)", "p(pos)"]) + "\n" + "".join(
        "\t".join([p.label, *(f"{v:.4f}" for v in p.probabilities.values())]) + "\n" for p in predictions)
    argv = ["classify", str(runs["clf"]), str(path), "--input-format", input_format]
    assert output_of(capsys, argv) == whole
    chunked = output_of(capsys, [*argv, "--chunk-size", "3", "--batch-size", "2"])
    assert chunked.count("label\t") == 1                                # the header once
    same_lines(chunked, whole)


@pytest.mark.parametrize("command, input_format", [("translate", "text"), ("translate", "tsv"),
                                                   ("summarize", "jsonl")])
def test_streaming_translate_and_summarize_output_equals_the_whole_input_output(runs, tmp_path, capsys, command,
                                                                               input_format):
    path = tmp_path / f"pairs.{input_format}"
    path.write_text({"text": "\n".join(SOURCES),
                     "tsv": "source\ttarget\n" + "\n".join(f"{s}\t{t}" for s, t in zip(SOURCES, TARGETS, strict=True)),
                     "jsonl": "\n".join(json.dumps({"source": s, "target": t})
                                        for s, t in zip(SOURCES, TARGETS, strict=True))}[input_format] + "\n")
    model = seqlab.load(runs["s2s"])
    pairs = read_aligned(path, None) if input_format == "text" else read_paired(path, input_format,
                                                                                with_targets=False)
    outputs = model.generate_pairs(pairs, SearchOptions(beam=2))
    whole = "".join(json.dumps({"line": p.line, "text": o.text, "tokens": o.tokens, "score": round(o.score, 4),
                                "normalized_score": round(o.normalized, 4), "finished": o.finished},
                               ensure_ascii=False) + "\n" for p, o in zip(pairs, outputs, strict=True))
    argv = [command, str(runs["s2s"]), str(path), "--input-format", input_format, "--beam", "2",
            "--output-format", "json"]
    assert output_of(capsys, argv) == whole
    chunked = [json.loads(line) for line in output_of(capsys, [*argv, "--chunk-size", "3"]).splitlines()]
    expected = [json.loads(line) for line in whole.splitlines()]
    assert [(r["line"], r["text"]) for r in chunked] == [(r["line"], r["text"]) for r in expected]
    assert [r["score"] for r in chunked] == pytest.approx([r["score"] for r in expected], abs=2e-4)


@pytest.mark.parametrize("command, run, name, fmt", [("tag", "pos", "tagging.conllu", "conllu"),
                                                     ("tag", "ner", "ner.conll", "conll"),
                                                     ("translate", "s2s", "seq2seq/dev.tsv", "tsv"),
                                                     ("classify", "clf", "classify/sentiment.csv", "csv"),
                                                     ("classify", "clf", "classify/sentiment.tsv", "tsv")])
def test_streaming_input_format_auto_reads_a_file_by_its_extension(runs, capsys, command, run, name, fmt):
    """--input-format auto (the default): a .conllu, .conll, .tsv, .csv or .jsonl file is read in its format
    (its other columns, header and targets never taken for input); another name, or standard input, as text."""
    path = str(FIXTURES / name)
    auto = output_of(capsys, [command, str(runs[run]), path])
    assert auto == output_of(capsys, [command, str(runs[run]), path, "--input-format", fmt])
    assert auto != output_of(capsys, [command, str(runs[run]), path, "--input-format", "text"])


# ---------------------------------------------------------------- standard input

@pytest.mark.slow
@pytest.mark.parametrize("command, run, line, lines", [("tag", "pos", "The cat sat .\n", 1),
                                                       ("classify", "clf", "a fine film\n", 2),
                                                       ("translate", "s2s", "der hund sieht .\n", 1)])
def test_streaming_first_output_arrives_before_standard_input_is_closed(runs, command, run, line, lines):
    """One line written to a live pipe, its output read back while the pipe stays open."""
    env = {**os.environ, "PYTHONPATH": str(Path(seqlab.__file__).parents[1]), "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-m", "seqlab", command, str(runs[run]), "-", "--threads", "1"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        process.stdin.write(line.encode())
        process.stdin.flush()
        out = b""
        while out.count(b"\n") < lines:                     # classify: the header, then the row
            readable, _, _ = select.select([process.stdout], [], [], 120)
            if not readable:
                process.kill()
                pytest.fail(f"no output within 120 s of a line on a pipe that is still open: "
                            f"{process.stderr.read().decode()[-2000:]}")
            out += os.read(process.stdout.fileno(), 1 << 16)
        assert process.poll() is None                            # still reading: its stdin is open
        assert out.decode().splitlines()[lines - 1].strip()
        process.stdin.close()
        assert process.wait(60) == 0, process.stderr.read().decode()
    finally:
        if process.poll() is None:
            process.kill()


def with_stdin(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))


BAD_INPUTS = {  # command, extra options, a good first line (or two)
    "tag text": ("tag", "pos", [], b"The cat sat .\n"),
    "tag conllu": ("tag", "pos", ["--input-format", "conllu"], b"1\tThe\tthe\tDET\t_\t_\t_\t_\t_\t_\n"),
    "tag conll": ("tag", "ner", ["--input-format", "conll"], b"EU B-ORG\n"),
    "classify text": ("classify", "clf", [], b"a fine film\n"),
    "classify tsv": ("classify", "clf", ["--input-format", "tsv"], b"text\tlabel\n"),
    "classify csv": ("classify", "clf", ["--input-format", "csv"], b"text,label\n"),
    "classify jsonl": ("classify", "clf", ["--input-format", "jsonl"], b'{"text": "a fine film"}\n'),
    "classify labeled-lines": ("classify", "clf", ["--input-format", "labeled-lines"], b"pos a fine film\n"),
    "classify sst-tree": ("classify", "clf", ["--input-format", "sst-tree"], b"(3 (2 fine) (3 film))\n"),
    "translate text": ("translate", "s2s", [], b"der hund sieht .\n"),
    "translate tsv": ("translate", "s2s", ["--input-format", "tsv"], b"source\ttarget\n"),
    "summarize jsonl": ("summarize", "s2s", ["--input-format", "jsonl"], b'{"source": "der hund sieht ."}\n'),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
@pytest.mark.parametrize("bad", [b"caf\xe9 \xff", b"a\x00b"], ids=["not-utf8", "nul"])
def test_streaming_bad_bytes_on_standard_input_are_one_line_naming_the_line(runs, monkeypatch, capsys, case, bad):
    command, run, options, first = BAD_INPUTS[case]
    with_stdin(monkeypatch, first + bad + b"\n")
    assert main([command, str(runs[run]), "-", *options]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    reason = "is not valid UTF-8 (byte" if bad[-1] == 0xff else "holds a NUL byte"
    assert err.startswith(f"seqlab: error: standard input:2 {reason}"), err


@pytest.mark.parametrize("command, run, line", [("tag", "pos", b"The cat sat .\n"),
                                                ("classify", "clf", b"a fine film\n"),
                                                ("translate", "s2s", b"der hund sieht .\n")])
def test_streaming_a_byte_order_mark_on_standard_input_is_dropped(runs, monkeypatch, capsys, command, run, line):
    outputs = []
    for data in (line, b"\xef\xbb\xbf" + line):
        with_stdin(monkeypatch, data)
        outputs.append(output_of(capsys, [command, str(runs[run]), "-", "--output-format", "json"]))
    assert outputs[0] == outputs[1] and "\ufeff" not in outputs[1]


# ---------------------------------------------------------------- too long

def test_streaming_a_too_long_input_is_cut_with_a_warning_or_refused(runs, tmp_path, monkeypatch, capsys):
    with_stdin(monkeypatch, b"The cat sat on the mat .\nDogs bark\n")
    assert main(["tag", str(runs["pos"]), "-", "--max-input-length", "3"]) == 0
    out, err = capsys.readouterr()
    assert [len(sentence.splitlines()) for sentence in out.split("\n\n")[:2]] == [3, 2]
    assert "standard input:1: the sentence is 7 tokens; read its first 3 tokens" in err
    assert "standard input: truncated 1 of 2 sentences to their first 3 tokens (--max-input-length; line 1)" in err
    with_stdin(monkeypatch, b"Dogs bark\nThe cat sat on the mat .\n")
    assert main(["tag", str(runs["pos"]), "-", "--max-input-length", "3", "--long-input", "reject"]) == 2
    assert ("standard input:2: the sentence is 7 tokens, longer than the model's 3"
            in capsys.readouterr().err.splitlines()[-1])
    # a line over the characters read per line (64 per token, at least 65,536) is cut where the reading stopped
    long = tmp_path / "long.txt"
    long.write_text("a fine film\n" + "good " * 20_000 + "\n")
    assert main(["classify", str(runs["clf"]), str(long), "--max-input-length", "5"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 3 and f"{long}:2: the document is longer than 65,536 characters" in err
    assert main(["translate", str(runs["s2s"]), str(long), "--max-input-length", "5", "--long-source", "reject"]) == 2
    assert f"{long}:2: the source is longer than 65,536 characters" in capsys.readouterr().err
    assert seqlab.load(runs["s2s"]).input_limit().tokens == 10_000             # an RNN: a generous default
    with pytest.warns(UserWarning, match="truncated 1 of 2 documents to their first 5 tokens"):
        chunks = list(seqlab.load(runs["clf"]).classify_stream(long, max_input_length=5))
    assert [len(c) for c in chunks] == [2]


# ---------------------------------------------------------------- evaluate in chunks = the whole file

def whole_tagger_figures(tagger, path, fmt):
    """`TrainedTagger.evaluate_file` as it was: the whole file read, tagged and counted at once."""
    sentences = read_labelled(path, fmt, None, "evaluation file")
    if tagger.scheme != "none":
        prepare(sentences, detect_scheme((s.labels for s in sentences), prefer=tagger.file_scheme), tagger.scheme,
                str(path))
    task = TaggingTask(tagger.vocabulary, [], sentences, None, batch_size=1, eval_batch_size=64, seed=0)
    task.keep_predictions = True
    result = task.summarize(task.evaluate(tagger.model, task.valid_data, tagger.device))
    return result, confusions(*task.predictions, top=10)


@pytest.mark.parametrize("run, fixture, fmt", [("pos", "tagging.conllu", "conllu"), ("ner", "ner.conll", "conll")])
def test_streaming_tagger_evaluation_in_chunks_equals_the_whole_file(runs, tmp_path, run, fixture, fmt):
    path = tmp_path / fixture
    path.write_text(((FIXTURES / fixture).read_text().rstrip("\n") + "\n\n") * 3)      # several chunks
    tagger = seqlab.load(runs[run])
    whole, mistakes = whole_tagger_figures(tagger, path, fmt)
    chunked = tagger.evaluate_file(path, chunk_size=2)
    assert chunked["loss"] == pytest.approx(whole.pop("loss"), rel=1e-4, abs=1e-6)    # other batches
    assert {k: chunked[k] for k in whole} == whole                          # counts, accuracy, F1 per type
    assert [(c["gold"], c["predicted"], c["count"]) for c in chunked["confusions"]] == mistakes


def test_streaming_classifier_evaluation_in_chunks_equals_the_whole_file(runs):
    classifier = seqlab.load(runs["clf"])
    path, data = FIXTURES / "classify" / "sentiment.tsv", classifier.config.data
    documents = read_documents(path, "tsv", data.columns, "evaluation file")
    encoded = classifier.vocabulary.encode_all(documents, path, "evaluation file")
    task = ClassificationTask(classifier.vocabulary, [], encoded, None, batch_size=1, eval_batch_size=128, seed=0)
    whole = task.summarize(task.evaluate(classifier.model, task.valid_data, classifier.device))
    chunked = classifier.evaluate_file(path, chunk_size=5)
    assert chunked["loss"] == pytest.approx(whole.pop("loss"), rel=1e-4, abs=1e-6)
    assert {k: chunked[k] for k in whole} == whole and chunked["truncated"] == 0


def test_streaming_seq2seq_evaluation_in_chunks_equals_the_whole_file(runs, tmp_path):
    model = seqlab.load(runs["s2s"])
    source, target = FIXTURES / "seq2seq" / "test.src", FIXTURES / "seq2seq" / "test.tgt"
    options = SearchOptions(beam=2)
    whole = model.evaluate_pairs(read_aligned(source, target, "evaluation file"), options)   # held whole, as before
    written = []
    chunked = model.evaluate_files(source, target, options=options, chunk_size=7, write_hypothesis=written.append)
    assert chunked["hypotheses"] == whole["hypotheses"] == written
    assert chunked["perplexity"] == pytest.approx(whole.pop("perplexity"), rel=1e-4)
    assert chunked["loss"] == pytest.approx(whole.pop("loss"), rel=1e-4, abs=1e-6)
    assert {k: chunked[k] for k in whole} == whole                     # BLEU, chrF, ROUGE to the last digit
    pairs = tmp_path / "test.jsonl"
    pairs.write_text("".join(json.dumps({"source": p.source, "target": p.target}) + "\n"
                             for p in read_aligned(source, target)))
    assert model.evaluate_files(pairs, fmt="jsonl", options=options, chunk_size=3)["bleu"] == chunked["bleu"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")              # nothing cut: no warning
        model.evaluate_pairs([Pair("der hund sieht .", "the dog sees .")], options)


@pytest.mark.parametrize("arch", ["lstm", "transformer"])
def test_streaming_language_model_evaluation_read_from_the_file_equals_the_whole_file(runs, arch):
    lm = seqlab.load(runs[f"lm-{arch}"])
    for batch_size in (1, 4):
        ids, characters = read_stream(TEST, lm.tokenizer, lm.vocab)
        whole = lm.evaluate_ids(ids, batch_size, characters=characters)
        assert lm.evaluate_file(TEST, batch_size) == whole                 # the same batches: equal, not close
