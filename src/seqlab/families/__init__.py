"""The task families, one package each, holding everything that differs between them: its configuration,
pipeline (read, build, train into a run directory, load), task (loss and metrics), vocabulary, trained and
exported APIs, CLI commands and reports, ONNX graphs, HTTP endpoints, model card data and compare recipes.

    lm/            language models: train_lm, load_lm -> TrainedLM (score, generate)
    tagger/        sequence labelling: train_tagger, load_tagger -> TrainedTagger (tag)
    classifier/    sequence classification: train_classifier, load_classifier -> TrainedClassifier (classify)
    seq2seq/       sequence to sequence: train_seq2seq, load_seq2seq -> TrainedSeq2Seq (translate)

`seqlab.registry` lists the families; the shared capabilities reach each one through it. What a family
declares is `seqlab.contract`; what every run directory shares is `seqlab.runs`.
"""
