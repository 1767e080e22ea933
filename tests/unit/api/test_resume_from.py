"""``checkpoints.resume_from``, resolved once at plan time against the store (api._resume_source): a job named by
its id (or a unique prefix) must be of the spec's region and have a complete checkpoint, else one PlanError and
nothing created; ``latest-of:NAME`` takes the newest job of that name and region that has one, else says the job
starts fresh. Checkpoints are where api.job_checkpoints says, their manifest written there as the agents do."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from orchestrator import api
from orchestrator.agent.manifest import LEGACY_MANIFEST, generation_key
from orchestrator.contract import CheckpointEntry, Location, Manifest, ResumeSource
from orchestrator.plan.planner import PlanError
from orchestrator.providers.tencent import TencentSdk
from orchestrator.providers.tencent.storage import ObjectStore
from orchestrator.spec import JobSpec
from orchestrator.spec.workload import LATEST_OF
from orchestrator.state.store import JobRecord, Store
from orchestrator.target import Target
from tests.emulator_process import EmulatorProcess
from tests.records import REGION, job_record, new_job, plan, spec

REPO = Path(__file__).resolve().parents[3]
QUICKSTART = REPO / "jobs" / "quickstart" / "job.yaml"
WHAT = "checkpoints.resume_from"


# -- where a job's checkpoints are ------------------------------------------------------------------------------
def test_a_jobs_checkpoints_are_in_its_state_bucket_unless_its_spec_uploads_them_elsewhere() -> None:
    own = job_record("job-0000000a", plan=plan(state_bucket="cvmjob-1250000000"))
    assert api.job_checkpoints(own) == Location(bucket="cvmjob-1250000000", prefix="cvmjob/job-0000000a/checkpoints/")
    for upload_to in ("cos://ckpt-1250000000/runs", "cos://ckpt-1250000000/runs/"):
        elsewhere = dataclasses.replace(own, spec=spec(checkpoints={"upload_to": upload_to}))
        assert api.job_checkpoints(elsewhere) == Location(bucket="ckpt-1250000000", prefix="runs/job-0000000a/")
    at_root = dataclasses.replace(own, spec=spec(checkpoints={"upload_to": "cos://ckpt-1250000000"}))
    assert api.job_checkpoints(at_root) == Location(bucket="ckpt-1250000000", prefix="job-0000000a/")


# -- resolution -------------------------------------------------------------------------------------------------
def wanting(resume_from: str, region: str = REGION) -> JobSpec:
    return spec("next", region=region, checkpoints={"resume_from": resume_from})


def add(store: Store, target: Target, job_id: str, name: str = "base", at: float = 1.0,
        **spec_fields: object) -> JobRecord:
    """A job of ``target``'s region whose state bucket is the account's default."""
    job_plan = plan(region=target.region, state_bucket=f"cvmjob-ap-guangzhou-{target.appid}")
    store.create_job(new_job(job_id, name, job_spec=spec(name, region=target.region, **spec_fields),
                             job_plan=job_plan, target=target), now=at)
    found = store.get(job_id)
    assert found is not None
    return found


def entry(step: int, job: str | None) -> CheckpointEntry:
    return CheckpointEntry(name=f"step-{step:08d}", step=step, files={"model.pt": 0}, size=1, attempt=1,
                           time=float(step), job=job)


def write_manifest(sdk: TencentSdk, job: JobRecord, steps: list[int], writer: str | None = "",
                   key: str | None = None) -> None:
    """The job's manifest listing checkpoints of these steps, as its agents commit it (``writer``: the job the
    entries say wrote them; "" its own; None an agent of an earlier release)."""
    where = api.job_checkpoints(job)
    state = ObjectStore(sdk, where.bucket)
    state.create_bucket()
    manifest = Manifest(checkpoints=[entry(s, job.job_id if writer == "" else writer) for s in steps])
    state.put_json(key or generation_key(where.prefix, 1), manifest.model_dump(mode="json"))


def refusal(store: Store, sdk: TencentSdk, resume_from: str, region: str = REGION) -> list[str]:
    with pytest.raises(PlanError) as refused:
        api._resume_source(wanting(resume_from, region), sdk, store)
    return refused.value.problems


def test_no_resume_from_resolves_to_nothing_and_says_nothing(store: Store) -> None:
    assert api._resume_source(spec("next"), None, store) == (None, [])  # type: ignore[arg-type]  # no cloud asked


def test_a_job_id_with_a_checkpoint_resolves_to_its_latest_one(store: Store, sdk: TencentSdk, target: Target) -> None:
    base = add(store, target, "job-000000a1")
    write_manifest(sdk, base, [10, 30, 20])
    expected = ResumeSource(job_id="job-000000a1", checkpoints=api.job_checkpoints(base))
    said = [f"{WHAT}: starts from step 30 of job-000000a1 until it has a checkpoint of its own"]
    assert api._resume_source(wanting("job-000000a1"), sdk, store) == (expected, said)
    assert api._resume_source(wanting("job-000000a"), sdk, store) == (expected, said)  # a unique prefix


def test_a_job_whose_checkpoints_are_uploaded_elsewhere_is_resumed_from_there(store: Store, sdk: TencentSdk,
                                                                            target: Target) -> None:
    base = add(store, target, "job-000000a1", checkpoints={"upload_to": f"cos://ckpt-{target.appid}/runs/"})
    write_manifest(sdk, base, [7])
    source, _ = api._resume_source(wanting("job-000000a1"), sdk, store)
    assert source == ResumeSource(job_id="job-000000a1",
                                  checkpoints=Location(bucket=f"ckpt-{target.appid}", prefix="runs/job-000000a1/"))


def test_a_manifest_of_an_earlier_release_counts(store: Store, sdk: TencentSdk, target: Target) -> None:
    """manifest.json, entries without a job: what agents of an earlier release wrote at their own job's place."""
    base = add(store, target, "job-000000a1")
    write_manifest(sdk, base, [5], writer=None, key=api.job_checkpoints(base).prefix + LEGACY_MANIFEST)
    source, said = api._resume_source(wanting("job-000000a1"), sdk, store)
    assert source is not None and said == [f"{WHAT}: starts from step 5 of job-000000a1 until it has a checkpoint "
                                           "of its own"]


def test_a_job_id_without_a_complete_checkpoint_is_a_plan_error(store: Store, sdk: TencentSdk,
                                                                target: Target) -> None:
    base = add(store, target, "job-000000a1")  # nothing written
    no_checkpoint = [f"{WHAT}: job-000000a1 has no complete checkpoint (cos://cvmjob-ap-guangzhou-{target.appid}/"
                     "cvmjob/job-000000a1/checkpoints/). name a job that wrote one, or use latest-of:<job name>"]
    ObjectStore(sdk, f"cvmjob-ap-guangzhou-{target.appid}").create_bucket()
    assert refusal(store, sdk, "job-000000a1") == no_checkpoint
    write_manifest(sdk, base, [])  # a manifest, empty
    assert refusal(store, sdk, "job-000000a1") == no_checkpoint


def test_checkpoints_another_job_wrote_at_a_jobs_place_are_not_its_own(store: Store, sdk: TencentSdk,
                                                                       target: Target) -> None:
    base = add(store, target, "job-000000a1")
    write_manifest(sdk, base, [40], writer="job-000000ff")
    assert refusal(store, sdk, "job-000000a1")[0].startswith(f"{WHAT}: job-000000a1 has no complete checkpoint")


def test_a_job_id_this_store_lacks_or_shares_is_a_plan_error(store: Store, sdk: TencentSdk, target: Target,
                                                             cloud: EmulatorProcess) -> None:
    add(store, target, "job-000000a1", at=1.0)
    add(store, target, "job-000000a2", at=2.0)
    assert refusal(store, sdk, "job-000000b") == [f"{WHAT}: no job 'job-000000b': `cvmjob ls` lists them"]
    assert refusal(store, sdk, "job-000000a") == [
        f"{WHAT}: 'job-000000a' matches several jobs (job-000000a2, job-000000a1); give more of the id"]
    assert refusal(store, sdk, "job-000000b1") == [  # a full id: looked for in the state bucket too
        f"{WHAT}: no job 'job-000000b1' in this store, nor in the state buckets (none: no region has one): "
        f"`cvmjob ls` lists this store's jobs; {api.REMOTE_HOW}"]


def test_a_job_whose_name_looks_like_an_id_prefix_is_not_taken_for_one(store: Store, sdk: TencentSdk,
                                                                       target: Target) -> None:
    named = add(store, target, "job-000000a1", name="job-ab")
    write_manifest(sdk, named, [10])
    assert refusal(store, sdk, "job-ab") == [f"{WHAT}: no job 'job-ab': `cvmjob ls` lists them"]


@pytest.mark.parametrize("named_first", [True, False], ids=["named-job-older", "named-job-newer"])
def test_a_unique_id_prefix_is_resolved_even_when_a_job_is_named_like_it(
        store: Store, sdk: TencentSdk, target: Target, named_first: bool) -> None:
    add(store, target, "job-000000c1", name="job-ab", at=1.0 if named_first else 3.0)
    wanted = add(store, target, "job-ab000001", name="base", at=2.0)
    write_manifest(sdk, wanted, [10])
    source, _ = api._resume_source(wanting("job-ab"), sdk, store)
    assert source is not None and source.job_id == "job-ab000001"


def test_a_job_of_another_region_is_a_plan_error(store: Store, sdk: TencentSdk, target: Target) -> None:
    add(store, dataclasses.replace(target, region="ap-shanghai"), "job-000000a1")
    assert refusal(store, sdk, "job-000000a1") == [
        f"{WHAT}: job-000000a1 ran in ap-shanghai, and this job's instances in ap-guangzhou cannot read its "
        "checkpoints. name a job of ap-guangzhou"]


# -- latest-of:NAME ---------------------------------------------------------------------------------------------
def test_latest_of_takes_the_newest_job_of_the_name_and_region_that_has_a_checkpoint(
        store: Store, sdk: TencentSdk, target: Target) -> None:
    oldest = add(store, target, "job-000000a1", at=1.0)
    middle = add(store, target, "job-000000a2", at=2.0)
    add(store, target, "job-000000a3", at=3.0)  # the newest: no checkpoint yet
    shanghai = add(store, dataclasses.replace(target, region="ap-shanghai"), "job-000000a4", at=4.0)
    other = add(store, target, "job-000000a5", name="other", at=5.0)
    for job, step in ((oldest, 90), (middle, 20), (shanghai, 99), (other, 99)):
        write_manifest(sdk, job, [step])
    assert api._resume_source(wanting("latest-of:base"), sdk, store) == (
        ResumeSource(job_id="job-000000a2", checkpoints=api.job_checkpoints(middle)),
        [f"{WHAT}: starts from step 20 of job-000000a2 (the newest job named base with a checkpoint) until it has a "
         "checkpoint of its own"])


def test_latest_of_a_name_with_no_checkpoint_in_the_region_starts_fresh_and_says_so(
        store: Store, sdk: TencentSdk, target: Target) -> None:
    fresh = (None, [f"{WHAT}: no job named base in ap-guangzhou has a complete checkpoint: the job starts fresh"])
    assert api._resume_source(wanting("latest-of:base"), sdk, store) == fresh  # no job of that name at all
    write_manifest(sdk, add(store, dataclasses.replace(target, region="ap-shanghai"), "job-000000a1"), [10])
    ObjectStore(sdk, f"cvmjob-ap-guangzhou-{target.appid}").create_bucket()
    add(store, target, "job-000000a2", at=2.0)
    alike = add(store, target, "job-000000a3", name="base-2", at=3.0)  # a name that starts alike is another
    write_manifest(sdk, alike, [10])
    assert api._resume_source(wanting("latest-of:base"), sdk, store) == fresh


def test_latest_of_a_name_that_prefixes_ids_takes_only_the_jobs_of_that_name(store: Store, sdk: TencentSdk,
                                                                             target: Target) -> None:
    write_manifest(sdk, add(store, target, "job-00c0ffee", name="base", at=1.0), [10])  # its id starts with job-00
    assert api._resume_source(wanting("latest-of:job-00"), sdk, store) == (
        None, [f"{WHAT}: no job named job-00 in ap-guangzhou has a complete checkpoint: the job starts fresh"])
    named = add(store, target, "job-000000a2", name="job-00", at=2.0)
    write_manifest(sdk, named, [5])
    source, _ = api._resume_source(wanting("latest-of:job-00"), sdk, store)
    assert source is not None and source.job_id == "job-000000a2"


def test_latest_of_a_name_that_is_another_jobs_id_takes_the_jobs_of_that_name(store: Store, sdk: TencentSdk,
                                                                              target: Target) -> None:
    named = add(store, target, "job-000000a1", name="job-0000000b", at=1.0)
    write_manifest(sdk, named, [10])
    add(store, target, "job-0000000b", name="other", at=2.0)
    source, _ = api._resume_source(wanting("latest-of:job-0000000b"), sdk, store)
    assert source is not None and source.job_id == "job-000000a1"


@pytest.mark.parametrize("resume_from", ["latest-of:base", "job-000000a1"])
def test_a_job_whose_checkpoints_bucket_is_gone_has_no_checkpoint(store: Store, sdk: TencentSdk, target: Target,
                                                                  resume_from: str) -> None:
    """Its state bucket is there (its job.json is); ``checkpoints.upload_to``'s bucket was deleted since."""
    ObjectStore(sdk, f"cvmjob-ap-guangzhou-{target.appid}").create_bucket()
    add(store, target, "job-000000a1", at=1.0, checkpoints={"upload_to": f"cos://gone-{target.appid}/runs/"})
    if resume_from.startswith(LATEST_OF):
        assert api._resume_source(wanting(resume_from), sdk, store) == (
            None, [f"{WHAT}: no job named base in ap-guangzhou has a complete checkpoint: the job starts fresh"])
    else:
        assert refusal(store, sdk, resume_from) == [
            f"{WHAT}: job-000000a1 has no complete checkpoint (cos://gone-{target.appid}/runs/job-000000a1/). name a "
            "job that wrote one, or use latest-of:<job name>"]


# -- through api.plan -------------------------------------------------------------------------------------------
def test_plan_records_the_resolved_source_and_says_it(store: Store, sdk: TencentSdk, target: Target) -> None:
    base = add(store, target, "job-000000a1", name="quickstart")
    write_manifest(sdk, base, [60])
    report = api.plan(QUICKSTART, ["data=[]", "checkpoints.resume_from=latest-of:quickstart"], store=store)
    assert report.plan.resume_from == ResumeSource(job_id="job-000000a1", checkpoints=api.job_checkpoints(base))
    assert f"{WHAT}: starts from step 60 of job-000000a1 (the newest job named quickstart with a checkpoint) until " \
           "it has a checkpoint of its own" in report.notes


def test_plan_refuses_a_job_id_without_a_checkpoint_before_anything_is_bought(
        store: Store, sdk: TencentSdk, target: Target, cloud: EmulatorProcess) -> None:
    add(store, target, "job-000000a1", name="quickstart")
    # its job.json's: there since its submission
    ObjectStore(sdk, f"cvmjob-ap-guangzhou-{target.appid}").create_bucket()
    with pytest.raises(PlanError, match=rf"^{WHAT}: job-000000a1 has no complete checkpoint "):
        api.plan(QUICKSTART, ["data=[]", "checkpoints.resume_from=job-000000a1"], store=store)
    assert cloud.admin.calls(action="RunInstances") == []  # not even the plan's DryRun
