from __future__ import annotations

import pytest

from orchestrator.agent.errors import AttemptEnded
from orchestrator.agent.stop import StopRequest, StopSignal
from orchestrator.contract import Outcome


def test_the_first_request_fixes_the_kind_and_a_later_one_only_brings_the_deadline_closer() -> None:
    stop = StopSignal()
    stop.check()
    stop.request(StopRequest("cancel", "cancelled: by user", deadline=300))
    stop.request(StopRequest("preempt", "reclaimed", deadline=100, notice_time="2024-01-01 00:00:00"))
    stop.request(StopRequest("preempt", "reclaimed", deadline=200))
    current = stop.current
    assert current is not None
    assert (current.kind, current.deadline, current.notice_time) == ("cancel", 100, "2024-01-01 00:00:00")
    assert stop.event.is_set()
    with pytest.raises(AttemptEnded) as ended:
        stop.check()
    assert ended.value.outcome == Outcome.CANCELLED
