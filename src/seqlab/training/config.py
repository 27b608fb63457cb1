"""How to train, for every family: `TrainConfig`, the train group of every run's config.json (a family adds its
own options in a subclass, as the language models' `LMTrainOptions`), with a one-line help per option."""

from __future__ import annotations

from dataclasses import dataclass

from seqlab.config import check_fields, option
from seqlab.errors import SeqlabError
from seqlab.training import distributed
from seqlab.training.optim import OPTIMIZERS, SCHEDULES
from seqlab.training.output_loss import FUSED_OUTPUT
from seqlab.training.trackers import TRACKERS


@dataclass
class TrainConfig:
    """How to train, for every task (saved in config.json under "train"; a task adds its own options in a
    subclass, as the language models' `LMTrainOptions`)."""

    output: str = option("runs/run", "run directory for the config, vocabulary, checkpoints and metrics")
    epochs: int = option(10, "passes over the training data", at_least=1)
    max_steps: int = option(0, "stop after this many optimizer steps (0: no limit)", at_least=0)
    max_time: float = option(0.0, "a time cap: stop after this many seconds of training, evaluation included, "
                                  "within one evaluation (0: no limit); the schedule follows the steps, never the "
                                  "clock (see --time-schedule)", at_least=0)
    time_schedule: bool = option(False, "with --max-time: fix the schedule's length from it, once: the first "
                                        "steps' and an evaluation's measured times set the step count that fits "
                                        "(seqlab compare's time budget)")
    max_tokens: int = option(0, "a data budget: stop after this many training tokens, what the loss is summed over "
                                "(documents for a classifier; 0: no limit); the cosine schedule decays over it",
                             at_least=0)
    batch_size: int = option(20, "sequences per optimizer step, over all processes", at_least=1)
    eval_batch_size: int = option(10, "parallel streams (or windows) in evaluation", at_least=1)
    optimizer: str = option("adamw", "optimizer (muon: Muon for the hidden matrices, AdamW for embeddings, the "
                            "output layer, biases and gains, at one rate)", choices=OPTIMIZERS)
    lr: float = option(1e-3, "base learning rate", above=0)
    momentum: float = option(0.0, "SGD momentum", at_least=0, below=1)
    weight_decay: float = option(0.0, "weight decay on matrices and embeddings (decoupled for adamw)", at_least=0)
    beta1: float = option(0.9, "Adam beta1 (muon: of the AdamW part)", at_least=0, below=1,
                          when={"optimizer": ("adam", "adamw", "muon")})
    beta2: float = option(0.999, "Adam beta2 (muon: of the AdamW part)", at_least=0, below=1,
                          when={"optimizer": ("adam", "adamw", "muon")})
    schedule: str = option("cosine", "learning-rate schedule", choices=SCHEDULES)
    warmup_steps: int = option(0, "linear warm-up steps", at_least=0)
    lr_decay: float = option(0.25, "step/plateau schedules: multiply the rate by this", above=0, at_most=1,
                             when={"schedule": ("step", "plateau")})
    decay_start: int = option(0, "step schedule: the epoch (1-based) after which decay begins", at_least=0,
                              when={"schedule": ("step",)})
    min_lr: float = option(0.0, "cosine schedule: the final rate", at_least=0, when={"schedule": ("cosine",)})
    grad_clip: float = option(1.0, "clip the gradient norm to this (0: no clipping)", at_least=0)
    accumulate: int = option(1, "micro-batches per optimizer step (gradient accumulation)", at_least=1)
    patience: int = option(0, "early stopping: evaluations without improvement before stopping (0: never)", at_least=0)
    eval_every: int = option(0, "evaluate and checkpoint every N steps (0: at the end of each epoch)", at_least=0)
    evaluations: int = option(0, "evaluate and checkpoint N times over the run, evenly spaced: the interval is the "
                                 "run's step count / N, fixed at its first step (with --max-tokens, the steps the "
                                 "first one's tokens foretell; with --time-schedule, once the count is fixed) (0: "
                                 "by --eval-every)", at_least=0)
    log: list[str] = option([], "experiment trackers the run also writes to: tensorboard (event files in "
                                "RUN/tensorboard), mlflow (a local MLflow store beside the run; see --mlflow-uri)",
                            choices=TRACKERS)
    experiment: str = option("seqlab", "the experiment the trackers file the run under (MLflow's experiment, "
                                       "created on first use; TensorBoard keeps each run in its own folder)")
    mlflow_uri: str = option("", "MLflow tracking store (default: $MLFLOW_TRACKING_URI, else "
                                 "sqlite:///PARENT/mlflow.db with artefacts in PARENT/mlruns, PARENT the run "
                                 "directory's folder)")
    log_every: int = option(50, "steps between training-loss records", at_least=1)
    seed: int = option(1111, "random seed (initialisation, dropout, data order)", at_least=0, below=2**63)
    device: str = option("auto", "auto (CUDA when present), cpu, cuda, cuda:N or mps")
    precision: str = option("auto", "auto (bf16 autocast on CUDA, and on a CPU with bfloat16 kernels (AMX or "
                                    "AVX512-BF16) for a model whose products are large enough to run faster in "
                                    "bf16; fp32 elsewhere: decided when the run starts, printed, kept by --resume), "
                                    "fp32 or bf16", choices=("auto", "fp32", "bf16"))
    compile: bool = option(False, "torch.compile the model")
    fused_output: str = option("auto", "language models and sequence-to-sequence: compute the output layer and its "
                                       "loss together, chunk by chunk, never holding the logits (on), through the "
                                       "logits (off), or as seqlab.nn.fused_output.should_fuse expects to be faster "
                                       "for a batch's rows and the vocabulary (auto); the same loss either way",
                               choices=FUSED_OUTPUT)
    dist_timeout: float = option(distributed.DEFAULT_TIMEOUT, "under torchrun: seconds a process waits for a peer "
                                 "that went silent (stopped, hung, its machine unreachable) or for the others to "
                                 "join, before it ends the job with one line naming that rank; a peer busy alone "
                                 "(rank 0 preparing the data or writing a checkpoint) is not silent",
                                 at_least=1)
    threads: int = option(0, "CPU threads for PyTorch (0: PyTorch's default, split between local processes)",
                          at_least=0)
    progress: bool = option(True, "show a progress bar")
    keep_memory: bool = option(True, "on CPU (glibc), keep freed memory in the process for the next step "
                               "instead of returning it to the system (saves ~15k page faults per step; "
                               "see seqlab.training.memory)")
    card_notes: str = option("", "a Markdown file of your own notes (intended use, data, caveats) copied into "
                                 "the run's model card (MODEL_CARD.md)", file=True)

    def __post_init__(self):
        check_fields(self)
        if self.min_lr > self.lr:
            raise SeqlabError(f"--min-lr {self.min_lr} is above --lr {self.lr}: the cosine schedule decays from "
                              "--lr down to --min-lr")
        if self.time_schedule and not self.max_time:
            raise SeqlabError("--time-schedule fixes the schedule's length from --max-time: give --max-time SECONDS "
                              "too (or leave --time-schedule out: the schedule then follows the steps)")
        if self.momentum and self.optimizer != "sgd":
            raise SeqlabError(f"--momentum is for --optimizer sgd; {self.optimizer} has --beta1 and --beta2")
