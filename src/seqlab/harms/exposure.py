"""Exposure of planted secrets (Carlini et al. 2019, "The Secret Sharer", USENIX Security, §4).

A run trained with `--canary TEMPLATE --canary-repeats ...` (`seqlab.data.canaries`) holds secrets s
drawn uniformly from the space R of the template's fillings. The model ranks every candidate r in R by
its score, and

    exposure(s) = log2 |R| - log2 rank(s)                                       (Carlini et al. 2019, Def. 4)

so a secret the model ranks first has the largest exposure, log2 |R| (for 6 digits, 19.93 bits), and a
secret it has not memorised sits at a uniform random rank, where E[exposure] = 1/ln 2 = 1.44 bits.

**Score.** log P(filling | `</s>`, the template's text before the slot): the sum of the log-probabilities
of the filling's tokens, read from a line start as the model reads a training line. The text after the
slot does not enter the score: a causal model's probability of the rest of the line is conditioned on
the filling, so adding it would add a second, filling-dependent term that measures how well the rest
fits, not how likely the secret is; the paper's log-perplexity of the whole line differs from ours by
that term and by the prefix's log-probability, which is the same for every candidate. Higher is more
likely; **rank(s) = 1 + the number of candidates with a strictly higher score** (ties are resolved in the
secret's favour).

**Exact enumeration** (|R| <= 10^6, `method="exact"`): the candidates form a trie of depth N (the slot's
length) whose depth-i nodes are the |A|^i prefixes of a filling (A the slot's alphabet). One batched
model step per node gives the log-probabilities of all |A| next symbols at once, so 6 digits cost
10^0 + ... + 10^5 = 111,111 steps, not 10^6 teacher-forced sequences. Recurrent and feedforward models
carry their state from a node to its children; the transformer re-reads each node's short context (in
chunks). Every filling's score is the sum along its path. With byte-level BPE a symbol training never
merged with its space is two tokens (`Ġ` `7`): recurrent models read such a piece on from the node's
state; the transformer's enumeration needs one token per symbol and refuses (use the approximation).

**Approximation** (|R| > 10^6, or `method="approximate"`; §4.3): score a uniform sample of candidates
(default 10,000, seeded), fit a skew-normal distribution to their scores (`scipy.stats.skewnorm`), and

    exposure ~ -log2 P(score >= score(s))                                      (the fit's survival function)

(the paper fits the distribution of log-perplexities and integrates below the secret's; a higher score
here is a lower log-perplexity).
"""

from __future__ import annotations

import math
import shlex
from pathlib import Path

import numpy as np
import torch

from seqlab.data.canaries import FILE, Template, parse_template, read_record
from seqlab.data.vocab import EOS
from seqlab.errors import SeqlabError
from seqlab.fileio import atomic_write_json, atomic_write_text

EXACT_LIMIT = 10 ** 6
METHODS = ("auto", "exact", "approximate")
NAME = "exposure"
CHUNK = 4096                              # nodes per model call


# ---------------------------------------------------------------------------- tokens of the candidates

class Candidates:
    """The token view of a template: the context ids (`</s>` + the text before the slot) and, for each
    position of the slot, the token ids of each symbol there (its piece: one token with the word and char
    tokenizers; one or two with byte-level BPE, `Ġ` + `7` where training never merged ` 7`). Checked
    against the tokenizer: the tokens of `before + filling` must be the context's followed by the pieces
    (for the secrets and a sample of other fillings)."""

    def __init__(self, lm, template: Template, separator: str):
        self.lm, self.template, self.separator = lm, template, separator
        tokenize = self.tokenize
        before = template.before.rstrip() if separator else template.before
        context = tokenize(before) if before else []
        self.context = [EOS] + lm.token_ids(context)
        first = template.alphabet[0]
        self.symbols: list[list[tuple[int, ...]]] = []          # [position][symbol] -> its token ids
        for position in range(template.length):
            lead = template.before + separator.join(first * position)
            base = tokenize(lead) if position else context
            pieces = []
            for symbol in template.alphabet:
                tokens = tokenize(lead + (separator if position else "") + symbol)
                if tokens[:len(base)] != base or len(tokens) == len(base):
                    raise SeqlabError(f"the tokenizer does not read {symbol!r} at position {position + 1} of the "
                                      f"canary's slot apart from the text before it ({tokens[len(base):]}); "
                                      "exposure cannot enumerate its candidates")
                pieces.append(tuple(lm.token_ids(tokens[len(base):])))
            self.symbols.append(pieces)
        self.single = all(len(piece) == 1 for pieces in self.symbols for piece in pieces)
        self.symbol_ids = torch.tensor([[piece[0] for piece in pieces] for pieces in self.symbols])   # (N, |A|)
        rng = np.random.default_rng(0)
        for index in rng.integers(0, template.space, size=min(20, template.space)):
            self.check(template.filling(int(index)))

    def tokenize(self, text: str) -> list[str]:
        """The tokens of one line of text, as the model reads it."""
        return self.lm.tokenize_lines([text])[0]

    def ids(self, filling: str) -> list[int]:
        """`</s>` + context + the filling's token ids."""
        alphabet = self.template.alphabet
        return self.context + [t for k, c in enumerate(filling) for t in self.symbols[k][alphabet.index(c)]]

    def check(self, filling: str) -> None:
        """The tokenizer reads the filling's line as the pieces say (as the model was trained on it)."""
        rendered = self.template.before + self.separator.join(filling)
        tokens = self.tokenize(rendered)
        if self.lm.token_ids(tokens) != self.ids(filling)[1:]:
            raise SeqlabError(f"the tokens of {rendered!r} are not the template's followed by one piece per "
                              "symbol; exposure cannot enumerate its candidates")


# ---------------------------------------------------------------------------- scores

def _map_state(state, fn):
    if state is None:
        return None
    if isinstance(state, torch.Tensor):
        return fn(state)
    if isinstance(state, (tuple, list)):
        return type(state)(_map_state(s, fn) for s in state)
    raise SeqlabError(f"exposure cannot batch a model state of type {type(state).__name__}")


def _stack_states(states: list, dim: int):
    """States of the same B nodes, one per symbol -> one state of B * A nodes, node-major (as
    `repeat_interleave` orders them)."""
    first = states[0]
    if isinstance(first, torch.Tensor):
        return torch.stack(states, dim=dim + 1).flatten(dim, dim + 1)
    return type(first)(_stack_states([s[k] for s in states], dim) for k in range(len(first)))


@torch.no_grad()
def enumerate_scores(lm, candidates: Candidates, chunk: int = CHUNK) -> np.ndarray:
    """Every filling's score log P(filling | `</s>` context), in lexicographic order of the fillings
    (index = the filling read as a base-|A| number), by expanding the trie depth by depth."""
    device = lm.device
    symbol_ids = candidates.symbol_ids.to(device)                       # (N, A)
    depth_total, width = symbol_ids.shape
    context = torch.tensor([candidates.context], device=device)         # (1, C)
    recurrent = lm.carries_state
    if recurrent:
        state = lm.initial_state(1)
        if context.size(1) > 1:
            _, state = lm.read_ids(context[:, :-1], state)
        nodes = (state, context[:, -1])                                  # state before the pending token
    else:
        nodes = context

    def expand(nodes, scores: torch.Tensor, depth: int) -> list[torch.Tensor]:
        """Scores (B * A^(N - depth),) of all fillings under the B nodes at `depth`."""
        out = []
        count = scores.size(0)
        for start in range(0, count, chunk):
            part = slice(start, min(count, start + chunk))
            if recurrent:
                state, pending = nodes
                dim = lm.state_batch_dim
                sub_state = _map_state(state, lambda t, p=part, d=dim: t.narrow(d, p.start, p.stop - p.start))
                logits, next_state = lm.read_ids(pending[part, None], sub_state)    # (b, 1, V)
                logprobs = torch.log_softmax(logits[:, -1].float(), dim=-1)         # (b, V)
            else:
                logprobs = lm.next_log_probs(nodes[part])                           # (b, V)
            ids = symbol_ids[depth]                                                 # (A,)
            if not candidates.single:                                               # pieces of several tokens
                out.extend(expand_pieces(next_state, scores[part], logprobs, depth))
                continue
            child_scores = (scores[part, None] + logprobs[:, ids]).reshape(-1)      # (b * A,)
            if depth + 1 == depth_total:
                out.append(child_scores.cpu())
                continue
            b = logprobs.size(0)
            if recurrent:
                children = (_map_state(next_state, lambda t, d=dim: t.repeat_interleave(width, dim=d)),
                            ids.repeat(b))
            else:
                sequences = nodes[part].repeat_interleave(width, dim=0)               # (b * A, T)
                children = torch.cat([sequences, ids.repeat(b)[:, None]], dim=1)    # (b * A, T + 1)
            out.extend(expand(children, child_scores, depth + 1))
        return out

    def expand_pieces(state, scores: torch.Tensor, logprobs: torch.Tensor, depth: int) -> list[torch.Tensor]:
        """Recurrent models, pieces of any length: each symbol's piece read on from the node's state."""
        b, dim = scores.size(0), lm.state_batch_dim
        child_scores, child_states, pending = [], [], []
        for piece in candidates.symbols[depth]:
            score, child = scores + logprobs[:, piece[0]], state
            if len(piece) > 1:                              # log P(piece[1:] | ..., piece[:-1])
                inputs = torch.tensor(piece[:-1], device=device).expand(b, -1)               # (b, k-1)
                logits, child = lm.read_ids(inputs, state)
                rest = torch.log_softmax(logits.float(), dim=-1)                          # (b, k-1, V)
                score = score + rest[:, torch.arange(len(piece) - 1), list(piece[1:])].sum(1)
            child_scores.append(score)
            child_states.append(child)
            pending.append(piece[-1])
        flat = torch.stack(child_scores, dim=1).reshape(-1)                                 # (b * A,)
        if depth + 1 == depth_total:
            return [flat.cpu()]
        children = (_stack_states(child_states, dim), torch.tensor(pending, device=device).repeat(b))
        return expand(children, flat, depth + 1)

    if not candidates.single and not recurrent:
        raise SeqlabError("exact enumeration with a transformer needs one token per symbol; this tokenizer splits "
                          "some symbols into several: use --method approximate")
    scores = expand(nodes, torch.zeros(1, device=device), 0)
    return torch.cat(scores).double().numpy()


@torch.no_grad()
def teacher_forced_scores(lm, candidates: Candidates, fillings: list[str], batch_size: int = 512) -> np.ndarray:
    """The same score, each filling's sequence read whole (teacher forcing): for a sample of candidates,
    and to check the enumeration."""
    device = lm.device
    start = len(candidates.context)
    sequences = [candidates.ids(f) for f in fillings]
    scores = np.zeros(len(fillings))
    by_length: dict[int, list[int]] = {}
    for k, ids in enumerate(sequences):
        by_length.setdefault(len(ids), []).append(k)                  # BPE pieces: lengths differ
    for length, members in by_length.items():
        for k in range(0, len(members), batch_size):
            chosen = members[k:k + batch_size]
            ids = torch.tensor([sequences[i] for i in chosen], device=device)       # (B, C + pieces)
            inputs, targets = ids[:, :-1], ids[:, 1:]
            if lm.carries_state:
                logits, _ = lm.read_ids(inputs, lm.initial_state(inputs.size(0)))
            else:
                inputs = inputs[:, -lm.context_length:]
                targets = targets[:, -inputs.size(1):]
                logits, _ = lm.read_ids(inputs)
            logprobs = torch.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
            scores[chosen] = logprobs[:, -(length - start):].sum(1).double().cpu().numpy()
    return scores


# ---------------------------------------------------------------------------- exposure

def rank_of(scores: np.ndarray, score: float) -> int:
    """1 + the number of candidates scored strictly higher (ties in the secret's favour)."""
    return 1 + int(np.sum(scores > score))


def exposure_exact(space: int, rank: int) -> float:
    """exposure = log2 |R| - log2 rank (Carlini et al. 2019, Def. 4)."""
    return math.log2(space) - math.log2(rank)


def exposure_approximate(sample: np.ndarray, score: float) -> tuple[float, dict]:
    """-log2 P(score >= the secret's) under a skew-normal fitted to the sampled candidates' scores
    (Carlini et al. 2019, §4.3), and the fit's parameters."""
    from scipy.stats import skewnorm

    shape, loc, scale = skewnorm.fit(sample)
    log_tail = float(skewnorm.logsf(score, shape, loc, scale))           # ln P(X >= score)
    return -log_tail / math.log(2), {"shape": float(shape), "loc": float(loc), "scale": float(scale)}


def measure_exposure(lm, record: dict, method: str = "auto", samples: int = 10000, seed: int = 0) -> dict:
    """Every secret's rank and exposure for a loaded language model and the run's canaries.json record."""
    if method not in METHODS:
        raise SeqlabError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    template = parse_template(record["template"])
    space = template.space
    if method == "auto":
        method = "exact" if space <= EXACT_LIMIT else "approximate"
    if method == "exact" and space > EXACT_LIMIT:
        raise SeqlabError(f"exact enumeration is for at most {EXACT_LIMIT:,} candidates; {record['template']!r} has "
                          f"{space:,}: use the approximation (method approximate)")
    separator = record.get("separator", " ")
    candidates = Candidates(lm, template, separator)
    secrets = record["secrets"]
    for secret in secrets:
        candidates.check(secret["filling"])
    secret_scores = teacher_forced_scores(lm, candidates, [s["filling"] for s in secrets])
    rows = []
    if method == "exact":
        scores = enumerate_scores(lm, candidates)
        for secret in secrets:
            score = float(scores[template.index(secret["filling"])])     # the trie's own figure, as the others'
            rank = rank_of(scores, score)
            rows.append({"rank": rank, "score": score, "exposure": exposure_exact(space, rank)})
        details = {"candidates_scored": space}
    else:
        rng = np.random.default_rng(seed)
        indices = rng.integers(0, space, size=samples)
        sample = teacher_forced_scores(lm, candidates, [template.filling(int(i)) for i in indices])
        fit = None
        for score in secret_scores:
            exposure, fit = exposure_approximate(sample, float(score))
            rows.append({"rank": None, "estimated_rank": space * 2.0 ** -exposure, "score": float(score),
                         "exposure": exposure, "sample_rank": rank_of(sample, float(score))})
        details = {"candidates_scored": samples, "sample_seed": seed, "skewnorm": fit}
    secrets_out = [{"number": k + 1, "text": s["text"], "filling": s["filling"], "repeats": s["repeats"], **row,
                    "max_exposure": math.log2(space)} for k, (s, row) in enumerate(zip(secrets, rows, strict=True))]
    return {"audit": NAME, "template": record["template"], "space": space, "log2_space": math.log2(space),
            "method": method, "score": "log P(filling | </s> + the template's text before the slot), natural log",
            "ties": "rank = 1 + candidates with a strictly higher score", **details, "secrets": secrets_out}


# ---------------------------------------------------------------------------- reports

def to_markdown(result: dict) -> str:
    method = ("exact enumeration of every candidate" if result["method"] == "exact" else
              f"skew-normal fit to {result['candidates_scored']:,} sampled candidates (seed {result['sample_seed']})")
    lines = [f"# Exposure of the canaries in {result.get('run', 'the run')}", "",
             f"Template `{result['template']}`, |R| = {result['space']:,} candidates (log2 |R| = "
             f"{result['log2_space']:.2f}); {method}. Exposure = log2 |R| - log2 rank (Carlini et al. 2019); "
             "rank = 1 + candidates scored strictly higher; score = log P(filling | the template's text before "
             "the slot). An unmemorised secret averages 1/ln 2 = 1.44 bits; a fully memorised one log2 |R|.", "",
             "| secret # | repeats | rank | \\|R\\| | exposure | log2 \\|R\\| |", "|---:|---:|---:|---:|---:|---:|"]
    for s in result["secrets"]:
        rank = f"{s['rank']:,}" if s["rank"] is not None else f"~{s['estimated_rank']:,.0f}"
        lines.append(f"| {s['number']} | {s['repeats']} | {rank} | {result['space']:,} | {s['exposure']:.2f} | "
                     f"{result['log2_space']:.2f} |")
    lines += ["", "Secrets (the audit is the owner's tool; the model card never shows them): " +
              ", ".join(f"#{s['number']} `{s['text']}`" for s in result["secrets"]), ""]
    return "\n".join(lines)


def format_table(result: dict) -> str:
    rows = [("secret", "repeats", "rank", "|R|", "exposure", "log2|R|")]
    for s in result["secrets"]:
        rank = f"{s['rank']:,}" if s["rank"] is not None else f"~{s['estimated_rank']:,.0f}"
        rows.append((str(s["number"]), str(s["repeats"]), rank, f"{result['space']:,}", f"{s['exposure']:.2f}",
                     f"{result['log2_space']:.2f}"))
    widths = [max(len(row[k]) for row in rows) for k in range(6)]
    return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in rows)


def plot_exposure(curves: dict[str, list[tuple[int, float]]], log2_space: float, path: str | Path,
                  title: str = "") -> Path:
    """Exposure against repeats (log x), one line per curve, a horizontal line at log2 |R|."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from seqlab.training.plots import save_png

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    for label, points in curves.items():
        points = sorted(points)
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
    ax.axhline(log2_space, color="black", lw=1, ls="--", label=f"log2 |R| = {log2_space:.2f}")
    ax.axhline(1 / math.log(2), color="grey", lw=1, ls=":", label="chance (1/ln 2)")
    ax.set_xscale("log")
    ax.set_xlabel("repeats of the secret in the training data")
    ax.set_ylabel("exposure (bits)")
    ax.set_ylim(0, log2_space * 1.08)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title or "Exposure of planted canaries", fontsize=10)
    fig.tight_layout()
    return save_png(fig, path)


# ---------------------------------------------------------------------------- the audit of a run

def audit_exposure(run_dir: str | Path, output: str | Path | None = None, device: str = "cpu", method: str = "auto",
                   samples: int = 10000, seed: int = 0) -> tuple[dict, dict[str, Path]]:
    """`seqlab audit exposure`: load a run's language model and its canaries.json, measure every secret's
    exposure, and write exposure.json, .md and .png into `output` (default: RUN/audits/), each atomically.
    Returns the result and {kind: path}."""
    from seqlab.fileio import check_writable
    from seqlab.harms import check_audited
    from seqlab.registry import load

    check_audited(run_dir, "exposure")
    path = Path(run_dir) / FILE
    if not path.is_file():
        raise SeqlabError(f"{run_dir} has no {FILE}: it was not trained with --canary, so it holds no secrets to "
                          "measure (train with --canary 'my pin is {digits:6}' --canary-repeats 1 4 16 64)")
    if method not in METHODS:
        raise SeqlabError(f"--method must be one of {', '.join(METHODS)}, got {method!r}")
    if samples < 2:
        raise SeqlabError(f"--samples must be at least 2, got {samples}")
    record = read_record(path)
    output = Path(output) if output is not None else Path(run_dir) / "audits"
    check_writable(output, "output folder", folder=True)
    result = {"run": str(run_dir), **measure_exposure(load(run_dir, device), record, method, samples, seed)}
    result["command"] = shlex.join(["seqlab", "audit", "exposure", str(run_dir), "--method", method]
                                   + (["--samples", str(samples), "--seed", str(seed)] if result["method"] != "exact"
                                      else []))
    paths = {"json": output / f"{NAME}.json", "markdown": output / f"{NAME}.md", "png": output / f"{NAME}.png"}
    atomic_write_json(paths["json"], result)
    atomic_write_text(paths["markdown"], to_markdown(result))
    plot_exposure({"this run": [(s["repeats"], s["exposure"]) for s in result["secrets"]]}, result["log2_space"],
                  paths["png"], f"Exposure of {result['template']!r} in {run_dir}")
    return result, paths
