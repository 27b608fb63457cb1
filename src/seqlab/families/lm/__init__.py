"""Language modelling (SLP 6.5, 9.2, 13.2, 9.4): the family's package.

    config.py     LMDataConfig, LMTrainOptions, LMTrainConfig: the options of `seqlab train lm`
    vocab.py      the tokenizer and vocabulary files of a run, ids <-> text (torch-free)
    task.py       LanguageModelingTask: segments or windows -> loss as (sum, count), perplexity
    prepare.py    `seqlab prepare lm`: the text into memory-mapped shards; the run's data (--data, or a cache)
    pipeline.py   train_lm, load_lm, PIPELINE
    trained.py    TrainedLM: score, perplexity, generate, stream
    features.py   trained LMs as the contextual string embeddings of a tagger or classifier (--lm-features)
    exported.py   ExportedLM: an ONNX export on onnxruntime (torch-free)
    graphs.py     the ONNX step graphs of each architecture
    hf.py         a transformer LM as a Hugging Face GPT-2 directory
    serve.py      POST /v1/generate and /v1/score
    cli.py        `seqlab generate`, and what `seqlab evaluate` prints
    cards.py      the model card's data: the training text, or the bundled corpus
    compare.py    the recipes of `seqlab compare lm` and its report's samples and pictures

This module is the torch-free part (`seqlab.families.contract.Family`) that `seqlab.registry` lists.
"""

from __future__ import annotations

from seqlab.families.contract import CardText, Family

FAMILY = Family(
    name="lm", title="a language model", summary="a language model (ffn, rnn, lstm, gru, transformer)",
    unit="lines", splits=(("train", "train"), ("valid", "valid"), ("test", "test")),
    endpoints=("generate", "score"), commands=("generate",), metric="perplexity", lower_is_better=True,
    evaluate_options=("--batch-size", "--stride", "--text-column"),
    card=CardText(
        intended="Scoring text (perplexity) and generating continuations in the style and domain of the training "
                 "text, for study, teaching and baselines; a small model trained on one corpus.",
        out_of_scope="Producing facts, advice or text that people will read as true or as written by a person; any "
                     "decision about people; text in other languages or domains than the training text.",
        risks=("Toxic and harmful generation: a language model continues prompts with whatever its training text "
               "held, offensive text included (measure it: `seqlab audit toxicity`).",
               "Bias: it reproduces the stereotypes of its training text and can amplify them (measure it: "
               "`seqlab audit bias`).",
               "Privacy: it can leak phrases of its training data, such as names or numbers, verbatim (measure "
               "it: `seqlab audit memorization`, and `seqlab audit exposure` for a run trained with --canary).",
               "Misuse: generated text can be passed off as written by a person, or used for spam and "
               "misinformation.")),
    exports=("onnx", "hf"), compare_prompt=True, package=__name__, prepares=True)
