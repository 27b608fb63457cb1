"""The data pipeline: vocabulary, tokenizers, readers, bad files, batching and config files."""

from __future__ import annotations

import json
from collections import Counter
from importlib import resources

import pytest
import torch

from conftest import TRAIN
from seqlab.config import coerce, from_dict, read_config_file
from seqlab.data.batching import StreamBatches, WindowBatches, sliding_windows
from seqlab.data.readers import default_corpus, encode_lines, read_lines, read_stream
from seqlab.data.tokenizers import (
    BPETokenizer,
    CharTokenizer,
    WordTokenizer,
    make_tokenizer,
    tokenizer_from_dict,
)
from seqlab.data.vocab import BOS, EOS, PAD, SEP, SPECIALS, UNK, Vocab
from seqlab.errors import SeqlabError
from seqlab.families.lm.model import LMConfig
from seqlab.fileio import read_text
from seqlab.training.config import TrainConfig

# ----------------------------------------------------------------------------------------- vocab


def test_vocab_special_ids_are_fixed():
    assert (PAD, UNK, BOS, EOS, SEP) == (0, 1, 2, 3, 4)
    assert SPECIALS == ("<pad>", "<unk>", "<s>", "</s>", "<sep>")
    vocab = Vocab.build(Counter({"the": 5, "<s>": 9, "</s>": 9}))
    assert vocab.tokens[:5] == ["<pad>", "<unk>", "<s>", "</s>", "<sep>"]
    assert vocab.encode(["<pad>", "<unk>", "<s>", "</s>", "<sep>"]) == [0, 1, 2, 3, 4]
    assert vocab.tokens == list(SPECIALS) + ["the"]        # specials in the counts are not listed twice


def test_vocab_build_orders_by_frequency_then_token():
    counts = Counter({"b": 3, "a": 3, "c": 5, "d": 1, "e": 2})
    assert Vocab.build(counts).tokens[5:] == ["c", "a", "b", "e", "d"]


def test_vocab_build_respects_min_freq():
    counts = Counter({"b": 3, "a": 3, "c": 5, "d": 1, "e": 2})
    assert Vocab.build(counts, min_freq=2).tokens[5:] == ["c", "a", "b", "e"]   # a count of min_freq stays
    assert Vocab.build(counts, min_freq=4).tokens[5:] == ["c"]


def test_vocab_build_max_size_counts_the_specials():
    counts = Counter({"b": 3, "a": 3, "c": 5, "d": 1, "e": 2})
    vocab = Vocab.build(counts, max_size=7)
    assert len(vocab) == 7
    assert vocab.tokens[5:] == ["c", "a"]
    assert Vocab.build(counts, max_size=5).tokens == list(SPECIALS)
    assert Vocab.build(counts, min_freq=3, max_size=100).tokens[5:] == ["c", "a", "b"]


def test_vocab_unknown_tokens_encode_to_unk():
    vocab = Vocab.build(Counter({"the": 2, "cat": 1}))
    assert vocab.encode(["the", "dog", "cat", "THE"]) == [vocab.index["the"], UNK, vocab.index["cat"], UNK]
    assert vocab.decode(vocab.encode(["the", "cat"])) == ["the", "cat"]


def test_vocab_literal_unk_in_text_encodes_to_unk():
    """PTB writes rare words as `<unk>`: it must be the special UNK, not a word of its own."""
    vocab = Vocab.build(Counter({"the": 3, "<unk>": 10, "cat": 1}))
    assert vocab.tokens.count("<unk>") == 1
    assert vocab.encode(["the", "<unk>", "cat"]) == [vocab.index["the"], UNK, vocab.index["cat"]]


def test_vocab_to_dict_from_dict_round_trip():
    vocab = Vocab.build(Counter("the cat sat on the mat with the hat".split()))
    again = Vocab.from_dict(json.loads(json.dumps(vocab.to_dict())))
    assert again.tokens == vocab.tokens
    words = "the hat sat on a mat".split()
    assert again.encode(words) == vocab.encode(words)


@pytest.mark.parametrize("tokens", [["the", "<pad>", "<unk>", "<s>", "</s>", "<sep>"],
                                    ["<pad>", "<unk>", "</s>", "<s>", "<sep>"],
                                    [],
                                    list(SPECIALS) + ["a", "a"]])
def test_vocab_refuses_a_token_list_without_the_specials_first(tokens):
    with pytest.raises(SeqlabError, match="vocabulary"):
        Vocab(tokens)


# ------------------------------------------------------------------------------------ tokenizers


def test_tokenizers_char_round_trip_including_non_ascii():
    tokenizer = CharTokenizer()
    line = "Héllo, wörld — ½ 日本語 🙂 ok"
    tokens = tokenizer.tokenize(line)
    assert tokens[:3] == ["H", "é", "l"]
    assert "🙂" in tokens and len(tokens) == len(line)
    assert tokenizer.detokenize(tokens) == line


def test_tokenizers_word_splits_on_whitespace():
    tokenizer = WordTokenizer()
    assert tokenizer.tokenize("  the  cat\tsat on\u00a0mat ") == ["the", "cat", "sat", "on", "mat"]
    assert tokenizer.tokenize("   ") == []
    assert tokenizer.detokenize(["the", "cat", "sat"]) == "the cat sat"


@pytest.fixture(scope="module")
def bpe() -> BPETokenizer:
    tokenizer = BPETokenizer(vocab_size=300)
    lines = read_lines(TRAIN)
    assert len(lines) >= 300
    tokenizer.fit(lines)
    return tokenizer


BPE_LINES = ["First Citizen:", "Before we proceed any further, hear me speak.", "",
             "café naïve — Ærø 🙂 日本語", "double  space and trailing space ", "\ttab first",
             " leading space, as every wikitext-2 line has", " = Valkyria Chronicles III = ", "   ",
             "zzqx unseen wörds"]


def test_tokenizers_bpe_round_trip_is_byte_exact(bpe):
    """Byte-level BPE: every line comes back exactly, unseen characters and spacing included."""
    for line in BPE_LINES + read_lines(TRAIN)[:50]:
        tokens = bpe.tokenize(line)
        assert bpe.detokenize(tokens) == line, (line, tokens)
    assert [bpe.detokenize(tokens) for tokens in bpe.tokenize_lines(BPE_LINES)] == BPE_LINES


def test_tokenizers_bpe_learns_subwords(bpe):
    tokens = bpe.tokenize("Before we proceed any further, hear me speak.")
    assert len(tokens) < len("Before we proceed any further, hear me speak.")   # merges were learned
    assert bpe.tokenize("") == []


def test_tokenizers_bpe_to_dict_round_trip(bpe):
    again = tokenizer_from_dict(json.loads(json.dumps(bpe.to_dict())))
    assert isinstance(again, BPETokenizer)
    assert again.vocab_size == 300
    for line in BPE_LINES:
        assert again.tokenize(line) == bpe.tokenize(line)
        assert again.detokenize(again.tokenize(line)) == line


@pytest.mark.parametrize("kind", ["char", "word"])
def test_tokenizers_to_dict_round_trip(kind):
    tokenizer = make_tokenizer(kind)
    again = tokenizer_from_dict(json.loads(json.dumps(tokenizer.to_dict())))
    assert type(again) is type(tokenizer)
    assert again.tokenize("to be or not") == tokenizer.tokenize("to be or not")


def test_tokenizers_untrained_bpe_raises():
    tokenizer = BPETokenizer(vocab_size=300)
    with pytest.raises(SeqlabError, match="not been trained"):
        tokenizer.tokenize("hello")
    with pytest.raises(SeqlabError, match="not been trained"):
        tokenizer.to_dict()


def test_tokenizers_unknown_kind_raises():
    with pytest.raises(SeqlabError, match="nope"):
        make_tokenizer("nope")
    with pytest.raises(SeqlabError, match="nope"):
        tokenizer_from_dict({"kind": "nope"})
    bpe = make_tokenizer("bpe", 500)
    assert isinstance(bpe, BPETokenizer) and bpe.vocab_size == 500


# --------------------------------------------------------------------------------------- readers


@pytest.mark.parametrize("data, lines", [
    (b"a b\r\nc\r\n", ["a b", "c"]),
    (b"a b\nc", ["a b", "c"]),
    (b"a b\nc\n", ["a b", "c"]),
    (b"a\n\nb\n", ["a", "", "b"]),
    (b"a\n\n", ["a", ""]),
    (b"a\r\n\r\nb", ["a", "", "b"]),
])
def test_readers_read_lines_strips_newlines(tmp_path, data, lines):
    path = tmp_path / "text.txt"
    path.write_bytes(data)
    assert read_lines(path) == lines


def test_readers_encode_lines_adds_one_eos_per_line_including_empty_lines():
    vocab = Vocab.build(Counter(["a", "b", "c"]))
    a, b, c = vocab.encode(["a", "b", "c"])
    token_lines = WordTokenizer().tokenize_lines(["a b", "", "c", "   ", "b"])
    ids = encode_lines(token_lines, vocab)
    assert ids.dtype == torch.long
    assert ids.tolist() == [a, b, EOS, EOS, c, EOS, EOS, b, EOS]
    assert encode_lines([], vocab).tolist() == []


def test_readers_default_corpus_is_tiny_shakespeare_split_90_10():
    text = resources.files("seqlab.corpora").joinpath("tinyshakespeare.txt").read_text(encoding="utf-8")
    train, valid = default_corpus()
    assert train[0] == "First Citizen:"
    assert "\n".join(train + valid) + "\n" == text             # in order, nothing lost or repeated
    train_chars = sum(len(line) + 1 for line in train)
    assert 0.9 * len(text) <= train_chars < 0.9 * len(text) + len(max(train, key=len)) + 1
    valid_chars = sum(len(line) + 1 for line in valid)
    assert train_chars + valid_chars == len(text)
    assert 0.09 < valid_chars / len(text) <= 0.1
    assert len(text) > 1_000_000 and len(set(text)) == 65   # nanoGPT's shakespeare_char


def test_readers_read_stream_encodes_a_file_and_counts_its_characters(tmp_path):
    path = tmp_path / "valid.txt"
    path.write_text("the cat\n\nsat\n", encoding="utf-8")
    vocab = Vocab.build(Counter(["the", "cat"]))
    ids, characters = read_stream(path, WordTokenizer(), vocab)
    assert ids.tolist() == [vocab.index["the"], vocab.index["cat"], EOS, EOS, UNK, EOS]
    assert characters == len("the cat\n\nsat\n")


def test_readers_read_stream_refuses_a_file_of_unknown_tokens(tmp_path):
    path = tmp_path / "french.txt"
    path.write_text("le chat\nsur le tapis\n", encoding="utf-8")
    vocab = Vocab.build(Counter(["the", "cat"]))
    with pytest.raises(SeqlabError, match="french.txt.*all 5 tokens are unknown"):
        read_stream(path, WordTokenizer(), vocab, "valid file")
    with pytest.raises(SeqlabError, match="unknown"):
        read_stream(["le chat"], WordTokenizer(), vocab)


# ------------------------------------------------------------------------------------- bad files


@pytest.mark.parametrize("reader", [read_text, read_lines])
def test_fileio_refuses_missing_file_and_directory(tmp_path, reader):
    with pytest.raises(SeqlabError, match="train file .*missing.txt does not exist"):
        reader(tmp_path / "missing.txt", "train file")
    folder = tmp_path / "corpus"
    folder.mkdir()
    with pytest.raises(SeqlabError, match="corpus is a directory"):
        reader(folder)


@pytest.mark.parametrize("reader", [read_text, read_lines])
@pytest.mark.parametrize("data", [b"", b"  \n\n\t \r\n"])
def test_fileio_refuses_empty_file(tmp_path, reader, data):
    path = tmp_path / "empty.txt"
    path.write_bytes(data)
    with pytest.raises(SeqlabError, match="empty.txt is empty"):
        reader(path)


@pytest.mark.parametrize("reader", [read_text, read_lines])
def test_fileio_refuses_binary_file_naming_the_line(tmp_path, reader):
    path = tmp_path / "model.bin"
    path.write_bytes(b"looks like text\n\x89PNG\x00\x00\x01\n")
    with pytest.raises(SeqlabError, match=r"model\.bin:2 holds a NUL byte"):
        reader(path)


@pytest.mark.parametrize("reader", [read_text, read_lines])
def test_fileio_refuses_non_utf8_naming_the_line(tmp_path, reader):
    path = tmp_path / "file.txt"
    path.write_bytes("line one\nline two\nun caf\u00e9 cr\u00e8me\nline four\n".encode("latin-1"))
    with pytest.raises(SeqlabError, match=r"file\.txt:3 is not valid UTF-8") as error:
        reader(path)
    assert "convert it to UTF-8" in str(error.value)


def test_fileio_reads_utf8_with_the_bytes_that_latin1_would_misread(tmp_path):
    path = tmp_path / "file.txt"
    path.write_bytes("line one\nun café crème\n".encode())
    assert read_lines(path) == ["line one", "un café crème"]


# -------------------------------------------------------------------------------------- batching


def stream_rows(batches, field: str) -> list[list[int]]:
    """Each row's tokens over all segments, in order."""
    parts = [getattr(batch, field) for batch in batches]
    return torch.cat(parts, dim=1).tolist()


@pytest.mark.parametrize("length, batch_size, seq_len", [(50, 3, 4), (50, 3, 5), (101, 4, 7), (9, 2, 10)])
def test_batching_stream_rows_are_contiguous_and_continue_across_segments(length, batch_size, seq_len):
    ids = torch.arange(10, 10 + length)                       # a token's value is its position + 10
    batches = StreamBatches(ids, batch_size, seq_len)
    row_length = (length - 1) // batch_size
    assert len(batches) == -(-row_length // seq_len)
    segments = list(batches)
    for k, batch in enumerate(segments):
        width = min(seq_len, row_length - k * seq_len)
        assert batch.inputs.shape == batch.targets.shape == (batch_size, width)
        assert torch.equal(batch.targets, batch.inputs + 1)   # the next token of the stream
        if k > 0:                                             # segment k+1 starts where k ended, every row
            assert torch.equal(batch.inputs[:, 0], segments[k - 1].inputs[:, -1] + 1)
            assert torch.equal(batch.inputs[:, 0], segments[k - 1].targets[:, -1])
    rows = stream_rows(segments, "inputs")
    for r, row in enumerate(rows):                            # row r is one contiguous slice of the stream
        assert row == list(range(10 + r * row_length, 10 + (r + 1) * row_length))
    assert batches.inputs.numel() == batch_size * row_length > length - 1 - batch_size
    with pytest.raises(IndexError):
        batches[len(batches)]


@pytest.mark.parametrize("length, batch_size, seq_len", [(50, 3, 4), (48, 3, 4), (101, 4, 7), (2, 3, 5),
                                                         (1, 1, 3)])
def test_batching_stream_evaluation_scores_every_token_once(length, batch_size, seq_len):
    ids = torch.randint(5, 40, (length,), generator=torch.Generator().manual_seed(length))
    batches = list(StreamBatches(ids, batch_size, seq_len, exact=True))
    targets = [t for row in stream_rows(batches, "targets") for t in row if t != PAD]
    inputs = [t for row in stream_rows(batches, "inputs") for t in row if t != PAD]
    assert targets == ids.tolist()                            # row-major: every token once, in order
    assert inputs == [EOS] + ids[:-1].tolist()                # predicted from the token before it
    assert batches[0].inputs[0, 0] == EOS
    assert sum(batch.num_tokens for batch in batches) == length
    for batch in batches:                                      # padding only where there is no target
        assert torch.equal(batch.inputs == PAD, batch.targets == PAD)


def window_starts(batches) -> list[int]:
    return [int(start) for batch in batches for start in batch.inputs[:, 0]]


def test_batching_windows_are_shifted_windows_of_the_stream():
    ids = torch.arange(10, 210)
    batches = WindowBatches(ids, batch_size=4, context=8, seed=3, epoch=0)
    assert len(batches) == len(batches.starts) // 4 > 0
    for batch in batches:
        assert batch.inputs.shape == batch.targets.shape == (4, 8)
        assert torch.equal(batch.targets, batch.inputs + 1)
        assert torch.equal(batch.inputs[:, 1:], batch.inputs[:, :-1] + 1)   # contiguous in the stream
    inputs = [t for batch in batches for t in batch.inputs.flatten().tolist()]
    targets = [t for batch in batches for t in batch.targets.flatten().tolist()]
    assert len(set(inputs)) == len(inputs)                    # windows do not overlap
    assert len(set(targets)) == len(targets)
    assert max(targets) <= 209


def test_batching_windows_depend_only_on_seed_and_epoch():
    ids = torch.arange(10, 410)
    first = window_starts(WindowBatches(ids, 4, 8, seed=3, epoch=0))
    assert window_starts(WindowBatches(ids, 4, 8, seed=3, epoch=0)) == first
    assert window_starts(WindowBatches(ids, 4, 8, seed=3, epoch=1)) != first
    assert window_starts(WindowBatches(ids, 4, 8, seed=4, epoch=0)) != first


def test_batching_windows_start_at_a_random_offset_per_epoch():
    """Each epoch cuts the stream at another offset, so window boundaries are not always the same."""
    ids = torch.arange(10, 410)
    offsets = set()
    for epoch in range(8):
        starts = [start - 10 for start in window_starts(WindowBatches(ids, 4, 8, seed=3, epoch=epoch))]
        assert len({start % 8 for start in starts}) == 1                 # one grid of windows per epoch
        offsets.add(starts[0] % 8)
    assert len(offsets) > 1


@pytest.mark.parametrize("length, context, stride", [(50, 8, 4), (50, 8, 8), (50, 8, 1), (50, 8, 3),
                                                     (5, 8, 4),
                                                     (8, 8, 4), (9, 8, 4), (1, 4, 2), (30, 6, 20)])
def test_batching_sliding_windows_score_every_token_once_with_left_context(length, context, stride):
    ids = torch.arange(10, 10 + length)                       # value - 10 = position in the stream
    seq = [EOS] + ids.tolist()                                # seq[p] predicts ids[p]
    batches = sliding_windows(ids, batch_size=3, context=context, stride=stride)
    effective_stride = min(stride, context)
    scored = []
    for k, batch in enumerate(batches):
        assert batch.inputs.shape == batch.targets.shape
        assert batch.inputs.size(0) <= 3 and batch.inputs.size(1) == context
        rows = zip(batch.inputs.tolist(), batch.targets.tolist(), strict=True)
        for w, (inputs, targets) in enumerate(rows):
            for j, target in enumerate(targets):
                if target == PAD:
                    continue
                position = target - 10
                scored.append(target)
                assert inputs[: j + 1] == seq[position - j: position + 1]   # the window is the stream
                if (k, w) != (0, 0):
                    assert j >= context - effective_stride                   # left context in the window
    assert scored == ids.tolist()


# ---------------------------------------------------------------------------------------- config


@pytest.mark.parametrize("name, text", [
    ("flat.yaml", "hidden_size: 3\nlr: 1e-3\narch: transformer\n"),
    ("grouped.yml", "model:\n  hidden_size: 3\n  arch: transformer\ntrain:\n  lr: 1e-3\n"),
    ("flat.toml", 'hidden_size = 3\nlr = 1e-3\narch = "transformer"\n'),
    ("grouped.toml", '[model]\nhidden_size = 3\narch = "transformer"\n[train]\nlr = 1e-3\n'),
])
def test_config_read_config_file_flat_and_grouped(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    options = read_config_file(path)
    assert options.keys() == {"hidden_size", "lr", "arch"}
    assert options["hidden_size"] == 3 and options["arch"] == "transformer"
    assert coerce(TrainConfig, "lr", options["lr"]) == 1e-3   # YAML reads 1e-3 as a string
    assert from_dict(LMConfig, {k: options[k] for k in ("hidden_size", "arch")}).hidden_size == 3


def test_config_read_config_file_accepts_dashes(tmp_path):
    path = tmp_path / "dashes.yaml"
    path.write_text("model:\n  hidden-size: 3\nbatch-size: 7\n", encoding="utf-8")
    assert read_config_file(path) == {"hidden_size": 3, "batch_size": 7}


@pytest.mark.parametrize("text, line", [("arch: lstm\nhidden_size: 3\nlr: [1, 2\nepochs: 4\n", 4),
                                        ("arch: lstm\nhidden_size: 3\nlr: 1: 2\n", 3),
                                        ("arch: lstm\n\thidden_size: 3\n", 2)])
def test_config_invalid_yaml_names_the_file_and_line(tmp_path, text, line):
    path = tmp_path / "broken.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SeqlabError, match=rf"broken\.yaml:{line} is not valid YAML"):
        read_config_file(path)


def test_config_invalid_toml_names_the_file_and_line(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text("arch = 'lstm'\nhidden_size = \n", encoding="utf-8")
    with pytest.raises(SeqlabError, match=r"broken\.toml is not valid TOML.*line 2"):
        read_config_file(path)


@pytest.mark.parametrize("name, text", [("config.json", '{"lr": 1}'), ("config", "lr: 1\n"),
                                        ("config.ini", "[train]\nlr=1\n")])
def test_config_refuses_an_unknown_suffix(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SeqlabError, match="expected a .yaml, .yml or .toml file"):
        read_config_file(path)


def test_config_refuses_a_file_that_is_not_a_mapping(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- lr\n- 1\n", encoding="utf-8")
    with pytest.raises(SeqlabError, match="list.yaml: expected a mapping"):
        read_config_file(path)
    with pytest.raises(SeqlabError, match="does not exist"):
        read_config_file(tmp_path / "missing.yaml")


def test_config_coerce_converts_strings_to_the_field_type():
    value = coerce(TrainConfig, "lr", "1e-3")
    assert isinstance(value, float) and value == 0.001
    assert isinstance(coerce(TrainConfig, "lr", 1), float)
    assert coerce(TrainConfig, "epochs", "12") == 12 and isinstance(coerce(TrainConfig, "epochs", 3.0), int)
    assert coerce(TrainConfig, "compile", "true") is True and coerce(TrainConfig, "compile", "no") is False
    assert coerce(LMConfig, "arch", "gru") == "gru"
    assert coerce(TrainConfig, "max_steps", None) is None


@pytest.mark.parametrize("cls, name, value", [(TrainConfig, "epochs", "abc"), (TrainConfig, "epochs", 2.5),
                                              (TrainConfig, "epochs", True), (TrainConfig, "lr", "fast"),
                                              (TrainConfig, "compile", "maybe"),
                                              (LMConfig, "hidden_size", [3])])
def test_config_coerce_refuses_a_wrong_type_naming_the_option(cls, name, value):
    with pytest.raises(SeqlabError, match=rf"option '{name}' expects"):
        coerce(cls, name, value, "config file run.yaml")


def test_config_from_dict_refuses_unknown_keys_by_name():
    with pytest.raises(SeqlabError, match="unknown option 'hiden_size'"):
        from_dict(LMConfig, {"hiden_size": 3, "arch": "gru"})
    with pytest.raises(SeqlabError, match="unknown option 'epoch'"):
        from_dict(TrainConfig, {"epoch": 3})
    config = from_dict(TrainConfig, {"epochs": "3", "lr": "2e-4"})
    assert config.epochs == 3 and config.lr == 2e-4 and config.batch_size == TrainConfig().batch_size
