"""The options of a search (`seqlab.decoding.search`) and of its numpy twin (`seqlab.decoding.numpy_search`): how a
token is sampled, how a prompt is continued, how a source is decoded. Plain dataclasses, checked on creation, with
no PyTorch, so that the ONNX runtime's searches take exactly these.

Every number has a range in which the searches' arithmetic stays finite, and a value outside it is refused (an
`OptionError`, naming the option as its caller does: `--top-p` on the command line, `top_p` in a request):
any positive finite temperature works (`seqlab.decoding.processors.Temperature` divides logits shifted to a
row maximum of 0, without a nan), any top-p in (0, 1] (the most likely token is always kept), any top-k (one at
least the vocabulary keeps it all); the integers that become tensor sizes or int64 values (max_tokens,
max_length, beam, seed) are below 2^63; length_penalty is at most 10 (length^alpha stays finite in float64 for
every length below 2^63)."""

from __future__ import annotations

from dataclasses import dataclass

from seqlab.config import OptionError, check_fields, option, option_error

INT64 = 2**63                                 # the integers that become tensor sizes or int64 values stay below


@dataclass
class Sampling:
    """How a sampled token is drawn: the options that language-model generation (`SamplingOptions`) and
    sequence-to-sequence decoding (`SearchOptions`) share."""

    temperature: float = option(1.0, "softmax temperature; below 1 sharpens (towards the most likely token), above 1 "
                                     "flattens (towards uniform)", above=0)
    top_k: int = option(0, "sample among the k most likely tokens (0: all)", at_least=0)
    top_p: float = option(1.0, "sample among the most likely tokens holding probability p (the most likely one is "
                               "always kept)", above=0, at_most=1)
    seed: int | None = option(None, "random seed for reproducible samples", at_least=0, below=INT64)

    def __post_init__(self):
        check_fields(self)

    def samples_differently(self) -> bool:
        """Whether the temperature, top-k or top-p change what is sampled."""
        return self.temperature != 1.0 or self.top_k > 0 or self.top_p < 1.0


@dataclass
class SamplingOptions(Sampling):
    """How to continue a prompt (`seqlab generate` options)."""

    max_tokens: int = option(200, "tokens to generate", at_least=0, below=INT64)
    greedy: bool = option(False, "always take the most likely token")
    stop_at_eos: bool = option(False, "stop at the first </s> (a line end); otherwise go on past line breaks "
                                      "until max_tokens")
    beam: int = option(1, "beam size; 1: sampling (or greedy, with --greedy); above 1: the most likely "
                          "continuation found by beam search", at_least=1, below=INT64)
    length_penalty: float = option(1.0, "beam search: rank hypotheses by log p / length^alpha (0: raw log p)",
                                   at_least=0, at_most=10)

    def __post_init__(self):
        check_fields(self)
        if self.beam > 1 and (self.samples_differently() or self.seed is not None or self.greedy):
            raise option_error(SamplingOptions, f"{{beam}} {self.beam} searches for the most likely continuation and "
                               "samples nothing: drop {greedy}, {temperature}, {top_k}, {top_p} and {seed}, or use "
                               "{beam} 1", "beam", "greedy", "temperature", "top_k", "top_p", "seed")
        if self.beam == 1 and self.length_penalty != 1.0:
            raise option_error(SamplingOptions, "{length_penalty} ranks the hypotheses of beam search: add {beam} K "
                               "(K > 1), or drop it", "length_penalty", "beam")


@dataclass
class SearchOptions(Sampling):
    """How to decode (`seqlab translate` / `summarize` options; the sampling ones are `Sampling`'s)."""

    beam: int = option(1, "beam size; 1: greedy (or sampling, with sample=True)", at_least=1, below=INT64)
    max_length: int = option(0, "most output tokens, </s> included (0: 2 x the source length + 10, within the "
                             "model's limit)", at_least=0, below=INT64)
    length_penalty: float = option(1.0, "rank beam hypotheses by log p / length^alpha (0: raw log p)", at_least=0,
                                   at_most=10)
    length_cap: int = option(0, "with max_length 0, the most output tokens the rule (2 x the source length + 10) may "
                             "give (0: no cap; seqlab serve's --max-length)", at_least=0, below=INT64)
    sample: bool = option(False, "sample each token (with beam 1)")
    nbest: int = option(1, "beam search: hypotheses returned per sentence", at_least=1, below=INT64)

    def __post_init__(self):
        check_fields(self)
        if self.sample and self.beam > 1:
            raise option_error(SearchOptions, "sampling draws one output per sentence; use {beam} 1 with {sample}",
                               "beam", "sample")
        if self.nbest > self.beam:
            raise option_error(SearchOptions, f"{{nbest}} must be between 1 and {{beam}} ({self.beam}), got "
                               f"{self.nbest}", "nbest", "beam")


def prompt_too_long(length: int, window: int) -> OptionError:
    """The refusal of a prompt of `length` ids (with the leading </s>) over a model's context of `window`: the
    command line's also names --truncate-prompt, which keeps the prompt's end; a request has no such field."""
    return OptionError(f"the prompt is {length} tokens (with the leading </s>), longer than the model's context of "
                       f"{window} tokens; shorten it{{prompt}}", {"prompt": " or keep its end (--truncate-prompt)"},
                       api={"prompt": ""})
