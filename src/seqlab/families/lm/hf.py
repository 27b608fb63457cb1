"""`seqlab export RUN --format hf`: a decoder-only transformer LM as a Hugging Face GPT-2 directory, which
`transformers` loads with `GPT2LMHeadModel.from_pretrained(DIR)` and `AutoTokenizer.from_pretrained(DIR)` and
which gives the logits of `seqlab.load(RUN)`. Nothing here imports `transformers`.

GPT-2 is the transformer LM of SLP 9.4 with these options, and only runs trained with them are exported:

    --norm-position pre      LayerNorm before each sublayer, and a final LayerNorm (ln_f)
    --activation gelu        the exact (erf) GELU of torch.nn.GELU(): GPT-2's "gelu"; its "gelu_new" is
                             the tanh approximation, which seqlab does not use
    --positions learned      a table of `context` positions (wpe)
    --tied                   the output matrix is the embedding matrix E (lm_head = wte)
    --no-bias                GPT-2's output layer has no bias, so a run with --bias cannot map; the other
                             layers' biases, absent with --no-bias, are written as zeros

Every other option maps: width, layers, heads, feedforward width, context (n_positions), the LayerNorm
epsilon, and the one dropout probability (embd_pdrop, attn_pdrop, resid_pdrop). A run with options that
cannot map is refused with one line naming them all.

The weights go into GPT-2's Conv1D layout, (in, out), the transpose of nn.Linear's (out, in): the
attention's stacked W^Q, W^K, W^V (split in that order, heads consecutive within each, as GPT-2 splits
its c_attn) become c_attn, W^O c_proj, the feedforward's two layers mlp.c_fc and mlp.c_proj.

The tokenizer (`tokenizer.json` for the `tokenizers` library, `tokenizer_config.json` and
`special_tokens_map.json`) gives seqlab's ids for any text: `tokenizer(text).input_ids ==
seqlab.load(RUN).prompt_ids(text)`, `</s>` (id 3, the line break) first as seqlab starts every prompt, then
each line's tokens with `</s>` for every "\\n"; with `add_special_tokens=False`, the same without the leading
`</s>`. `decode` gives back the text as seqlab's `detokenize` does. Per tokenizer:

    bpe    seqlab's byte-level BPE model with its ids shifted past the five specials; each line that is not
           empty is read with a space before it (as seqlab reads it: a Replace and a Prepend normalizer),
           and each "\\n" on its own (a Split pre-tokenizer), whose byte piece Ċ is id 3
    char   a WordLevel vocabulary over single characters (Split pre-tokenizers), "\\n" its id 3
    word   a WordLevel vocabulary over Python's `str.split()` words (the same whitespace characters), a
           line break read as the word `</s>`
    For bpe and char the token of id 3 is "\\n" (a line break; also an added token, which the `tokenizers`
    library splits off first), for word it is `</s>`.

The special tokens: seqlab's </s> (id 3) is a line break, so it is no special token of the tokenizer (a special
token is left out by `decode(ids, skip_special_tokens=True)`, as `pipeline("text-generation")` decodes, and
`generate` stops at the eos token: a line break either would lose every line break and stop at the first). It
is the model's bos in config.json (`bos_token_id` 3: `generate` without a prompt starts from a line start, as
seqlab does), and the tokenizer's post-processor puts it first. The eos token is `<s>` (id 2), a token no
seqlab language model generates, declared with pad `<pad>` (0) and unk `<unk>` (1). generation_config.json
suppresses the ids seqlab's searches never choose (<pad>, <unk>, <s>, <sep>), so that `generate` and
`pipeline("text-generation")` continue as `seqlab generate` does: past line ends, to max_new_tokens, greedy the
same tokens. The special tokens are split like text (`split_special_tokens`), as seqlab reads "<pad>" in text
(transformers 5 makes every declared special token special, whatever tokenizer.json says).

Beside those files, manifest.json ({"format": "hf", "files": [...]}, which transformers ignores) says that
seqlab wrote the folder and what it wrote: what `--overwrite` may replace (`seqlab.export`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from torch import Tensor, nn

from seqlab.data.vocab import BOS, EOS, NEVER_GENERATED, PAD, SPECIALS, UNK
from seqlab.errors import SeqlabError
from seqlab.export.folder import export_folder
from seqlab.export.tokens import bpe_state
from seqlab.fileio import atomic_write_bytes, atomic_write_json, atomic_write_text
from seqlab.version import __version__

BYTE_LEVEL_LINE_BREAK = "\u010a"       # "Ċ": byte 10 ("\\n") as a byte-level BPE piece
LINE_BREAK_BYTE = "\ue00a"             # what tokenizer.json calls that piece's own id (see `hf_tokenizer`)

# option -> the value GPT-2 has; the options a run must have been trained with
GPT2_OPTIONS = {"norm_position": "pre", "activation": "gelu", "positions": "learned", "tie_weights": True,
                "bias": False, "output_layer": "softmax", "norm": "layernorm", "qk_norm": False}
BOOLEAN_FLAGS = {"tie_weights": "tied", "bias": "bias", "qk_norm": "qk-norm"}


def flag(name: str, value) -> str:
    """The command-line spelling of an LM option's value: `--norm-position post`, `--no-tied`."""
    if name in BOOLEAN_FLAGS:
        return f"--{'' if value else 'no-'}{BOOLEAN_FLAGS[name]}"
    return f"--{name.replace('_', '-')} {value}"


def check_gpt2_options(model_config) -> None:
    """Refuse, in one line naming them all, the options of a transformer LM that GPT-2 cannot hold."""
    differ = [name for name, value in GPT2_OPTIONS.items() if getattr(model_config, name) != value]
    if differ:
        needs = " ".join(flag(name, value) for name, value in GPT2_OPTIONS.items())
        has = ", ".join(flag(name, getattr(model_config, name)) for name in differ)
        raise SeqlabError(f"seqlab export --format hf: GPT-2 needs {needs} (its output layer has no bias); "
                          f"this run has {has}")


# ---------------------------------------------------------------------------- the model

def gpt2_config(model, model_config) -> dict:
    """config.json of a GPT2LMHeadModel with the model's sizes. Its bos is </s> (id 3), with which seqlab starts
    every prompt; its eos `<s>` (id 2), which a seqlab LM never generates (`generation_config`)."""
    eps = {module.eps for module in model.modules() if isinstance(module, nn.LayerNorm)}
    if len(eps) != 1:
        raise SeqlabError(f"seqlab export --format hf: the model's LayerNorms differ in epsilon ({sorted(eps)}); "
                          "GPT-2 has one layer_norm_epsilon")
    p = model_config.dropout
    return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
            "vocab_size": model_config.vocab_size, "n_positions": model_config.context,
            "n_embd": model_config.embedding_size, "n_layer": model_config.num_layers,
            "n_head": model_config.num_heads, "n_inner": model_config.ff_size,
            "activation_function": "gelu", "layer_norm_epsilon": eps.pop(),
            "embd_pdrop": p, "attn_pdrop": p, "resid_pdrop": p,
            # Q K^T / sqrt(d_k) and nothing else (SLP eqs. 9.20-9.21)
            "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False,
            "tie_word_embeddings": True, "bos_token_id": EOS, "eos_token_id": BOS, "pad_token_id": PAD,
            "initializer_range": 0.02, "use_cache": True, "dtype": "float32"}


def generation_config() -> dict:
    """generation_config.json: the config's bos, eos and pad, and the ids seqlab's searches never choose suppressed
    (`seqlab.decoding.search.blocked_tokens` of a language model: <pad>, <unk>, <s>, <sep>), so that `generate`
    chooses what seqlab chooses and never stops before max_new_tokens (its eos is one of them)."""
    return {"bos_token_id": EOS, "eos_token_id": BOS, "pad_token_id": PAD,
            "suppress_tokens": sorted(NEVER_GENERATED + (UNK,))}


def layer_norm(norm: nn.LayerNorm, name: str) -> dict[str, Tensor]:
    """A LayerNorm's gain and bias (zeros for a LayerNorm without one)."""
    bias = norm.bias if norm.bias is not None else torch.zeros_like(norm.weight)
    return {f"{name}.weight": norm.weight, f"{name}.bias": bias}


def conv1d(linear: nn.Linear, name: str) -> dict[str, Tensor]:
    """An nn.Linear (out, in) as GPT-2's Conv1D (in, out): y = x W + b either way; bias zeros if absent."""
    bias = linear.bias if linear.bias is not None else torch.zeros(linear.out_features)
    return {f"{name}.weight": linear.weight.t(), f"{name}.bias": bias}    # (in, out)


def gpt2_weights(model) -> dict[str, Tensor]:
    """The TransformerLM's parameters under GPT2LMHeadModel's names; lm_head is tied to wte, so not stored.
    Each pre-LN block (SLP 9.4) is T1 = X + MultiHeadAttention(ln_1(X)), H = T1 + FFN(ln_2(T1)) in both."""
    weights = {"transformer.wte.weight": model.embedding.weight,             # E (V, D): X = E[w] + P
               "transformer.wpe.weight": model.positions.table.weight}       # P (C, D)
    for i, block in enumerate(model.blocks):
        h = f"transformer.h.{i}"
        weights |= layer_norm(block.norm1, f"{h}.ln_1")
        weights |= conv1d(block.attention.qkv, f"{h}.attn.c_attn")           # [W^Q | W^K | W^V] (D, 3D), eq. 9.20
        weights |= conv1d(block.attention.out, f"{h}.attn.c_proj")           # W^O (D, D)
        weights |= layer_norm(block.norm2, f"{h}.ln_2")
        weights |= conv1d(block.feedforward[0], f"{h}.mlp.c_fc")             # W1 (D, ff)
        weights |= conv1d(block.feedforward[2], f"{h}.mlp.c_proj")           # W2 (ff, D)
    weights |= layer_norm(model.final_norm, "transformer.ln_f")
    return {name: t.detach().cpu().float().contiguous().clone() for name, t in weights.items()}


def write_weights(path: Path, weights: dict[str, Tensor]) -> None:
    from safetensors.torch import save

    # transformers reads a safetensors file only with format "pt" in its header
    atomic_write_bytes(path, save(weights, metadata={"format": "pt"}))


# ---------------------------------------------------------------------------- the tokenizer

def python_whitespace() -> str:
    """A regex class of the characters `str.split()` splits on (Rust's \\s differs: it lacks \\x1c-\\x1f)."""
    return "[" + "".join(f"\\x{{{ord(c):x}}}" for c in map(chr, range(sys.maxunicode + 1)) if c.isspace()) + "]+"


def line_break_token(kind: str) -> str:
    """The tokenizer's token of id 3 (seqlab's </s>): "\\n", the line break, for bpe and char; `</s>` for word."""
    return "</s>" if kind == "word" else "\n"


def hf_tokenizer(tokenizer, vocab) -> str:
    """tokenizer.json, for the `tokenizers` library, of a `tokenizers.Tokenizer` that gives seqlab's ids (see
    the module's docstring)."""
    from tokenizers import Regex, decoders, normalizers, pre_tokenizers, processors
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers.models import WordLevel

    ids = dict(vocab.index)
    line_break = line_break_token(tokenizer.kind)
    if line_break == "\n":
        del ids["</s>"]
        ids["\n"] = EOS
    each_line = pre_tokenizers.Split("\n", behavior="isolated")
    if tokenizer.kind == "bpe":
        state = bpe_state(tokenizer, vocab)      # seqlab's ids: the BPE model's own, shifted past the specials
        # a line break is the byte piece Ċ, read as </s> (3); the byte's own id (a line never holds one, but a
        # model may generate it) is a private-use character that the decoder turns into "\n"
        ids[BYTE_LEVEL_LINE_BREAK], ids[LINE_BREAK_BYTE] = EOS, ids[BYTE_LEVEL_LINE_BREAK]
        del ids["\n"]                           # at 3 too: put back into the file below
        state["model"]["vocab"] = ids
        hf = HFTokenizer.from_str(json.dumps(state))
        # " " + each line that is not empty, as seqlab reads a line (the whole text's, when the line breaks are
        # not split off first: transformers' eos token)
        hf.normalizer = normalizers.Sequence([normalizers.Replace("\n", "\n "), normalizers.Prepend(" ")])
        hf.pre_tokenizer = pre_tokenizers.Sequence([each_line, pre_tokenizers.Split(Regex("^ $"), behavior="removed"),
                                                    pre_tokenizers.ByteLevel(add_prefix_space=False)])
        hf.decoder = decoders.Sequence([decoders.Replace(LINE_BREAK_BYTE, "\n"), decoders.ByteLevel(),
                                        decoders.Replace("\n ", "\n"),  # drop each line's leading space
                                        decoders.Strip(" ", 1, 0)])
    elif tokenizer.kind == "char":
        hf = HFTokenizer(WordLevel(ids, unk_token=SPECIALS[UNK]))
        hf.pre_tokenizer = pre_tokenizers.Sequence([each_line, pre_tokenizers.Split(Regex("."),
                                                                                     behavior="isolated")])
        hf.decoder = decoders.Fuse()                                                 # joined by nothing
    else:
        hf = HFTokenizer(WordLevel(ids, unk_token=SPECIALS[UNK]))
        hf.normalizer = normalizers.Replace("\n", " </s> ")
        hf.pre_tokenizer = pre_tokenizers.Split(Regex(python_whitespace()), behavior="removed")
        # words joined by " " (a WordPiece decoder whose prefix no word has puts one before each), and </s> as
        # a line break without the spaces beside it
        hf.decoder = decoders.Sequence([decoders.Replace(Regex("^</s>$"), "\n"), decoders.WordPiece(" ", False),
                                        decoders.Fuse(), decoders.Replace(" \n", "\n"),
                                        decoders.Replace("\n ", "\n")])
    hf.post_processor = processors.TemplateProcessing(
        single=[line_break, "$A"], pair=[line_break, "$A", line_break, "$B"], special_tokens=[(line_break, EOS)])
    state = json.loads(hf.to_str())
    if line_break == "\n":
        # split off first, so that each line is read on its own; its id is the model's (which the file's
        # vocabulary of one token per id cannot hold beside the bpe's Ċ, hence added here)
        state["model"]["vocab"]["\n"] = EOS
        state["added_tokens"] = [{"id": EOS, "content": "\n", "single_word": False, "lstrip": False, "rstrip": False,
                                  "normalized": False, "special": False}]
    return json.dumps(state, indent=2)


def special_tokens() -> dict[str, str]:
    """The tokenizer's special tokens as config.json sets their ids: eos `<s>` (2), pad (0), unk (1); no bos token,
    since the model's (id 3) is the line break, which must stay text (the post-processor puts it first)."""
    return {"eos_token": SPECIALS[BOS], "unk_token": SPECIALS[UNK], "pad_token": SPECIALS[PAD]}


def tokenizer_config(context: int) -> dict:
    """tokenizer_config.json: a fast tokenizer over tokenizer.json, its special tokens declared. Only input_ids
    and attention_mask go to the model (GPT-2 would add the embedding of token_type_ids to its input)."""
    return {"tokenizer_class": "PreTrainedTokenizerFast", "model_input_names": ["input_ids", "attention_mask"],
            **special_tokens(), "split_special_tokens": True, "clean_up_tokenization_spaces": False,
            "padding_side": "left", "model_max_length": context}


# ---------------------------------------------------------------------------- exporting

LOADING = """from transformers import AutoTokenizer, GPT2LMHeadModel
model, tokenizer = GPT2LMHeadModel.from_pretrained("{out}"), AutoTokenizer.from_pretrained("{out}")"""

README = """# A seqlab language model as Hugging Face GPT-2

Exported by seqlab {version} (`seqlab export RUN --format hf`) from the run {run}: a transformer LM over
{unit}s with {layers} layers, width {width}, {heads} heads and a context of {context} tokens, as a GPT2LMHeadModel
that gives the run's logits, and its tokenizer.

```python
{loading}
inputs = tokenizer("To be", return_tensors="pt")
out = model.generate(**inputs, max_new_tokens={new_tokens}, do_sample=False)
print(tokenizer.decode(out[0, 1:]))

from transformers import pipeline
print(pipeline("text-generation", model=model, tokenizer=tokenizer)("To be", max_new_tokens={new_tokens},
                                                                    add_special_tokens=True))
```

- `tokenizer(text).input_ids` is seqlab's `prompt_ids(text)`: `</s>` (id 3) first, as seqlab starts every
  prompt, then the tokens of each line with `</s>` for each line break (`add_special_tokens=False` leaves out
  the first `</s>`: the pipeline above asks for it, as seqlab reads a prompt); text the vocabulary lacks is
  `<unk>` (id 1) as in seqlab. `decode` writes `</s>` as a line break, as seqlab's `detokenize` does, and keeps it
  with `skip_special_tokens=True`: a line break is text, not a special token.
- `</s>` (id 3) is the model's bos (`generate` without a prompt starts from it); its eos is `<s>` (id 2),
  which seqlab never generates: generation_config.json suppresses it with `<pad>`, `<unk>` and `<sep>`, so
  `generate` and the pipeline go on past line ends to `max_new_tokens`, as seqlab does, and never write
  `<unk>`.
- GPT-2 reads at most n_positions = {context} tokens (prompt and continuation together); seqlab goes on
  past its context from its most recent {half} tokens.
"""


def export_hf(run_dir: str | Path, output: str | Path, overwrite: bool = False) -> Path:
    """Export a transformer LM run with GPT-2's options to `output` (see the module's docstring); returns
    the export directory, which `from_pretrained` takes."""
    from seqlab.families.lm import FAMILY
    from seqlab.families.lm.config import read_run_config
    from seqlab.runs.directory import read_run_json

    run_dir, out = Path(run_dir), Path(output)
    raw = read_run_json(run_dir)
    task = raw.get("task", "lm")                              # runs from before "task" was recorded are LMs
    arch = raw.get("model", {}).get("arch")
    if task != "lm" or arch != "transformer":
        held = f"{task} --arch {arch}" if arch else task
        raise SeqlabError(f"seqlab export --format hf: GPT-2 is a transformer language model (lm --arch "
                          f"transformer); {run_dir} holds {held}")
    check_gpt2_options(read_run_config(run_dir).model)       # before reading the weights
    trained = FAMILY.pipeline.load(run_dir, "cpu")
    model, model_config, context = trained.model, trained.config.model, trained.config.model.context
    config = gpt2_config(model, model_config)
    with export_folder(out, overwrite, run_dir, legacy_export_files) as folder:    # moved into place at the end
        atomic_write_json(folder / "config.json", config)
        write_weights(folder / "model.safetensors", gpt2_weights(model))
        atomic_write_text(folder / "tokenizer.json", hf_tokenizer(trained.tokenizer, trained.vocab))
        atomic_write_json(folder / "tokenizer_config.json", tokenizer_config(context))
        atomic_write_json(folder / "special_tokens_map.json", special_tokens())
        atomic_write_json(folder / "generation_config.json", generation_config())
        atomic_write_text(folder / "README.md", README.format(
            version=__version__, run=run_dir.resolve().name, unit=trained.tokenizer.unit,
            layers=model_config.num_layers, width=model_config.embedding_size, heads=model_config.num_heads,
            context=context, half=max(1, context // 2), new_tokens=max(1, context // 2),
            loading=LOADING.format(out=out)))
        atomic_write_json(folder / "manifest.json", {
            "format": "hf", "format_version": HF_FORMAT_VERSION, "files": sorted(p.name for p in folder.iterdir()),
            "seqlab_version": __version__, "source_run": run_dir.resolve().name})
    return out


HF_FORMAT_VERSION = 1          # 1: manifest.json lists the files (what --overwrite may replace)
HF_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
            "README.md")


def legacy_export_files(folder: Path) -> set[str] | None:
    """The files of a GPT-2 export of before manifest.json (its six files: `seqlab.export.export_files`), or
    None where `folder` holds none: config.json of a "gpt2" model and the README.md this module writes."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        with open(folder / "README.md", encoding="utf-8") as handle:
            title = handle.readline().rstrip("\n")
    except (OSError, ValueError):
        return None
    if isinstance(config, dict) and config.get("model_type") == "gpt2" and title == README.split("\n", 1)[0]:
        return set(HF_FILES)
    return None


export = export_hf          # `seqlab export --format hf` (this module is the lm family's "hf" part)


def report(run_dir: str | Path, out: Path) -> None:
    """What `seqlab export --format hf` wrote, and how to load it."""
    files = ", ".join(sorted(path.name for path in out.iterdir()))
    print(f"exported the transformer LM of {run_dir} to {out}/ as Hugging Face GPT-2 ({files}); load it with:")
    print(LOADING.format(out=out))
