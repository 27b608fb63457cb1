"""Contextual string embeddings (Akbik et al. 2018, "Contextual String Embeddings for Sequence Labeling",
the idea behind Flair): each word of a sentence represented by the hidden states of character language
models run over the whole sentence.

The sentence is read as one string of characters, its words joined by single spaces, with a space
(a boundary) before the first word and after the last (Akbik et al. 2018, sec. 2.2):

    text  = " " + " ".join(words) + " "         e.g. " The cat "
    forward LM reads   </s>  ␣ T h e ␣ c a t ␣                  (left to right)
    backward LM reads  </s>  ␣ t a c ␣ e h T ␣                  (right to left: `seqlab train lm --reverse`)

    w_i = [ h^f(after the last character of word i) ; h^b(after its first character, read reversed) ]

so h^f has read the sentence up to and including the word, h^b the sentence from its end back to and
including the word's first character (eq. 2 of the paper). The states are those entering each LM's
output layer (`forward(tokens, state, output="hidden")`), so any seqlab LM architecture works; `</s>`
(what a seqlab LM sees at every line start) comes first. A character the LM never saw reads as its
`<unk>`.

The LMs are frozen: `train()` keeps them in eval mode (no dropout) and their parameters take no
gradient, so a sentence's features never change during training and the task computes them once
(`embed`) and caches them (`seqlab.families.tagger.task`).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from seqlab.data.vocab import EOS, PAD, UNK, Vocab
from seqlab.errors import SeqlabError

# The tasks keep LM features in half precision: CoNLL-2003's 204k training tokens with two 512-wide LMs take
# 204,567 x 1,024 x 2 bytes = 0.42 GB. Prediction rounds them the same way, so it sees what training saw.
LM_FEATURE_DTYPE = torch.float16


def sentence_text(words: list[str]) -> str:
    """The string the character LMs read for a sentence: a space, the words joined by single spaces,
    a space (Akbik et al. 2018, sec. 2.2)."""
    return " " + " ".join(words) + " "


def word_positions(words: list[str]) -> tuple[list[int], list[int]]:
    """Where to read each word's states, as indices into the LM inputs `[</s>, *characters]`.

    forward:  after the word's last character, text[end]  -> input index end + 1;
    backward: after the word's first character text[start] read reversed, where the reversed text of n
              characters holds text[k] at n - 1 - k                  -> input index n - start."""
    n = len(sentence_text(words))
    forward, backward = [], []
    start = 1                                             # text[0] is the leading space
    for word in words:
        end = start + len(word) - 1
        forward.append(end + 1)
        backward.append(n - start)
        start = end + 2                                   # past the word and the space after it
    return forward, backward


def check_width(lm_features: ContextualStringEmbeddings | None, expected: int, model: str) -> None:
    """A tagger's or classifier's `lm_feature_size` (0: none) against the LMs it is given."""
    width = lm_features.output_size if lm_features is not None else 0
    if width != expected:
        raise SeqlabError(f"the {model} expects {expected}-wide LM features; the language models given give {width}")


class ContextualStringEmbeddings(nn.Module):
    """A forward character LM and optionally a backward one (frozen) -> one vector per word.

    `vocabs` are the LMs' character vocabularies; `embed(sentences)` gives each sentence's (n, F)
    features, F = the forward LM's state width (+ the backward one's)."""

    def __init__(self, forward_lm: nn.Module, forward_vocab: Vocab, backward_lm: nn.Module | None = None,
                 backward_vocab: Vocab | None = None):
        super().__init__()
        self.forward_lm, self.backward_lm = forward_lm, backward_lm
        self.vocabs = [forward_vocab] + ([backward_vocab] if backward_lm is not None else [])
        for p in self.parameters():
            p.requires_grad_(False)
        self.train(False)
        self.widths = [self._width(lm) for lm in self.lms]

    def train(self, mode: bool = True):
        """The LMs stay in eval mode (frozen: no dropout), whatever the tagger around them is doing."""
        return super().train(False)

    @property
    def lms(self) -> list[nn.Module]:
        return [self.forward_lm] + ([self.backward_lm] if self.backward_lm is not None else [])

    @property
    def output_size(self) -> int:
        return sum(self.widths)

    @staticmethod
    @torch.no_grad()
    def _width(lm) -> int:
        """The width D of the states entering the LM's output layer (one step over `</s>` to see it)."""
        device = next(lm.parameters()).device
        h, _ = lm(torch.tensor([[EOS]], device=device), None, output="hidden")          # (1, 1, D)
        return h.size(-1)

    @torch.no_grad()
    def states(self, lm: nn.Module, vocab: Vocab, texts: list[str]) -> Tensor:
        """Run one LM over `[</s>, *characters]` of each text (right-padded; the LM is causal, so padding
        after a text never changes its states) -> hidden states (B, N + 1, D)."""
        context = getattr(lm, "context_length", None)
        longest = max(len(t) for t in texts) + 1
        if context is not None and longest > context:
            raise SeqlabError(f"a sentence of {longest - 1} characters is longer than the {context}-character "
                              "context of the --lm-features language model; use a recurrent LM (lstm, gru, rnn)")
        device = next(lm.parameters()).device
        index = vocab.index
        ids = torch.full((len(texts), longest), PAD, dtype=torch.long)
        for b, text in enumerate(texts):
            row = [EOS] + [index.get(c, UNK) for c in text]
            ids[b, :len(row)] = torch.tensor(row)
        h, _ = lm(ids.to(device), None, output="hidden")  # (B, N + 1, D)
        return h.float()

    @torch.no_grad()
    def embed(self, sentences: list[list[str]], batch_size: int = 32) -> list[Tensor]:
        """Each sentence's word features (n, F): [h^f at each word's end ; h^b at its start] (Akbik et al.
        2018, eq. 2), computed in batches of sentences of similar length; an empty sentence gets (0, F)."""
        results: list[Tensor] = [torch.zeros(0, self.output_size) for _ in sentences]
        order = sorted((i for i in range(len(sentences)) if sentences[i]), key=lambda i: len(sentence_text(
            sentences[i])))
        for k in range(0, len(order), batch_size):
            chunk = order[k:k + batch_size]
            texts = [sentence_text(sentences[i]) for i in chunk]
            positions = [word_positions(sentences[i]) for i in chunk]
            h_f = self.states(self.forward_lm, self.vocabs[0], texts).cpu()                  # (B, N + 1, Df)
            h_b = None
            if self.backward_lm is not None:
                h_b = self.states(self.backward_lm, self.vocabs[1], [t[::-1] for t in texts]).cpu()  # (B, N + 1, Db)
            for row, i in enumerate(chunk):
                forward, backward = positions[row]
                parts = [h_f[row, forward]]                                                   # (n, Df)
                if h_b is not None:
                    parts.append(h_b[row, backward])                                          # (n, Db)
                results[i] = torch.cat(parts, dim=-1)                                         # (n, F)
        return results
