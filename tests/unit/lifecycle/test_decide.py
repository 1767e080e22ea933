"""decide() with a fake clock and no cloud: every rule of the life cycle as a table of situations."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

import pytest

from orchestrator.contract import ImageContents, Outcome, Phase, Result, Status
from orchestrator.lifecycle.actions import (
    CreateImage,
    Launch,
    MarkNodes,
    Move,
    RecordBill,
    RecordSuccess,
    RequestCancel,
    Stage,
    StartAttempt,
    Terminate,
    Wait,
)
from orchestrator.lifecycle.decide import STOP_NOW_GRACE, decide
from orchestrator.lifecycle.observation import NodeSeen, Observation
from orchestrator.plan.models import Placement, Plan
from orchestrator.plan.settings import RetryRules, Settings
from orchestrator.providers.tencent.compute import InstanceView
from orchestrator.providers.tencent.images import ImageView
from orchestrator.providers.tencent.vocabulary import ChargeType, ImageState, InstanceState
from orchestrator.state.machine import JobState, NodeState
from orchestrator.state.store import JobRecord, NodeRecord
from tests.records import job_record

S = JobState
PLACEMENT = Placement(zone="ap-guangzhou-3", instance_type="GN7.2XLARGE32", charge_type="SPOTPAID", price_per_hour=2.0)
PLAN = Plan(region="ap-guangzhou", image_id="img-487zeit5", candidates=[PLACEMENT], state_bucket="b-1250000000")
SETTINGS = Settings()
NOW = 10_000.0


def job(state: JobState, **changes: object) -> JobRecord:
    defaults: dict[str, object] = {"plan": PLAN, "deadline": NOW + 3600, "lease_owner": "me",
                                   "lease_expires": NOW + 30}
    return job_record("job-1", "demo", state, **{**defaults, **changes})


def node(state: str = "running", instance_id: str | None = "ins-00000001", attempt: int = 1) -> NodeRecord:
    return NodeRecord(
        "job-1",
        attempt,
        0,
        "tok",
        PLACEMENT.zone,
        PLACEMENT.instance_type,
        PLACEMENT.charge_type,
        2.0,
        instance_id,
        NodeState(state),
        launched_at=NOW - 600,
        running_at=NOW - 500,
    )


def instance(state: str = "RUNNING", instance_id: str = "ins-00000001", attempt: int = 1) -> InstanceView:
    return InstanceView(
        instance_id,
        InstanceState(state),
        PLACEMENT.zone,
        PLACEMENT.instance_type,
        "SPOTPAID",
        "127.0.0.1",
        datetime.fromtimestamp(NOW - 600, timezone.utc),
        {"cvmjob:job": "job-1", "cvmjob:attempt": str(attempt), "cvmjob:node": "0"},
    )


def status(phase: Phase = Phase.TRAINING, at: float = NOW) -> Status:
    return Status(attempt=1, node_rank=0, instance_id="ins-00000001", phase=phase, time=at, seq=3, step=10)


def result(outcome: Outcome, reason: str = "", image: ImageContents | None = None) -> Result:
    return Result(
        attempt=1, node_rank=0, instance_id="ins-00000001", outcome=outcome, exit_code=0, reason=reason, time=NOW,
        image=image,
    )


def seen(inst: InstanceView | None = None, st: Status | None = None, res: Result | None = None) -> Observation:
    return Observation(now=NOW, cloud_ok=True, nodes=(NodeSeen(0, "ins-00000001", inst, st, res),))


def run(
    j: JobRecord,
    obs: Observation,
    nodes: list[NodeRecord] | None = None,
    settings: Settings = SETTINGS,
    entered_at: float = NOW - 10,
) -> list[object]:
    return list(decide(j, nodes if nodes is not None else [node()], obs, settings, j.plan,
                       entered_at))


def test_pending_and_staging() -> None:
    assert run(job(S.PENDING), seen()) == [Move(S.STAGING, "uploading the spec and the bundle")]
    assert run(job(S.PENDING, cancel_requested=True), seen())[0] == Move(
        S.CANCELLED, "cancelled before anything was created"
    )
    assert run(job(S.STAGING), seen()) == [Stage(), StartAttempt(PLACEMENT, "first attempt")]


def test_a_failed_lookup_concludes_nothing() -> None:
    obs = Observation(now=NOW, cloud_ok=False, cloud_error="RequestLimitExceeded")
    for state in (S.BOOTING, S.RUNNING, S.TEARING_DOWN, S.RECOVERING):
        actions = run(job(state), obs)
        assert len(actions) == 1 and isinstance(actions[0], Wait), state


def test_unreadable_agent_reports_conclude_nothing() -> None:
    obs = replace(seen(instance()), agents_ok=False, agents_error="COS 503")
    assert all(isinstance(a, Wait) for a in run(job(S.RUNNING), obs))


def test_launching_launches_intents_then_boots() -> None:
    assert run(job(S.LAUNCHING), seen(), [node("intent", None)]) == [Launch(node("intent", None))]
    assert run(job(S.LAUNCHING), seen(), [node("launched")]) == [Move(S.BOOTING, "instances created")]
    failed = replace(node("failed", None), end_reason="ResourceInsufficient.SpecifiedInstanceType")
    assert run(job(S.LAUNCHING), seen(), [failed])[0] == Move(
        S.RECOVERING, "launch failed: ResourceInsufficient.SpecifiedInstanceType"
    )


def test_booting_becomes_running_when_the_agent_reports() -> None:
    actions = run(job(S.BOOTING), seen(instance(), status(Phase.SETUP)), [node("launched")])
    assert MarkNodes(((0, "running", "instance RUNNING"),)) in actions
    assert actions[-1] == Move(S.RUNNING, "the agents report")


def test_booting_without_a_heartbeat_times_out() -> None:
    old = replace(node("running"), running_at=NOW - SETTINGS.bootstrap_timeout - 1)
    actions = run(job(S.BOOTING), seen(instance()), [old])
    assert actions[-1] == Move(
        S.TEARING_DOWN,
        f"the instance ran {SETTINGS.bootstrap_timeout:.0f} s without the agent reporting",
        outcome=S.FAILED_BOOTSTRAP,
    )


def test_launch_failed_instance_goes_to_recovery() -> None:
    failed = replace(instance("LAUNCH_FAILED"), error_message="no stock")
    actions = run(job(S.BOOTING), seen(failed), [node("launched")])
    assert actions == [MarkNodes(((0, "failed", "no stock"),)), Move(S.RECOVERING, "no stock")]


def test_a_launch_failed_instance_holds_up_neither_the_next_attempt_nor_the_teardown() -> None:
    failed = replace(node("failed"), ended_at=NOW - 1, end_reason="no stock")
    listed = seen(instance("LAUNCH_FAILED"))  # still listed by the cloud for a few minutes
    (action,) = run(job(S.RECOVERING), listed, [failed])
    assert isinstance(action, (StartAttempt, Wait)) and "to be gone" not in str(action)
    stray = replace(seen(None), strays=(instance("LAUNCH_FAILED", "ins-00000009", attempt=0),))
    tearing = job(S.TEARING_DOWN, outcome=S.FAILED_NO_CAPACITY, reason="sold out")
    assert run(tearing, listed) == run(tearing, stray) == [RecordBill(), Move(S.FAILED_NO_CAPACITY, "sold out")]


def test_success_images_a_cleaned_instance_then_tears_down() -> None:
    clean = ImageContents(job_id="job-1", job_name="train", attempt=1, setup=["pip install x"])
    actions = run(job(S.RUNNING), seen(instance(), status(Phase.DONE), result(Outcome.SUCCEEDED, image=clean)))
    assert actions == [Move(S.IMAGING, f"training succeeded; creating the image: {clean.describe()}")]
    assert "what setup installed (1 command(s)) and no job data" in clean.describe()
    # An agent that did not (or could not) clean the disk: the job's keys may still be on it, so no image.
    dirty = clean.model_copy(update={"problem": "PermissionError: denied"})
    for image, why in ((None, "node 0 did not clean its instance for the image"), (dirty, dirty.describe())):
        obs = seen(instance(), status(Phase.DONE), result(Outcome.SUCCEEDED, image=image))
        assert run(job(S.RUNNING), obs) == [
            Move(S.TEARING_DOWN, f"training succeeded; no image: {why}", outcome=S.SUCCEEDED)
        ]
    no_snapshot = replace(SETTINGS, snapshot=False)
    assert run(job(S.RUNNING), seen(instance(), status(), result(Outcome.SUCCEEDED)), settings=no_snapshot) == [
        Move(S.TEARING_DOWN, "training succeeded", outcome=S.SUCCEEDED)
    ]


def test_training_failure_tears_down_or_keeps() -> None:
    obs = seen(instance(), status(Phase.FAILED), result(Outcome.TRAINING_FAILED, "exit code 3"))
    assert run(job(S.RUNNING), obs) == [Move(S.TEARING_DOWN, "training_failed: exit code 3", outcome=S.FAILED)]
    keep = replace(SETTINGS, keep_on_failure=True, keep_for=600)
    assert run(job(S.RUNNING), obs, settings=keep) == [
        Move(S.KEEPING, "training_failed: exit code 3", outcome=S.FAILED, keep_until=NOW + 600)
    ]


def test_a_kept_instance_waits_out_its_time_then_is_torn_down_with_the_failure_as_reason() -> None:
    kept = job(S.KEEPING, outcome=S.FAILED, reason="training_failed: exit code 3", keep_until=NOW + 45)
    obs = seen(instance(), status(Phase.FAILED), result(Outcome.TRAINING_FAILED, "exit code 3"))
    assert run(kept, obs) == [Wait(30.0, "kept for inspection")]
    assert run(replace(kept, keep_until=NOW + 5), obs) == [Wait(5.0, "kept for inspection")]
    ended = [Move(S.TEARING_DOWN, "training_failed: exit code 3", outcome=S.FAILED)]
    assert run(replace(kept, keep_until=NOW), obs) == ended
    assert run(replace(kept, cancel_requested=True), obs) == ended  # `cvmjob cancel` ends the keep early


def test_preempted_agent_report_recovers() -> None:
    actions = run(job(S.RUNNING), seen(instance(), status(Phase.PREEMPTED), result(Outcome.PREEMPTED, "notice")))
    assert actions == [MarkNodes(((0, "lost", "preempted: notice"),)),
                       Move(S.RECOVERING, "spot reclaim: notice", reclaimed=True)]


def test_a_training_is_looked_at_routinely_and_an_ended_attempt_soon_for_its_result() -> None:
    assert run(job(S.RUNNING), seen(instance(), status()))[-1] == Wait(SETTINGS.poll_training_seconds, "running",
                                                                        routine=True)
    # The status says the attempt ended (the emergency checkpoint goes up before the result): not a routine look,
    # which a controller holding a thousand jobs spreads over half a minute.
    for phase in (Phase.PREEMPTED, Phase.DONE):
        assert run(job(S.RUNNING), seen(instance(), status(phase)))[-1] == Wait(
            SETTINGS.poll_seconds, "an agent ended its attempt; its result follows")


def test_instance_gone_without_a_result_is_a_reclaim_without_notice() -> None:
    actions = run(job(S.RUNNING), seen(None, status()))
    assert isinstance(actions[0], MarkNodes) and actions[0].updates[0][1] == "lost"
    assert isinstance(actions[1], Move) and actions[1].target == S.RECOVERING


def test_stale_heartbeat_terminates_and_recovers() -> None:
    stale = status(at=NOW - SETTINGS.recovery.heartbeat_stale_after - 1)
    # Given new keys since it went quiet, and silent for the staleness since.
    renewed = job(S.RUNNING, keys_issued_at=stale.time + 0.5, keys_expire_at=NOW + 7000)
    actions = run(renewed, seen(instance(), stale))
    assert actions[0] == Terminate(("ins-00000001",), "its agent stopped reporting")
    assert isinstance(actions[-1], Move) and actions[-1].target == S.RECOVERING


def test_cancel_asks_the_agents_then_waits_within_grace() -> None:
    actions = run(job(S.RUNNING, cancel_requested=True), seen(instance(), status()))
    assert actions == [
        RequestCancel("cancelled by the user"),
        Move(S.CANCELLING, "asking the agents to checkpoint and stop"),
    ]
    waiting = run(job(S.CANCELLING), seen(instance(), status()), entered_at=NOW - 10)
    assert isinstance(waiting[-1], Wait)
    late = run(job(S.CANCELLING), seen(instance(), status()), entered_at=NOW - SETTINGS.cancel_grace - 1)
    assert isinstance(late[-1], Move) and late[-1].outcome == S.CANCELLED


def test_a_cancel_without_a_checkpoint_asks_the_agents_to_stop_now_and_waits_less() -> None:
    actions = run(job(S.RUNNING, cancel_requested=True, cancel_checkpoint=False), seen(instance(), status()))
    assert actions == [
        RequestCancel("cancelled by the user", checkpoint=False),
        Move(S.CANCELLING, "asking the agents to stop now, without a checkpoint"),
    ]
    cancelling = job(S.CANCELLING, cancel_requested=True, cancel_checkpoint=False)
    assert isinstance(run(cancelling, seen(instance(), status()), entered_at=NOW - 10)[-1], Wait)
    late = run(cancelling, seen(instance(), status()), entered_at=NOW - STOP_NOW_GRACE - 1)
    assert isinstance(late[-1], Move) and late[-1].outcome == S.CANCELLED
    graceful = run(job(S.CANCELLING, cancel_requested=True), seen(instance(), status()),
                   entered_at=NOW - STOP_NOW_GRACE - 1)
    assert isinstance(graceful[-1], Wait)  # the checkpoint's cancel still waits for it


def test_recovering_ends_the_lost_attempt_before_launching_the_next() -> None:
    lost = replace(node("lost"), ended_at=NOW - 5, end_reason="preempted")
    actions = run(job(S.RECOVERING), seen(instance()), [lost])
    assert actions[0] == Terminate(("ins-00000001",), "ending the lost attempt") and isinstance(actions[1], Wait)
    actions = run(job(S.RECOVERING), seen(None), [lost])
    assert actions == [StartAttempt(PLACEMENT, "after a reclaim in GN7.2XLARGE32 in ap-guangzhou-3 (spot)")]


def test_strays_of_earlier_attempts_are_terminated_first() -> None:
    stray = instance("RUNNING", "ins-00000009", attempt=0)
    obs = replace(seen(instance(), status()), strays=(stray,))
    assert run(job(S.RUNNING), obs)[0] == Terminate(("ins-00000009",), "instance of an earlier attempt")


def test_imaging() -> None:
    assert run(job(S.IMAGING), seen(instance())) == [CreateImage()]
    creating = ImageView("img-00000001", "n", ImageState.CREATING, "PRIVATE_IMAGE", "", {})
    assert isinstance(run(job(S.IMAGING, image_id="img-00000001"), replace(seen(instance()), image=creating))[-1], Wait)
    normal = replace(creating, state=ImageState.NORMAL)
    actions = run(job(S.IMAGING, image_id="img-00000001"), replace(seen(instance()), image=normal))
    assert actions[-1] == Move(S.TEARING_DOWN, "image img-00000001 ready", outcome=S.SUCCEEDED)


def test_teardown_waits_for_the_cloud_to_confirm_then_bills() -> None:
    tearing = job(S.TEARING_DOWN, outcome=S.SUCCEEDED, reason="image ready")
    actions = run(tearing, seen(instance()))
    assert actions[0] == Terminate(("ins-00000001",), "teardown") and isinstance(actions[1], Wait)
    assert isinstance(run(tearing, seen(instance("TERMINATING")))[0], Wait)  # already going: no second call
    assert run(tearing, seen(None)) == [RecordBill(), RecordSuccess(), Move(S.SUCCEEDED, "image ready")]


def test_an_instance_the_api_will_not_terminate_yet_is_waited_for_not_terminated() -> None:
    tearing = job(S.TEARING_DOWN, outcome=S.CANCELLED, reason="cancelled while launching")
    for state in ("PENDING", "STARTING", "STOPPING", "REBOOTING"):  # TerminateInstances refuses these (§2.4)
        (action,) = run(tearing, seen(instance(state)))
        assert isinstance(action, Wait) and "to be gone" in action.reason, (state, action)
    assert run(tearing, seen(instance()))[0] == Terminate(("ins-00000001",), "teardown")  # once it is RUNNING


def test_only_a_succeeded_job_is_recorded_as_a_success() -> None:
    succeeded = job(S.TEARING_DOWN, outcome=S.SUCCEEDED, reason="done", fingerprint={"spec_sha256": "x"})
    assert run(succeeded, seen(None)) == [RecordBill(), RecordSuccess(), Move(S.SUCCEEDED, "done")]
    failed = job(S.TEARING_DOWN, outcome=S.FAILED, reason="exit 1", fingerprint={"spec_sha256": "x"})
    assert run(failed, seen(None)) == [RecordBill(), Move(S.FAILED, "exit 1")]


def test_deadline_and_budget() -> None:
    late = job(S.RUNNING, deadline=NOW - 1)
    assert run(late, seen(instance(), status()))[-1] == Move(
        S.TEARING_DOWN, "limits.max_runtime reached", outcome=S.FAILED_TIMEOUT
    )
    budget = replace(SETTINGS, max_cost=0.1)
    actions = run(job(S.RUNNING), seen(instance(), status()), settings=budget)
    assert isinstance(actions[-1], Move) and actions[-1].outcome == S.FAILED_BUDGET


def two_nodes() -> list[NodeRecord]:
    return [node(), replace(node(instance_id="ins-00000002"), node=1)]


def two_seen(
    second: InstanceView | None, second_result: Result | None = None, first_result: Result | None = None
) -> Observation:
    return Observation(
        now=NOW,
        cloud_ok=True,
        nodes=(
            NodeSeen(0, "ins-00000001", instance(), status(), first_result),
            NodeSeen(1, "ins-00000002", second, status(), second_result),
        ),
    )


def test_a_peer_failing_because_another_node_went_away_is_a_loss_not_a_failure() -> None:
    failed = result(Outcome.TRAINING_FAILED, "connection reset by peer")
    going = instance("TERMINATING", "ins-00000002")
    actions = run(job(S.RUNNING), two_seen(going, first_result=failed), two_nodes())
    assert actions[-1] == Move(S.RECOVERING, "the instance is terminating (reclaimed?)", reclaimed=True)


def test_an_on_demand_instance_that_went_down_is_lost_not_reclaimed() -> None:
    going = instance("TERMINATING", "ins-00000002")
    on_demand = [replace(n, charge_type=ChargeType.ON_DEMAND) for n in two_nodes()]
    actions = run(job(S.RUNNING), two_seen(going), on_demand)
    assert actions[-1] == Move(S.RECOVERING, "the instance is terminating (reclaimed?)")


def test_an_elastic_job_goes_on_without_a_lost_node() -> None:
    elastic = replace(SETTINGS, elastic_min_nodes=1)
    actions = run(job(S.RUNNING), two_seen(None), two_nodes(), settings=elastic)
    assert actions[0] == Terminate(("ins-00000002",), "lost; the elastic job goes on without it")
    assert isinstance(actions[1], MarkNodes) and not any(isinstance(a, Move) for a in actions)
    # the survivor's success is the job's success
    clean = ImageContents(job_id="job-1", job_name="train", attempt=1)
    survivor_done = two_seen(None, first_result=result(Outcome.SUCCEEDED, image=clean))
    dropped = [two_nodes()[0], replace(two_nodes()[1], state=NodeState.LOST)]
    assert run(job(S.RUNNING), survivor_done, dropped, settings=elastic)[0] == Move(
        S.IMAGING, f"training succeeded; creating the image: {clean.describe()}"
    )


def test_a_reserved_pool_member_is_never_terminated() -> None:
    pool_node = replace(node(), charge_type=ChargeType.RESERVED)
    stale = status(at=NOW - SETTINGS.recovery.heartbeat_stale_after - 1)
    actions = run(job(S.RUNNING), seen(instance(), stale), [pool_node])
    assert not any(isinstance(a, Terminate) for a in actions)
    tearing = job(S.TEARING_DOWN, outcome=S.SUCCEEDED, reason="done")
    actions = run(tearing, seen(instance()), [pool_node])
    assert [type(a).__name__ for a in actions] == ["ReleasePool"]


def test_the_agents_keys_are_rotated_before_they_expire_and_when_an_agent_went_quiet() -> None:
    from orchestrator.contract import SILENT_AFTER
    from orchestrator.lifecycle.actions import RefreshCredentials
    from orchestrator.lifecycle.decide import KEYS_REFRESH_BEFORE

    def refreshes(j: JobRecord, beat_age: float, settings: Settings = SETTINGS) -> list[str]:
        actions = run(j, seen(instance(), status(at=NOW - beat_age)), settings=settings)
        return [a.reason for a in actions if isinstance(a, RefreshCredentials)]

    fresh = job(S.RUNNING, keys_issued_at=NOW - 60, keys_expire_at=NOW + 7000)
    assert refreshes(fresh, 2) == []
    assert refreshes(job(S.RUNNING), 2) == ["none are on record for this attempt"]  # a store from before 0003
    assert refreshes(replace(fresh, keys_expire_at=NOW + KEYS_REFRESH_BEFORE - 60), 2) == ["theirs expire in 29 min"]
    # Late by two heartbeats is not silent yet; silent: rotated once; again only after the agent reported since
    # and went silent again.
    assert refreshes(fresh, SILENT_AFTER - 4) == []
    assert refreshes(fresh, SILENT_AFTER + 1) == ["they went quiet"]
    assert refreshes(replace(fresh, keys_issued_at=NOW - 5), SILENT_AFTER + 1) == []
    # A CAM role's keys are the instance's, never cvmjob's to rotate.
    assert refreshes(job(S.RUNNING), SILENT_AFTER + 1, replace(SETTINGS, short_lived_keys=False)) == []


def test_a_refused_create_image_ends_the_job_without_an_image() -> None:
    actions = run(job(S.IMAGING, image_error="InvalidParameter: no"), seen(instance()))
    assert actions == [Move(S.TEARING_DOWN, "training succeeded; no image (InvalidParameter: no)",
                            outcome=S.SUCCEEDED)]


def test_a_failed_image_is_deleted_and_the_job_succeeds_without_it() -> None:
    from orchestrator.lifecycle.actions import DiscardImage

    failed = ImageView("img-00000001", "n", ImageState.CREATEFAILED, "PRIVATE_IMAGE", "", {})
    actions = run(job(S.IMAGING, image_id="img-00000001"), replace(seen(instance()), image=failed))
    assert actions[0] == DiscardImage("img-00000001")
    assert isinstance(actions[1], Move) and actions[1].outcome == S.SUCCEEDED


def test_a_silent_agent_whose_keys_the_controller_owes_is_not_taken_for_a_lost_instance() -> None:
    """Issue 27, item 8: the silence of an agent whose new keys were refused (or not yet tried since it went
    quiet) is the controller's doing: no termination for it; the refusal is retried with backoff while the keys
    last, and once they expire the job fails with the refusal as its reason."""
    from orchestrator.lifecycle.actions import RefreshCredentials
    from orchestrator.lifecycle.decide import KEYS_RETRY_FIRST
    from orchestrator.lifecycle.observation import KeysRefused

    stale = status(at=NOW - SETTINGS.recovery.heartbeat_stale_after - 1)
    keys = job(S.RUNNING, keys_issued_at=stale.time - 600, keys_expire_at=NOW + 3000)
    # Not yet tried since it went quiet: new keys first, no conclusion.
    actions = run(keys, seen(instance(), stale))
    assert [type(a) for a in actions] == [RefreshCredentials, Wait], actions
    refused = KeysRefused("the cloud refused new COS keys (sts:GetFederationToken)", NOW - 5, 1)
    obs = replace(seen(instance(), stale), keys_refused=refused)
    waiting = run(keys, obs)
    assert [type(a) for a in waiting] == [Wait] and "refused" in waiting[0].reason, waiting  # type: ignore[attr-defined]
    later = replace(obs, now=refused.at + KEYS_RETRY_FIRST + 1)
    assert [type(a) for a in run(keys, later)] == [RefreshCredentials, Wait]
    twice = replace(later, keys_refused=replace(refused, tries=2))  # the backoff doubles
    assert [type(a) for a in run(keys, twice)] == [Wait]
    # A reporting agent's keys are retried all the same (the refusal clears as soon as keys are issued).
    healthy = replace(seen(instance(), status()), keys_refused=refused, now=refused.at + KEYS_RETRY_FIRST + 1)
    assert [type(a) for a in run(keys, healthy)] == [RefreshCredentials, Wait]
    # Their keys expired: the job fails with the refusal as the reason and tears down.
    expired = replace(obs, now=keys.keys_expire_at)  # type: ignore[arg-type]
    assert run(keys, expired) == [Move(S.TEARING_DOWN, f"the agents' COS keys expired: {refused.reason}",
                                       outcome=S.FAILED_ERROR)]
    # New keys issued: the agent has the whole staleness from then to report with them, then it is lost.
    issued = replace(keys, keys_issued_at=NOW - 5)
    assert [type(a) for a in run(issued, seen(instance(), stale))] == [Wait]
    late = replace(seen(instance(), stale), now=NOW + SETTINGS.recovery.heartbeat_stale_after)
    assert isinstance(run(issued, late)[0], Terminate)
    # A CAM role's keys are not the controller's to give: a silent agent is lost as before.
    role = replace(SETTINGS, short_lived_keys=False)
    assert isinstance(run(keys, obs, settings=role)[0], Terminate)


RETRY_3 = replace(SETTINGS, retry=RetryRules(exit_codes=(3, 134), on_hang=True, max=2))


def _failed(code: int, log_tail: str = "") -> Observation:
    exited = result(Outcome.TRAINING_FAILED, f"a training process exited with {code}").model_copy(
        update={"exit_code": code, "log_tail": log_tail})
    return seen(instance(), status(Phase.FAILED), exited)


def test_a_listed_exit_code_ends_the_attempt_and_recovers_on_a_fresh_instance() -> None:
    assert run(job(S.RUNNING), _failed(3), settings=RETRY_3) == [
        Terminate(("ins-00000001",), "retrying on a fresh instance: the training exited with 3"),
        MarkNodes(((0, NodeState.LOST, "retry: the training exited with 3"),)),
        Move(S.RECOVERING, "retry 1 of 2 (train.retry): the training exited with 3"),
    ]


def test_an_unlisted_exit_code_fails_as_without_retry() -> None:
    assert run(job(S.RUNNING), _failed(4), settings=RETRY_3) == [
        Move(S.TEARING_DOWN, "training_failed: a training process exited with 4", outcome=S.FAILED)]


NCCL_TIMEOUT = ("[rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective "
                "operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, "
                "Timeout(ms)=600000) ran for 600020 milliseconds before timing out.")
ECC = "RuntimeError: CUDA error: uncorrectable ECC error encountered"


@pytest.mark.parametrize(("tail", "said"), [(NCCL_TIMEOUT, "an NCCL timeout"), (ECC, "a GPU's Xid error"),
                                            ("NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
                                             "a GPU's Xid error")])
def test_a_failure_the_log_names_retries_whatever_its_exit_code(tail: str, said: str) -> None:
    logged = replace(SETTINGS, retry=RetryRules(exit_codes=(3,), max=2, log_causes=("nccl_timeout", "gpu_xid")))
    failed = _failed(134, f"step 9\n{tail}\n")
    assert run(job(S.RUNNING), failed, settings=logged)[-1] == Move(
        S.RECOVERING, f"retry 1 of 2 (train.retry): the training's log shows {said}")
    off = replace(logged, retry=replace(logged.retry, log_causes=()))
    assert run(job(S.RUNNING), failed, settings=off) == [
        Move(S.TEARING_DOWN, "training_failed: a training process exited with 134", outcome=S.FAILED)]


def test_a_scripts_own_cuda_error_is_not_retried() -> None:
    logged = replace(SETTINGS, retry=RetryRules(exit_codes=(3,), max=2, log_causes=("nccl_timeout", "gpu_xid")))
    failed = _failed(1, "RuntimeError: CUDA error: an illegal memory access was encountered")
    assert run(job(S.RUNNING), failed, settings=logged) == [
        Move(S.TEARING_DOWN, "training_failed: a training process exited with 1", outcome=S.FAILED)]


def test_a_hang_retries_with_on_hang_only() -> None:
    hung = seen(instance(), status(Phase.FAILED), result(Outcome.HUNG, "no progress for 10 s"))
    assert run(job(S.RUNNING), hung, settings=RETRY_3)[-1] == Move(
        S.RECOVERING, "retry 1 of 2 (train.retry): the training hung")
    assert run(job(S.RUNNING), hung)[-1] == Move(S.TEARING_DOWN, "hung: no progress for 10 s", outcome=S.FAILED_HUNG)


def test_once_its_retries_are_spent_the_failure_ends_the_job_and_says_so() -> None:
    retried = [replace(node(attempt=a), state=NodeState.LOST, end_reason="retry: the training exited with 3")
               for a in (1, 2)]
    current = node(attempt=3)
    assert run(job(S.RUNNING, attempt=3), _failed(3), [*retried, current], settings=RETRY_3) == [
        Move(S.TEARING_DOWN, "training_failed: a training process exited with 3 (train.retry: its 2 retries spent)",
             outcome=S.FAILED)]
