"""The status board keeps the training's recent reports of named metrics for the heartbeat (a sweep's pruner
needs each one, at its step), not only the newest."""

from __future__ import annotations

from orchestrator.agent.status import StatusBoard
from orchestrator.contract import RECENT_METRICS, MetricsAt, Progress


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
