"""The supervisor's decisions, with a scripted stand-in for the training process and a memory COS."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from orchestrator.agent import supervisor
from orchestrator.agent.status import StatusBoard
from orchestrator.agent.stop import STOP_NOW_TRAINING_GRACE, StopRequest, StopSignal
from orchestrator.agent.supervisor import Supervisor
from orchestrator.agent.uploader import CheckpointUploader
from orchestrator.contract import Outcome, Progress
from tests.unit.agent.fakes import MemoryStore


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(supervisor, "POLL_SECONDS", 0.01)


class FakeTraining:
    """Exits with ``code`` once ``exit_after`` polls have passed (None: runs until stopped); records signals."""

    def __init__(self, code: int = 0, exit_after: int | None = None, on_signal: object = None) -> None:
        self.code, self.exit_after, self.polls = code, exit_after, 0
        self.signals: list[int] = []
        self.stopped_with: float | None = None
        self.on_signal = on_signal

    def poll(self) -> int | None:
        self.polls += 1
        if self.stopped_with is not None or (self.exit_after is not None and self.polls > self.exit_after):
            return self.code
        return None

    def signal_all(self, sig: int) -> None:
        self.signals.append(sig)
        if callable(self.on_signal):
            self.on_signal()

    def stop(self, grace: float) -> int:
        self.stopped_with = grace
        return -15


def report(path: Path, step: int, stopped: bool = False, metrics: dict[str, float] | None = None,
           metrics_step: int | None = None) -> None:
    path.write_text(Progress(step=step, loss=0.5, time=time.time(), stopped=stopped, metrics=metrics or {},
                             metrics_step=metrics_step).model_dump_json())


def make(tmp_path: Path, training: FakeTraining, hang_timeout: float | None = None,
         stop: StopSignal | None = None) -> tuple[Supervisor, CheckpointUploader]:
    board = StatusBoard(1, 0, "ins-1")
    uploader = CheckpointUploader(tmp_path / "ckpt", MemoryStore(), "ck/", 3, 1, board,  # type: ignore[arg-type]
                                  job_id="job-1")
    sup = Supervisor(training, tmp_path / "progress.json", board, stop or StopSignal(), uploader,  # type: ignore[arg-type]
                     hang_timeout)
    return sup, uploader


def test_exit_codes_become_outcomes_and_progress_reaches_the_board(tmp_path: Path) -> None:
    report(tmp_path / "progress.json", 41, metrics={"val_loss": 0.25, "val_accuracy": 0.9}, metrics_step=39)
    sup, _ = make(tmp_path, FakeTraining(code=0, exit_after=1))
    end = sup.run()
    assert (end.outcome, end.exit_code) == (Outcome.SUCCEEDED, 0)
    status = sup.board.current
    assert (status.step, status.loss, status.metrics_step) == (41, 0.5, 39)
    assert status.metrics == {"val_loss": 0.25, "val_accuracy": 0.9}
    sup, _ = make(tmp_path, FakeTraining(code=3, exit_after=1))
    end = sup.run()
    assert (end.outcome, end.exit_code) == (Outcome.TRAINING_FAILED, 3)


def test_a_stop_agreed_with_another_nodes_ranks_is_a_preemption_not_a_success(tmp_path: Path) -> None:
    report(tmp_path / "progress.json", 7, stopped=True)
    sup, _ = make(tmp_path, FakeTraining(code=0, exit_after=1))
    end = sup.run()
    assert end.outcome == Outcome.PREEMPTED and "another node" in end.reason


def test_no_new_step_for_hang_timeout_kills_the_training(tmp_path: Path) -> None:
    report(tmp_path / "progress.json", 3)
    training = FakeTraining()
    sup, _ = make(tmp_path, training, hang_timeout=0.3)
    end = sup.run()
    assert end.outcome == Outcome.HUNG and "last step 3" in end.reason and training.stopped_with is not None


def test_new_metrics_at_the_same_step_are_not_progress(tmp_path: Path) -> None:
    path = tmp_path / "progress.json"
    report(path, 3)
    polls = 0

    def metrics_each_poll() -> int | None:  # an evaluation that reports and reports, and never trains a step
        nonlocal polls
        polls += 1
        report(path, 3, metrics={"val_loss": 1.0 / polls}, metrics_step=3)
        return None

    training = FakeTraining()
    training.poll = metrics_each_poll  # type: ignore[method-assign]
    sup, _ = make(tmp_path, training, hang_timeout=0.3)
    assert sup.run().outcome == Outcome.HUNG
    assert sup.board.current.metrics == {"val_loss": 1.0 / polls}


def test_a_script_that_never_reports_is_never_judged_hung(tmp_path: Path) -> None:
    sup, _ = make(tmp_path, FakeTraining(code=0, exit_after=20), hang_timeout=0.0)
    assert sup.run().outcome == Outcome.SUCCEEDED


def test_a_stop_request_signals_waits_for_the_checkpoint_and_reports_it(tmp_path: Path) -> None:
    stop = StopSignal()

    def save_and_exit() -> None:  # what trainkit does on SIGUSR1
        ckpt = tmp_path / "ckpt" / "step-00000012"
        ckpt.mkdir(parents=True)
        (ckpt / "state.pt").write_bytes(b"s")
        report(tmp_path / "progress.json", 12, stopped=True, metrics={"val_loss": 0.3}, metrics_step=10)
        training.exit_after = training.polls + 30

    training = FakeTraining(code=0, on_signal=save_and_exit)
    sup, uploader = make(tmp_path, training, stop=stop)
    stop.request(StopRequest("preempt", "spot instance reclaimed at 12:00:00", time.monotonic() + 20, "12:00:00"))
    end = sup.run()
    assert training.signals == [signal.SIGUSR1] and training.stopped_with is None  # it exited by itself
    assert end.outcome == Outcome.PREEMPTED and "emergency checkpoint step-00000012 committed" in end.reason
    assert uploader.emergency_committed == "step-00000012"
    status = sup.board.current  # what the attempt's result repeats, for a preempted attempt too
    assert (status.step, status.metrics, status.metrics_step) == (12, {"val_loss": 0.3}, 10)


def test_without_a_checkpoint_in_time_the_training_is_stopped_anyway_and_it_is_said(tmp_path: Path) -> None:
    stop = StopSignal()
    training = FakeTraining()
    sup, _ = make(tmp_path, training, stop=stop)
    stop.request(StopRequest("cancel", "cancelled: by user", time.monotonic() + 1.0))
    end = sup.run()
    assert training.signals == [signal.SIGUSR1] and training.stopped_with is not None
    assert end.outcome == Outcome.CANCELLED and "no emergency checkpoint appeared in time" in end.reason


def test_a_cancel_without_a_checkpoint_stops_the_training_at_once(tmp_path: Path) -> None:
    stop = StopSignal()
    training = FakeTraining()
    sup, uploader = make(tmp_path, training, stop=stop)
    stop.request(StopRequest("cancel", "cancelled: pruned", time.monotonic() + 300, checkpoint=False))
    started = time.monotonic()
    end = sup.run()
    assert time.monotonic() - started < 1
    assert training.signals == [] and training.stopped_with == STOP_NOW_TRAINING_GRACE  # no SIGUSR1: SIGTERM
    assert end.outcome == Outcome.CANCELLED and "without a checkpoint" in end.reason
    assert uploader.emergency_committed is None
