"""retrying() under a guard (issue 27, item 7): the guard is consulted before every attempt, and its refusal stops
the retried call before the cloud sees another attempt."""

from __future__ import annotations

import pytest

from orchestrator.providers.tencent.errors import TransientError
from orchestrator.providers.tencent.retry import guarded, retrying, waited


class Refused(Exception):
    pass


def test_every_attempt_is_preceded_by_the_guard_and_its_refusal_stops_the_retries() -> None:
    calls: list[str] = []

    def call() -> None:
        calls.append("call")
        raise TransientError("InternalError", "injected")

    def check(waited: bool) -> None:
        calls.append(f"check {waited}")
        if calls.count("check True") == 2:  # the lease was lost while the call waited to be tried again
            raise Refused()

    with guarded(check), pytest.raises(Refused):
        retrying(call, max_wait=0.01)
    assert calls == ["check False", "call", "check True", "call", "check True"]
    assert retrying(lambda: 5) == 5  # outside, no guard


def test_a_guard_is_left_behind_with_its_block_and_asked_after_other_waits() -> None:
    seen: list[bool] = []
    with guarded(seen.append):
        assert retrying(lambda: "ok") == "ok"
        waited()  # an API token's wait, say
    retrying(lambda: None)
    waited()
    assert seen == [False, True]
