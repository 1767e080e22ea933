from __future__ import annotations

import socket
import threading
import time

import pytest

from orchestrator.agent import rendezvous
from orchestrator.agent.errors import AttemptEnded
from orchestrator.agent.stop import StopRequest, StopSignal
from orchestrator.contract import Outcome
from tests.unit.agent.fakes import MemoryStore

KEY = "cvmjob/j/attempts/1/rendezvous.json"


def test_node_zero_publishes_a_free_port_and_the_others_find_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENCENTCLOUD_EMULATOR_ROOT", "/tmp/instance")  # every emulated node shares loopback
    store = MemoryStore()
    found: list[rendezvous.Rendezvous] = []
    waiter = threading.Thread(target=lambda: found.append(rendezvous.wait_for(store, KEY, StopSignal())))  # type: ignore[arg-type]
    waiter.start()
    time.sleep(0.1)
    published = rendezvous.publish(store, KEY, None, "ins-0")  # type: ignore[arg-type]
    waiter.join(10)
    assert published.host == "127.0.0.1" and published.is_host
    assert found == [rendezvous.Rendezvous("127.0.0.1", published.port, is_host=False)]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", published.port))  # it was free


def test_waiting_ends_on_a_stop_request_or_the_timeout() -> None:
    stop = StopSignal()
    stop.request(StopRequest("cancel", "cancelled: by user", time.monotonic() + 60))
    with pytest.raises(AttemptEnded) as ended:
        rendezvous.wait_for(MemoryStore(), KEY, stop)  # type: ignore[arg-type]
    assert ended.value.outcome == Outcome.CANCELLED
    with pytest.raises(AttemptEnded) as ended:
        rendezvous.wait_for(MemoryStore(), KEY, StopSignal(), timeout=0.1)  # type: ignore[arg-type]
    assert ended.value.outcome == Outcome.AGENT_ERROR and "no rendezvous" in ended.value.reason
