"""The one RunInstances request: a job's launch, the plan's DryRun probe and a pool purchase share its rules."""

from __future__ import annotations

from datetime import datetime, timezone

from orchestrator.contract.tags import TAG_JOB, TAG_NAME, TAG_NODE, TAG_OWNER, owner
from orchestrator.plan.models import Placement, PlannedNetwork
from orchestrator.providers.tencent import compute
from orchestrator.providers.tencent.vocabulary import ChargeType
from orchestrator.staging.launch import client_token, launch_request, node_name, node_tags
from tests.records import spec

DISKS = {"system": {"type": "CLOUD_SSD", "size_gib": 100}, "data": [{"type": "CLOUD_PREMIUM", "size_gib": 500}]}
SPOT = Placement(zone="ap-guangzhou-3", instance_type="GN7.2XLARGE32", charge_type=ChargeType.SPOT)
ON_DEMAND = SPOT.model_copy(update={"charge_type": ChargeType.ON_DEMAND})


def test_a_jobs_request_carries_its_disks_role_tags_and_spot_cap() -> None:
    job = spec("bert", disks=DISKS, credentials="role:trainer", tags={"team": "ml"},
               billing={"mode": "spot", "spot_max_price": 2.5})
    at = datetime(2026, 12, 4, tzinfo=timezone.utc)
    request = launch_request(job, SPOT, "img-1", client_token=client_token("job-1", 2, 1),
                             name=node_name(job, "job-1", 2, 1), tags=node_tags(job, "job-1", 2, 1),
                             user_data_b64="ZWNobw==", terminate_at=at)

    assert (request.zone, request.instance_type, request.charge_type, request.image_id) == (
        "ap-guangzhou-3", "GN7.2XLARGE32", ChargeType.SPOT, "img-1")
    assert request.system_disk == compute.Disk("CLOUD_SSD", 100)
    assert request.data_disks == (compute.Disk("CLOUD_PREMIUM", 500),)
    assert (request.cam_role, request.spot_max_price, request.user_data_b64, request.terminate_at) == (
        "trainer", 2.5, "ZWNobw==", at)
    assert request.tags == {"team": "ml", TAG_JOB: "job-1", "cvmjob:attempt": "2", TAG_NODE: "1", TAG_NAME: "bert",
                            TAG_OWNER: owner()}
    assert request.name == "cvmjob-bert-job-1-a2n1" and request.count == 1


def test_the_spot_cap_goes_only_with_spot_and_the_probe_asks_for_what_the_launch_will() -> None:
    job = spec("bert", disks=DISKS, credentials="role:trainer", billing={"mode": "spot", "spot_max_price": 2.5})
    probe = launch_request(job, SPOT, "img-1", client_token="cvmjob-plan-dry-run", name="cvmjob-bert", tags={})
    launch = launch_request(job, SPOT, "img-1", client_token=client_token("job-1", 1, 0), name="x",
                            tags=node_tags(job, "job-1", 1, 0))
    same = ("zone", "instance_type", "charge_type", "image_id", "system_disk", "data_disks", "spot_max_price",
            "cam_role")
    assert [getattr(probe, f) for f in same] == [getattr(launch, f) for f in same]
    fallback = launch_request(job, ON_DEMAND, "img-1", client_token="t", name="n", tags={})
    assert fallback.spot_max_price is None  # the on-demand fallback of a spot job: no spot price on the wire


def test_a_pool_purchase_has_no_job_and_pays_for_its_months() -> None:
    reserved = Placement(zone="ap-guangzhou-3", instance_type="GN7.2XLARGE32", charge_type=ChargeType.RESERVED)
    request = launch_request(None, reserved, "img-1", client_token="cvmjob-pool-1", name="cvmjob-pool-p",
                             tags={"cvmjob:pool": "p"}, prepaid_months=3, prepaid_renew=True, count=4)
    assert (request.system_disk, request.data_disks, request.cam_role, request.spot_max_price) == (None, (), None, None)
    assert (request.prepaid_months, request.prepaid_renew, request.count, request.tags) == (
        3, True, 4, {"cvmjob:pool": "p"})


def test_the_client_token_is_one_launch_per_job_attempt_and_node() -> None:
    assert client_token("job-1", 1, 0) == client_token("job-1", 1, 0)
    assert len({client_token("job-1", 1, 0), client_token("job-1", 2, 0), client_token("job-1", 1, 1),
                client_token("job-2", 1, 0)}) == 4
    assert len(client_token("job-1", 1, 0)) <= 64 and client_token("job-1", 1, 0).isascii()


def test_a_plan_of_a_release_that_named_no_network_launches_into_the_clouds_defaults_as_it_did() -> None:
    params = launch_request(spec(), SPOT, "img-1", client_token="t", name="n", tags={}).params()
    assert not {"VirtualPrivateCloud", "SecurityGroupIds", "InternetAccessible"} & set(params)


def test_only_an_hcc_type_is_bought_into_the_plans_hpc_cluster() -> None:
    network = PlannedNetwork(vpc_id="vpc-2ari9m7h", subnets={"ap-guangzhou-3": "subnet-ht9h8jdo"},
                             hpc_cluster_id="hpc-n1i6ehfo")
    hcc = Placement(zone="ap-guangzhou-3", instance_type="HCCPNV4h.48XLARGE1024", charge_type=ChargeType.ON_DEMAND)
    params = launch_request(spec(), hcc, "img-1", client_token="t", name="n", tags={}, network=network).params()
    assert params["HpcClusterId"] == "hpc-n1i6ehfo"
    other = launch_request(spec(), SPOT, "img-1", client_token="t", name="n", tags={}, network=network).params()
    assert "HpcClusterId" not in other  # the cloud refuses it for any type but HCC
