"""Waiting for the NVIDIA driver that the node's UserData installs (Tencent's auto-install, staging/bootstrap.py):
the setup commands and the preflight need it, and it takes about ten minutes after boot. The wait is bounded by
``limits.bootstrap_timeout`` from the agent's start; past it the attempt fails with the installer's last words.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from orchestrator.contract import Outcome, Phase
from orchestrator.providers.tencent import network

from . import gpus, host
from .errors import AttemptEnded
from .status import StatusBoard
from .stop import StopSignal

log = logging.getLogger(__name__)

FIRST_LOOK_SECONDS = 0.5
LOOK_SECONDS = 10.0  # between looks once the first ones found nothing: an install takes minutes


def wait_for_driver(version: str, timeout: float, board: StatusBoard, stop: StopSignal,
                    answers: Callable[[], bool] = gpus.driver_answers,
                    clock: Callable[[], float] = time.monotonic) -> None:
    """Return once the driver answers; AttemptEnded when ``timeout`` seconds pass first, or a stop comes."""
    if answers():
        return
    started = clock()
    board.set_phase(Phase.SETUP, f"installing the NVIDIA driver {version} (Tencent's auto-install)")
    log.info("waiting for the NVIDIA driver %s (Tencent's auto-install)", version)
    pause = FIRST_LOOK_SECONDS
    while not answers():
        waited = clock() - started
        if waited >= timeout:
            raise AttemptEnded(Outcome.SETUP_FAILED,
                               f"the NVIDIA driver {version} did not install within {waited:.0f} s "
                               f"(limits.bootstrap_timeout): {installer_said()}")
        stop.event.wait(min(pause, max(0.0, timeout - waited)))
        stop.check()
        pause = min(pause * 2, LOOK_SECONDS)
    log.info("the NVIDIA driver %s answers after %.0f s", version, clock() - started)
    board.set_phase(Phase.SETUP)


def installer_said(lines: int = 3) -> str:
    """The last lines of the installer's log, for the error that ends a wait."""
    path = host.instance_root() / "tmp" / network.DRIVER_LOG
    try:
        tail = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()][-lines:]
    except OSError:
        return f"its log {path} does not exist (did the UserData run?)"
    return f"its log {path} ends: {' | '.join(tail)}" if tail else f"its log {path} is empty"
