"""Following a job from outside its controller: api.log_chunks and api.follow_logs read the log chunks its agents
shipped, in order; api.cancel asks its controller, through this store when it holds the job, else through a signal
in the job's state bucket; a job that ended is neither waited for nor cancelled again."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from orchestrator import api
from orchestrator.contract import JobLayout
from orchestrator.providers.tencent import TencentSdk
from orchestrator.providers.tencent.storage import ObjectStore
from orchestrator.state.machine import JobState
from orchestrator.state.store import JobRecord, Store
from orchestrator.target import Target
from tests.records import new_job, plan

JOB = "job-0000abcd"
LAYOUT = JobLayout(JOB)


@pytest.fixture
def job(store: Store, target: Target) -> JobRecord:
    """This store's job, PENDING, whose state bucket is there."""
    store.create_job(new_job(JOB, job_plan=plan(state_bucket=f"cvmjob-ap-guangzhou-{target.appid}"), target=target),
                     now=1.0)
    found = store.get(JOB)
    assert found is not None
    return found


@pytest.fixture
def state(sdk: TencentSdk, job: JobRecord) -> ObjectStore:
    bucket = ObjectStore(sdk, job.plan.state_bucket)
    bucket.create_bucket()
    return bucket


def ended(store: Store, job: JobRecord) -> JobRecord:
    token = store.acquire(job.job_id, "test", ttl=60.0, now=2.0)
    store.transition(job.job_id, token, JobState.PENDING, JobState.CANCELLED, "cancelled", now=3.0)
    store.release(job.job_id, token)
    found = store.get(job.job_id)
    assert found is not None and found.state.is_terminal()
    return found


# -- logs -------------------------------------------------------------------------------------------------------
def test_log_chunks_come_in_order_after_the_key_given(job: JobRecord, state: ObjectStore) -> None:
    for seq in (2, 0, 1):
        state.put_bytes(LAYOUT.log_chunk(1, 0, seq), f"line {seq}\n".encode())
    state.put_bytes(LAYOUT.log_chunk(1, 1, 0), b"node 1\n")
    state.put_bytes(LAYOUT.log_chunk(2, 0, 0), b"attempt 2\n")
    keys = [LAYOUT.log_chunk(1, 0, seq) for seq in range(3)]
    assert list(api.log_chunks(job, attempt=1)) == [(keys[0], "line 0\n"), (keys[1], "line 1\n"),
                                                     (keys[2], "line 2\n")]
    assert list(api.log_chunks(job, attempt=1, after=keys[1])) == [(keys[2], "line 2\n")]
    assert [text for _, text in api.log_chunks(job, attempt=1, node=1)] == ["node 1\n"]
    assert [text for _, text in api.log_chunks(job, attempt=2)] == ["attempt 2\n"]
    assert list(api.log_chunks(job, attempt=3)) == []


def test_a_chunk_that_is_not_utf8_is_read_with_replacements(job: JobRecord, state: ObjectStore) -> None:
    state.put_bytes(LAYOUT.log_chunk(1, 0, 0), b"loss \xff\xfe 0.5\n")
    assert [text for _, text in api.log_chunks(job, attempt=1)] == ["loss \ufffd\ufffd 0.5\n"]


def test_the_current_attempts_log_is_read_unless_one_is_named(job: JobRecord, state: ObjectStore) -> None:
    state.put_bytes(LAYOUT.log_chunk(1, 0, 0), b"first\n")
    state.put_bytes(LAYOUT.log_chunk(2, 0, 0), b"second\n")
    assert [text for _, text in api.log_chunks(dataclasses.replace(job, attempt=2))] == ["second\n"]


def test_follow_logs_of_an_ended_job_gives_every_chunk_once_and_returns(store: Store, job: JobRecord,
                                                                        state: ObjectStore) -> None:
    for seq in range(3):
        state.put_bytes(LAYOUT.log_chunk(1, 0, seq), f"{seq}\n".encode())
    looks: list[JobRecord] = []
    done = ended(store, job)
    assert list(api.follow_logs(store, done, attempt=1, follow=True, each_look=looks.append)) == ["0\n", "1\n", "2\n"]
    assert looks == []  # it ended: nothing to watch for
    assert list(api.follow_logs(store, job, attempt=1)) == ["0\n", "1\n", "2\n"]  # without follow: what is there


# -- cancel and wait ---------------------------------------------------------------------------------------------
def test_cancel_of_this_stores_job_is_requested_in_the_store(store: Store, job: JobRecord) -> None:
    api.cancel(store, job, now=lambda: 5.0, checkpoint=False)
    asked = store.get(JOB)
    assert asked is not None and (asked.cancel_requested, asked.cancel_checkpoint) == (True, False)
    assert [(e.kind, e.detail, e.at) for e in store.events(JOB)][-1] == ("note", "cancel requested (no checkpoint)",
                                                                        5.0)


def test_cancel_of_another_machines_job_is_a_signal_in_its_state_bucket(tmp_path: Path, job: JobRecord,
                                                                        state: ObjectStore) -> None:
    elsewhere = Store(tmp_path / "other.db")  # a store that does not hold the job
    api.cancel(elsewhere, job, now=lambda: 5.0)
    assert state.get_json(LAYOUT.cancel_signal(True)) == {"time": 5.0, "checkpoint": True}
    api.cancel(elsewhere, job, now=lambda: 6.0, checkpoint=False)
    assert state.get_json(LAYOUT.cancel_signal(False)) == {"time": 6.0, "checkpoint": False}
    assert LAYOUT.cancel_signal(True) != LAYOUT.cancel_signal(False)
    elsewhere.close()


def test_an_ended_job_is_not_cancelled_again_nor_waited_for(store: Store, job: JobRecord, state: ObjectStore,
                                                           tmp_path: Path) -> None:
    done = ended(store, job)
    before = store.events(JOB)
    api.cancel(store, done)
    elsewhere = Store(tmp_path / "other.db")
    api.cancel(elsewhere, done)
    elsewhere.close()
    after = store.get(JOB)
    assert store.events(JOB) == before and after is not None and not after.cancel_requested
    assert list(state.iter_objects(LAYOUT.signals_prefix)) == []
    assert api.wait(store, done) == done
