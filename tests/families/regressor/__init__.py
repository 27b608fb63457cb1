"""Sequence regression, the fifth family: a text in, a real number out (here, in the tests, the mean of the
digits a text spells), trained with the mean squared error. It lives outside seqlab, under tests/, to prove
that a family is one package and one registration (`seqlab.registry.register`, or the entry-point group
`seqlab.families`) and that nothing in src/seqlab/ has to change for it (tests/test_fifth_family.py).

    config.py     RegressorDataConfig, RegressorModelConfig, RegressorTrainConfig: `seqlab train regressor`
    data.py       the items of a file ("VALUE<TAB>text" lines) and the vocabulary (torch-free)
    model.py      MeanRegressor: pooled embeddings (SLP 6.5) -> one number
    task.py       RegressionTask: the trainer's Task (squared error as (sum, count); mse, mae)
    pipeline.py   Training (its hooks of the one training skeleton), train_regressor, load_regressor, PIPELINE
    trained.py    TrainedRegressor: predict, evaluate_file
    graphs.py     the ONNX graph: words (B, T), lengths (B,) -> values (B,)
    exported.py   ExportedRegressor: the export on onnxruntime (torch-free)
    serve.py      POST /v1/regress
    cli.py        `seqlab regress RUN FILE`, and what `seqlab evaluate` prints
    cards.py      the model card's data: its splits, and the squared error of each item for the intervals
    compare.py    `seqlab compare regressor`'s recipes

This module is the torch-free part (`seqlab.contract.Family`) that the registry lists.
"""

from __future__ import annotations

from seqlab.contract import CardText, Family
from seqlab.metrics import LOSS, Metric, declare

# its figures, declared once with their direction, as seqlab's own families declare theirs
MSE, MAE = declare(Metric("mse", True, "mean squared error"), Metric("mae", True, "mean absolute error"))

FAMILY = Family(
    name="regressor", title="a regressor",
    summary="a text regressor (pooled embeddings -> a number) on 'VALUE<TAB>text' lines",
    unit="texts", splits=(("train", "train"), ("dev", "valid"), ("test", "test")),
    endpoints=("regress",), commands=("regress",), metric="mse", metrics=(LOSS, MSE, MAE),
    evaluate_options=(),
    card=CardText(
        intended="Predicting the number of texts like the training texts (the toy task of seqlab's tests).",
        out_of_scope="Any decision: it is a worked example of the family contract.",
        risks=("Bias: a regressor learns the associations of its training values.",)),
    package=__name__)
