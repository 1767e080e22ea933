"""api.submit: the planned job recorded PENDING in the store as the plan made it (its spec, plan, target and
settings typed, its deadline from limits.max_runtime, the CI labels of the environment, the fingerprint it was
given), and its job.json published in the state bucket at once, so that another machine can follow it; a job.json
COS refuses does not stop the submission."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from orchestrator import api
from orchestrator.contract import DataDigest, Fingerprint, RunLabels
from orchestrator.plan.models import Plan
from orchestrator.plan.settings import Settings
from orchestrator.providers.tencent import TencentSdk
from orchestrator.providers.tencent.storage import ObjectStore
from orchestrator.spec import JobSpec
from orchestrator.state import jobdoc
from orchestrator.state.machine import JobState
from orchestrator.state.store import Store
from orchestrator.target import Target
from tests.emulator_process import EmulatorProcess

REPO = Path(__file__).resolve().parents[3]
QUICKSTART = REPO / "jobs" / "quickstart" / "job.yaml"
SUBMITTED = 1_000.0
FINGERPRINT = Fingerprint(cvmjob_version="0.0.0", spec_sha256="a" * 64, workdir_sha256="b" * 64,
                          image_id="img-487zeit5", data=[])


@pytest.fixture
def report(cloud: EmulatorProcess) -> api.PlanReport:
    return api.plan(QUICKSTART, ["data=[]", "limits.max_runtime=2h", "limits.max_cost=20"])


def test_the_record_is_the_plan_typed_pending_and_labelled(report: api.PlanReport, store: Store, target: Target,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_REF_NAME", "main")
    monkeypatch.setenv("GITHUB_SHA", "0123abcd")
    monkeypatch.setenv("GITHUB_REPOSITORY", "acme/train")
    monkeypatch.setenv("GITHUB_RUN_ID", "42")
    job_id = api.submit(report, store, now=lambda: SUBMITTED, job_id="job-0000abcd", inputs=FINGERPRINT)
    assert job_id == "job-0000abcd"
    job = store.get(job_id)
    assert job is not None
    assert (job.name, job.state, job.outcome, job.attempt) == ("quickstart", JobState.PENDING, None, 0)
    assert isinstance(job.spec, JobSpec) and job.spec == report.spec
    assert isinstance(job.plan, Plan) and job.plan == report.plan
    assert isinstance(job.settings, Settings) and job.settings == report.settings
    assert job.settings.max_cost == 20.0  # the spec's, not a default
    assert job.target == report.target == dataclasses.replace(
        target, credential_source="environment (TENCENTCLOUD_SECRET_ID)")  # where the keys were found, not them
    assert job.labels == RunLabels(ref="main", sha="0123abcd", run_url="https://github.com/acme/train/actions/runs/42")
    assert isinstance(job.fingerprint, Fingerprint) and job.fingerprint == FINGERPRINT
    assert (job.created_at, job.entered_at, job.deadline) == (SUBMITTED, SUBMITTED, SUBMITTED + 2 * 3600)
    assert job.source_dir == str(QUICKSTART.parent)
    assert (job.lease_owner, job.cancel_requested, job.image_id, job.cost_cny) == (None, False, None, 0.0)
    assert [(e.kind, e.to_state, e.detail, e.at) for e in store.events(job_id)] == [
        ("transition", "PENDING", "created", SUBMITTED)]


def test_the_job_json_is_published_in_the_plans_state_bucket(report: api.PlanReport, store: Store, sdk: TencentSdk,
                                                            cloud: EmulatorProcess) -> None:
    state = ObjectStore(sdk, report.plan.state_bucket)
    # made by submit
    assert report.plan.state_bucket == f"cvmjob-ap-guangzhou-{cloud.appid}" and not state.bucket_exists()
    job_id = api.submit(report, store, now=lambda: SUBMITTED)
    assert jobdoc.fetch(state, job_id) == (store.get(job_id), [], store.events(job_id))


def test_a_job_json_cos_refuses_does_not_stop_the_submission(report: api.PlanReport, store: Store, sdk: TencentSdk,
                                                              cloud: EmulatorProcess,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    ObjectStore(sdk, report.plan.state_bucket).create_bucket()
    cloud.admin.inject_cos("error", operation="PutObject", key_prefix="cvmjob/job-0000abcd/job.json", status=403,
                           code="AccessDenied", count=None)
    with caplog.at_level(logging.WARNING, logger="orchestrator.state.jobdoc"):
        assert api.submit(report, store, job_id="job-0000abcd") == "job-0000abcd"
    job = store.get("job-0000abcd")
    assert job is not None and job.state == JobState.PENDING
    assert jobdoc.fetch(ObjectStore(sdk, report.plan.state_bucket), "job-0000abcd") is None
    assert any("job-0000abcd: could not put job.json" in r.getMessage() for r in caplog.records), caplog.text


def test_a_new_job_gets_a_fresh_id_and_the_lease_of_the_controller_about_to_drive_it(
        report: api.PlanReport, store: Store) -> None:
    first = api.submit(report, store, now=lambda: SUBMITTED, lease=("me@host/0123456789abcdef/1/2", 60.0))
    second = api.submit(report, store, now=lambda: SUBMITTED + 1)
    assert api.JOB_ID.fullmatch(first) and api.JOB_ID.fullmatch(second) and first != second
    held, free = store.get(first), store.get(second)
    assert held is not None and free is not None
    assert (held.lease_owner, held.lease_expires) == ("me@host/0123456789abcdef/1/2", SUBMITTED + 60.0)
    assert free.lease_owner is None
    assert [j.job_id for j in store.list_jobs()] == [second, first]


def test_the_source_dir_is_the_spec_files_folder_whatever_the_path_given(
        cloud: EmulatorProcess, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The workdir is staged from there by a controller whose working directory is another."""
    monkeypatch.chdir(REPO / "jobs")
    report = api.plan(Path("quickstart/job.yaml"), ["data=[]"], name="relative")
    job = store.get(api.submit(report, store))
    assert job is not None and (job.name, job.source_dir) == ("relative", str(REPO / "jobs" / "quickstart"))


def test_a_job_with_data_keeps_its_fingerprints_digests(report: api.PlanReport, store: Store) -> None:
    inputs = FINGERPRINT.model_copy(update={"data": [DataDigest(bucket="d-1250000000", prefix="x/", objects=2,
                                                                 bytes=10, sha256="c" * 64)]})
    job = store.get(api.submit(report, store, inputs=inputs))
    assert job is not None and job.fingerprint == inputs
    unlabelled = store.get(api.submit(report, store))
    assert unlabelled is not None and (unlabelled.fingerprint, unlabelled.labels) == (None, RunLabels())


def test_new_job_ids_are_job_and_eight_hex_digits() -> None:
    ids = {api.new_job_id() for _ in range(50)}
    assert len(ids) == 50 and all(api.JOB_ID.fullmatch(i) for i in ids)
