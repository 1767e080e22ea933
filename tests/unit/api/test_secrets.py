"""The secrets at the library's face: api.plan adds `--secret`'s names and stops, before asking the cloud anything,
when one is not set here; api.submit puts the values in the job's secrets.json before the job exists, and its
records (the store, job.json) hold the names alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator import api
from orchestrator.contract import JobLayout, SecretsDoc
from orchestrator.providers.tencent import TencentSdk
from orchestrator.providers.tencent.storage import ObjectStore
from orchestrator.spec import SpecError
from orchestrator.staging.secrets import SecretsMissing
from orchestrator.state.store import Store
from tests.emulator_process import EmulatorProcess

REPO = Path(__file__).resolve().parents[3]
QUICKSTART = REPO / "jobs" / "quickstart" / "job.yaml"
VALUE = "hf-0123456789abcdef"


def test_a_secret_not_set_here_stops_the_plan_before_any_call(cloud: EmulatorProcess,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("WANDB_API_KEY", "")  # as a CI system gives a secret it withholds
    asked = len(cloud.admin.calls())
    with pytest.raises(SecretsMissing, match=r"^secrets: HF_TOKEN, WANDB_API_KEY are not set"):
        api.plan(QUICKSTART, ["data=[]", "secrets=[HF_TOKEN]"], secret_names=["WANDB_API_KEY"])
    assert len(cloud.admin.calls()) == asked  # not even the security group a first plan makes
    with pytest.raises(SpecError, match=r"^--secret: secrets\.1: 'hf' is not a valid variable name"):
        api.plan(QUICKSTART, ["data=[]", "secrets=[HF_TOKEN]"], secret_names=["hf"])


def test_submit_puts_the_values_beside_the_job_and_its_records_keep_the_names(
        cloud: EmulatorProcess, store: Store, sdk: TencentSdk, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", VALUE)
    monkeypatch.setenv("WANDB_API_KEY", "w")
    report = api.plan(QUICKSTART, ["data=[]", "secrets=[HF_TOKEN]"], secret_names=["WANDB_API_KEY", "HF_TOKEN"])
    assert report.spec.secrets == ("HF_TOKEN", "WANDB_API_KEY")
    state = ObjectStore(sdk, report.plan.state_bucket)
    assert not state.bucket_exists()  # a first job: submit makes the bucket for its secrets
    job_id = api.submit(report, store, job_id="job-0000abcd")
    doc = SecretsDoc.model_validate(state.get_json(JobLayout(job_id).secrets))
    assert doc.values == {"HF_TOKEN": VALUE, "WANDB_API_KEY": "w"}
    job = store.get(job_id)
    assert job is not None and job.spec.secrets == ("HF_TOKEN", "WANDB_API_KEY")
    job_doc = state.get_bytes(JobLayout(job_id).job_doc)
    assert job_doc is not None and b"HF_TOKEN" in job_doc and VALUE.encode() not in job_doc
    plain = api.submit(api.plan(QUICKSTART, ["data=[]"]), store)
    assert state.head(JobLayout(plain).secrets) is None  # a job without secrets has no such object
