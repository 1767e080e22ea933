"""HPC clusters (cvm/hpc.py): created, found and deleted as the SDK models them; an HCC type is bought only into a
cluster of its zone and no other type into any; a cluster with instances cannot be deleted."""

from __future__ import annotations

from typing import Any

from tencentcloud.cvm.v20170312 import cvm_client

from tests.emulator.conftest import cred, profile
from tests.emulator.cvm_support import (
    SMALL,
    api_error,
    call,
    describe,
    hpc_cluster,
    launch_params,
    run_one,
    wait_state,
)
from tests.emulator_process import EmulatorProcess

HCC = "HCCPNV4h.48XLARGE1024"
HCC_ZONE = "ap-guangzhou-6"  # HCCPNV4h is sold there, not in ap-guangzhou-3
HCC_LAUNCH = {"InstanceType": HCC, "Placement": {"Zone": HCC_ZONE}}


def clusters(cvm: Any, **params: Any) -> list[Any]:
    return list(call(cvm, "DescribeHpcClusters", params).HpcClusterSet)


def test_a_cluster_is_created_and_described_as_the_sdk_models_it(emulator: EmulatorProcess, cvm: Any) -> None:
    tags = [{"ResourceType": "hpc", "Tags": [{"Key": "cvmjob:managed", "Value": "hpc"}]}]
    (made,) = call(cvm, "CreateHpcCluster", {"Zone": HCC_ZONE, "Name": "rdma", "Remark": "two nodes",
                                              "TagSpecification": tags}).HpcClusterSet
    assert made.HpcClusterId.startswith("hpc-") and len(made.HpcClusterId) == 12
    assert (made.Name, made.Remark, made.Zone, made.HpcClusterType) == ("rdma", "two nodes", HCC_ZONE, "STANDARD")
    assert (made.CvmQuotaTotal, made.CurrentNum, made.InstanceIds) == (50, 0, [])
    assert made.CreateTime.endswith("Z") and [(t.Key, t.Value) for t in made.Tags] == [("cvmjob:managed", "hpc")]
    other = hpc_cluster(cvm, "ap-guangzhou-7", "other")

    assert [c.HpcClusterId for c in clusters(cvm)] == [made.HpcClusterId, other]
    assert call(cvm, "DescribeHpcClusters").TotalCount == 2
    assert [c.HpcClusterId for c in clusters(cvm, HpcClusterIds=[other])] == [other]
    assert [c.HpcClusterId for c in clusters(cvm, Zone=HCC_ZONE)] == [made.HpcClusterId]
    assert [c.HpcClusterId for c in clusters(cvm, Name="other")] == [other]
    assert [c.HpcClusterId for c in clusters(cvm, Filters=[{"Name": "tag:cvmjob:managed", "Values": ["hpc"]}])] == [
        made.HpcClusterId]
    assert len(clusters(cvm, InstanceType=HCC)) == 2 and clusters(cvm, InstanceType=SMALL) == []
    assert [c.HpcClusterId for c in clusters(cvm, Offset=1, Limit=1)] == [other]
    shanghai = cvm_client.CvmClient(cred(emulator), "ap-shanghai", profile(emulator))
    assert clusters(shanghai) == []  # clusters are regional


def test_what_create_refuses(emulator: EmulatorProcess, cvm: Any) -> None:
    refused: list[tuple[dict[str, Any], str]] = [
        ({"Zone": "ap-shanghai-5", "Name": "x"}, "InvalidZone.MismatchRegion"),
        ({"Zone": "ap-nowhere-1", "Name": "x"}, "InvalidParameterValue.ZoneNotSupported"),
        ({"Zone": HCC_ZONE}, "MissingParameter"),
        ({"Zone": HCC_ZONE, "Name": ""}, "InvalidParameterValue.NotEmpty"),
        ({"Zone": HCC_ZONE, "Name": "x" * 61}, "InvalidParameterValue.TooLong"),
        ({"Zone": HCC_ZONE, "Name": "x", "Remark": "r" * 257}, "InvalidParameterValue.TooLong"),
        ({"Zone": HCC_ZONE, "Name": "x", "HpcClusterType": "HUGE"}, "InvalidParameterValue"),
        ({"Zone": HCC_ZONE, "Name": "x", "HpcClusterBusinessId": "cluster-1"},
         "InvalidParameterValue.HpcClusterBusinessIdNotSupported"),
        ({"Zone": HCC_ZONE, "Name": "x", "TagSpecification": [{"ResourceType": "instance", "Tags": []}]},
         "InvalidParameterValue"),
    ]
    for params, code in refused:
        with api_error(code):
            call(cvm, "CreateHpcCluster", params)
    assert clusters(cvm) == []


def test_an_hcc_type_is_bought_only_into_a_cluster_of_its_zone(emulator: EmulatorProcess, cvm: Any) -> None:
    cluster = hpc_cluster(cvm, HCC_ZONE)
    elsewhere = hpc_cluster(cvm, "ap-guangzhou-3")
    refused: list[tuple[dict[str, Any], str]] = [
        ({}, "InvalidParameterValue.InstanceTypeRequiredHpcCluster"),
        ({"DryRun": True}, "InvalidParameterValue.InstanceTypeRequiredHpcCluster"),
        ({"HpcClusterId": "hpc-00000000"}, "ResourceNotFound.HpcCluster"),
        ({"HpcClusterId": elsewhere}, "InvalidParameterValue.HpcClusterIdZoneIdNotMatch"),
    ]
    for overrides, code in refused:
        with api_error(code):
            call(cvm, "RunInstances", launch_params(**HCC_LAUNCH, **overrides))
    with api_error("InvalidParameterValue.InstanceTypeNotSupportHpcCluster"):
        call(cvm, "RunInstances", launch_params(HpcClusterId=elsewhere))  # S5 in ap-guangzhou-3: no HCC type

    instance_id = run_one(cvm, HpcClusterId=cluster, **HCC_LAUNCH)
    (inst,) = describe(cvm, instance_id)
    assert inst.HpcClusterId == cluster
    (held,) = clusters(cvm, HpcClusterIds=[cluster])
    assert (held.CurrentNum, held.InstanceIds) == (1, [instance_id])
    plain = run_one(cvm)
    assert describe(cvm, plain)[0].HpcClusterId is None


def test_the_price_of_an_hcc_type_needs_no_cluster_but_a_named_one_must_exist(
        emulator: EmulatorProcess, cvm: Any) -> None:
    price = call(cvm, "InquiryPriceRunInstances", launch_params(**HCC_LAUNCH)).Price.InstancePrice
    assert price.UnitPrice > 0
    with api_error("ResourceNotFound.HpcCluster"):
        call(cvm, "InquiryPriceRunInstances", launch_params(HpcClusterId="hpc-00000000", **HCC_LAUNCH))


def test_a_full_cluster_takes_no_more(emulator: EmulatorProcess, cvm: Any) -> None:
    cluster = hpc_cluster(cvm, HCC_ZONE)
    emulator.admin.set_stock(HCC_ZONE, HCC, "POSTPAID_BY_HOUR", 60)
    call(cvm, "RunInstances", launch_params(DryRun=True, InstanceCount=50, HpcClusterId=cluster, **HCC_LAUNCH))
    with api_error("LimitExceeded.InstanceQuota"):
        call(cvm, "RunInstances", launch_params(DryRun=True, InstanceCount=51, HpcClusterId=cluster, **HCC_LAUNCH))


def test_a_cluster_is_deleted_only_once_empty(emulator: EmulatorProcess, cvm: Any) -> None:
    cluster, empty = hpc_cluster(cvm, HCC_ZONE, "busy"), hpc_cluster(cvm, HCC_ZONE, "empty")
    instance_id = run_one(cvm, HpcClusterId=cluster, **HCC_LAUNCH)
    with api_error("ResourceInUse.HpcCluster"):
        call(cvm, "DeleteHpcClusters", {"HpcClusterIds": [empty, cluster]})
    assert len(clusters(cvm)) == 2  # all or nothing
    with api_error("ResourceNotFound.HpcCluster"):
        call(cvm, "DeleteHpcClusters", {"HpcClusterIds": ["hpc-00000000"]})

    emulator.admin.advance(1)
    wait_state(cvm, instance_id, "RUNNING")
    call(cvm, "TerminateInstances", {"InstanceIds": [instance_id]})
    emulator.admin.advance(1)
    wait_state(cvm, instance_id, None)
    call(cvm, "DeleteHpcClusters", {"HpcClusterIds": [empty, cluster]})
    assert clusters(cvm) == []
