"""The model card's training data streamed (`seqlab.cards.data`, `seqlab.cards.datasheet`): for every family, on
the fixtures, the same figures as the code that read every file and split whole (kept here as the reference);
file sheets the same whatever block boundaries cut (a CR LF, a UTF-8 character, a line); and memory that does not
grow with the training text."""

from __future__ import annotations

import json
import random
import string
import tracemalloc
from collections import Counter
from pathlib import Path

import pytest

from seqlab.cards import datasheet as sheets
from seqlab.cards.data import training_data
from seqlab.cards.splits import nonblank, oov_rate, tokens_of
from seqlab.fileio import file_sha256
from seqlab.registry import FAMILIES

FIXTURES = Path(__file__).parent / "fixtures"
C, S = FIXTURES / "classify", FIXTURES / "seq2seq"
SHAKESPEARE = {split: str(FIXTURES / f"shakespeare_{split}.txt") for split in ("train", "valid", "test")}
CASES = {
    "lm-word": ("lm", {**SHAKESPEARE, "tokenizer": "word"}),
    "lm-char": ("lm", {"train": SHAKESPEARE["train"], "valid": SHAKESPEARE["valid"], "tokenizer": "char"}),
    "tagger-conllu": ("tagger", {"train": str(FIXTURES / "tagging.conllu"), "dev": str(FIXTURES / "tagging.conllu"),
                                 "format": "conllu"}),
    "tagger-conll": ("tagger", {"train": str(FIXTURES / "ner.conll"), "dev": str(FIXTURES / "ner.conll"),
                                "test": str(FIXTURES / "ner.conll"), "format": "conll"}),
    "classifier-tsv": ("classifier", {split: str(C / "sentiment.tsv") for split in ("train", "dev", "test")}),
    "classifier-jsonl": ("classifier", {"train": str(C / "sentiment.jsonl"), "dev": str(C / "sentiment.jsonl"),
                                        "format": "jsonl", "text_column": "review", "label_column": "sentiment"}),
    "classifier-sst": ("classifier", {"train": str(C / "sst.txt"), "dev": str(C / "sst.txt"), "format": "sst-tree"}),
    "seq2seq-aligned": ("seq2seq", {f"{split}_{side}": str(S / f"{split}.{side}") for split in ("train", "dev", "test")
                                    for side in ("src", "tgt")}),
    "seq2seq-char": ("seq2seq", {**{f"{split}_{side}": str(S / f"{split}.{side}") for split in ("train", "dev")
                                    for side in ("src", "tgt")}, "tokenizer": "char"}),
    "seq2seq-jsonl": ("seq2seq", {"train": str(S / "train.jsonl"), "dev": str(S / "dev.jsonl"), "format": "jsonl",
                                  "source_field": "email", "target_field": "subject"}),
}


# ------------------------------------------------------------------ the reference: what the card read whole before

def whole_file_sheet(path, name, unit="lines", units=None, tokenize=str.split) -> dict:
    raw = Path(path).read_bytes()
    text = raw.decode("utf-8", errors="replace")
    lines = [normalised for normalised in (sheets.normalise(line) for line in text.splitlines()) if normalised]
    tokens, types = 0, set()
    for line in lines:
        line_tokens = tokenize(line)
        tokens += len(line_tokens)
        types.update(line_tokens)
    return {"name": name, "path": str(path), "sha256": file_sha256(path, name), "bytes": len(raw),
            "lines": len(lines), "unit": unit, "units": len(lines) if units is None else units,
            "tokens": tokens, "types": len(types), "charset": sheets.character_classes(text),
            "duplicates": sheets.duplicate_lines(lines)}


def whole_split(task: str, config, option: str):
    """(files, units, {side: texts}, labels) of a split, read whole by the family's whole-file readers."""
    data = config.data
    if task == "lm":
        path = getattr(data, option)
        lines = sheets.read_lines(path) if path else None
        return None if lines is None else ({option: path}, len(lines), {"text": lines}, [])
    if task == "tagger":
        from seqlab.families.tagger.config import read_sentences
        path = getattr(data, option)
        if not path:
            return None
        sentences = read_sentences(path, data, f"{option} file")
        return ({option: path}, len(sentences), {"text": [" ".join(s.tokens) for s in sentences]},
                [label for s in sentences for label in s.labels])
    if task == "classifier":
        from seqlab.families.classifier.config import read_split
        path = getattr(data, option)
        if not path:
            return None
        documents = read_split(path, data, f"{option} file")
        return ({option: path}, len(documents), {"text": [d.text for d in documents]},
                [d.label for d in documents if d.label is not None])
    from seqlab.families.seq2seq.config import read_pairs
    pairs, _ = read_pairs(data, option)
    if pairs is None:
        return None
    files = {n: getattr(data, n) for n in (option, f"{option}_src", f"{option}_tgt") if getattr(data, n)}
    return files, len(pairs), {"source": [p.source for p in pairs], "target": [p.target for p in pairs]}, []


def whole_training_data(task: str, config) -> dict:
    family = FAMILIES[task]
    reading = family.part("cards")
    splits = {option: split for option, _ in family.splits if (split := whole_split(task, config, option))}
    files = {}
    for name, (paths, units, _, _) in splits.items():
        for option, path in paths.items():
            counted = units if len(paths) == 1 or option == name else None
            files[option] = whole_file_sheet(path, option, family.unit if counted is not None else "lines", counted)
    out = {"unit": family.unit, "files": files, "splits": {}, "contamination": {}, "oov": {}}
    for name, (_, units, texts, labels) in splits.items():
        out["splits"][name] = {"units": units, **({"labels": sheets.label_distribution(labels)} if labels else {}),
                               "duplicates": {side: sheets.duplicate_lines(nonblank(t)) for side, t in texts.items()}}
    if "train" in splits:
        for side, texts in splits["train"][2].items():
            unit = reading.side_unit(config, side)
            index = sheets.TrainIndex(texts, unit=unit)
            known = set(tokens_of(texts, unit))
            for name, (_, _, other, _) in splits.items():
                if name != "train":
                    key = name if side == "text" else f"{name} ({side})"
                    out["contamination"][key] = index.check(other[side])
                    out["oov"][key] = oov_rate(other[side], known, unit)
    return out


def config_of(task: str, overrides: dict):
    return FAMILIES[task].pipeline.resolve(None, {**overrides, "output": "unused"})


# ------------------------------------------------------------------ the tests

@pytest.mark.parametrize("case", list(CASES))
def test_datasheet_streaming_equals_the_whole_file_figures_for_every_family(case):
    task, overrides = CASES[case]
    config = config_of(task, overrides)
    streamed = training_data(FAMILIES[task], config)
    assert json.dumps(streamed) == json.dumps(whole_training_data(task, config))     # values and key order
    assert streamed["files"] and streamed["splits"]["train"]["units"] > 0


def test_datasheet_streaming_cuts_anywhere_and_gives_the_same_sheet(tmp_path, monkeypatch):
    """Blocks of 1 to 9 bytes cut CR LF pairs, multi-byte characters, invalid bytes and every kind of line break
    that str.splitlines knows; the sheet is the whole file's."""
    rng = random.Random(3)
    pieces = ["the cat", "café", "東京", "naïve", "é", "", " ", "\t", "x" * 30, "£5", "\ufeffbom", "emoji 🙂"]
    breaks = ["\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u2029", "\n\n"]
    text = "".join(rng.choice(pieces) + " " + rng.choice(pieces) + rng.choice(breaks) for _ in range(400))
    data = text.encode("utf-8")
    data = data[:100] + b"\xff\xfe" + data[100:300] + b"\xe6\x9d" + data[300:] + b"\xe6"     # invalid, cut at the end
    path = tmp_path / "mixed.txt"
    path.write_bytes(data)
    expected = whole_file_sheet(path, "train")
    assert expected["duplicates"]["count"] > 0 and expected["charset"]["classes"]["non_ascii"] > 0
    for block in (1, 2, 3, 5, 9, 1 << 20):
        monkeypatch.setattr(sheets, "BLOCK", block)
        assert sheets.file_sheet(path, "train") == expected, block


@pytest.mark.slow
def test_datasheet_streaming_holds_no_training_text(tmp_path, monkeypatch):
    """The card's data of a language model on a 1 MB training file peaks at well under the file's size (blocks
    of 16 kB; what stays is the lines' 8-byte hashes, the types and the validation n-grams), where the whole-file
    code held several times the file (its bytes, its text, its lines and every training 13-gram's hash)."""
    rng = random.Random(0)
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(300)]
    train, valid = tmp_path / "train.txt", tmp_path / "valid.txt"
    with open(train, "w", encoding="utf-8") as handle:
        while handle.tell() < 1 << 20:
            handle.write(" ".join(rng.choices(words, k=rng.randint(5, 30))) + "\n")
    valid.write_text("".join(" ".join(rng.choices(words, k=20)) + "\n" for _ in range(100)), encoding="utf-8")
    config = config_of("lm", {"train": str(train), "valid": str(valid), "tokenizer": "word"})
    training_data(FAMILIES["lm"], config_of("lm", {"train": str(valid), "valid": str(valid)}))   # imports done
    monkeypatch.setattr(sheets, "BLOCK", 16 << 10)
    tracemalloc.start()
    try:
        figures = training_data(FAMILIES["lm"], config)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert figures["files"]["train"]["bytes"] == train.stat().st_size
    assert figures["contamination"]["valid"]["eval_lines"] == 100
    assert peak < train.stat().st_size / 2, f"peak {peak:,} bytes for a {train.stat().st_size:,}-byte file"


def test_datasheet_streaming_duplicate_count_and_oov_count_match_the_lists():
    from seqlab.cards.splits import OOVCount

    rng = random.Random(1)
    lines = [" ".join(rng.choices("abcdefg", k=rng.randint(1, 3))) for _ in range(500)]
    count = sheets.DuplicateCount()
    for line in lines:
        count.add(line)
    assert count.result() == sheets.duplicate_lines(lines)
    assert Counter(lines).most_common(1)[0][1] > 1
    for unit in ("word", "char"):
        known = set(tokens_of(lines[:250], unit))
        streamed = OOVCount(known, unit)
        for line in lines[250:]:
            streamed.add(line)
        assert streamed.result() == oov_rate(lines[250:], known, unit)
