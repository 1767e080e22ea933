"""The GPU watch over a node's heartbeats: GPUs below 80 % for more than 2 minutes of training make a starved node,
measured by the agent's clock over training heartbeats with figures only; and the mean utilisation of the training
(issue 14, item 3)."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from orchestrator.agent.gpu_watch import GpuWatch
from orchestrator.agent.status import StatusBoard
from orchestrator.contract import LOW_FOR_SECONDS, LOW_UTILISATION, GpuStat, GpuUse, Phase, Status

Beat = tuple[float, Phase, list[GpuStat]]  # time by the agent's clock, phase, the GPUs' figures


def starved(use: GpuUse | None) -> bool:
    return use is not None and use.starved


def gpus(*utilisation: float) -> list[GpuStat]:
    return [GpuStat(index=i, utilization=u, memory_used_mib=1000.0) for i, u in enumerate(utilisation)]


def beats(start: float, end: float, phase: Phase, *utilisation: float) -> list[Beat]:
    """A heartbeat every 5 s from ``start`` to ``end``, both included, each with these figures (none: no GPU)."""
    times = [start + 5.0 * i for i in range(int((end - start) // 5) + 1)]
    if times[-1] != end:
        times.append(end)
    return [(t, phase, gpus(*utilisation)) for t in times]


def watch(sequence: Iterable[Beat]) -> GpuWatch:
    folded = GpuWatch()
    for now, phase, figures in sequence:
        folded = folded.observe(now, phase, figures)
    return folded


def test_below_80_percent_for_more_than_two_minutes_of_training_is_starved() -> None:
    use = watch(beats(0, 125, Phase.TRAINING, 40, 50)).use
    assert use is not None and use.low_seconds == 125 and use.mean_utilization == 45
    assert starved(use)


def test_one_minute_59_is_not_yet() -> None:
    assert not starved(watch(beats(0, 119, Phase.TRAINING, 40)).use)
    assert not starved(watch(beats(0, LOW_FOR_SECONDS, Phase.TRAINING, 40)).use)  # more than 2 minutes, not 2
    assert starved(watch(beats(0, 121, Phase.TRAINING, 40)).use)


def test_a_busy_heartbeat_starts_the_count_again() -> None:
    dip, busy = beats(0, 100, Phase.TRAINING, 30), (105.0, Phase.TRAINING, gpus(LOW_UTILISATION))
    again = beats(110, 200, Phase.TRAINING, 30)
    use = watch([*dip, busy, *again]).use
    assert use is not None and use.low_seconds == 90 and not starved(use)
    assert starved(watch([*dip, busy, *again, *beats(205, 231, Phase.TRAINING, 30)]).use)


def test_one_busy_gpu_of_two_still_averages_low() -> None:
    assert starved(watch(beats(0, 130, Phase.TRAINING, 100, 20)).use)
    assert not starved(watch(beats(0, 130, Phase.TRAINING, 100, 70)).use)


def test_only_the_training_counts() -> None:
    before = [*beats(0, 300, Phase.SYNCING, 0), *beats(305, 400, Phase.RESTORING, 0)]
    assert watch(before).use is None  # nothing to say of a node that has not trained yet
    use = watch([*before, *beats(405, 505, Phase.TRAINING, 30)]).use
    assert use is not None and use.low_seconds == 100 and use.samples == 21 and not starved(use)
    # The uploads after the training do not extend it, and leave what it was.
    ended = watch([*before, *beats(405, 505, Phase.TRAINING, 30), *beats(510, 900, Phase.UPLOADING, 0)]).use
    assert ended == use


def test_a_training_that_ended_starved_still_says_so() -> None:
    use = watch([*beats(0, 200, Phase.TRAINING, 10), (205.0, Phase.DONE, [])]).use
    assert starved(use)


def test_heartbeats_without_figures_are_not_low() -> None:
    # No GPU at all: nothing, however long the training.
    assert watch(beats(0, 3600, Phase.TRAINING)).use is None
    assert not starved(None)
    # Figures missing a moment (NVML did not answer): no sign of a low GPU, so the stretch starts again after it.
    gap = [*beats(0, 100, Phase.TRAINING, 10), (105.0, Phase.TRAINING, []), *beats(110, 200, Phase.TRAINING, 10)]
    use = watch(gap).use
    assert use is not None and use.low_seconds == 90 and use.samples == 40 and not starved(use)


def test_the_mean_is_over_the_training_heartbeats_with_figures() -> None:
    use = watch([*beats(0, 50, Phase.SYNCING, 0), *beats(55, 95, Phase.TRAINING, 90),
                 (100.0, Phase.TRAINING, []), *beats(105, 145, Phase.TRAINING, 60)]).use
    assert use is not None and use.samples == 18 and use.mean_utilization == pytest.approx(75)


def test_the_heartbeat_carries_the_watch_by_the_agents_clock() -> None:
    clock = [1000.0]
    board = StatusBoard(1, 0, "ins-1", clock=lambda: clock[0])
    board.set_phase(Phase.SYNCING)
    assert board.snapshot(gpus(0)).gpu_use is None
    board.set_phase(Phase.TRAINING)
    for _ in range(26):  # 0 .. 125 s
        status = board.snapshot(gpus(35))
        clock[0] += 5
    assert status.gpu_use == GpuUse(samples=26, mean_utilization=35, low_seconds=125)
    assert starved(status.gpu_use)


def test_a_heartbeat_of_an_earlier_agent_reads_without_it() -> None:
    old = {"attempt": 1, "node_rank": 0, "instance_id": "ins-1", "phase": "training", "time": 1.0, "seq": 3}
    assert Status.model_validate(old).gpu_use is None
