"""Watches the running training: progress, hang detection, the end, and the graceful stop.

Progress comes from $CVMJOB_PROGRESS_FILE (trainkit.report): the step, the loss and the named metrics go to the
status board, and from there to the heartbeat and the result. Hang detection starts with the first report and
watches the step alone: a script that never reports is never judged hung (hang_timeout needs trainkit.report, or
a file of the same form).

A stop request (spot notice or cancel) is served in this order:
1. SIGUSR1 to every training process: "checkpoint now"; trainkit saves at the same step on all ranks and stops;
2. wait until the training exits, an answering checkpoint is committed (then a few seconds more for the exit),
   or 60 % of the time left passes, whichever is first; the uploader meanwhile uploads it ahead of anything
   older;
3. SIGTERM to every training process, SIGKILL after a grace period;
4. finish uploading what appeared, until shortly before the deadline.

A cancel without a checkpoint (a pruned sweep trial) skips the first two: SIGTERM at once.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path

from orchestrator.contract import CHECKPOINT_SIGNAL, Outcome, Phase, Progress

from .processes import Launched
from .status import StatusBoard
from .stop import STOP_NOW_TRAINING_GRACE, StopRequest, StopSignal
from .uploader import CheckpointUploader

log = logging.getLogger(__name__)

POLL_SECONDS = 0.5
CHECKPOINT_SHARE = 0.6  # of the time left, for the emergency checkpoint to appear
EXIT_AFTER_COMMIT_SECONDS = 5.0
UPLOAD_MARGIN_SECONDS = 3.0  # the result and the last logs still have to go out before the deadline


@dataclass(frozen=True)
class TrainingEnd:
    outcome: Outcome
    exit_code: int | None
    reason: str


def read_progress(path: Path) -> Progress | None:
    try:
        return Progress.model_validate_json(path.read_bytes())
    except (OSError, ValueError):  # not written yet, or replaced while we read
        return None


class Supervisor:
    def __init__(self, process: Launched, progress_path: Path, board: StatusBoard, stop: StopSignal,
                 uploader: CheckpointUploader, hang_timeout: float | None) -> None:
        self.process = process
        self.progress_path = progress_path
        self.board = board
        self.stop = stop
        self.uploader = uploader
        self.hang_timeout = hang_timeout
        self.progress: Progress | None = None
        self._moved_at: float | None = None  # monotonic time of the last new step

    def _observe(self) -> None:
        progress = read_progress(self.progress_path)
        if progress is None or progress == self.progress:
            return
        if self.progress is None or progress.step != self.progress.step:
            self._moved_at = time.monotonic()
        self.progress = progress
        self.board.set_progress(progress)

    def run(self) -> TrainingEnd:
        while True:
            code = self.process.poll()
            self._observe()
            if code is not None:
                return self._ended(code)
            if self.hang_timeout is not None and self._moved_at is not None \
                    and time.monotonic() - self._moved_at > self.hang_timeout:
                step = self.progress.step if self.progress else None
                log.error("no progress for %.0f s (last step %s): stopping the training", self.hang_timeout, step)
                code = self.process.stop(grace=30)
                return TrainingEnd(Outcome.HUNG, code, f"no new step for {self.hang_timeout:.0f} s "
                                                       f"(last step {step}); the training was killed")
            request = self.stop.current
            if request is not None:
                return self._stop(request)
            self.stop.event.wait(POLL_SECONDS)

    def _ended(self, code: int) -> TrainingEnd:
        if self.progress is not None and self.progress.stopped:
            # The ranks stopped after a checkpoint that another node's agent asked for (its spot notice).
            return TrainingEnd(Outcome.PREEMPTED, code, f"the training stopped after a checkpoint requested by "
                                                        f"another node, at step {self.progress.step}")
        if code == 0:
            return TrainingEnd(Outcome.SUCCEEDED, 0, "the training finished")
        return TrainingEnd(Outcome.TRAINING_FAILED, code, f"the training exited with {code}")

    def _stop(self, request: StopRequest) -> TrainingEnd:
        self.board.set_phase(Phase.PREEMPTED if request.kind == "preempt" else Phase.CANCELLED, request.reason)
        if not request.checkpoint:
            log.warning("%s: stopping the training, without a checkpoint", request.reason)
            stopped = self.process.stop(STOP_NOW_TRAINING_GRACE)
            self._observe()
            return TrainingEnd(request.outcome, stopped, f"{request.reason}: stopped without a checkpoint, as asked")
        log.warning("%s: asking the training for a checkpoint (%.0f s left)", request.reason, request.remaining())
        self.uploader.request_emergency()
        self.process.signal_all(CHECKPOINT_SIGNAL)
        checkpoint_deadline = time.monotonic() + CHECKPOINT_SHARE * request.remaining()
        code = self.process.poll()
        committed_at: float | None = None
        while code is None and time.monotonic() < checkpoint_deadline:
            self._observe()
            if self.uploader.emergency_committed is not None:
                committed_at = committed_at or time.monotonic()
                if time.monotonic() - committed_at > EXIT_AFTER_COMMIT_SECONDS:
                    break
            time.sleep(POLL_SECONDS)
            code = self.process.poll()
        self._observe()
        if code is None:
            grace = min(10.0, max(1.0, 0.1 * request.remaining()))
            code = self.process.stop(grace)
        uploaded_all = self.uploader.drain(request.deadline - UPLOAD_MARGIN_SECONDS)
        name = self.uploader.emergency_committed
        if name is not None:
            saved = f"emergency checkpoint {name} committed"
        else:
            saved = "no emergency checkpoint appeared in time"
            if self.uploader.uploaded == 0:
                saved += "; the next attempt resumes from the latest checkpoint committed earlier, if any"
        if not uploaded_all:
            saved += "; some checkpoints were not uploaded before the deadline"
        return TrainingEnd(request.outcome, code, f"{request.reason}: {saved}")


_ROOT_CAUSE_EXIT = re.compile(r"Root Cause \(first observed failure\):.*?exitcode\s*:\s*(-?\d+)", re.S)


def worker_exit_code(run_log: Path, tail_bytes: int = 256 * 1024) -> int | None:
    """The exit code of the worker that failed first, from torchrun's error report ("Root Cause ... exitcode : 3")
    at the end of the log: torchrun itself exits 1 whatever its workers' codes were."""
    try:
        with run_log.open("rb") as f:
            f.seek(max(0, run_log.stat().st_size - tail_bytes))
            text = f.read().decode(errors="replace")
    except OSError:
        return None
    matches = _ROOT_CAUSE_EXIT.findall(text)
    return int(matches[-1]) if matches else None
