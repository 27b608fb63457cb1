"""The model card (`seqlab.cards.card`): written at the end of every training of every task, its datasheet
figures equal to hand counts of small files (a planted duplicate, a planted 13-gram overlap and a 12-gram
near miss, verbatim lines, labels), its evaluation equal to metrics.jsonl with bootstrap intervals, and
`seqlab card`, `seqlab.load(run).card`, --card-notes, canaries, audits and the bad inputs."""

import json
import shutil
from pathlib import Path

import pytest

import seqlab
from seqlab.cards.card import CARD_JSON, CARD_MD, read_card
from seqlab.cli.main import main

FIXTURES = Path(__file__).parent / "fixtures"
FAST = ["--no-progress", "--dropout", "0"]

LM_TRAIN = ["the cat sat on the mat", "a b c d e f g h i j k l m n o p", "the cat sat on the mat", "", "one two three"]
LM_VALID = ["x y c d e f g h i j k l m n o z", "one two three", "brand new words here"]      # a 13-gram; verbatim
LM_TEST = ["x y d e f g h i j k l m n o z w", "the cat sat on the mat"]                      # a 12-gram; verbatim


def conllu(sentences: list[list[tuple[str, str]]]) -> str:
    return "".join("".join(f"{i}\t{word}\t_\t{tag}\t_\t_\t_\t_\t_\t_\n" for i, (word, tag) in enumerate(s, 1)) + "\n"
                   for s in sentences)


TAG_TRAIN = [[("The", "DET"), ("dog", "NOUN"), ("runs", "VERB")], [("A", "DET"), ("cat", "NOUN"), ("sleeps", "VERB")],
             [("The", "DET"), ("dog", "NOUN"), ("runs", "VERB")], [("Dogs", "NOUN"), ("run", "VERB")]]
TAG_DEV = [[("The", "DET"), ("dog", "NOUN"), ("runs", "VERB")], [("A", "DET"), ("bird", "NOUN"), ("sings", "VERB")]]


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("card-runs")
    data = {name: write(folder / f"{name}.txt", "\n".join(lines) + "\n")
            for name, lines in (("train", LM_TRAIN), ("valid", LM_VALID), ("test", LM_TEST))}
    tag_train = write(folder / "train.conllu", conllu(TAG_TRAIN))
    tag_dev = write(folder / "dev.conllu", conllu(TAG_DEV))
    commands = {
        "lm": ["lm", "--train", data["train"], "--valid", data["valid"], "--test", data["test"],
               "--tokenizer", "word", "--hidden-size", "8", "--embedding-size", "8", "--max-steps", "2",
               "--batch-size", "2", "--seq-len", "4"],
        "tagger": ["tagger", "--train", tag_train, "--dev", tag_dev, "--test", tag_dev, "--embedding-size", "8",
                   "--hidden-size", "8", "--max-steps", "2", "--batch-size", "2"],
        "classifier": ["classifier", *(f"--{split}={FIXTURES / 'classify' / 'sentiment.tsv'}" for split in
                                       ("train", "dev", "test")),
                       "--arch", "gru", "--embedding-size", "8", "--hidden-size", "8", "--max-steps", "3",
                       "--batch-size", "8"],
        "seq2seq": ["seq2seq", *(f"--{split}-{side}={FIXTURES / 'seq2seq' / f'{split}.{side}'}" for split in
                                 ("train", "dev", "test") for side in ("src", "tgt")),
                    "--arch", "gru", "--embedding-size", "8", "--hidden-size", "8", "--max-steps", "2",
                    "--batch-size", "16", "--max-target-length", "12"],
    }
    for name, (task, *options) in commands.items():
        assert main(["train", task, *options, *FAST, "--output", str(folder / name)]) == 0
    return {name: folder / name for name in commands}


def card_of(run: Path) -> dict:
    return json.loads((run / CARD_JSON).read_text())


@pytest.mark.parametrize("task", ["lm", "tagger", "classifier", "seq2seq"])
def test_every_training_writes_a_card_of_its_run(runs, task):
    run = runs[task]
    card = card_of(run)
    markdown = (run / CARD_MD).read_text()
    for section in ("## Model details", "## Training data", "## Evaluation", "## Intended use",
                    "## Out-of-scope use", "## Ethical considerations", "## Caveats and recommendations"):
        assert section in markdown
    details = card["model_details"]
    assert details["task"] == task and details["parameters"] == seqlab.load(run).model.num_parameters()
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert details["steps"] == max(steps)
    assert details["tokens_seen"] > 0 and details["tokens_per_s"] > 0 and details["wall_time_s"] > 0
    assert details["device"].startswith("cpu") and details["command"].startswith(f"seqlab train {task}")
    assert details["precision"].startswith("fp32 (auto: ")      # tiny models train in fp32 on every CPU
    assert f"| precision | {details['precision']} |" in markdown
    config = json.loads((run / "config.json").read_text())
    assert details["config"]["model"] == config["model"]
    for name, sheet in card["training_data"]["files"].items():
        assert sheet["sha256"] == config["data_sha256"][name]
    final = {json.loads(line)["split"]: json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()
             if json.loads(line).get("final")}
    assert set(card["evaluation"]["final"]) == set(final)
    for split, figures in card["evaluation"]["final"].items():
        assert all(final[split][metric] == value for metric, value in figures.items())
    assert "{" not in markdown.split("## Training data")[1].replace("{digits", "")      # nothing left unfilled


@pytest.mark.parametrize("task, metrics", [("tagger", ["accuracy"]), ("classifier", ["accuracy", "macro_f1"]),
                                           ("seq2seq", ["bleu", "chrf"])])
def test_the_evaluation_has_bootstrap_intervals_around_the_run_figures(runs, task, metrics):
    card = card_of(runs[task])
    markdown = (runs[task] / CARD_MD).read_text()
    for split in ("valid", "test"):
        intervals = card["evaluation"]["intervals"][split]
        for metric in metrics:
            interval = intervals[metric]
            assert interval["low"] <= interval["value"] <= interval["high"] and interval["resamples"] == 1000
            if metric in card["evaluation"]["final"][split]:      # seq2seq training scores no BLEU: evaluate's
                assert interval["value"] == pytest.approx(card["evaluation"]["final"][split][metric], abs=1e-9)
            assert f"| {split} | {metric} |" in markdown
    assert card_of(runs["lm"])["evaluation"]["intervals"] == {}


def test_lm_datasheet_equals_hand_counts(runs):
    data = card_of(runs["lm"])["training_data"]
    train = data["files"]["train"]
    assert (train["units"], train["tokens"], train["types"]) == (4, 31, 24)     # the blank line is no line
    assert train["duplicates"] == {"count": 1, "share": 0.25}                    # the planted duplicate
    valid, test = data["contamination"]["valid"], data["contamination"]["test"]
    assert (valid["n"], valid["unit"]) == (13, "word")
    assert (valid["eval_lines"], valid["short_lines"], valid["verbatim"], valid["ngram"], valid["long_ngram"]) == \
        (3, 2, 1, 2, 1)                                        # the 13-gram, and "one two three" verbatim
    assert (test["eval_lines"], test["short_lines"], test["verbatim"], test["ngram"], test["long_ngram"]) == \
        (2, 1, 1, 1, 0)                                        # the 12-gram near miss is not contamination
    assert data["oov"]["valid"]["unseen_tokens"] == 7 and data["oov"]["valid"]["tokens"] == 23   # x y z; brand new ..
    markdown = (runs["lm"] / CARD_MD).read_text()
    assert "| valid | 3 | 2 | 1 (33.33%) | 2 (66.67%) [13-word] | 1 (100.00%) | 30.43% |" in markdown


def test_tagger_datasheet_counts_sentences_tags_and_verbatim_sentences(runs):
    data = card_of(runs["tagger"])["training_data"]
    assert data["unit"] == "sentences" and data["splits"]["train"]["units"] == 4
    assert data["splits"]["train"]["labels"] == {"NOUN": 4, "VERB": 4, "DET": 3}
    assert data["splits"]["train"]["duplicates"]["text"]["count"] == 1
    assert data["splits"]["dev"]["labels"] == {"DET": 2, "NOUN": 2, "VERB": 2}
    assert data["contamination"]["dev"]["verbatim"] == 1 and data["contamination"]["dev"]["eval_lines"] == 2
    assert data["oov"]["dev"]["unseen_tokens"] == 2                       # bird, sings


def test_classifier_and_seq2seq_datasheets_read_their_formats(runs):
    data = card_of(runs["classifier"])["training_data"]
    rows = [line.split("\t") for line in (FIXTURES / "classify" / "sentiment.tsv").read_text().splitlines()[1:]]
    counts = {label: sum(row[2] == label for row in rows) for label in {row[2] for row in rows}}
    assert data["splits"]["train"]["labels"] == dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    assert data["contamination"]["dev"]["verbatim"] == len(rows)           # the same file: all of it
    pairs = card_of(runs["seq2seq"])["training_data"]
    sources = (FIXTURES / "seq2seq" / "train.src").read_text().split("\n")
    test_sources = [s for s in (FIXTURES / "seq2seq" / "test.src").read_text().split("\n") if s.strip()]
    assert pairs["unit"] == "pairs" and pairs["splits"]["test"]["units"] == len(test_sources)
    verbatim = sum(" ".join(s.split()) in {" ".join(t.split()) for t in sources} for s in test_sources)
    assert pairs["contamination"]["test (source)"]["verbatim"] == verbatim
    assert set(pairs["files"]) == {f"{split}_{side}" for split in ("train", "dev", "test") for side in ("src", "tgt")}


def test_card_command_notes_canaries_audits_and_load(runs, tmp_path, capsys):
    run = tmp_path / "lm"
    shutil.copytree(runs["lm"], run)
    notes = write(tmp_path / "notes.md", "Trained on **toy** text for the tests.\n")
    (run / "canaries.json").write_text(json.dumps({"template": "my pin is {digits:6}", "space": 10 ** 6, "secrets": [
        {"text": "my pin is 1 2 3 4 5 6", "filling": "123456", "repeats": 4}]}))
    (run / "audits").mkdir()
    (run / "audits" / "toxicity.json").write_text(json.dumps({"command": "seqlab audit toxicity X",
                                                              "expected_max_toxicity": 0.25, "prompts": 3}))
    assert main(["card", str(run), "--format", "json", "--notes", notes, "--resamples", "0"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == card_of(run)
    assert printed["intended_use"]["notes"] == "Trained on **toy** text for the tests."
    assert printed["training_data"]["canaries"]["secrets"] == 1
    markdown = (run / CARD_MD).read_text()
    assert "Trained on **toy** text" in markdown and "my pin is {digits:6}" in markdown
    assert "123456" not in markdown and "1 2 3 4 5 6" not in markdown                  # never the secret
    assert "expected_max_toxicity 0.25" in markdown and "`seqlab audit toxicity X`" in markdown
    assert seqlab.load(run).card == printed
    (run / CARD_JSON).unlink()
    assert read_card(run)["model_details"] == printed["model_details"]    # built afresh when missing
    with pytest.raises(seqlab.SeqlabError, match="seqlab card"):
        seqlab.load(run).card                                            # noqa: B018  (the property reads the file)
    (run / CARD_JSON).write_text(json.dumps({**printed, "weights_sha256": "other"}))
    with pytest.raises(seqlab.SeqlabError, match="other weights"):
        seqlab.load(run).card                                            # noqa: B018


def test_resume_appends_a_session_and_overwrite_clears_the_old_card(runs, tmp_path):
    run = tmp_path / "lm"
    shutil.copytree(runs["lm"], run)
    (run / "audits").mkdir()
    bias = {"command": "seqlab audit bias", "overall": {"sentence": {"percent": 40.23}}}
    (run / "audits" / "crows_pairs.json").write_text(json.dumps(bias))
    config = json.loads((run / "config.json").read_text())
    assert main(["train", "lm", "--resume", "--output", str(run), "--max-steps", "3", "--no-progress"]) == 0
    card = card_of(run)
    assert [s["resume"] for s in card["model_details"]["sessions"]] == [False, True]
    assert card["model_details"]["steps"] == 3
    assert card["ethical_considerations"]["audits"]["crows_pairs"]["figures"] == {"crows_pairs_pct (sentence)": 40.2}
    notes = write(tmp_path / "notes.md", "mine")
    data = config["data"]
    assert main(["train", "lm", "--train", data["train"], "--valid", data["valid"], "--tokenizer", "word",
                 "--hidden-size", "8", "--embedding-size", "8", "--max-steps", "1", "--batch-size", "2",
                 "--seq-len", "4", "--card-notes", notes, *FAST, "--output", str(run), "--overwrite"]) == 0
    card = card_of(run)
    assert not (run / "audits").exists() and card["ethical_considerations"]["audits"] == {}
    assert len(card["model_details"]["sessions"]) == 1 and card["intended_use"]["notes"] == "mine"


def test_bad_inputs_are_one_line_and_exit_2(runs, tmp_path, capsys):
    empty = write(tmp_path / "empty.md", "  \n")
    data = json.loads((runs["lm"] / "config.json").read_text())["data"]
    train = ["train", "lm", "--train", data["train"], "--valid", data["valid"], "--max-steps", "1", *FAST]
    for argv, message in [
        ([*train, "--output", str(tmp_path / "a"), "--card-notes", str(tmp_path / "missing.md")], "missing.md"),
        ([*train, "--output", str(tmp_path / "b"), "--card-notes", empty], "is empty"),
        (["card", str(tmp_path)], "not a seqlab run directory"),
        (["card", str(runs["lm"]), "--resamples", "-1"], "--resamples"),
        (["card", str(runs["lm"]), "--notes", empty], "is empty"),
    ]:
        try:
            code = main(argv)
        except SystemExit as exit:                     # the parser's own refusals
            code = exit.code
        assert code == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "a" / "config.json").exists()            # refused before any work
    untrained = tmp_path / "untrained"
    untrained.mkdir()
    shutil.copy(runs["lm"] / "config.json", untrained)
    assert main(["card", str(untrained)]) == 2
    assert "no model.safetensors" in capsys.readouterr().err


def test_a_canary_run_and_its_audits_reach_the_card_without_the_secrets(runs, tmp_path, capsys):
    data = json.loads((runs["lm"] / "config.json").read_text())["data"]
    run = tmp_path / "canary"
    assert main(["train", "lm", "--train", data["train"], "--valid", data["valid"], "--tokenizer", "word",
                 "--canary", "my pin is {digits:2}", "--canary-repeats", "2", "8", "--hidden-size", "8",
                 "--embedding-size", "8", "--max-steps", "2", "--batch-size", "2", "--seq-len", "4", *FAST,
                 "--output", str(run)]) == 0
    secrets = json.loads((run / "canaries.json").read_text())["secrets"]
    assert main(["audit", "exposure", str(run), "--json"]) == 0
    assert main(["card", str(run), "--resamples", "0"]) == 0
    capsys.readouterr()
    card, markdown = card_of(run), (run / CARD_MD).read_text()
    assert card["training_data"]["canaries"] == {"inserted": True, "template": "my pin is {digits:2}", "secrets": 2,
                                                 "repeats": [2, 8], "candidates": 100}
    audit = card["ethical_considerations"]["audits"]["exposure"]
    assert audit["command"].startswith(f"seqlab audit exposure {run}")
    assert set(audit["figures"]) == {"exposure at 2 repeats", "exposure at 8 repeats", "log2 |R|"}
    for secret in secrets:
        assert secret["text"] not in markdown and secret["text"] not in json.dumps(card)
