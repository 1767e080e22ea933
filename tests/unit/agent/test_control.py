"""control.json becomes the agent's stop request: a cancel with its checkpoint (the long grace) or without."""

from __future__ import annotations

import time

import pytest

from orchestrator.agent.control import ControlWatcher
from orchestrator.agent.stop import CANCEL_GRACE_SECONDS, STOP_NOW_SECONDS, StopSignal
from orchestrator.contract import Control
from tests.unit.agent.fakes import MemoryStore

KEY = "cvmjob/job-1/attempts/1/control.json"


@pytest.mark.parametrize(("checkpoint", "grace"), [(True, CANCEL_GRACE_SECONDS), (False, STOP_NOW_SECONDS)])
def test_a_cancel_becomes_a_stop_request_with_its_grace(checkpoint: bool, grace: float) -> None:
    store, stop = MemoryStore(), StopSignal()
    watcher = ControlWatcher(store, KEY, stop)  # type: ignore[arg-type]
    watcher.tick()
    assert stop.current is None  # no control.json yet
    store.put_json(KEY, Control(action="cancel", reason="pruned", checkpoint=checkpoint, time=1.0).model_dump())
    watcher.tick()
    request = stop.current
    assert request is not None and (request.kind, request.checkpoint) == ("cancel", checkpoint)
    assert request.reason == "cancelled: pruned"
    assert grace - 5 < request.remaining() <= grace


def test_an_older_controllers_control_document_still_asks_for_the_checkpoint() -> None:
    store, stop = MemoryStore(), StopSignal()
    store.put_json(KEY, {"layout_version": 1, "action": "cancel", "reason": "by user", "time": time.time()})
    ControlWatcher(store, KEY, stop).tick()  # type: ignore[arg-type]
    assert stop.current is not None and stop.current.checkpoint
