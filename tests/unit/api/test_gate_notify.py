"""A CI run's missed gate: recorded, sent from the runner itself, once per attempt whoever tells it."""

from __future__ import annotations

import pytest

from orchestrator import api
from orchestrator.errors import EXIT_GATE_FAILED
from orchestrator.notify.events import for_gate
from orchestrator.state.machine import JobState
from orchestrator.state.outbox import Outbox
from orchestrator.state.store import Store
from tests.receiver import Receiver
from tests.records import job_record, new_job, spec

MISSED = ["gate val_loss<=0.3: 0.41, over by 0.11"]


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


def test_the_runner_sends_only_its_own_jobs_notifications(store: Store, receiver: Receiver,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Another job's pending notification, whose webhook variable this runner lacks, is left to its controller."""
    monkeypatch.delenv("OTHER_HOOK", raising=False)
    other = spec(notify=[{"url_env": "OTHER_HOOK", "format": "wecom"}])
    store.create_job(new_job("job-2", job_spec=other), now=80.0)
    Outbox(store).add(for_gate(job_record("job-2", state=JobState.SUCCEEDED, spec=other), MISSED, 80.0), 80.0)
    _succeeded(store, None, receiver.url("json"))
    job = job_record("job-1", state=JobState.SUCCEEDED, spec=spec(notify=[{"url": receiver.url("json")}]))
    api.notify_gate_missed(store, job, MISSED, now=lambda: 100.0)
    assert len(receiver.bodies("json")) == 1
    [untouched] = Outbox(store).of("job-2")
    assert (untouched.state, untouched.tries, untouched.last_error) == ("pending", 0, "")
