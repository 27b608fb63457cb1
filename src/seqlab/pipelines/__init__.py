"""The end-to-end pipelines, one per task family: read the files, build the vocabularies and the model,
train through the trainer into a run directory, and load a trained model back with its API.

    lm.py          language models: `train_lm`, `load_lm` -> TrainedLM (score, generate)
    tagger.py      sequence labelling: `train_tagger`, `load_tagger` -> TrainedTagger (tag)
    classifier.py  sequence classification: `train_classifier`, `load_classifier` -> TrainedClassifier
    seq2seq.py     sequence to sequence: `train_seq2seq`, `load_seq2seq` -> TrainedSeq2Seq (translate)
    runs.py        what every run directory shares: the lock, config.json, --resume checks, loading
    run_files.py   a run's config.json, tokenizer, vocabulary and label files, read without PyTorch
    outputs.py     the records the APIs return (Prediction, Output), defined without PyTorch

`seqlab.registry` maps each task name to its pipeline.
"""
