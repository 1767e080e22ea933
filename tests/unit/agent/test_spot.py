from __future__ import annotations

import time
from datetime import datetime, timezone

from orchestrator.agent.spot import MAX_NOTICE, MIN_NOTICE, SpotWatcher, parse_termination_time, seconds_left
from orchestrator.agent.status import StatusBoard
from orchestrator.agent.stop import StopSignal


def test_the_notice_time_is_china_standard_time() -> None:
    expected = datetime(2018, 8, 18, 4, 5, 33, tzinfo=timezone.utc).timestamp()
    assert parse_termination_time("2018-08-18 12:05:33") == expected
    assert parse_termination_time("2018-08-18T04:05:33+00:00") == expected
    assert parse_termination_time("soon") is None


def test_time_left_follows_the_notice_within_sane_bounds() -> None:
    now = parse_termination_time("2018-08-18 12:05:33")
    assert now is not None
    assert seconds_left("2018-08-18 12:06:03", now) == 30
    assert seconds_left("2018-08-18 12:05:00", now) == MIN_NOTICE  # a clock ahead of the service's
    assert seconds_left("2018-08-18 13:00:00", now) == MAX_NOTICE  # the notice comes 2 minutes ahead
    assert seconds_left("garbage", now) == MAX_NOTICE


class FakeMetadata:
    def __init__(self) -> None:
        self.notice: str | None = None

    def get(self, path: str) -> str | None:
        assert path == "spot/termination-time"
        return self.notice


def test_a_notice_becomes_one_preempt_request_and_shows_in_the_status() -> None:
    metadata, stop, board = FakeMetadata(), StopSignal(), StatusBoard(1, 0, "ins-1")
    now = parse_termination_time("2018-08-18 12:05:33")
    assert now is not None
    watcher = SpotWatcher(metadata, stop, board, clock=lambda: now)  # type: ignore[arg-type]
    watcher.tick()
    assert stop.current is None
    metadata.notice = "2018-08-18 12:06:33"
    watcher.tick()
    request = stop.current
    assert request is not None and request.kind == "preempt" and request.notice_time == "2018-08-18 12:06:33"
    assert 55 < request.deadline - time.monotonic() <= 60
    assert board.snapshot([]).notice_time == "2018-08-18 12:06:33"
    metadata.notice = "2018-08-18 12:05:40"
    watcher.tick()
    assert stop.current == request  # one notice is enough
