"""A language model's prepared data (`seqlab prepare lm`, `seqlab.prepare("lm", ...)`), and the one data path
of `seqlab train lm`: the folder given with --data, or its plain files prepared into a cache on first use.

    seqlab prepare lm --train wiki.train.tokens --valid wiki.valid.tokens --tokenizer word --output data/wt2
    seqlab train lm --data data/wt2 --arch lstm ...

The cache is keyed by the files' SHA-256 and the options that shape the ids (`cache_key`): it lives in the
run directory (RUN/prepared) or, with $SEQLAB_CACHE_DIR set, in that folder shared by every run, so a second
run, a --resume and every DDP rank start without tokenizing again.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from seqlab.data.prepare_text import Inserts, Source, TextOptions, prepare_text
from seqlab.data.prepared import Prepared, cached, check_given
from seqlab.data.tokenizers import Tokenizer, tokenizer_from_dict
from seqlab.data.vocab import Vocab
from seqlab.errors import SeqlabError
from seqlab.fileio import file_sha256

FAMILY = "lm"
SPLITS = (("train", "train"), ("valid", "valid"), ("test", "test"))        # (data option, split)
SKIP = ("prepared", "canary", "canary_repeats")      # data options that are not for `seqlab prepare lm`


def text_options(data) -> TextOptions:
    return TextOptions(data.tokenizer, data.bpe_vocab_size, data.min_freq, data.max_vocab, data.reverse)


def sources(data) -> dict[str, Source]:
    """The splits of a data config as sources: its files, or the bundled corpus split 90/10."""
    if not data.train:
        from seqlab.data.readers import default_corpus

        train, valid = default_corpus()
        return {"train": Source(lines=train, what="training file", name="the bundled corpus (first 90%)"),
                "valid": Source(lines=valid, what="validation file", name="the bundled corpus (last 10%)")}
    found = {"train": Source(data.train, "training file", column=data.text_column),
             "valid": Source(data.valid, "validation file", column=data.text_column)}
    if data.test:
        found["test"] = Source(data.test, "test file", column=data.text_column)
    return found


def prepare(data, output: str | Path, workers: int = 0, overwrite: bool = False, progress: bool = True,
            inserts: Inserts | None = None) -> Path:
    """Prepare the splits of an `LMDataConfig` into `output` (see the module docstring)."""
    if not data.train:
        raise SeqlabError("seqlab prepare lm needs --train and --valid files")
    return prepare_text(FAMILY, sources(data), text_options(data), output, workers, overwrite, inserts, progress)


def open_prepared(folder: str | Path) -> Prepared:
    prepared = Prepared(folder, FAMILY)
    for name in ("train", "valid"):
        if prepared.split(name) is None:
            raise SeqlabError(f"--data {folder} has no {name} split; prepare it with --train and --valid")
    return prepared


def token_options(prepared: Prepared) -> dict:
    """The data options that shaped the prepared ids, as config values."""
    return prepared.shaped(("tokenizer", "bpe_vocab_size", "min_freq", "max_vocab", "reverse"))


def tokenizer_and_vocab(prepared: Prepared) -> tuple[Tokenizer, Vocab]:
    """The folder's tokenizer and vocabulary, every id of its shards checked to be one of the vocabulary's."""
    try:
        tokenizer, vocab = (tokenizer_from_dict(prepared.read_json("tokenizer.json")),
                            Vocab.from_dict(prepared.read_json("vocab.json")))
    except (KeyError, TypeError) as error:
        raise SeqlabError(f"{prepared.folder}: tokenizer.json or vocab.json is damaged ({error}); prepare again") \
            from None
    prepared.check_ids(None, len(vocab), f"{len(vocab):,} tokens of vocab.json")
    return tokenizer, vocab


def cache_key(data, hooks: list) -> dict:
    """What the prepared ids depend on: every source's SHA-256 (the bundled corpus's file) and the options."""
    if data.train:
        files = {name: [file_sha256(getattr(data, option), f"{name} file"), data.text_column]
                 for option, name in SPLITS if getattr(data, option)}
    else:
        from seqlab.data.readers import DEFAULT_CORPUS

        files = {"bundled": file_sha256(Path(str(resources.files("seqlab.corpora").joinpath(DEFAULT_CORPUS))))}
    return {"family": FAMILY, "files": files, "options": text_options(data).as_dict(),
            "hooks": [hook.key for hook in hooks]}


def for_run(config, run_dir: Path, resume: bool, hooks: list, rank: int, barrier, log) -> Prepared:
    """The run's prepared data: --data, or the cache of its files (prepared here by rank 0 on a miss; the other
    ranks wait at `barrier`). The hooks' planted lines (canaries) are drawn, or read back on --resume."""
    data = config.data
    if data.prepared:
        prepared = open_prepared(data.prepared)
        check_given(prepared, [(f"--{option}", getattr(data, option), name) for option, name in SPLITS])
        return prepared
    splits = sources(data)                       # each file checked (missing, a folder) before it is hashed
    wrote = []

    def write(folder: Path, extra: dict) -> None:
        wrote.append(folder)
        inserts = None
        if hooks:
            inserts = Inserts(place=lambda count: _place(hooks, run_dir, count, resume),
                              complete=lambda vocab: _complete(hooks, vocab), key=";".join(h.key for h in hooks))
        prepare_text(FAMILY, splits, text_options(data), folder, workers=0, overwrite=True, inserts=inserts,
                     progress=config.train.progress, extra=extra)

    # planted secrets live in their run only: its cache is RUN/prepared
    folder = cached(FAMILY, cache_key(data, hooks), run_dir, rank, barrier, log, write, shared=not hooks)
    prepared = open_prepared(folder)
    if hooks and not wrote:                      # the record of what was planted, drawn again (or read back)
        lines = prepared.split("train").source_lines
        for hook in hooks:
            hook.placements(run_dir, lines, resume, write=rank == 0 and not resume)
    return prepared


def _place(hooks: list, run_dir: Path, count: int, resume: bool) -> dict[int, str]:
    placed: dict[int, str] = {}
    for hook in hooks:
        placed.update(hook.placements(run_dir, count, resume, write=not resume))
    return placed


def _complete(hooks: list, vocab: Vocab) -> Vocab:
    for hook in hooks:
        vocab = hook.vocabulary(vocab)
    return vocab
