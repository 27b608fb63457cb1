"""One training loop for every task; optimizers, schedules, checkpoints, distributed helpers."""
