"""api.plan's refusals, each one PlanError before anything is bought (not even the plan's DryRun): temporary keys
for a job whose instances get their COS keys from STS (``credentials: sts``, the default), and what the spec names
that this cloud does not have (its image, its buckets and data); what it will create is said in a note."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator import api
from orchestrator.errors import CvmjobError
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
    assert report.notes[1] == f"the state bucket cvmjob-ap-guangzhou-{cloud.appid} will be created"
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
    assert api.plan(spec, []).plan.state_bucket == f"cvmjob-ap-guangzhou-{appid}"


def test_the_state_bucket_is_said_to_be_created_only_while_it_is_missing(cloud: EmulatorProcess, sdk: TencentSdk,
                                                                         tmp_path: Path) -> None:
    spec = small(tmp_path, f"storage: {{bucket: state-{sdk.appid}}}\n")
    assert f"the state bucket state-{sdk.appid} will be created" in api.plan(spec).notes
    ObjectStore(sdk, f"state-{sdk.appid}").create_bucket()
    assert not [n for n in api.plan(spec).notes if "state bucket" in n]


# -- buckets of another region -----------------------------------------------------------------------------------
def test_every_bucket_the_instances_use_must_be_in_the_jobs_region(cloud: EmulatorProcess, sdk: TencentSdk,
                                                                   tmp_path: Path) -> None:
    """Tencent serves COS across regions on the public network only: an instance without a public IP cannot reach
    such a bucket, so the plan refuses each one, naming its field and region."""
    ObjectStore(sdk, f"gz-{cloud.appid}").create_bucket()  # sdk's region: ap-guangzhou
    spec = small(tmp_path, f"storage: {{bucket: gz-{cloud.appid}}}\n").read_text().replace("ap-guangzhou",
                                                                                          "ap-shanghai")
    (tmp_path / "job.yaml").write_text(spec)
    head = (f"bucket gz-{cloud.appid} is in ap-guangzhou and the job runs in ap-shanghai: Tencent serves COS across "
            "regions on the public network only, which the instances do not reach without a public IP (and which "
            "bills the traffic).")
    assert refused(tmp_path / "job.yaml", [f"checkpoints.upload_to=cos://gz-{cloud.appid}/ckpt/"], cloud) == [
        f"checkpoints.upload_to: {head} use a bucket in ap-shanghai (copy the data there), run the job in "
        "ap-guangzhou, or set network.allow_cross_region with network.public_ip",
        f"storage.bucket: {head} the agents and the controller keep the job's state there: name a bucket of the "
        "job's region, or leave storage.bucket unset"]


def test_allow_cross_region_lets_data_elsewhere_be_read_over_a_public_ip_and_says_so(
        cloud: EmulatorProcess, sdk: TencentSdk, tmp_path: Path) -> None:
    data = ObjectStore(sdk, f"gz-{cloud.appid}")  # sdk's region: ap-guangzhou
    data.create_bucket()
    data.put_bytes("set/a.bin", b"x")
    spec = small(tmp_path, f"data: [{{source: 'cos://gz-{cloud.appid}/set/', target: set}}]\n").read_text()
    (tmp_path / "job.yaml").write_text(spec.replace("ap-guangzhou", "ap-shanghai"))
    allowed = ["network.allow_cross_region=true", "network.public_ip.bandwidth_mbps=10"]
    report = api.plan(tmp_path / "job.yaml", allowed)
    assert report.plan.bucket_regions == {f"gz-{cloud.appid}": "ap-guangzhou"}
    assert f"data.0.source: bucket gz-{cloud.appid} is in ap-guangzhou: reached over the public network " \
           "(network.allow_cross_region), slower than COS of the job's region and billed as traffic" in report.notes
    with pytest.raises(CvmjobError, match="allow_cross_region: COS of another region is reached over the public "
                                          "network only: set public_ip too"):
        api.plan(tmp_path / "job.yaml", allowed[:1])
    with pytest.raises(PlanError, match=r"storage.bucket: bucket .* is in ap-guangzhou"):  # never the state bucket
        api.plan(tmp_path / "job.yaml", [*allowed, f"storage.bucket=gz-{cloud.appid}"])
