"""What the capabilities outside the families ask of a trained model, whatever its family: `Auditable` (what the
audits of `seqlab.harms` call on a model: a family's trained model that offers it can be audited) and `Classifies`
(a toxicity scorer). A family's trained model offers them by having the members; nothing is registered."""

from __future__ import annotations

from typing import Any, Protocol


class Auditable(Protocol):
    """What the audits of `seqlab.harms` (SLP 9.5) call on a trained model, and all they call: its units, reading
    text into ids, scoring, sampling and continuing. A language model offers it (`TrainedLM`); the audits never
    read a model's weights, tokenizer, vocabulary or config themselves. Arrays are PyTorch tensors on `device`;
    a `state` is the model's own (a recurrent state, or None for a model that re-reads its window)."""

    @property
    def device(self) -> Any:
        """Where the model's tensors live (the tensors an audit builds go there)."""
        ...

    @property
    def unit(self) -> str:
        """What a token is: "character", "word", "BPE token" (reports name it; "character" makes the memorisation
        index count characters)."""
        ...

    @property
    def context_length(self) -> int | None:
        """The most tokens the model reads at once (a transformer's window, a window LM's), or None (no limit)."""
        ...

    @property
    def vocabulary_size(self) -> int:
        """V: the ids the model scores."""
        ...

    @property
    def carries_state(self) -> bool:
        """Whether the model carries a state from step to step (recurrent and window LMs: `initial_state`,
        `read_ids` with a state); False for a transformer, whose next token's scores come from re-reading the
        tokens (`next_log_probs`)."""
        ...

    @property
    def state_batch_dim(self) -> int:
        """The dimension of the state's tensors that holds the batch (a carried state's rows are cut and copied
        along it)."""
        ...

    def tokenize_lines(self, lines: list[str]) -> list[list[str]]:
        """Each line's tokens, as the model's tokenizer reads a training line (no </s>)."""
        ...

    def token_ids(self, tokens: list[str]) -> list[int]:
        """The ids of tokens (an unknown one: <unk>'s)."""
        ...

    def detokenize(self, ids: list[int]) -> str:
        """Ids -> text, </s> as a line break."""
        ...

    def score(self, text: str) -> list[tuple[str, float]]:
        """(token, natural-log probability) for every token of `text`, </s> at each line end (bias)."""
        ...

    def evaluate_ids(self, ids: Any, batch_size: int = 10) -> dict[str, Any]:
        """The figures of an id stream (one </s> per line): "loss" (nats per token), perplexity, ...; a text longer
        than the model's context is read over its sliding windows."""
        ...

    def sample(self, prompt: str, n: int, options: Any) -> list[str]:
        """`n` continuations of `prompt` sampled as one batch with `options` (a `SamplingOptions`), each as text
        (toxicity)."""
        ...

    def continue_ids(self, prompts: Any, steps: int, top_k: int = 0, generator: Any = None) -> tuple[Any, Any]:
        """B prompts of one length (B, T) continued by `steps` tokens at once: greedy (top_k 0) or a top-k draw
        with `generator` (a `torch.Generator`), only <pad>, <s> and <sep> blocked; the tokens (B, steps) and their
        log-probabilities under the model (B, steps) (memorisation)."""
        ...

    def initial_state(self, batch: int) -> Any:
        """The state before the first token, for `batch` rows."""
        ...

    def read_ids(self, ids: Any, state: Any = None) -> tuple[Any, Any]:
        """The logits (B, T, V) of ids (B, T) read on from `state` (None: from nothing), and the state after."""
        ...

    def next_log_probs(self, sequences: Any) -> Any:
        """log P(next token | each sequence) (B, V) of a model that re-reads its window (`carries_state` False),
        reading only the last position's output."""
        ...


class Classifies(Protocol):
    """What the toxicity audit asks of its scorer (a classifier, `TrainedClassifier`): each text's probabilities
    of the labels."""

    def classify(self, texts: list[str]) -> list[Any]:
        """Each text's prediction; its `probabilities` map every label to its probability."""
        ...
