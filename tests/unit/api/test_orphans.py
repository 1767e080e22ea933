"""api.find_orphans (`cvmjob gc`) on the emulator, for what tests/unit/test_gc.py leaves: this store's jobs are
judged by their state whoever tagged their resources; a job.json this release cannot read keeps its job's
resources (unknown is not gone); another owner's are never looked up; a succeeded job's image is its product, kept
whichever store holds the job, while a failed capture and a failed job's image are garbage. api.gc with dry_run
collects nothing."""

from __future__ import annotations

import dataclasses
import time

import pytest

from orchestrator import api
from orchestrator.contract import JobLayout
from orchestrator.contract.tags import TAG_JOB, TAG_OWNER, owner
from orchestrator.providers.tencent import TencentSdk, compute, images
from orchestrator.providers.tencent.storage import ObjectStore
from orchestrator.providers.tencent.vocabulary import ChargeType
from orchestrator.state import jobdoc
from orchestrator.state.machine import JobState
from orchestrator.state.store import JobRecord, Store
from orchestrator.target import Target
from tests.emulator_process import EmulatorProcess
from tests.records import job_record, new_job, plan
from tests.waiting import wait_until

ZONE, TYPE = "ap-guangzhou-3", "S5.MEDIUM4"
ME = "me@host"


def launch(sdk: TencentSdk, job_id: str, tagged_by: str = ME) -> str:
    image = images.public(sdk)[0].image_id
    request = compute.LaunchRequest(ZONE, TYPE, ChargeType.ON_DEMAND, image, f"orphans-{job_id}-{time.time()}",
                                    "orphans", {TAG_JOB: job_id, TAG_OWNER: tagged_by})
    return compute.run_instances(sdk, request)[0]


def found(store: Store, sdk: TencentSdk, cloud: EmulatorProcess, grace: float = 0.0) -> api.Orphans:
    return api.find_orphans(store, sdk, cloud.admin.now() + 1, grace, ME)


def settled(image: images.ImageView) -> bool:
    return image.state.ready or image.state.failed


def document(sdk: TencentSdk, bucket: str, record: JobRecord) -> None:
    state = ObjectStore(sdk, bucket)
    state.create_bucket()
    jobdoc.publish(state, record, [], [])


def test_this_stores_jobs_are_judged_by_their_state_alone(store: Store, sdk: TencentSdk, target: Target,
                                                          cloud: EmulatorProcess) -> None:
    for job_id in ("job-000000a1", "job-000000a2"):
        store.create_job(new_job(job_id, job_plan=plan(state_bucket=f"cvmjob-ap-guangzhou-{cloud.appid}"),
                                 target=target), 1.0)
    token = store.acquire("job-000000a2", "test", ttl=60.0, now=2.0)
    store.transition("job-000000a2", token, JobState.PENDING, JobState.CANCELLED, "cancelled", now=3.0)
    active, cancelled = launch(sdk, "job-000000a1"), launch(sdk, "job-000000a2", tagged_by="you@elsewhere")
    collected = [i.instance_id for i in found(store, sdk, cloud, grace=3600.0).instances]
    assert collected == [cancelled] and active not in collected


def test_a_document_this_release_cannot_read_keeps_the_jobs_resources_and_none_at_all_does_not(
        store: Store, sdk: TencentSdk, target: Target, cloud: EmulatorProcess) -> None:
    unread, absent, theirs = "job-000000b1", "job-000000b2", "job-000000b3"
    state = ObjectStore(sdk, f"cvmjob-ap-guangzhou-{cloud.appid}")
    state.create_bucket()
    doc = jobdoc.document(job_record(unread, state=JobState.CANCELLED, target=target), [], []).model_dump(mode="json")
    doc["job"]["shiny"] = True  # a newer release's field: this one cannot tell the job's state
    state.put_json(JobLayout(unread).job_doc, doc)
    ids = {launch(sdk, unread): unread, launch(sdk, absent): absent, launch(sdk, theirs, "you@elsewhere"): theirs}
    assert [ids[i.instance_id] for i in found(store, sdk, cloud).instances] == [absent]


def test_a_succeeded_jobs_image_is_its_product_and_failed_ones_are_garbage(
        store: Store, sdk: TencentSdk, target: Target, cloud: EmulatorProcess) -> None:
    succeeded, failed = "job-000000c1", "job-000000c2"
    source = launch(sdk, "job-000000c0", tagged_by="you@elsewhere")  # not ours: never collected
    cloud.admin.advance(2)
    wait_until("the instance RUNNING", lambda: compute.describe(sdk, [source])[source].state.terminable, 10)

    def capture(job_id: str) -> str:
        """One capture at a time (the cloud refuses a second while one is being made), settled."""
        image = images.create_image(sdk, source, f"{job_id}-{time.time()}", {TAG_JOB: job_id, TAG_OWNER: ME})
        cloud.admin.advance(2)
        wait_until(f"the capture {image} to settle", lambda: settled(images.describe(sdk, [image])[image]), 10)
        return image

    product, of_failed = capture(succeeded), capture(failed)
    cloud.admin.add_image_faults("fail")
    failed_capture = capture(succeeded)  # a second capture of the succeeded job, CREATEFAILED
    assert images.describe(sdk, [failed_capture])[failed_capture].state.failed
    record = job_record(succeeded, state=JobState.SUCCEEDED, target=target, image_id=product)
    document(sdk, f"cvmjob-ap-guangzhou-{cloud.appid}", record)
    document(sdk, f"cvmjob-ap-guangzhou-{cloud.appid}",
             dataclasses.replace(record, job_id=failed, state=JobState.FAILED_ERROR, image_id=None))
    orphans = found(store, sdk, cloud)
    assert sorted(i.image_id for i in orphans.images) == sorted([of_failed, failed_capture])
    assert orphans.instances == []


def test_gc_dry_run_names_the_orphans_and_collects_nothing(store: Store, sdk: TencentSdk, cloud: EmulatorProcess,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("USER", "gc-test")
    mine = launch(sdk, "job-000000d1", tagged_by=owner())
    orphans = api.gc(store, "ap-guangzhou", False, grace=0.0, dry_run=True)
    assert [i.instance_id for i in orphans.instances] == [mine]
    assert not compute.describe(sdk, [mine])[mine].state.leaving
