"""What the previous release wrote reads back unchanged: its store (jobs, nodes, events, images, controllers, a
sweep's lease and its Optuna study, all in one SQLite file) and its jobs' job.json documents.

fixtures/from_9215efb/ was made by that release's own code (fixtures/make_from_main.py, run in a checkout of
9215efb against its emulator): ``state.sql`` is its store dumped by ``sqlite3``, ``<job id>.json`` the documents
its ``jobdoc.publish`` put in the state bucket, ``expected.json`` what that release read back of them. Five jobs: the
quickstart from a CI run (fingerprint, labels, an image, billed on demand), the fault suite's spot job with its
``fast`` recovery policy (reclaimed once, running its second attempt, a cancel requested, its lease held), a job of
a store older than settings and labels (both ``{}``), and two trials of the quickstart sweep (one told its value,
one failed for its infrastructure).
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Any

import pytest

from orchestrator.contract import JobDoc, RunLabels
from orchestrator.plan.settings import RetryRules, Settings
from orchestrator.spec.network import NetworkSpec
from orchestrator.state import jobdoc
from orchestrator.state.machine import JobState
from orchestrator.state.store import FencedOut, JobRecord, LeaseHeld, Store, SweeperLeases, job_to_json
from orchestrator.sweep import study as sweep_study
from tests.unit.state.fixtures.make_from_main import trial_facts

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "from_9215efb"
EXPECTED: dict[str, Any] = json.loads((FIXTURES / "expected.json").read_text())
JOBS: dict[str, dict[str, Any]] = {entry["job"]["job_id"]: entry for entry in EXPECTED["jobs"]}
# The job record's documents, decoded into models by this release; every other field is a plain value.
DOCUMENTS = {"spec", "plan", "cloud", "settings", "fingerprint", "labels"}


def plain(value: Any) -> Any:
    """A record's value as JSON holds it (as the generator wrote the old release's): enums by their value."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def old_document(job_id: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((FIXTURES / JOBS[job_id]["document"]).read_text())
    return document


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """The old release's store, loaded into a new SQLite file."""
    path = tmp_path / "state.db"
    conn = sqlite3.connect(path)
    try:
        conn.executescript((FIXTURES / "state.sql").read_text())
    finally:
        conn.close()
    return path


@pytest.fixture
def store(db: Path) -> Iterator[Store]:
    opened = Store(db)  # migrates it if this release's schema is newer
    yield opened
    opened.close()


# Fields the documents gained since 9215efb, as an old document reads: each its default, nothing else differs.
ADDED = {"spec": {"network": NetworkSpec().model_dump(mode="json"), "secrets": [], "container": None, "notify": None},
         "plan": {"network": None, "gpu_driver": None, "bucket_regions": {}}}


ADDED_TO_TRAIN = {"retry": None}


def as_read_now(old_job: dict[str, Any]) -> dict[str, Any]:
    """An old job's record as this release reads it: the old documents with the fields added since, defaulted."""
    now = {**old_job, **{name: {**old_job[name], **added} for name, added in ADDED.items()}}
    now["spec"] = {**now["spec"], "train": {**now["spec"]["train"], **ADDED_TO_TRAIN}}
    if now["settings"]:  # '{}' (older than settings) reads as every default
        now["settings"] = {**now["settings"], "retry": _json(dataclasses.asdict(RetryRules()))}
    return now


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def assert_reads_as_old(job: JobRecord, old: dict[str, Any]) -> None:
    """Every field of ``job`` is what the old release read: its documents through their models' JSON."""
    fields = {("cloud" if f.name == "target" else f.name) for f in dataclasses.fields(JobRecord)}
    assert fields == set(old), "JobRecord's fields are not the old record's"
    assert job.spec.model_dump(mode="json") == as_read_now(old)["spec"]
    assert job.plan.model_dump(mode="json") == as_read_now(old)["plan"]
    assert job.target.to_json() == old["cloud"]
    # A store older than settings and labels holds '{}': read as the defaults, as the old release did.
    assert _json(dataclasses.asdict(job.settings)) == (as_read_now(old)["settings"] or
                                                        _json(dataclasses.asdict(Settings())))
    assert job.labels.model_dump(mode="json") == (old["labels"] or RunLabels().model_dump(mode="json"))
    assert (None if job.fingerprint is None else job.fingerprint.model_dump(mode="json")) == old["fingerprint"]
    assert {k: plain(getattr(job, k)) for k in fields - DOCUMENTS} == {k: old[k] for k in fields - DOCUMENTS}


@pytest.mark.parametrize("job_id", sorted(JOBS))
def test_every_job_of_the_old_store_reads_back_unchanged(store: Store, job_id: str) -> None:
    old = JOBS[job_id]
    job = store.get(job_id)
    assert job is not None
    assert_reads_as_old(job, old["job"])
    assert plain(store.nodes(job_id)) == old["nodes"]
    assert plain(store.events(job_id)) == old["events"]
    assert plain(store.images(job_id)) == old["images"]
    # The other reads decode the same rows the same way.
    assert store.get_many([job_id]) == {job_id: job}
    assert job in store.find(job.name)
    assert store.nodes_of([job_id]) == {job_id: store.nodes(job_id)}


def test_the_old_store_holds_the_same_jobs_states_nodes_and_costs(store: Store) -> None:
    jobs = store.list_jobs()
    assert sorted((j.job_id, j.name, j.state.value) for j in jobs) == sorted(
        (e["job"]["job_id"], e["job"]["name"], e["job"]["state"]) for e in EXPECTED["jobs"])
    assert {j.job_id for j in store.list_jobs(active_only=True)} == {
        e["job"]["job_id"] for e in EXPECTED["jobs"] if not JobState(e["job"]["state"]).is_terminal()}
    found = store.nodes_of(JOBS)
    assert {job_id: [(n.attempt, n.node, n.state.value, n.charge_type.value, n.cost_cny, n.cost_source)
                     for n in nodes] for job_id, nodes in found.items()} == {
        job_id: [(n["attempt"], n["node"], n["state"], n["charge_type"], n["cost_cny"], n["cost_source"])
                 for n in e["nodes"]] for job_id, e in JOBS.items()}
    assert plain(store.live_controllers(0.0, float("inf"))) == EXPECTED["controllers"]


def test_the_old_leases_still_fence_and_the_held_job_goes_on(store: Store) -> None:
    """The spot job's lease, as the old release's controller held it: its token is the one this release checks."""
    held = [e["job"] for e in EXPECTED["jobs"] if e["job"]["lease_owner"] and e["job"]["lease_expires"]]
    assert [j["state"] for j in held] == [JobState.RUNNING.value]
    old = held[0]
    token, now = old["lease_token"], old["lease_expires"] - 1
    store.check_lease(old["job_id"], token)
    with pytest.raises(FencedOut):
        store.check_lease(old["job_id"], token + 1)
    assert store.cancels_for(old["lease_owner"], [JobState.RUNNING]) == [old["job_id"]]
    store.transition(old["job_id"], token, JobState.RUNNING, JobState.CANCELLING, "cancel requested", now)
    job = store.get(old["job_id"])
    assert job is not None
    assert (job.state, job.cancel_requested, job.cancel_checkpoint) == (JobState.CANCELLING, True, False)
    assert_reads_as_old(job, {**old, "state": "CANCELLING", "reason": "cancel requested", "updated_at": now,
                              "entered_at": now})


@pytest.mark.parametrize("job_id", sorted(JOBS))
def test_every_old_job_document_reads_back_unchanged_and_round_trips(store: Store, job_id: str) -> None:
    document = old_document(job_id)
    job, nodes, events = jobdoc.records(JobDoc.model_validate(document))
    assert_reads_as_old(job, document["job"])
    assert plain(nodes) == document["nodes"]
    assert plain(events) == document["events"]
    # What the old release published is what its store held, and this release reads both the same.
    assert document["job"] == JOBS[job_id]["job"]
    assert (job, nodes, events) == (store.get(job_id), store.nodes(job_id), store.events(job_id))
    # Written again by this release: the same document (the legacy '{}' of settings and labels written as the
    # defaults they read as), and it reads back as the same records.
    again = jobdoc.document(job, nodes, events).model_dump(mode="json")
    assert set(again) == set(document)
    assert set(again["job"]) == set(document["job"])
    legacy = {"settings": _json(dataclasses.asdict(Settings())), "labels": RunLabels().model_dump(mode="json")}
    assert again == {**document, "job": {**as_read_now(document["job"]), **{k: legacy[k] for k in legacy
                                                                             if not document["job"][k]}}}
    assert json.loads(json.dumps(again)) == again
    assert jobdoc.records(JobDoc.model_validate(again)) == (job, nodes, events)
    assert job_to_json(job) == again["job"]


def test_the_old_study_loads_with_the_same_trials(db: Path) -> None:
    old = EXPECTED["study"]
    assert sweep_study.study_names(str(db)) == old["names"]
    study = sweep_study.load_study(old["name"], str(db))
    assert [d.name for d in study.directions] == old["directions"]
    assert study.user_attrs == old["user_attrs"]
    trials = [trial_facts(t) for t in study.get_trials(deepcopy=False)]
    assert trials == old["trials"]
    # The trials name jobs of the same store, and each of them reads.
    named = [job_id for t in old["trials"] for job_id in t["user_attrs"][sweep_study.JOBS_ATTR]]
    assert named and set(named) <= set(JOBS)
    assert [t["user_attrs"][sweep_study.JOB_ATTR] for t in old["trials"]] == named
    assert [t["user_attrs"].get(sweep_study.KIND_ATTR) for t in old["trials"]] == [None, "infrastructure"]


def test_the_old_sweep_run_still_holds_its_study(store: Store) -> None:
    lease, name = EXPECTED["study"]["lease"], EXPECTED["study"]["name"]
    leases = SweeperLeases(store)
    now = lease["expires"] - 60
    with pytest.raises(LeaseHeld):
        leases.acquire(name, "another@host/fedcba9876543210/1/12345678", 600.0, now)
    leases.renew(name, lease["token"], 600.0, now)
    with pytest.raises(FencedOut):
        leases.renew(name, lease["token"] + 1, 600.0, now)
