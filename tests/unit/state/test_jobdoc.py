"""job.json carries the store's records as they are: a machine without the store rebuilds exactly them."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.contract import Fingerprint, JobDoc
from orchestrator.providers.tencent.vocabulary import ChargeType
from orchestrator.state import jobdoc
from orchestrator.state.machine import JobState, NodeState
from orchestrator.state.store import NodeRecord, Store
from tests.records import new_job

FINGERPRINT = Fingerprint(cvmjob_version="1", spec_sha256="s", workdir_sha256="w", image_id="img-1", data=[])


def published(tmp_path: Path) -> JobDoc:
    """A staged job with one running node, as its controller's store has it, through JSON as COS keeps it."""
    store = Store(tmp_path / "state.db")
    store.create_job(new_job("job-0000000a", "n", deadline=2.0, fingerprint=FINGERPRINT), 1.0)
    token = store.acquire("job-0000000a", "me", 30, 1.0)
    store.transition("job-0000000a", token, JobState.PENDING, JobState.STAGING, "staging", 1.5)
    store.put_node(token, NodeRecord("job-0000000a", 1, 0, "tok", "z", "t", ChargeType.SPOT, 1.2, "ins-1",
                                     NodeState.RUNNING, launched_at=1.6, cost_cny=0.5))
    job = store.get("job-0000000a")
    assert job is not None
    doc = jobdoc.document(job, store.nodes(job.job_id), store.events(job.job_id))
    assert jobdoc.records(doc) == (job, store.nodes(job.job_id), store.events(job.job_id))
    store.close()
    return JobDoc.model_validate_json(doc.model_dump_json())


def test_the_records_come_back_as_the_store_had_them(tmp_path: Path) -> None:
    job, nodes, events = jobdoc.records(published(tmp_path))
    assert (job.job_id, job.state, job.fingerprint, job.lease_owner) == (
        "job-0000000a", JobState.STAGING, FINGERPRINT, "me")
    assert [(n.instance_id, n.charge_type, n.cost_cny) for n in nodes] == [("ins-1", ChargeType.SPOT, 0.5)]
    assert [(e.kind, e.to_state) for e in events] == [("transition", "PENDING"), ("transition", "STAGING")]


def test_a_document_with_a_field_this_release_does_not_know_is_refused(tmp_path: Path) -> None:
    doc = published(tmp_path)
    newer = doc.model_copy(update={"nodes": [{**doc.nodes[0], "gpus_burnt": 3}]})
    with pytest.raises(ValueError, match="unknown NodeRecord field"):
        jobdoc.records(newer)
