"""Leases for many controllers: claims, renewals, takeovers and the replicas' table, on both backends."""

from __future__ import annotations

import threading
from collections.abc import Callable

import psycopg
import pytest
from sqlalchemy import create_engine, text

from orchestrator.state.machine import JobState
from orchestrator.state.store import ControllerRecord, FencedOut, LeaseRecord, Store
from tests.postgres import fresh_database
from tests.records import new_job
from tests.unit.state.conftest import Opener


def add_jobs(store: Store, count: int, first_at: float = 0.0) -> list[str]:
    ids = [f"job-{n:03d}" for n in range(count)]
    for n, job_id in enumerate(ids):
        store.create_job(new_job(job_id, f"n{n}"), now=first_at + n)
    return ids


def finish(store: Store, job_id: str, owner: str) -> int:
    """The job cancelled by ``owner``, whose lease (its token returned) stays live."""
    token = store.acquire(job_id, owner, ttl=30, now=1)
    store.transition(job_id, token, JobState.PENDING, JobState.CANCELLED, "done", 1)
    return token


def test_claim_takes_free_jobs_oldest_first_up_to_the_limit(open_store: Opener) -> None:
    store = open_store()
    ids = add_jobs(store, 5)
    finish(store, ids[0], "someone")  # terminal, its lease left live: never claimed
    store.acquire(ids[1], "b", ttl=30, now=10)  # b's live lease
    claimed = dict(store.claim("a", ttl=30, now=10, limit=2))
    assert list(claimed) == [ids[2], ids[3]]
    again = dict(store.claim("a", ttl=30, now=11, limit=10))
    assert list(again) == [ids[2], ids[3], ids[4]]  # ours again, each with a new token
    assert all(again[job_id] != token for job_id, token in claimed.items())
    assert store.claim("c", ttl=30, now=12, limit=10) == []  # every active job is held
    store.create_job(new_job("job-new", "new"), now=50)
    assert [job_id for job_id, _ in store.claim("a", ttl=30, now=13, limit=1, held=[ids[2], ids[3], ids[4]])] == [
        "job-new"]
    assert store.get(ids[2]).lease_token == again[ids[2]]  # type: ignore[union-attr]  # held: left as it was
    job = store.get(ids[4])
    assert job is not None and (job.lease_owner, job.lease_token, job.lease_expires) == ("a", again[ids[4]], 41.0)


def test_terminal_jobs_are_never_claimed(open_store: Opener) -> None:
    store = open_store()
    [job_id] = add_jobs(store, 1)
    store.release(job_id, finish(store, job_id, "someone"))
    assert store.claim("a", ttl=30, now=1000, limit=10) == []


def test_an_expired_lease_is_taken_over_and_the_old_holder_is_fenced_out(open_store: Opener) -> None:
    a, b = open_store(), open_store()  # two controllers, each with its own connections
    ids = add_jobs(a, 3)
    held = dict(a.claim("a", ttl=30, now=100, limit=3))
    assert b.claim("b", ttl=30, now=129, limit=3) == []  # a's leases are live until 130
    assert a.renew_all("a", held, ttl=30, now=110) == set()  # now live until 140
    assert b.claim("b", ttl=30, now=135, limit=3) == []
    taken = dict(b.claim("b", ttl=30, now=141, limit=2))  # a stopped renewing: its leases expired at 140
    assert list(taken) == ids[:2] and all(taken[job_id] != held[job_id] for job_id in taken)
    assert a.renew_all("a", held, ttl=30, now=142) == {ids[0], ids[1]}  # lost; the third is renewed
    assert a.get(ids[2]).lease_expires == 172  # type: ignore[union-attr]
    stale = held[ids[0]]
    writes: list[Callable[[], None]] = [
        lambda: a.transition(ids[0], stale, JobState.PENDING, JobState.STAGING, "stale", 143),
        lambda: a.note(ids[0], stale, "note", "stale", 143),
        lambda: a.update(ids[0], stale, 143, attempt=1),
        lambda: a.renew(ids[0], stale, 30, 143),
        lambda: a.check_lease(ids[0], stale),
    ]
    for write in writes:
        with pytest.raises(FencedOut):
            write()
    job = b.get(ids[0])
    assert job is not None and job.state == JobState.PENDING and job.attempt == 0 and job.lease_owner == "b"
    assert [e.detail for e in b.events(ids[0])] == ["created"]
    b.transition(ids[0], taken[ids[0]], JobState.PENDING, JobState.STAGING, "b drives it", 144)


def test_renew_all_reports_released_and_unknown_jobs_as_lost(open_store: Opener) -> None:
    store = open_store()
    ids = add_jobs(store, 2)
    held = dict(store.claim("a", ttl=30, now=0, limit=2))
    store.release(ids[0], held[ids[0]])
    assert store.renew_all("a", {**held, "job-gone": 1}, ttl=30, now=1) == {ids[0], "job-gone"}
    assert store.renew_all("a", {}, ttl=30, now=1) == set()
    assert store.renew_all("b", {ids[1]: held[ids[1]]}, ttl=30, now=1) == {ids[1]}  # the token is a's


def claim_at_once(stores: dict[str, Store], now: float, limit: int) -> dict[str, list[tuple[str, int]]]:
    """What each controller (owner: its store) got, all claiming at the same moment from their own threads."""
    start = threading.Barrier(len(stores))
    got: dict[str, list[tuple[str, int]]] = {}
    errors: list[BaseException] = []

    def controller(owner: str) -> None:
        try:
            start.wait()
            got[owner] = stores[owner].claim(owner, ttl=300, now=now, limit=limit)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=controller, args=(owner,)) for owner in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    return got


def test_controllers_claiming_at_once_never_get_the_same_job(open_store: Opener) -> None:
    """Four controllers ask for 12 jobs each, at the same moment, from 40: each job goes to exactly one. Twice:
    the second time every lease has expired, and new controllers take all of them over."""
    ids = add_jobs(open_store(), 40)
    for now, owners in ((10.0, "abcd"), (400.0, "efgh")):
        stores = {owner: open_store() for owner in owners}
        got = claim_at_once(stores, now, limit=12)
        assert sorted(job_id for batch in got.values() for job_id, _ in batch) == ids  # all of them, none twice
        for owner, batch in got.items():
            for job_id, token in batch:
                job = stores[owner].get(job_id)
                assert job is not None and (job.lease_owner, job.lease_token) == (owner, token)


@pytest.mark.postgres
def test_on_postgresql_a_claim_skips_the_jobs_another_claim_has_locked(postgres_url: str) -> None:
    with fresh_database(postgres_url) as url:
        store = Store(url)
        try:
            ids = add_jobs(store, 3)
            with psycopg.connect(url) as other:  # a claim in flight elsewhere holds the oldest job's row
                other.execute("SELECT 1 FROM jobs WHERE job_id = %s FOR UPDATE", (ids[0],))
                assert [job_id for job_id, _ in store.claim("a", ttl=30, now=0, limit=2)] == ids[1:]
            assert [job_id for job_id, _ in store.claim("b", ttl=30, now=0, limit=2)] == ids[:1]
        finally:
            store.close()


def test_live_leases_by_owner(open_store: Opener) -> None:
    store = open_store()
    ids = add_jobs(store, 3)
    store.claim("b", ttl=30, now=0, limit=1)
    store.claim("a", ttl=10, now=0, limit=2)
    assert store.leases(now=5) == [
        LeaseRecord(ids[1], "n1", JobState.PENDING, "a", 10.0),
        LeaseRecord(ids[2], "n2", JobState.PENDING, "a", 10.0),
        LeaseRecord(ids[0], "n0", JobState.PENDING, "b", 30.0),
    ]
    assert [lease.job_id for lease in store.leases(now=10)] == [ids[0]]  # a's expired


def test_controllers_register_beat_and_leave(open_store: Opener) -> None:
    store = open_store()
    store.register_controller("a", now=100, info={"pid": 1, "host": "h"})
    store.register_controller("b", now=101, info={})
    assert store.beat_controller("a", now=120) is True
    assert store.live_controllers(now=125, ttl=10) == [ControllerRecord("a", 100.0, 120.0, {"pid": 1, "host": "h"})]
    assert [c.owner for c in store.live_controllers(now=105, ttl=10)] == ["a", "b"]
    store.register_controller("a", now=130, info={"pid": 2})  # restarted under the same name
    assert store.live_controllers(now=130, ttl=10) == [ControllerRecord("a", 130.0, 130.0, {"pid": 2})]
    store.remove_controller("a")
    assert store.beat_controller("a", now=131) is False
    assert store.live_controllers(now=131, ttl=100) == [ControllerRecord("b", 101.0, 101.0, {})]


def test_count_active_counts_the_jobs_that_have_not_ended(store_url: str) -> None:
    store = Store(store_url)
    for job_id in ("job-a", "job-b"):
        store.create_job(new_job(job_id, "n", deadline=2.0), 1.0)
    token = store.acquire("job-a", "me", 30, 1.0)
    store.transition("job-a", token, JobState.PENDING, JobState.CANCELLED, "cancelled", 2.0)
    assert store.count_active() == 1


def test_a_controller_finds_the_cancels_it_has_to_act_on(open_store: Opener) -> None:
    store = open_store()
    ids = add_jobs(store, 4)
    held = dict(store.claim("a", ttl=30, now=10, limit=3))
    store.acquire(ids[3], "b", ttl=30, now=10)
    for job_id in ids:
        store.request_cancel(job_id, 11)
    store.transition(ids[2], held[ids[2]], JobState.PENDING, JobState.STAGING, "staging", 12)
    assert sorted(store.cancels_for("a", {JobState.PENDING})) == [ids[0], ids[1]]  # not b's, not STAGING
    assert sorted(store.cancels_for("a", {JobState.PENDING, JobState.STAGING})) == ids[:3]
    assert store.cancels_for("c", {JobState.PENDING}) == []


def test_a_cancel_without_a_checkpoint_wins_over_one_with_it(open_store: Opener) -> None:
    store = open_store()
    first, second = add_jobs(store, 2)
    store.request_cancel(first, 11, checkpoint=False)
    store.request_cancel(first, 12)  # a later graceful cancel does not bring the checkpoint back
    store.request_cancel(second, 11)
    jobs = store.get_many([first, second])
    assert (jobs[first].cancel_requested, jobs[first].cancel_checkpoint) == (True, False)
    assert (jobs[second].cancel_requested, jobs[second].cancel_checkpoint) == (True, True)
    assert [e.detail for e in store.events(first)][-2:] == ["cancel requested (no checkpoint)", "cancel requested"]


def lose_commit(store_url: str, job_id: str, lease: tuple[str | None, int, float]) -> None:
    """The job's lease columns put back as they were before a commit that a failover lost (the commit reached the
    old primary only: an asynchronous replica, or ``synchronous_commit=off`` and a crash), as the promoted
    server shows them."""
    url = store_url if "://" in store_url else f"sqlite:///{store_url}"
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE jobs SET lease_owner = :owner, lease_token = :token, lease_expires = :expires"
                              " WHERE job_id = :job_id"),
                         {"owner": lease[0], "token": lease[1], "expires": lease[2], "job_id": job_id})
    finally:
        engine.dispose()


@pytest.mark.parametrize("second", ["b", "a"])  # another replica; a replica restarted under the same name
@pytest.mark.parametrize("take", ["acquire", "claim"])
def test_a_lease_whose_commit_was_lost_is_never_handed_out_again(open_store: Opener, store_url: str, take: str,
                                                                 second: str) -> None:
    """Issue 27, item 6: controller a takes the lease, the commit is lost, and the next controller that takes it
    gets another token, so a (still running, still holding its token) passes no fence of the promoted store."""
    a, b = open_store(), open_store()
    [job_id] = add_jobs(a, 1)
    first = a.get(job_id)
    assert first is not None

    def take_lease(store: Store, owner: str, now: float) -> int:
        if take == "acquire":
            return store.acquire(job_id, owner, ttl=30, now=now)
        [(taken, token)] = store.claim(owner, ttl=30, now=now, limit=1)
        assert taken == job_id
        return token

    stale = take_lease(a, "a", 10)
    lose_commit(store_url, job_id, (first.lease_owner, first.lease_token, first.lease_expires))
    current = take_lease(b, second, 11)
    assert current != stale
    writes: list[Callable[[], None]] = [
        lambda: a.transition(job_id, stale, JobState.PENDING, JobState.STAGING, "stale", 12),
        lambda: a.note(job_id, stale, "note", "stale", 12),
        lambda: a.update(job_id, stale, 12, attempt=1),
        lambda: a.renew(job_id, stale, 30, 12),
        lambda: a.check_lease(job_id, stale),
    ]
    for write in writes:
        with pytest.raises(FencedOut):
            write()
    assert a.renew_all("a", {job_id: stale}, ttl=30, now=12) == {job_id}
    a.release(job_id, stale)  # gives back nothing: the lease is the other's
    job = b.get(job_id)
    assert job is not None and (job.state, job.attempt, job.lease_owner, job.lease_token) == (
        JobState.PENDING, 0, second, current)
    b.transition(job_id, current, JobState.PENDING, JobState.STAGING, "the second holder drives it", 13)
