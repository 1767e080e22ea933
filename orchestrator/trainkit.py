"""The training side of cvmjob's contract in three lines of a user's script (design.md §3).

    from orchestrator import trainkit

    ckpt = trainkit.Checkpointer(every=100)          # reads CVMJOB_*; SIGUSR1 = "checkpoint now"
    start, state = ckpt.restore(initial_state)       # from CVMJOB_RESUME_FROM, or (0, initial_state)
    for step in range(start, total_steps):
        loss = train_one_step(...)
        trainkit.report(step, loss)                  # rank 0: progress for the heartbeat and hang detection
        if ckpt.should_save(step):                   # every rank, every step: it is a collective
            ckpt.save(step, current_state())         # rank 0 writes step-<N> by atomic rename; all ranks wait
        if ckpt.stop_requested:                      # a requested checkpoint was just saved: stop here
            break
    trainkit.finish()                                # barrier, destroy the process group, exit 0

Rules the agent relies on:
- ``step`` is the index of the step just completed; ``save(step, ...)`` writes ``step-<step>`` and ``restore``
  returns ``step + 1``: a resumed run neither repeats nor skips a step.
- ``should_save`` all-reduces the "checkpoint requested" flag, so every rank saves and stops at the same step
  even though SIGUSR1 reaches the ranks at slightly different moments. Call it on every rank at every step.
- After a stop the script should exit without writing final outputs; the agent that asked for the checkpoint
  ends the attempt (preempted or cancelled) whatever the exit code.
- When torchrun restarts the workers of a single node in place (``--max-restarts``), ``restore`` resumes from the
  newest checkpoint in the folder rather than the one the attempt started from.
- Without the agent (no CVMJOB_* variables) everything still works: checkpoints go to ./checkpoints and
  progress reports are dropped (their metrics are still checked, so a bad one fails the same way everywhere).
- ``report(step, loss, val_loss=0.4, val_accuracy=0.9)`` adds named metrics: a name matches
  ``[A-Za-z_][A-Za-z0-9_.]*``, a value is a finite real number (not a bool), else report raises ValueError. A
  metric keeps its value until a later report of the same name, so a loss each step and validation metrics every
  few steps all reach the heartbeat (``Status.metrics``) and, when the attempt ends whatever its outcome, the
  result (``Result.metrics``), with ``metrics_step``: the step the newest of them was reported at.

The progress file, for a script without trainkit (contract.Progress): rank 0 alone writes a JSON object to a
temporary file in the folder of ``$CVMJOB_PROGRESS_FILE`` and renames it onto that path (``os.replace``), so the
agent never reads half a file. A file that does not validate (a field missing or unknown, a NaN metric) is
ignored whole. Its fields:

- ``step`` (required, int): the index of the step just completed; hang detection watches it alone;
- ``time`` (required, number): Unix time of the report;
- ``loss`` (number or null), ``stopped`` (bool: the ranks stopped after a requested checkpoint);
- ``metrics`` (object: name -> finite number, the latest value of each) and ``metrics_step`` (int or null).

For example ``{"step": 120, "time": 1767225600.0, "loss": 0.31, "metrics": {"val_loss": 0.42}, "metrics_step":
120}``. Write it at most a few times a second (trainkit: every 0.5 s at most, and at each checkpoint and the end).

torch is imported only inside the functions that need it: the agent imports this module's names without torch.
"""

from __future__ import annotations

import math
import numbers
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from orchestrator.contract import (
    CHECKPOINT_SIGNAL,
    METRIC_NAME,
    Progress,
    TrainingEnv,
    checkpoint_name,
    checkpoint_step,
)

T = TypeVar("T")
STATE_FILE = "state.pt"  # inside a checkpoint directory written by save()
_REPORT_EVERY_SECONDS = 0.5  # the agent reads progress about once a second; writing each step would be waste


def rank() -> int:
    """The global rank torchrun gave this process (0 outside torchrun)."""
    return int(os.environ.get("RANK", "0"))


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


class _Reporter:
    """Rank 0's progress file, written at most every _REPORT_EVERY_SECONDS; save() and finish() flush the rest."""

    def __init__(self) -> None:
        target = os.environ.get(TrainingEnv.PROGRESS_FILE.value)
        self.path = Path(target) if target and rank() == 0 else None
        self.step: int | None = None
        self.loss: float | None = None
        self.stopped = False
        self.metrics: dict[str, float] = {}
        self.metrics_step: int | None = None
        self._reports_with_metrics = 0  # a report of metrics at the step already written is still news
        self._written: tuple[int | None, bool, int] = (None, False, 0)
        self._written_at = 0.0

    def report(self, step: int, loss: float | None, metrics: dict[str, float]) -> None:
        self.step, self.loss = step, loss
        if metrics:
            self.metrics = {**self.metrics, **metrics}
            self.metrics_step = step
            self._reports_with_metrics += 1
        if time.time() - self._written_at >= _REPORT_EVERY_SECONDS:
            self.flush()

    def flush(self) -> None:
        news = (self.step, self.stopped, self._reports_with_metrics)
        if self.path is None or self.step is None or self._written == news:
            return
        doc = Progress(step=self.step, loss=self.loss, time=time.time(), stopped=self.stopped,
                       metrics=self.metrics, metrics_step=self.metrics_step)
        _write_atomically(self.path, doc.model_dump_json().encode())
        self._written, self._written_at = news, doc.time


_reporter: _Reporter | None = None


def _get_reporter() -> _Reporter:
    global _reporter
    if _reporter is None:
        _reporter = _Reporter()
    return _reporter


def _metric_value(name: str, value: object) -> float:
    """``value`` as the float the progress file carries, or a ValueError that names the metric and the problem."""
    if not METRIC_NAME.fullmatch(name):
        raise ValueError(f"trainkit.report: metric {name!r}: the name must match {METRIC_NAME.pattern}")
    # bool is an int to Python, but True as a validation score is a bug in the script, not a value.
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"trainkit.report: metric {name!r}: {value!r} ({type(value).__name__}) is not a real "
                         f"number; pass a float (tensor.item() for a tensor)")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"trainkit.report: metric {name!r}: {number} is not a finite number")
    return number


def report(step: int, loss: float | None = None, **metrics: float) -> None:
    """Tell the agent the step just completed, its loss and any named metrics (``val_loss=0.4``). Cheap to call
    every step; only rank 0 writes. A metric keeps its value until a later report of the same name."""
    checked = {name: _metric_value(name, value) for name, value in metrics.items()}
    _get_reporter().report(step, None if loss is None else float(loss), checked)


class Checkpointer:
    """Checkpoints in $CVMJOB_CHECKPOINT_DIR, restore from $CVMJOB_RESUME_FROM, and the SIGUSR1 request.

    Construct it in the main thread (it installs a signal handler) before the training loop."""

    def __init__(self, every: int | None = None, directory: str | os.PathLike[str] | None = None) -> None:
        env = os.environ
        self.directory = Path(directory or env.get(TrainingEnv.CHECKPOINT_DIR.value) or "checkpoints")
        interval = env.get(TrainingEnv.CHECKPOINT_INTERVAL.value)
        # The spec's checkpoints.interval_steps wins over the script's default, so a job can tune it.
        self.every = int(interval) if interval else every
        self.resume_from = env.get(TrainingEnv.RESUME_FROM.value, "")
        self.stop_requested = False
        self._signalled = False
        signal.signal(CHECKPOINT_SIGNAL, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signalled = True

    def resume_path(self) -> Path | None:
        """The checkpoint to start from: $CVMJOB_RESUME_FROM, or a newer one of this node's folder after torchrun
        restarted the workers in place (--max-restarts: its environment, and so CVMJOB_RESUME_FROM, is the one of
        the first start). Only on a single node, where every rank sees the same folder and picks the same one."""
        chosen = Path(self.resume_from) if self.resume_from else None
        env = os.environ
        if int(env.get("TORCHELASTIC_RESTART_COUNT", "0")) > 0 and env.get("LOCAL_WORLD_SIZE") == env.get("WORLD_SIZE"):
            local = [(step, p) for p in self.directory.glob("step-*") if (step := checkpoint_step(p.name)) is not None]
            newest = max(local, default=None, key=lambda found: found[0])
            if newest is not None and (chosen is None or newest[0] > (checkpoint_step(chosen.name) or -1)):
                chosen = newest[1]
        return chosen

    def restore(self, default: T) -> tuple[int, T]:
        """(first step to run, state): from the checkpoint resume_path() names, or (0, default)."""
        path = self.resume_path()
        if path is None:
            return 0, default
        import torch

        step = checkpoint_step(path.name)
        if step is None:
            raise ValueError(f"{TrainingEnv.RESUME_FROM.value}={path} is not named step-<N>")
        state: T = torch.load(path / STATE_FILE if path.is_dir() else path, map_location="cpu", weights_only=True)
        return step + 1, state

    def should_save(self, step: int) -> bool:
        """True when this step is a checkpoint step or a checkpoint was requested on any rank (a collective)."""
        requested = self._signalled
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            import torch

            device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else None
            flag = torch.tensor([1 if requested else 0], dtype=torch.int32, device=device)
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            requested = bool(flag.item())
        if requested:
            self.stop_requested = True
        return requested or (self.every is not None and (step + 1) % self.every == 0)

    def save(self, step: int, state: Any) -> Path:
        """Rank 0 writes ``step-<step>`` (fsynced, then renamed into place); every rank waits for it."""
        import torch

        final = self.directory / checkpoint_name(step)
        if rank() == 0:
            self.directory.mkdir(parents=True, exist_ok=True)
            tmp = self.directory / f".{final.name}.{os.getpid()}.tmp"
            tmp.mkdir(parents=True, exist_ok=True)
            with (tmp / STATE_FILE).open("wb") as f:
                torch.save(state, f)
                f.flush()
                os.fsync(f.fileno())
            if final.exists():  # the same step saved again (a rerun): the newer state wins
                stale = self.directory / f".{final.name}.{os.getpid()}.stale"
                final.rename(stale)
                shutil.rmtree(stale)
            tmp.rename(final)
            dir_fd = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        _barrier()
        reporter = _get_reporter()
        reporter.stopped = self.stop_requested
        reporter.flush()
        return final


def _barrier() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def finish(exit_code: int = 0) -> None:
    """End the process without the gloo/NCCL teardown abort: barrier, destroy the process group, then
    ``os._exit`` (exiting normally aborts in about a third of gloo runs: shared/reference/client-recipes.md §5.2).
    """
    _get_reporter().flush()
    sys.stdout.flush()
    sys.stderr.flush()
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)
