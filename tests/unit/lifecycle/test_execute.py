"""execute against the emulator: the intent is persisted before every cloud mutation and the outcome after it, and
each mutation repeated from the store after a crash changes nothing more (design.md §4)."""

from __future__ import annotations

import time
import typing
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from orchestrator.ci import fingerprint
from orchestrator.contract import AgentConfig, JobLayout, Phase, RunFacts, Status, latest_key
from orchestrator.contract.tags import TAG_ATTEMPT, TAG_JOB, TAG_NAME, TAG_NODE, TAG_OWNER, owner
from orchestrator.lifecycle import actions as A
from orchestrator.lifecycle.execute import _HANDLERS, Executor, Next, PermanentFailure
from orchestrator.lifecycle.lease import LeaseGuard
from orchestrator.plan.models import Placement, Plan
from orchestrator.plan.settings import Settings
from orchestrator.providers.tencent import StaticCredential, TencentSdk, compute, images
from orchestrator.providers.tencent.storage import ObjectStore
from orchestrator.providers.tencent.vocabulary import ChargeType, ImageState, InstanceState
from orchestrator.spec import load_spec
from orchestrator.state.machine import JobState, NodeState
from orchestrator.state.store import NewJob, Store
from orchestrator.target import Target
from tests.emulator_process import EmulatorProcess
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[3]
REGION, ZONE, IMAGE, SMALL = "ap-guangzhou", "ap-guangzhou-3", "img-487zeit5", "S5.MEDIUM4"
PLACEMENT = Placement(zone=ZONE, instance_type=SMALL, charge_type=ChargeType.ON_DEMAND, price_per_hour=0.3,
                      bandwidth_gbps=1.5)


@dataclass
class Run:
    executor: Executor
    store: Store
    sdk: TencentSdk
    emulator: EmulatorProcess
    told: list[tuple[str, str]]

    @property
    def job_id(self) -> str:
        return self.executor.job_id

    def instances(self) -> list[compute.InstanceView]:
        return [i for i in compute.find_by_tags(self.sdk, {TAG_JOB: self.job_id}) if not i.state.leaving]


@pytest.fixture
def run(emulator: EmulatorProcess, tmp_path: Path) -> Iterator[Run]:
    sdk = TencentSdk(StaticCredential(emulator.secret_id, emulator.secret_key), REGION, emulator.endpoint,
                     emulator.appid)
    spec = load_spec(REPO / "jobs" / "quickstart" / "job.yaml", [f"instance.type={SMALL}", "data=[]"])
    plan = Plan(region=REGION, image_id=IMAGE, candidates=[PLACEMENT], state_bucket=f"cvmjob-{emulator.appid}")
    target = Target("emulator", REGION, emulator.appid, emulator.endpoint)
    store = Store(tmp_path / "state.db")
    job_id = f"job-{uuid.uuid4().hex[:8]}"
    store.create_job(NewJob(job_id=job_id, name=spec.name, spec=spec, plan=plan, target=target, settings=Settings(),
                            deadline=10_000.0, source_dir=str(REPO / "jobs" / "quickstart")), now=100.0)
    token = store.acquire(job_id, "test", ttl=3600, now=100.0)
    told: list[tuple[str, str]] = []
    executor = Executor(store=store, token=token, job_id=job_id, target=target, sdk=sdk, plan=plan,
                        state=ObjectStore(sdk, plan.state_bucket), spec=spec, source_dir=REPO / "jobs" / "quickstart",
                        emit=lambda kind, message: told.append((kind, message)),
                        guard=LeaseGuard(job_id, 3600, lambda: store.check_lease(job_id, token),
                                         lambda: store.renew(job_id, token, 3600, time.time())))
    yield Run(executor, store, sdk, emulator, told)
    emulator.admin.advance(5)  # a PENDING instance cannot be terminated
    for i in compute.find_by_tags(sdk, {TAG_JOB: job_id}):
        compute.terminate(sdk, [i.instance_id])


def start(run: Run) -> None:
    """The job staged, its first attempt recorded: LAUNCHING with node 0 an intent."""
    assert run.executor.run(A.Move(JobState.STAGING, "staging")) is Next.LOOK_AGAIN
    assert run.executor.run(A.Stage()) is Next.CONTINUE
    assert run.executor.run(A.StartAttempt(PLACEMENT, "first attempt")) is Next.LOOK_AGAIN


def running(run: Run) -> str:
    """The job's first instance, launched and RUNNING."""
    start(run)
    run.executor.run(A.Launch(*run.store.nodes(run.job_id, 1)))
    (node,) = run.store.nodes(run.job_id, 1)
    assert node.instance_id is not None
    run.emulator.admin.advance(5)
    wait_until("RUNNING", lambda: any(i.state == InstanceState.RUNNING for i in run.instances()) or None, 30)
    return node.instance_id


def test_every_action_has_a_handler() -> None:
    assert set(_HANDLERS) == set(typing.get_args(A.Action))


def test_a_launch_records_its_intent_first_and_a_repeat_after_a_crash_makes_no_second_instance(run: Run) -> None:
    ex = run.executor
    start(run)
    (intent,) = run.store.nodes(run.job_id, 1)
    assert (intent.state, intent.instance_id) == ("intent", None) and intent.client_token  # before any cloud call
    assert ex.run(A.Launch(intent)) is Next.CONTINUE
    (launched,) = run.store.nodes(run.job_id, 1)
    assert launched.state == "launched" and launched.instance_id is not None
    # The controller died after RunInstances and before recording it: the store still says "intent".
    run.store.put_node(ex.token, replace(launched, state=NodeState.INTENT, instance_id=None))
    ex.run(A.Launch(intent))
    (again,) = run.store.nodes(run.job_id, 1)
    assert again.instance_id == launched.instance_id  # the ClientToken made RunInstances answer the same instance
    assert [i.instance_id for i in run.instances()] == [launched.instance_id]


def test_terminating_an_instance_already_gone_is_success(run: Run) -> None:
    instance_id = running(run)
    for _ in range(2):  # the second finds it terminating or gone: no error, nothing else happens
        assert run.executor.run(A.Terminate((instance_id,), "teardown")) is Next.CONTINUE
    wait_until("the instance to go", lambda: not run.instances() or None, 30)


def test_an_instance_still_pending_is_terminated_at_a_later_look(run: Run) -> None:
    start(run)
    run.executor.run(A.Launch(*run.store.nodes(run.job_id, 1)))
    (node,) = run.store.nodes(run.job_id, 1)
    assert node.instance_id is not None
    # The emulator's clock stands still: the instance stays PENDING, which TerminateInstances refuses.
    assert run.executor.run(A.Terminate((node.instance_id,), "cancelled while launching")) is Next.LOOK_AGAIN
    assert [m for kind, m in run.told if kind == "retry"] == [
        "an instance cannot be terminated yet (UnsupportedOperation.InstanceStatePending); retrying"]
    assert run.store.nodes(run.job_id, 1)[0].ended_at is None  # still to be terminated
    run.emulator.admin.advance(5)
    wait_until("RUNNING", lambda: any(i.state == InstanceState.RUNNING for i in run.instances()) or None, 30)
    assert run.executor.run(A.Terminate((node.instance_id,), "cancelled while launching")) is Next.CONTINUE
    wait_until("the instance to go", lambda: not run.instances() or None, 30)


def test_create_image_adopts_the_image_made_before_a_crash(run: Run) -> None:
    ex = run.executor
    instance_id = running(run)
    # A CreateImage whose answer the controller never recorded: the image exists, tagged with the job.
    made = images.create_image(run.sdk, instance_id, "before-the-crash", {TAG_JOB: run.job_id, TAG_NAME: "x"})
    ex.run(A.CreateImage())
    job = run.store.get(run.job_id)
    assert job is not None and job.image_id == made
    assert [i.image_id for i in images.find_by_tags(run.sdk, {TAG_JOB: run.job_id})] == [made]
    assert [i.state for i in run.store.images(run.job_id)] == [ImageState.CREATING]


def test_a_wait_worth_telling_is_told_once_while_it_lasts(run: Run) -> None:
    for reason in ("the pool is busy", "the pool is busy", "booting", "the pool is busy"):
        assert run.executor.run(A.Wait(5.0, reason, tell=reason != "booting")) is Next.LOOK_AGAIN
    assert [m for kind, m in run.told if kind == "wait"] == ["the pool is busy", "the pool is busy"]


def test_each_agent_is_told_its_instances_network_bandwidth(run: Run) -> None:
    start(run)
    config = AgentConfig.model_validate(run.executor.state.get_json(JobLayout(run.job_id).agent_config(1, 0)))
    assert config.bandwidth_gbps == 1.5


def test_an_attempts_keys_are_on_record_for_decide_and_a_refresh_replaces_them(run: Run) -> None:
    start(run)
    first = run.store.get(run.job_id)
    assert first is not None and first.keys_expire_at is not None and first.keys_issued_at is not None
    assert first.keys_expire_at > first.keys_issued_at + 3600  # GetFederationToken's two hours
    assert run.executor.run(A.RefreshCredentials("a test")) is Next.CONTINUE
    second = run.store.get(run.job_id)
    assert second is not None and second.keys_issued_at is not None and second.keys_issued_at >= first.keys_issued_at
    assert ("credentials", "issued fresh COS keys to the agents (a test)") in run.told


def test_a_refused_refresh_is_said_once_naming_the_permission_and_the_controller_goes_on(run: Run) -> None:
    """Issue 27, item 8: GetFederationToken refused (the permission taken away) is remembered for decide() and said
    once, naming sts:GetFederationToken; it does not escape (it killed the controller); an attempt that would start
    without keys fails with that reason; once keys are issued again, the refusal is over."""
    start(run)
    permission = "sts:GetFederationToken"
    run.emulator.admin.inject("error", service="sts", action="GetFederationToken",
                              code="AuthFailure.UnauthorizedOperation",
                              message=f"The credential's policy does not allow name/{permission}.", count=None)
    for _ in range(2):
        assert run.executor.run(A.RefreshCredentials("a test")) is Next.CONTINUE
    refused = run.executor.keys_refused
    assert refused is not None and refused.tries == 2 and permission in refused.reason
    stated = [e.detail for e in run.store.events(run.job_id) if permission in e.detail]
    assert len(stated) == 1 and "AuthFailure.UnauthorizedOperation" in stated[0], stated
    with pytest.raises(PermanentFailure, match=permission):
        run.executor.run(A.StartAttempt(PLACEMENT, "a relaunch"))
    run.emulator.admin.clear_faults()
    assert run.executor.run(A.RefreshCredentials("a test")) is Next.CONTINUE
    assert run.executor.keys_refused is None
    assert "new COS keys issued to the agents after 2 refusal(s)" in [e.detail for e in run.store.events(run.job_id)]


def test_a_refused_create_image_is_on_record_and_the_job_stays_where_it_is(run: Run) -> None:
    ex = run.executor
    running(run)
    run.emulator.admin.inject("error", service="cvm", action="CreateImage", code="ImageQuotaLimitExceeded",
                              message="quota")
    state = run.store.get(run.job_id)
    assert state is not None
    assert ex.run(A.CreateImage()) is Next.LOOK_AGAIN
    job = run.store.get(run.job_id)
    assert job is not None and job.state == state.state and job.image_id is None
    assert job.image_error == "ImageQuotaLimitExceeded: quota"  # decide() ends the job without an image


def test_a_success_is_recorded_and_its_inputs_indexed_unless_its_data_changed(run: Run) -> None:
    data = "cvmjob-data-1250000000"
    cos = ObjectStore(run.sdk, data)
    cos.create_bucket()
    cos.put_bytes("set/a.bin", b"a")
    spec = load_spec(REPO / "jobs" / "quickstart" / "job.yaml", [f"instance.type={SMALL}",
                                                                  f"data.0.source=cos://{data}/set/"])
    taken = fingerprint.take(spec, IMAGE, REPO / "jobs" / "quickstart", run.sdk, {})
    ex = run.executor
    for job_id in ("job-fp000001", "job-fp000002"):
        run.store.create_job(NewJob(job_id=job_id, name=spec.name, spec=spec, plan=ex.plan, target=ex.target,
                                    settings=Settings(), deadline=10_000.0, source_dir=str(ex.source_dir),
                                    fingerprint=taken), now=100.0)
    ex.state.create_bucket()
    ex.state.put_json(JobLayout("job-fp000001").result(0, 0), {"attempt": 0, "node_rank": 0, "instance_id": "ins-1",
                      "outcome": "succeeded", "reason": "", "metrics": {"val_loss": 0.25}, "time": 1.0})
    first = replace(ex, job_id="job-fp000001", token=run.store.acquire("job-fp000001", "t", 60, 100.0), spec=spec)
    assert first.run(A.RecordSuccess()) is Next.CONTINUE
    entry = fingerprint.lookup(ex.state, taken)
    assert entry is not None and (entry.job_id, entry.metrics) == ("job-fp000001", {"val_loss": 0.25})
    assert entry.outputs.prefix == "cvmjob/job-fp000001/outputs/"
    latest = RunFacts.model_validate(ex.state.get_json(latest_key("quickstart", "")))  # a later run's baseline
    assert (latest.job_id, latest.state, latest.metrics) == ("job-fp000001", "SUCCEEDED", {"val_loss": 0.25})

    cos.put_bytes("set/a.bin", b"changed while it trained")
    ex.state.delete([fingerprint.index_key(taken)])
    second = replace(ex, job_id="job-fp000002", token=run.store.acquire("job-fp000002", "t", 60, 100.0), spec=spec)
    assert second.run(A.RecordSuccess()) is Next.CONTINUE
    assert fingerprint.lookup(ex.state, taken) is None
    notes = [e.detail for e in run.store.events("job-fp000002") if e.kind == "note"]
    assert notes and notes[-1].startswith("its data changed while it trained: data.0 (cos://")


def test_the_specs_tags_go_on_the_instance_and_the_image_beside_cvmjobs_own(run: Run) -> None:
    """For cost allocation: the user's tags with cvmjob's, which they cannot override (the spec refuses cvmjob:
    keys, and cvmjob's are put last)."""
    spec = run.executor.spec.model_copy(update={"tags": {"team": "ml", "cost-center": "42"}})
    run.executor = replace(run.executor, spec=spec)
    running(run)
    [instance] = run.instances()
    assert instance.tags == {"team": "ml", "cost-center": "42", TAG_JOB: run.job_id, TAG_ATTEMPT: "1", TAG_NODE: "0",
                             TAG_NAME: spec.name, TAG_OWNER: owner()}
    run.executor.run(A.CreateImage())
    [image] = images.find_by_tags(run.sdk, {TAG_JOB: run.job_id})
    assert image.tags == {"team": "ml", "cost-center": "42", TAG_JOB: run.job_id, TAG_NAME: spec.name,
                          TAG_OWNER: owner()}


def test_the_bill_records_where_it_came_from_and_how_long_the_training_ran(run: Run) -> None:
    ex = run.executor
    instance_id = running(run)
    ex.run(A.MarkNodes(((0, "running", "instance RUNNING"),)))
    # The agent's last status: what `cvmjob cost` sets apart from the rest of the billed time.
    ex.state.put_json(ex.layout.status(1, 0), Status(attempt=1, node_rank=0, instance_id=instance_id,
                                                      phase=Phase.DONE, time=1.0, seq=9,
                                                      training_seconds=12.5).model_dump(mode="json"))
    ex.run(A.Terminate((instance_id,), "teardown"))
    assert ex.run(A.RecordBill()) is Next.CONTINUE
    [node] = run.store.nodes(run.job_id)
    assert (node.cost_source, node.training_seconds) == ("bill", 12.5)  # the emulator bills to the second
    ex.state.delete([ex.layout.status(1, 0)])  # an agent that never reported: it never trained
    ex.run(A.RecordBill())
    assert run.store.nodes(run.job_id)[0].training_seconds == 0.0
