"""`seqlab info DIR` and `seqlab.info.run_info`: what a run directory holds, for a tiny run of every task
family (a tied LM among them), checked against the model, metrics.jsonl and the command line's parser."""

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

import seqlab
from seqlab.cli.main import build_parser, main
from seqlab.info import applicable, format_info, run_info
from seqlab.registry import FAMILIES

FIXTURES = Path(__file__).parent / "fixtures"
FAST = ["--no-progress", "--dropout", "0"]
RUNS = {
    "lm-tied": ["lm", "--train", str(FIXTURES / "shakespeare_train.txt"), "--valid",
                str(FIXTURES / "shakespeare_valid.txt"), "--test", str(FIXTURES / "shakespeare_test.txt"),
                "--arch", "transformer", "--embedding-size", "16", "--layers", "1", "--heads", "2", "--context", "16",
                "--tied", "--max-steps", "4", "--eval-every", "2", "--batch-size", "4", "--seq-len", "8"],
    "tagger-crf": ["tagger", "--train", str(FIXTURES / "ner.conll"), "--dev", str(FIXTURES / "ner.conll"),
                   "--format", "conll", "--crf", "--char-features", "cnn", "--embedding-size", "8",
                   "--hidden-size", "8", "--max-steps", "4", "--eval-every", "2", "--batch-size", "2", "--lr", "0.01"],
    "classifier": ["classifier", *(f"--{split}={FIXTURES / 'classify' / 'sentiment.tsv'}" for split in
                                   ("train", "dev", "test")),
                   "--arch", "gru", "--bidirectional", "--embedding-size", "8", "--hidden-size", "8", "--epochs", "2",
                   "--batch-size", "8", "--optimizer", "sgd", "--momentum", "0.5", "--schedule", "constant"],
    "seq2seq": ["seq2seq", *(f"--{split}-{side}={FIXTURES / 'seq2seq' / f'{split}.{side}'}" for split in
                             ("train", "dev") for side in ("src", "tgt")),
                "--arch", "transformer", "--num-layers", "1", "--num-heads", "2", "--ff-size", "32",
                "--embedding-size", "16", "--tie-embeddings", "--max-steps", "3", "--batch-size", "16"],
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("info-runs")
    for name, (task, *options) in RUNS.items():
        assert main(["train", task, *options, *FAST, "--output", str(folder / name)]) == 0
    return {name: folder / name for name in RUNS}


def records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("name", list(RUNS))
def test_info_counts_parameters_and_reports_metrics(runs, name, capsys):
    run = runs[name]
    info = run_info(run)
    assert info["parameters"] == seqlab.load(run).model.num_parameters()       # tied weights counted once
    final = {r["split"]: r for r in records(run) if r.get("final")}
    assert info["progress"]["final"] == final
    assert info["progress"]["best"] == [r for r in records(run) if r.get("best")][-1]
    assert info["progress"]["steps"] == max(r["step"] for r in records(run))
    assert info["trained"] and info["resumable"] and info["task"] == RUNS[name][0]
    config = json.loads((run / "config.json").read_text())
    assert {k: v["sha256"] for k, v in info["data"].items()} == config["data_sha256"]
    assert set(info["vocabulary"]) == set(FAMILIES[info["task"]].pipeline.derived)
    assert main(["info", str(run)]) == 0
    text = capsys.readouterr().out
    assert f"parameters  {info['parameters']:,}\n" in text
    assert f"best {info['progress']['metric']} " in text and f"valid  loss {final['valid']['loss']:.4f}" in text
    assert text == format_info(info) + "\n"


@pytest.mark.parametrize("name", list(RUNS))
def test_info_command_reparses_and_resolves_to_the_runs_config(runs, name):
    info = run_info(runs[name])
    words = info["command"].split()
    assert words[:3] == ["seqlab", "train", info["task"]]
    args = build_parser().parse_args(words[1:])
    pipeline = FAMILIES[args.task].pipeline
    resolved = pipeline.resolve(None, {k: v for k, v in vars(args).items() if k in pipeline.option_groups})
    saved = seqlab.load(runs[name]).config
    assert dataclasses.asdict(resolved.data) == dataclasses.asdict(saved.data)
    assert dataclasses.asdict(resolved.train) == dataclasses.asdict(saved.train)
    acting = [n for n in applicable(saved.model) if n not in pipeline.derived]
    assert {n: getattr(resolved.model, n) for n in acting} == {n: getattr(saved.model, n) for n in acting}
    assert "--vocab-size" not in words and "--activation" not in words          # set from the data / by the model


def test_info_json_is_the_run_info(runs, capsys):
    assert main(["info", str(runs["lm-tied"]), "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert json.loads(out) == json.loads(json.dumps(run_info(runs["lm-tied"])))


def test_info_reads_runs_of_earlier_seqlab_without_metrics(capsys):
    for run in sorted((FIXTURES / "old_runs").iterdir()):
        if run.is_dir():
            info = run_info(run)
            assert info["parameters"] == seqlab.load(run).model.num_parameters()
            assert info["progress"]["final"] == {} and not info["resumable"]
            assert "step 0" in format_info(info)


def test_info_of_a_run_not_trained_yet(runs, tmp_path, capsys):
    run = tmp_path / "started"
    run.mkdir()
    shutil.copy(runs["tagger-crf"] / "config.json", run / "config.json")
    assert main(["info", str(run)]) == 0
    out = capsys.readouterr().out
    assert "parameters  not trained yet" in out and "none (not resumable)" in out
    info = run_info(run)
    assert info["parameters"] is None and not info["trained"] and info["progress"]["best"] is None


def test_info_errors_are_one_line(runs, tmp_path, capsys):
    damaged = tmp_path / "damaged"
    shutil.copytree(runs["classifier"], damaged)
    (damaged / "config.json").write_text('{"format_version": 1, "task": "classifier", "data": {')
    groupless = tmp_path / "groupless"
    shutil.copytree(runs["classifier"], groupless)
    raw = json.loads((groupless / "config.json").read_text())
    (groupless / "config.json").write_text(json.dumps({**raw, "model": 3}))
    weights = tmp_path / "weights"
    shutil.copytree(runs["classifier"], weights)
    data = bytearray((weights / "model.safetensors").read_bytes())
    data[-1] ^= 0xFF                                                            # one weight changed
    (weights / "model.safetensors").write_bytes(bytes(data))
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("x")
    cases = {tmp_path / "missing": "is not a directory", tmp_path / "file": "is not a directory",
             tmp_path / "empty": "has no config.json", damaged: "is not valid JSON",
             groupless: "'model' group is missing or not an object", weights: "is corrupted"}
    for run, message in cases.items():
        assert main(["info", str(run)]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.count("\n") == 1 and message in captured.err, captured.err
        assert captured.err.startswith("seqlab: error: ")


def test_info_says_a_finished_run_is_finished_and_how_to_train_further(runs, tmp_path, capsys):
    run = runs["lm-tied"]                                      # --max-steps 4: finished
    info = run_info(run)
    assert info["finished"] == "training already finished at step 4 (--max-steps 4 reached); to train it further, " \
                               "--resume with a higher --max-steps"
    assert main(["info", str(run)]) == 0
    assert "checkpoint.safetensors: training already finished at step 4" in capsys.readouterr().out
    killed = tmp_path / "killed"                               # no final records: a resume has work to do
    shutil.copytree(run, killed)
    metrics = killed / "metrics.jsonl"
    metrics.write_text("".join(line + "\n" for line in metrics.read_text().splitlines() if '"final"' not in line))
    assert run_info(killed)["finished"] is None
    assert main(["info", str(killed)]) == 0
    assert "--resume" in capsys.readouterr().out
