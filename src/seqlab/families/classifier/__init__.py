"""Sequence classification (SLP 4, 6.4-6.5, 13.3.2): sentiment, topics, the family's package.

    config.py     ClassifierDataConfig, ClassifierTrainConfig: the options of `seqlab train classifier`
    model.py      ClassifierConfig and Classifier: features or words -> an encoder, pooling, a feedforward head
    vocab.py      DocumentVocabulary (documents -> ids or features), the run's files, Prediction (torch-free)
    features.py   the hand-built feature vectors of SLP 6.4.1 and their lexicons (torch-free until fitted)
    prepare.py    `seqlab prepare classifier`; the one data path of training: --data DIR, or the files, cached
    encode.py     the documents of a file read and encoded in streaming passes (torch-free, for worker processes)
    task.py       ClassificationTask: documents -> loss as (sum, count), accuracy, macro-F1, confusions
    pipeline.py   train_classifier, load_classifier, PIPELINE
    trained.py    TrainedClassifier: classify, classify_stream, evaluate_file
    exported.py   ExportedClassifier: an ONNX export on onnxruntime (torch-free)
    graphs.py     the ONNX scores graph
    serve.py      POST /v1/classify
    cli.py        `seqlab classify`, and what `seqlab evaluate` prints
    cards.py      the model card's data: documents and their labels; bootstrap items per document
    compare.py    the recipes of `seqlab compare classifier` and its report's confusion matrices
    examples.py   `seqlab examples sentiment`: reviews that word order decides, in twins (torch-free)
    explain.py    what `seqlab explore` shows: classes, prefixes, occlusion, gates, attention, pooling

This module is the torch-free part (`seqlab.contract.Family`) that `seqlab.registry` lists.
"""

from __future__ import annotations

from seqlab.contract import INPUT_OPTIONS, CardText, Family
from seqlab.metrics import ACCURACY, LOSS, MACRO_F1

FAMILY = Family(
    name="classifier", title="a classifier",
    public={"ClassifierConfig": ".model",
            **dict.fromkeys(["ClassifierDataConfig", "ClassifierTrainConfig", "resolve_classifier_config"],
                            ".config"),
            "load_classifier": ".pipeline", "TrainedClassifier": ".trained", "Prediction": ".vocab"},
    summary="a text classifier (features, pooled, rnn, lstm, gru, transformer) on TSV, CSV, JSON lines, "
            "'label text' lines or SST trees",
    unit="documents", splits=(("train", "train"), ("dev", "valid"), ("test", "test")),
    endpoints=("classify",), commands=("classify",), metric="accuracy", metrics=(LOSS, ACCURACY, MACRO_F1),
    evaluate_options=("--format", "--text-column", "--label-column", "--header", "--confusion-png", *INPUT_OPTIONS),
    card=CardText(
        intended="Assigning one of the training labels to documents like the training documents (same "
                 "language, genre and label definitions).",
        out_of_scope="Decisions about people (hiring, moderation, credit, policing) without human review and an "
                     "audit of its errors per group; labels or domains it was not trained on.",
        risks=("Bias: a classifier learns the associations of its labels in the training data; toxicity "
               "and sentiment classifiers are known to flag dialects and identity terms as negative "
               "(SLP 9.5; Sap et al. 2019 on the Davidson data).",
               "Misuse: automated decisions about people based on its labels.",
               "Privacy: training documents may contain personal data.")),
    package=__name__, examples=True, prepares=True, explains=True)
