"""api.find_job: the job a reference names in this store (an id, a unique prefix, a name: the newest of that name),
else, for a full job id only, the job.json another machine's controller published in the state bucket; each
refusal says what was looked for and where. job_history reads the same two places."""

from __future__ import annotations

import dataclasses

import pytest

from orchestrator import api
from orchestrator.contract import JobLayout
from orchestrator.providers.tencent import TencentSdk
from orchestrator.providers.tencent.storage import ObjectStore
from orchestrator.providers.tencent.vocabulary import ChargeType
from orchestrator.state import jobdoc
from orchestrator.state.machine import JobState, NodeState
from orchestrator.state.store import JobRecord, NodeRecord, Store
from orchestrator.target import Target
from tests.emulator_process import EmulatorProcess
from tests.records import job_record, new_job, spec

REMOTE = "job-0000abcd"  # a full id no store of these tests holds


def add(store: Store, job_id: str, name: str = "demo", at: float = 1.0) -> JobRecord:
    store.create_job(new_job(job_id, name), now=at)
    found = store.get(job_id)
    assert found is not None
    return found


def not_found(store: Store, ref: str) -> str:
    with pytest.raises(api.JobNotFound) as refused:
        api.find_job(store, ref)
    return str(refused.value)


# -- this store -----------------------------------------------------------------------------------------------
def test_a_full_id_a_unique_prefix_and_a_name_each_find_the_job(store: Store) -> None:
    first = add(store, "job-00000a01", "alpha", at=1.0)
    second = add(store, "job-00000b02", "beta", at=2.0)
    assert api.find_job(store, "job-00000a01") == first
    assert api.find_job(store, "job-00000b") == second
    assert api.find_job(store, "alpha") == first


def test_a_name_several_jobs_share_finds_the_newest(store: Store) -> None:
    add(store, "job-00000001", "demo", at=1.0)
    newest = add(store, "job-00000003", "demo", at=3.0)
    add(store, "job-00000002", "demo", at=2.0)
    assert api.find_job(store, "demo") == newest


def test_an_exact_id_wins_over_the_longer_ids_it_does_not_prefix_and_a_job_of_that_name(store: Store) -> None:
    exact = add(store, "job-00000001", "first", at=1.0)
    add(store, "job-00000002", "job-00000001", at=2.0)  # a name is free to look like an id
    assert api.find_job(store, "job-00000001") == exact


def test_a_prefix_several_ids_share_is_refused_naming_them_newest_first(store: Store) -> None:
    add(store, "job-00000001", at=1.0)
    add(store, "job-00000002", at=2.0)
    assert not_found(store, "job-0000") == (
        "'job-0000' matches several jobs (job-00000002, job-00000001); give more of the id")


def test_an_ambiguous_prefix_names_at_most_five_of_its_jobs(store: Store) -> None:
    for n in range(7):
        add(store, f"job-0000000{n}", at=float(n))
    assert not_found(store, "job-") == (
        "'job-' matches several jobs (job-00000006, job-00000005, job-00000004, job-00000003, job-00000002); "
        "give more of the id")


def test_no_reference_at_all_says_what_to_give(store: Store) -> None:
    add(store, "job-00000001")
    message = "no job given: name a job id (or a unique prefix, or the job name); `cvmjob ls` lists them"
    assert not_found(store, "") == message
    assert not_found(store, "  \t") == message


def test_a_reference_that_is_not_a_full_id_is_looked_for_in_this_store_only(store: Store) -> None:
    """No cloud is set up here: a name or a prefix that matches nothing never reaches for the state bucket."""
    add(store, "job-00000001", "demo")
    assert not_found(store, "nope") == "no job 'nope': `cvmjob ls` lists them"
    assert not_found(store, "job-000000012") == "no job 'job-000000012': `cvmjob ls` lists them"  # too long
    assert not_found(store, "job-1") == "no job 'job-1': `cvmjob ls` lists them"
    assert not_found(store, "Demo") == "no job 'Demo': `cvmjob ls` lists them"  # names are compared as they are


def test_sql_wildcards_in_a_reference_are_plain_characters(store: Store) -> None:
    add(store, "job-00000001", "demo")
    assert not_found(store, "job-%") == "no job 'job-%': `cvmjob ls` lists them"
    assert not_found(store, "job-0000000_") == "no job 'job-0000000_': `cvmjob ls` lists them"
    assert not_found(store, "de%") == "no job 'de%': `cvmjob ls` lists them"


# -- the state bucket: a job another machine submitted -----------------------------------------------------------
def remote_record(target: Target, job_id: str = REMOTE, state: JobState = JobState.RUNNING) -> JobRecord:
    return job_record(job_id, "elsewhere", state, target=target, created_at=5.0, updated_at=6.0,
                      lease_owner="ci@runner/0123456789abcdef/77/12345678")


def test_a_full_id_this_store_lacks_is_found_in_the_default_state_bucket(
        store: Store, sdk: TencentSdk, target: Target, cloud: EmulatorProcess) -> None:
    record = remote_record(target)
    node = NodeRecord(job_id=REMOTE, attempt=1, node=0, client_token="t-1", zone="ap-guangzhou-3",
                      instance_type="S5.MEDIUM4", charge_type=ChargeType.ON_DEMAND, price_per_hour=0.3,
                      instance_id="ins-0001", state=NodeState.RUNNING, launched_at=5.0, running_at=6.0)
    jobdoc.publish(ObjectStore(sdk, f"cvmjob-ap-guangzhou-{cloud.appid}"), record, [node], [])
    assert api.find_job(store, REMOTE) == record
    assert api.job_history(store, record) == ([node], [])


def test_a_job_of_another_region_is_found_in_that_regions_state_bucket(
        store: Store, sdk: TencentSdk, target: Target, cloud: EmulatorProcess) -> None:
    """Nothing to configure: each region's default state bucket is found by its name and GET Service's region."""
    record = remote_record(dataclasses.replace(target, region="ap-shanghai"))
    shanghai = TencentSdk(sdk.credential, "ap-shanghai", cloud.endpoint, cloud.appid)
    jobdoc.publish(ObjectStore(shanghai, f"cvmjob-ap-shanghai-{cloud.appid}"), record, [], [])
    assert api.find_job(store, REMOTE) == record


def test_cvmjob_state_bucket_and_cvmjob_region_say_where_a_job_of_another_machine_is(
        store: Store, sdk: TencentSdk, target: Target, cloud: EmulatorProcess,
        monkeypatch: pytest.MonkeyPatch) -> None:
    record = remote_record(dataclasses.replace(target, region="ap-shanghai"))
    shanghai = TencentSdk(sdk.credential, "ap-shanghai", cloud.endpoint, cloud.appid)
    jobdoc.publish(ObjectStore(shanghai, f"shared-{cloud.appid}"), record, [], [])
    assert not_found(store, REMOTE).startswith(f"no job {REMOTE!r} in this store, nor in the state buckets (none")
    monkeypatch.setenv("CVMJOB_STATE_BUCKET", f"shared-{cloud.appid}")
    monkeypatch.setenv("CVMJOB_REGION", "ap-shanghai")
    assert api.find_job(store, REMOTE) == record


def test_a_full_id_found_nowhere_says_where_it_was_looked_for_and_how(store: Store, sdk: TencentSdk,
                                                                       cloud: EmulatorProcess) -> None:
    add(store, "job-00000001")
    ObjectStore(sdk, f"cvmjob-ap-guangzhou-{cloud.appid}").create_bucket()  # the bucket there, the job not
    assert not_found(store, REMOTE) == (
        f"no job {REMOTE!r} in this store, nor in the state buckets cvmjob-ap-guangzhou-{cloud.appid} "
        "(ap-guangzhou): `cvmjob ls` lists this store's jobs; a job of another machine is found in each region's "
        "default state bucket (cvmjob-<region>-<APPID>), or in CVMJOB_STATE_BUCKET of CVMJOB_REGION when set, "
        "with this machine's keys")


def test_a_job_json_this_release_cannot_read_is_said_so(store: Store, sdk: TencentSdk, target: Target,
                                                        cloud: EmulatorProcess) -> None:
    state = ObjectStore(sdk, f"cvmjob-ap-guangzhou-{cloud.appid}")
    state.create_bucket()
    doc = jobdoc.document(remote_record(target), [], []).model_dump(mode="json")
    doc["job"]["shiny"] = True  # a field of a newer release
    state.put_json(JobLayout(REMOTE).job_doc, doc)
    assert not_found(store, REMOTE) == (
        f"{REMOTE}: its job.json in cvmjob-ap-guangzhou-{cloud.appid} cannot be read: job.json: unknown JobRecord "
        "field(s) "
        "shiny (a newer cvmjob wrote it)")


def test_this_stores_job_is_not_looked_for_elsewhere(store: Store, sdk: TencentSdk, target: Target,
                                                     cloud: EmulatorProcess) -> None:
    """The store's record wins over a document of the same id (it is the store's own job, published)."""
    mine = add(store, REMOTE, "mine")
    jobdoc.publish(ObjectStore(sdk, f"cvmjob-ap-guangzhou-{cloud.appid}"), remote_record(target), [], [])
    assert api.find_job(store, REMOTE) == mine
    nodes, events = api.job_history(store, mine)
    assert nodes == [] and [(e.kind, e.to_state, e.detail) for e in events] == [
        ("transition", "PENDING", "created")]


def test_the_history_of_a_job_no_one_has_is_empty(store: Store, target: Target) -> None:
    assert api.job_history(store, remote_record(target)) == ([], [])


# -- the state bucket's name -----------------------------------------------------------------------------------
def test_the_state_bucket_is_the_specs_storage_bucket_else_the_regions_default(
        monkeypatch: pytest.MonkeyPatch) -> None:
    target = Target("tencent", "ap-guangzhou", "1300000001")
    assert api.state_bucket(spec(), target) == "cvmjob-ap-guangzhou-1300000001"
    assert api.state_bucket(spec(storage={"bucket": "mine-1300000001"}), target) == "mine-1300000001"
    assert api.state_bucket(None, Target("tencent", "ap-shanghai", "1300000001")) == "cvmjob-ap-shanghai-1300000001"
    assert api.default_state_bucket(target) == "cvmjob-ap-guangzhou-1300000001"
    monkeypatch.setenv("CVMJOB_STATE_BUCKET", "shared-1300000001")
    assert api.default_state_bucket(target) == "shared-1300000001"
