"""The tagger from the command line, end to end on the fixtures: train, evaluate, tag, resume."""

import json
from pathlib import Path

from seqlab.cli.main import main
from seqlab.families.tagger.pipeline import load_tagger

FIXTURES = Path(__file__).parent / "fixtures"
SMALL = ["--embedding-size", "16", "--hidden-size", "16", "--dropout", "0", "--batch-size", "2",
         "--eval-batch-size", "3", "--lr", "0.02", "--schedule", "constant", "--no-progress",
         "--eval-every", "1000", "--epochs", "1000"]


def test_tagger_cli_ner_train_evaluate_tag_and_resume(tmp_path, capsys):
    run, ner = tmp_path / "ner", str(FIXTURES / "ner.conll")
    assert main(["train", "tagger", "--train", ner, "--dev", ner, "--format", "conll", "--encoder", "lstm",
                 "--crf", "--char-features", "cnn", "--output", str(run), "--max-steps", "60", *SMALL]) == 0
    assert main(["train", "tagger", "--output", str(run), "--resume", "--max-steps", "120",
                 "--no-progress"]) == 0
    assert main(["evaluate", str(run), ner, "--json"]) == 0
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert figures["f1"] == 100.0 and figures["accuracy"] == 100.0
    assert main(["evaluate", str(run), ner]) == 0
    assert "F1 100.00" in capsys.readouterr().out
    text = tmp_path / "raw.txt"
    text.write_text("Peter Blackburn visited New York .\n\nEU rejects German call .\n")
    assert main(["tag", str(run), str(text), "--output-format", "json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(lines) == 3 and lines[1]["tags"] == []                     # the empty line stays a sentence
    assert lines[0]["entities"] == [{"type": "PER", "start": 0, "end": 2, "text": "Peter Blackburn"},
                                    {"type": "LOC", "start": 3, "end": 5, "text": "New York"}]
    assert main(["tag", str(run), str(text)]) == 0
    rows = capsys.readouterr().out.split("\n")
    assert rows[0].split("\t")[:2] == ["Peter", "B-PER"]


def test_tagger_cli_errors(tmp_path, capsys):
    pos = str(FIXTURES / "tagging.conllu")
    run = tmp_path / "pos"
    assert main(["train", "tagger", "--train", pos, "--dev", pos, "--output", str(run), "--max-steps", "2",
                 *SMALL]) == 0
    assert main(["train", "tagger", "--output", str(run), "--resume", "--encoder", "gru"]) == 2
    assert "--encoder cannot change" in capsys.readouterr().err
    assert main(["generate", str(run), "--prompt", "a"]) == 2
    assert "not a language model" in capsys.readouterr().err
    assert main(["train", "tagger", "--train", pos, "--output", str(tmp_path / "x")]) == 2
    assert "needs --train and --dev" in capsys.readouterr().err
    bad = tmp_path / "bad.conllu"
    bad.write_text("1\tThe\tthe\tDET\n")
    assert main(["train", "tagger", "--train", str(bad), "--dev", pos, "--output", str(tmp_path / "y")]) == 2
    assert "bad.conllu:1: expected 10 tab-separated" in capsys.readouterr().err


def test_tagger_cli_reads_conll_input_and_reports_confusions_and_unseen_tags(tmp_path, capsys, monkeypatch):
    pos = FIXTURES / "tagging.conllu"
    run = tmp_path / "pos"
    assert main(["train", "tagger", "--train", str(pos), "--dev", str(pos), "--output", str(run),
                 "--max-steps", "150", *SMALL]) == 0
    capsys.readouterr()
    assert main(["tag", str(run), str(pos), "--input-format", "conllu"]) == 0
    rows = [r.split("\t") for r in capsys.readouterr().out.splitlines() if r]
    assert [r[:2] for r in rows[:3]] == [["The", "DET"], ["cat", "NOUN"], ["sat", "VERB"]]
    assert "barkloudly" not in {r[0] for r in rows}                  # the multiword range is not a token
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("The O\ncat O\n\nDogs O\nbark O\n"))
    assert main(["tag", str(run), "-", "--input-format", "conll", "--output-format", "json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["tokens"] for line in lines] == [["The", "cat"], ["Dogs", "bark"]]
    assert lines[0]["tags"] == ["DET", "NOUN"]
    # gold with one NOUN written as VERB (a confusion: gold VERB, predicted NOUN) and one tag never trained on
    gold = pos.read_text().replace("2\tcat\tcat\tNOUN", "2\tcat\tcat\tVERB", 1).replace(
        "3\tsat\tsat\tVERB", "3\tsat\tsat\tINTJ_NEW", 1)
    wrong = tmp_path / "wrong.conllu"
    wrong.write_text(gold)
    assert main(["evaluate", str(run), str(wrong), "--json", "--format", "conllu"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["unseen_tags"] == {"INTJ_NEW": 1}
    assert {"gold": "VERB", "predicted": "NOUN", "count": 1} in figures["confusions"]
    assert {"gold": "INTJ_NEW", "predicted": "VERB", "count": 1} in figures["confusions"]
    assert figures["accuracy"] == 100.0 * (figures["tokens"] - 2) / figures["tokens"]
    assert main(["evaluate", str(run), str(wrong)]) == 0
    out = capsys.readouterr().out
    assert "tags training never saw, each token counted as an error: INTJ_NEW (1)" in out
    assert "most confused tags" in out and "VERB -> NOUN" in out


def test_tagger_cli_trains_character_features_by_default_and_none_turns_them_off(tmp_path):
    pos = str(FIXTURES / "tagging.conllu")
    for name, options, expected in (("default", [], "lstm"), ("none", ["--char-features", "none"], "none")):
        run = tmp_path / name
        assert main(["train", "tagger", "--train", pos, "--dev", pos, "--output", str(run), "--max-steps", "2",
                     *SMALL, *options]) == 0
        assert json.loads((run / "config.json").read_text())["model"]["char_features"] == expected
        tagger = load_tagger(run)
        assert (tagger.model.chars is not None) == (expected == "lstm")
