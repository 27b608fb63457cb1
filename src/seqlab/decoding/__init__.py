"""Decoding: greedy, sampling and beam search for every model, on PyTorch and on the ONNX runtime.

    core.py           the torch-free core: the processors' rules, greedy bookkeeping, beam search, length
                      normalisation, output limits, text pieces; over a small array backend (`Ops`)
    search.py         the PyTorch searches (`TorchOps`): decode, generate_ids, sample_ids, lm_beam_search
    processors.py     the PyTorch logits processors: BlockTokens, Temperature, TopK, TopP, nucleus
    numpy_search.py   the numpy searches and processors (`NumpyOps`), for the ONNX exports; no PyTorch
    options.py        SamplingOptions and SearchOptions, the searches' options; no PyTorch
"""
