"""One training loop for every task (minGPT's trainer that knows nothing about any one model).

The trainer relies on two contracts and nothing else: the task's (`seqlab.training.task.Task`) and the
model's (`seqlab.models.base.Model`). The loop asks the task for global batches, keeps this process's
rows (DDP), lets the task compute the loss as (sum, count), and divides once by the task's count for
the whole step, so padding, gradient accumulation and data parallelism leave the gradient exactly
that of one big batch. Models that carry a state
across segments (truncated BPTT) get it from the task at each epoch start and detach it after each
step. Every evaluation appends a line to metrics.jsonl and writes the last checkpoint; an
improvement also writes model.safetensors (the best weights). `resume=True` restores everything
from checkpoint.safetensors, so the resumed run continues exactly as an uninterrupted one would.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from seqlab.errors import SeqlabError
from seqlab.fileio import append_line, atomic_write_text
from seqlab.metrics import lower_is_better
from seqlab.models.base import Model
from seqlab.progress import progress_bar, startup_seconds, tqdm  # tqdm: without the widget warning in a notebook
from seqlab.runs.records import final_figures, finished_run, record_step
from seqlab.training import devices, distributed, flops
from seqlab.training.checkpoint import (
    load_model,
    load_model_tensors,
    load_tensors,
    model_tensors,
    optimizer_from_tensors,
    optimizer_to_tensors,
    save_model,
    save_tensors,
)
from seqlab.training.config import TrainConfig
from seqlab.training.devices import (
    autocast,
    check_precision,
    describe_precision,
    resolve_precision,
)
from seqlab.training.memory import keep_freed_memory
from seqlab.training.optim import Schedule, make_optimizer, set_lr
from seqlab.training.plots import plot_curves
from seqlab.training.task import Task
from seqlab.training.trackers import Trackers, open_trackers


def say(line: str) -> None:
    """A line of the run's story on stdout (evaluations, notices), flushed at once so that it keeps its place among
    the progress lines of stderr when both go to one log."""
    tqdm.write(line)
    sys.stdout.flush()


PROBE_STEPS = 20        # --time-schedule: the steps timed (from the 4th: the first ones warm up) to fix the schedule


@dataclass
class Position:
    """Where training is: what the next step will do, and the early-stopping bookkeeping."""

    epoch: int = 0
    batch: int = 0            # next global batch of this epoch
    step: int = 0             # optimizer steps taken
    tokens: int = 0           # training tokens seen
    best: float | None = None
    best_step: int = 0        # the step of the best weights (model.safetensors)
    bad_evals: int = 0
    elapsed: float = 0.0      # training seconds before this process started
    startup: float = 0.0      # start-up seconds (command start to first step) of the sessions before this one


class Trainer:
    def __init__(self, task: Task, model: Model, config: TrainConfig, run_dir: str | Path,
                 device: torch.device, callback: Callable[[dict], None] | None = None):
        self.task, self.model, self.config = task, model, config
        self.run_dir, self.device, self.callback = Path(run_dir), device, callback
        self.rank, self.world, _ = distributed.world()
        check_precision(device, config.precision)
        if config.batch_size % self.world:
            raise SeqlabError(f"--batch-size {config.batch_size} must be divisible by the number of "
                              f"processes ({self.world})")
        self.rows = config.batch_size // self.world
        self.my_rows = slice(self.rank * self.rows, (self.rank + 1) * self.rows)
        per_rank = math.ceil(config.eval_batch_size / self.world)
        self.my_eval_rows = slice(self.rank * per_rank, (self.rank + 1) * per_rank)
        self.optimizer = make_optimizer(model, config.optimizer, config.lr, config.weight_decay,
                                        config.momentum, (config.beta1, config.beta2))
        self.steps_per_epoch = len(task.train_batches(0)) // config.accumulate
        if self.steps_per_epoch < 1:
            raise SeqlabError(f"the training data is too small for one step of --batch-size "
                              f"{config.batch_size} x {task.batch_unit} (x --accumulate "
                              f"{config.accumulate}); lower them or add data")
        self.total_steps = config.max_steps or self.steps_per_epoch * config.epochs
        if config.max_steps:
            self.total_steps = min(config.max_steps, self.steps_per_epoch * config.epochs)
        self.schedule = Schedule(config.schedule, config.lr, self.total_steps, config.warmup_steps,
                                 config.lr_decay, config.decay_start, config.min_lr)
        self.position = Position()
        self.time_schedule: dict | None = None         # --time-schedule: the step count fixed and what it rests on
        if config.evaluations and config.eval_every:
            raise SeqlabError(f"give --eval-every {config.eval_every} or --evaluations {config.evaluations}, not both")
        self.eval_interval: int | None = None           # --evaluations: steps between evaluations, once fixed
        self._eval_seconds = 0.0                       # the last validation evaluation's time (the cap's margin)
        self._capped = False                           # a --max-time / --max-tokens cap stopped training
        self._evals_seconds = 0.0                      # all of this session's evaluations' time
        self._best_eval: tuple[int, dict] | None = None   # (step, figures) of the best weights, evaluated here
        self.state = None
        self.precision: str | None = None              # what the run computes in (fp32, bf16): fixed when it starts
        self.precision_why = ""
        self._precision_kept = False                   # --resume under auto: the precision the run started with
        self._probed: tuple[int, int, list] | None = None   # `_probe`'s figures, once a session
        self.is_main = self.rank == 0
        self.trackers = Trackers()                     # --log: opened by fit (seqlab.training.trackers)
        if self.is_main:
            self.run_dir.mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------ the loop

    def fit(self, resume: bool = False) -> dict:
        """Train to `max_steps` / `epochs` (or early stopping); return the best weights' figures."""
        cfg, pos = self.config, self.position
        if resume:
            finished = distributed.broadcast_object(finished_run(self.run_dir, cfg) if self.is_main else None)
            if finished is not None:          # nothing to train, and its final records are written: touch nothing
                if self.is_main:
                    say(finished)
                return distributed.broadcast_object(final_figures(self.run_dir) if self.is_main else None)
            self._restore()
            if self.is_main:
                say(f"resuming from step {pos.step:,} (of {self.total_steps:,}), epoch "
                    f"{min(pos.epoch + 1, cfg.epochs)} of {cfg.epochs}")
        if self.precision is None:
            self._resolve_precision()
        if self.is_main:
            say(f"precision: {describe_precision(self.precision, self.precision_why)}"
                f"{', kept from the start of the run' if self._precision_kept else ''}")
        train_model = self._wrap(self.model)
        self.trackers = open_trackers(cfg, self.run_dir, resume, pos.step, self.is_main)
        bar = progress_bar(None, cfg.progress and self.is_main, total=self.total_steps, initial=pos.step,
                           desc="training", unit="step", dynamic_ncols=True, mininterval=0.5)
        self._utilisation = self._measure_utilisation() if pos.step < self.total_steps else None
        self._start = self._mark_time = time.time()
        self._startup = startup_seconds(self._start)                # this session's: the command's start to here
        self._spent = self._tokens_spent()                          # of a token budget, by an earlier session
        self._probe_start = None                                     # --time-schedule: when the timed steps began
        self._mark_tokens = pos.tokens
        self._window = [torch.zeros((), device=self.device), 0]      # loss sum, tokens since the last log
        self._since_eval = [0.0, 0]                                  # the same since the last evaluation
        self._finite = torch.ones((), dtype=torch.bool, device=self.device)   # every loss and norm so far
        self._last_eval: tuple[int, dict] | None = None              # (step, figures) if they were the best
        self.task.progress = None if cfg.progress and self.is_main else False
        stop = pos.step >= self.total_steps or bool(cfg.patience and pos.bad_evals >= cfg.patience)
        self.model.train()
        if cfg.keep_memory and self.device.type == "cpu":
            keep_freed_memory()
        with self.trackers:                # closed however training ends (an error marks the MLflow run failed)
            try:
                self._capped = not stop and self._budget_spent() >= 1
                stop = stop or self._capped
                while not stop and pos.epoch < cfg.epochs:
                    stop = self._run_epoch(train_model, bar)
            finally:
                bar.close()
            if self._capped and self.is_main:
                say(self._cap_message())
            return self._finish()

    def _run_epoch(self, train_model: torch.nn.Module, bar) -> bool:
        """Steps to the end of the current epoch, the last step or early stopping; True to stop training."""
        cfg, task, pos = self.config, self.task, self.position
        batches = task.train_batches(pos.epoch)
        if pos.batch == 0 or self.state is None:
            self.state = task.initial_state(self.model, self.rows, self.device)
        steps_in_epoch = len(batches) // cfg.accumulate
        while True:
            group = [batches[pos.batch + j] for j in range(cfg.accumulate)]
            lr = self._optimizer_step(train_model, group)
            bar.update(1)
            if self.config.time_schedule and self.config.max_time and self.time_schedule is None:
                self._fix_schedule(bar)
            if self.config.evaluations and self.eval_interval is None:
                self._fix_eval_interval()
            self._spent = self._tokens_spent()
            self._capped = pos.step < self.total_steps and self._budget_spent() >= 1
            stop = pos.step >= self.total_steps or self._capped
            if pos.step % cfg.log_every == 0 or stop:
                bar.set_postfix(self._log(lr))
            at_epoch_end = pos.batch // cfg.accumulate >= steps_in_epoch
            if at_epoch_end:
                pos.epoch, pos.batch = pos.epoch + 1, 0
            every = self._eval_every()
            periodic = every and pos.step % every == 0
            if stop or periodic or (at_epoch_end and not every):
                stop = self._evaluate_and_save() or stop
            if stop or at_epoch_end:
                return stop

    def _eval_every(self) -> int:
        """Steps between periodic evaluations (0: at the end of each epoch): --eval-every, or the interval
        --evaluations fixed (none yet: at epoch ends)."""
        return (self.eval_interval or 0) if self.config.evaluations else self.config.eval_every

    def _fix_eval_interval(self) -> None:
        """--evaluations N: the interval ceil(steps / N), fixed once the run's step count is known: at the first
        step from --epochs / --max-steps; under --max-tokens from the tokens the steps so far took (the steps
        the budget holds at that rate, when fewer); under --time-schedule, once the count is fixed. Kept in the
        checkpoint, so that a resumed run evaluates at the same steps."""
        cfg, pos = self.config, self.position
        if cfg.time_schedule and cfg.max_time and self.time_schedule is None:
            return
        steps = self.total_steps
        if cfg.max_tokens and pos.tokens:
            steps = min(steps, math.ceil(cfg.max_tokens * pos.step / pos.tokens))
        self.eval_interval = max(1, math.ceil(steps / cfg.evaluations))

    def _tokens_spent(self) -> float:
        """The share of the --max-tokens budget spent (0 without one): the cosine schedule's progress when it
        runs ahead of the steps'. Never the clock's: a time cap stops the run, it does not bend the schedule."""
        return self.position.tokens / self.config.max_tokens if self.config.max_tokens else 0.0

    def _budget_spent(self) -> float:
        """The share of the --max-time / --max-tokens budget spent (the larger of the two; 0 with neither), the
        same on every process (their mean under DDP), so that all stop at the same step. The time counts what
        stopping now still costs, the last evaluation's time for the evaluation at the stop and as much again
        for the test data's, so that the run ends within one evaluation of the cap."""
        shares = self._budget_shares()
        if not shares:
            return 0.0
        if self.world > 1:
            return distributed.all_reduce_sum([max(shares.values())], self.device)[0] / self.world
        return max(shares.values())

    def _budget_shares(self) -> dict[str, float]:
        """{the cap ("--max-time 60 s"): the share of it this process has spent}, for the caps the run has."""
        cfg, pos = self.config, self.position
        ending = self._eval_seconds * (2 if self.task.test_data is not None else 1)
        shares = {}
        if cfg.max_time:
            shares[f"--max-time {cfg.max_time:g} s"] = (pos.elapsed + time.time() - self._start + ending) / cfg.max_time
        if cfg.max_tokens:
            shares[f"--max-tokens {cfg.max_tokens:,}"] = pos.tokens / cfg.max_tokens
        return shares

    def _cap_message(self) -> str:
        """The line that says a time or token cap stopped training before its steps were done, whatever the
        progress mode (a bar that stops short says nothing in a log)."""
        cfg, pos = self.config, self.position
        shares = self._budget_shares()
        caps = [cap for cap, share in shares.items() if share >= 1] or [max(shares, key=shares.get)]
        epoch = pos.epoch if pos.batch == 0 else pos.epoch + 1          # the epoch of the last step
        return (f"{' and '.join(caps)} reached: training stopped at step {pos.step:,} of {self.total_steps:,} "
                f"(epoch {epoch} of {cfg.epochs}), the best weights so far kept; --resume with a higher "
                f"{' and '.join(cap.split()[0] for cap in caps)} trains on")

    def _fix_schedule(self, bar) -> None:
        """--time-schedule: once PROBE_STEPS steps are done (timed from the 4th of this session: the first ones
        warm up; the evaluations among them not counted), time one evaluation and fix the step count whose steps
        and evaluations fit in what is left of --max-time (the evaluation at the stop and the test data's
        included); from then on the schedule follows those steps like any other, and the cap still stops the
        run. Measured once, on the main process (the others take its figures), said in the log, kept in the
        checkpoint (a resumed run keeps the count) and in the model card."""
        cfg, pos = self.config, self.position
        if self._probe_start is None:
            if pos.step >= 3:
                self._probe_start = (time.time(), pos.step, self._evals_seconds)
            return
        started, first, evaluating = self._probe_start
        if pos.step - first < PROBE_STEPS - 3 or pos.step >= self.total_steps:
            return
        per_step = (time.time() - started - (self._evals_seconds - evaluating)) / (pos.step - first)
        began = time.time()
        self.evaluate(self.task.valid_data)
        per_eval = time.time() - began
        left = cfg.max_time - (pos.elapsed + time.time() - self._start)
        interval = cfg.eval_every or (math.ceil(self.total_steps / cfg.evaluations) if cfg.evaluations else 0) \
            or self.steps_per_epoch
        test = per_eval if self.task.test_data is not None else 0.0

        def cost(more: int) -> float:         # `more` steps, the evaluations due from this step on, the stop's
            last = pos.step + more
            evaluations = last // interval - (pos.step - 1) // interval + (last % interval != 0)
            return more * per_step + evaluations * per_eval + test

        more = max(0, math.floor(left / (per_step + per_eval / interval))) + interval
        while more > 0 and cost(more) > left:
            more -= 1
        fixed = {"total_steps": min(self.total_steps, pos.step + more), "seconds_per_step": round(per_step, 4),
                 "seconds_per_evaluation": round(per_eval, 3), "max_time": cfg.max_time, "at_step": pos.step}
        self._set_time_schedule(distributed.broadcast_object(fixed if self.is_main else None))
        bar.total = self.total_steps
        bar.refresh()
        if self.is_main:
            say(f"--time-schedule: the schedule fixed at {self.total_steps:,} steps, what fits in --max-time "
                       f"{cfg.max_time:g} s at {per_step:.3f} s a step (steps {first + 1}-{pos.step}) and "
                       f"{per_eval:.1f} s an evaluation, measured once; the cap still stops the run")

    def _set_time_schedule(self, fixed: dict) -> None:
        self.time_schedule = fixed
        self.total_steps = fixed["total_steps"]
        self.schedule.total_steps = max(1, self.total_steps)

    def _wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """The module the loop calls: DDP around the model under torchrun, compiled on request."""
        if self.world > 1:
            from torch.nn.parallel import DistributedDataParallel

            ids = [self.device.index] if self.device.type == "cuda" else None
            model = DistributedDataParallel(model, device_ids=ids)
        return torch.compile(model) if self.config.compile else model

    def _optimizer_step(self, train_model: torch.nn.Module, group: list) -> float:
        """One optimizer step over `accumulate` global batches (this process's rows of each).

        Each micro-batch's loss sum is divided by the task's count for the whole global step (what the
        losses are summed over: `Task.count`, added over micro-batches and processes); DDP averages
        gradients over processes, hence the factor `world`. Returns the learning rate used.
        """
        cfg, pos = self.config, self.position
        rows = [batch.rows(self.my_rows.start, self.my_rows.stop) for batch in group]
        row_counts = [self.task.count(batch) for batch in rows]
        counts = sum(row_counts)
        total = distributed.all_reduce_sum([float(counts)], self.device)[0]
        for j, batch in enumerate(rows):
            sync = self.world == 1 or j == len(rows) - 1
            with contextlib.nullcontext() if sync else train_model.no_sync():
                with autocast(self.device, self.precision):
                    loss_sum, count, self.state = self.task.loss(train_model, batch.to(self.device), self.state)
                if self.device.type == "cpu" and int(count) != row_counts[j]:    # free to check here
                    raise RuntimeError(f"the {self.task.name} task's loss is summed over {int(count)} items but its "
                                       f"count() says {row_counts[j]}: the Task contract is broken")
                (loss_sum * (self.world / total)).backward()
            self.state = self.model.detach_state(self.state)
            self._window[0] += loss_sum.detach()
        self._window[1] += counts
        self._finite &= torch.isfinite(self._window[0])
        if cfg.grad_clip > 0:
            norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
            self._finite &= torch.isfinite(norm)
        if self.device.type == "cpu":      # checking costs a device sync elsewhere: there, at each log and evaluation
            self._check_finite()
        lr = self.schedule.lr(pos.step, pos.epoch, self._spent)
        set_lr(self.optimizer, lr)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        pos.step += 1
        pos.batch += len(group)
        pos.tokens += int(total)
        return lr

    def _check_finite(self) -> None:
        """Stop with a clear message once a loss or a gradient norm is nan or infinite (checked before the
        optimizer step on the CPU, so the weights in memory stay finite there); the checkpoint and the
        best weights on disk are never replaced by non-finite ones."""
        bad = not bool(self._finite)
        if self.world > 1:
            bad = distributed.all_reduce_sum([float(bad)], self.device)[0] > 0
        if not bad:
            return
        cfg = self.config
        raise SeqlabError(
            f"training diverged at step {self.position.step + 1}: the loss or the gradient norm became nan or "
            f"infinite (--lr {cfg.lr:g}{f', --grad-clip {cfg.grad_clip:g}' if cfg.grad_clip else ', no --grad-clip'}"
            f", --precision {cfg.precision}); lower --lr or clip the gradient (--grad-clip 1), then --resume "
            f"from the last checkpoint or start again with --overwrite; {self.run_dir}/model.safetensors holds "
            "the best weights so far, if any")

    def _log(self, lr: float) -> dict:
        """Append the training loss since the last record to train_log.jsonl; fields for the bar."""
        self._check_finite()
        pos = self.position
        loss_sum, count = distributed.all_reduce_sum([float(self._window[0]), float(self._window[1])], self.device)
        now = time.time()
        speed = (pos.tokens - self._mark_tokens) / max(now - self._mark_time, 1e-9)
        record = {"step": pos.step, "epoch": pos.epoch + 1, "loss": loss_sum / max(count, 1), "lr": lr,
                  "tokens_per_s": speed}
        fields = {"tok/s": f"{speed:,.0f}", "lr": f"{lr:.3g}"}
        if self._utilisation is not None:
            flops_per_unit, peak = self._utilisation
            achieved = flops_per_unit * speed                      # model FLOP/s of all processes together
            record |= {"gflop_per_s": float(f"{achieved / 1e9:.4g}"),
                       "mfu": float(f"{100 * achieved / (peak * self.world):.4g}")}
            fields["mfu"] = f"{record['mfu']:.0f}%" if record["mfu"] >= 1 else f"{record['mfu']:.2g}%"
        self._since_eval[0] += loss_sum
        self._since_eval[1] += count
        self._window = [torch.zeros((), device=self.device), 0]
        self._mark_time, self._mark_tokens = now, pos.tokens
        if self.is_main:
            append_line(self.run_dir / "train_log.jsonl", json.dumps(record), sync=False)
        self._emit({"event": "log", **record})
        return self.task.progress_fields(record["loss"]) | fields

    def _probe(self) -> tuple[int, int, list[tuple[int, int, int]]]:
        """`flops.probe` of this process's rows of the next batch, once a session, in fp32 under --precision auto
        (whatever it resolves to: a resumed run probes as the run it continues did), else as asked."""
        if self._probed is None:
            cfg, pos, task, mine = self.config, self.position, self.task, self.my_rows
            self._probed = flops.probe(self.model, task, lambda: task.train_batches(pos.epoch)[pos.batch].rows(
                mine.start, mine.stop).to(self.device), self.rows, self.device,
                "fp32" if cfg.precision == "auto" else cfg.precision)
        return self._probed

    def _measure_utilisation(self) -> tuple[float, float] | None:
        """(model FLOPs per training unit, this process's peak FLOP/s) for the MFU of the logs and the bar, from
        `_probe`, against the peak of the precision in use. The peak comes from the cache (`seqlab bench peak`),
        measured on the first run of a machine."""
        counted, units, _ = self._probe()
        if not counted or not units:
            return None
        value, measured = flops.peak(self.device, flops.precision_dtype(self.device, self.precision))
        if self.is_main:
            say(f"model FLOPs: {counted / units / 1e6:,.2f} M per {self.task.unit} (forward and backward, counted "
                       f"from the products' shapes); peak "
                       f"{value / 1e9:,.1f} GFLOP/s{' (measured now, cached for the next runs)' if measured else ''}"
                       f"{' (bf16 products)' if self.precision == 'bf16' else ''}")
        return counted / units, value

    def _resolve_precision(self) -> None:
        """Fix what the run computes in (`seqlab.training.devices.resolve_precision`): --precision auto decides by
        the shapes of the products of one forward pass of the first batch (`_probe`, the pass the MFU counts)."""
        chosen = resolve_precision(self.device, self.config.precision, lambda: self._probe()[2])
        self.precision, self.precision_why = distributed.broadcast_object(chosen if self.is_main else None)

    def _restore_precision(self, trainer: dict) -> None:
        """--resume: under --precision auto, what the run computed in when it started (`devices.kept_precision`)."""
        kept = devices.kept_precision(self.device, self.config.precision, trainer, self.run_dir)
        if kept is not None:
            (self.precision, self.precision_why), self._precision_kept = kept, True

    # ------------------------------------------------------------------ evaluation and checkpoints

    def evaluate(self, data) -> dict:
        """The task's figures on `data`: its summable counts from every process, added, then summarized."""
        stats = self.task.evaluate(self.model, data, self.device, self.my_eval_rows)
        keys = sorted(stats)
        totals = distributed.all_reduce_sum([float(stats[k]) for k in keys], self.device)
        return self.task.summarize(dict(zip(keys, totals, strict=True)))

    def _evaluate_and_save(self) -> bool:
        """Evaluate on the validation data, record, checkpoint; return whether to stop early."""
        pos, task = self.position, self.task
        self._check_finite()
        train_loss = self._since_eval[0] / self._since_eval[1] if self._since_eval[1] else None
        self._since_eval = [0.0, 0]
        began = time.time()
        metrics = self.evaluate(task.valid_data)
        self._eval_seconds = time.time() - began
        self._evals_seconds += self._eval_seconds
        value = metrics[task.metric]
        if not math.isfinite(value):
            raise SeqlabError(f"evaluation at step {pos.step} gave a {task.metric} of {value}: the model's outputs "
                              "are no longer finite numbers; lower --lr (or use --precision fp32), then --resume "
                              "from the last checkpoint or start again with --overwrite")
        improved = pos.best is None or (value < pos.best if lower_is_better(task.metric) else value > pos.best)
        if improved:
            pos.best, pos.best_step, pos.bad_evals = value, pos.step, 0
        else:
            pos.bad_evals += 1
        self.schedule.evaluated(improved)
        elapsed = pos.elapsed + time.time() - self._start
        record = {"step": pos.step, "epoch": pos.epoch if pos.batch == 0 else pos.epoch + 1,
                  "split": "valid", **metrics, "train_loss": train_loss,
                  "lr": self.schedule.lr(pos.step, pos.epoch), "elapsed_s": round(elapsed, 2),
                  "best": improved}
        if self.is_main:
            append_line(self.run_dir / "metrics.jsonl", json.dumps(record))
            if improved:
                save_model(self.run_dir / "model.safetensors", self.model,
                           {"step": str(pos.step), task.metric: str(value)})
        self._save_checkpoint(elapsed)
        if self.is_main:
            plot_curves(self.run_dir)
            say(task.describe(record))
        self._last_eval = (pos.step, metrics) if improved else None
        if improved:
            self._best_eval = (pos.step, metrics)
        self._emit({"event": "evaluate", **record})
        early_stop = bool(self.config.patience) and pos.bad_evals >= self.config.patience
        if early_stop and self.is_main:
            say(f"early stopping: {pos.bad_evals} evaluations without improvement")
        return early_stop

    def _save_checkpoint(self, elapsed: float) -> None:
        tensors = {f"model.{k}": v for k, v in model_tensors(self.model).items()}
        optimizer_tensors, optimizer_meta = optimizer_to_tensors(self.optimizer, self.model)
        tensors.update(optimizer_tensors)
        state = self.state if self.position.batch > 0 else None
        parts = state if isinstance(state, tuple) else (() if state is None else (state,))
        for i, part in enumerate(parts):
            tensors[f"state.{i}"] = distributed.gather_rows(part, self.model.state_batch_dim)
        rng = {"cpu": torch.get_rng_state()}
        if torch.cuda.is_available():
            rng["cuda"] = torch.cuda.get_rng_state(self.device if self.device.type == "cuda" else None)
        for rank, rank_rng in enumerate(distributed.gather_objects({k: v.cpu() for k, v in rng.items()})):
            for kind, value in rank_rng.items():
                tensors[f"rng.{kind}.{rank}"] = value
        pos = self.position
        trainer = {"epoch": pos.epoch, "batch": pos.batch, "step": pos.step, "tokens": pos.tokens,
                   "best": pos.best, "best_step": pos.best_step, "bad_evals": pos.bad_evals, "elapsed": elapsed,
                   "startup": pos.startup + self._startup,
                   "schedule": self.schedule.state_dict(), "world": self.world,
                   "time_schedule": self.time_schedule, "eval_interval": self.eval_interval,
                   "state_is_tuple": isinstance(state, tuple),
                   "precision": self.precision, "precision_why": self.precision_why}
        if self.is_main:
            save_tensors(self.run_dir / "checkpoint.safetensors", tensors,
                         {"trainer": trainer, "optimizer": optimizer_meta})
        distributed.barrier()

    def _restore(self) -> None:
        path = self.run_dir / "checkpoint.safetensors"
        if not path.exists():
            raise SeqlabError(f"--resume: {self.run_dir} has no checkpoint.safetensors to resume from")
        tensors, meta = load_tensors(path)
        trainer = json.loads(meta["trainer"])
        load_model_tensors(self.model, {k[6:]: v for k, v in tensors.items() if k.startswith("model.")}, path)
        self.optimizer.load_state_dict(optimizer_from_tensors(tensors, json.loads(meta["optimizer"]), self.model,
                                                              self.optimizer, path))
        self.schedule.load_state_dict(trainer["schedule"])
        pos = self.position
        pos.epoch, pos.batch = trainer["epoch"], trainer["batch"]
        pos.step, pos.tokens = trainer["step"], trainer["tokens"]
        pos.best, pos.bad_evals, pos.elapsed = trainer["best"], trainer["bad_evals"], trainer["elapsed"]
        pos.startup = trainer.get("startup", 0.0)              # a checkpoint of an earlier seqlab: not recorded
        pos.best_step = trainer.get("best_step", pos.step)      # a checkpoint of an earlier seqlab: not recorded
        if trainer.get("time_schedule"):
            self._set_time_schedule(trainer["time_schedule"])
        self.eval_interval = trainer.get("eval_interval")
        self._restore_precision(trainer)
        parts = [tensors[f"state.{i}"] for i in range(len([k for k in tensors if k.startswith("state.")]))]
        if parts:
            dim = self.model.state_batch_dim
            parts = [p.narrow(dim, self.my_rows.start, self.rows).to(self.device) for p in parts]
            self.state = tuple(parts) if trainer["state_is_tuple"] else parts[0]
        if trainer["world"] == self.world and f"rng.cpu.{self.rank}" in tensors:
            torch.set_rng_state(tensors[f"rng.cpu.{self.rank}"])
            if f"rng.cuda.{self.rank}" in tensors and self.device.type == "cuda":
                torch.cuda.set_rng_state(tensors[f"rng.cuda.{self.rank}"], self.device)
        elif self.is_main:
            say(f"resuming with {self.world} processes instead of {trainer['world']}: "
                       "dropout masks will differ from the uninterrupted run")
        if self.is_main:   # forget records written after the checkpoint (the run died after writing them)
            for name in ("metrics.jsonl", "train_log.jsonl"):
                file = self.run_dir / name
                if file.exists():
                    kept = [line for line in file.read_text(encoding="utf-8").splitlines()
                            if record_step(line) <= pos.step]
                    atomic_write_text(file, "".join(line + "\n" for line in kept))
        distributed.barrier()

    def _finish(self) -> dict:
        """Reload the best weights and report valid (and test) with them. The final records carry the step of
        those weights ("step"; the steps trained are "trained_steps"), so that the summary names the evaluation
        that chose them."""
        pos = self.position
        best = self.run_dir / "model.safetensors"
        distributed.barrier()
        weights_step = pos.step
        if self._last_eval is not None and self._last_eval[0] == pos.step:
            results = {"valid": self._last_eval[1]}      # the model holds the best weights: evaluated already
        else:
            if distributed.broadcast_object(best.exists() if self.is_main else None):
                if self.is_main:                # rank 0's file, sent to every process (nodes need not share disks)
                    load_model(best, self.model)
                distributed.broadcast_module(self.model)
                weights_step = pos.best_step
            if self._best_eval is not None and self._best_eval[0] == weights_step:
                results = {"valid": self._best_eval[1]}  # evaluated when they were the best: the same figures
            else:
                results = {"valid": self.evaluate(self.task.valid_data)}
        if self.task.test_data is not None:
            results["test"] = self.evaluate(self.task.test_data)
        if self.is_main:
            if weights_step != pos.step:
                say(f"the best weights, of step {weights_step} (of {pos.step} trained):")
            for split, metrics in results.items():
                record = {"step": weights_step, "trained_steps": pos.step, "split": split, "final": True, **metrics}
                append_line(self.run_dir / "metrics.jsonl", json.dumps(record))
                say(self.task.describe(record))
            plot_curves(self.run_dir)
        self._emit({"event": "finish", **results})
        return results

    def _emit(self, event: dict) -> None:
        if self.is_main:
            self.trackers.event(event)
        if self.callback is not None and self.is_main:
            self.callback(event)

