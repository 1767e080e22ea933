"""The store's records, fenced writes and pool claims, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.plan.settings import Settings
from orchestrator.providers.tencent.vocabulary import ChargeType
from orchestrator.state.machine import IllegalTransition, JobState, NodeState
from orchestrator.state.store import (
    CRASH_AT_ENV,
    FencedOut,
    ImageRecord,
    LeaseHeld,
    NodeRecord,
    PoolInstance,
    PoolStore,
    StaleState,
    Store,
    StoreError,
)
from tests.records import TARGET, new_job, plan, spec
from tests.unit.state.conftest import Opener


def node(state: str = "intent", instance_id: str | None = None, attempt: int = 1) -> NodeRecord:
    return NodeRecord("job-1", attempt, 0, "tok", "z", "t", ChargeType.SPOT, 1.5, instance_id, NodeState(state))


def test_records_come_back_decoded_and_another_opening_sees_them(store: Store, open_store: Opener) -> None:
    token = store.acquire("job-1", "a", ttl=30, now=100)
    store.put_node(token, node())
    store.update("job-1", token, 101, outcome=JobState.FAILED, attempt=2, plan=plan(region="r2"), cost_cny=1.25)
    store.request_cancel("job-1", 102)
    again = open_store()  # opening an upgraded store changes nothing
    job = again.get("job-1")
    assert job is not None
    assert (job.name, job.state, job.outcome, job.attempt, job.cost_cny) == ("demo", JobState.PENDING,
                                                                            JobState.FAILED, 2, 1.25)
    assert job.spec == spec("demo") and job.plan == plan(region="r2") and job.target == TARGET
    assert job.settings == Settings(poll_seconds=2.0) and job.source_dir == "/src" and job.cancel_requested is True
    assert (job.created_at, job.updated_at, job.deadline) == (100.0, 102.0, 200.0)
    assert (job.lease_owner, job.lease_token, job.lease_expires) == ("a", token, 130.0)
    [stored] = again.nodes("job-1")
    assert stored == node() and stored.charge_type is ChargeType.SPOT
    assert [e.detail for e in again.events("job-1")] == ["created", "cancel requested"]
    assert again.get("job-2") is None
    again.update("job-1", token, 103, cancel_requested=False, keep_until=300.5, final_step=7, exit_code=1)
    job = again.get("job-1")
    assert job is not None and (job.cancel_requested, job.keep_until, job.final_step, job.exit_code) == (
        False, 300.5, 7, 1)


def test_a_node_or_image_put_again_replaces_the_record(store: Store) -> None:
    token = store.acquire("job-1", "a", ttl=30, now=100)
    store.put_node(token, node())
    store.put_node(token, node("launched", "ins-1"))
    store.put_node(token, node(attempt=2))
    assert [(n.attempt, n.state, n.instance_id) for n in store.nodes("job-1")] == [(1, "launched", "ins-1"),
                                                                                    (2, "intent", None)]
    assert [n.attempt for n in store.nodes("job-1", attempt=2)] == [2]
    store.put_image(token, ImageRecord("img-9", "job-1", "n", "CREATING", 103.0, None))
    store.put_image(token, ImageRecord("img-9", "job-1", "n", "NORMAL", 103.0, None))
    assert store.images() == store.images("job-1") == [ImageRecord("img-9", "job-1", "n", "NORMAL", 103.0, None)]
    assert store.images("job-2") == []


def test_only_the_writable_fields_can_be_updated(store: Store) -> None:
    token = store.acquire("job-1", "a", ttl=30, now=100)
    before = store.get("job-1")
    for field in ("lease_token", "spec", "name"):
        with pytest.raises(ValueError, match=f"jobs.{field} is not writable"):
            store.update("job-1", token, 101, image_id="img-2", **{field: "x"})
    assert store.get("job-1") == before


def test_transitions_are_fenced_checked_and_logged(store: Store) -> None:
    token = store.acquire("job-1", "a", ttl=30, now=100)
    store.transition("job-1", token, JobState.PENDING, JobState.STAGING, "go", 101)
    with pytest.raises(StaleState):
        store.transition("job-1", token, JobState.PENDING, JobState.STAGING, "again", 102)
    with pytest.raises(IllegalTransition):
        store.transition("job-1", token, JobState.STAGING, JobState.SUCCEEDED, "skip teardown", 102)
    events = [(e.from_state, e.to_state) for e in store.events("job-1") if e.kind == "transition"]
    assert events == [(None, "PENDING"), ("PENDING", "STAGING")]
    job = store.get("job-1")
    assert job is not None and (job.state, job.entered_at) == (JobState.STAGING, 101)


def test_second_controller_is_fenced_out(store: Store) -> None:
    first = store.acquire("job-1", "a", ttl=30, now=100)
    with pytest.raises(LeaseHeld):
        store.acquire("job-1", "b", ttl=30, now=110)
    second = store.acquire("job-1", "b", ttl=30, now=131)  # a's lease expired
    assert second != first
    with pytest.raises(FencedOut):
        store.transition("job-1", first, JobState.PENDING, JobState.STAGING, "stale writer", 132)
    with pytest.raises(FencedOut):
        store.put_node(first, node())
    with pytest.raises(FencedOut):
        store.check_lease("job-1", first)
    store.release("job-1", first)  # not first's to release
    assert store.get("job-1").lease_owner == "b"  # type: ignore[union-attr]
    store.transition("job-1", second, JobState.PENDING, JobState.STAGING, "current writer", 133)
    assert store.nodes("job-1") == []
    with pytest.raises(KeyError):
        store.acquire("job-2", "a", ttl=30, now=100)


def test_find_by_prefix_and_name(store: Store) -> None:
    store.create_job(new_job("job_2", "other", deadline=200.0), now=101.0)
    assert [j.job_id for j in store.find("job")] == ["job_2", "job-1"]  # newest first
    assert [j.job_id for j in store.find("job-")] == ["job-1"]
    assert [j.job_id for j in store.find("demo")] == ["job-1"]
    assert [j.job_id for j in store.find("job_")] == ["job_2"]  # _ is not a wildcard
    assert store.find("%") == [] and store.find("nothing") == []
    token = store.acquire("job_2", "a", ttl=30, now=101)
    store.transition("job_2", token, JobState.PENDING, JobState.CANCELLED, "x", 102)
    assert [j.job_id for j in store.list_jobs()] == ["job_2", "job-1"]
    assert [j.job_id for j in store.list_jobs(active_only=True)] == ["job-1"]


def test_pool_claims_are_exclusive_and_idempotent(store: Store) -> None:
    pools = PoolStore(store)
    pools.add(PoolInstance("ins-pool0001", "default", "z-3", "GN7.2XLARGE32", None, 1.0))
    pools.add(PoolInstance("ins-pool0001", "default", "z-9", "other", None, 9.0))  # already known: ignored
    pools.add(PoolInstance("ins-pool0002", "other", "z-3", "GN7.2XLARGE32", None, 1.0))
    assert pools.idle("default", [("z-3", "GN7.2XLARGE32")]) == 1
    assert [m.instance_id for m in pools.members("default")] == ["ins-pool0001"]
    where = [("z-4", "GN7.2XLARGE32"), ("z-3", "GN7.2XLARGE32")]
    claimed = pools.claim("default", where, "job-1/a1n0", 2.0)
    assert claimed == PoolInstance("ins-pool0001", "default", "z-3", "GN7.2XLARGE32", "job-1/a1n0", 2.0)
    again = pools.claim("default", where, "job-1/a1n0", 3.0)  # a retry after a crash: the same member
    assert again is not None and again.instance_id == "ins-pool0001"
    assert pools.claim("default", where, "job-2/a1n0", 3.0) is None  # busy
    pools.release("ins-pool0001", "job-2/a1n0", 4.0)  # not job-2's to give back
    assert pools.members("default")[0].job_id == "job-1/a1n0"
    pools.release("ins-pool0001", "job-1/a1n0", 5.0)
    claimed = pools.claim("default", where, "job-2/a1n0", 6.0)
    assert claimed is not None and claimed.instance_id == "ins-pool0001"
    pools.remove("ins-pool0001")
    assert [m.instance_id for m in pools.members()] == ["ins-pool0002"]


CRASH_SCRIPT = """
import sys
from orchestrator.state.machine import JobState, NodeState
from orchestrator.providers.tencent.vocabulary import ChargeType
from orchestrator.state.store import NodeRecord, Store
store = Store(sys.argv[1])
token = int(sys.argv[2])
store.transition("job-1", token, JobState.PENDING, JobState.STAGING, "go", 101)
store.put_node(token, NodeRecord("job-1", 1, 0, "tok", "z", "t", ChargeType.SPOT, 1.5, "ins-1", NodeState.LAUNCHED))
print("not killed")
"""


@pytest.mark.parametrize("crash_at", ["PENDING->STAGING", "node:launched"])
def test_a_crash_point_kills_the_process_after_the_transition_commits_or_before_the_node_is_written(
    store: Store, store_url: str, crash_at: str, tmp_path: Path
) -> None:
    token = store.acquire("job-1", "a", ttl=30, now=100)
    env = {**os.environ, CRASH_AT_ENV: crash_at}
    result = subprocess.run([sys.executable, "-c", CRASH_SCRIPT, store_url, str(token)], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == -signal.SIGKILL, result.stderr
    job = store.get("job-1")
    assert job is not None and job.state == JobState.STAGING
    assert store.nodes("job-1") == []


def test_a_round_reads_its_jobs_and_their_nodes_in_one_query_each(store: Store) -> None:
    store.create_job(new_job("job-2", "n", deadline=2), now=1)
    token = store.acquire("job-2", "a", ttl=30, now=100)
    node = NodeRecord("job-2", 1, 0, "tok", "z", "t", ChargeType.SPOT, None, None, NodeState.INTENT)
    store.put_node(token, node)
    assert set(store.get_many(["job-1", "job-2", "job-nope"])) == {"job-1", "job-2"}
    assert store.get_many([]) == {}
    assert store.nodes_of(["job-1", "job-2"]) == {"job-1": [], "job-2": [node]}


def test_a_store_locked_past_the_busy_timeout_is_busy_and_changes_nothing(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    from orchestrator.state import store as store_module
    from orchestrator.state.store import StoreBusy

    monkeypatch.setattr(store_module, "BUSY_TIMEOUT", 0.2)
    path = tmp_path / "state.db"
    store = Store(path)
    store.create_job(new_job("job-1", "n", deadline=2), now=1)
    token = store.acquire("job-1", "a", ttl=30, now=1)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process writing, for longer than the timeout
    try:
        with pytest.raises(StoreBusy, match="another process has been writing to it for 0 s; try again"):
            store.update("job-1", token, 2, exit_code=3)
    finally:
        other.execute("ROLLBACK")
        other.close()
    store.update("job-1", token, 2, exit_code=3)  # the lock gone, the same write goes through
    job = store.get("job-1")
    assert job is not None and job.exit_code == 3
    store.close()


def test_jobs_created_since_a_time_and_a_nodes_bill_with_its_source_and_training_time(store: Store) -> None:
    """What `cvmjob cost` reads: the jobs created since --since, and each node's bill, where it came from and how
    long it trained."""
    store.create_job(new_job("job-2", "n", deadline=300), now=150)
    assert [j.job_id for j in store.list_jobs(since=150)] == ["job-2"]  # created at or after
    assert [j.job_id for j in store.list_jobs(since=100)] == ["job-2", "job-1"]
    assert store.list_jobs(since=151) == []
    token = store.acquire("job-1", "a", ttl=30, now=100)
    billed = NodeRecord("job-1", 1, 0, "tok", "z", "t", ChargeType.SPOT, 1.5, "ins-1", NodeState.GONE, running_at=110.0,
                        ended_at=230.0, cost_cny=0.05, cost_source="bill", training_seconds=90.5)
    store.put_node(token, billed)
    assert store.nodes("job-1") == [billed]
    assert billed.ran_seconds(now=999) == 120.0 and billed.priced(1.5, now=999) == pytest.approx(0.05)


def test_a_new_sqlite_store_and_its_journal_are_readable_by_their_owner_only(tmp_path: Path) -> None:
    # It holds every job's spec, train.env values (often tokens) included; it was created 0644.
    path = tmp_path / "home" / "state.db"
    store = Store(str(path))
    store.register_controller("c", 1.0, {})  # a write: the -wal file exists from here on
    for name in ("state.db", "state.db-wal"):
        assert (path.parent / name).stat().st_mode & 0o777 == 0o600, name
    store.close()


def test_a_job_whose_record_was_edited_by_hand_into_no_spec_is_one_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = Store(path)
    store.create_job(new_job("job-1"), now=1.0)
    db = sqlite3.connect(path)
    db.execute("UPDATE jobs SET spec_json = '{\"name\": \"demo\"}'")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match=r"job job-1 in the store cannot be read \(spec\.region: Field required\): "
                                         "its record was changed outside cvmjob"):
        store.get("job-1")
    store.close()
