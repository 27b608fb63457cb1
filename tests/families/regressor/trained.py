"""A trained regressor's API (`seqlab.load(run)` of a regressor run): `predict(texts)` gives each text's
number, `evaluate_file(path)` a labelled file's mean squared and absolute errors."""

from __future__ import annotations

import torch

from regressor import FAMILY
from regressor.data import ids, read_items
from regressor.model import batch_tensors
from seqlab.errors import SeqlabError
from seqlab.runs.files import FromRun


class TrainedRegressor(FromRun):
    family = FAMILY

    def __init__(self, model, vocab, config, device):
        self.model, self.vocab, self.config, self.device = model, vocab, config, device

    @torch.no_grad()
    def predict(self, texts: list[str] | str, batch_size: int = 64):
        """Each text's number (one number for one text given as a string)."""
        if isinstance(texts, str):
            return self.predict([texts], batch_size)[0]
        empty = [i for i, t in enumerate(texts) if not t.strip()]
        if empty:
            raise SeqlabError(f"text {empty[0] + 1} of {len(texts)} is empty; there is nothing to regress")
        rows = [ids(self.vocab, text, self.config.data.lowercase) for text in texts]
        values = []
        for start in range(0, len(rows), batch_size):
            words, lengths = batch_tensors(rows[start:start + batch_size])
            values += self.model(words.to(self.device), lengths.to(self.device)).float().tolist()
        return values

    def evaluate_file(self, path, **options) -> dict:
        """The mean squared and absolute errors over a file of 'VALUE<TAB>text' lines."""
        items = read_items(path, "file")
        predicted = self.predict([text for text, _ in items])
        errors = [p - value for p, (_, value) in zip(predicted, items, strict=True)]
        return {"mse": sum(e * e for e in errors) / len(errors), "mae": sum(abs(e) for e in errors) / len(errors),
                "items": len(errors), "errors": errors}
