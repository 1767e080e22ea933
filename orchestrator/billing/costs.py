"""What jobs cost, from the store alone (`cvmjob cost`, a sweep's spend): pure functions over the records.

A job's cost is its bill once it ended (RecordBill: each instance's line of DescribeBillResourceSummary, or its
price for its running time when the bill had no line yet) and an estimate from its nodes' prices while it runs.
Its share *not training* is each instance's billed time outside its agent's training (boot, setup, preflight,
sync, uploads, imaging, teardown), at the instance's hourly price: known once the job ended and was billed by a
release that records the training's time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from ..lifecycle.decide import cost_so_far
from ..state.machine import JobState
from ..state.store import JobRecord, NodeRecord

GroupBy = Literal["name", "tag", "sweep"]
NONE_KEY = "-"  # the group of jobs without a tag (--by tag) or outside any sweep (--by sweep)
RUNNING_SOURCE = "estimate so far"  # the cost of a job that has not ended
UNRECORDED_SOURCE = "bill (source not recorded)"  # billed before cvmjob recorded each node's source


def spent(job: JobRecord, nodes: list[NodeRecord], now: float) -> float:
    """The bill once the job ended (read from the billing API at its end), the estimate while it runs."""
    if job.state.is_terminal():
        return job.cost_cny
    return cost_so_far(nodes, now)


@dataclass(frozen=True)
class JobCost:
    job_id: str
    name: str
    state: JobState
    created_at: float
    instance_types: tuple[str, ...]  # of its nodes, every attempt's (a recovery may have moved it to another)
    billing: tuple[str, ...]  # the spec's words: on-demand, spot, reserved
    cost_cny: float
    source: str  # where cost_cny comes from: its nodes' bills' sources (NodeRecord.cost_source), or an estimate
    # Billed outside training; None: not known (still running, or billed before training time was recorded).
    not_training_seconds: float | None
    not_training_cny: float | None
    tags: dict[str, str] = field(default_factory=dict)
    sweep: str | None = None  # the study whose trial ran it (looked up for --by sweep only)


def job_cost(job: JobRecord, nodes: list[NodeRecord], now: float, sweep: str | None = None) -> JobCost:
    billed = [n for n in nodes if n.instance_id is not None]
    outside = _outside_training(billed, job.updated_at) if job.state.is_terminal() else None
    return JobCost(
        job_id=job.job_id,
        name=job.name,
        state=job.state,
        created_at=job.created_at,
        instance_types=tuple(dict.fromkeys(n.instance_type for n in billed)),
        billing=tuple(dict.fromkeys(n.charge_type.billing for n in billed)),
        cost_cny=round(spent(job, nodes, now), 2),
        source=_source(billed) if job.state.is_terminal() else RUNNING_SOURCE,
        not_training_seconds=None if outside is None else outside[0],
        not_training_cny=None if outside is None else outside[1],
        tags=dict(job.spec.tags),
        sweep=sweep,
    )


def _source(billed: list[NodeRecord]) -> str:
    recorded = {n.cost_source for n in billed}
    if not recorded:
        return "nothing billed"
    if None in recorded:
        return UNRECORDED_SOURCE
    return "+".join(sorted(s for s in recorded if s is not None))


def _outside_training(billed: list[NodeRecord], ended: float) -> tuple[float, float] | None:
    """The nodes' billed seconds outside their training, and what those cost at each one's hourly price (never
    more than its bill); None when a node's training time is not known. ``ended``: the end of a node whose end was
    never seen (an instance that vanished), the job's last write."""
    seconds = cny = 0.0
    for node in billed:
        ran = node.ran_seconds(node.ended_at or ended)
        if not ran:
            continue  # it never ran: nothing was billed by the hour
        if node.training_seconds is None:
            return None
        outside = max(0.0, ran - node.training_seconds)
        per_hour = node.price_per_hour if node.price_per_hour is not None else (node.cost_cny or 0.0) * 3600 / ran
        share = per_hour * outside / 3600
        seconds += outside
        cny += share if node.cost_cny is None else min(share, node.cost_cny)
    return round(seconds, 1), round(cny, 2)


@dataclass(frozen=True)
class CostGroup:
    key: str
    jobs: int
    cost_cny: float
    not_training_cny: float  # of the jobs whose share is known
    unknown: int  # jobs whose share not training is not known


def group(costs: Iterable[JobCost], by: GroupBy) -> list[CostGroup]:
    """Costliest first. By tag, a job counts once in each of its tags' groups (``key=value``): tags overlap, so
    those groups' sums may exceed the total, as in Tencent's cost allocation by tag."""
    members: dict[str, list[JobCost]] = {}
    for cost in costs:
        for key in _keys(cost, by):
            members.setdefault(key, []).append(cost)
    groups = [total(jobs, key) for key, jobs in members.items()]
    return sorted(groups, key=lambda g: (-g.cost_cny, g.key))


def _keys(cost: JobCost, by: GroupBy) -> list[str]:
    if by == "name":
        return [cost.name]
    if by == "sweep":
        return [cost.sweep or NONE_KEY]
    return [f"{k}={v}" for k, v in sorted(cost.tags.items())] or [NONE_KEY]


def total(costs: Iterable[JobCost], key: str = "total") -> CostGroup:
    jobs = list(costs)
    known = [c.not_training_cny for c in jobs if c.not_training_cny is not None]
    return CostGroup(key=key, jobs=len(jobs), cost_cny=round(sum(c.cost_cny for c in jobs), 2),
                     not_training_cny=round(sum(known), 2), unknown=len(jobs) - len(known))


def job_costs(jobs: Iterable[JobRecord], nodes: Mapping[str, list[NodeRecord]], now: float,
              sweeps: Mapping[str, str] | None = None) -> list[JobCost]:
    """Each job's cost, newest first as given; ``sweeps``: the study of each trial's job, by job id."""
    return [job_cost(j, nodes.get(j.job_id, []), now, (sweeps or {}).get(j.job_id)) for j in jobs]
