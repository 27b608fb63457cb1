"""--overwrite replaces only what seqlab wrote, for every command that has it (export onnx and hf, train, prepare,
examples): another run directory, a folder holding a user's file, the source run itself (or a folder inside it or
holding it) are refused with one line and exit 2, and lose nothing; exports, runs and prepared folders of earlier
versions are still recognised and replaced; a failed export leaves the old one in place."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from conftest import FIXTURES, TRAIN, VALID
from conftest import run_seqlab as run
from seqlab import examples
from seqlab.families.lm.config import LMDataConfig, LMTrainConfig, LMTrainOptions
from seqlab.families.lm.hf import GPT2_OPTIONS
from seqlab.families.lm.model import LMConfig
from seqlab.families.lm.pipeline import train_lm

TINY = ["--tokenizer", "char", "--arch", "lstm", "--embedding-size", "8", "--hidden-size", "8", "--layers", "1",
        "--batch-size", "4", "--seq-len", "8", "--max-steps", "2", "--eval-every", "2", "--no-progress", "--threads",
        "1"]


def train_args(output, *extra) -> list:
    return ["train", "lm", "--train", TRAIN, "--valid", VALID, "--output", output, *TINY, *extra]


def refused(code: int, err: str, *expect: str) -> str:
    """Exit 2 with exactly one line, `seqlab: error: ...` holding every `expect`."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("seqlab: error:"), err
    assert all(part in lines[0] for part in expect), lines[0]
    return lines[0]


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (hidden ones too) with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """A tiny LSTM LM run and a tiny transformer LM with GPT-2's options (the hf export's)."""
    folder = tmp_path_factory.mktemp("overwrite-runs")
    from seqlab.cli.main import main
    assert main([str(a) for a in train_args(folder / "lstm")]) == 0
    model = LMConfig(arch="transformer", embedding_size=8, num_layers=1, num_heads=2, context=8, dropout=0.0)
    options = LMTrainOptions(output=str(folder / "gpt"), max_steps=2, batch_size=4, eval_every=2, log_every=2,
                             progress=False)
    config = LMTrainConfig(LMDataConfig(train=str(TRAIN), valid=str(VALID), tokenizer="char"), model, options)
    train_lm(dataclasses.replace(config, model=dataclasses.replace(config.model, **GPT2_OPTIONS)))
    return {"lstm": folder / "lstm", "gpt": folder / "gpt"}


def export_args(run_dir, output, fmt="onnx", *extra) -> list:
    return ["export", run_dir, "--format", fmt, "--output", output, *extra]


@pytest.mark.parametrize("fmt", ["onnx", "hf"])
def test_overwrite_export_refuses_another_run_directory(runs, tmp_path, capsys, fmt):
    other = shutil.copytree(runs["lstm"], tmp_path / "other-run")
    before = snapshot(other)
    refused(*run(export_args(runs["gpt"], other, fmt, "--overwrite"), capsys), f"--output {other} holds a seqlab "
            "run, not an export")
    assert snapshot(other) == before
    assert [p.name for p in tmp_path.iterdir()] == ["other-run"]             # no hidden folder left beside it


@pytest.mark.parametrize("fmt", ["onnx", "hf"])
def test_overwrite_export_refuses_a_folder_with_a_users_file(runs, tmp_path, capsys, fmt):
    thesis = tmp_path / "thesis"
    thesis.mkdir()
    (thesis / "thesis.txt").write_text("five years of work\n")
    refused(*run(export_args(runs["gpt"], thesis, fmt, "--overwrite"), capsys), f"--output {thesis} holds files "
            "but no seqlab export", "never deletes what it did not write")
    assert snapshot(thesis) == {"thesis.txt": b"five years of work\n"}
    export = tmp_path / "export"                                   # an export with the user's file put into it
    assert run(export_args(runs["gpt"], export, fmt), capsys)[0] == 0
    (export / "notes.md").write_text("mine\n")
    before = snapshot(export)
    refused(*run(export_args(runs["gpt"], export, fmt, "--overwrite"), capsys), "holds notes.md, which the seqlab "
            "export there did not write")
    assert snapshot(export) == before


def test_overwrite_export_refuses_the_source_run_inside_it_or_holding_it(runs, tmp_path, capsys):
    for fmt, name in (("onnx", "lstm"), ("hf", "gpt")):
        run_dir = shutil.copytree(runs[name], tmp_path / "runs" / name)
        before = snapshot(tmp_path)
        for output, expect in [(run_dir, "is the run being exported itself"),
                               (run_dir / "export", "lies inside the run being exported"),
                               (tmp_path / "runs", "holds the run being exported")]:
            for extra in ([], ["--overwrite"]):
                refused(*run(export_args(run_dir, output, fmt, *extra), capsys), f"--output {output} {expect}")
        assert snapshot(tmp_path) == before
    assert sorted(p.name for p in tmp_path.rglob("*") if p.name.startswith(".") and p.name != ".lock") == []


def test_overwrite_export_replaces_old_format_exports(runs, tmp_path, capsys):
    old = tmp_path / "old"                                # an ONNX export of format 2: its manifest lists its files
    assert run(export_args(runs["lstm"], old), capsys)[0] == 0
    manifest = json.loads((old / "manifest.json").read_text())
    (old / "manifest.json").write_text(json.dumps({**manifest, "format_version": 2}))
    assert run(export_args(runs["lstm"], old, "onnx", "--overwrite"), capsys)[0] == 0
    assert json.loads((old / "manifest.json").read_text())["format_version"] == 3
    gpt2 = tmp_path / "gpt2"                              # a GPT-2 export of before its manifest.json
    assert run(export_args(runs["gpt"], gpt2, "hf"), capsys)[0] == 0
    (gpt2 / "manifest.json").unlink()
    (gpt2 / "generation_config.json").unlink()          # nor its generation_config.json: its six files
    assert run(export_args(runs["gpt"], gpt2, "hf", "--overwrite"), capsys)[0] == 0
    assert json.loads((gpt2 / "manifest.json").read_text())["format"] == "hf"
    (gpt2 / "manifest.json").unlink()                     # and an ONNX export in its place
    (gpt2 / "generation_config.json").unlink()
    assert run(export_args(runs["lstm"], gpt2, "onnx", "--overwrite"), capsys)[0] == 0
    assert (gpt2 / "step.onnx").exists() and not (gpt2 / "model.safetensors").exists()


def test_overwrite_export_happy_path_and_a_failed_export_keeps_the_old_one(runs, tmp_path, capsys, monkeypatch):
    out = tmp_path / "export"
    assert run(export_args(runs["lstm"], out), capsys)[0] == 0
    refused(*run(export_args(runs["lstm"], out), capsys), "already holds files; add --overwrite")
    (out / "step.onnx").write_bytes(b"an older graph")
    assert run(export_args(runs["lstm"], out, "onnx", "--overwrite"), capsys)[0] == 0
    assert (out / "step.onnx").read_bytes() != b"an older graph"                 # replaced
    before = snapshot(out)

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr("seqlab.export.onnx.write_readme", broken)
    refused(*run(export_args(runs["lstm"], out, "onnx", "--overwrite"), capsys), "No space left on device")
    assert snapshot(out) == before                                               # the old export, whole
    assert [p.name for p in tmp_path.iterdir()] == ["export"]                    # and no half-written one beside


def test_overwrite_train_refuses_a_users_folder_and_a_foreign_config(tmp_path, capsys):
    thesis = tmp_path / "thesis"
    thesis.mkdir()
    (thesis / "thesis.txt").write_text("five years of work\n")
    refused(*run(train_args(thesis, "--overwrite"), capsys), "--overwrite replaces a seqlab run", "holds thesis.txt")
    refused(*run(train_args(thesis), capsys), f"--output {thesis} holds thesis.txt and no seqlab run")
    (thesis / "config.json").write_text('{"learning_rate": 0.1}\n')             # a user's config, not a run's
    for extra in ([], ["--overwrite"], ["--resume"]):
        refused(*run(train_args(thesis, *extra), capsys), "holds a config.json that is not a seqlab run's")
    assert snapshot(thesis) == {"config.json": b'{"learning_rate": 0.1}\n', "thesis.txt": b"five years of work\n"}


def test_overwrite_train_replaces_a_run_keeps_the_users_files_and_recognises_an_old_run(tmp_path, capsys):
    old = shutil.copytree(FIXTURES / "old_runs" / "lm-bpe", tmp_path / "old")     # a run of format 1
    (old / "notes.txt").write_text("mine\n")
    (old / "audits").mkdir()
    (old / "audits" / "exposure.json").write_text("{}")
    assert run(train_args(old, "--overwrite"), capsys)[0] == 0
    config = json.loads((old / "config.json").read_text())
    assert config["data"]["tokenizer"] == "char" and (old / "notes.txt").read_text() == "mine\n"
    assert not (old / "audits").exists()                                        # they audited the replaced model
    refused(*run(train_args(old), capsys), "already holds a run")


def test_overwrite_train_removes_the_replaced_runs_own_files(tmp_path, capsys):
    """A tagger retrained with --overwrite without character features keeps no chars.json of the replaced run."""
    conll = FIXTURES / "ner.conll"
    base = ["train", "tagger", "--train", conll, "--dev", conll, "--format", "conll", "--embedding-size", "8",
            "--hidden-size", "8", "--max-steps", "2", "--eval-every", "2", "--no-progress", "--output",
            tmp_path / "run"]
    assert run([*base, "--char-features", "cnn"], capsys)[0] == 0
    assert (tmp_path / "run" / "chars.json").exists()
    assert run([*base, "--char-features", "none", "--overwrite"], capsys)[0] == 0
    assert not (tmp_path / "run" / "chars.json").exists()
    import seqlab
    assert seqlab.load(tmp_path / "run").vocabulary.chars is None


def test_overwrite_prepare_refuses_what_it_did_not_write(tmp_path, capsys, runs):
    def prepare_args(output, *extra):
        return ["prepare", "lm", "--train", TRAIN, "--valid", VALID, "--output", output, "--no-progress", *extra]
    export = tmp_path / "export"                          # a manifest.json, but an export's
    assert run(export_args(runs["lstm"], export), capsys)[0] == 0
    before = snapshot(export)
    refused(*run(prepare_args(export, "--overwrite"), capsys), "holds a manifest.json that is not a prepared "
            "dataset's")
    assert snapshot(export) == before
    folder = tmp_path / "prepared"
    assert run(prepare_args(folder), capsys)[0] == 0
    manifest = json.loads((folder / "manifest.json").read_text())
    assert set(manifest["files"]) == set(snapshot(folder)) - {"manifest.json", "verified.json"}
    (folder / "thesis.txt").write_text("mine\n")
    refused(*run(prepare_args(folder, "--overwrite"), capsys), "holds thesis.txt, which `seqlab prepare` did not "
            "write there")
    assert (folder / "thesis.txt").read_text() == "mine\n"
    (folder / "thesis.txt").unlink()                      # a folder of before the "files" list is replaced
    (folder / "manifest.json").write_text(json.dumps({k: v for k, v in manifest.items() if k != "files"}))
    assert run(prepare_args(folder, "--overwrite"), capsys)[0] == 0
    assert "files" in json.loads((folder / "manifest.json").read_text())


def test_overwrite_examples_replaces_only_its_own_unchanged_files(tmp_path, capsys):
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "dev.tsv").write_text("mine\n")                                    # a user's file of the same name
    refused(*run(["examples", "sentiment", folder, "--size", "tiny", "--overwrite"], capsys),
            f"{folder / 'dev.tsv'} was not written by seqlab examples")
    assert (folder / "dev.tsv").read_text() == "mine\n" and not (folder / "train.tsv").exists()
    (folder / "dev.tsv").unlink()
    examples.write("sentiment", folder, size="tiny")
    examples.write("sentiment", folder, size="tiny", seed=1, overwrite=True)     # its own files: replaced
    with open(folder / "train.tsv", "a", encoding="utf-8") as handle:
        handle.write("my own review\tpos\n")                                    # edited since
    edited = (folder / "train.tsv").read_bytes()
    refused(*run(["examples", "sentiment", folder, "--size", "tiny", "--overwrite"], capsys),
            "train.tsv has changed since seqlab examples wrote it")
    assert (folder / "train.tsv").read_bytes() == edited
    (folder / "train.tsv").unlink()
    (folder / ".seqlab-examples.json").unlink()          # files of before the marker, as this seed writes them
    examples.write("sentiment", folder, size="tiny", seed=1, overwrite=True)
