"""The engine's reading of the agents' signals: which ends of attempts are urgent, and their listing."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any, cast

import pytest

from orchestrator.contract import ENDED_PHASES, JobLayout, Phase, signal_for, signalled_phase
from orchestrator.controller.engine import Engine, _list_signals, signal_urgency
from orchestrator.controller.steps import Urgency
from orchestrator.lifecycle.lease import LeaseGuard, LeaseLost
from orchestrator.providers.tencent import StaticCredential, TencentSdk
from orchestrator.providers.tencent.storage import ObjectStore
from orchestrator.state.store import StoreBusy
from tests.emulator_process import EmulatorProcess

BASE = JobLayout("job-1").signal(2, 0)


@pytest.mark.parametrize("phase", sorted(ENDED_PHASES, key=lambda p: p.value))
def test_a_signal_names_its_phase(phase: Phase) -> None:
    assert signalled_phase(signal_for(BASE, phase)) == phase


def test_a_reclaim_is_urgent_and_an_ended_training_waits_behind_it() -> None:
    assert signal_urgency(signal_for(BASE, Phase.PREEMPTED)) == Urgency.NOW
    for phase in (Phase.DONE, Phase.FAILED, Phase.CANCELLED):
        assert signal_urgency(signal_for(BASE, phase)) == Urgency.SOON


@pytest.mark.parametrize("key", [BASE, BASE + ".unknown"])
def test_a_signal_that_names_no_phase_is_urgent(key: str) -> None:
    """An agent of an earlier release put its signal at the bare key: it may be a reclaim."""
    assert signalled_phase(key) is None
    assert signal_urgency(key) == Urgency.NOW


def test_a_state_bucket_not_created_yet_has_no_signals(emulator: EmulatorProcess) -> None:
    """A first job creates the bucket at STAGING; until then the listing is empty, not a warning each round."""
    sdk = TencentSdk(StaticCredential(emulator.secret_id, emulator.secret_key), "ap-guangzhou", emulator.endpoint,
                     emulator.appid)
    state = ObjectStore(sdk, f"cvmjob-{uuid.uuid4().hex[:8]}-{emulator.appid}")
    assert _list_signals(state) == (state, [])
    state.create_bucket()
    key = signal_for(BASE, Phase.PREEMPTED)
    state.put_bytes(key, b"")
    assert _list_signals(state) == (state, [key])


class _Renewals:
    """A store whose lease renewals fail while ``down`` (a PostgreSQL outage, a locked SQLite file)."""

    def __init__(self) -> None:
        self.down = False
        self.tries = 0

    def renew_all(self, owner: str, tokens: dict[str, int], ttl: float, now: float) -> set[str]:
        self.tries += 1
        if self.down:
            raise StoreBusy("the store did not answer")
        return set()


def test_cloud_calls_stop_once_renewals_failed_for_the_ttl_less_a_margin() -> None:
    """Issue 27, item 7: a renewal that fails is tried again at every round, and the jobs' guards refuse every
    cloud call once the last one that succeeded is older than two thirds of the TTL, on the monotonic clock (the
    wall clock may be stepped); a renewal that succeeds again lets them act."""
    wall, mono = [1_000.0], [50.0]
    store = _Renewals()
    engine = Engine(cast(Any, store), "me", now=lambda: wall[0], clock=lambda: mono[0], workers=1, lease_seconds=30)
    try:
        def reclaim() -> None:  # the guard's own renewal, as the engine's: the same store
            store.renew_all("me", {"job-1": 1}, 30, wall[0])

        guard = LeaseGuard("job-1", 30, lambda: None, reclaim, lambda: mono[0])
        engine.held["job-1"] = cast(Any, SimpleNamespace(token=1, executor=SimpleNamespace(guard=guard)))

        def after(seconds: float) -> None:
            wall[0] += seconds
            mono[0] += seconds

        after(11)
        engine._renew()
        store.down = True
        after(11)  # 22 s after hold, 11 s after the last renewal
        with pytest.raises(StoreBusy):
            engine._renew()
        guard.check()
        after(1)
        with pytest.raises(StoreBusy):
            engine._renew()  # not a third of the TTL later: at the next round
        assert store.tries == 3
        after(9)  # 21 s since the last renewal that succeeded
        with pytest.raises(LeaseLost):
            guard.check()
        wall[0] -= 3600  # the wall clock stepped back: nothing changes
        with pytest.raises(LeaseLost):
            guard.check()
        store.down = False
        engine._renew()
        guard.check()
    finally:
        engine.held.clear()
        engine.close()
