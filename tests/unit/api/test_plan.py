"""api.plan's refusals, each one PlanError before anything is bought (not even the plan's DryRun): temporary keys
for a job whose instances get their COS keys from STS (``credentials: sts``, the default), and what the spec names
that this cloud does not have (its image, its buckets and data); what it will create is said in a note."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator import api
from orchestrator.plan.planner import PlanError
from orchestrator.providers.tencent import TencentSdk, images
from orchestrator.providers.tencent.storage import ObjectStore
from tests.emulator_process import EmulatorProcess

REPO = Path(__file__).resolve().parents[3]
QUICKSTART = REPO / "jobs" / "quickstart" / "job.yaml"
SMALL = """\
name: small
region: ap-guangzhou
instance: {type: S5.MEDIUM4}
train: {command: python train.py}
"""


def refused(spec_path: Path, overrides: list[str], cloud: EmulatorProcess) -> list[str]:
    with pytest.raises(PlanError) as refusal:
        api.plan(spec_path, overrides)
    assert cloud.admin.calls(action="RunInstances") == []
    return refusal.value.problems


def small(tmp_path: Path, more: str = "") -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(SMALL + more, encoding="utf-8")
    return path


# -- temporary keys ---------------------------------------------------------------------------------------------
def temporary_keys(sdk: TencentSdk) -> dict[str, str]:
    policy = {"version": "2.0", "statement": [{"effect": "allow", "action": ["*"], "resource": ["*"]}]}
    keys = sdk.call("sts", "GetFederationToken", {"Name": "ci", "Policy": json.dumps(policy),
                                                  "DurationSeconds": 1800})["Credentials"]
    return {"TENCENTCLOUD_SECRET_ID": keys["TmpSecretId"], "TENCENTCLOUD_SECRET_KEY": keys["TmpSecretKey"],
            "TENCENTCLOUD_SESSION_TOKEN": keys["Token"]}


def test_temporary_keys_are_refused_for_sts_credentials_and_the_way_out_said(
        cloud: EmulatorProcess, sdk: TencentSdk, monkeypatch: pytest.MonkeyPatch) -> None:
    """GetFederationToken refuses temporary keys (FailedOperation.TempKeyNotAllowed): the job would be created, then
    fail at its launch. The plan's reads went through with them: it is the plan that refuses."""
    for name, value in temporary_keys(sdk).items():
        monkeypatch.setenv(name, value)
    assert refused(QUICKSTART, ["data=[]"], cloud) == [
        "credentials: sts (the default) needs permanent keys to issue the instances' COS keys, and this machine's "
        "are temporary (environment (TENCENTCLOUD_SECRET_ID)): bind a CAM role to the instances instead, "
        "credentials: role:<instance role> (README, CI retraining)"]
    assert refused(QUICKSTART, ["data=[]", "credentials=sts"], cloud)[0].startswith("credentials: sts (the default)")
    report = api.plan(QUICKSTART, ["data=[]", "credentials=role:cvmjob-instance"])
    assert report.settings.short_lived_keys is False
    assert cloud.admin.calls(action="RunInstances")  # its DryRun: the launch may go ahead


def test_permanent_keys_plan_a_job_with_sts_credentials(cloud: EmulatorProcess) -> None:
    report = api.plan(QUICKSTART, ["data=[]"])
    assert report.settings.short_lived_keys is True and report.plan.candidates
    assert report.notes[0].startswith("network: created the cvmjob security group")  # a new account's first plan
    assert report.notes[1] == f"the state bucket cvmjob-{cloud.appid} will be created"
    assert report.notes[2].startswith("network: no public IP, so pip (the bootstrap's, setup's and the training's) "
                                      "installs from Tencent's in-VPC mirror http://mirrors.tencentyun.com/pypi/simple")
    assert report.notes[3].startswith("image: Ubuntu Server 22.04 LTS 64bit has no GPU driver: the NVIDIA driver "
                                      "535.161.07 (CUDA 12.4.0, cuDNN 8.9.7) installs at boot")
    assert len(report.notes) == 4


# -- the image --------------------------------------------------------------------------------------------------
def test_an_image_the_cloud_does_not_have_is_refused_by_the_field_that_names_it(cloud: EmulatorProcess,
                                                                                tmp_path: Path) -> None:
    spec = small(tmp_path)
    assert refused(spec, ["image.id=img-00000000"], cloud) == [
        "image.id: img-00000000 does not exist in ap-guangzhou. check the id, or use image.name"]
    assert refused(spec, ["image.name=no-such-image"], cloud) == [
        "image.name: no image named 'no-such-image' in ap-guangzhou"]
    assert refused(spec, ["image.from_job=never-ran"], cloud) == [
        "image.from_job: no ready image made by a job named 'never-ran' in ap-guangzhou. run that job with "
        "snapshot.enabled: true first, or use image.id"]


def test_a_public_image_whose_python_is_older_than_the_agents_is_refused(cloud: EmulatorProcess,
                                                                       tmp_path: Path) -> None:
    spec = small(tmp_path)
    assert refused(spec, ["image.id=img-22trbn9x"], cloud) == [
        "image.id: Ubuntu Server 20.04 LTS 64bit: Ubuntu Server 20.04 LTS 64bit ships Python 3.8; the agent needs "
        "3.10 or later. use Ubuntu Server 22.04 or 24.04, or an image with a newer python3"]
    assert refused(spec, ["image.name=TencentOS Server 3.1 (TK4)"], cloud)[0].startswith(
        "image.name: TencentOS Server 3.1 (TK4): TencentOS Server 3.1 (TK4) ships Python 3.6")


def test_a_public_image_named_or_given_by_id_is_the_plans(cloud: EmulatorProcess, sdk: TencentSdk,
                                                          tmp_path: Path) -> None:
    spec = small(tmp_path)
    public = images.public(sdk)[0]
    assert api.plan(spec, [f"image.id={public.image_id}"]).plan.image_id == public.image_id
    assert api.plan(spec, [f"image.name={public.name}"]).plan.image_id == public.image_id


# -- the buckets ------------------------------------------------------------------------------------------------
def test_every_missing_bucket_and_empty_data_prefix_is_named_in_one_refusal(cloud: EmulatorProcess, sdk: TencentSdk,
                                                                            tmp_path: Path) -> None:
    appid = cloud.appid
    ObjectStore(sdk, f"data-{appid}").create_bucket()
    ObjectStore(sdk, f"data-{appid}").put_bytes("full/part-0", b"x")
    spec = small(tmp_path, f"""\
data:
  - {{source: cos://data-{appid}/full/, target: full}}
  - {{source: cos://gone-{appid}/x/, target: x}}
  - {{source: cos://data-{appid}/empty/, target: empty}}
checkpoints: {{upload_to: cos://ckpt-{appid}/runs/}}
outputs: {{upload_to: cos://out-{appid}/runs/}}
""")
    assert refused(spec, [], cloud) == [
        f"data.1.source: bucket gone-{appid} does not exist. create it or fix the bucket name",
        f"data.2.source: cos://data-{appid}/empty/ is empty. upload the data or fix the prefix",
        f"checkpoints.upload_to: bucket ckpt-{appid} does not exist. create it or leave checkpoints.upload_to unset",
        f"outputs.upload_to: bucket out-{appid} does not exist. create it or leave outputs.upload_to unset"]
    for bucket in ("gone", "ckpt", "out"):
        ObjectStore(sdk, f"{bucket}-{appid}").create_bucket()
    ObjectStore(sdk, f"gone-{appid}").put_bytes("x/a", b"a")
    ObjectStore(sdk, f"data-{appid}").put_bytes("empty/a", b"a")
    assert api.plan(spec, []).plan.state_bucket == f"cvmjob-{appid}"


def test_the_state_bucket_is_said_to_be_created_only_while_it_is_missing(cloud: EmulatorProcess, sdk: TencentSdk,
                                                                         tmp_path: Path) -> None:
    spec = small(tmp_path, f"storage: {{bucket: state-{sdk.appid}}}\n")
    assert f"the state bucket state-{sdk.appid} will be created" in api.plan(spec).notes
    ObjectStore(sdk, f"state-{sdk.appid}").create_bucket()
    assert not [n for n in api.plan(spec).notes if "state bucket" in n]
