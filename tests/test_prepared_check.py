"""A prepared folder is not trusted blindly (`seqlab.data.prepared_check`): for every family, a manifest that names
a file outside the folder (an absolute path, `../`, a link that leads out) is one line; a shard whose ids were
edited is one line (its SHA-256), and ids beyond the vocabulary are one line (their recorded range), never a
traceback; the files are hashed once and again only where they changed, and `seqlab prepare --verify` hashes
them all; a source that changed since is a warning that names it and the command that prepares again."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import seqlab
from conftest import FIXTURES, TRAIN, VALID, one_line_error
from conftest import run_seqlab as run
from seqlab.data.prepared import Prepared
from seqlab.errors import SeqlabError, SeqlabWarning
from seqlab.registry import family

PAIRS = FIXTURES / "seq2seq"
# family -> (its data options, the option of its training file, a shard of word ids, the train options)
FAMILIES = {
    "lm": ({"train": TRAIN, "valid": VALID}, "train", "train.000.bin", ["--arch", "lstm"]),
    "tagger": ({"train": FIXTURES / "ner.conll", "dev": FIXTURES / "ner.conll", "format": "conll"}, "train",
               "train.words.000.bin", []),
    "classifier": ({"train": FIXTURES / "classify" / "sentiment.tsv", "dev": FIXTURES / "classify" / "sentiment.tsv"},
                   "train", "train.words.000.bin", []),
    "seq2seq": ({f"{split}_{side}": PAIRS / f"{split}.{side}" for split in ("train", "dev") for side in ("src", "tgt")},
                "train_src", "train.source.000.bin", []),
}
SMALL = ["--embedding-size", "8", "--hidden-size", "8", "--batch-size", "2", "--max-steps", "1", "--no-progress",
         "--threads", "1"]


def prepared(tmp_path: Path, name: str, copy_source: bool = False) -> tuple[Path, Path]:
    """A prepared folder of `name`'s fixture data, and its training file (a copy in tmp_path with `copy_source`)."""
    options, option, _, _ = FAMILIES[name]
    options = {k: str(v) for k, v in options.items()}
    source = Path(options[option])
    if copy_source:
        source = tmp_path / f"source-{source.name}"
        shutil.copy(options[option], source)
        options[option] = str(source)
    return seqlab.prepare(name, tmp_path / name, progress=False, **options), source


def train(name: str, folder: Path, output: Path, capsys) -> tuple[int, str]:
    return run(["train", name, "--data", folder, *FAMILIES[name][3], *SMALL, "--output", output], capsys)


def edit_manifest(folder: Path, change) -> None:
    manifest = json.loads((folder / "manifest.json").read_text())
    change(manifest)
    (folder / "manifest.json").write_text(json.dumps(manifest))


def first_shard(manifest: dict, file: str) -> dict:
    """The manifest entry of the shard `file`."""
    for split in manifest["splits"].values():
        for run_ in [split, *split.get("streams", {}).values()]:
            for shard in run_.get("shards", []):
                if shard["file"] == file:
                    return shard
    raise AssertionError(file)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_prepared_check_refuses_what_leads_outside_the_folder(tmp_path, capsys, name):
    """An absolute path, a `../` path and a link that leads out: each one line, exit 2, for every family."""
    folder, _ = prepared(tmp_path, name)
    shard = FAMILIES[name][2]
    outside = tmp_path / "elsewhere"
    shutil.copytree(folder, outside)
    attacks = {
        "absolute": lambda: edit_manifest(folder, lambda m: first_shard(m, shard).update(file="/etc/passwd")),
        "parent": lambda: edit_manifest(folder, lambda m: first_shard(m, shard).update(file=f"../elsewhere/{shard}")),
        "link": lambda: ((folder / shard).unlink(), os.symlink(outside / shard, folder / shard)),
        "a fixed name's link": lambda: ((folder / "vocab.json").unlink(),
                                        os.symlink(outside / "vocab.json", folder / "vocab.json")),
    }
    expected = {"absolute": "names '/etc/passwd', outside the prepared folder",
                "parent": f"names '../elsewhere/{shard}', outside the prepared folder",
                "link": f"{shard} is a link to {outside / shard}, outside the prepared folder",
                "a fixed name's link": "vocab.json is a link to"}
    saved = tmp_path / "saved"
    shutil.copytree(folder, saved)
    for attack, damage in attacks.items():
        damage()
        code, err = train(name, folder, tmp_path / "run", capsys)
        one_line_error(code, err, expected[attack])
        shutil.rmtree(folder)
        shutil.copytree(saved, folder)
    split = Prepared(folder, name).split("train")                   # and where a family reads a file by its key
    split.record["an_array"] = "../elsewhere/vocab.json"
    with pytest.raises(SeqlabError, match="names '../elsewhere/vocab.json', outside the prepared folder"):
        split.array("an_array")


@pytest.mark.parametrize("name", list(FAMILIES))
def test_prepared_check_refuses_edited_ids(tmp_path, capsys, name):
    """Ids edited within the vocabulary: the shard's SHA-256 differs, one line. Ids beyond the vocabulary with the
    manifest's SHA-256 edited to match (or a vocabulary from elsewhere): the recorded range, one line. Never the
    IndexError of an embedding."""
    folder, _ = prepared(tmp_path, name)
    shard = folder / FAMILIES[name][2]
    data = bytearray(shard.read_bytes())
    first = int(np.frombuffer(data[64:66], "<u2")[0])
    data[64:66] = np.array([4 if first != 4 else 5], "<u2").tobytes()          # another word of the vocabulary
    shard.write_bytes(bytes(data))
    one_line_error(*train(name, folder, tmp_path / "run", capsys),
                   f"{shard.name} does not hold the ids {folder}/manifest.json lists")
    data[64:66] = np.array([60000], "<u2").tobytes()                           # no word of the vocabulary
    shard.write_bytes(bytes(data))
    edit_manifest(folder, lambda m: first_shard(m, shard.name).update(sha256=hashlib.sha256(data[64:]).hexdigest()))
    code, err = train(name, folder, tmp_path / "run", capsys)
    one_line_error(code, err, f"{shard.name} holds the id 60,000, outside the ")
    assert "words of vocab.json" in err or "tokens of vocab.json" in err


def test_prepared_check_hashes_once_and_again_only_what_changed(tmp_path):
    """`prepare` records what it hashed while writing: opening hashes nothing. A file whose times change is hashed
    again (once); `rehash` hashes them all; a folder of an earlier seqlab (no hashes, no record) is hashed and
    recorded on first open; an edited vocabulary is refused."""
    folder, _ = prepared(tmp_path, "lm")
    files = len(json.loads((folder / "manifest.json").read_text())["hashes"]) + 2          # and the two shards
    assert Prepared(folder).checked["hashed"] == 0
    assert Prepared(folder).checked["files"] == files
    os.utime(folder / "train.000.bin")                                   # touched: the same ids, a new time
    assert Prepared(folder).checked["hashed"] == 1
    assert Prepared(folder).checked["hashed"] == 0
    assert seqlab.verify_prepared(folder)["hashed"] == files
    (folder / "verified.json").unlink()
    edit_manifest(folder, lambda m: m.pop("hashes"))
    assert Prepared(folder).checked["hashed"] == 2                       # its shards: the manifest has their SHA-256
    assert Prepared(folder).checked["hashed"] == 0
    (folder / "verified.json").write_text("{not json")                   # a damaged record: everything again
    assert Prepared(folder).checked["hashed"] == 2
    folder, _ = prepared(tmp_path / "again", "lm")
    vocab = json.loads((folder / "vocab.json").read_text())
    (folder / "vocab.json").write_text(json.dumps({**vocab, "tokens": vocab["tokens"][:-1]}))
    with pytest.raises(SeqlabError, match="vocab.json does not hold the contents .*manifest.json lists"):
        Prepared(folder)


def test_prepared_check_verify_hashes_what_the_record_trusts(tmp_path, capsys):
    """A shard damaged while its record says it is unchanged (as a disk that rots bits keeps the times) passes a
    run's check; `seqlab prepare --verify DIR` hashes it and says so in one line."""
    folder, _ = prepared(tmp_path, "lm")
    code, err = run(["prepare", "--verify", folder], capsys)
    assert code == 0 and "hold what its manifest lists" in err
    shard = folder / "train.000.bin"
    data = bytearray(shard.read_bytes())
    data[-2:] = data[-4:-2]
    shard.write_bytes(bytes(data))
    record = json.loads((folder / "verified.json").read_text())
    stat = shard.stat()
    record["files"][shard.name].update(bytes=stat.st_size, mtime_ns=stat.st_mtime_ns, ctime_ns=stat.st_ctime_ns,
                                       inode=stat.st_ino)
    (folder / "verified.json").write_text(json.dumps(record))
    assert Prepared(folder).checked["hashed"] == 0
    one_line_error(*run(["prepare", "--verify", folder], capsys), "train.000.bin does not hold the ids")
    one_line_error(*run(["prepare", "--verify", tmp_path / "none"], capsys), "--verify")
    one_line_error(*run(["prepare"], capsys), "needs a task")


def test_prepared_check_warns_of_a_changed_source(tmp_path, capsys):
    """`train --data` alone: a source edited since is a warning naming it and the prepare command (the run
    trains, on the ids as prepared); a touched source with the same bytes, or one that is gone, says nothing."""
    folder, source = prepared(tmp_path, "lm", copy_source=True)
    os.utime(source)                                            # a new time, the same bytes: nothing to say
    code, err = train("lm", folder, tmp_path / "quiet", capsys)
    assert code == 0 and "warning" not in err, err
    with source.open("a") as handle:
        handle.write("a new line\n")
    code, err = train("lm", folder, tmp_path / "run", capsys)
    assert code == 0, err
    warning = next(line for line in err.splitlines() if "warning" in line)
    assert f"{source} changed since {folder} was prepared from it" in warning
    assert f"prepare again: seqlab prepare lm --train {source} --valid {VALID} --output {folder} --overwrite" \
        in warning
    assert err.count("changed since") == 1                      # once, though the run opens the folder twice
    source.unlink()
    code, err = train("lm", folder, tmp_path / "gone", capsys)
    assert code == 0 and "warning" not in err, err


@pytest.mark.parametrize("name", ["tagger", "classifier", "seq2seq"])
def test_prepared_check_warns_of_a_changed_source_for_every_family(tmp_path, name):
    folder, source = prepared(tmp_path, name, copy_source=True)
    open_prepared = family(name).part("prepare").open_prepared
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        open_prepared(folder)
    source.write_bytes(source.read_bytes() + b"\n")
    with pytest.warns(SeqlabWarning, match=f"{source} changed since .* seqlab prepare {name} "):
        open_prepared(folder)
