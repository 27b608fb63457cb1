"""A language model's model card data (`seqlab.cards`): each split a file of lines (or the bundled corpus,
split 90/10, when the run read no --train), compared by characters for a character model; no bootstrap
intervals (the evaluation scores a file as one stream of tokens, not a sum over lines that could be
resampled: `seqlab.cards.intervals`)."""

from __future__ import annotations

from pathlib import Path

from seqlab.cards import datasheet as sheets
from seqlab.cards.splits import Split, nonblank, oov_rate, tokens_of


def read_split(config, option: str) -> Split | None:
    """A split of the run's data config: its non-blank lines, read one at a time (None when not given)."""
    path = getattr(config.data, option)
    if not path:
        return None
    return Split(option, {option: path}, ("text",), lambda: (((line,), ()) for line in sheets.iter_lines(path)))


def read_units(path: str | Path, fmt: str = "text", **options) -> dict:
    """A file's units (lines), their texts and labels (none), for `seqlab.cards.datasheet.read_units`."""
    texts = sheets.read_lines(path)
    return {"unit": "lines", "units": len(texts), "texts": texts, "labels": []}


def side_unit(config, side: str) -> str:
    """"char" where the model reads characters (50-character n-grams), else "word" (13-grams)."""
    return "char" if config.data.tokenizer == "char" else "word"


SHEET_BYTES = 256 << 20         # text files up to this size (together) get the full datasheet (streamed:
#                                 its time, not its memory, grows with the size: minutes at this one)


def training_data(config) -> dict | None:
    """The bundled corpus's sheet when the run read no --train and no --data; a prepared folder's sheet, from its
    manifest, for --data or text files too big for a datasheet in minutes (None: its files, read as every
    family's)."""
    data = config.data
    files = [getattr(data, option) for option, _ in (("train", 0), ("valid", 0), ("test", 0)) if getattr(data, option)]
    if data.prepared:
        return prepared_sheet(data.prepared)
    if files and sum(Path(f).stat().st_size for f in files if Path(f).exists()) > SHEET_BYTES:
        return big_files_sheet(data, files)
    return None if data.train else bundled_corpus_sheet(config)


def prepared_sheet(folder: str) -> dict:
    """What a prepared folder's manifest says of its data: the sources (path, bytes, SHA-256) and each split's
    lines and tokens; the text itself is not read again (duplicates and contamination are left out)."""
    import json

    try:
        manifest = json.loads((Path(folder) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = {}
    sources = {name: records[0] for name, records in manifest.get("sources", {}).items() if records}
    return {"unit": "lines", "bundled": f"the prepared folder `{folder}` (`seqlab prepare lm`; "
                                       f"{manifest.get('options', {}).get('tokenizer', '?')} tokens)",
            "files": {}, "sources": sources,
            "splits": {name: {"units": split.get("lines", 0), "tokens": split.get("ids", 0), "duplicates": {}}
                       for name, split in manifest.get("splits", {}).items()},
            "contamination": {}, "oov": {}}


def big_files_sheet(data, files: list[str]) -> dict:
    """Text files too big for a datasheet in minutes: their paths, sizes and SHA-256 (streamed)."""
    from seqlab.fileio import file_sha256

    sources = {option: {"path": str(Path(path).resolve()), "bytes": Path(path).stat().st_size,
                        "sha256": file_sha256(path, option)}
               for option in ("train", "valid", "test") if (path := getattr(data, option))}
    return {"unit": "lines", "bundled": f"text files of {sum(s['bytes'] for s in sources.values()) / 1e6:,.0f} MB "
                                       f"(over the {SHEET_BYTES >> 20} MB a datasheet reads: no duplicates or "
                                       "contamination figures)",
            "files": {}, "sources": sources, "splits": {}, "contamination": {}, "oov": {}}


def bundled_corpus_sheet(config) -> dict:
    """An LM trained on the bundled Tiny Shakespeare (no --train): the file, its 90/10 split (see
    `seqlab.data.readers.default_corpus`), and contamination of the 10% by the 90%."""
    from importlib import resources

    from seqlab.data.readers import DEFAULT_CORPUS, default_corpus

    train_lines, valid_lines = default_corpus()
    path = Path(str(resources.files("seqlab.corpora").joinpath(DEFAULT_CORPUS)))
    train, valid = nonblank(train_lines), nonblank(valid_lines)
    unit = side_unit(config, "text")
    index = sheets.TrainIndex(train, unit=unit)
    known = set(tokens_of(train, unit))
    return {"unit": "lines", "bundled": f"the bundled {DEFAULT_CORPUS}: train = its lines up to 90% of its "
                                        "characters, valid = the rest",
            "files": {"corpus": sheets.file_sheet(path, "corpus")},
            "splits": {"train": {"units": len(train), "duplicates": {"text": sheets.duplicate_lines(train)}},
                       "valid": {"units": len(valid), "duplicates": {"text": sheets.duplicate_lines(valid)}}},
            "contamination": {"valid": index.check(valid)}, "oov": {"valid": oov_rate(valid, known, unit)}}



def evaluation_file(data, option: str) -> None:
    """No evaluation file gets intervals (the module's docstring)."""
    return None


def interval_items(trained, path, progress, read_options: dict) -> None:
    """No per-line items (the module's docstring)."""
    return None
