from __future__ import annotations

import socket
import threading
import time

import pytest

from orchestrator.agent import rendezvous
from orchestrator.agent.errors import AttemptEnded
from orchestrator.agent.metadata import MetadataError
from orchestrator.agent.stop import StopRequest, StopSignal
from orchestrator.contract import Outcome
from tests.unit.agent.fakes import MemoryStore

KEY = "cvmjob/j/attempts/1/rendezvous.json"


class Metadata:
    def __init__(self, address: str) -> None:
        self.address = address

    def get(self, path: str) -> str | None:
        return self.address if path == "local-ipv4" else None


def test_node_zero_publishes_its_address_and_a_free_port_and_the_others_find_it() -> None:
    store = MemoryStore()
    found: list[rendezvous.Rendezvous] = []
    waiter = threading.Thread(target=lambda: found.append(rendezvous.wait_for(store, KEY, StopSignal())))  # type: ignore[arg-type]
    waiter.start()
    time.sleep(0.1)
    published = rendezvous.publish(store, KEY, Metadata("127.16.0.9"), "ins-0")  # type: ignore[arg-type]
    waiter.join(10)
    assert published.host == "127.16.0.9" and published.is_host  # an emulated instance's own loopback address
    assert found == [rendezvous.Rendezvous("127.16.0.9", published.port, is_host=False)]
    with socket.socket() as sock:
        sock.bind(("127.16.0.9", published.port))  # it was free


def test_a_node_reaches_node_zero_once_its_store_listens() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        port = server.getsockname()[1]
        started = threading.Timer(1.2, server.listen)  # refused at first: node 0's torchrun is starting
        started.start()
        rendezvous.reach(rendezvous.Rendezvous("127.0.0.1", port, False), 1, ["sg-0000abcd"], StopSignal(), 30)
        started.join()


def test_dropped_connections_end_the_attempt_naming_the_groups_and_the_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    def dropped(address: tuple[str, int], timeout: float) -> socket.socket:
        raise TimeoutError("timed out")

    monkeypatch.setattr(rendezvous.socket, "create_connection", dropped)
    with pytest.raises(AttemptEnded) as ended:
        rendezvous.reach(rendezvous.Rendezvous("10.0.0.5", 29400, False), 1, ["sg-0000abcd"], StopSignal(), 60)
    assert ended.value.outcome == Outcome.PREFLIGHT_FAILED
    assert ended.value.reason == (
        "node 1 cannot reach node 0's rendezvous at 10.0.0.5:29400: the connection is dropped, so sg-0000abcd do "
        "not admit the job's nodes to each other. add an inbound rule to sg-0000abcd from sg-0000abcd itself, "
        "protocol ALL, action ACCEPT (or leave network.security_groups unset: cvmjob's own group admits its members)")


def test_a_store_that_never_listens_ends_the_attempt_after_the_timeout() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))  # bound, never listening: refused
        port = server.getsockname()[1]
        with pytest.raises(AttemptEnded) as ended:
            rendezvous.reach(rendezvous.Rendezvous("127.0.0.1", port, False), 2, [], StopSignal(), timeout=0.5)
    assert ended.value.outcome == Outcome.AGENT_ERROR
    assert ended.value.reason == f"node 0's rendezvous 127.0.0.1:{port} did not answer within 0 s"


def test_waiting_ends_on_a_stop_request_or_the_timeout() -> None:
    stop = StopSignal()
    stop.request(StopRequest("cancel", "cancelled: by user", time.monotonic() + 60))
    with pytest.raises(AttemptEnded) as ended:
        rendezvous.wait_for(MemoryStore(), KEY, stop)  # type: ignore[arg-type]
    assert ended.value.outcome == Outcome.CANCELLED
    with pytest.raises(AttemptEnded) as ended:
        rendezvous.wait_for(MemoryStore(), KEY, StopSignal(), timeout=0.1)  # type: ignore[arg-type]
    assert ended.value.outcome == Outcome.AGENT_ERROR and "no rendezvous" in ended.value.reason


class Busy(Metadata):
    """A metadata service that times out ``busy`` times before it answers."""

    def __init__(self, address: str, busy: int) -> None:
        super().__init__(address)
        self.busy = busy

    def get(self, path: str) -> str | None:
        if self.busy:
            self.busy -= 1
            raise MetadataError(f"metadata {path}: timed out")
        return super().get(path)


def test_a_metadata_service_slow_to_answer_is_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rendezvous.time, "sleep", lambda seconds: None)
    assert rendezvous.node_address(Busy("10.0.0.5", busy=2)) == "10.0.0.5"  # type: ignore[arg-type]
    with pytest.raises(AttemptEnded) as ended:
        rendezvous.node_address(Busy("10.0.0.5", busy=rendezvous.ADDRESS_LOOKS))  # type: ignore[arg-type]
    assert ended.value.outcome == Outcome.AGENT_ERROR
    assert ended.value.reason == "the metadata service did not answer: metadata local-ipv4: timed out"
