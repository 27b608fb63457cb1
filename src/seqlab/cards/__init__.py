"""Model cards (Mitchell et al. 2019) and datasheets (Gebru et al. 2018) of trained runs, and the statistics
they report.

    card.py        the card: build, write (MODEL_CARD.md, model_card.json), read; the end of a training session
    markdown.py    the card as Markdown
    data.py        the training data section, each split read by its family's `cards` part; read_units
    splits.py      what a family's `cards` part reads a split into, and the contract's shared answers
    datasheet.py   a file's sheet (identity, size, characters, duplicates) and contamination by train
    intervals.py   bootstrap intervals of an evaluation's figures, the items collected by the family
    bootstrap.py   the percentile bootstrap over per-item summable statistics
"""
