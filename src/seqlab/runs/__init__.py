"""Run directories, whatever family they hold, in two layers (docs/hooks/structure.py): below the trainer, what a
run's files say, read without PyTorch; above it, the run directory and the one training skeleton.

    files.py       what a run directory holds besides its weights: config.json checked (`read_run_json`), whether
                   a folder is a seqlab run at all (`not_a_run`), the model card of a loaded model (`FromRun`)
    records.py     what a run's records say: where its checkpoint stands, its final figures, metrics.jsonl and
                   train_log.jsonl read (`read_records`), a figure and a wall time as text
    directory.py   the lock (one writer at a time), config.json and the options resolved into it, the checks of
                   --resume and --overwrite, loading the best weights, `train_in_run`
    skeleton.py    the one training pipeline, over each family's `TrainingHooks` (`train_family`)

The families train and load through these; the shared capabilities (cards, compare, tuning, export, info, the
CLI) read runs through them and never import a family. This file imports nothing, so that importing the run
files (the layer below the trainer) runs nothing above them.
"""
