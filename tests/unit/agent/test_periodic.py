from __future__ import annotations

import logging
import time

import pytest

from orchestrator.agent.heartbeat import Heartbeat
from orchestrator.agent.periodic import Periodic
from orchestrator.agent.status import StatusBoard
from orchestrator.contract import Phase, Progress, Status
from orchestrator.providers.tencent import errors
from tests.unit.agent.fakes import MemoryStore


def test_a_failing_heartbeat_is_logged_once_and_the_next_beat_goes_out(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    board = StatusBoard(2, 1, "ins-1")
    beat = Periodic("heartbeat", 60, Heartbeat(board, store, "status.json", lambda: []).tick)  # type: ignore[arg-type]
    store.fail_next += [errors.TransientError("InternalError", "COS is down")] * 2
    with caplog.at_level(logging.WARNING):
        assert not beat.run_once()
        assert not beat.run_once()
    assert [r.getMessage() for r in caplog.records] == ["heartbeat: InternalError: COS is down"]
    board.set_phase(Phase.TRAINING)
    board.set_progress(Progress(step=12, loss=0.25, time=time.time(), metrics={"val_loss": 0.5}, metrics_step=9))
    assert beat.run_once()
    status = Status.model_validate(store.get_json("status.json"))
    assert (status.phase, status.step, status.loss, status.seq, status.node_rank) == (Phase.TRAINING, 12, 0.25, 3, 1)
    assert (status.metrics, status.metrics_step) == ({"val_loss": 0.5}, 9)


def test_a_phase_change_wakes_the_heartbeat_thread_at_once() -> None:
    store = MemoryStore()
    board = StatusBoard(1, 0, "ins-1")
    beat = Periodic("heartbeat", 60, Heartbeat(board, store, "status.json", lambda: []).tick,  # type: ignore[arg-type]
                    wake=board.changed).start()
    try:
        deadline = time.monotonic() + 5
        while store.get_json("status.json") is None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        board.set_phase(Phase.SYNCING)
        while store.get_json("status.json")["phase"] != "syncing":
            assert time.monotonic() < deadline, "the phase change waited for the next beat"
            time.sleep(0.01)
    finally:
        beat.stop()


def test_the_end_of_an_attempt_is_signalled_once_after_its_status(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    board = StatusBoard(1, 0, "ins-1")
    beat = Heartbeat(board, store, "status.json", lambda: [], signal_key="signals/job-1/1-0")  # type: ignore[arg-type]
    board.set_phase(Phase.TRAINING)
    beat.tick()
    assert store.puts == ["status.json"]  # training: nothing to signal
    board.set_phase(Phase.PREEMPTED, "spot reclaim notice")
    beat.tick()
    beat.tick()
    # once, status first, the phase in its key
    assert store.puts == ["status.json", "status.json", "signals/job-1/1-0.preempted", "status.json"]
    assert store.get_json("signals/job-1/1-0.preempted")["phase"] == "preempted"
    board.set_phase(Phase.FAILED)

    def refused(key: str, data: bytes, content_type: str = "") -> object:
        if key.startswith("signals/"):  # a CAM role without write access there
            raise errors.CloudError("AccessDenied", "no")
        return MemoryStore.put_bytes(store, key, data)

    store.put_bytes = refused  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING):
        beat.tick()  # the status goes out; the signal's refusal is only logged
    assert store.get_json("status.json")["phase"] == "failed"
    assert [r.getMessage() for r in caplog.records] == [
        "could not signal the controller (AccessDenied: no): it sees the status at its next look"]
