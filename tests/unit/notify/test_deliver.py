"""The sender against a receiver on 127.0.0.1, over a real store: sent once, retried with backoff, never blocking."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import get_args

import pytest
from sqlalchemy import update

from orchestrator.notify import deliver
from orchestrator.notify.deliver import Deliverer
from orchestrator.notify.events import Moved, for_move
from orchestrator.spec.notify import NotifyEvent
from orchestrator.state.machine import JobState
from orchestrator.state.outbox import CLAIM_SECONDS, Outbox, UnreadableNotification
from orchestrator.state.schema import notifications
from orchestrator.state.store import Store
from tests.receiver import Receiver
from tests.records import job_record, new_job, spec


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = Store(store_url)
    yield opened
    opened.close()


def _ended(store: Store, url: str, fmt: str = "json", job_id: str = "job-1") -> None:
    """``job_id``, notifying ``url`` (every event), cancelled at 100 (its notification recorded with the move)."""
    where = {"url": url} if fmt == "json" else {"url_env": "HOOK"}
    job_spec = spec(notify=[{**where, "format": fmt, "on": ["cancelled"]}])
    store.create_job(new_job(job_id, job_spec=job_spec), now=90.0)
    token = store.acquire(job_id, "a", 60, 90.0)
    move = Moved(JobState.CANCELLED, "cancelled while pending")
    store.transition(job_id, token, JobState.PENDING, JobState.CANCELLED, move.reason, 100.0,
                     notices=for_move(job_record(job_id, spec=job_spec), move, 100.0))


def test_a_notification_is_recorded_with_its_transition_and_sent_once(store: Store, receiver: Receiver) -> None:
    _ended(store, receiver.url("json"))
    outbox = Outbox(store)
    [pending] = outbox.of("job-1")
    assert (pending.state, pending.event, pending.tries) == ("pending", "cancelled", 0)

    assert Deliverer(outbox, "a", now=lambda: 101.0).send_due()
    assert not Deliverer(outbox, "b", now=lambda: 102.0).send_due()  # sent: nothing left for anyone

    assert [b["id"] for b in receiver.bodies("json")] == ["job-1/cancelled/1"]
    [sent] = outbox.of("job-1")
    assert (sent.state, sent.tries, sent.sent_at) == ("sent", 1, 101.0)


def test_two_senders_never_hold_one_notification_together(store: Store) -> None:
    _ended(store, "http://127.0.0.1:9/never")
    outbox = Outbox(store)
    assert len(outbox.claim("a", 101.0)) == 1
    assert outbox.claim("b", 101.0 + CLAIM_SECONDS - 1) == []  # a's claim holds
    assert len(outbox.claim("b", 101.0 + CLAIM_SECONDS)) == 1  # a died without a word: b sends it


def test_a_failing_receiver_is_tried_again_later_and_given_up_after_the_last_try(
        store: Store, receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    _ended(store, receiver.url("down"))
    outbox = Outbox(store)
    now = [101.0]
    sender = Deliverer(outbox, "a", now=lambda: now[0])
    waits = []
    for _ in range(deliver.MAX_TRIES):
        assert sender.send_due()
        [row] = outbox.of("job-1")
        if row.state == "gave_up":
            break
        waits.append(row.next_at - now[0])
        assert not sender.send_due()  # not due before its time
        now[0] = row.next_at
    assert waits[:4] == [10.0, 20.0, 40.0, 80.0] and max(waits) == deliver.LONGEST_RETRY_SECONDS
    assert (row.state, row.tries, row.last_error) == ("gave_up", deliver.MAX_TRIES, "HTTP 500: down")
    assert len(receiver.bodies("down")) == deliver.MAX_TRIES


def test_a_receiver_that_never_answers_costs_one_timeout_and_no_more(store: Store, receiver: Receiver) -> None:
    _ended(store, receiver.url("silent"))
    sender = Deliverer(Outbox(store), "a", now=lambda: 101.0, timeout=0.3)
    started = time.monotonic()
    sender.send_due()
    assert time.monotonic() - started < 1.5
    [row] = Outbox(store).of("job-1")
    assert row.state == "pending" and row.tries == 1 and "timed out" in row.last_error


def test_a_webhook_url_is_read_from_the_controllers_environment_and_never_kept(
        store: Store, receiver: Receiver) -> None:
    secret_url = receiver.url("wecom") + "?key=hunter2"
    _ended(store, receiver.url("wecom"), fmt="wecom")
    outbox = Outbox(store)
    Deliverer(outbox, "a", now=lambda: 101.0, environ={}).send_due()
    [row] = outbox.of("job-1")
    assert row.last_error == "$HOOK is not set in this controller's environment"

    Deliverer(outbox, "a", now=lambda: row.next_at, environ={"HOOK": secret_url}).send_due()
    [row] = outbox.of("job-1")
    assert row.state == "sent" and receiver.bodies("wecom")[0]["msgtype"] == "markdown"
    assert "hunter2" not in json.dumps(row.target) + json.dumps(row.body) + row.last_error


@pytest.mark.parametrize(("column", "garbage", "problem"), [
    ("body", "{", "body is not JSON"),
    ("target", "[1, 2]", "target is not a JSON object"),
])
def test_a_row_changed_outside_cvmjob_is_named_and_given_up_and_the_rows_after_it_are_still_sent(
        store: Store, receiver: Receiver, column: str, garbage: str, problem: str) -> None:
    _ended(store, receiver.url("json"), job_id="job-1")
    _ended(store, receiver.url("json"), job_id="job-2")
    with store._write() as conn:
        conn.execute(update(notifications).where(notifications.c.subject == "job-1").values({column: garbage}))
    outbox = Outbox(store)
    with pytest.raises(UnreadableNotification, match=rf"notification 1 of job-1 .*\({problem}.*DELETE FROM "
                                                     r"notifications WHERE id = 1"):
        outbox.of("job-1")

    assert Deliverer(outbox, "a", now=lambda: 101.0).send_due()
    assert [b["id"] for b in receiver.bodies("json")] == ["job-2/cancelled/1"]
    with store._read() as conn:
        row = conn.execute(notifications.select().where(notifications.c.subject == "job-1")).one()
    assert row.state == "gave_up" and problem in row.last_error
    assert not Deliverer(outbox, "b", now=lambda: 200.0).send_due()  # given up: never claimed again


def test_a_target_that_does_not_want_the_event_gets_nothing(store: Store) -> None:
    job_spec = spec(notify=[{"url": "http://127.0.0.1:9/x", "on": ["succeeded"]}])
    job = job_record(spec=job_spec)
    assert for_move(job, Moved(JobState.FAILED, "exit 3"), 0.0) == []
    assert [n.event for n in for_move(job, Moved(JobState.SUCCEEDED, "done"), 0.0)] == ["succeeded"]


@pytest.mark.parametrize(("move", "events"), [
    (Moved(JobState.CANCELLED, "cancelled"), ["cancelled"]),
    (Moved(JobState.FAILED_BUDGET, "max_cost"), ["failed", "budget_reached"]),
    (Moved(JobState.FAILED_HUNG, "no progress"), ["failed"]),
    (Moved(JobState.RECOVERING, "spot reclaim", reclaimed=True), ["reclaimed"]),
    (Moved(JobState.RECOVERING, "launch failed"), []),
    (Moved(JobState.RUNNING, "agent reports"), []),
])
def test_which_transitions_notify(move: Moved, events: list[str]) -> None:
    job = job_record(spec=spec(notify=[{"url": "http://127.0.0.1:9/x", "on": list(get_args(NotifyEvent))}]))
    assert [n.event for n in for_move(job, move, 0.0)] == events
