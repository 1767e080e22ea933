"""Where the next attempt goes after a lost one: a pure function of the attempts so far, the plan's candidates,
the recovery rules and the time. Bounded by construction: every path either launches somewhere not yet exhausted,
waits a bounded backoff, or gives up with the list of what was tried and why (landscape.md §2.3: no failover
loops).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..plan.models import Placement
from ..plan.settings import RecoveryRules
from ..providers.tencent.vocabulary import ChargeType
from ..state.machine import JobState, NodeState
from ..state.store import NodeRecord

PREEMPTED = "preempted"  # reclaimed with a notice, or lost without one
CAPACITY = "capacity"  # no stock / launch failed
QUOTA = "quota"  # the account's quota in the zone (spot vCPUs, instances) refused the launch: no retry there helps
QUOTA_REASON = "account quota: "  # how a launch the quota refused ends its node (end_reason's start)
RETRY = "retry"  # the training failed in a way train.retry lists: tried again on a fresh instance
RETRY_REASON = "retry: "  # how such an attempt ends its nodes (end_reason's start)


@dataclass(frozen=True)
class AttemptSummary:
    attempt: int
    placement: Placement
    kind: str  # PREEMPTED | CAPACITY | other
    reason: str
    ended_at: float


@dataclass(frozen=True)
class Relaunch:
    placement: Placement
    reason: str


@dataclass(frozen=True)
class Backoff:
    until: float
    reason: str


@dataclass(frozen=True)
class GiveUp:
    state: JobState
    reason: str


Choice = Relaunch | Backoff | GiveUp


def summarize(nodes: list[NodeRecord]) -> list[AttemptSummary]:
    """One summary per finished attempt (the worst node decides how it ended)."""
    by_attempt: dict[int, list[NodeRecord]] = {}
    for n in nodes:
        by_attempt.setdefault(n.attempt, []).append(n)
    out = []
    for attempt in sorted(by_attempt):
        group = by_attempt[attempt]
        ended = [n for n in group if n.state in (NodeState.LOST, NodeState.FAILED)]
        if not ended:
            continue
        first = ended[0]
        if first.state == NodeState.FAILED:
            kind = QUOTA if first.end_reason.startswith(QUOTA_REASON) else CAPACITY
        else:
            kind = RETRY if first.end_reason.startswith(RETRY_REASON) else PREEMPTED
        out.append(
            AttemptSummary(
                attempt=attempt,
                placement=Placement(
                    zone=first.zone,
                    instance_type=first.instance_type,
                    charge_type=first.charge_type,
                    price_per_hour=first.price_per_hour,
                ),
                kind=kind,
                reason=first.end_reason,
                ended_at=max(n.ended_at or 0 for n in ended),
            )
        )
    return out


def _key(p: Placement) -> tuple[str, str, str]:
    return (p.zone, p.instance_type, p.charge_type)


def _recovering_since(history: list[AttemptSummary]) -> float:
    """When the current recovery began: at the end of the newest attempt that ran (a reclaim or a retry), or of the
    first attempt if none ran. give_up_after and after_minutes count from here: counted from the first attempt ever
    ended, a job's second reclaim hours after its first gave up at once ("still no capacity after 120 min")."""
    ran = [h for h in history if h.kind in (PREEMPTED, RETRY)]
    return ran[-1].ended_at if ran else history[0].ended_at


def _tried(history: list[AttemptSummary]) -> str:
    """Every placement tried, in the order first tried, with how often and its latest reason. (Listing the last
    eight attempts instead repeated one placement per retry and dropped the first placements of a long walk.)"""
    tried: dict[tuple[str, str, str], tuple[Placement, int, str]] = {}
    for h in history:
        count = tried.get(_key(h.placement), (h.placement, 0, ""))[1]
        tried[_key(h.placement)] = (h.placement, count + 1, h.reason)
    return "; ".join(f"{p.label()}{f' ({n} times)' if n > 1 else ''}: {reason}" for p, n, reason in tried.values())


def next_placement(
    history: list[AttemptSummary], candidates: list[Placement], rules: RecoveryRules, now: float, seed: str
) -> Choice:
    if not history:
        return Relaunch(candidates[0], "first attempt")
    last = history[-1]
    preemptions = [h for h in history if h.kind == PREEMPTED]
    failures = [h for h in history if h.kind in (CAPACITY, QUOTA)]
    tried = _tried(history)
    if len(preemptions) > rules.max_preemptions:
        return GiveUp(
            JobState.FAILED_PREEMPTED,
            f"reclaimed {len(preemptions)} times, more than the policy's {rules.max_preemptions}",
        )
    if len(failures) >= rules.max_launch_failures:
        return GiveUp(
            JobState.FAILED_NO_CAPACITY,
            f"{len(failures)} launches failed (policy limit {rules.max_launch_failures}); tried: {tried}",
        )
    since = _recovering_since(history)
    if now - since > rules.give_up_after:
        return GiveUp(
            JobState.FAILED_NO_CAPACITY,
            f"still no capacity after {rules.give_up_after / 60:.0f} min of recovery; tried: {tried}",
        )

    allowed = _allowed(candidates, preemptions, since, rules, now)
    if not allowed:
        return GiveUp(JobState.FAILED_NO_CAPACITY, f"no placement allowed by the policy; tried: {tried}")

    if last.kind == RETRY:
        # What failed may be the node (a GPU's Xid error, its NIC): another zone first, where the policy allows one.
        elsewhere = next((p for p in allowed if p.zone != last.placement.zone), None)
        return Relaunch(elsewhere or allowed[0], f"a fresh instance after {last.reason}")
    if last.kind == PREEMPTED:
        # Reclaims come from a lack of stock, not price: the same placement often has capacity again, and it is
        # where the data cache and image are. Moving on is for launches that fail.
        same = next((p for p in allowed if _key(p) == _key(last.placement)), None)
        return Relaunch(same or allowed[0], f"after a reclaim in {last.placement.label()}")

    # A launch failed: retry the same placement with backoff, then move along the candidates. A quota refusal is
    # not retried, and rules out its zone for that way of paying (the quota is the zone's, whatever the type).
    streak = 0
    for h in reversed(history):
        if h.kind != CAPACITY or _key(h.placement) != _key(last.placement):
            break
        streak += 1
    if last.kind != QUOTA and streak <= rules.same_zone_retries and \
            any(_key(p) == _key(last.placement) for p in allowed):
        delay = min(rules.backoff.maximum, rules.backoff.initial * rules.backoff.multiplier ** (streak - 1))
        delay *= 1 + rules.backoff.jitter * (2 * random.Random(f"{seed}:{len(history)}").random() - 1)
        if now < last.ended_at + delay:
            return Backoff(
                last.ended_at + delay, f"{last.placement.label()} had no capacity; retrying in {delay:.0f} s"
            )
        return Relaunch(last.placement, f"retry {streak} of {rules.same_zone_retries} in {last.placement.label()}")
    exhausted = {_key(h.placement) for h in failures}
    refused = {(h.placement.zone, h.placement.charge_type) for h in failures if h.kind == QUOTA}
    exhausted |= {_key(p) for p in candidates if (p.zone, p.charge_type) in refused}
    # Sold out everywhere at the preferred charge type: on-demand, if the policy has an on-demand fallback.
    last_resort = [p for p in candidates if p.charge_type == ChargeType.ON_DEMAND] \
        if rules.falls_back_to_on_demand else []
    for p in [*allowed, *last_resort]:
        if _key(p) not in exhausted:
            return Relaunch(p, f"{last.placement.label()} had no capacity ({last.reason})")
    return GiveUp(JobState.FAILED_NO_CAPACITY, f"every allowed placement failed; tried: {tried}")


def _allowed(
    candidates: list[Placement],
    preemptions: list[AttemptSummary],
    recovering_since: float,
    rules: RecoveryRules,
    now: float,
) -> list[Placement]:
    primary = candidates[0]
    allowed = [
        p
        for p in candidates
        if (rules.next_zone or p.zone == primary.zone)
        and (rules.alternative_types or p.instance_type == primary.instance_type)
    ]
    fallback = (
        rules.on_demand_after_preemptions is not None and len(preemptions) >= rules.on_demand_after_preemptions
    ) or (
        # Minutes spent recovering, failed launches included, as documented (from the first reclaim only, a spot
        # launch that failed never moved on-demand-only's job to on-demand).
        rules.on_demand_after_minutes is not None and now - recovering_since >= rules.on_demand_after_minutes * 60
    )
    on_demand = [p for p in allowed if p.charge_type == ChargeType.ON_DEMAND]
    if fallback and on_demand:
        return on_demand
    preferred = [p for p in allowed if p.charge_type == primary.charge_type]
    return preferred or allowed
