"""Sequence labelling (SLP 17, 13.3.1): POS tagging and named entities, the family's package.

    conll.py      CoNLL-U and CoNLL-2003 files as labelled sentences, in bounded memory (torch-free)
    config.py     TaggerDataConfig, TaggerTrainConfig: the options of `seqlab train tagger`
    model.py      TaggerConfig and Tagger: embeddings, character features, an encoder, softmax or CRF
    vocab.py      TaggerVocabulary (words, characters, tags -> ids) and the run's files (torch-free)
    task.py       TaggingTask: sentences -> loss as (sum, count), accuracy and entity F1
    prepare.py    `seqlab prepare tagger`: the CoNLL files into memory-mapped items; the run's data (--data, or a cache)
    pipeline.py   train_tagger, load_tagger, PIPELINE
    trained.py    TrainedTagger: tag, tag_sentences, tag_stream, evaluate_file
    exported.py   ExportedTagger: an ONNX export on onnxruntime, Viterbi in numpy (torch-free)
    graphs.py     the ONNX emissions graph (and the CRF's scores)
    serve.py      POST /v1/tag
    cli.py        `seqlab tag`, and what `seqlab evaluate` prints
    cards.py      the model card's data: sentences and their tags; bootstrap items per sentence
    compare.py    the recipes of `seqlab compare tagger` and its report's confusions
    examples.py   `seqlab examples pos` and `ner`: seeded grammars of ambiguous words and names (torch-free)
    explain.py    what `seqlab explore` shows: tags, label scores, the CRF's transitions and Viterbi lattice, gates,
                  attention

This module is the torch-free part (`seqlab.contract.Family`) that `seqlab.registry` lists.
"""

from __future__ import annotations

from seqlab.contract import INPUT_OPTIONS, CardText, Family
from seqlab.metrics import ACCURACY, F1, LOSS, PRECISION, RECALL

FAMILY = Family(
    name="tagger", title="a tagger", summary="a sequence tagger (POS, NER) on CoNLL-U or CoNLL-2003 files",
    public={"TaggerConfig": ".model",
            **dict.fromkeys(["TaggerDataConfig", "TaggerTrainConfig", "resolve_tagger_config"], ".config"),
            "load_tagger": ".pipeline", "TrainedTagger": ".trained"},
    unit="sentences", splits=(("train", "train"), ("dev", "valid"), ("test", "test")),
    endpoints=("tag",), commands=("tag",), metric="accuracy", metrics=(LOSS, ACCURACY, PRECISION, RECALL, F1),
    evaluate_options=("--format", "--confusions", *INPUT_OPTIONS),
    card=CardText(
        intended="Labelling the tokens of sentences like the training sentences (same language, genre and "
                 "tokenisation) with the tag set it was trained on.",
        out_of_scope="Other languages, genres or tokenisations than the training data's without re-evaluation; "
                     "decisions about people based on its labels.",
        risks=("Bias: tagging accuracy is usually lower for dialects, names and genres rare in the training "
               "data, so errors fall unevenly on the people whose language that is.",
               "Errors propagate: downstream systems (entity extraction, search) inherit its mistakes.")),
    arch_option="encoder", package=__name__, examples=True, prepares=True, explains=True)
