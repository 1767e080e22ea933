"""A CI run's missed gate: recorded, sent from the runner itself, once per attempt whoever tells it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from orchestrator import api
from orchestrator.errors import EXIT_GATE_FAILED
from orchestrator.state.machine import JobState
from orchestrator.state.outbox import Outbox
from orchestrator.state.store import Store
from tests.receiver import Receiver, receiving
from tests.records import job_record, new_job, spec

MISSED = ["gate val_loss<=0.3: 0.41, over by 0.11"]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as found:
        yield found


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = Store(store_url)
    yield opened
    opened.close()


def _succeeded(store: Store, on: list[str] | None, url: str) -> None:
    target = {"url": url} if on is None else {"url": url, "on": on}
    store.create_job(new_job("job-1", job_spec=spec(notify=[target])), now=90.0)


def test_a_missed_gate_is_sent_before_the_runner_exits_and_once_per_attempt(store: Store, receiver: Receiver
                                                                            ) -> None:
    _succeeded(store, None, receiver.url("json"))  # the default events: the ends, a CI run's verdict among them
    job = job_record("job-1", state=JobState.SUCCEEDED, spec=spec(notify=[{"url": receiver.url("json")}]))
    api.notify_gate_missed(store, job, MISSED, now=lambda: 100.0)
    [body] = receiver.bodies("json")
    assert (body["event"], body["id"], body["job"]["exit_code"]) == ("gate_missed", "job-1/gate_missed/1",
                                                                      EXIT_GATE_FAILED)
    assert body["job"]["reason"] == MISSED[0] and "missed its gates" in body["text"]

    api.notify_gate_missed(store, job, MISSED, now=lambda: 200.0)  # a second runner reusing the same job
    assert len(receiver.bodies("json")) == 1
    assert [n.state for n in Outbox(store).of("job-1")] == ["sent"]


def test_a_target_that_did_not_ask_for_it_gets_nothing(store: Store, receiver: Receiver) -> None:
    _succeeded(store, ["succeeded"], receiver.url("json"))
    job = job_record("job-1", state=JobState.SUCCEEDED,
                     spec=spec(notify=[{"url": receiver.url("json"), "on": ["succeeded"]}]))
    api.notify_gate_missed(store, job, MISSED, now=lambda: 100.0)
    assert receiver.bodies("json") == [] and Outbox(store).of("job-1") == []
