"""Language modelling: batches, the loss as (sum, count), and perplexity (SLP 9.1).

Cross-entropy per token is the negative log-probability the model gave the token that came next;
over a text of N tokens the loss is the mean, L = -(1/N) sum_t log P(w_t | w_<t), in nats.
Perplexity is exp(L) (SLP 9.1: the inverse probability of the text, normalised by its length) and
bits per token are L / ln 2. N counts every token of the file, one `</s>` per line included
(the PTB convention); the first token is predicted from `</s>`, as at the start of a line.

Bits per character divide the same total, in bits, by the characters of the text instead of its
tokens: BPC = -(1 / C) sum_t log2 P(w_t | w_<t), where C counts every character of every line plus
one per line break (`seqlab.data.readers.count_characters`: the `</s>` of each line stands for its
break). The total is the same whatever the tokenizer, so BPC compares models with different
tokenizers where perplexities per token do not; for a character-level model C = N and BPC equals
bits per token.

Training takes the loss through the model's output layer, plain or fused (`seqlab.training.output_loss`:
the same sum, without the (B, T, V) logits), or with the adaptive softmax through its own loss
(`seqlab.nn.adaptive_softmax`: the head and only the clusters the targets are in); evaluation through the
logits (for the adaptive softmax, its full log-probabilities: the same figures).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from seqlab.data.batching import (
    ArrayTokens,
    Batch,
    StreamBatches,
    TokenStreamBatches,
    TokenWindowBatches,
    sliding_windows,
)
from seqlab.data.vocab import PAD
from seqlab.errors import SeqlabError
from seqlab.nn.adaptive_softmax import AdaptiveOutputLayer
from seqlab.progress import progress_bar
from seqlab.training.output_loss import choose_fused_output, fused_token_loss, output_layer


def token_loss(logits: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
    """Summed cross-entropy over the non-padding targets, and their count. logits (B, T, V)."""
    if logits.dtype not in (torch.float32, torch.float64):
        logits = logits.float()                                        # bf16 autocast: softmax in fp32
    loss_sum = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1),
                               ignore_index=PAD, reduction="sum")
    return loss_sum, (targets != PAD).sum()


def summarize(loss_sum: float, count: int, characters: int = 0) -> dict:
    """Loss in nats and bits per token and perplexity, from the summed loss and the token count; with
    the text's character count, bits per character too."""
    loss = loss_sum / max(count, 1)
    figures = {"tokens": int(count), "loss": loss, "bits_per_token": loss / math.log(2),
               "perplexity": math.exp(min(loss, 700.0))}
    if characters:
        figures["characters"] = int(characters)
        figures["bits_per_char"] = loss_sum / characters / math.log(2)     # as bits_per_token: equal when C = N
    return figures


class LanguageModelingTask:
    """Language modelling for the trainer (the `seqlab.training.task.Task` contract)."""

    name = "lm"
    unit = "token"                        # what `count` counts
    metric = "loss"                       # what picks the best weights (its direction: `seqlab.metrics`)
    progress: bool | None = False      # a bar over evaluation batches (None: when stderr is a terminal)

    def __init__(self, model, train_ids, valid_ids: Tensor, test_ids: Tensor | None,
                 batch_size: int, seq_len: int, eval_batch_size: int, eval_stride: int, seed: int,
                 valid_characters: int = 0, test_characters: int = 0, fused_output: str = "auto"):
        self.context = model.context_length          # None: a stream model that carries its state
        # the training ids are read by position (a prepared split's shards, `seqlab.data.prepared`), never whole
        self.train_ids = train_ids if hasattr(train_ids, "read") else ArrayTokens(train_ids)
        self.valid_data, self.test_data = valid_ids, test_ids
        self.valid_characters, self.test_characters = valid_characters, test_characters
        self.batch_size, self.eval_batch_size = batch_size, eval_batch_size
        self.seq_len = self.context or seq_len
        self.eval_stride = eval_stride or max(1, (self.context or 2) // 2)
        self.seed = seed
        self._stream = TokenStreamBatches(self.train_ids, batch_size, self.seq_len) if self.context is None else None
        layer = output_layer(model)
        self.adaptive = isinstance(layer, AdaptiveOutputLayer)
        if self.adaptive:            # its own loss from the hidden states, never a (B, T, V) tensor
            if fused_output == "on":
                raise SeqlabError("--fused-output on does not apply to --output-layer adaptive (its loss never "
                                  "builds the full logits anyway): leave it out or set it to auto")
            self.fused_output = False
            self.output_note = (f"output layer: adaptive softmax (head {layer.shortlist_size:,} words + "
                                f"{layer.num_clusters} clusters, cutoffs {','.join(map(str, layer.cutoffs[:-1]))}, "
                                f"div_value {layer.div_value:g}; loss from the hidden states)")
        else:
            vocab_size = layer.weight_and_bias()[0].size(0)
            # the loss's path, once for the run: a training batch is batch_size x seq_len rows of logits
            self.fused_output, self.output_note = choose_fused_output(fused_output, batch_size * self.seq_len,
                                                                      vocab_size)

    @property
    def carries_state(self) -> bool:
        return self.context is None

    def train_batches(self, epoch: int):
        """The global batches of one epoch (indexable, so a resumed run can start mid-epoch)."""
        if self._stream is not None:
            return self._stream
        return TokenWindowBatches(self.train_ids, self.batch_size, self.context, self.seed, epoch)

    def initial_state(self, model, rows: int, device):
        return model.init_state(rows, device) if self.carries_state else None

    @staticmethod
    def count(batch: Batch) -> int:
        """The scored targets: every next token but padding."""
        return batch.num_tokens

    def loss(self, model, batch: Batch, state):
        if self.adaptive:
            hidden, state = model(batch.inputs, state, output="hidden")  # (B, T, D)
            loss_sum, count = output_layer(model).loss(hidden, batch.targets)
        elif self.fused_output:
            hidden, state = model(batch.inputs, state, output="hidden")  # (B, T, D)
            loss_sum, count = fused_token_loss(output_layer(model), hidden, batch.targets)
        else:
            logits, state = model(batch.inputs, state)                 # (B, T, V)
            loss_sum, count = token_loss(logits, batch.targets)
        return loss_sum, count, state

    def eval_batches(self, ids: Tensor) -> list[Batch]:
        if self.carries_state:
            return list(StreamBatches(ids, self.eval_batch_size, self.seq_len, exact=True))
        return sliding_windows(ids, self.eval_batch_size, self.context, self.eval_stride)

    @torch.no_grad()
    def evaluate(self, model, ids: Tensor, device, rows: slice = slice(None)) -> dict:
        """Summed loss and token count over `ids` (the rows of each batch in `rows`, for DDP), and the
        characters of the split's text when known. The trainer adds every process's figures, so only
        the process that scores the first rows reports the characters (the others 0)."""
        batches = self.eval_batches(ids)
        with progress_bar(None, self.progress, total=len(batches), desc="evaluating", unit="batch",
                          leave=False) as bar:
            stats = evaluate_lm(model, batches, self.carries_state, device, rows, progress=bar)
        characters = self.valid_characters if ids is self.valid_data else \
            self.test_characters if ids is self.test_data else 0
        if characters:
            stats["characters"] = characters if (rows.start or 0) == 0 else 0
        return stats

    @staticmethod
    def summarize(stats: dict) -> dict:
        return summarize(stats["loss_sum"], int(stats["tokens"]), int(stats.get("characters", 0)))

    @property
    def batch_unit(self) -> str:
        return f"{self.seq_len} tokens"

    @staticmethod
    def progress_fields(loss: float) -> dict:
        return {"loss": f"{loss:.3f}", "ppl": f"{math.exp(min(loss, 700)):.2f}"}

    @staticmethod
    def describe(record: dict) -> str:
        where = f"step {record['step']}" + (f" (epoch {record['epoch']})" if "epoch" in record else "")
        per_char = f", {record['bits_per_char']:.4f} bits/char" if "bits_per_char" in record else ""
        return (f"{where} {record['split']}: loss {record['loss']:.4f} nats/token, "
                f"{record['bits_per_token']:.4f} bits/token, perplexity {record['perplexity']:.2f}{per_char} "
                f"over {record['tokens']:,} tokens")


@torch.no_grad()
def evaluate_lm(model, batches: list[Batch], carries_state: bool, device, rows: slice = slice(None),
                progress=None) -> dict:
    """Sum of token losses and token count; the state is carried across stream segments."""
    was_training = model.training
    model.eval()
    loss_sum, count, state = torch.zeros((), dtype=torch.float64, device=device), 0, None
    for batch in batches:
        batch = batch.rows(rows.start or 0, rows.stop if rows.stop is not None else batch.inputs.size(0))
        if batch.inputs.size(0) == 0:
            continue
        batch = batch.to(device)
        if carries_state and state is None:
            state = model.init_state(batch.inputs.size(0), device)
        logits, new_state = model(batch.inputs, state if carries_state else None)
        state = new_state if carries_state else None
        batch_loss, batch_count = token_loss(logits, batch.targets)
        loss_sum += batch_loss
        count += int(batch_count)
        if progress is not None:
            progress.update(1)
    model.train(was_training)
    return {"loss_sum": float(loss_sum), "tokens": count}
