"""What a run directory holds besides its weights, read without PyTorch: config.json as checked JSON
(`read_run_json`) and each family's tokenizer, vocabulary and label files. The pipelines read a run
through these, and so does the ONNX runtime (`seqlab.export.runtime`) from an export's copies of the
files, which never imports torch."""

from __future__ import annotations

from pathlib import Path

from seqlab.data.document_vocab import DocumentVocabulary
from seqlab.data.pair_vocab import PairVocabulary
from seqlab.data.tagger_vocab import TaggerVocabulary
from seqlab.data.text_features import FeatureExtractor
from seqlab.data.tokenizers import Tokenizer, tokenizer_from_dict
from seqlab.data.vocab import Vocab
from seqlab.errors import DAMAGED, SeqlabError
from seqlab.fileio import read_json, safetensors_metadata
from seqlab.version import RUN_FORMAT_VERSION


def read_run_json(run_dir: str | Path, task: str | None = None) -> dict:
    """A run directory's config.json, checked: it exists, its format version is readable, and (given
    `task`) it holds that task."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise SeqlabError(f"{run_dir} is not a directory; expected a seqlab run directory")
    if not (run_dir / "config.json").exists():
        raise SeqlabError(f"{run_dir} is not a seqlab run directory: it has no config.json")
    raw = read_json(run_dir / "config.json", "run config")
    if not isinstance(raw, dict):
        raise SeqlabError(f"{run_dir}/config.json is damaged: expected a JSON object, found "
                          f"{type(raw).__name__}; retrain into this directory with --overwrite")
    version = raw.get("format_version")
    if not isinstance(version, int) or version > RUN_FORMAT_VERSION:
        raise SeqlabError(f"{run_dir}/config.json has format version {version!r}; this seqlab reads "
                          f"versions up to {RUN_FORMAT_VERSION}")
    names = {"lm": "a language model", "tagger": "a tagger", "classifier": "a classifier",
             "seq2seq": "a sequence-to-sequence model"}
    if task is not None and raw.get("task") != task:
        raise SeqlabError(f"{run_dir} holds a {raw.get('task')!r} run, not {names.get(task, task)}")
    return raw


def read_document_vocabulary(run_dir: Path, tokenizer: str, lowercase: bool, ngrams: int, max_length: int,
                             truncate: str) -> DocumentVocabulary:
    """A classifier's vocabulary (vocab.json and / or features.json) and labels, read as its run's data
    options say (--tokenizer, --lowercase, --ngrams, --max-length, --truncate)."""
    try:
        labels = read_json(run_dir / "labels.json", "labels file")["labels"]
        words, fallback = None, False
        if (run_dir / "vocab.json").exists():
            vocab = read_json(run_dir / "vocab.json", "vocabulary file")
            words, fallback = Vocab.from_dict(vocab), bool(vocab.get("lowercase_fallback"))
        features = FeatureExtractor.from_dict(read_json(run_dir / "features.json", "features file")) \
            if (run_dir / "features.json").exists() else None
    except DAMAGED as error:
        raise SeqlabError(f"{run_dir}: vocab.json, labels.json or features.json is damaged ({error}); retrain "
                          "into this directory with --overwrite") from None
    if words is None and features is None:
        raise SeqlabError(f"{run_dir} has neither vocab.json nor features.json")
    return DocumentVocabulary(words, list(labels), tokenizer, lowercase, ngrams, max_length, truncate, features,
                              fallback)


def read_tagger_vocabulary(run_dir: Path) -> tuple[TaggerVocabulary, str, str]:
    """A tagger's vocabulary, the scheme the model tags in and the training file's scheme."""
    try:
        vocab = read_json(run_dir / "vocab.json", "vocabulary file")
        words = Vocab.from_dict(vocab)
        labels = read_json(run_dir / "labels.json", "labels file")
        chars = Vocab.from_dict(read_json(run_dir / "chars.json", "characters file")) \
            if (run_dir / "chars.json").exists() else None
        fallback = bool(vocab.get("lowercase_fallback"))
        vocabulary = TaggerVocabulary(words, list(labels["labels"]), chars, lowercase_fallback=fallback)
        return vocabulary, labels["scheme"], labels.get("file_scheme", labels["scheme"])
    except DAMAGED as error:
        raise SeqlabError(f"{run_dir}: vocab.json, labels.json or chars.json is damaged ({error}); retrain into this "
                          "directory with --overwrite") from None


def read_tokenizer_and_vocab(run_dir: Path) -> tuple[Tokenizer, Vocab]:
    """A language model's tokenizer and vocabulary."""
    try:
        tokenizer = tokenizer_from_dict(read_json(run_dir / "tokenizer.json", "tokenizer file"))
        vocab = Vocab.from_dict(read_json(run_dir / "vocab.json", "vocabulary file"))
    except DAMAGED as error:
        raise SeqlabError(f"{run_dir}: tokenizer.json or vocab.json is damaged ({error}); retrain into this "
                          "directory with --overwrite") from None
    return tokenizer, vocab


def read_pair_vocabulary(run_dir: Path, joint: bool, max_source: int, max_target: int) -> PairVocabulary:
    """A sequence-to-sequence model's tokenizers and vocabularies (one of each when shared); `joint`: the
    lm's source <sep> target sequences; the run's length limits."""
    try:
        tokenizers = read_json(run_dir / "tokenizer.json", "tokenizer file")
        vocabs = read_json(run_dir / "vocab.json", "vocabulary file")
        source_tokenizer = tokenizer_from_dict(tokenizers["source"])
        source_vocab = Vocab(vocabs["source"])
        if tokenizers["shared"]:
            target_tokenizer, target_vocab = source_tokenizer, source_vocab
        else:
            target_tokenizer, target_vocab = tokenizer_from_dict(tokenizers["target"]), Vocab(vocabs["target"])
    except DAMAGED as error:
        raise SeqlabError(f"{run_dir}: tokenizer.json or vocab.json is damaged ({error}); retrain into this "
                          "directory with --overwrite") from None
    return PairVocabulary(source_tokenizer, target_tokenizer, source_vocab, target_vocab, joint, max_source,
                          max_target)


def detokenize_lines(tokenizer: Tokenizer, vocab: Vocab, ids: list[int]) -> str:
    """A language model's ids -> text, `</s>` as a line break."""
    lines, current = [], []
    for token in vocab.decode(ids):
        if token == "</s>":
            lines.append(tokenizer.detokenize(current))
            current = []
        else:
            current.append(token)
    lines.append(tokenizer.detokenize(current))
    return "\n".join(lines)


class FromRun:
    """What a trained model loaded from a run directory has besides its model: the directory, and its model
    card (`seqlab.harms.card`)."""

    run_dir: Path | None = None

    def from_run(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        return self

    @property
    def card(self) -> dict:
        """The run's model card (model_card.json, written when training completed or by `seqlab card RUN`),
        refused when it describes other weights than the run's model.safetensors."""
        if self.run_dir is None:
            raise SeqlabError("this model was not loaded from a run directory, so it has no model card")
        path = self.run_dir / "model_card.json"
        if not path.exists():
            raise SeqlabError(f"{self.run_dir} has no model card (model_card.json): `seqlab card {self.run_dir}` "
                              "writes it")
        card = read_json(path, "model card")
        if not isinstance(card, dict) or card.get("weights_sha256") != safetensors_metadata(
                self.run_dir / "model.safetensors").get("sha256"):
            raise SeqlabError(f"{path} describes other weights than {self.run_dir}/model.safetensors (or is damaged): "
                              f"`seqlab card {self.run_dir}` rewrites it")
        return card
