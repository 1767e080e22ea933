"""api.agent_view and api.heartbeats: what a job's agents last wrote in its state bucket (api.state_store), read
back typed; a document that is not the node's own (another attempt's, garbage) is left out as one not written yet
is, and a bucket COS will not read gives an empty view rather than an error."""

from __future__ import annotations

import pytest

from orchestrator import api
from orchestrator.contract import CheckpointEntry, JobLayout, Manifest, Outcome, Phase, Result, Status
from orchestrator.providers.tencent import TencentSdk
from orchestrator.providers.tencent.storage import ObjectStore
from orchestrator.state.store import JobRecord
from orchestrator.target import Target
from tests.emulator_process import EmulatorProcess
from tests.records import job_record, plan

JOB = "job-0000abcd"
EMPTY = api.AgentView(None, None, None, {})


@pytest.fixture
def job(target: Target) -> JobRecord:
    """A job of three nodes in its second attempt, whose state bucket is there and empty."""
    return job_record(JOB, target=target, attempt=2,
                      plan=plan(nnodes=3, state_bucket=f"cvmjob-ap-guangzhou-{target.appid}"))


@pytest.fixture
def state(sdk: TencentSdk, job: JobRecord) -> ObjectStore:
    bucket = ObjectStore(sdk, job.plan.state_bucket)
    bucket.create_bucket()
    return bucket


def status(node: int, attempt: int = 2, step: int = 5) -> Status:
    return Status(attempt=attempt, node_rank=node, instance_id=f"ins-{node:08d}", phase=Phase.TRAINING,
                  time=100.0 + node, seq=step, step=step)


def put_status(state: ObjectStore, doc: Status, attempt: int | None = None, node: int | None = None) -> None:
    key = JobLayout(JOB).status(doc.attempt if attempt is None else attempt, doc.node_rank if node is None else node)
    state.put_json(key, doc.model_dump(mode="json"))


def test_state_store_is_the_jobs_state_bucket_on_its_cloud(job: JobRecord, state: ObjectStore) -> None:
    state.put_bytes("probe", b"here")
    found = api.state_store(job)
    assert (found.bucket, found.sdk.region, found.sdk.endpoint) == (job.plan.state_bucket, "ap-guangzhou",
                                                                    job.target.endpoint)
    assert found.get_bytes("probe") == b"here"


def test_nothing_written_yet_is_an_empty_view(job: JobRecord, state: ObjectStore) -> None:
    assert api.agent_view(job) == EMPTY
    assert api.agent_view(job, every_node=True) == EMPTY
    assert api.heartbeats(job, range(3)) == {}


def test_a_state_bucket_not_made_yet_is_an_empty_view(job: JobRecord, sdk: TencentSdk) -> None:
    assert not ObjectStore(sdk, job.plan.state_bucket).bucket_exists()
    assert api.agent_view(job, every_node=True) == EMPTY


def test_node_zeros_status_result_and_the_checkpoint_manifest_are_read_typed(job: JobRecord,
                                                                             state: ObjectStore) -> None:
    put_status(state, status(0, step=30))
    put_status(state, status(1, step=29))
    result = Result(attempt=2, node_rank=0, instance_id="ins-00000000", outcome=Outcome.SUCCEEDED, exit_code=0,
                    final_step=30, time=200.0)
    state.put_json(JobLayout(JOB).result(2, 0), result.model_dump(mode="json"))
    manifest = Manifest(checkpoints=[CheckpointEntry(name="step-30", step=30, files={"m.pt": 1}, size=1, attempt=2,
                                                     time=150.0, job=JOB)])
    where = api.job_checkpoints(job)
    state.put_json(f"{where.prefix}manifest/000000000001.json", manifest.model_dump(mode="json"))
    assert api.agent_view(job) == api.AgentView(status(0, step=30), result, manifest, {})
    assert api.checkpoint_manifest(job, state.sdk) == manifest


def test_every_node_adds_each_nodes_status_leaving_out_those_not_written(job: JobRecord, state: ObjectStore) -> None:
    put_status(state, status(0))
    put_status(state, status(2, step=4))
    view = api.agent_view(job, every_node=True)
    assert view.status == status(0) and view.heartbeats == {0: status(0), 2: status(2, step=4)}
    assert api.agent_view(job, node=2) == api.AgentView(status(2, step=4), None, None, {})
    assert api.heartbeats(job, [1, 2]) == {2: status(2, step=4)}


def test_a_status_that_is_not_the_nodes_own_is_left_out(job: JobRecord, state: ObjectStore) -> None:
    put_status(state, status(0, attempt=1), attempt=2)  # an agent of the first attempt, still writing
    put_status(state, status(2), node=1)  # node 2's, at node 1's key
    state.put_bytes(JobLayout(JOB).status(2, 2), b"\x00 not json")  # garbage the training's keys wrote
    assert api.agent_view(job, every_node=True) == EMPTY


def test_heartbeats_of_an_earlier_attempt(job: JobRecord, state: ObjectStore) -> None:
    put_status(state, status(0, attempt=1))
    put_status(state, status(0))
    assert api.heartbeats(job, [0], attempt=1) == {0: status(0, attempt=1)}
    assert api.heartbeats(job, [0]) == {0: status(0)}


def test_cos_refusing_the_reads_gives_an_empty_view_not_an_error(job: JobRecord, state: ObjectStore,
                                                                 cloud: EmulatorProcess) -> None:
    put_status(state, status(0))
    cloud.admin.inject_cos("error", operation="GetObject", bucket=job.plan.state_bucket, status=403,
                           code="AccessDenied", count=None)
    assert api.agent_view(job, every_node=True) == EMPTY
    assert api.heartbeats(job, [0]) == {}
