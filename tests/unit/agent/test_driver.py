"""Waiting for the NVIDIA driver the UserData installs."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.agent import driver
from orchestrator.agent.errors import AttemptEnded
from orchestrator.agent.status import StatusBoard
from orchestrator.agent.stop import StopRequest, StopSignal
from orchestrator.contract import Outcome, Phase


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Installing:
    """A driver that answers at the ``ready``-th look; each look moves the clock on by ``step`` seconds."""

    def __init__(self, clock: Clock, ready: int, step: float = 1.0) -> None:
        self.clock, self.ready, self.step, self.looks = clock, ready, step, 0

    def __call__(self) -> bool:
        self.looks += 1
        self.clock.now += self.step
        return self.looks >= self.ready


@pytest.fixture(autouse=True)
def _instance(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TENCENTCLOUD_EMULATOR_ROOT", str(tmp_path))
    monkeypatch.setattr(driver, "FIRST_LOOK_SECONDS", 0.0)
    monkeypatch.setattr(driver, "LOOK_SECONDS", 0.0)


def test_a_driver_already_there_is_not_waited_for() -> None:
    board, clock = StatusBoard(1, 0, "ins-1"), Clock()
    driver.wait_for_driver("535.161.07", 60, board, StopSignal(), Installing(clock, ready=1), clock)
    assert board.current.phase == Phase.STARTING  # nothing said: nothing installed


def test_the_agent_says_it_waits_for_the_driver_then_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    board, clock = StatusBoard(1, 0, "ins-1"), Clock()
    said: list[tuple[Phase, str]] = []
    monkeypatch.setattr(board, "set_phase", lambda phase, message="": said.append((phase, message)))
    installing = Installing(clock, ready=4)
    driver.wait_for_driver("535.161.07", 60, board, StopSignal(), installing, clock)
    assert installing.looks == 4
    assert said == [(Phase.SETUP, "installing the NVIDIA driver 535.161.07 (Tencent's auto-install)"),
                    (Phase.SETUP, "")]


def test_a_driver_that_never_comes_fails_the_attempt_with_the_installers_last_words(tmp_path: Path) -> None:
    (tmp_path / "tmp").mkdir()
    (tmp_path / "tmp" / "auto_install.log").write_text("downloading\n\nE: Unable to locate package cuda-12-4\n")
    clock = Clock()
    with pytest.raises(AttemptEnded) as ended:
        driver.wait_for_driver("535.161.07", 30, StatusBoard(1, 0, "i"), StopSignal(), Installing(clock, 99, 7), clock)
    assert ended.value.outcome == Outcome.SETUP_FAILED
    assert ended.value.reason == ("the NVIDIA driver 535.161.07 did not install within 35 s "
                                  "(limits.bootstrap_timeout): "
                                  f"its log {tmp_path}/tmp/auto_install.log ends: downloading | E: Unable to locate "
                                  "package cuda-12-4")


def test_a_missing_installer_log_says_the_user_data_may_not_have_run(tmp_path: Path) -> None:
    assert driver.installer_said() == f"its log {tmp_path}/tmp/auto_install.log does not exist (did the UserData run?)"


def test_a_cancel_ends_the_wait() -> None:
    stop, clock = StopSignal(), Clock()
    stop.request(StopRequest(kind="cancel", reason="cancelled by the user", deadline=0.0))
    with pytest.raises(AttemptEnded) as ended:
        driver.wait_for_driver("535.161.07", 600, StatusBoard(1, 0, "i"), stop, Installing(clock, 99), clock)
    assert ended.value.outcome == Outcome.CANCELLED
