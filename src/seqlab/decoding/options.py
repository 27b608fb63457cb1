"""The options of a search (`seqlab.decoding.search`) and of its numpy twin (`seqlab.decoding.numpy_search`): how a
token is sampled, how a prompt is continued, how a source is decoded. Plain dataclasses, checked on creation, with
no PyTorch, so that the ONNX runtime's searches take exactly these."""

from __future__ import annotations

from dataclasses import dataclass

from seqlab.config import check_fields, option
from seqlab.errors import SeqlabError


@dataclass
class Sampling:
    """How a sampled token is drawn: the options that language-model generation (`SamplingOptions`) and
    sequence-to-sequence decoding (`SearchOptions`) share."""

    temperature: float = option(1.0, "softmax temperature; below 1 sharpens, above 1 flattens", above=0)
    top_k: int = option(0, "sample among the k most likely tokens (0: all)", at_least=0)
    top_p: float = option(1.0, "sample among the most likely tokens holding probability p", above=0, at_most=1)
    seed: int | None = option(None, "random seed for reproducible samples", at_least=0, below=2**63)

    def __post_init__(self):
        check_fields(self)

    def samples_differently(self) -> bool:
        """Whether the temperature, top-k or top-p change what is sampled."""
        return self.temperature != 1.0 or self.top_k > 0 or self.top_p < 1.0


@dataclass
class SamplingOptions(Sampling):
    """How to continue a prompt (`seqlab generate` options)."""

    max_tokens: int = option(200, "tokens to generate", at_least=0)
    greedy: bool = option(False, "always take the most likely token")
    stop_at_eos: bool = option(False, "stop at the first </s> (a line end); otherwise go on past line breaks "
                                      "until max_tokens")
    beam: int = option(1, "beam size; 1: sampling (or greedy, with --greedy); above 1: the most likely "
                          "continuation found by beam search", at_least=1)
    length_penalty: float = option(1.0, "beam search: rank hypotheses by log p / length^alpha (0: raw log p)",
                                   at_least=0)

    def __post_init__(self):
        check_fields(self)
        if self.beam > 1 and (self.samples_differently() or self.seed is not None or self.greedy):
            raise SeqlabError(f"--beam {self.beam} searches for the most likely continuation and samples nothing: "
                              "drop --greedy, --temperature, --top-k, --top-p and --seed, or use --beam 1")
        if self.beam == 1 and self.length_penalty != 1.0:
            raise SeqlabError("--length-penalty ranks the hypotheses of beam search: add --beam K (K > 1), or drop it")


@dataclass
class SearchOptions(Sampling):
    """How to decode (`seqlab translate` / `summarize` options; the sampling ones are `Sampling`'s)."""

    beam: int = option(1, "beam size; 1: greedy (or sampling, with sample=True)", at_least=1)
    max_length: int = option(0, "most output tokens, </s> included (0: 2 x the source length + 10, within the "
                             "model's limit)", at_least=0)
    length_penalty: float = option(1.0, "rank beam hypotheses by log p / length^alpha (0: raw log p)", at_least=0)
    sample: bool = option(False, "sample each token (with beam 1)")
    nbest: int = option(1, "beam search: hypotheses returned per sentence", at_least=1)

    def __post_init__(self):
        check_fields(self)
        if self.sample and self.beam > 1:
            raise SeqlabError("sampling draws one output per sentence; use --beam 1 with --sample")
        if self.nbest > self.beam:
            raise SeqlabError(f"--nbest must be between 1 and --beam ({self.beam}), got {self.nbest}")
