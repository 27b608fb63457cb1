"""`seqlab compare lm`: the recipe of each architecture (configs/ptb-compare-*.yaml: ~2.2-3M parameters on PTB,
most of them the tied 10k x 200 embedding) and what the report shows of language models: a sample of each
for the same prompt, and the pictures of inside them (`seqlab.compare.inside`: gates and attention)."""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path

from seqlab.compare.pages import DAMAGED_RUN, Figure, Section, one_line, safe_name

# each architecture's model options at size "small" (`seqlab.compare.run.recipe` sizes them)
RECIPES = {
    "ffn": {"arch": "ffn", "embedding_size": 200, "hidden_size": 200, "context": 5, "dropout": 0.3,
            "tie_weights": True},
    "rnn": {"arch": "rnn", "embedding_size": 200, "hidden_size": 200, "num_layers": 2, "dropout": 0.3,
            "tie_weights": True},
    "lstm": {"arch": "lstm", "embedding_size": 200, "hidden_size": 200, "num_layers": 2, "dropout": 0.3,
             "tie_weights": True},
    "gru": {"arch": "gru", "embedding_size": 200, "hidden_size": 200, "num_layers": 2, "dropout": 0.3,
            "tie_weights": True},
    "transformer": {"arch": "transformer", "embedding_size": 200, "num_layers": 2, "num_heads": 4,
                    "context": 128, "norm_position": "pre", "dropout": 0.3, "tie_weights": True},
}
# the training options every recipe shares (AdamW with a cosine decay over the budget)
TRAIN = {"optimizer": "adamw", "lr": 0.002, "batch_size": 20, "seq_len": 35, "warmup_steps": 200, "grad_clip": 1.0}
# the options `seqlab tune` searches (seqlab.tuning.space; the width is added there): AdamW's rate, dropout, decay
SPACE = {"lr": {"low": 5e-4, "high": 1e-2, "log": True}, "dropout": {"low": 0.1, "high": 0.6},
         "weight_decay": [0.0, 1e-4, 1e-3, 1e-2, 0.1]}
ARCH_SPACE = {"transformer": {"warmup_steps": [0, 200, 1000]}, "ffn": {"context": [3, 5, 8]}}
PROMPT_WORDS = 4              # the default prompt: the first words of the validation file's first line
SAMPLE_TOKENS = {"character": 240}                    # tokens an LM generates, by its tokenizer's unit ...
SAMPLE_TOKENS_DEFAULT = 60                            # ... words or BPE pieces
INSIDE_WORDS = 5              # the sentence the inside pictures are drawn on: a line of at least these words ...
INSIDE_CHARS = 80             # ... at most this many characters of it


def resize(options: dict, size: str) -> dict:
    """A recipe's options at `size` after the shared sizing: the tiny recurrent and transformer LMs have one
    layer (the window LM has none to drop)."""
    if size == "tiny" and options.get("arch") != "ffn":
        options["num_layers"] = 1
    return options


def sections(spec: dict, rows: list[dict], models: dict, winner, figures: Path) -> list[Section]:
    """A sample of each language model for the same prompt (seed 0), and the pictures of inside them."""
    valid = next((m.config.data.valid for m in models.values() if m.config.data.valid), "")
    first = first_line(valid)
    prompt = spec["prompt"] if isinstance(spec.get("prompt"), str) else " ".join(first.split()[:PROMPT_WORDS])
    samples = Section("Samples")
    samples.text(f"Each model continues the prompt {prompt!r} (sampling, seed 0)." if prompt else
                 "Each model continues from a line start (sampling, seed 0).")
    if not models:
        samples.text("No model has weights yet.")
        return [samples]
    for arch, trained in models.items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")              # a prompt word the vocabulary lacks is read as <unk>
                text = trained.generate(prompt, max_tokens=SAMPLE_TOKENS.get(trained.unit, SAMPLE_TOKENS_DEFAULT),
                                        seed=0)
            samples.blocks.append(("pre", arch, prompt + text))
        except DAMAGED_RUN as error:
            samples.text(f"{arch}: no sample ({one_line(error)})")
    inside = Section("Inside the models")
    try:
        from seqlab.compare.inside import pictures
    except ImportError:                                      # the module arrives with its own helper
        inside.text("Pictures of the gates and attention need seqlab.compare.inside, not installed here.")
        return [samples, inside]
    sentence = sample_sentence(valid) or prompt
    inside.text(f"Drawn on {sentence!r}.")
    for arch, trained in models.items():
        try:
            drawn = pictures(trained, sentence, figures / f"inside-{safe_name(arch)}")
        except DAMAGED_RUN as error:
            inside.text(f"{arch}: no pictures ({one_line(error)})")
            continue
        for title, png in drawn:
            inside.figure(Figure(f"{arch}: {title}", Path(png)))
    if len(inside.blocks) == 1:
        inside.text("None of these architectures has gates or attention to draw.")
    return [samples, inside]


def sample_sentence(path: str) -> str:
    """What the inside pictures are drawn on: the validation file's first line of at least INSIDE_WORDS
    words (else its first line), cut at a word boundary to INSIDE_CHARS characters."""
    lines = []
    if path:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                lines = [line.strip() for line in itertools.islice(handle, 1000) if line.strip()]
        except OSError:
            return ""
    line = next((line for line in lines if len(line.split()) >= INSIDE_WORDS), lines[0] if lines else "")
    if len(line) <= INSIDE_CHARS:
        return line
    cut = line[:INSIDE_CHARS + 1].rsplit(" ", 1)[0]
    return cut if cut.strip() else line[:INSIDE_CHARS]


def first_line(path: str) -> str:
    """The first non-blank line of a text file ("" when there is none, or no file)."""
    if not path:
        return ""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return next((line.strip() for line in handle if line.strip()), "")
    except OSError:
        return ""
