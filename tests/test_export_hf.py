"""`seqlab export --format hf`: Hugging Face's GPT2LMHeadModel, loaded from the export, gives the logits (1e-4) and
the greedy continuations of `seqlab.load(run)`, line breaks included (`generate` and the text-generation pipeline
go on past them, as seqlab does), and AutoTokenizer its ids; options GPT-2 has no place for are
refused by name. The tests that load the export need `transformers` (pip install 'seqlab[hf]') and are skipped
without it; the refusals and the command line need only seqlab."""

from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer

import seqlab
from conftest import tiny_config
from seqlab.cli.main import main
from seqlab.data.vocab import BOS, EOS, PAD, SEP, UNK
from seqlab.decoding.search import SamplingOptions, blocked_tokens, generate_ids
from seqlab.errors import SeqlabError
from seqlab.families.lm.config import LMDataConfig, LMTrainConfig, LMTrainOptions
from seqlab.families.lm.hf import GPT2_OPTIONS, check_gpt2_options, export_hf
from seqlab.families.lm.model import LMConfig
from seqlab.families.lm.pipeline import train_lm

FOX = "the quick brown fox jumps over the lazy dog.\n"
TEXTS = ["To be, or not to be: that is the question.", "ROMEO:\nBut, soft! what light through yonder window breaks?\n",
         "an unknown wordd, zzyzx  and   spaces\tand a tab", "\n\nfirst line empty\n\n", "", " ", "  leading spaces",
         "trailing space ", "<pad> <unk> </s> <s> <sep> read as text", "déjà vu, naïve café: 東京!", "a\r\nb"]


def gpt2_model(config: LMTrainConfig, **model) -> LMTrainConfig:
    """`config` with a transformer LM with GPT-2's options."""
    return dataclasses.replace(config, model=dataclasses.replace(config.model, **GPT2_OPTIONS, **model))


def fox_config(folder: Path) -> LMTrainConfig:
    """A character transformer that learns a repeated sentence in 120 steps, so that its greedy continuation
    is the sentence, line breaks included, rather than one character over and over."""
    (folder / "fox.txt").write_text(FOX * 40)
    model = LMConfig(arch="transformer", embedding_size=16, num_layers=2, num_heads=2, context=16, dropout=0.0)
    options = LMTrainOptions(output=str(folder / "char"), max_steps=120, batch_size=8, eval_every=120, log_every=120,
                             progress=False, lr=1e-2, warmup_steps=2)
    data = LMDataConfig(train=str(folder / "fox.txt"), valid=str(folder / "fox.txt"), tokenizer="char")
    return gpt2_model(LMTrainConfig(data, model, options))


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """GPT-2-like runs (bpe, char, word), one with the book's transformer options, an LSTM; the exports of the
    first three under exports/."""
    folder = tmp_path_factory.mktemp("hf")
    configs = {"bpe": gpt2_model(tiny_config(folder / "bpe", "transformer", "bpe")),
               "char": fox_config(folder),
               "word": gpt2_model(tiny_config(folder / "word", "transformer", "word", max_steps=2)),
               "book": tiny_config(folder / "book", "transformer", "char", max_steps=2),
               "lstm": tiny_config(folder / "lstm", "lstm", "char", max_steps=2)}
    configs["bpe"].data.bpe_vocab_size = 300
    for config in configs.values():
        train_lm(config)
    for name in ("bpe", "char", "word"):
        export_hf(folder / name, folder / "exports" / name)
    return {name: folder / name for name in configs}


@pytest.fixture(scope="module")
def transformers():
    return pytest.importorskip("transformers", reason="loading the export needs transformers: pip install 'seqlab[hf]'")


def exported(runs, name: str) -> Path:
    return runs[name].parent / "exports" / name


def prompt_ids(lm, text: str) -> list[int]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                  # unknown words
        return lm.prompt_ids(text)


# ---------------------------------------------------------------------------- the model

@pytest.mark.parametrize("name", [pytest.param("bpe", marks=pytest.mark.slow), "char"])
def test_export_hf_logits_equal_seqlab(runs, transformers, name):
    lm = seqlab.load(runs[name])
    gpt2, loading = transformers.GPT2LMHeadModel.from_pretrained(exported(runs, name), output_loading_info=True)
    assert not any(loading.values())                             # no missing, unexpected or mismatched weights
    gpt2.eval()
    context, vocab_size = lm.model.context_length, len(lm.vocab)
    g = torch.Generator().manual_seed(0)
    for B, T in ((3, context), (2, 5), (1, 1)):                  # a full context, a short one, one token
        ids = torch.randint(0, vocab_size, (B, T), generator=g)
        with torch.no_grad():
            ours, _ = lm.model(ids)                              # (B, T, V)
            theirs = gpt2(ids).logits                            # (B, T, V)
        assert ours.abs().max() > 0.1                            # not trivially equal
        torch.testing.assert_close(theirs, ours, atol=1e-4, rtol=0)
    tokenizer = transformers.AutoTokenizer.from_pretrained(exported(runs, name))
    text = "dog.\nthe qu"
    with torch.no_grad():
        ours, _ = lm.model(torch.tensor([prompt_ids(lm, text)]))
        theirs = gpt2(**tokenizer(text, return_tensors="pt")).logits     # no token_type_ids go in
    torch.testing.assert_close(theirs, ours, atol=1e-4, rtol=0)


def test_export_hf_greedy_generation_equals_seqlab(runs, transformers):
    """`generate` with the export's own settings (no eos_token_id given) goes on past line ends as seqlab does."""
    lm = seqlab.load(runs["char"])
    gpt2 = transformers.GPT2LMHeadModel.from_pretrained(exported(runs, "char")).eval()
    prompt = prompt_ids(lm, "lazy")                              # the continuation crosses a line break (</s>)
    room = lm.model.context_length - len(prompt)                 # seqlab slides its window past the context
    ours = list(generate_ids(lm.model, prompt, SamplingOptions(greedy=True, max_tokens=room)))
    theirs = gpt2.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                           max_new_tokens=room, do_sample=False)[0, len(prompt):].tolist()
    assert theirs == ours and EOS in ours[:-1]                   # through a line break, to max_new_tokens
    assert lm.detokenize(ours).startswith(" dog.\nthe")         # it learned the sentence
    unprompted = gpt2.generate(max_new_tokens=room, do_sample=False)[0].tolist()      # from the bos, </s>
    assert unprompted[0] == EOS and lm.detokenize(unprompted[1:]) == lm.generate("", max_tokens=room, greedy=True)


def test_export_hf_text_generation_pipeline_keeps_the_line_breaks(runs, transformers):
    """`pipeline("text-generation")` writes the line breaks and runs to max_new_tokens: with the line start first
    (add_special_tokens=True, as seqlab reads a prompt) it is the prompt and seqlab's continuation; with the
    pipeline's own defaults too, every line break generated is kept and none stops it."""
    lm = seqlab.load(runs["char"])
    model = transformers.GPT2LMHeadModel.from_pretrained(exported(runs, "char")).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(exported(runs, "char"))
    generate = transformers.pipeline("text-generation", model=model, tokenizer=tokenizer)
    room = lm.model.context_length - len(prompt_ids(lm, "lazy"))
    ours = "lazy" + lm.generate("lazy", max_tokens=room, greedy=True)
    (theirs,) = generate("lazy", max_new_tokens=room, do_sample=False, add_special_tokens=True)
    assert theirs["generated_text"] == ours and "\n" in ours and len(ours) == len("lazy") + room
    (plain,) = generate("lazy dog.", max_new_tokens=6, do_sample=False)        # the pipeline's own tokenizing
    text = plain["generated_text"]
    assert text.startswith("lazy dog.\n") and len(text) == len("lazy dog.") + 6  # a character a token, none lost
    assert tokenizer.decode([EOS], skip_special_tokens=True) == "\n"            # a line break is text


def test_export_hf_files_and_config(runs):
    out = exported(runs, "bpe")
    assert {p.name for p in out.iterdir()} == {"config.json", "generation_config.json", "model.safetensors",
                                               "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                               "README.md", "manifest.json"}
    manifest = json.loads((out / "manifest.json").read_text())    # what seqlab wrote: what --overwrite replaces
    assert manifest["format"] == "hf"
    assert manifest["files"] == sorted({p.name for p in out.iterdir()} - {"manifest.json"})
    config, model = json.loads((out / "config.json").read_text()), seqlab.load(runs["bpe"]).config.model
    assert (config["model_type"], config["activation_function"], config["tie_word_embeddings"]) == ("gpt2", "gelu",
                                                                                                     True)
    assert (config["n_positions"], config["n_embd"], config["n_layer"], config["n_head"], config["n_inner"]) == (
        model.context, model.embedding_size, model.num_layers, model.num_heads, model.ff_size)
    assert config["resid_pdrop"] == config["embd_pdrop"] == config["attn_pdrop"] == model.dropout == 0.1
    assert (config["bos_token_id"], config["eos_token_id"], config["pad_token_id"]) == (EOS, BOS, PAD)
    generation = json.loads((out / "generation_config.json").read_text())
    assert {k: generation[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id")} == {
        k: config[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id")}
    lm = seqlab.load(runs["bpe"])                                # what seqlab's searches never choose, suppressed
    assert generation["suppress_tokens"] == sorted(blocked_tokens(lm.model).ids) == [PAD, UNK, BOS, SEP]
    weights = load_file(out / "model.safetensors")
    D = model.embedding_size
    assert weights["transformer.h.0.attn.c_attn.weight"].shape == (D, 3 * D)          # Conv1D: (in, out)
    assert weights["transformer.h.0.mlp.c_fc.weight"].shape == (D, model.ff_size)
    assert not weights["transformer.h.0.attn.c_attn.bias"].any()                      # --no-bias: zeros
    assert "lm_head.weight" not in weights                                             # tied to wte


# ---------------------------------------------------------------------------- the tokenizer

@pytest.mark.parametrize("name", ["bpe", "char", "word"])
def test_export_hf_tokenizer_gives_seqlab_ids(runs, transformers, name):
    lm = seqlab.load(runs[name])
    tokenizer = transformers.AutoTokenizer.from_pretrained(exported(runs, name))
    for text in [*TEXTS, FOX * 2]:
        ids = prompt_ids(lm, text)
        assert tokenizer(text).input_ids == ids, text
        assert tokenizer(text, add_special_tokens=False).input_ids == ids[1:], text
        assert tokenizer.decode(ids[1:]) == lm.detokenize(ids[1:]), text
    if name == "bpe":                                            # byte-level: every text comes back
        assert all(tokenizer.decode(tokenizer(text).input_ids[1:]) == text for text in TEXTS)
    if name == "char":                                           # every character known: the text comes back
        assert tokenizer.decode(tokenizer(FOX * 2).input_ids) == "\n" + FOX * 2
        assert tokenizer("the ZOO").input_ids.count(1) == 3      # Z, O, O: <unk>, as in seqlab


@pytest.mark.parametrize("name", ["bpe", "char", "word"])
def test_export_hf_tokenizer_declares_the_special_tokens_config_sets(runs, name):
    """eos (`<s>`, a token seqlab never generates), pad and unk, in tokenizer_config.json and
    special_tokens_map.json, each the token of the id config.json gives; no bos token (the model's bos, id 3, is the
    line break, which stays text); the `tokenizers` file alone gives seqlab's ids too."""
    out, lm = exported(runs, name), seqlab.load(runs[name])
    config = json.loads((out / "config.json").read_text())
    tokenizer = Tokenizer.from_file(str(out / "tokenizer.json"))
    for file in ("tokenizer_config.json", "special_tokens_map.json"):
        declared = json.loads((out / file).read_text())
        assert "bos_token" not in declared and config["bos_token_id"] == EOS
        assert tokenizer.token_to_id(declared["eos_token"]) == config["eos_token_id"] == BOS
        assert tokenizer.token_to_id(declared["pad_token"]) == config["pad_token_id"] == PAD
        assert tokenizer.token_to_id(declared["unk_token"]) == UNK
    for text in TEXTS[:4]:
        assert tokenizer.encode(text).ids == prompt_ids(lm, text), text


@pytest.mark.parametrize("name", ["bpe", "char", "word"])
def test_export_hf_auto_tokenizer_has_the_special_tokens(runs, transformers, name):
    tokenizer = transformers.AutoTokenizer.from_pretrained(exported(runs, name))
    config = json.loads((exported(runs, name) / "config.json").read_text())
    assert (tokenizer.eos_token_id, tokenizer.pad_token_id, tokenizer.unk_token_id) == (
        config["eos_token_id"], config["pad_token_id"], UNK)
    assert tokenizer.bos_token is None and tokenizer("x").input_ids[0] == config["bos_token_id"]   # put first
    assert (tokenizer.eos_token, tokenizer.pad_token, tokenizer.unk_token) == ("<s>", "<pad>", "<unk>")
    assert EOS not in tokenizer.all_special_ids                  # the line break is text


# ---------------------------------------------------------------------------- refusals and the command line

@pytest.mark.parametrize("option, value, named", [("norm_position", "post", "--norm-position post"),
                                                   ("activation", "relu", "--activation relu"),
                                                   ("positions", "sinusoidal", "--positions sinusoidal"),
                                                   ("tie_weights", False, "--no-tied"), ("bias", True, "--bias")])
def test_export_hf_refuses_each_option_gpt2_lacks(option, value, named):
    check_gpt2_options(LMConfig(arch="transformer", **GPT2_OPTIONS))            # GPT-2's own: no error
    config = LMConfig(arch="transformer", **{**GPT2_OPTIONS, option: value})
    with pytest.raises(SeqlabError, match="GPT-2 needs --norm-position pre --activation gelu") as error:
        check_gpt2_options(config)
    assert str(error.value).endswith(f"this run has {named}")


def test_export_hf_refuses_the_books_transformer_and_an_lstm(runs, tmp_path):
    with pytest.raises(SeqlabError) as error:
        export_hf(runs["book"], tmp_path / "book")
    assert str(error.value).endswith("this run has --norm-position post, --activation relu, --no-tied, --bias")
    with pytest.raises(SeqlabError, match="GPT-2 is a transformer language model .* holds lm --arch lstm"):
        export_hf(runs["lstm"], tmp_path / "lstm")
    assert not (tmp_path / "book").exists() and not (tmp_path / "lstm").exists()    # nothing written


def test_export_hf_cli(runs, tmp_path, capsys):
    out = tmp_path / "gpt2"
    assert main(["export", str(runs["char"]), "--format", "hf", "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "model.safetensors" in printed and f'GPT2LMHeadModel.from_pretrained("{out}")' in printed
    assert (out / "model.safetensors").exists()
    assert main(["export", str(runs["char"]), "--format", "hf", "--output", str(out)]) == 2     # holds files
    assert "--overwrite" in capsys.readouterr().err
    assert main(["export", str(runs["char"]), "--format", "hf", "--output", str(out), "--overwrite"]) == 0
    capsys.readouterr()
    for run, message in [(tmp_path / "missing", "is not a directory"), (runs["lstm"], "holds lm --arch lstm"),
                         (runs["book"], "--norm-position post")]:
        assert main(["export", str(run), "--format", "hf", "--output", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("seqlab: error:") and message in err and len(err.strip().splitlines()) == 1, err
