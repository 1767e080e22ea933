"""observe against the emulator: real RunInstances, the real SDK, a real Store."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from orchestrator.contract import AGENT_DOC_LIMIT, SILENT_AFTER, JobLayout, Outcome, Phase, Result, Status
from orchestrator.lifecycle.observation import Observation
from orchestrator.lifecycle.observe import look, observe, observe_agents
from orchestrator.providers.tencent import StaticCredential, TencentSdk, compute
from orchestrator.providers.tencent.storage import ObjectStore
from orchestrator.providers.tencent.vocabulary import ChargeType, ImageState
from orchestrator.state.machine import JobState, NodeState
from orchestrator.state.store import JobRecord, NodeRecord, Store
from tests.emulator_process import EmulatorProcess
from tests.records import new_job

REGION, ZONE, IMAGE, SMALL = "ap-guangzhou", "ap-guangzhou-3", "img-487zeit5", "S5.MEDIUM4"
UNKNOWN_ID = "ins-00000000"


@dataclass
class Job:
    sdk: TencentSdk
    store: Store
    state: ObjectStore
    job_id: str
    token: int

    def launch(self, tags: dict[str, str]) -> str:
        (instance_id,) = compute.run_instances(self.sdk, compute.LaunchRequest(
            zone=ZONE, instance_type=SMALL, charge_type=ChargeType.ON_DEMAND, image_id=IMAGE,
            client_token=uuid.uuid4().hex, name="observe-test", tags=tags))
        return instance_id

    def launch_node(self, attempt: int, node: int, job_id: str | None = None) -> str:
        return self.launch({"cvmjob:job": job_id or self.job_id, "cvmjob:attempt": str(attempt),
                            "cvmjob:node": str(node)})

    def record(self, attempt: int, node: int, instance_id: str | None) -> None:
        self.store.put_node(self.token, NodeRecord(self.job_id, attempt, node, f"tok-{attempt}-{node}", ZONE, SMALL,
                                                   ChargeType.ON_DEMAND, 0.1, instance_id,
                                                   NodeState.LAUNCHED if instance_id else NodeState.INTENT))

    def observe(self) -> Observation:
        return observe(self.job(), self.store.nodes(self.job_id), self.sdk, self.state, now=1000.0)

    def job(self) -> JobRecord:
        record = self.store.get(self.job_id)
        assert record is not None
        return record


@pytest.fixture
def job(emulator: EmulatorProcess, tmp_path: Path) -> Iterator[Job]:
    sdk = TencentSdk(StaticCredential(emulator.secret_id, emulator.secret_key), REGION, emulator.endpoint,
                     emulator.appid)
    state = ObjectStore(sdk, f"cvmjob-state-{emulator.appid}")
    state.create_bucket()
    store = Store(tmp_path / "state.db")
    job_id = f"job-{uuid.uuid4().hex[:8]}"
    store.create_job(new_job(job_id, "demo", deadline=10_000.0, source_dir=str(tmp_path)), now=100.0)
    token = store.acquire(job_id, "test", ttl=3600, now=100.0)
    store.update(job_id, token, 100.0, attempt=1)
    yield Job(sdk, store, state, job_id, token)


def seen(observation: Observation) -> dict[int, str | None]:
    """node -> the id of the instance observe matched to it (None: none)."""
    return {n.node: n.instance.instance_id if n.instance else None for n in observation.nodes}


def test_instances_are_matched_to_nodes_by_their_tags(job: Job) -> None:
    """The ids were never recorded (the controller died between RunInstances and writing them down): the tags
    are enough. An older attempt's instance is a stray; another job's is not looked at."""
    first, second = job.launch_node(1, 0), job.launch_node(1, 1)
    older = job.launch_node(0, 0)
    other_job = job.launch_node(1, 0, job_id="job-someone-else")
    job.record(1, 0, None)
    job.record(1, 1, None)
    observation = job.observe()
    assert observation.cloud_ok
    assert seen(observation) == {0: first, 1: second}
    assert [s.instance_id for s in observation.strays] == [older]
    assert other_job not in {s.instance_id for s in observation.strays}


def test_a_second_instance_for_a_recorded_node_is_a_stray(job: Job) -> None:
    duplicate = job.launch_node(1, 0)
    recorded = job.launch_node(1, 0)
    job.record(1, 0, recorded)
    observation = job.observe()
    assert seen(observation) == {0: recorded}
    assert [s.instance_id for s in observation.strays] == [duplicate]


def test_an_id_the_tag_lookup_misses_is_described_by_id(job: Job, emulator: EmulatorProcess) -> None:
    """Tag binding is asynchronous on Tencent Cloud: an instance whose tags are not there yet is still the node's."""
    untagged = job.launch({"purpose": "tags not bound yet"})
    job.record(1, 0, untagged)
    before = len(emulator.admin.calls("cvm", "DescribeInstances"))
    observation = job.observe()
    assert seen(observation) == {0: untagged}
    assert len(emulator.admin.calls("cvm", "DescribeInstances")) == before + 2  # by tags, then by id


def test_an_id_neither_lookup_finds_is_concluded_gone(job: Job) -> None:
    job.record(1, 0, UNKNOWN_ID)
    observation = job.observe()
    assert observation.cloud_ok
    (node,) = observation.nodes
    assert (node.instance_id, node.instance) == (UNKNOWN_ID, None)


def test_an_instance_found_by_its_tags_is_not_described_again(job: Job, emulator: EmulatorProcess) -> None:
    job.record(1, 0, job.launch_node(1, 0))
    before = len(emulator.admin.calls("cvm", "DescribeInstances"))
    job.observe()
    assert len(emulator.admin.calls("cvm", "DescribeInstances")) == before + 1  # the tag lookup only


@pytest.mark.parametrize("action", ["DescribeInstances", "DescribeImages"])
def test_a_failed_lookup_concludes_nothing(job: Job, emulator: EmulatorProcess, action: str) -> None:
    job.record(1, 0, UNKNOWN_ID)
    job.store.update(job.job_id, job.token, 101.0, image_id=IMAGE)
    emulator.admin.inject("error", service="cvm", action=action, code="InternalError", count=1)
    observation = job.observe()
    assert not observation.cloud_ok
    assert "InternalError" in observation.cloud_error
    assert observation.nodes == () and observation.strays == ()
    assert job.observe().cloud_ok  # the fault fired once


def test_an_auth_failure_is_a_failed_lookup_not_a_gone_instance(job: Job, emulator: EmulatorProcess) -> None:
    job.record(1, 0, job.launch_node(1, 0))
    wrong = TencentSdk(StaticCredential(emulator.secret_id, "not-the-key"), REGION, emulator.endpoint)
    observation = observe(job.job(), job.store.nodes(job.job_id), wrong, job.state, now=1000.0)
    assert not observation.cloud_ok and "AuthFailure" in observation.cloud_error
    assert observation.nodes == ()


def test_the_jobs_image_is_looked_up(job: Job) -> None:
    job.store.update(job.job_id, job.token, 101.0, image_id=IMAGE)
    observation = job.observe()
    assert observation.image is not None
    assert observation.image.image_id == IMAGE and observation.image.state is ImageState.NORMAL


def test_the_agents_documents_are_read_while_agents_run(job: Job) -> None:
    instance_id = job.launch_node(1, 0)
    job.record(1, 0, instance_id)
    layout = JobLayout(job.job_id)
    job.state.put_json(layout.status(1, 0), Status(attempt=1, node_rank=0, instance_id=instance_id,
                                                   phase=Phase.TRAINING, time=999.0, seq=7, step=42).model_dump())
    job.state.put_json(layout.result(1, 0), {"layout_version": -1, "from": "another layout version"})
    (pending,) = job.observe().nodes
    assert pending.status is None  # a PENDING job has no agents to read
    job.store.update(job.job_id, job.token, 102.0, state=JobState.RUNNING.value)
    (running,) = job.observe().nodes
    assert running.status is not None and (running.status.seq, running.status.step) == (7, 42)
    assert running.result is None  # unreadable as this version's Result: as good as absent


def test_a_result_is_read_only_once_the_status_says_the_attempt_may_have_ended(job: Job) -> None:
    instance_id = job.launch_node(1, 0)
    job.record(1, 0, instance_id)
    job.store.update(job.job_id, job.token, 102.0, state=JobState.RUNNING.value)
    layout = JobLayout(job.job_id)
    job.state.put_json(layout.result(1, 0), Result(attempt=1, node_rank=0, instance_id=instance_id,
                                                   outcome=Outcome.SUCCEEDED, exit_code=0, reason="done",
                                                   final_step=9, time=999.0).model_dump(mode="json"))

    def result_seen(phase: Phase, at: float, signalled: bool = False) -> bool:
        job.state.put_json(layout.status(1, 0), Status(attempt=1, node_rank=0, instance_id=instance_id,
                                                       phase=phase, time=at, seq=1, step=9).model_dump())
        look_ = look(job.sdk, [(job.job(), job.store.nodes(job.job_id))])[job.job_id]
        (node,) = observe_agents(job.job(), job.store.nodes(job.job_id), look_, job.state, 1000.0, signalled).nodes
        return node.result is not None

    assert not result_seen(Phase.TRAINING, 999.0)  # in progress and fresh: no result can be there yet
    assert result_seen(Phase.DONE, 999.0)
    assert result_seen(Phase.TRAINING, 1000.0 - SILENT_AFTER - 1)  # its final heartbeat may have failed
    assert result_seen(Phase.TRAINING, 999.0, signalled=True)  # the signal came after the status was read


def test_a_look_at_many_jobs_takes_the_fewest_calls(job: Job, emulator: EmulatorProcess) -> None:
    instance_id = job.launch_node(1, 0)
    job.record(1, 0, instance_id)
    others: list[tuple[JobRecord, list[NodeRecord]]] = [
        (replace(job.job(), job_id=f"job-other{n:02d}"), []) for n in range(11)]
    jobs = [(job.job(), job.store.nodes(job.job_id)), *others]
    # Every cvmjob instance of this emulator (other tests' too), 100 a page.
    pages = -(-len(compute.find_by_tag_key(job.sdk, "cvmjob:job")) // 100)

    def calls(among: int) -> int:
        before = len(emulator.admin.calls("cvm", "DescribeInstances"))
        looks = look(job.sdk, jobs, among)
        assert [i.instance_id for i in looks[job.job_id].tagged] == [instance_id]
        assert all(looks[other.job_id].tagged == () for other, _ in others)
        return len(emulator.admin.calls("cvm", "DescribeInstances")) - before

    assert calls(among=1000) == 3  # twelve jobs by tag value, five a call: fewer calls than ten pages
    if pages < 3:
        assert calls(among=12) == pages  # all of them listed: fewer calls than by value


# -- documents the training could have written (issue 27, item 4) ---------------------------------------------


def _training(job: Job) -> tuple[JobLayout, str]:
    """Node 0 of attempt 1 recorded with its instance, the job RUNNING: its agents' documents are read."""
    instance_id = job.launch_node(1, 0)
    job.record(1, 0, instance_id)
    job.store.update(job.job_id, job.token, 102.0, state=JobState.RUNNING.value)
    return JobLayout(job.job_id), instance_id


def _status(instance_id: str, **changes: object) -> bytes:
    fields: dict[str, object] = dict(attempt=1, node_rank=0, instance_id=instance_id, phase=Phase.TRAINING,
                                     time=999.0, seq=7, step=42)
    return Status(**{**fields, **changes}).model_dump_json().encode()


@pytest.mark.parametrize("written", ["garbage", "wrong-shape", "other-attempt", "other-instance", "too-large"])
def test_a_status_that_is_not_the_nodes_is_as_good_as_absent_and_says_why(job: Job, written: str) -> None:
    layout, instance_id = _training(job)
    data = {
        "garbage": b"\x00{ this is not JSON",
        "wrong-shape": b'{"attempt": [1], "phase": 3}',
        "other-attempt": _status(instance_id, attempt=2),
        "other-instance": _status("ins-00000001"),
        "too-large": _status(instance_id, message="x" * AGENT_DOC_LIMIT),
    }[written]
    job.state.put_bytes(layout.status(1, 0), data)
    observation = job.observe()
    (node,) = observation.nodes
    assert node.status is None and observation.agents_ok
    (unread,) = [u for u in observation.unread if u.key == layout.status(1, 0)]
    assert unread.describe().startswith(layout.status(1, 0))


def test_a_result_of_another_attempt_is_not_taken_for_this_ones(job: Job) -> None:
    """A result of attempt 7 saying the training failed, where attempt 1's goes: the attempt goes on."""
    layout, instance_id = _training(job)
    job.state.put_bytes(layout.status(1, 0), _status(instance_id))
    foreign = Result(attempt=7, node_rank=0, instance_id=instance_id, outcome=Outcome.TRAINING_FAILED, exit_code=1,
                     reason="not this attempt's", time=999.0)
    job.state.put_bytes(layout.result(1, 0), foreign.model_dump_json().encode())
    look_ = look(job.sdk, [(job.job(), job.store.nodes(job.job_id))])[job.job_id]
    observation = observe_agents(job.job(), job.store.nodes(job.job_id), look_, job.state, 1000.0, signalled=True)
    (node,) = observation.nodes
    assert node.status is not None and node.result is None
    assert [u.key for u in observation.unread] == [layout.result(1, 0)]
