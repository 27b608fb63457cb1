"""The training step: seqlab's trainer against the plain-PyTorch loops its models' authors write, side by side.

1. transformer: nanoGPT's train.py on CPU for its Shakespeare-char CPU setting (4 layers, 4 heads, width 128,
   context 64, batch 12, no dropout, no biases, pre-LN, GELU, tied; AdamW 1e-3, betas (0.9, 0.99), weight decay
   0.1 on matrices, clip 1.0, cosine to 1e-4 after 100 warm-up steps), its GPT written out as nanoGPT's model.py
   writes it, batches from get_batch (random offsets of a uint16 array), the optimizer from configure_optimizers
   (fused only on CUDA, so on a CPU the default AdamW), the loss read every step (--log_interval=1 of the
   documented CPU command);
2. lstm: pytorch/examples' word_language_model on wikitext-2 (tied 2 x 200, dropout 0.2, batch 20 x 35, SGD lr 20
   by `p.data.add_`, clip 0.25, log_softmax + NLLLoss, the loss read every step), its RNNModel written out.

seqlab's side is `seqlab.training.trainer.Trainer` on the same model size, optimizer, schedule and batch shape, as
`seqlab train lm` runs it (its logs, finiteness checks and bookkeeping included). Every contender runs on one
thread, in alternating rounds (the order flipped every other round), timed from its 11th step (the first ones warm
up) by wall clock and by process CPU time; the ratios are those of the medians. Equal loss: after the rounds,
each transformer contender trains `--loss-steps` steps from two seeds and its valid loss (the whole valid split in
non-overlapping 64-character windows, one function for both) is compared; seqlab's must lie within the plain
loop's seed-to-seed spread (or 0.02 nats, whichever is larger).

    python benchmarks/train_step.py --data-dir ../shared/data            # both models, ~8 minutes
    python benchmarks/train_step.py --models transformer --rounds 3
    python benchmarks/train_step.py --quick                               # seconds, writes nothing
"""

from __future__ import annotations

import argparse
import cProfile
import inspect
import io
import math
import pstats
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).parent))
from common import device_name, record, write_records  # noqa: E402
from seqlab.data.readers import count_tokens, encode_lines  # noqa: E402
from seqlab.data.tokenizers import CharTokenizer, WordTokenizer  # noqa: E402
from seqlab.data.vocab import Vocab  # noqa: E402
from seqlab.families.lm.config import LMTrainOptions  # noqa: E402
from seqlab.families.lm.model import LMConfig, build_lm  # noqa: E402
from seqlab.families.lm.task import LanguageModelingTask  # noqa: E402
from seqlab.training.memory import keep_freed_memory  # noqa: E402
from seqlab.training.trainer import Trainer  # noqa: E402

MODELS = ("transformer", "lstm")
WARMUP = 10                   # steps before the clock starts


@dataclass
class Timing:
    tokens_per_s: float       # wall clock
    cpu_tokens_per_s: float   # process CPU time
    loss: float               # the last step's training loss
    first_s: float = 0.0      # seqlab: seconds from fit() to the end of the warm-up steps (compiling included)


def cpu_info() -> str:
    """The CPU's bf16 capability, from /proc/cpuinfo's flags (the issue asks for them beside the model name)."""
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        return ""
    have = [f for f in ("avx512f", "avx512_bf16", "amx_bf16") if f in flags.split()]
    return ", ".join(have) or "no avx512"


# ------------------------------------------------------------------ data

def shakespeare(data_dir: Path, limit: int | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """nanoGPT's shakespeare_char split (90/10 of the characters), as seqlab's char vocabulary encodes it: the
    train and valid ids as uint16 arrays (prepare.py's format) and the vocabulary size."""
    text = (data_dir / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8")[:limit]
    cut = int(0.9 * len(text))
    tokenizer = CharTokenizer()
    parts = [tokenizer.tokenize_lines(part.split("\n")[:-1] if part.endswith("\n") else part.split("\n"))
             for part in (text[:cut], text[cut:])]
    vocab = Vocab.build(count_tokens(parts[0]))
    train, valid = (encode_lines(lines, vocab).numpy().astype(np.uint16) for lines in parts)
    return train, valid, len(vocab)


def wikitext(data_dir: Path, limit: int | None = None) -> tuple[torch.Tensor, int]:
    lines = (data_dir / "wikitext-2" / "train.txt").read_text(encoding="utf-8").split("\n")[:limit]
    tokens = WordTokenizer().tokenize_lines(lines)
    vocab = Vocab.build(count_tokens(tokens))
    return encode_lines(tokens, vocab), len(vocab)


# ------------------------------------------------------------------ 1a. nanoGPT, as model.py and train.py write it

@dataclass
class GPTConfig:
    block_size: int = 64
    vocab_size: int = 65
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = False


class LayerNorm(nn.Module):
    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input):
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head, self.n_embd, self.dropout = config.n_head, config.n_embd, config.dropout

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0,
                                           is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        tok_emb = self.transformer.wte(idx)
        pos_emb = self.transformer.wpe(pos)
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
        param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
        decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
        optim_groups = [{"params": decay_params, "weight_decay": weight_decay},
                        {"params": nodecay_params, "weight_decay": 0.0}]
        fused_available = "fused" in inspect.signature(torch.optim.AdamW).parameters
        use_fused = fused_available and device_type == "cuda"
        extra_args = dict(fused=True) if use_fused else dict()
        return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas, **extra_args)


NANOGPT = {"batch_size": 12, "block_size": 64, "learning_rate": 1e-3, "min_lr": 1e-4, "warmup_iters": 100,
           "lr_decay_iters": 2000, "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.99, "grad_clip": 1.0}


def get_lr(it: int, c: dict) -> float:
    """train.py's get_lr: linear warm-up, then cosine decay to min_lr at lr_decay_iters."""
    if it < c["warmup_iters"]:
        return c["learning_rate"] * (it + 1) / (c["warmup_iters"] + 1)
    if it > c["lr_decay_iters"]:
        return c["min_lr"]
    ratio = (it - c["warmup_iters"]) / (c["lr_decay_iters"] - c["warmup_iters"])
    return c["min_lr"] + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (c["learning_rate"] - c["min_lr"])


def nanogpt_loop(train: np.ndarray, vocab_size: int, steps: int, seed: int = 1337) -> tuple[Timing, nn.Module]:
    """train.py's loop on device 'cpu' (no compile, fp32: its GradScaler disabled, autocast a nullcontext), for
    max_iters = lr_decay_iters = the steps run (as its shakespeare_char config sets them equal), so that its cosine
    ends where seqlab's does."""
    c = dict(NANOGPT, lr_decay_iters=steps + WARMUP)
    torch.manual_seed(seed)
    model = GPT(GPTConfig(block_size=c["block_size"], vocab_size=vocab_size))
    optimizer = model.configure_optimizers(c["weight_decay"], c["learning_rate"], (c["beta1"], c["beta2"]), "cpu")
    scaler = torch.amp.GradScaler("cpu", enabled=False)

    def get_batch():
        ix = torch.randint(len(train) - c["block_size"], (c["batch_size"],))
        x = torch.stack([torch.from_numpy(train[i:i + c["block_size"]].astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy(train[i + 1:i + 1 + c["block_size"]].astype(np.int64)) for i in ix])
        return x, y

    X, Y = get_batch()
    model.train()
    for iter_num in range(steps + WARMUP):
        if iter_num == WARMUP:
            wall, cpu = time.perf_counter(), time.process_time()
        lr = get_lr(iter_num, c)
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        logits, loss = model(X, Y)
        X, Y = get_batch()
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), c["grad_clip"])
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        lossf = loss.item()                                       # --log_interval=1
    tokens = steps * c["batch_size"] * c["block_size"]
    return Timing(tokens / (time.perf_counter() - wall), tokens / (time.process_time() - cpu), lossf), model


# ------------------------------------------------------------------ 1b. pytorch/examples' word_language_model

class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.5):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.decoder.weight = self.encoder.weight
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        self.nhid, self.nlayers = nhid, nlayers

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output).view(-1, self.decoder.out_features)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))


def examples_loop(ids: torch.Tensor, vocab_size: int, steps: int, seed: int = 1111) -> Timing:
    """main.py's train() for --model LSTM --emsize 200 --nhid 200 --tied --dropout 0.2 (batchify, get_batch,
    repackage_hidden, clip_grad_norm_, the manual SGD update, total_loss += loss.item())."""
    torch.manual_seed(seed)
    bsz, bptt, lr, clip = 20, 35, 20.0, 0.25
    nbatch = ids.size(0) // bsz
    train_data = ids[:nbatch * bsz].view(bsz, -1).t().contiguous()     # batchify: (N/B, B)
    model = RNNModel(vocab_size, 200, 200, 2, 0.2)
    criterion = nn.NLLLoss()
    model.train()
    total_loss = 0.0
    hidden = model.init_hidden(bsz)
    for batch, i in enumerate(range(0, (steps + WARMUP) * bptt, bptt)):
        if batch == WARMUP:
            wall, cpu = time.perf_counter(), time.process_time()
        i %= train_data.size(0) - 1 - bptt
        data, targets = train_data[i:i + bptt], train_data[i + 1:i + 1 + bptt].reshape(-1)
        model.zero_grad()
        hidden = tuple(h.detach() for h in hidden)                        # repackage_hidden
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        total_loss += loss.item()
    tokens = steps * bsz * bptt
    return Timing(tokens / (time.perf_counter() - wall), tokens / (time.process_time() - cpu), loss.item())


# ------------------------------------------------------------------ 2. seqlab's trainer

def seqlab_transformer(train: np.ndarray, valid: np.ndarray, vocab_size: int, steps: int, seed: int = 1337,
                       compile: bool = False, profiler=None) -> tuple[Timing, nn.Module]:
    c = NANOGPT
    torch.manual_seed(seed)
    model = build_lm(LMConfig(arch="transformer", vocab_size=vocab_size, embedding_size=128, num_layers=4,
                              num_heads=4, context=64, dropout=0.0, norm_position="pre", activation="gelu",
                              positions="learned", tie_weights=True, bias=False))
    task = LanguageModelingTask(model, torch.from_numpy(train.astype(np.int64)),
                                torch.from_numpy(valid[:2000].astype(np.int64)), None, batch_size=12, seq_len=64,
                                eval_batch_size=64, eval_stride=64, seed=seed)
    options = {"optimizer": "adamw", "lr": c["learning_rate"], "min_lr": c["min_lr"], "beta2": c["beta2"],
               "weight_decay": c["weight_decay"], "schedule": "cosine", "warmup_steps": c["warmup_iters"],
               "grad_clip": c["grad_clip"], "compile": compile, "precision": "fp32"}
    return run_trainer(model, task, steps, 12 * 64, options, profiler), model


def seqlab_lstm(ids: torch.Tensor, vocab_size: int, steps: int, seed: int = 1111, profiler=None) -> Timing:
    torch.manual_seed(seed)
    model = build_lm(LMConfig(arch="lstm", vocab_size=vocab_size, embedding_size=200, hidden_size=200,
                              num_layers=2, dropout=0.2, tie_weights=True, init_range=0.1))
    task = LanguageModelingTask(model, ids, ids[:700], None, batch_size=20, seq_len=35, eval_batch_size=10,
                                eval_stride=0, seed=seed)
    options = {"optimizer": "sgd", "lr": 20.0, "grad_clip": 0.25, "schedule": "constant", "precision": "fp32"}
    return run_trainer(model, task, steps, 20 * 35, options, profiler)


def run_trainer(model, task, steps: int, tokens_per_step: int, options: dict, profiler=None) -> Timing:
    """`Trainer.fit` for WARMUP + steps steps (evaluating only at the end, on a few tokens), timed from the log of
    step WARMUP to that of the last step by its callback; a torch.profiler `profiler` records those steps alone."""
    marks = []

    def mark(event):
        if event["event"] == "log":
            marks.append((time.perf_counter(), time.process_time(), event["step"], event["loss"]))
            if profiler is not None and len(marks) == 1:
                profiler.start()
            elif profiler is not None and event["step"] == steps + WARMUP:
                profiler.stop()

    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="seqlab-train-step-") as tmp:
        config = LMTrainOptions(output=tmp, epochs=100, max_steps=steps + WARMUP, batch_size=task.batch_size,
                                seq_len=task.seq_len, log_every=WARMUP, eval_every=10 ** 9, progress=False,
                                **options)
        Trainer(task, model, config, tmp, torch.device("cpu"), callback=mark).fit()
    (w0, c0, s0, _), (w1, c1, s1, loss) = marks[0], marks[-1]
    tokens = (s1 - s0) * tokens_per_step
    return Timing(tokens / (w1 - w0), tokens / (c1 - c0), loss, w0 - began)


# ------------------------------------------------------------------ measuring

@torch.no_grad()
def valid_loss(model: nn.Module, valid: np.ndarray, context: int = 64, batch: int = 64) -> float:
    """Mean cross-entropy over the valid split in non-overlapping windows, the same function for both models."""
    model.eval()
    ids = torch.from_numpy(valid.astype(np.int64))
    n = (len(ids) - 1) // context
    x, y = ids[:n * context].view(n, context), ids[1:n * context + 1].view(n, context)
    total = 0.0
    for start in range(0, n, batch):
        xb, yb = x[start:start + batch], y[start:start + batch]
        logits = model(xb, yb)[0] if isinstance(model, GPT) else model(xb)[0]
        total += float(F.cross_entropy(logits.reshape(-1, logits.size(-1)), yb.reshape(-1), reduction="sum"))
    model.train()
    return total / y.numel()


def rounds(contenders: dict, count: int) -> dict[str, list[Timing]]:
    """Each contender once per round, the order reversed every other round."""
    samples = {name: [] for name in contenders}
    for round_ in range(count):
        for name, fn in list(contenders.items())[:: -1 if round_ % 2 else 1]:
            samples[name].append(fn())
            timing = samples[name][-1]
            print(f"  round {round_ + 1} {name}: {timing.tokens_per_s:,.0f} tok/s "
                  f"(CPU time: {timing.cpu_tokens_per_s:,.0f}), loss {timing.loss:.3f}", flush=True)
    return samples


def step_profile(run, steps: int, top: int = 8) -> dict[str, float]:
    """Where seqlab's training steps spend their time: `run(steps, profiler)` trains with a torch.profiler over
    `steps` steps; the operators with the most own CPU time, in ms a step (the rest as "other", and the total;
    the profiler adds to the time of small operators)."""
    from torch.profiler import ProfilerActivity, profile

    profiler = profile(activities=[ProfilerActivity.CPU])
    run(steps, profiler)
    ops = sorted(((e.key, e.self_cpu_time_total / 1e3 / steps) for e in profiler.key_averages()
                  if e.self_cpu_time_total > 0), key=lambda op: -op[1])
    summary = {name: round(ms, 2) for name, ms in ops[:top]}
    summary["other"] = round(sum(ms for _, ms in ops[top:]), 2)
    summary["total"] = round(sum(ms for _, ms in ops), 2)
    return summary


def profile_summary(fn, top: int = 12) -> str:
    """cProfile of one call of `fn`: the functions with the most own time (a Python-side view of the step)."""
    profiler = cProfile.Profile()
    profiler.runcall(fn)
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def torch_profile(fn, top: int = 15) -> str:
    """torch.profiler of one call of `fn`: the operators with the most own CPU time."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=top)


def compare(model: str, samples: dict, sides: tuple[str, str], what: str, config: str, common: dict,
            dataset: str, profile: dict | None = None) -> list[dict]:
    records = []
    medians = {}
    for name in sides:
        wall = [t.tokens_per_s for t in samples[name]]
        cpu = [t.cpu_tokens_per_s for t in samples[name]]
        medians[name] = (statistics.median(wall), statistics.median(cpu))
        records.append(record(**common, dataset=dataset, split="train", arch=model,
                              config=f"training, {name}: {config}, fp32, 1 thread", metric="tokens_per_s",
                              value=medians[name][0], tokens_per_s=medians[name][0], rounds=wall,
                              cpu_tokens_per_s=medians[name][1], cpu_rounds=cpu,
                              losses=[t.loss for t in samples[name]]))
    ours, theirs = sides
    ratios = [a.tokens_per_s / b.tokens_per_s for a, b in zip(samples[ours], samples[theirs], strict=True)]
    ratio, cpu_ratio = medians[ours][0] / medians[theirs][0], medians[ours][1] / medians[theirs][1]
    records.append(record(**common, dataset=dataset, split="train", arch=model,
                          config=f"training, {what}: {config}, fp32, 1 thread", metric="speedup", value=ratio,
                          target=(1.3 if model == "transformer" else 2.0) if theirs.startswith("plain") else None,
                          rounds=ratios, cpu_speedup=cpu_ratio, seqlab_step_profile_ms=profile,
                          stdev=statistics.stdev(ratios) if len(ratios) > 1 else None))
    print(f"{model}: {what} = {ratio:.3f} wall, {cpu_ratio:.3f} CPU time "
          f"({ours} {medians[ours][0]:,.0f}, {theirs} {medians[theirs][0]:,.0f} tok/s)", flush=True)
    return records


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--steps", type=int, default=0, help="steps timed per round (default: 300 transformer, "
                        "40 lstm)")
    parser.add_argument("--rounds", type=int, default=5, help="0: no speed rounds (the equal-loss check alone)")
    parser.add_argument("--loss-steps", type=int, default=600,
                        help="transformer steps of the equal-loss check (0: none)")
    parser.add_argument("--compile", action="store_true", help="also the trainer with --compile (transformer), "
                        "and the seconds compiling adds")
    parser.add_argument("--profile", action="store_true", help="print cProfile and torch.profiler tables of "
                        "seqlab's step")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, to check the script runs; writes nothing")
    args = parser.parse_args()
    torch.set_num_threads(1)
    keep_freed_memory()                 # what the trainer does first; set here for the plain loops as well
    data_dir = Path(args.data_dir)
    if args.quick:
        args.rounds, args.loss_steps = 1, 20
    common = {"task": "lm", "device": f"{device_name('cpu')}; {cpu_info()}"}
    records, profiles = [], {}
    if "transformer" in args.models:
        train, valid, vocab_size = shakespeare(data_dir, 200_000 if args.quick else None)
        steps = 20 if args.quick else args.steps or 300
        print(f"transformer (tinyshakespeare, V={vocab_size}), {steps} steps a round", flush=True)
        contenders = {"seqlab trainer": lambda: seqlab_transformer(train, valid, vocab_size, steps)[0],
                      "plain nanoGPT-style loop": lambda: nanogpt_loop(train, vocab_size, steps)[0]}
        if args.compile:
            contenders["seqlab trainer --compile"] = lambda: seqlab_transformer(train, valid, vocab_size, steps,
                                                                                 compile=True)[0]
        config = "transformer 4x128, 4 heads, context 64, batch 12, no bias, AdamW, clip 1.0, cosine"
        samples = rounds(contenders, args.rounds)
        if args.rounds:
            profile = step_profile(lambda n, p: seqlab_transformer(train, valid, vocab_size, n, profiler=p), steps)
            print(f"transformer: seqlab's step, ms: {profile}", flush=True)
            records += compare("transformer", samples, ("seqlab trainer", "plain nanoGPT-style loop"),
                               "seqlab trainer / plain nanoGPT-style loop", config, common, "tinyshakespeare",
                               profile)
        if args.compile and args.rounds:
            records += compare("transformer", samples, ("seqlab trainer --compile", "seqlab trainer"),
                               "seqlab trainer --compile / eager", config, common, "tinyshakespeare")[-1:]
            # the first round's: later ones reuse the process's compiled code (a new model of the same class)
            extra = samples["seqlab trainer --compile"][0].first_s - samples["seqlab trainer"][0].first_s
            records.append(record(**common, dataset="tinyshakespeare", split="train", arch="transformer",
                                  config=f"training, seqlab trainer --compile: {config}, fp32, 1 thread",
                                  metric="compile_s", value=extra))
            print(f"transformer: --compile adds {extra:.1f} s to the first {WARMUP} steps", flush=True)
        if args.loss_steps:
            records += equal_loss(args, train, valid, vocab_size, common, config)
        if args.profile:
            profiles["transformer"] = seqlab_profiles(lambda: seqlab_transformer(train, valid, vocab_size, 100))
    if "lstm" in args.models:
        ids, vocab_size = wikitext(data_dir, 2000 if args.quick else None)
        steps = 10 if args.quick else args.steps or 40
        print(f"lstm (wikitext-2, V={vocab_size:,}), {steps} steps a round", flush=True)
        samples = rounds({"seqlab trainer": lambda: seqlab_lstm(ids, vocab_size, steps),
                          "plain pytorch/examples loop": lambda: examples_loop(ids, vocab_size, steps)}, args.rounds)
        config = f"lstm 2x200 tied, dropout 0.2, batch 20x35, SGD lr 20, clip 0.25, V={vocab_size:,}"
        if args.rounds:
            profile = step_profile(lambda n, p: seqlab_lstm(ids, vocab_size, n, profiler=p), steps)
            print(f"lstm: seqlab's step, ms: {profile}", flush=True)
            records += compare("lstm", samples, ("seqlab trainer", "plain pytorch/examples loop"),
                               "seqlab trainer / plain pytorch/examples loop", config, common, "wikitext-2",
                               profile)
        if args.profile:
            profiles["lstm"] = seqlab_profiles(lambda: seqlab_lstm(ids, vocab_size, 20))
    for name, text in profiles.items():
        print(f"\n=== {name}: seqlab trainer profile ===\n{text}")
    if not args.quick:
        notes = ("Ratios of medians over alternating rounds in one process, one thread each; `cpu_speedup` is the "
                 "same ratio in process CPU time (a busy machine slows the wall clock, not the CPU time). "
                 "The transformer's `loss` rows: valid loss after the same steps from two seeds, the whole valid "
                 "split in non-overlapping 64-character windows, one evaluation function for both sides.")
        write_records("train_step", records, "The training step: seqlab's trainer vs plain PyTorch loops",
                      notes=notes)
    return 0


def equal_loss(args, train, valid, vocab_size, common, config) -> list[dict]:
    """Each side's valid loss after `--loss-steps` steps from two seeds; within the plain loop's spread?"""
    losses = {"seqlab trainer": [], "plain nanoGPT-style loop": []}
    for seed in (1337, 1338):
        losses["seqlab trainer"].append(valid_loss(seqlab_transformer(train, valid, vocab_size, args.loss_steps
                                                                       - WARMUP, seed)[1], valid))
        losses["plain nanoGPT-style loop"].append(valid_loss(nanogpt_loop(train, vocab_size, args.loss_steps
                                                                          - WARMUP, seed)[1], valid))
    ours, theirs = (statistics.mean(v) for v in losses.values())
    spread = max(max(losses["plain nanoGPT-style loop"]) - min(losses["plain nanoGPT-style loop"]), 0.02)
    verdict = "equal within noise" if abs(ours - theirs) <= spread else "DIFFERENT"
    print(f"valid loss after {args.loss_steps} steps, seeds 1337 and 1338: seqlab "
          f"{', '.join(f'{x:.4f}' for x in losses['seqlab trainer'])}; plain "
          f"{', '.join(f'{x:.4f}' for x in losses['plain nanoGPT-style loop'])}: {verdict} "
          f"(|{ours:.4f} - {theirs:.4f}| vs {spread:.4f})", flush=True)
    return [record(**common, dataset="tinyshakespeare", split="valid", arch="transformer",
                   config=f"valid loss after {args.loss_steps} steps, {name}: {config}, fp32", metric="loss",
                   value=statistics.mean(values), seeds=[1337, 1338], per_seed=values,
                   note=verdict if name == "seqlab trainer" else None)
            for name, values in losses.items()]


def seqlab_profiles(fn) -> str:
    return profile_summary(fn) + "\n" + torch_profile(fn)


if __name__ == "__main__":
    raise SystemExit(main())
