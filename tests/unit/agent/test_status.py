"""The status board keeps the training's recent reports of named metrics for the heartbeat (a sweep's pruner
needs each one, at its step), not only the newest; and how long the training has run (what `cvmjob cost` sets
apart from the rest of the billed time)."""

from __future__ import annotations

from orchestrator.agent.status import StatusBoard
from orchestrator.contract import RECENT_METRICS, MetricsAt, Phase, Progress


def progress(step: int, metrics_step: int | None, **metrics: float) -> Progress:
    return Progress(step=step, loss=0.5, time=1.0, metrics=metrics, metrics_step=metrics_step)


def test_each_new_metrics_step_is_kept_once_in_order() -> None:
    board = StatusBoard(1, 0, "ins-1")
    board.set_progress(progress(3, None))  # the loss alone: nothing to keep
    board.set_progress(progress(5, 5, val_loss=2.0))
    board.set_progress(progress(7, 5, val_loss=2.0))  # read again as the steps move on: the same report
    board.set_progress(progress(10, 10, val_loss=1.5))
    board.set_progress(progress(10, 10, val_loss=1.5, val_accuracy=0.7))  # a second report at step 10 replaces it
    assert board.current.recent_metrics == [
        MetricsAt(step=5, metrics={"val_loss": 2.0}),
        MetricsAt(step=10, metrics={"val_loss": 1.5, "val_accuracy": 0.7}),
    ]


def test_only_the_latest_reports_are_kept() -> None:
    board = StatusBoard(1, 0, "ins-1")
    for step in range(RECENT_METRICS + 5):
        board.set_progress(progress(step, step, val_loss=float(step)))
    recent = board.current.recent_metrics
    assert [r.step for r in recent] == list(range(5, RECENT_METRICS + 5))


def test_the_training_time_counts_only_the_training_phases_by_the_agents_own_clock() -> None:
    clock = [100.0]
    board = StatusBoard(1, 0, "ins-1", clock=lambda: clock[0])
    for phase, seconds in ((Phase.SETUP, 30), (Phase.SYNCING, 50), (Phase.TRAINING, 40)):
        board.set_phase(phase)
        clock[0] += seconds
    assert board.current.training_seconds == 40  # still training: so far
    assert board.snapshot([]).training_seconds == 40
    board.set_phase(Phase.TRAINING)  # said again (a restart within the phase): the same stretch goes on
    clock[0] += 5
    board.set_phase(Phase.UPLOADING)
    clock[0] += 300
    board.set_phase(Phase.DONE)
    assert board.current.training_seconds == 45  # the uploads after it are not training
