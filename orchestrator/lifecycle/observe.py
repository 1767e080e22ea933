"""observe: one look at the cloud and at the agents' documents, for one job or for many at once.

Instances are matched to nodes by their tags (``cvmjob:attempt``, ``cvmjob:node``): the cloud's tags are the
truth, so an instance created just before a controller crash is found again. Tag binding is asynchronous on
Tencent Cloud (reference §1.1), so recorded ids the tag lookup misses are described by id before concluding
they are gone.

A controller holding many jobs looks at the cloud once per round for all of them (``look``): their tagged
instances in a few DescribeInstances pages, the ids the tags missed in one more call per hundred, their images in
one DescribeImages; then each job's agents are read (``observe_agents``). ``observe`` is both for one job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from ..contract import (
    AGENT_DOC_LIMIT,
    ENDED_PHASES,
    SILENT_AFTER,
    JobLayout,
    Result,
    Status,
    Unread,
    decode_agent_doc,
    too_large,
)
from ..contract.tags import TAG_ATTEMPT, TAG_JOB, TAG_NODE
from ..providers.tencent import TencentSdk, compute, images
from ..providers.tencent.errors import CloudError
from ..providers.tencent.paging import PAGE
from ..providers.tencent.storage import ObjectStore, ObjectTooLarge
from ..state.machine import JobState
from ..state.store import JobRecord, NodeRecord
from .observation import NodeSeen, Observation

_NodeDoc = TypeVar("_NodeDoc", Status, Result)
_AGENT_STATES = (JobState.BOOTING, JobState.RUNNING, JobState.CANCELLING, JobState.RECOVERING)
# An agent writes result.json after the status that says its attempt ended (agent/attempt.py). A status still in
# progress and not yet silent (contract.SILENT_AFTER) means there is no result yet to read, and none is asked for
# (it would be half a busy controller's requests). An older one may be the last before a final heartbeat that failed.


@dataclass(frozen=True)
class CloudLook:
    """What one round saw of one job in the cloud."""

    tagged: tuple[compute.InstanceView, ...] = ()
    described: dict[str, compute.InstanceView] = field(default_factory=dict)  # recorded ids the tags missed
    image: images.ImageView | None = None


def _current(job: JobRecord, nodes: list[NodeRecord]) -> dict[int, NodeRecord]:
    return {n.node: n for n in nodes if n.attempt == job.attempt}


def look(sdk: TencentSdk, jobs: Sequence[tuple[JobRecord, list[NodeRecord]]], among: int = 0) -> dict[str, CloudLook]:
    """One look at the cloud for these jobs (all of one account and region), ``among`` as many as the caller
    holds there. Raises CloudError: a failed lookup concludes nothing, for any of them.

    Their instances are asked for by tag value (5 jobs a call), or, when that takes more calls, every instance
    carrying the cvmjob:job tag is listed (100 a page: at least one per job held) and those of other jobs are
    dropped. Listing all of a thousand jobs' instances for the few due in a round was a third of a busy
    controller's CPU."""
    ids = [job.job_id for job, _ in jobs]
    wanted = set(ids)
    by_value = -(-len(ids) // compute.MAX_FILTER_VALUES)
    by_key = -(-max(among, len(ids)) // PAGE)
    found = compute.find_by_tag_values(sdk, TAG_JOB, ids) if by_value <= by_key else \
        [i for i in compute.find_by_tag_key(sdk, TAG_JOB) if i.tags.get(TAG_JOB) in wanted]
    tagged: dict[str, list[compute.InstanceView]] = {job_id: [] for job_id in ids}
    for inst in found:
        tagged[inst.tags[TAG_JOB]].append(inst)
    missing = []
    for job, nodes in jobs:
        seen = {i.instance_id for i in tagged[job.job_id]}
        missing += [r.instance_id for r in _current(job, nodes).values() if r.instance_id and r.instance_id not in seen]
    described = compute.describe(sdk, missing) if missing else {}
    image_ids = [job.image_id for job, _ in jobs if job.image_id]
    found_images = images.describe(sdk, image_ids) if image_ids else {}
    return {
        job.job_id: CloudLook(
            tuple(tagged[job.job_id]),
            {r.instance_id: described[r.instance_id] for r in nodes if r.instance_id in described},
            found_images.get(job.image_id) if job.image_id else None,
        )
        for job, nodes in jobs
    }


def observe(job: JobRecord, nodes: list[NodeRecord], sdk: TencentSdk, state: ObjectStore, now: float) -> Observation:
    try:
        cloud = look(sdk, [(job, nodes)])[job.job_id]
    except CloudError as exc:
        return Observation(now=now, cloud_ok=False, cloud_error=str(exc))
    return observe_agents(job, nodes, cloud, state, now)


def observe_agents(job: JobRecord, nodes: list[NodeRecord], cloud: CloudLook, state: ObjectStore,
                   now: float, signalled: bool = False) -> Observation:
    """The job's observation from the round's look at the cloud and its agents' documents. A node's result is
    read when its status says it ended or went silent, or when its agents ``signalled`` an end (their signal
    tells it whatever a status read a moment before it was put says)."""
    current = _current(job, nodes)
    by_node: dict[int, compute.InstanceView] = {}
    strays: list[compute.InstanceView] = []
    for inst in cloud.tagged:
        node = _node_of(inst, job.attempt)
        record = current.get(node) if node is not None else None
        if record is not None and node not in by_node and record.instance_id in (None, inst.instance_id):
            by_node[record.node] = inst
        else:
            strays.append(inst)
    for n, r in current.items():
        if n not in by_node and r.instance_id in cloud.described:
            by_node[n] = cloud.described[r.instance_id]

    layout = JobLayout(job.job_id)
    agents_ok, agent_error = True, ""
    seen: list[NodeSeen] = []
    unread: list[Unread] = []
    for n, record in sorted(current.items()):
        status = result = None
        # The instance whose agent may write there: recorded, or found by its tags (not recorded yet). Without one,
        # no agent of the node can have written anything yet: nothing is read.
        instance = record.instance_id or (by_node[n].instance_id if n in by_node else None)
        if job.state in _AGENT_STATES and instance is not None:
            try:
                status = _taken(read_node_doc(state, layout.status(job.attempt, n), Status, job.attempt, n,
                                              instance), unread)
                if signalled or status is None or status.phase in ENDED_PHASES or now - status.time > SILENT_AFTER:
                    result = _taken(read_node_doc(state, layout.result(job.attempt, n), Result, job.attempt, n,
                                                  instance), unread)
            except CloudError as exc:
                agents_ok, agent_error = False, str(exc)
        seen.append(NodeSeen(n, record.instance_id, by_node.get(n), status, result))
    return Observation(
        now=now,
        cloud_ok=True,
        nodes=tuple(seen),
        strays=tuple(strays),
        image=cloud.image,
        agents_ok=agents_ok,
        agents_error=agent_error,
        unread=tuple(unread),
    )


def _node_of(inst: compute.InstanceView, attempt: int) -> int | None:
    if inst.tags.get(TAG_ATTEMPT) != str(attempt):
        return None
    node = inst.tags.get(TAG_NODE, "")
    return int(node) if node.isdigit() else None


def read_node_doc(state: ObjectStore, key: str, model: type[_NodeDoc], attempt: int, node: int,
                  instance_id: str | None) -> _NodeDoc | Unread | None:
    """A node's status or result, taken only when it is the one expected there (contract.decode_agent_doc)."""
    try:
        data = state.get_bytes(key, AGENT_DOC_LIMIT)
    except ObjectTooLarge as exc:
        return too_large(key, exc.size, AGENT_DOC_LIMIT)
    return None if data is None else decode_agent_doc(key, data, model, attempt, node, instance_id)


def _taken(doc: _NodeDoc | Unread | None, unread: list[Unread]) -> _NodeDoc | None:
    if isinstance(doc, Unread):
        unread.append(doc)
        return None
    return doc
