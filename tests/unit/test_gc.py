"""`cvmjob gc` collects only what is provably finished or abandoned. A resource of a job this store does not know is
judged by the job's document in the region's buckets (another store's live job is not ours to judge, whatever
``$USER@hostname`` tagged it); an instance TerminateInstances refuses in its state (PENDING) is looked at again
until it takes it, while the rest are collected."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator import api
from orchestrator.contract.tags import TAG_JOB, TAG_OWNER
from orchestrator.providers.tencent import StaticCredential, TencentSdk, compute, images
from orchestrator.providers.tencent.errors import StateConflictError
from orchestrator.providers.tencent.storage import ObjectStore
from orchestrator.providers.tencent.vocabulary import ChargeType
from orchestrator.state import jobdoc
from orchestrator.state.machine import JobState
from orchestrator.state.store import JobRecord, Store
from tests.emulator_process import EmulatorProcess, start_emulator
from tests.records import TARGET, new_job, plan
from tests.waiting import wait_until

REGION, ZONE, TYPE = "ap-guangzhou", "ap-guangzhou-3", "S5.MEDIUM4"
ME, NOW, GRACE = "me@host", 1_000_000.0, 600.0
DEAD_HERE = "me@host/0123456789abcdef/4242/deadbeef"  # the name of a controller of this home that has exited


@pytest.fixture
def job(tmp_path: Path) -> JobRecord:
    """A job as a store has it: its state and lease holder are replaced for each case."""
    store = Store(tmp_path / "other.db")
    target = dataclasses.replace(TARGET, region=REGION)
    store.create_job(new_job("job-0000000a", "n", job_plan=plan(region=REGION), target=target, deadline=2.0), 1.0)
    found = store.get("job-0000000a")
    store.close()
    assert found is not None
    return found


def orphaned(job: JobRecord | api.Missing, *, in_store: bool = False, owner: str = ME, age: float | None = 3600.0
             ) -> bool:
    tags = {TAG_JOB: "job-0000000a", TAG_OWNER: owner}
    return api.orphaned(job, in_store, tags, None if age is None else NOW - age, NOW, GRACE, ME,
                        lambda holder: holder == DEAD_HERE)


def test_a_job_of_this_store_is_collected_once_terminal_whoever_tagged_it(job: JobRecord) -> None:
    assert orphaned(dataclasses.replace(job, state=JobState.FAILED_ERROR), in_store=True, owner="x", age=0)
    assert not orphaned(dataclasses.replace(job, state=JobState.RUNNING), in_store=True)


def test_another_stores_job_is_collected_only_when_its_document_proves_it_ended_or_abandoned(job: JobRecord) -> None:
    running = dataclasses.replace(job, state=JobState.RUNNING, lease_owner="me@host/fedcba9876543210/77/12345678")
    assert not orphaned(running)  # the same $USER@hostname, another home's live controller: the defect
    assert not orphaned(dataclasses.replace(running, lease_owner=None))  # waiting for a controller
    assert orphaned(dataclasses.replace(running, lease_owner=DEAD_HERE))  # this home's controller died
    assert not orphaned(dataclasses.replace(running, lease_owner=DEAD_HERE), age=GRACE - 1)
    assert orphaned(dataclasses.replace(running, state=JobState.CANCELLED), age=0)  # ended: at once


def test_a_job_with_no_document_in_any_bucket_is_collected_after_the_grace_and_one_unread_never() -> None:
    assert orphaned(api.Missing.ABSENT)
    assert not orphaned(api.Missing.ABSENT, age=GRACE - 1)
    assert not orphaned(api.Missing.ABSENT, age=None)  # no creation time: its age is unknown
    assert not orphaned(api.Missing.UNREADABLE)  # a lookup failed: unknown is not gone


def test_another_users_resources_are_not_ours_to_judge(job: JobRecord) -> None:
    assert not orphaned(dataclasses.replace(job, state=JobState.CANCELLED), owner="you@host")
    assert not orphaned(api.Missing.ABSENT, owner="you@host")


# -- against the emulator -------------------------------------------------------------------------------------
def sdk_of(emulator: EmulatorProcess) -> TencentSdk:
    return TencentSdk(StaticCredential(emulator.secret_id, emulator.secret_key), REGION, emulator.endpoint,
                      emulator.appid)


def launch(sdk: TencentSdk, job_id: str) -> str:
    image = images.public(sdk)[0].image_id
    request = compute.LaunchRequest(ZONE, TYPE, ChargeType.ON_DEMAND, image, f"gc-test-{job_id}-{time.time()}",
                                    "gc-test", {TAG_JOB: job_id, TAG_OWNER: ME})
    return compute.run_instances(sdk, request)[0]


def put_document(sdk: TencentSdk, bucket: str, record: JobRecord) -> None:
    state = ObjectStore(sdk, bucket)
    state.create_bucket()
    jobdoc.publish(state, record, [], [])


def test_find_orphans_reads_other_stores_documents_in_every_bucket_of_the_region(
        emulator: EmulatorProcess, job: JobRecord, tmp_path: Path) -> None:
    sdk = sdk_of(emulator)
    live, ended, unknown = "job-000000b1", "job-000000b2", "job-000000b3"
    # Another store's live job keeps its state in a bucket of its own (storage.bucket): not the default one.
    put_document(sdk, f"elsewhere-{emulator.appid}", dataclasses.replace(
        job, job_id=live, state=JobState.RUNNING, lease_owner="me@host/fedcba9876543210/77/12345678"))
    put_document(sdk, f"cvmjob-ap-guangzhou-{emulator.appid}",
                 dataclasses.replace(job, job_id=ended, state=JobState.CANCELLED))
    ids = {launch(sdk, j): j for j in (live, ended, unknown)}
    found = api.find_orphans(Store(tmp_path / "state.db"), sdk, time.time() + 1, 0.0, ME)
    assert sorted(ids[i.instance_id] for i in found.instances) == [ended, unknown]
    # The unknown one: not before the grace. By id: an instance may have left PENDING between the two looks.
    later = api.find_orphans(Store(tmp_path / "state.db"), sdk, time.time() + 1, 3600.0, ME).instances
    assert [ids[i.instance_id] for i in later] == [ended]


@pytest.fixture
def manual_cloud(tmp_path: Path) -> Iterator[EmulatorProcess]:
    """An emulator whose time moves only when told: an instance stays PENDING until then."""
    server = start_emulator(tmp_path / "state", "--clock", "manual", "--boot-seconds", "30")
    yield server
    server.stop()


def test_the_emulator_refuses_to_terminate_a_pending_instance_as_the_cloud_does(manual_cloud: EmulatorProcess) -> None:
    """tencent-cloud-api.md §2.4: TerminateInstances answers UnsupportedOperation.InstanceStatePending; what gc
    waits out is what the real cloud does."""
    sdk = sdk_of(manual_cloud)
    pending = launch(sdk, "job-000000e1")
    with pytest.raises(StateConflictError) as refused:
        compute.terminate(sdk, [pending])
    assert refused.value.code == "UnsupportedOperation.InstanceStatePending"
    assert compute.describe(sdk, [pending])[pending].state.value == "PENDING"


def test_gc_waits_for_a_pending_instance_and_collects_the_rest_meanwhile(manual_cloud: EmulatorProcess,
                                                                        tmp_path: Path) -> None:
    sdk, admin = sdk_of(manual_cloud), manual_cloud.admin
    running = launch(sdk, "job-000000c1")
    admin.advance(31)
    wait_until("the first instance RUNNING", lambda: compute.describe(sdk, [running])[running].state.terminable, 30)
    pending = launch(sdk, "job-000000c2")
    found = api.find_orphans(Store(tmp_path / "state.db"), sdk, admin.now() + 1, 0.0, ME)
    assert {i.instance_id: i.state.value for i in found.instances} == {running: "RUNNING", pending: "PENDING"}

    looks: list[float] = []

    def sleep(seconds: float) -> None:
        if not looks:  # the first wait: the running one is already on its way, the pending one untouched
            states = {i: v.state.value for i, v in compute.describe(sdk, [running, pending]).items()}
            assert states == {running: "TERMINATING", pending: "PENDING"}, states
        looks.append(seconds)
        admin.advance(seconds)

    api.collect_orphans(sdk, found, wait_seconds=120, sleep=sleep, clock=admin.now)
    assert looks  # it waited rather than failing on UnsupportedOperation.InstanceStatePending
    gone = compute.describe(sdk, [running, pending])
    assert all(v.state.leaving for v in gone.values()), gone
    refused = [c for c in admin.calls(action="TerminateInstances") if c.get("error")]
    assert refused == [], refused


def test_a_pending_instance_past_the_wait_is_named_and_everything_else_is_collected(
        manual_cloud: EmulatorProcess, tmp_path: Path) -> None:
    sdk, admin = sdk_of(manual_cloud), manual_cloud.admin
    pending = launch(sdk, "job-000000d1")
    found = api.find_orphans(Store(tmp_path / "state.db"), sdk, admin.now() + 1, 0.0, ME)
    with pytest.raises(api.GcIncomplete, match=rf"{pending} .*PENDING.*`cvmjob gc` again"):
        api.collect_orphans(sdk, found, wait_seconds=10, sleep=admin.advance, clock=admin.now)
