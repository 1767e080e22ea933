"""What each node's agent is given: its places in COS, what its keys may touch, and its agent.json."""

from __future__ import annotations

import base64

from orchestrator.contract import Location, ResumeSource, TemporaryKeys
from orchestrator.plan.models import Placement
from orchestrator.providers.tencent.sts import Grant, cos_policy
from orchestrator.providers.tencent.vocabulary import ChargeType
from orchestrator.staging.agent_config import agent_configs, federation_name, grants, locations
from orchestrator.staging.bootstrap import pip_index, user_data
from orchestrator.target import Target
from tests.records import TARGET, plan, spec

STATE = "cvmjob-state-1250000000"
PLACEMENT = Placement(zone="ap-guangzhou-3", instance_type="GN7.2XLARGE32", charge_type=ChargeType.SPOT,
                      bandwidth_gbps=10.0)
DATA = [{"source": "cos://datasets-1250000000/mnist/", "target": "mnist"}]


def test_a_jobs_places_default_to_its_prefix_and_shared_ones_get_a_folder_per_job() -> None:
    own = locations("job-1", spec(), STATE)
    assert own.state == Location(bucket=STATE, prefix="cvmjob/job-1/")
    assert own.checkpoints == Location(bucket=STATE, prefix="cvmjob/job-1/checkpoints/")
    assert own.outputs == Location(bucket=STATE, prefix="cvmjob/job-1/outputs/")
    shared = locations("job-1", spec(checkpoints={"upload_to": "cos://ckpt-1250000000/runs/"},
                                     outputs={"upload_to": "cos://out-1250000000/models/"}), STATE)
    assert shared.checkpoints == Location(bucket="ckpt-1250000000", prefix="runs/job-1/")
    assert shared.outputs == Location(bucket="out-1250000000", prefix="models/")


def test_the_keys_write_the_jobs_places_and_only_read_its_data_and_the_checkpoints_it_resumes_from() -> None:
    source = ResumeSource(job_id="job-0", checkpoints=Location(bucket=STATE, prefix="cvmjob/job-0/checkpoints/"))
    granted = grants("job-1", spec(data=DATA), plan(state_bucket=STATE, resume_from=source))
    assert granted == [
        Grant(STATE, "cvmjob/job-1/", write=True),
        Grant(STATE, "cvmjob/job-1/checkpoints/", write=True),
        Grant(STATE, "cvmjob/job-1/outputs/", write=True),
        Grant("datasets-1250000000", "mnist/", write=False),
        Grant(STATE, "cvmjob/job-0/checkpoints/", write=False),
        Grant(STATE, "cvmjob/_signals/job-1/", write=True),
    ]
    assert len(federation_name("job-" + "a" * 40)) == 32 and "-" not in federation_name("job-1")


def test_every_node_gets_its_config_with_the_keys_or_the_role() -> None:
    keys = TemporaryKeys(secret_id="id", secret_key="key", token="t", expires_at=1)
    configs = agent_configs("job-1", spec(train={"command": "python train.py", "nnodes": 2}),
                            plan(state_bucket=STATE), TARGET, 3, PLACEMENT, keys, "https://presigned")
    assert [(c.attempt, c.node_rank, c.nnodes) for c in configs] == [(3, 0, 2), (3, 1, 2)]
    assert [c.signal_key for c in configs] == ["cvmjob/_signals/job-1/3-0", "cvmjob/_signals/job-1/3-1"]
    first = configs[0]
    assert (first.cos.mode, first.keys, first.credentials_url, first.bandwidth_gbps) == (
        "sts", keys, "https://presigned", 10.0)
    assert (first.cos.region, first.cos.endpoint, first.cos.appid) == (TARGET.region, TARGET.endpoint, TARGET.appid)
    [role] = agent_configs("job-1", spec(credentials="role:trainer"), plan(state_bucket=STATE), TARGET, 1,
                           PLACEMENT, None, None)
    assert (role.cos.mode, role.cos.role_name, role.keys, role.credentials_url) == ("role", "trainer", None, None)


def test_an_instance_without_a_public_ip_installs_from_the_in_vpc_mirror_on_any_cloud() -> None:
    on_tencent = Target(kind="tencent", region="ap-guangzhou", appid="1250000000")
    private = plan(network={"vpc_id": "vpc-00000001"})
    public = plan(network={"vpc_id": "vpc-00000001", "public_bandwidth_mbps": 10})
    assert pip_index(private) == "http://mirrors.tencentyun.com/pypi/simple"
    assert pip_index(public) is None  # pip's own index is reachable
    for target in (on_tencent, TARGET):  # the emulator's instances reach no other index either
        [config] = agent_configs("job-1", spec(), private, target, 1, PLACEMENT, None, None)
        assert config.pip_index == "http://mirrors.tencentyun.com/pypi/simple"
    script = base64.b64decode(user_data("job-1", 1, 0, "https://w", "https://c", config.pip_index)).decode()
    assert "pip install --quiet --target lib --index-url http://mirrors.tencentyun.com/pypi/simple " \
           "--trusted-host mirrors.tencentyun.com " in script


def test_the_agents_of_a_launch_on_whole_gpus_wait_for_the_driver_the_plan_installs() -> None:
    driver = {"driver": "550.54.15", "cuda": "12.4.0", "cudnn": "8.9.7"}
    candidates = [PLACEMENT.model_dump(), {**PLACEMENT.model_dump(), "instance_type": "S5.LARGE8", "gpus": 0}]
    gpus = PLACEMENT.model_copy(update={"gpus": 1.0})
    planned = plan(gpu_driver=driver, candidates=[{**candidates[0], "gpus": 1.0}, candidates[1]])
    [on_gpus] = agent_configs("job-1", spec(), planned, TARGET, 1, gpus, None, None)
    assert on_gpus.gpu_driver == "550.54.15"
    cpu = PLACEMENT.model_copy(update={"instance_type": "S5.LARGE8", "gpus": 0})
    [on_cpu] = agent_configs("job-1", spec(), planned, TARGET, 1, cpu, None, None)
    assert on_cpu.gpu_driver is None
    [no_driver] = agent_configs("job-1", spec(), plan(candidates=[candidates[0]]), TARGET, 1, gpus, None, None)
    assert no_driver.gpu_driver is None


def test_a_bucket_of_another_region_is_granted_and_reached_in_its_region() -> None:
    far = plan(state_bucket=STATE, bucket_regions={"datasets-1250000000": "ap-beijing"})
    granted = grants("job-1", spec(data=DATA), far)
    assert [g.region for g in granted if g.bucket == "datasets-1250000000"] == ["ap-beijing"]
    assert {g.region for g in granted if g.bucket == STATE} == {None}  # the keys' own region
    policy = cos_policy("ap-guangzhou", "1250000000", granted)
    resources = {r for st in policy["statement"] for r in st["resource"]}  # type: ignore[attr-defined]
    assert "qcs::cos:ap-beijing:uid/1250000000:datasets-1250000000/mnist/*" in resources
    assert f"qcs::cos:ap-guangzhou:uid/1250000000:{STATE}/cvmjob/job-1/*" in resources
    [config] = agent_configs("job-1", spec(data=DATA), far, TARGET, 1, PLACEMENT, None, None)
    assert config.cos.bucket_regions == {"datasets-1250000000": "ap-beijing"}
