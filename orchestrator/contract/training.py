"""Agent <-> training script (design.md §3): the environment it is given, the checkpoint signal and names, and the
progress file it writes (orchestrator/trainkit.py writes it for a script)."""

from __future__ import annotations

import re
import signal
from enum import Enum

from pydantic import Field

from .base import Model
from .reports import Metrics


class TrainingEnv(str, Enum):
    """Environment variables the agent gives every training process (torchrun adds RANK, WORLD_SIZE, ...)."""

    DATA_DIR = "CVMJOB_DATA_DIR"
    CHECKPOINT_DIR = "CVMJOB_CHECKPOINT_DIR"
    OUTPUT_DIR = "CVMJOB_OUTPUT_DIR"
    RESUME_FROM = "CVMJOB_RESUME_FROM"  # the restored checkpoint's path; "" on a fresh start
    JOB_ID = "CVMJOB_JOB_ID"
    ATTEMPT = "CVMJOB_ATTEMPT"
    CHECKPOINT_INTERVAL = "CVMJOB_CHECKPOINT_INTERVAL"  # only when the spec sets checkpoints.interval_steps
    PROGRESS_FILE = "CVMJOB_PROGRESS_FILE"  # where rank 0 reports its step (Progress)


# Sent by the agent to every training process: "write a checkpoint now" (a spot notice, a cancel). The launcher
# and processes without a handler ignore it: the agent starts them with SIGUSR1 ignored.
CHECKPOINT_SIGNAL = signal.SIGUSR1

# A checkpoint is complete when an entry named ``step-<N>`` (a directory, or a file with an optional extension:
# ``step-<N>.pt``) appears in $CVMJOB_CHECKPOINT_DIR by atomic rename; N is the last completed step. Names
# starting with "." are work in progress and never read.
CHECKPOINT_NAME = re.compile(r"step-(?P<step>[0-9]+)(?:\.[A-Za-z0-9_.-]+)?")


def checkpoint_name(step: int) -> str:
    return f"step-{step:08d}"


def checkpoint_step(name: str) -> int | None:
    """The step of a complete checkpoint's name; None for anything else."""
    match = CHECKPOINT_NAME.fullmatch(name)
    return int(match["step"]) if match else None


class Progress(Model):
    """``$CVMJOB_PROGRESS_FILE``: rank 0's last completed step, replaced by atomic rename (trainkit.report).

    It feeds the heartbeat and hang detection; ``stopped`` tells the agent that the ranks agreed to stop after a
    requested checkpoint (possibly requested by another node's agent). ``metrics`` holds the latest value of every
    name reported so far, ``metrics_step`` the step the newest of them was reported at (``step`` moves on every
    report, a validation metric only every few). The format is in trainkit's docstring, for scripts without it."""

    step: int
    loss: float | None = None
    time: float
    stopped: bool = False
    metrics: Metrics = Field(default_factory=dict)
    metrics_step: int | None = None
    total_steps: int | None = Field(default=None, ge=1)  # the step count the script means to reach (report(total=))
