"""A regressor's ONNX export on onnxruntime, without PyTorch: `ExportedRegressor.predict(texts)`, as
`TrainedRegressor.predict`."""

from __future__ import annotations

import numpy as np

from regressor import FAMILY
from regressor.data import ids, read_vocab
from seqlab.errors import SeqlabError
from seqlab.export.session import Exported, pad


class ExportedRegressor(Exported):
    family = FAMILY

    def __init__(self, export_dir, threads: int = 0):
        super().__init__(export_dir, threads)
        self.vocab = read_vocab(self.files)
        self.lowercase = bool(self.config["data"]["lowercase"])

    def predict(self, texts: list[str] | str, batch_size: int = 64):
        if isinstance(texts, str):
            return self.predict([texts], batch_size)[0]
        empty = [i for i, t in enumerate(texts) if not t.strip()]
        if empty:
            raise SeqlabError(f"text {empty[0] + 1} of {len(texts)} is empty; there is nothing to regress")
        rows = [ids(self.vocab, text, self.lowercase) for text in texts]
        values: list[float] = []
        for start in range(0, len(rows), batch_size):
            part = rows[start:start + batch_size]
            out = self.run("regressor", {"words": pad(part), "lengths": np.array([len(r) for r in part])})
            values += out["values"].astype(np.float64).tolist()
        return values


RUNTIME = ExportedRegressor
