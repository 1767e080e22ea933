"""decide(job, nodes, observation, settings, entered_at) -> actions: the whole life-cycle logic, with no I/O
and the time taken from the observation (design.md §4, kopf's ``_core/actions``).

Rules that hold in every state:
- a failed lookup is never "gone": with ``cloud_ok`` false the only action is to wait;
- instances of older attempts (strays) are terminated before anything else: one attempt alive at a time;
- a job with cloud resources reaches a terminal state only through TEARING_DOWN, which ends when the cloud
  confirms every instance of the job is gone.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..contract import ENDED_PHASES, SILENT_AFTER, Outcome, Phase, Result
from ..plan.models import Placement, Plan
from ..plan.settings import Settings
from ..providers.tencent.vocabulary import ChargeType, InstanceState
from ..state.machine import JobState, NodeState
from ..state.store import JobRecord, NodeRecord
from .actions import (
    Action,
    ApplyImageRetention,
    CreateImage,
    DiscardImage,
    Launch,
    MarkNodes,
    Move,
    RecordBill,
    RecordSuccess,
    RefreshCredentials,
    ReleasePool,
    RequestCancel,
    Stage,
    StartAttempt,
    Terminate,
    Wait,
)
from .log_causes import log_cause
from .observation import KeysRefused, NodeSeen, Observation
from .recovery import RETRY_REASON, Backoff, GiveUp, Relaunch, next_placement, summarize

S = JobState
# An agent that went silent (contract.SILENT_AFTER) gets new keys, in case the cloud stopped taking its own
# (credentials expired mid-run made the agent go silent until the heartbeat went stale and the attempt was lost),
# once per silence: again only after it reported since (every 30 s while quiet made a loaded controller with a
# thousand late heartbeats spend most of its time on GetFederationToken).
KEYS_REFRESH_BEFORE = 1800.0  # the agents' short-lived keys are replaced this long before they expire
# A refused refresh (the controller's key may not issue keys) is tried again after this, doubling up to the max:
# the permission may come back while the agents' keys last.
KEYS_RETRY_FIRST = 15.0
KEYS_RETRY_MAX = 300.0
# A cancel without a checkpoint: the agent stops the training (a few seconds' grace), ships its last logs and its
# result; one that has not after this long is torn down anyway (its instance bills while it waits).
STOP_NOW_GRACE = 30.0

_FAILURE_STATES = {
    Outcome.TRAINING_FAILED: S.FAILED,
    Outcome.SETUP_FAILED: S.FAILED_SETUP,
    Outcome.PREFLIGHT_FAILED: S.FAILED_SETUP,
    Outcome.SYNC_FAILED: S.FAILED_SETUP,
    Outcome.HUNG: S.FAILED_HUNG,
    Outcome.AGENT_ERROR: S.FAILED_ERROR,
}


# The states whose decision changes when a cancel is requested (the handlers below); in the others the cancel is
# already being carried out, or is too late.
ACTS_ON_CANCEL = frozenset({S.PENDING, S.STAGING, S.LAUNCHING, S.BOOTING, S.RUNNING, S.RECOVERING, S.KEEPING})


def decide(
    job: JobRecord, nodes: list[NodeRecord], obs: Observation, settings: Settings, plan: Plan, entered_at: float
) -> list[Action]:
    """``plan``: the job's, decoded once by the caller (it never changes after the submission)."""
    state, now = job.state, obs.now
    if state == S.PENDING:
        if job.cancel_requested:
            return [Move(S.CANCELLED, "cancelled before anything was created")]
        return [Move(S.STAGING, "uploading the spec and the bundle")]
    if state == S.STAGING:
        if job.cancel_requested:
            return [Move(S.TEARING_DOWN, "cancelled while staging", outcome=S.CANCELLED)]
        first = _through_pool(plan.primary, plan, obs, settings, entered_at)
        return [Stage(), StartAttempt(first, "first attempt")] if isinstance(first, Placement) else first
    if not obs.cloud_ok:
        return [Wait(5.0, f"cannot see the cloud ({obs.cloud_error}); not concluding anything", tell=True)]

    current = [n for n in nodes if n.attempt == job.attempt]
    actions: list[Action] = []
    strays = [i for i in obs.strays if i.state.terminable]
    if strays and state != S.KEEPING:
        actions.append(Terminate(tuple(i.instance_id for i in strays), "instance of an earlier attempt"))

    if state in (S.LAUNCHING, S.BOOTING, S.RUNNING, S.RECOVERING, S.CANCELLING, S.IMAGING) and now >= job.deadline:
        return [*actions, Move(S.TEARING_DOWN, "limits.max_runtime reached", outcome=S.FAILED_TIMEOUT)]
    if settings.max_cost is not None and state in (S.BOOTING, S.RUNNING, S.RECOVERING, S.LAUNCHING):
        spent = cost_so_far(nodes, now)
        if spent >= settings.max_cost:
            return [
                *actions,
                Move(S.TEARING_DOWN, f"limits.max_cost reached ({spent:.2f} CNY)", outcome=S.FAILED_BUDGET),
            ]

    if not obs.agents_ok and state in (S.BOOTING, S.RUNNING, S.CANCELLING):
        return [
            *actions,
            Wait(5.0, f"cannot read the agents' reports ({obs.agents_error}); not concluding anything", tell=True),
        ]
    return actions + _HANDLERS[state](_Round(job, current, nodes, obs, settings, entered_at, plan))


def cost_so_far(nodes: list[NodeRecord], now: float) -> float:
    """An estimate from the plan's prices and the observed running time (the bill is read at the end)."""
    return sum(n.priced(n.price_per_hour, now) or 0.0 for n in nodes)


@dataclass(frozen=True)
class _Round:
    """What one state's handler decides from: the job, its current attempt's nodes and every attempt's, what was
    observed, the settings, when the job entered its state, and its plan."""

    job: JobRecord
    current: list[NodeRecord]
    nodes: list[NodeRecord]
    obs: Observation
    s: Settings
    entered_at: float
    plan: Plan


def _launching(r: _Round) -> list[Action]:
    if r.job.cancel_requested:
        return [Move(S.TEARING_DOWN, "cancelled while launching", outcome=S.CANCELLED)]
    failed = [n for n in r.current if n.state == NodeState.FAILED]
    if failed:
        return [Move(S.RECOVERING, f"launch failed: {failed[0].end_reason}")]
    pending = [n for n in r.current if n.state == NodeState.INTENT]  # pool members have an id before their reset
    if pending:
        return [Launch(n) for n in pending]
    return [Move(S.BOOTING, "instances created")]


def _seen(obs: Observation) -> dict[int, NodeSeen]:
    return {n.node: n for n in obs.nodes}


def _lost_nodes(current: list[NodeRecord], obs: Observation) -> list[tuple[int, NodeState, str]]:
    """Nodes whose instance the cloud no longer runs (without the agent having finished)."""
    seen = _seen(obs)
    lost = []
    for n in current:
        view = seen.get(n.node)
        if view is None or n.instance_id is None or n.state.is_ended():
            continue
        if view.result is not None:
            continue
        if view.instance is None:
            lost.append((n.node, NodeState.LOST, "the instance disappeared (reclaimed without notice or released)"))
        elif view.instance.state.never_ran:
            lost.append((n.node, NodeState.FAILED, view.instance.error_message or f"{view.instance.state}"))
        elif view.instance.state.down:
            lost.append((n.node, NodeState.LOST, f"the instance is {view.instance.state.word} (reclaimed?)"))
    return lost


def _reclaimed(current: list[NodeRecord], lost: list[tuple[int, NodeState, str]]) -> bool:
    """A spot node that went down (not one whose launch failed): the cloud took it back, notice or none."""
    spot = {n.node for n in current if n.charge_type == ChargeType.SPOT}
    return any(node in spot and state == NodeState.LOST for node, state, _ in lost)


def _booting(r: _Round) -> list[Action]:
    if r.job.cancel_requested:
        return [Move(S.TEARING_DOWN, "cancelled while booting", outcome=S.CANCELLED)]
    lost = _lost_nodes(r.current, r.obs)
    if lost:
        return [MarkNodes(tuple(lost)), Move(S.RECOVERING, lost[0][2], reclaimed=_reclaimed(r.current, lost))]
    seen = _seen(r.obs)
    newly_running = tuple(
        (n.node, NodeState.RUNNING, "instance RUNNING")
        for n in r.current
        if n.state == NodeState.LAUNCHED
        and (v := seen.get(n.node))
        and v.instance
        and v.instance.state == InstanceState.RUNNING
    )
    actions: list[Action] = [MarkNodes(newly_running)] if newly_running else []
    if all((v := seen.get(n.node)) is not None and v.status is not None for n in r.current):
        return [*actions, *_refresh(r), Move(S.RUNNING, "the agents report")]
    running_since = [n.running_at for n in r.current if n.running_at is not None]
    if running_since and r.obs.now - min(running_since) > r.s.bootstrap_timeout:
        return [
            *actions,
            *_fail(
                r.s,
                S.FAILED_BOOTSTRAP,
                f"the instance ran {r.s.bootstrap_timeout:.0f} s without the agent reporting",
                r.obs.now,
            ),
        ]
    if r.obs.now - r.entered_at > r.s.pending_timeout + r.s.bootstrap_timeout:
        return [*actions, *_fail(r.s, S.FAILED_BOOTSTRAP, "the instances never became RUNNING", r.obs.now)]
    return [*actions, *_refresh(r), Wait(r.s.poll_seconds, "booting")]


def _to_imaging(results: list[Result]) -> Move:
    """Node 0's instance is imaged once its agent says the disk holds nothing of the job's (agent/seal.py)."""
    contents = next((r.image for r in results if r.node_rank == 0), None)
    if contents is None or contents.problem:
        why = contents.describe() if contents is not None else "node 0 did not clean its instance for the image"
        return Move(S.TEARING_DOWN, f"training succeeded; no image: {why}", outcome=S.SUCCEEDED)
    return Move(S.IMAGING, f"training succeeded; creating the image: {contents.describe()}")


def keys_retry_at(refused: KeysRefused) -> float:
    """When a refused refresh of the agents' keys is tried again."""
    return refused.at + min(KEYS_RETRY_MAX, KEYS_RETRY_FIRST * 2.0 ** (refused.tries - 1))


def _refresh(r: _Round) -> list[Action]:
    """New short-lived keys for the agents (credentials: sts) before theirs expire, or when one went quiet: an
    agent that stopped reporting may hold keys the cloud no longer takes (expired early, revoked). A refused
    refresh is tried again with backoff, whatever the agents do meanwhile."""
    if not r.s.short_lived_keys:
        return []
    job, now, refused = r.job, r.obs.now, r.obs.keys_refused
    if refused is not None:
        if now < keys_retry_at(refused):
            return []
        return [RefreshCredentials(f"trying again after {refused.tries} refusal(s)")]
    if job.keys_expire_at is None:
        return [RefreshCredentials("none are on record for this attempt")]
    if job.keys_expire_at - now < KEYS_REFRESH_BEFORE:
        return [RefreshCredentials(f"theirs expire in {max(0.0, job.keys_expire_at - now) / 60:.0f} min")]
    issued = job.keys_issued_at or 0.0
    quiet = any(
        v.result is None and v.status is not None and now - v.status.time > SILENT_AFTER and v.status.time >= issued
        for v in r.obs.nodes
    )
    return [RefreshCredentials("they went quiet")] if quiet else []


def _fail(s: Settings, outcome: JobState, reason: str, now: float) -> list[Action]:
    if s.keep_on_failure and s.keep_for > 0:
        return [Move(S.KEEPING, reason, outcome=outcome, keep_until=now + s.keep_for)]
    return [Move(S.TEARING_DOWN, reason, outcome=outcome)]


def _running(r: _Round) -> list[Action]:
    results = [v.result for v in r.obs.nodes if v.result is not None]
    preempted = [r for r in results if r.outcome == Outcome.PREEMPTED]
    if preempted:
        updates = tuple((n.node, NodeState.LOST, f"preempted: {preempted[0].reason}") for n in r.current)
        return [MarkNodes(updates), Move(S.RECOVERING, f"spot reclaim: {preempted[0].reason}", reclaimed=True)]
    # A lost node decides before the others' reports: losing a peer makes their training fail, which is not the
    # training's fault. With torchrun elastic (train.elastic_min_nodes) enough survivors keep the attempt going.
    lost = _lost_nodes(r.current, r.obs)
    if lost:
        survivors = sum(1 for n in r.current if not n.state.is_ended()) - len(lost)
        if r.s.elastic_min_nodes is None or survivors < r.s.elastic_min_nodes:
            return [MarkNodes(tuple(lost)), Move(S.RECOVERING, lost[0][2], reclaimed=_reclaimed(r.current, lost))]
        doomed = tuple(
            n.instance_id
            for n in r.current
            if n.node in {k for k, _, _ in lost} and n.instance_id and not _pool_node(r.current, n.node)
        )
        dropped: list[Action] = [Terminate(doomed, "lost; the elastic job goes on without it")] if doomed else []
        return [*dropped, MarkNodes(tuple(lost))]
    expected = [n for n in r.current if not n.state.is_ended()]
    mine = {n.node for n in expected}
    results = [v.result for v in r.obs.nodes if v.result is not None and v.node in mine]
    failures = [r for r in results if r.outcome in _FAILURE_STATES]
    if failures:
        instances = [v.instance for v in r.obs.nodes if v.node in mine]
        if len(expected) > 1 and not all(i is not None and i.state == InstanceState.RUNNING for i in instances):
            return [Wait(r.s.poll_seconds, "a node failed while another is going away: waiting to tell which")]
        worst = failures[0]
        reason = f"{worst.outcome.value}: {worst.reason}".strip(": ")
        cause = _retry_cause(r.s, worst)
        if cause is not None:
            done = len({n.attempt for n in r.nodes if n.end_reason.startswith(RETRY_REASON)})
            if done < r.s.retry.max:
                return _retry(r, cause, done + 1)
            reason += f" (train.retry: its {r.s.retry.max} retries spent)"
        return _fail(r.s, _FAILURE_STATES[worst.outcome], reason, r.obs.now)
    if len(results) == len(expected) and all(r.outcome == Outcome.SUCCEEDED for r in results):
        if r.s.snapshot:
            return [_to_imaging(results)]
        return [Move(S.TEARING_DOWN, "training succeeded", outcome=S.SUCCEEDED)]
    if results and all(r.outcome == Outcome.CANCELLED for r in results):
        return [Move(S.TEARING_DOWN, "the agents stopped on request", outcome=S.CANCELLED)]
    if r.job.cancel_requested:
        if not r.job.cancel_checkpoint:
            return [RequestCancel("cancelled by the user", checkpoint=False),
                    Move(S.CANCELLING, "asking the agents to stop now, without a checkpoint")]
        return [RequestCancel("cancelled by the user"), Move(S.CANCELLING, "asking the agents to checkpoint and stop")]
    refused = r.obs.keys_refused if r.s.short_lived_keys else None
    if refused is not None and r.job.keys_expire_at is not None and r.obs.now >= r.job.keys_expire_at:
        return _fail(r.s, S.FAILED_ERROR, f"the agents' COS keys expired: {refused.reason}", r.obs.now)
    # An agent given new keys since it went quiet has the whole staleness from then to report with them.
    keys_since = (r.job.keys_issued_at or 0.0) if r.s.short_lived_keys else 0.0
    stale = [
        v
        for v in r.obs.nodes
        if v.node in mine
        and v.result is None
        and v.status is not None
        and v.status.phase != Phase.PREEMPTED
        and r.obs.now - max(v.status.time, keys_since) > r.s.recovery.heartbeat_stale_after
    ]
    if stale and (ours := _silence_of_ours(r)):
        return ours
    if stale:
        ids = tuple(v.instance_id for v in stale if v.instance_id and not _pool_node(r.current, v.node))
        updates = tuple((v.node, NodeState.LOST, "heartbeat stale: the agent stopped reporting") for v in stale)
        ending: list[Action] = [Terminate(ids, "its agent stopped reporting")] if ids else []
        return [
            *ending,
            MarkNodes(updates),
            Move(S.RECOVERING, f"no heartbeat for {r.s.recovery.heartbeat_stale_after:.0f} s"),
        ]
    if any(v.node in mine and v.result is None and v.status is not None and v.status.phase in ENDED_PHASES
           for v in r.obs.nodes):
        # The agent signals its end before its result: a reclaimed node's emergency checkpoint, a last upload.
        return [*_refresh(r), Wait(r.s.poll_seconds, "an agent ended its attempt; its result follows")]
    return [*_refresh(r), Wait(r.s.poll_training_seconds, "running", routine=True)]


def _retry_cause(s: Settings, failed: Result) -> str | None:
    """Why train.retry tries ``failed``'s attempt again on a fresh instance, or None when it does not."""
    if failed.outcome == Outcome.TRAINING_FAILED and failed.exit_code in s.retry.exit_codes:
        return f"the training exited with {failed.exit_code}"
    if failed.outcome == Outcome.HUNG and s.retry.on_hang:
        return "the training hung"
    if failed.outcome == Outcome.TRAINING_FAILED:
        cause = log_cause(failed.log_tail, s.retry.log_causes)
        if cause is not None:
            return f"the training's log shows {cause}"
    return None


def _retry(r: _Round, cause: str, number: int) -> list[Action]:
    """The attempt ends (its instances go; a pool member goes back as a reclaim's does) and recovery relaunches."""
    ending = [n for n in r.current if not n.state.is_ended()]
    ids = tuple(n.instance_id for n in ending if n.instance_id and not _pool_node(r.current, n.node))
    updates = tuple((n.node, NodeState.LOST, f"{RETRY_REASON}{cause}") for n in ending)
    return [
        *([Terminate(ids, f"retrying on a fresh instance: {cause}")] if ids else []),
        MarkNodes(updates),
        Move(S.RECOVERING, f"retry {number} of {r.s.retry.max} (train.retry): {cause}"),
    ]


def _silence_of_ours(r: _Round) -> list[Action]:
    """A silent agent is not taken for a lost instance while the controller owes it keys: their refresh was
    refused (it is retried while the agent's keys last; _running fails the job once they expire), or is due and
    not yet tried since it went quiet (its keys may be what silenced it: a restarted controller had not tried)."""
    if not r.s.short_lived_keys:
        return []
    refresh = _refresh(r)
    if r.obs.keys_refused is None and not refresh:
        return []
    why = "its new COS keys were refused" if r.obs.keys_refused is not None else "its keys are being replaced"
    return [*refresh, Wait(r.s.poll_seconds, f"an agent is silent and {why}: not taking it for a lost instance",
                           tell=r.obs.keys_refused is not None)]


def _recovering(r: _Round) -> list[Action]:
    if r.job.cancel_requested:
        return [Move(S.TEARING_DOWN, "cancelled while recovering", outcome=S.CANCELLED)]
    held = _pool_held(r.current)
    if held:
        return [ReleasePool(held)]
    alive = [
        v.instance
        for v in r.obs.nodes
        if v.instance is not None and not v.instance.state.never_ran and not _pool_node(r.current, v.node)
    ]
    if alive:
        # Never two attempts alive at once: the lost attempt's instances go first.
        killable = tuple(i.instance_id for i in alive if i.state.terminable)
        ending: list[Action] = [Terminate(killable, "ending the lost attempt")] if killable else []
        return [*ending, Wait(r.s.poll_seconds, "waiting for the lost attempt's instances to be gone")]
    choice = next_placement(summarize(r.nodes), r.plan.candidates, r.s.recovery, r.obs.now, r.job.job_id)
    if isinstance(choice, GiveUp):
        return [Move(S.TEARING_DOWN, choice.reason, outcome=choice.state)]
    if isinstance(choice, Backoff):
        return [Wait(max(0.1, min(choice.until - r.obs.now, 30.0)), choice.reason, tell=True)]
    assert isinstance(choice, Relaunch)
    placement = _through_pool(choice.placement, r.plan, r.obs, r.s, r.entered_at)
    return [StartAttempt(placement, choice.reason)] if isinstance(placement, Placement) else placement


def _cancelling(r: _Round) -> list[Action]:
    done = all(v.result is not None or v.instance is None for v in r.obs.nodes)
    if done:
        return [Move(S.TEARING_DOWN, "the agents stopped", outcome=S.CANCELLED)]
    grace = r.s.cancel_grace if r.job.cancel_checkpoint else min(r.s.cancel_grace, STOP_NOW_GRACE)
    if r.obs.now - r.entered_at > grace:
        return [Move(S.TEARING_DOWN, f"the agents did not stop within {grace:.0f} s", outcome=S.CANCELLED)]
    what = "checkpoint and stop" if r.job.cancel_checkpoint else "stop"
    return [*_refresh(r), Wait(r.s.poll_seconds, f"waiting for the agents to {what}")]


def _imaging(r: _Round) -> list[Action]:
    if r.job.image_id is None and r.job.image_error is not None:
        return [Move(S.TEARING_DOWN, f"training succeeded; no image ({r.job.image_error})", outcome=S.SUCCEEDED)]
    if r.job.image_id is None:
        return [CreateImage()]
    image = r.obs.image
    if image is not None and image.state.ready:
        return [
            ApplyImageRetention(r.s.snapshot_keep_last),
            Move(S.TEARING_DOWN, f"image {r.job.image_id} ready", outcome=S.SUCCEEDED),
        ]
    if image is None or image.state.failed:
        what = "disappeared" if image is None else image.state
        # A failed capture was left behind for ever (found by tests/faults: I1, image fails): it goes first.
        discard: list[Action] = [] if image is None else [DiscardImage(r.job.image_id)]
        return [
            *discard,
            Move(S.TEARING_DOWN, f"training succeeded; image {r.job.image_id} {what}", outcome=S.SUCCEEDED),
        ]
    if r.obs.now - r.entered_at > r.s.image_timeout:
        return [
            Move(
                S.TEARING_DOWN,
                f"training succeeded; image {r.job.image_id} still {image.state.word} after {r.s.image_timeout:.0f} s",
                outcome=S.SUCCEEDED,
            )
        ]
    return [Wait(max(r.s.poll_seconds, 2.0), f"image {r.job.image_id} is {image.state.word}")]


def _keeping(r: _Round) -> list[Action]:
    # keep_until was set from the look that decided to keep (stored, so it survives a restart); the move itself
    # was recorded a moment later, and the instance is kept the whole keep_for from then.
    until = None if r.job.keep_until is None else max(r.job.keep_until, r.entered_at + r.s.keep_for)
    if r.job.cancel_requested or until is None or r.obs.now >= until:
        return [Move(S.TEARING_DOWN, r.job.reason, outcome=r.job.outcome)]  # the failure stays the reason
    return [Wait(min(30.0, until - r.obs.now), "kept for inspection")]


def _tearing_down(r: _Round) -> list[Action]:
    held = _pool_held(r.current)
    if held:
        return [ReleasePool(held)]
    alive = [v.instance for v in r.obs.nodes if v.instance is not None and not _pool_node(r.current, v.node)]
    # A failed launch never ran and bills nothing, yet the cloud lists it for minutes more: as good as gone.
    # Waiting for it to vanish stalled every recovery after a failed launch (and the teardown) for those minutes.
    alive = [i for i in alive + list(r.obs.strays) if not i.state.never_ran]
    killable = tuple(i.instance_id for i in alive if i.state.terminable and not i.state.isolated)
    if alive:
        ending: list[Action] = [Terminate(killable, "teardown")] if killable else []
        return [*ending, Wait(r.s.poll_seconds, f"waiting for {len(alive)} instance(s) to be gone")]
    outcome = r.job.outcome or S.FAILED_ERROR
    record: list[Action] = [RecordSuccess()] if outcome == S.SUCCEEDED else []
    return [RecordBill(), *record, Move(outcome, r.job.reason or outcome.value)]


def _pool_node(current: list[NodeRecord], node: int) -> bool:
    """Reserved-pool members run as reserved nodes: given back to the pool, never terminated by a job."""
    return any(n.node == node and n.charge_type == ChargeType.RESERVED for n in current)


def _pool_held(current: list[NodeRecord]) -> tuple[str, ...]:
    return tuple(
        n.instance_id
        for n in current
        if n.charge_type == ChargeType.RESERVED and n.instance_id and n.state != NodeState.RELEASED
    )


def _through_pool(
    placement: Placement, plan: Plan, obs: Observation, s: Settings, entered_at: float
) -> Placement | list[Action]:
    """A reserved placement needs an idle pool member; when all are busy the pool policy says what happens."""
    if placement.charge_type != ChargeType.RESERVED or (obs.pool_idle or 0) > 0:
        return placement
    busy = f"reserved pool {s.pool} has no idle instance for this job"
    if s.pool_when_busy == "on-demand":
        on_demand = next((p for p in plan.candidates if p.charge_type == ChargeType.ON_DEMAND), None)
        if on_demand is not None:
            return on_demand
    if s.pool_when_busy == "wait" and obs.now - entered_at < s.pool_wait_timeout:
        return [Wait(5.0, f"{busy}; waiting (up to {s.pool_wait_timeout / 60:.0f} min)", tell=True)]
    return [Move(S.TEARING_DOWN, f"{busy} (pool policy: {s.pool_when_busy})", outcome=S.FAILED_NO_CAPACITY)]


_HANDLERS = {
    S.LAUNCHING: _launching,
    S.BOOTING: _booting,
    S.RUNNING: _running,
    S.RECOVERING: _recovering,
    S.CANCELLING: _cancelling,
    S.IMAGING: _imaging,
    S.KEEPING: _keeping,
    S.TEARING_DOWN: _tearing_down,
}
