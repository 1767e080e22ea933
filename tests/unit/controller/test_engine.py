"""The engine's reading of the agents' signals: which ends of attempts are urgent, and their listing."""

from __future__ import annotations

import uuid

import pytest

from orchestrator.contract import ENDED_PHASES, JobLayout, Phase, signal_for, signalled_phase
from orchestrator.controller.engine import _list_signals, signal_urgency
from orchestrator.controller.steps import Urgency
from orchestrator.providers.tencent import StaticCredential, TencentSdk
from orchestrator.providers.tencent.storage import ObjectStore
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
