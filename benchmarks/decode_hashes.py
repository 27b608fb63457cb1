"""Hashes of decoding outputs, to hold a refactoring of the decoding code to bit-identical outputs.

Trains (once, into --runs; later calls reuse them) two tiny language models (an LSTM and a transformer, word
tokens, the test fixtures' Shakespeare) and uses the committed BPE GRU encoder-decoder fixture
(tests/fixtures/old_runs/seq2seq-bpe); then hashes (SHA-256 of the outputs' JSON, floats as their exact repr) the
outputs of greedy, beam and sampled decoding (several seeds, temperatures, top-k and top-p), `sample_ids`,
batched completion (with log probabilities and top log probabilities), the memorisation audit's decodes
(extraction's top-k samples and their log perplexities, extractable memorisation's greedy continuations) and the
exposure audit's scores (trie enumeration, teacher forcing, the approximation) of random-init models.

    PYTHONPATH=$BEFORE/src python benchmarks/decode_hashes.py --runs /tmp/hash-runs --out /tmp/before.json
    PYTHONPATH=src python benchmarks/decode_hashes.py --runs /tmp/hash-runs --out /tmp/after.json
    diff /tmp/before.json /tmp/after.json

Only public APIs that both versions share are called, so the same script runs on the code before and after.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
SAMPLINGS = [dict(seed=0), dict(seed=1, temperature=0.7), dict(seed=2, top_k=5), dict(seed=3, top_p=0.8),
             dict(seed=4, temperature=1.3, top_k=10, top_p=0.9), dict(seed=5, temperature=1e-3)]


def digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=repr).encode()).hexdigest()[:16]


def lm_model():
    """(LMConfig, build_lm) wherever the code being hashed keeps them: the LM family's model module, or models/
    before issue 45 (so that the same script hashes the code before and after)."""
    try:
        from seqlab.families.lm.model import LMConfig, build_lm
    except ImportError:
        from seqlab.models.lm import LMConfig, build_lm
    return LMConfig, build_lm


def train_lms(runs: Path) -> dict[str, Path]:
    from seqlab.families.lm.config import LMDataConfig, LMTrainConfig, LMTrainOptions
    from seqlab.families.lm.pipeline import train_lm

    LMConfig, _ = lm_model()

    out = {}
    for arch in ("lstm", "transformer"):
        folder = runs / f"lm-{arch}"
        out[arch] = folder
        if (folder / "model.safetensors").exists():
            continue
        model = LMConfig(arch=arch, embedding_size=16, hidden_size=24, num_layers=2, dropout=0.0, num_heads=2,
                         context=32 if arch == "transformer" else 0)
        options = LMTrainOptions(output=str(folder), max_steps=30, batch_size=4, seq_len=16, eval_every=30,
                                 progress=False, lr=3e-3, warmup_steps=2)
        data = LMDataConfig(train=str(FIXTURES / "shakespeare_train.txt"),
                            valid=str(FIXTURES / "shakespeare_valid.txt"), tokenizer="word")
        torch.manual_seed(0)
        train_lm(LMTrainConfig(data, model, options))
    return out


def lm_hashes(name: str, lm, train_file: Path) -> dict[str, str]:
    from seqlab.decoding.search import SamplingOptions, generate_ids, lm_beam_search, sample_ids
    from seqlab.harms.memorization import TrainingIndex, extractable, extraction, training_ids

    model = lm.model
    context = lm.prompt_ids("ROMEO : What")
    out = {}
    out["greedy"] = digest(list(generate_ids(model, context, SamplingOptions(max_tokens=20, greedy=True))))
    beams = lm_beam_search(model, context, SamplingOptions(max_tokens=12, beam=4), nbest=3)
    out["beam"] = digest([(h.tokens, h.score, h.normalized, h.finished) for h in beams])
    for k, s in enumerate(SAMPLINGS):
        out[f"generate_ids[{k}]"] = digest(list(generate_ids(model, context, SamplingOptions(max_tokens=20, **s))))
        out[f"sample_ids[{k}]"] = digest(sample_ids(model, context, SamplingOptions(max_tokens=12, **s), 5))
        out[f"sample_ids_eos[{k}]"] = digest(sample_ids(model, context,
                                                        SamplingOptions(max_tokens=12, stop_at_eos=True, **s), 4))
    out["sample_ids_greedy"] = digest(sample_ids(model, context, SamplingOptions(max_tokens=12, greedy=True), 3))
    prompts = ["ROMEO :", "JULIET : O", "", "What is the", "First Citizen : Before we proceed"]
    options = [SamplingOptions(max_tokens=10, greedy=True), SamplingOptions(max_tokens=8, seed=7, top_k=8),
               SamplingOptions(max_tokens=12, seed=8, temperature=0.8, top_p=0.9, stop_at_eos=True),
               SamplingOptions(max_tokens=6, beam=3), SamplingOptions(max_tokens=9, seed=9)]
    done = lm.complete(prompts, options, top_logprobs=3)
    out["complete"] = digest([(c.ids, c.text, c.logprobs, c.top_logprobs, c.finish_reason) for c in done])
    done = lm.complete(prompts, SamplingOptions(max_tokens=7, seed=11, top_p=0.95))
    out["complete_shared"] = digest([(c.ids, c.logprobs) for c in done])
    lines = train_file.read_text().splitlines()[:120]
    index = TrainingIndex.from_lines(lines, lm.tokenizer, 4)
    for seed in (0, 3):
        ex = extraction(lm, index, samples=30, top_k=20, length=16, reference=lm, batch_size=7, seed=seed,
                        progress=False)
        out[f"extraction[{seed}]"] = digest(ex)
    mem = extractable(lm, training_ids(lm, lines), sequences=40, prefix_lengths=[4, 8], suffix_length=6,
                      batch_size=9, seed=1, progress=False)
    out["extractable"] = digest(mem)
    return {f"{name}:{key}": value for key, value in out.items()}


def seq2seq_hashes(trained) -> dict[str, str]:
    sources = (FIXTURES / "seq2seq" / "test.src").read_text().splitlines()[:12]
    out = {}
    for beam in (1, 4):
        outs = trained.generate(sources, beam=beam, max_length=20)
        out[f"beam{beam}"] = digest([(o.text, o.tokens, o.score, o.normalized, o.finished) for o in outs])
    for k, s in enumerate(SAMPLINGS):
        outs = trained.generate(sources, beam=1, sample=True, max_length=20, batch_size=5, **s)
        out[f"sample[{k}]"] = digest([(o.text, o.score) for o in outs])
    return {f"seq2seq-gru:{key}": value for key, value in out.items()}


def exposure_hashes() -> dict[str, str]:
    """The exposure audit's scores (trie enumeration and teacher forcing) of random-init word models over words
    and digits (as tests/test_canaries.py builds them)."""
    from seqlab.data.canaries import parse_template
    from seqlab.data.tokenizers import WordTokenizer
    from seqlab.data.vocab import SPECIALS, Vocab
    from seqlab.families.lm.config import LMTrainConfig
    LMConfig, build_lm = lm_model()  # noqa: N806  (the class)
    from seqlab.families.lm.trained import TrainedLM
    from seqlab.harms.exposure import Candidates, enumerate_scores, measure_exposure, teacher_forced_scores

    out = {}
    words = "the cat sat on a mat and dog ran to big red house my pin is".split()
    for arch in ("lstm", "transformer", "ffn"):
        torch.manual_seed(0)
        vocab = Vocab(list(SPECIALS) + words + list("0123456789"))
        config = LMConfig(arch=arch, vocab_size=len(vocab), embedding_size=16, hidden_size=24, num_layers=2,
                          dropout=0.0, num_heads=2, context=16 if arch == "transformer" else 0)
        lm = TrainedLM(build_lm(config).eval(), WordTokenizer(), vocab, LMTrainConfig(model=config),
                       torch.device("cpu"))
        template = parse_template("my pin is {digits:3}")
        candidates = Candidates(lm, template, " ")
        out[f"exposure-{arch}:trie"] = digest(enumerate_scores(lm, candidates, chunk=37).tolist())
        out[f"exposure-{arch}:teacher"] = digest(
            teacher_forced_scores(lm, candidates, [template.filling(i) for i in range(0, 1000, 7)]).tolist())
        record = {"template": "my pin is {digits:3}", "separator": " ",
                  "secrets": [{"text": "my pin is 1 2 3", "filling": "123", "repeats": 4}]}
        out[f"exposure-{arch}:approximate"] = digest(measure_exposure(lm, record, "approximate", samples=300))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, required=True, help="folder of the tiny runs (trained if absent)")
    parser.add_argument("--out", type=Path, required=True, help="the JSON file of hashes to write")
    args = parser.parse_args()
    import seqlab

    torch.set_num_threads(1)
    hashes = {}
    for arch, folder in train_lms(args.runs).items():
        hashes.update(lm_hashes(f"lm-{arch}", seqlab.load(str(folder)), FIXTURES / "shakespeare_train.txt"))
    hashes.update(exposure_hashes())
    hashes.update(seq2seq_hashes(seqlab.load(str(FIXTURES / "old_runs" / "seq2seq-bpe"))))
    args.out.write_text(json.dumps(hashes, indent=1) + "\n")
    print(f"{len(hashes)} hashes -> {args.out}")


if __name__ == "__main__":
    main()
