"""Sequence labelling, end to end: `train_tagger(config)` and `load_tagger(run_dir)`.

    import seqlab
    config = seqlab.resolve_tagger_config(overrides={"train": "en_ewt-ud-train.conllu",
                                                     "dev": "en_ewt-ud-dev.conllu", "format": "conllu"})
    seqlab.train_tagger(config)
    tagger = seqlab.load_tagger("runs/tagger")
    tagger.tag(["The", "cat", "sat", "."])        # [("DET", 0.99), ("NOUN", 0.98), ...]

A run directory holds config.json (data, model and train groups, a format version, "task":
"tagger"), vocab.json (words), chars.json (characters, with character features), labels.json (the
tags, and the entity scheme), model.safetensors (the best weights), checkpoint.safetensors (for
--resume), metrics.jsonl, train_log.jsonl and curves.png.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

from seqlab.config import check_fields, option
from seqlab.data.conll import FORMATS, Sentence, labelled_sentences, read_labelled
from seqlab.data.limits import DEFAULT_MAX_TOKENS, InputLimit
from seqlab.data.stream import CHUNK_SIZE, LineReader, chunked, interactive
from seqlab.data.tags import (
    SCHEMES,
    allowed_transitions,
    convert,
    detect_scheme,
    invalid_positions,
    is_entity_tag,
    looks_like_entity_tags,
)
from seqlab.data.vectors import extend_vocab, fill_embeddings
from seqlab.errors import SeqlabError, place
from seqlab.fileio import atomic_write_json
from seqlab.metrics import mistakes, most_confused
from seqlab.models.tagger import Tagger, TaggerConfig
from seqlab.pipelines.lm_feature_runs import (
    check_paths,
    copy_lm_files,
    lm_features_note,
    load_lm_features,
    rebuild_lm_features,
)
from seqlab.pipelines.run_files import FromRun
from seqlab.pipelines.run_files import read_tagger_vocabulary as read_vocabulary
from seqlab.pipelines.runs import (
    Pipeline,
    check_sizes,
    load_best,
    log,
    read_run_config_as,
    refuse_fused_output,
    resolve_run_config,
    start_run,
    train_in_run,
)
from seqlab.progress import progress_bar
from seqlab.tasks.tagging import TaggerVocabulary, TaggingTask, best_tags, length_batches, with_lm_features
from seqlab.training import distributed
from seqlab.training.trainer import TrainConfig, Trainer

# what a tagger trains with unless told otherwise (the trainer's defaults suit language models)
TRAIN_DEFAULTS = {"output": "runs/tagger", "epochs": 20, "batch_size": 32, "eval_batch_size": 64,
                  "optimizer": "adam", "lr": 2e-3, "grad_clip": 5.0, "log_every": 50}


@dataclass
class TaggerDataConfig:
    """Where the labelled sentences come from (saved under "data")."""

    train: str = option("", "training file (CoNLL-U or CoNLL-2003 columns)", file=True)
    dev: str = option("", "development file: evaluated every epoch, for early stopping and the best weights", file=True)
    test: str = option("", "test file, scored with the best weights at the end", file=True)
    format: str = option("conllu", "file format", choices=FORMATS)
    label_column: str = option("", "the label column: a CoNLL-U name (upos, xpos, ...) or index; for CoNLL, "
                                   "an index (default: upos / the last column)")
    scheme: str = option("auto", "entity tag scheme of the files (auto: detected; none: plain tags such as "
                                 "POS)", choices=("auto", "none", *SCHEMES))
    train_scheme: str = option("", "train and predict in this entity scheme (e.g. bioes); default: the "
                                    "files' own", choices=("", *SCHEMES))
    min_freq: int = option(1, "keep words seen at least this often in training; the rest become <unk>", at_least=1)
    unk_replace: float = option(0.0, "training: read each word seen only once as <unk> with this probability, "
                                     "so that <unk> (any unseen word) gets a trained embedding (Lample et al. "
                                     "2016 use 0.5)", at_least=0, at_most=1)
    max_vocab: int = option(0, "keep at most this many words, specials included (0: no limit)", at_least=0)
    vectors: str = option("", "pretrained word vectors (word2vec or GloVe text format, may be .gz) that "
                              "initialise the word embeddings; their words join the vocabulary, so a word "
                              "unseen in training but in the file keeps its vector", file=True)
    vectors_limit: int = option(0, "read only the first N vectors of --vectors (0: all)", at_least=0)
    lm_features: list[str] = option([], "contextual string embeddings (Akbik et al. 2018): one or two character-LM "
                                        "run directories, FWD_RUN [BWD_RUN] (seqlab train lm --tokenizer char, the "
                                        "second with --reverse); each word also gets the forward LM's state after "
                                        "its last character and the backward LM's after its first; the LMs are "
                                        "frozen and copied into this run")

    def __post_init__(self):
        check_fields(self)
        check_paths(self.lm_features)


@dataclass
class TaggerTrainConfig:
    """A tagger training run: data, model and training options."""

    data: TaggerDataConfig = field(default_factory=TaggerDataConfig)
    model: TaggerConfig = field(default_factory=TaggerConfig)
    train: TrainConfig = field(default_factory=lambda: TrainConfig(**TRAIN_DEFAULTS))


CONFIG_GROUPS = {"data": TaggerDataConfig, "model": TaggerConfig, "train": TrainConfig}


def resolve_tagger_config(config_file: str | Path | None = None, overrides: dict | None = None,
                          resume: bool = False) -> TaggerTrainConfig:
    """Defaults (TRAIN_DEFAULTS for the trainer) < the config file < overrides (the command line). With
    `resume`, the run's own config.json is the base and only options of the `train` group may change."""
    return resolve_run_config(TaggerTrainConfig, CONFIG_GROUPS, config_file, overrides, resume, read_run_config,
                              TRAIN_DEFAULTS)


def read_sentences(path: str, data: TaggerDataConfig, what: str) -> list[Sentence]:
    return read_labelled(path, data.format, data.label_column or None, what)


def refuse_stray_tags(sentences: list[Sentence], path: str, what: str) -> None:
    """In a file of entity tags, a tag that fits no scheme (`I-`, `X-PER`) is an error naming its line: read
    as a plain label it would silently turn the whole run into plain tagging (accuracy instead of entity F1,
    no CRF constraints)."""
    for sentence in sentences:
        for i, tag in enumerate(sentence.labels):
            if not is_entity_tag(tag):
                raise SeqlabError(f"{place(what, path, sentence.line_of(i))}: the tag {tag!r} fits no entity scheme; "
                                  "the other tags are O and B-/I-/E-/S- plus a type (e.g. B-PER): correct it, or "
                                  "pass --scheme none to read every tag as a plain label")


def prepare(sentences: list[Sentence], scheme: str, target: str, path: str) -> None:
    """Report invalid entity sequences (file and line; scored as conlleval would) and convert the tags
    to the scheme the model uses, in place."""
    if scheme == "none":
        return
    for sentence in sentences:
        bad = invalid_positions(sentence.labels, scheme)
        if bad:
            log(f"warning: {path}:{sentence.line_of(bad[0])}: {sentence.labels[bad[0]]!r} breaks the {scheme.upper()} "
                "scheme; read as conlleval reads it")
        if target != scheme:
            sentence.labels = convert(sentence.labels, target)


def train_tagger(config: TaggerTrainConfig, resume: bool = False, overwrite: bool = False,
                 callback: Callable[[dict], None] | None = None) -> dict:
    """Train a tagger into `config.train.output`; return the final dev/test figures."""
    return train_in_run(config, resume, overwrite, lambda config, run_dir, device: _train_tagger(
        config, run_dir, device, resume, overwrite, callback))


def _train_tagger(config, run_dir, device, resume, overwrite, callback) -> dict:
    data = config.data
    if not data.train or not data.dev:
        raise SeqlabError("a tagger needs --train and --dev files")
    refuse_fused_output(config.train, "a tagger")
    train = read_sentences(data.train, data, "training file")
    dev = read_sentences(data.dev, data, "development file")
    test = read_sentences(data.test, data, "test file") if data.test else None
    entity = data.scheme != "none" and looks_like_entity_tags(label for s in train for label in s.labels)
    if data.scheme not in ("auto", "none") and not entity:
        example = next(label for s in train for label in s.labels if not is_entity_tag(label))
        raise SeqlabError(f"--scheme {data.scheme}: the tags of {data.train} are not entity tags (e.g. {example!r}); "
                          "use --scheme none (or auto) for plain tags such as POS")
    if entity:
        for sentences, path, what in ((train, data.train, "training file"), (dev, data.dev, "development file"),
                                      (test or [], data.test, "test file")):
            refuse_stray_tags(sentences, path, what)
    scheme = "none" if not entity else (detect_scheme(s.labels for s in train) if data.scheme == "auto"
                                        else data.scheme)
    target = data.train_scheme or scheme
    for sentences, path in ((train, data.train), (dev, data.dev), (test or [], data.test)):
        prepare(sentences, scheme, target, path)
    vectors = None
    if resume:
        vocabulary, _, _ = read_vocabulary(run_dir)
    else:
        vocabulary = TaggerVocabulary.build(train, data.min_freq, data.max_vocab or None,
                                            config.model.char_features != "none")
        if data.vectors:
            vocabulary, vectors = with_vectors(vocabulary, data.vectors, data.vectors_limit)
            config = dataclasses.replace(config, model=dataclasses.replace(config.model,
                                                                           embedding_size=vectors[0].size(1)))
    lm_features = None
    if data.lm_features:      # resumed: the run's own copies (the weights come back with the checkpoint)
        lm_features = (rebuild_lm_features(run_dir, config.model.lm_feature_size) if resume
                       else load_lm_features(data.lm_features))
    model_config = dataclasses.replace(config.model, vocab_size=len(vocabulary.words),
                                       num_labels=len(vocabulary.labels),
                                       char_vocab_size=len(vocabulary.chars) if vocabulary.chars else 0,
                                       lm_feature_size=lm_features.output_size if lm_features else 0)
    config = dataclasses.replace(config, model=model_config)
    constraints = None
    if model_config.crf and target != "none":
        constraints = tuple(torch.tensor(m) for m in allowed_transitions(vocabulary.labels, target))
    torch.manual_seed(config.train.seed)
    model = Tagger(model_config, constraints, lm_features)
    if vectors is not None:
        fill_embeddings(model.embedding, *vectors)
    model = model.to(device)
    rank = distributed.world()[0]
    torch.manual_seed(config.train.seed + rank)
    log(f"{len(train):,} training sentences, {len(vocabulary.words):,} words, {len(vocabulary.labels)} tags"
        f"{f' ({target.upper()})' if target != 'none' else ''}; {model_config.encoder} tagger with "
        f"{model.num_parameters():,} parameters on {device}"
        f"{lm_features_note(model) if lm_features else ''}")
    if rank == 0 and not resume:
        write_run_files(run_dir, config, vocabulary, target, scheme, overwrite)
    distributed.barrier()
    task = TaggingTask(vocabulary, train, dev, test, config.train.batch_size, config.train.eval_batch_size,
                       config.train.seed, data.unk_replace, model)
    return Trainer(task, model, config.train, run_dir, device, callback).fit(resume=resume)


def with_vectors(vocabulary: TaggerVocabulary, path: str,
                 limit: int = 0) -> tuple[TaggerVocabulary, tuple[torch.Tensor, torch.Tensor]]:
    """The vocabulary with the vectors file's words added to its vocabulary (training words first, ids
    unchanged) and lowercase fallback on, and each word's vector with a mask of the words that have one
    (exact match, else the lowercase form)."""
    words, vectors, found, message = extend_vocab(vocabulary.words, path, limit)
    log(message)
    return TaggerVocabulary(words, vocabulary.labels, vocabulary.chars, lowercase_fallback=True), (vectors, found)


def write_run_files(run_dir: Path, config: TaggerTrainConfig, vocabulary: TaggerVocabulary, scheme: str,
                    file_scheme: str, overwrite: bool = False) -> None:
    """`scheme`: the one the model tags in; `file_scheme`: the training file's."""
    start_run(run_dir, "tagger", config, overwrite)
    atomic_write_json(run_dir / "vocab.json", {**vocabulary.words.to_dict(), "lowercase_fallback":
                                               vocabulary.lowercase_fallback})
    atomic_write_json(run_dir / "labels.json", {"labels": vocabulary.labels, "scheme": scheme,
                                                "file_scheme": file_scheme})
    if vocabulary.chars is not None:
        atomic_write_json(run_dir / "chars.json", vocabulary.chars.to_dict())
    if config.data.lm_features:
        copy_lm_files(run_dir, config.data.lm_features)


def read_run_config(run_dir: str | Path) -> TaggerTrainConfig:
    return read_run_config_as(run_dir, "tagger", TaggerTrainConfig, CONFIG_GROUPS)


# ---------------------------------------------------------------------------- a trained tagger

def load_tagger(run_dir: str | Path, device: str = "cpu") -> TrainedTagger:
    """A trained tagger from its run directory (the best weights)."""
    run_dir = Path(run_dir)
    config = read_run_config(run_dir)
    vocabulary, scheme, file_scheme = read_vocabulary(run_dir)
    check_sizes(run_dir, config, {"vocab_size": ("vocab.json", len(vocabulary.words)),
                                  "num_labels": ("labels.json", len(vocabulary.labels)),
                                  "char_vocab_size": ("chars.json", len(vocabulary.chars) if vocabulary.chars else 0)})
    lm_features = rebuild_lm_features(run_dir, config.model.lm_feature_size)
    model, device = load_best(run_dir, Tagger(config.model, lm_features=lm_features), device)
    return TrainedTagger(model, vocabulary, scheme, config, device, file_scheme).from_run(run_dir)


class TrainedTagger(FromRun):
    """A loaded tagger: tokens in, tags (with their probabilities) out."""

    def __init__(self, model: Tagger, vocabulary: TaggerVocabulary, scheme: str, config: TaggerTrainConfig, device,
                 file_scheme: str | None = None):
        self.model, self.vocabulary, self.scheme, self.config, self.device = model, vocabulary, scheme, config, device
        self.file_scheme = file_scheme or scheme            # the training file's: how a gold file is read

    @torch.no_grad()
    def tag_sentences(self, sentences: list[list[str]], batch_size: int = 64,
                      progress: bool | None = False) -> list[list[tuple[str, float]]]:
        """(tag, probability) for every token of every sentence, batched; an empty sentence gets [].
        `progress`: None or True shows a progress bar over the batches when stderr is a terminal.

        The probability is the tag's softmax probability at its token; with a CRF, the tags come from
        Viterbi and each one's probability is its marginal p(y_t = tag | sentence) under the CRF."""
        results: list[list[tuple[str, float]]] = [[] for _ in sentences]
        items = [Sentence(list(tokens), ["O"] * len(tokens)) for tokens in sentences]
        order = [i for i in sorted(range(len(items)), key=lambda i: len(items[i])) if len(items[i])]
        starts = range(0, len(order), batch_size)
        for k in progress_bar(starts, progress, desc="tagging", unit="batch", leave=False):
            chunk = order[k:k + batch_size]
            sentences = [items[i] for i in chunk]
            encoded = with_lm_features(self.model, sentences, [self.vocabulary.encode(s) for s in sentences])
            batch = self.vocabulary.collate(encoded).to(self.device)
            scores = self.model(batch.words, batch.lengths, batch.chars, batch.lm)   # (B, T, K)
            if self.model.crf is not None:
                probabilities = self.model.crf.marginals(scores.float(), batch.mask)   # (B, T, K)
            else:
                probabilities = torch.softmax(scores.float(), dim=-1)
            best = best_tags(self.model, scores, batch.mask)                   # (B, T)
            chosen = probabilities.gather(-1, best[:, :, None]).squeeze(-1)   # (B, T)
            for row, i in enumerate(chunk):
                n = len(items[i])
                results[i] = [(self.vocabulary.labels[t], p) for t, p in
                              zip(best[row, :n].tolist(), chosen[row, :n].tolist(), strict=True)]
        return results

    def tag(self, tokens: list[str]) -> list[tuple[str, float]]:
        """(tag, probability) for each token of one sentence."""
        return self.tag_sentences([tokens])[0]

    def input_limit(self, max_input_length: int | None = None, long_input: str = "truncate") -> InputLimit:
        """The longest sentence this tagger reads (`seqlab.data.limits`): a transformer's positions, else
        DEFAULT_MAX_TOKENS, unless `max_input_length` says otherwise; longer ones truncated or rejected."""
        model = self.config.model
        hard = model.max_positions if model.encoder == "transformer" else None
        return InputLimit.resolve(max_input_length, hard or DEFAULT_MAX_TOKENS, hard, f"this {model.encoder} tagger",
                                  long_input, "head", "sentence")

    def tag_stream(self, path: str | Path = "-", input_format: str = "text", batch_size: int = 64,
                   chunk_size: int = CHUNK_SIZE, max_input_length: int | None = None, long_input: str = "truncate",
                   what: str = "input file") -> Iterator[list[tuple[list[str], list[tuple[str, float]]]]]:
        """Tag a file (or standard input, "-") a chunk of sentences at a time: each chunk's (tokens, tags)
        pairs, in input order, as soon as it is tagged; memory does not grow with the input.

        input_format: text (a sentence per line, tokens separated by whitespace; an empty line is an
        empty sentence) or conllu / conll (the tokens of a CoNLL-U or CoNLL-2003 file). A chunk holds at
        most `chunk_size` sentences, sorted by length into batches (from a pipe or a terminal the first
        chunk is one batch, then twice as many each time, and a chunk ends early when the input pauses).
        Sentences longer than the limit (`input_limit`) are cut to their first tokens with a warning, or
        refused (long_input="reject")."""
        limit = self.input_limit(max_input_length, long_input)
        with LineReader(path, what, limit.chars) as lines:
            sentences = input_sentences(lines, input_format, limit, path, what)
            for chunk in chunked(sentences, chunk_size, *interactive(lines, batch_size), chars=token_chars):
                yield list(zip(chunk, self.tag_sentences(chunk, batch_size), strict=True))
        limit.warn(place(what, path))

    def evaluate_file(self, path: str | Path, fmt: str | None = None, top_confusions: int = 10,
                      chunk_size: int = CHUNK_SIZE, max_input_length: int | None = None,
                      long_input: str = "truncate", on_predictions: Callable | None = None) -> dict:
        """Accuracy (and entity P/R/F1 for IOB-style tags) on a labelled file, the most frequent
        (gold, predicted) mistakes, and the gold tags training never saw (each token an error).
        `on_predictions(gold, predicted)` is called with each chunk's tag lists (in the run's scheme),
        for figures per sentence (`seqlab.harms.intervals`).

        The file is read twice, a chunk of sentences at a time, in memory that does not grow with it:
        once for its entity scheme (the one under which the fewest tags are invalid), once to tag and
        count. Every figure is a sum over sentences (tokens right, entity spans found / predicted /
        in gold, per type; mistakes by tag pair), so the chunks give the figures of the whole file
        (the loss to float rounding). A sentence over the limit is scored on its first tokens."""
        data = self.config.data
        what = "evaluation file"
        limit = self.input_limit(max_input_length, long_input)
        read = labelled_sentences(None, fmt or data.format, data.label_column or None, path, what, limit.tokens)
        source = self.scheme
        if self.scheme != "none":
            with LineReader(path, what, limit.chars, stdin=False) as lines:
                checked = (refuse_stray_tags([s], str(path), what) or s for s in read(lines))
                source = detect_scheme((s.labels for s in checked), prefer=self.file_scheme)
        task = TaggingTask(self.vocabulary, [], [], None, batch_size=1, eval_batch_size=64, seed=0)
        task.keep_predictions = True
        totals: dict = {}
        confused, unseen = Counter(), Counter()
        with LineReader(path, what, limit.chars, stdin=False) as lines:
            for chunk in chunked(read(lines), chunk_size, chars=lambda s: token_chars(s.tokens)):
                for s in chunk:
                    limit.apply(s.tokens, lines.place(s.line), s.line, len(s) + s.dropped)   # reject, or count
                if self.scheme != "none":
                    prepare(chunk, source, self.scheme, str(path))
                encoded = with_lm_features(self.model, chunk, [self.vocabulary.encode(s) for s in chunk])
                batches = length_batches(encoded, self.vocabulary, 64, None)
                for key, value in task.evaluate(self.model, batches, self.device).items():
                    totals[key] = totals.get(key, 0) + value
                confused.update(mistakes(*task.predictions))
                if on_predictions is not None:
                    on_predictions(*task.predictions)
                unseen.update(label for s in chunk for label in s.labels if label not in self.vocabulary.label_index)
        limit.warn(place(what, path))
        result = task.summarize(totals)
        result["confusions"] = [{"gold": g, "predicted": p, "count": n}
                                for g, p, n in most_confused(confused, top_confusions)]
        result["unseen_tags"] = dict(unseen.most_common())
        result["truncated"] = limit.cut
        return result


def token_chars(tokens: list[str]) -> int:
    """A sentence's size in characters, for `chunked`."""
    return sum(map(len, tokens))


def input_sentences(lines: LineReader, fmt: str, limit: InputLimit, path, what: str) -> Iterator[list[str]]:
    """The token lists to tag, one at a time, each within the limit: the lines of a text split at
    whitespace (and at the other line breaks of str.splitlines, as `seqlab tag` always read them), or
    the tokens of CoNLL-U / CoNLL-2003 sentences (for conll, the first column; other columns ignored)."""
    if fmt == "text":
        for line in lines:
            parts = (line.text + "\n").splitlines()
            for k, part in enumerate(parts):
                yield limit.apply(part.split(), lines.place(line.number), line.number,
                                  line_cut=line.cut and k == len(parts) - 1)
        return
    if fmt not in FORMATS:
        raise SeqlabError(f"--input-format {fmt!r}: choose text, {', '.join(FORMATS)}")
    read = labelled_sentences(None, fmt, None if fmt == "conllu" else 0, path, what, limit.tokens)
    for sentence in read(lines):
        yield limit.apply(sentence.tokens, lines.place(sentence.line), sentence.line, len(sentence) + sentence.dropped)


PIPELINE = Pipeline(
    name="tagger", title="a tagger", summary="a sequence tagger (POS, NER) on CoNLL-U or CoNLL-2003 files",
    config=TaggerTrainConfig, groups=CONFIG_GROUPS, train_defaults=TRAIN_DEFAULTS,
    derived=("vocab_size", "num_labels", "char_vocab_size", "lm_feature_size"), resolve=resolve_tagger_config,
    train=train_tagger,
    load=load_tagger, evaluate=TrainedTagger.evaluate_file,
    next_steps=("seqlab tag {output} FILE", "seqlab evaluate {output} FILE"))
