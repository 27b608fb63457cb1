"""Speed, measured side by side in one run (ratios, because these machines are noisy).

1. training: tokens/s of seqlab's trainer on an LSTM LM (2 x 200, tied, PTB, batch 20 x 35) against a
   plain PyTorch loop over nn.LSTM doing the same work (same data, model, loss, clipping, SGD), and the
   trainer's output layer fused (`--fused-output auto`, which picks it at this shape) against plain
   (`--fused-output off`, logits + cross-entropy), all three in the same alternating rounds;
2. generation: 512 new tokens with the KV cache (transformer) / carried state (LSTM) against
   recomputing the whole prefix at every step;
3. textbook cells against the fused kernels: the recurrent layers alone (2 x 200, forward +
   backward), for rnn, lstm and gru.

Rounds alternate between the contenders and the median of each is compared. Every contender runs
with the allocator setting the trainer makes on CPU (seqlab.training.memory.keep_freed_memory, which
applies to the whole process), so the training ratio measures the trainer's own overhead.

    python benchmarks/lm_speed.py --data-dir ../shared/data
    python benchmarks/lm_speed.py --dataset wikitext-2 --sections training --steps 60   # V = 33,278
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).parent))
from common import device_name, record, write_records  # noqa: E402
from seqlab.data.batching import StreamBatches  # noqa: E402
from seqlab.data.readers import count_tokens, encode_lines, read_lines  # noqa: E402
from seqlab.data.tokenizers import WordTokenizer  # noqa: E402
from seqlab.data.vocab import Vocab  # noqa: E402
from seqlab.decoding.search import SamplingOptions, generate_ids  # noqa: E402
from seqlab.families.lm.config import LMTrainOptions  # noqa: E402
from seqlab.families.lm.model import LMConfig, build_lm  # noqa: E402
from seqlab.families.lm.task import LanguageModelingTask  # noqa: E402
from seqlab.nn.recurrent import RecurrentStack  # noqa: E402
from seqlab.training.memory import keep_freed_memory  # noqa: E402
from seqlab.training.output_loss import choose_fused_output  # noqa: E402
from seqlab.training.trainer import Trainer  # noqa: E402

TRAIN_FILES = {"ptb": "ptb/ptb.train.txt", "wikitext-2": "wikitext-2/train.txt"}
SECTIONS = ("training", "generation", "cells")
NOTES = ("`speedup` rows are ratios of medians over alternating rounds in the same process; the training rows' JSON "
         "holds every round's figure (`rounds`), and `stdev` is that of the round-by-round ratios. The training "
         "section's three contenders (the trainer with its output layer as `--fused-output auto` picks it, fused "
         "at these shapes; the trainer with `--fused-output off`, logits + cross-entropy; the plain PyTorch loop, "
         "whose output layer is plain too) run in the same alternating rounds, one thread each. The machine was "
         "busy with other jobs on both cores when the training rows of 2026-11-25 were measured (two other "
         "training runs on its two cores), so their absolute tokens/s are low and noisy: the ratios are the "
         "figures to read. Rows of different dates come from different machines (the device column).")


def corpus_ids(data_dir: Path, dataset: str, limit_lines: int | None) -> tuple[torch.Tensor, int]:
    """The training file's ids (its first `limit_lines` lines) and the size of their vocabulary."""
    lines = read_lines(data_dir / TRAIN_FILES[dataset])[:limit_lines]
    tokenizer = WordTokenizer()
    tokens = tokenizer.tokenize_lines(lines)
    vocab = Vocab.build(count_tokens(tokens))
    return encode_lines(tokens, vocab), len(vocab)


# ------------------------------------------------------------------ 1. trainer vs a plain loop

def time_seqlab_trainer(ids, vocab_size, steps, tmp: Path, fused_output: str = "auto") -> float:
    torch.manual_seed(0)
    model = build_lm(LMConfig(arch="lstm", vocab_size=vocab_size, embedding_size=200, hidden_size=200,
                              num_layers=2, dropout=0.2, tie_weights=True))
    task = LanguageModelingTask(model, ids, ids[:2000], None, batch_size=20, seq_len=35, eval_batch_size=10,
                                eval_stride=0, seed=0, fused_output=fused_output)
    config = LMTrainOptions(output=str(tmp), epochs=100, max_steps=steps + 10, batch_size=20, seq_len=35,
                         optimizer="sgd", lr=20.0, grad_clip=0.25, schedule="constant", log_every=10,
                         eval_every=10 ** 9, progress=False, fused_output=fused_output)
    marks = []
    def mark(event):
        if event["event"] == "log":
            marks.append((time.perf_counter(), event["step"]))

    trainer = Trainer(task, model, config, tmp, torch.device("cpu"), callback=mark)
    trainer.fit()
    (t0, s0), (t1, s1) = marks[0], marks[-1]   # training only: from step 10 (warm-up) to the last log
    return (s1 - s0) * 20 * 35 / (t1 - t0)


def time_plain_loop(ids, vocab_size, steps) -> float:
    """pytorch/examples' word_language_model loop, written out."""
    torch.manual_seed(0)
    embedding = torch.nn.Embedding(vocab_size, 200)
    lstm = torch.nn.LSTM(200, 200, 2, dropout=0.2, batch_first=True)
    decoder = torch.nn.Linear(200, vocab_size)
    decoder.weight = embedding.weight
    drop = torch.nn.Dropout(0.2)
    modules = torch.nn.ModuleList([embedding, lstm, decoder])
    optimizer = torch.optim.SGD(modules.parameters(), lr=20.0)
    batches = StreamBatches(ids, 20, 35)
    hidden = None
    for i in range(steps + 10):
        if i == 10:
            start = time.perf_counter()
        batch = batches[i % len(batches)]
        output, hidden = lstm(drop(embedding(batch.inputs)), hidden)
        logits = decoder(drop(output))
        loss = F.cross_entropy(logits.view(-1, vocab_size), batch.targets.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(modules.parameters(), 0.25)
        optimizer.step()
        hidden = tuple(h.detach() for h in hidden)
        if i % 10 == 0:
            loss.item()                               # the plain loop also reports its loss now and then
    return steps * 20 * 35 / (time.perf_counter() - start)


# ------------------------------------------------------------------ 2. cached generation vs recomputing

@torch.no_grad()
def time_generation(model, new_tokens: int) -> tuple[float, float, bool]:
    model.eval()
    prompt = [3, 10, 11, 12]
    options = SamplingOptions(max_tokens=new_tokens, greedy=True, stop_at_eos=False)
    start = time.perf_counter()
    cached = list(generate_ids(model, prompt, options))
    cached_time = time.perf_counter() - start
    start = time.perf_counter()
    history, recomputed = list(prompt), []
    for _ in range(new_tokens):
        state = model.init_state(1) if model.context_length is None else None
        logits, _ = model(torch.tensor([history]), state)
        logits = logits[:, -1].clone()
        logits[:, [0, 2, 4]] = float("-inf")
        token = int(logits.argmax(-1))
        recomputed.append(token)
        history.append(token)
    recompute_time = time.perf_counter() - start
    return new_tokens / cached_time, new_tokens / recompute_time, cached == recomputed


# ------------------------------------------------------------------ 3. textbook cells vs fused kernels

def time_recurrent(cell: str, impl: str, repeats: int) -> float:
    torch.manual_seed(0)
    stack = RecurrentStack(cell, 200, 200, num_layers=2, impl=impl)
    x = torch.randn(20, 35, 200, requires_grad=True)
    for i in range(repeats + 2):
        if i == 2:
            start = time.perf_counter()
        out, _ = stack(x)
        out.sum().backward()
    return repeats * 20 * 35 / (time.perf_counter() - start)


def run_rounds(functions: dict, rounds: int) -> dict[str, list[float]]:
    """Each contender once per round, the order reversed every other round; every round's figure."""
    samples = {name: [] for name in functions}
    for round_ in range(rounds):
        for name, fn in list(functions.items())[:: -1 if round_ % 2 else 1]:
            samples[name].append(fn())
    return samples


def median_of_rounds(functions: dict, rounds: int) -> dict:
    return {name: statistics.median(values) for name, values in run_rounds(functions, rounds).items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--dataset", choices=tuple(TRAIN_FILES), default="ptb",
                        help="the training section's corpus: ptb (its first 20,000 lines) or wikitext-2 (all of it)")
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS),
                        help="what to measure (default: all)")
    parser.add_argument("--steps", type=int, default=150, help="training steps timed per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--new-tokens", type=int, default=512)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, to check the script runs")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.quick:
        args.steps, args.rounds, args.new_tokens = 20, 1, 32
    device = device_name("cpu")
    keep_freed_memory()                 # what the trainer does first; set here for the plain loop as well
    records = []
    common = {"task": "lm", "device": device}

    if "training" in args.sections:
        records += measure_training(args, common)
    if "generation" in args.sections:
        records += measure_generation(args, common)
    if "cells" in args.sections:
        records += measure_cells(args, common)
    if not args.quick:
        write_records("lm_speed", records, "Language-model speed (side by side, one run)", notes=NOTES)
    return 0


def measure_training(args, common: dict) -> list[dict]:
    """The trainer (output layer fused by --fused-output auto, and plain) against the plain loop."""
    limit = (6000 if args.quick else 20000) if args.dataset == "ptb" else None
    ids, vocab_size = corpus_ids(Path(args.data_dir), args.dataset, limit)
    fused_by_auto, _ = choose_fused_output("auto", 20 * 35, vocab_size)
    tmp = Path("runs/bench/speed-trainer")
    rounds = run_rounds({"seqlab": lambda: time_seqlab_trainer(ids, vocab_size, args.steps, tmp),
                         "seqlab-off": lambda: time_seqlab_trainer(ids, vocab_size, args.steps, tmp, "off"),
                         "plain": lambda: time_plain_loop(ids, vocab_size, args.steps)}, args.rounds)
    speeds = {name: statistics.median(values) for name, values in rounds.items()}
    config = "lstm 2x200 tied, dropout 0.2, batch 20x35, SGD, clip 0.25"
    if args.dataset != "ptb":
        config += f", V={vocab_size:,}"
    names = {"seqlab": "seqlab trainer", "seqlab-off": "seqlab trainer, --fused-output off",
             "plain": "plain PyTorch loop"}
    auto = f"--fused-output auto: {'fused' if fused_by_auto else 'plain'} output layer"
    records = []
    for name, value in speeds.items():
        records.append(record(**common, dataset=args.dataset, split="train", arch="lstm",
                              config=f"training, {names[name]}: {config}", metric="tokens_per_s", value=value,
                              tokens_per_s=value, rounds=rounds[name], note=auto if name == "seqlab" else None))
    print(f"training ({args.dataset}, V={vocab_size:,}; {auto}): seqlab {speeds['seqlab']:,.0f} tok/s, "
          f"seqlab --fused-output off {speeds['seqlab-off']:,.0f} tok/s, plain loop {speeds['plain']:,.0f} tok/s",
          flush=True)
    for ours, theirs, what in (("seqlab", "plain", "seqlab trainer / plain PyTorch loop"),
                               ("seqlab", "seqlab-off", "seqlab trainer, --fused-output auto / off")):
        ratios = [a / b for a, b in zip(rounds[ours], rounds[theirs], strict=True)]
        ratio = speeds[ours] / speeds[theirs]
        records.append(record(**common, dataset=args.dataset, split="train", arch="lstm",
                              config=f"training, {what}: {config}", metric="speedup", value=ratio, target=1.0,
                              rounds=ratios, note=auto, stdev=statistics.stdev(ratios) if len(ratios) > 1 else None))
        print(f"  {what}: {ratio:.3f} (round by round: {', '.join(f'{r:.3f}' for r in ratios)})", flush=True)
    return records


def measure_generation(args, common: dict) -> list[dict]:
    records = []
    generators = {
        "transformer": LMConfig(arch="transformer", vocab_size=65, embedding_size=128, num_layers=4, num_heads=4,
                                context=1024, dropout=0.0, norm_position="pre", activation="gelu"),
        "lstm": LMConfig(arch="lstm", vocab_size=10003, embedding_size=200, hidden_size=200, num_layers=2),
    }
    for arch, model_config in generators.items():
        torch.manual_seed(0)
        model = build_lm(model_config)
        cached, recompute, same = time_generation(model, args.new_tokens)
        what = f"generate {args.new_tokens} tokens, greedy, {model.num_parameters():,} params"
        records += [record(**common, arch=arch, config=f"{what}: cached state", metric="tokens_per_s",
                           value=cached, tokens_per_s=cached, params=model.num_parameters()),
                    record(**common, arch=arch, config=f"{what}: recompute prefix", metric="tokens_per_s",
                           value=recompute, tokens_per_s=recompute, params=model.num_parameters()),
                    record(**common, arch=arch, config=f"{what}: cached / recompute", metric="speedup",
                           value=cached / recompute, target=10.0 if arch == "transformer" else None,
                           note="same tokens" if same else "TOKENS DIFFER")]
        print(f"generation {arch}: cached {cached:,.1f} tok/s, recompute {recompute:,.1f} tok/s, "
              f"ratio {cached / recompute:.1f}, identical tokens: {same}", flush=True)
    return records


def measure_cells(args, common: dict) -> list[dict]:
    records = []
    repeats = 5 if args.quick else 30
    for cell in ("rnn", "lstm", "gru"):
        layer = median_of_rounds({impl: (lambda impl=impl, cell=cell: time_recurrent(cell, impl, repeats))
                                  for impl in ("fused", "textbook")}, args.rounds)
        what = "2 layers x 200, batch 20 x 35, forward + backward"
        records += [record(**common, arch=cell, config=f"recurrent layers, {impl}: {what}", metric="tokens_per_s",
                           value=layer[impl], tokens_per_s=layer[impl]) for impl in ("fused", "textbook")]
        records.append(record(**common, arch=cell, config=f"recurrent layers, fused / textbook: {what}",
                              metric="speedup", value=layer["fused"] / layer["textbook"]))
        print(f"cells {cell}: fused {layer['fused']:,.0f} tok/s, textbook {layer['textbook']:,.0f} tok/s, "
              f"ratio {layer['fused'] / layer['textbook']:.2f}", flush=True)
    return records


if __name__ == "__main__":
    raise SystemExit(main())
