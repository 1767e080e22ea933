from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.lifecycle.machine import IllegalTransition, JobState
from orchestrator.state.store import FencedOut, LeaseHeld, NodeRecord, StaleState, Store


def new_store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "state.db")
    store.create_job(
        "job-1",
        "demo",
        {"name": "demo"},
        {"region": "r", "image_id": "img-1"},
        {"kind": "emulator"},
        now=100.0,
        deadline=200.0,
        source_dir="/src",
        settings={},
    )
    return store


def test_migrations_are_named_and_applied_once(tmp_path: Path) -> None:
    new_store(tmp_path)
    again = Store(tmp_path / "state.db")  # reopening applies nothing twice
    names = [r["name"] for r in again._db().execute("SELECT name FROM migrations ORDER BY name")]
    assert names == ["0001_initial", "0002_job_source_dir", "0003_reserved_pool", "0004_drop_emulator_seed"]
    job = again.get("job-1")
    assert job is not None and job.source_dir == "/src" and job.state == JobState.PENDING


def test_a_stored_spec_loses_the_retired_emulator_seed_field(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    spec = '{"name": "demo", "data": [{"source": "cos://b-1250000000/d/", "target": "d", "emulator_seed": "x/"}]}'
    with store._db() as db:  # as a store written before 0004 left it
        db.execute("UPDATE jobs SET spec_json = ? WHERE job_id = 'job-1'", (spec,))
        db.execute("DELETE FROM migrations WHERE name = '0004_drop_emulator_seed'")
    job = Store(tmp_path / "state.db").get("job-1")
    assert job is not None and job.spec["data"] == [{"source": "cos://b-1250000000/d/", "target": "d"}]


def test_transitions_are_fenced_checked_and_logged(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    token = store.acquire("job-1", "a", ttl=30, now=100)
    store.transition("job-1", token, JobState.PENDING, JobState.STAGING, "go", 101)
    with pytest.raises(StaleState):
        store.transition("job-1", token, JobState.PENDING, JobState.STAGING, "again", 102)
    with pytest.raises(IllegalTransition):
        store.transition("job-1", token, JobState.STAGING, JobState.SUCCEEDED, "skip teardown", 102)
    events = [(e.from_state, e.to_state) for e in store.events("job-1") if e.kind == "transition"]
    assert events == [(None, "PENDING"), ("PENDING", "STAGING")]
    assert store.entered_at("job-1") == 101


def test_second_controller_is_fenced_out(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    first = store.acquire("job-1", "a", ttl=30, now=100)
    with pytest.raises(LeaseHeld):
        store.acquire("job-1", "b", ttl=30, now=110)
    second = store.acquire("job-1", "b", ttl=30, now=131)  # a's lease expired
    assert second == first + 1
    with pytest.raises(FencedOut):
        store.transition("job-1", first, JobState.PENDING, JobState.STAGING, "stale writer", 132)
    with pytest.raises(FencedOut):
        store.put_node(first, NodeRecord("job-1", 1, 0, "tok", "z", "t", "POSTPAID_BY_HOUR", 1.0, None, "intent"))
    store.transition("job-1", second, JobState.PENDING, JobState.STAGING, "current writer", 133)


def test_find_by_prefix_and_name(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    assert [j.job_id for j in store.find("job-")] == ["job-1"]
    assert [j.job_id for j in store.find("demo")] == ["job-1"]
    assert store.find("nothing") == []


def test_pool_claims_are_exclusive_and_idempotent(tmp_path: Path) -> None:
    from orchestrator.state.store import PoolInstance, PoolStore

    pools = PoolStore(new_store(tmp_path))
    pools.add(PoolInstance("ins-pool0001", "default", "z-3", "GN7.2XLARGE32", None, 1.0))
    assert pools.idle("default", [("z-3", "GN7.2XLARGE32")]) == 1
    where = [("z-4", "GN7.2XLARGE32"), ("z-3", "GN7.2XLARGE32")]
    claimed = pools.claim("default", where, "job-1/a1n0", 2.0)
    assert claimed is not None and claimed.instance_id == "ins-pool0001" and claimed.zone == "z-3"
    again = pools.claim("default", where, "job-1/a1n0", 3.0)  # a retry after a crash: the same member
    assert again is not None and again.instance_id == "ins-pool0001"
    assert pools.claim("default", where, "job-2/a1n0", 3.0) is None  # busy
    pools.release("ins-pool0001", "job-2/a1n0", 4.0)  # not job-2's to give back
    assert pools.members()[0].job_id == "job-1/a1n0"
    pools.release("ins-pool0001", "job-1/a1n0", 5.0)
    claimed = pools.claim("default", where, "job-2/a1n0", 6.0)
    assert claimed is not None and claimed.instance_id == "ins-pool0001"
