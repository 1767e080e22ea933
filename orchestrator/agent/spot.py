"""The spot reclaim notice: ``spot/termination-time`` on the metadata service (404 until a notice).

The value is the reclaim time as local time in UTC+8 ("2018-08-18 12:05:33", not ISO 8601); the notice comes
two minutes ahead (shared/reference/tencent-cloud-api.md §3). Clocks can disagree (and the emulator's clock can
be moved), so the time left is taken from the notice but kept within [MIN_NOTICE, MAX_NOTICE] seconds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

from .metadata import Metadata
from .status import StatusBoard
from .stop import StopRequest, StopSignal

log = logging.getLogger(__name__)

NOTICE_PATH = "spot/termination-time"
CHINA_STANDARD_TIME = timezone(timedelta(hours=8))
MIN_NOTICE, MAX_NOTICE = 5.0, 120.0


def parse_termination_time(text: str) -> float | None:
    """The reclaim time as a Unix time; None if the text is not a time."""
    for parse in (lambda t: datetime.strptime(t, "%Y-%m-%d %H:%M:%S"), datetime.fromisoformat):
        try:
            moment = parse(text.strip())
        except ValueError:
            continue
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=CHINA_STANDARD_TIME)
        return moment.timestamp()
    return None


def seconds_left(text: str, now: float) -> float:
    reclaim = parse_termination_time(text)
    left = MAX_NOTICE if reclaim is None else reclaim - now
    return min(max(left, MIN_NOTICE), MAX_NOTICE)


class SpotWatcher:
    def __init__(self, metadata: Metadata, stop: StopSignal, board: StatusBoard,
                 clock: Callable[[], float] = time.time) -> None:
        self.metadata = metadata
        self.stop = stop
        self.board = board
        self.clock = clock
        self.notice: str | None = None

    def tick(self) -> None:
        if self.notice is not None:
            return
        text = self.metadata.get(NOTICE_PATH)
        if not text:
            return
        self.notice = text
        left = seconds_left(text, self.clock())
        log.warning("spot reclaim notice: termination-time %s (%.0f s left)", text, left)
        self.board.set_notice(text)
        self.stop.request(StopRequest("preempt", f"spot instance reclaimed at {text}", time.monotonic() + left,
                                      notice_time=text))
