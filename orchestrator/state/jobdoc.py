"""``cvmjob/<job>/job.json``: the job as the store of the controller driving it has it, put in the state bucket at
each change of state, so that a machine with no record of the job (a later CI step, another runner: nothing in
their ``$CVMJOB_HOME`` survives) can follow it: `cvmjob status|logs|cancel JOB` rebuild it from there.

The records are the store's own (JobRecord, NodeRecord, Event), written as they are and read back through pydantic:
one definition of each, checked at this edge like every document from COS.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, TypeVar

from pydantic import TypeAdapter

from ..contract import JobDoc, JobLayout
from ..providers.tencent.errors import CloudError, NotFoundError
from ..providers.tencent.retry import retrying
from ..providers.tencent.storage import ObjectStore
from .store import STORED_AS, Event, JobRecord, NodeRecord, job_from_json, job_to_json

log = logging.getLogger(__name__)

EVENTS_KEPT = 200  # the latest events: a job's phases and notes, not a long recovery's every wait
T = TypeVar("T")


def document(job: JobRecord, nodes: list[NodeRecord], events: list[Event]) -> JobDoc:
    return JobDoc(job=job_to_json(job), nodes=[dataclasses.asdict(n) for n in nodes],
                  events=[dataclasses.asdict(e) for e in events[-EVENTS_KEPT:]])


def records(doc: JobDoc) -> tuple[JobRecord, list[NodeRecord], list[Event]]:
    _known(JobRecord, doc.job, renamed=STORED_AS)
    return (job_from_json(doc.job), [_decode(NodeRecord, n) for n in doc.nodes],
            [_decode(Event, e) for e in doc.events])


def _known(cls: type[Any], data: dict[str, Any], renamed: dict[str, str] | None = None) -> None:
    known = {(renamed or {}).get(f.name, f.name) for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"job.json: unknown {cls.__name__} field(s) {', '.join(unknown)} (a newer cvmjob wrote it)")


def _decode(cls: type[T], data: dict[str, Any]) -> T:
    _known(cls, data)
    return TypeAdapter(cls).validate_python(data)


def publish(state: ObjectStore, job: JobRecord, nodes: list[NodeRecord], events: list[Event]) -> None:
    """Best effort: the job goes on whatever COS says, and the next change of state puts the document again. The
    state bucket is created when it is missing (a first job's submission comes before its staging)."""
    key, doc = JobLayout(job.job_id).job_doc, document(job, nodes, events).model_dump(mode="json")
    try:
        try:
            retrying(lambda: state.put_json(key, doc))
        except NotFoundError:
            retrying(state.create_bucket)
            retrying(lambda: state.put_json(key, doc))
    except CloudError as exc:
        log.warning("job %s: could not put job.json (%s); the next change of state puts it again", job.job_id, exc)


def fetch(state: ObjectStore, job_id: str) -> tuple[JobRecord, list[NodeRecord], list[Event]] | None:
    found = state.get_json(JobLayout(job_id).job_doc)
    return None if found is None else records(JobDoc.model_validate(found))
