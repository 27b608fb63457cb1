"""Adaptive softmax (Grave, Joulin, Cissé, Grangier and Jégou 2017, "Efficient softmax approximation for
GPUs", ICML; arXiv:1609.04309): an output layer over a large vocabulary that spends its arithmetic where the
words are.

Words follow Zipf's law: in wikitext-2's training text the 2,486 most frequent of 33,278 word types cover 80%
of the tokens, the 7,458 most frequent 91% (the default cutoffs below). The vocabulary, sorted by frequency,
is cut at `cutoffs` c_1 < c_2 < ... < c_J into a head V_h = [0, c_1), the shortlist of the most frequent
words, and tail clusters V_j = [c_j, c_{j+1}) (c_{J+1} = V); the paper's section 4 builds it up from the
two-cluster case to this general one:

    head      h (N, D) -> W_h h          (N, c_1 + J)   the shortlist's words and one entry per tail cluster
    cluster j h (N, D) -> W_j (P_j h)    (N, |V_j|)     P_j (d_j, D) projects to the reduced width
                                                        d_j = D // div_value^j: the rarer the words, the
                                                        less capacity (the paper divides by 4 per cluster)

and the probability of a word factorises through its cluster, p(w | h) = p(V_j | h) p(w | V_j, h):

    p(w | h) = softmax(W_h h)_w                                  w in the shortlist V_h
    p(w | h) = softmax(W_h h)_{c_1 + j} * softmax(W_j P_j h)_w   w in tail cluster V_j

Each row's probabilities sum to 1: the head's entries sum to 1, and each cluster entry is shared out by its
cluster's own softmax. Training (`loss`) computes the head for every row and a cluster only for the rows
whose target lies in it, so no (N, V) matrix is built: the cost of a step is about N D (c_1 + J) plus
sum_j N_j d_j (D + |V_j|), against N D V for the full softmax (the cost the paper's clusters minimise).
`log_prob` computes the full (..., V) log-probabilities for evaluation, generation and search.

The cluster boundaries must follow frequency. A vocabulary is not always sorted that way (BPE's pieces come
in merge order; a canary alphabet is appended), so the layer holds a permutation: `rank[w]` is word id w's
position in frequency order, identity until `order_by_frequency(counts)` sets it from the training counts.
The results are in word-id order either way; only which words share the head depends on it.

Equal to `torch.nn.AdaptiveLogSoftmaxWithLoss` (with head_bias=True and the identity order) given the same
weights; the parameter names match, so its state_dict loads here.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.data.vocab import PAD
from seqlab.errors import SeqlabError

OUTPUTS = ("logits", "hidden")          # as `seqlab.models.base.OUTPUTS`

# fairseq's wikitext-103 setting (Baevski & Auli 2019, after Grave et al.): cutoffs 20,000 and 60,000 of a
# 267,735-word vocabulary; `default_cutoffs` scales them to the vocabulary at hand (2,486 and 7,458 of
# wikitext-2's 33,278)
DEFAULT_CUTOFF_FRACTIONS = (20_000 / 267_735, 60_000 / 267_735)


def default_cutoffs(vocab_size: int) -> list[int]:
    """The cutoffs used when none are given: DEFAULT_CUTOFF_FRACTIONS of the vocabulary, kept strictly
    increasing, at least 1 and below `vocab_size` (a tiny vocabulary gets one or two small clusters)."""
    cutoffs: list[int] = []
    for fraction in DEFAULT_CUTOFF_FRACTIONS:
        cutoff = max(round(fraction * vocab_size), cutoffs[-1] + 1 if cutoffs else 1)
        if cutoff < vocab_size:
            cutoffs.append(cutoff)
    if not cutoffs:
        raise SeqlabError(f"adaptive softmax needs a vocabulary of at least 2 words, not {vocab_size}")
    return cutoffs


def parse_cutoffs(text: str, vocab_size: int = 0) -> list[int]:
    """'2000,10000' -> [2000, 10000], checked: positive integers, strictly increasing, and (when the
    vocabulary size is known, > 0) below it. A SeqlabError names --cutoffs otherwise."""
    try:
        cutoffs = [int(part) for part in text.split(",")]
    except ValueError:
        raise SeqlabError(f"--cutoffs {text!r}: expects comma-separated integers, e.g. 2000,10000") from None
    if any(c < 1 for c in cutoffs):
        raise SeqlabError(f"--cutoffs {text}: every cutoff must be a positive integer")
    if any(b <= a for a, b in zip(cutoffs, cutoffs[1:], strict=False)):
        raise SeqlabError(f"--cutoffs {text}: the cutoffs must be strictly increasing")
    if vocab_size and cutoffs[-1] >= vocab_size:
        raise SeqlabError(f"--cutoffs {text}: every cutoff must be below the vocabulary size {vocab_size:,} "
                          f"(the last cluster ends at it)")
    return cutoffs


class AdaptiveSoftmax(nn.Module):
    """h (..., D) -> log p(w | h) over a `vocab_size`-word vocabulary, cut at `cutoffs` (see the module)."""

    def __init__(self, input_size: int, vocab_size: int, cutoffs: list[int], div_value: float = 4.0,
                 head_bias: bool = True):
        super().__init__()
        cutoffs = list(cutoffs)
        if not cutoffs or any(b <= a for a, b in zip([0, *cutoffs], [*cutoffs, vocab_size], strict=True)):
            raise SeqlabError(f"adaptive softmax: cutoffs {cutoffs} must be increasing, positive and below "
                              f"the vocabulary size {vocab_size}")
        self.input_size, self.vocab_size, self.div_value = input_size, vocab_size, div_value
        self.cutoffs = cutoffs + [vocab_size]                 # c_1 .. c_J, c_{J+1} = V
        self.shortlist_size, self.num_clusters = cutoffs[0], len(cutoffs)
        self.head = nn.Linear(input_size, self.shortlist_size + self.num_clusters, bias=head_bias)   # W_h
        self.tail = nn.ModuleList()
        for j in range(self.num_clusters):
            width = max(1, int(input_size // div_value ** (j + 1)))       # d_j = D / div^j, at least 1
            size = self.cutoffs[j + 1] - self.cutoffs[j]                  # |V_j|
            self.tail.append(nn.Sequential(nn.Linear(input_size, width, bias=False),   # P_j (d_j, D)
                                           nn.Linear(width, size, bias=False)))        # W_j (|V_j|, d_j)
        # rank[w]: word id w's position in frequency order (the clusters are ranges of positions)
        self.register_buffer("rank", torch.arange(vocab_size))

    @torch.no_grad()
    def order_by_frequency(self, counts: Tensor) -> int:
        """Place the words by their training counts (V,), most frequent first (ties by id); return how many
        words that puts in another cluster than their id alone would (a word vocabulary, frequency-sorted
        after its specials, moves only the specials never seen in training, <pad> <s> <sep>, to the last
        cluster, and the few words at each cutoff they displace)."""
        order = torch.sort(counts.to(self.rank.device), descending=True, stable=True).indices   # (V,) pos -> id
        self.rank[order] = torch.arange(self.vocab_size, device=self.rank.device)
        bounds = torch.tensor(self.cutoffs[:-1], device=self.rank.device)
        ids = torch.arange(self.vocab_size, device=self.rank.device)
        return int((torch.bucketize(self.rank, bounds, right=True) != torch.bucketize(ids, bounds, right=True)).sum())

    def log_prob(self, h: Tensor) -> Tensor:
        """h (..., D) -> log p(w | h) for every word (..., V), in word-id order; each row's exp sums to 1."""
        shape = h.shape[:-1]
        h = h.reshape(-1, h.size(-1))                                           # (N, D)
        head = F.log_softmax(self.head(h), dim=-1)                              # (N, c_1 + J)
        parts = [head[:, : self.shortlist_size]]                                # log p(w), w in V_h
        for j, cluster in enumerate(self.tail):
            entry = head[:, self.shortlist_size + j, None]                      # (N, 1) log p(V_j | h)
            parts.append(entry + F.log_softmax(cluster(h), dim=-1))             # (N, |V_j|) log p(V_j) p(w | V_j)
        by_position = torch.cat(parts, dim=-1)                                  # (N, V) in frequency order
        return by_position.index_select(-1, self.rank).reshape(*shape, self.vocab_size)   # (..., V) by id

    def loss(self, h: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
        """(summed -log p(target | h), count) over the targets (...) that are not PAD, h (..., D): the head
        for every row, each cluster for the rows whose target is in it; no (N, V) tensor."""
        h = h.reshape(-1, h.size(-1))                                           # (N, D)
        targets = targets.reshape(-1)                                           # (N,)
        kept = targets != PAD
        h, position = h[kept], self.rank[targets[kept]]                         # (n, D), (n,)
        bounds = torch.tensor(self.cutoffs[:-1], device=h.device)
        cluster = torch.bucketize(position, bounds, right=True)                 # (n,) 0 = head, j = V_j
        head = F.log_softmax(self.head(h), dim=-1)                              # (n, c_1 + J)
        head_column = torch.where(cluster == 0, position, self.shortlist_size + cluster - 1)
        log_p = head.gather(1, head_column[:, None]).squeeze(1)                 # (n,) log p(w) or log p(V_j)
        for j, module in enumerate(self.tail):
            # (n_j,); a cluster no target falls in still enters the graph, with zero gradients (as DDP expects)
            rows = (cluster == j + 1).nonzero().squeeze(1)
            within = F.log_softmax(module(h.index_select(0, rows)), dim=-1)     # (n_j, |V_j|)
            word = (position.index_select(0, rows) - self.cutoffs[j])[:, None]  # (n_j, 1)
            log_p = log_p.index_add(0, rows, within.gather(1, word).squeeze(1))  # + log p(w | V_j, h)
        if log_p.dtype not in (torch.float32, torch.float64):
            log_p = log_p.float()
        return -log_p.sum(), kept.sum()


class AdaptiveOutputLayer(AdaptiveSoftmax):
    """The adaptive softmax as a model's output layer (`--output-layer adaptive`), in place of
    `seqlab.models.base.OutputLayer`: `forward(h)` gives the log-probabilities (..., V), which are valid
    logits (softmax(log p) = p, and their cross-entropy is the NLL), so evaluation, generation, beam search,
    export and the server use it unchanged; `forward(h, output="hidden")` returns h (..., D) for the
    task, which trains through `loss(h, targets)`."""

    adaptive = True

    def forward(self, h: Tensor, output: str = "logits") -> Tensor:
        if output not in OUTPUTS:
            raise SeqlabError(f"output={output!r}: a model's forward returns logits or hidden (the states "
                              "entering its output layer)")
        return h if output == "hidden" else self.log_prob(h)                   # (..., D) or (..., V)
