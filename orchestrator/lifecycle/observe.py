"""observe: one look at the cloud and at the agents' documents for a job.

Instances are matched to nodes by their tags (``cvmjob:attempt``, ``cvmjob:node``): the cloud's tags are the
truth, so an instance created just before a controller crash is found again. Tag binding is asynchronous on
Tencent Cloud (reference §1.1), so recorded ids the tag lookup misses are described by id before concluding
they are gone.
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import ValidationError

from ..contract import JobLayout, Manifest, Result, Status
from ..providers.tencent import TencentSdk, compute, images
from ..providers.tencent.errors import CloudError
from ..providers.tencent.storage import ObjectStore
from ..state.store import JobRecord, NodeRecord
from ..tags import TAG_ATTEMPT, TAG_JOB, TAG_NODE
from .machine import JobState
from .observation import NodeSeen, Observation

_Doc = TypeVar("_Doc", Status, Result, Manifest)
_AGENT_STATES = (JobState.BOOTING, JobState.RUNNING, JobState.CANCELLING, JobState.RECOVERING)


def observe(job: JobRecord, nodes: list[NodeRecord], sdk: TencentSdk, state: ObjectStore, now: float) -> Observation:
    current = {n.node: n for n in nodes if n.attempt == job.attempt}
    try:
        tagged = compute.find_by_tags(sdk, {TAG_JOB: job.job_id})
        by_node: dict[int, compute.InstanceView] = {}
        strays: list[compute.InstanceView] = []
        for inst in tagged:
            node = _node_of(inst, job.attempt)
            record = current.get(node) if node is not None else None
            if record is not None and node not in by_node and record.instance_id in (None, inst.instance_id):
                by_node[record.node] = inst
            else:
                strays.append(inst)
        missing = [r.instance_id for n, r in current.items() if r.instance_id and n not in by_node]
        if missing:
            described = compute.describe(sdk, missing)
            for n, r in current.items():
                if r.instance_id in described and n not in by_node:
                    by_node[n] = described[r.instance_id]
        image = None
        if job.image_id:
            image = images.describe(sdk, [job.image_id]).get(job.image_id)
    except CloudError as exc:
        return Observation(now=now, cloud_ok=False, cloud_error=str(exc))

    layout = JobLayout(job.job_id)
    agents_ok, agent_error = True, ""
    seen = []
    for n, record in sorted(current.items()):
        status = result = None
        if job.state in _AGENT_STATES:
            try:
                status = _load(state, layout.status(job.attempt, n), Status)
                result = _load(state, layout.result(job.attempt, n), Result)
            except CloudError as exc:
                agents_ok, agent_error = False, str(exc)
        seen.append(NodeSeen(n, record.instance_id, by_node.get(n), status, result))
    return Observation(
        now=now,
        cloud_ok=True,
        nodes=tuple(seen),
        strays=tuple(strays),
        image=image,
        agents_ok=agents_ok,
        agents_error=agent_error,
    )


def _node_of(inst: compute.InstanceView, attempt: int) -> int | None:
    if inst.tags.get(TAG_ATTEMPT) != str(attempt):
        return None
    node = inst.tags.get(TAG_NODE, "")
    return int(node) if node.isdigit() else None


def _load(store: ObjectStore, key: str, model: type[_Doc]) -> _Doc | None:
    data = store.get_json(key)
    if data is None:
        return None
    try:
        return model.model_validate(data)
    except ValidationError:
        return None  # a document from another layout version: as good as absent
