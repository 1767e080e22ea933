"""The agent's state as the heartbeat reports it: written by the phases and threads, read by the heartbeat."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from orchestrator.agent.gpu_watch import GpuWatch
from orchestrator.contract import RECENT_METRICS, GpuStat, MetricsAt, Phase, Progress, Status


class StatusBoard:
    def __init__(self, attempt: int, node_rank: int, instance_id: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._status = Status(attempt=attempt, node_rank=node_rank, instance_id=instance_id,
                              phase=Phase.STARTING, time=time.time(), seq=0, training_seconds=0.0)
        self.changed = threading.Event()  # a phase change is worth a heartbeat now, not at the next beat
        self._clock = clock
        self._trained = 0.0  # the training's time in the phases of TRAINING that ended
        self._training_since: float | None = None  # when the current one began
        self._gpu_watch = GpuWatch()

    def _update(self, wake: bool = False, **fields: object) -> None:
        with self._lock:
            self._status = self._status.model_copy(update=fields)
        if wake:
            self.changed.set()

    def set_phase(self, phase: Phase, message: str = "") -> None:
        with self._lock:
            now = self._clock()
            if self._training_since is not None and phase != Phase.TRAINING:
                self._trained += now - self._training_since
                self._training_since = None
            elif self._training_since is None and phase == Phase.TRAINING:
                self._training_since = now
        self._update(wake=True, phase=phase, message=message)

    def _training_seconds(self) -> float:
        """Under the lock."""
        running = 0.0 if self._training_since is None else self._clock() - self._training_since
        return round(self._trained + running, 3)

    def set_progress(self, progress: Progress) -> None:
        with self._lock:
            recent, step = self._status.recent_metrics, progress.metrics_step
            latest = None if step is None else MetricsAt(step=step, metrics=progress.metrics)
            if latest is not None and (not recent or recent[-1] != latest):
                # A second report at the step already recorded replaces it (metrics computed in two passes).
                kept = recent[:-1] if recent and recent[-1].step == step else recent
                recent = [*kept, latest][-RECENT_METRICS:]
            self._status = self._status.model_copy(update={
                "step": progress.step, "total_steps": progress.total_steps, "loss": progress.loss,
                "metrics": progress.metrics,
                "metrics_step": step, "recent_metrics": recent})

    @property
    def current(self) -> Status:
        """The status as it stands (no new seq): what the result repeats of it, read at once."""
        with self._lock:
            return self._status.model_copy(update={"training_seconds": self._training_seconds()})

    def set_sync(self, done: int, total: int) -> None:
        self._update(sync_bytes_done=done, sync_bytes_total=total)

    def add_sync_done(self, nbytes: int) -> None:
        with self._lock:
            self._status = self._status.model_copy(
                update={"sync_bytes_done": self._status.sync_bytes_done + nbytes})

    def set_checkpoints(self, uploaded: int, latest_step: int | None) -> None:
        self._update(wake=True, checkpoints_uploaded=uploaded, latest_checkpoint_step=latest_step)

    def set_notice(self, notice_time: str) -> None:
        self._update(wake=True, notice_time=notice_time)

    def snapshot(self, gpus: list[GpuStat]) -> Status:
        """The next heartbeat: a new seq, the current time and GPU figures, folded into the training's so far."""
        with self._lock:
            self._gpu_watch = self._gpu_watch.observe(self._clock(), self._status.phase, gpus)
            self._status = self._status.model_copy(update={
                "seq": self._status.seq + 1, "time": time.time(), "gpus": gpus,
                "training_seconds": self._training_seconds(), "gpu_use": self._gpu_watch.use})
            return self._status
