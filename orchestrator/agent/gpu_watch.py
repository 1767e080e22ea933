"""Is the training waiting on its data? A node's GPU utilisation over its heartbeats, folded as they come.

The agent folds each heartbeat's figures into the next (agent/status.py), and the heartbeat carries the result
(``Status.gpu_use``): the mean utilisation over the training so far and how long it has stayed low without a
break, which one heartbeat's figures cannot say. ``cvmjob status`` tells a node that is ``GpuUse.starved``, ``run`` and
``logs -f`` once a node however often they look, with what usually fixes it (cli/render.py). Pure: the clock is
the caller's (the agent's monotonic one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean

from ..contract import LOW_UTILISATION, GpuStat, GpuUse, Phase


@dataclass(frozen=True)
class GpuWatch:
    """A node's heartbeats so far, as far as its GPUs' utilisation goes."""

    samples: int = 0  # training heartbeats with GPU figures
    mean: float = 0.0  # over those, of each heartbeat's mean across the node's GPUs
    low_since: float | None = None  # the first heartbeat of the current stretch below LOW_UTILISATION
    low_seconds: float = 0.0  # from it to the latest heartbeat of that stretch

    def observe(self, now: float, phase: Phase, gpus: Sequence[GpuStat]) -> GpuWatch:
        """With one more heartbeat. Only the training counts: the other phases leave the watch as it was (a
        training that ended starved still says so). A training heartbeat without figures (no GPU, or none could be
        read) is no sign of a low one: like a busy one, it ends the stretch."""
        if phase != Phase.TRAINING:
            return self
        if not gpus:
            return GpuWatch(self.samples, self.mean)
        utilisation = fmean(g.utilization for g in gpus)
        samples = self.samples + 1
        mean = self.mean + (utilisation - self.mean) / samples
        if utilisation >= LOW_UTILISATION:
            return GpuWatch(samples, mean)
        since = now if self.low_since is None else self.low_since
        return GpuWatch(samples, mean, since, now - since)

    @property
    def use(self) -> GpuUse | None:
        """What the heartbeat says of it; None before the training's first figures (a node without GPUs)."""
        if not self.samples:
            return None
        return GpuUse(samples=self.samples, mean_utilization=round(self.mean, 1),
                      low_seconds=round(self.low_seconds, 1))
