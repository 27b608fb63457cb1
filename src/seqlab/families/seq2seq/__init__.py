"""Sequence to sequence (SLP 13.7-13.8, 9.4): translation and summarisation, the family's package.

    config.py     Seq2SeqDataConfig, Seq2SeqTrainConfig: the options of `seqlab train seq2seq`
    model.py      Seq2SeqConfig and build_model: --arch -> an encoder-decoder or separator LM of seqlab.models
    vocab.py      PairVocabulary (pairs -> ids, the length limits), the run's files, Output (torch-free)
    task.py       Seq2SeqTask: pairs -> loss as (sum, count), perplexity; the dev pairs decoded at each evaluation
    task_metric.py  BLEU, chrF, ROUGE of those outputs from summable statistics (--eval-decode)
    text_checks.py  the warnings about the training text: much of it <unk>, or raw text read as words
    parallel.py   aligned files and files of pairs (TSV, CSV, JSON lines) read as pairs (torch-free)
    sources.py    the pairs of a split, streamed: aligned files, a file of pairs (TSV, JSON lines) or Parquet
    prepare.py    `seqlab prepare seq2seq`: the pairs into memory-mapped items; the run's data (--data, or a cache)
    prepared_pairs.py  a prepared split's pairs read back: the training batches by position, dev/test in memory
    pipeline.py   train_seq2seq, load_seq2seq, PIPELINE
    outputs.py    pairs as ids -> decoded outputs (the batched searches), for TrainedSeq2Seq and the task
    trained.py    TrainedSeq2Seq: translate, generate, generate_stream, evaluate_files (BLEU, chrF, ROUGE)
    exported.py   ExportedSeq2Seq: an ONNX export on onnxruntime, decoded by the numpy searches (torch-free)
    graphs.py     the ONNX encoder and decoder-step graphs of each architecture
    serve.py      POST /v1/translate and /v1/summarize
    cli.py        `seqlab translate`, `seqlab summarize`, and what `seqlab evaluate` prints
    cards.py      the model card's data: source and target sides; bootstrap items per pair
    compare.py    the recipes of `seqlab compare seq2seq` and its report's translations
    examples.py   `seqlab examples translation` and `summarization`: seeded grammars (torch-free)
    explain.py    what `seqlab explore` shows: the beam's tree, the alignment, attention per head, gates, copy, coverage

This module is the torch-free part (`seqlab.contract.Family`) that `seqlab.registry` lists.
"""

from __future__ import annotations

from seqlab.contract import INPUT_OPTIONS, SEARCH_OPTIONS, CardText, Family
from seqlab.metrics import (
    BLEU,
    CHRF,
    GREEDY_BLEU,
    GREEDY_CHRF,
    GREEDY_ROUGE1,
    GREEDY_ROUGE2,
    GREEDY_ROUGEL,
    LOSS,
    PERPLEXITY,
    ROUGE1,
    ROUGE2,
    ROUGEL,
)

FAMILY = Family(
    name="seq2seq", title="a sequence-to-sequence model",
    public={"Seq2SeqConfig": ".model",
            **dict.fromkeys(["Seq2SeqDataConfig", "Seq2SeqTrainConfig", "resolve_seq2seq_config"], ".config"),
            "load_seq2seq": ".pipeline", "TrainedSeq2Seq": ".trained"},
    summary="a sequence-to-sequence model (rnn, lstm, gru encoder-decoders with or without attention, "
            "transformer, or a decoder-only lm over source <sep> target) on aligned files or a file of pairs",
    unit="pairs", splits=(("train", "train"), ("dev", "valid"), ("test", "test")),
    endpoints=("translate", "summarize"), commands=("translate", "summarize"), metric="perplexity",
    metrics=(LOSS, PERPLEXITY, BLEU, CHRF, ROUGE1, ROUGE2, ROUGEL, GREEDY_BLEU, GREEDY_CHRF, GREEDY_ROUGE1,
             GREEDY_ROUGE2, GREEDY_ROUGEL),
    evaluate_options=("--src", "--tgt", "--bleu-tokenize", "--hypotheses", *SEARCH_OPTIONS, "--format", "--batch-size",
                      *INPUT_OPTIONS),
    card=CardText(
        intended="Transforming sources like the training sources (translation or summarisation, as the training "
                 "pairs define it) for study, teaching and baselines.",
        out_of_scope="Translating or summarising text whose meaning matters (medical, legal, safety) without a "
                     "person checking the output; other language pairs or domains than the training pairs'.",
        risks=("Hallucination: outputs can be fluent and wrong, adding or dropping content.",
               "Bias: translation can impose stereotypes (e.g. gendered occupations) absent from the source.",
               "Privacy: outputs can reproduce phrases of the training targets verbatim.")),
    package=__name__, examples=True, prepares=True, explains=True)
