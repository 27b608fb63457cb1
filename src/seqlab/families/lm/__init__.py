"""Language modelling (SLP 6.5, 9.2, 13.2, 9.4): the family's package.

    config.py     LMDataConfig, LMTrainOptions, LMTrainConfig: the options of `seqlab train lm`
    model.py      LMConfig (the model options) and build_lm: --arch -> a network of seqlab.models
    vocab.py      the tokenizer and vocabulary files of a run, ids <-> text (torch-free)
    task.py       LanguageModelingTask: segments or windows -> loss as (sum, count), perplexity
    prepare.py    `seqlab prepare lm`: the text into memory-mapped shards; the run's data (--data, or a cache)
    pipeline.py   train_lm, load_lm, PIPELINE
    trained.py    TrainedLM: score, perplexity, generate, stream
    stream.py     an evaluation file as batches, read as they are needed (evaluate_file)
    features.py   trained LMs as the contextual string embeddings of a tagger or classifier (--lm-features)
    exported.py   ExportedLM: an ONNX export on onnxruntime (torch-free)
    graphs.py     the ONNX step graphs of each architecture
    hf.py         a transformer LM as a Hugging Face GPT-2 directory
    serve.py      POST /v1/generate and /v1/score, the web page's forms of them, and the batches of every endpoint
    openai.py     OpenAI's POST /v1/completions (and the 404s of its chat completions and embeddings)
    choices.py    the choices of /v1/completions: made on the inference thread, cut at stop strings
    cli.py        `seqlab generate`, and what `seqlab evaluate` prints
    cards.py      the model card's data: the training text, or the bundled corpus
    compare.py    the recipes of `seqlab compare lm` and its report's samples and pictures
    examples.py   `seqlab examples lm`: Tiny Shakespeare cut by lines (torch-free)
    explain.py    `seqlab explore`'s views: next-token probabilities and generation step by step (on exports
                  too), and on PyTorch (inside.py) the recurrent gates and the transformer's attention; views.py
                  builds them from plain numbers (torch-free)

This module is the torch-free part (`seqlab.contract.Family`) that `seqlab.registry` lists.
"""

from __future__ import annotations

from seqlab.contract import CardText, Family
from seqlab.metrics import BITS_PER_CHAR, BITS_PER_TOKEN, LOSS, PERPLEXITY

FAMILY = Family(
    name="lm", title="a language model", summary="a language model (ffn, rnn, lstm, gru, transformer)",
    public={"LMConfig": ".model",
            **dict.fromkeys(["LMDataConfig", "LMTrainConfig", "LMTrainOptions", "resolve_lm_config"], ".config"),
            "load_lm": ".pipeline", "TrainedLM": ".trained"},
    unit="lines", splits=(("train", "train"), ("valid", "valid"), ("test", "test")),
    endpoints=("generate", "score"), commands=("generate",), metric="perplexity",
    metrics=(LOSS, PERPLEXITY, BITS_PER_TOKEN, BITS_PER_CHAR),
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
    exports=("onnx", "hf"), compare_prompt=True, package=__name__, examples=True, prepares=True, explains=True,
    openai_endpoints=("completions",), openai_refused=("chat/completions", "embeddings"))
