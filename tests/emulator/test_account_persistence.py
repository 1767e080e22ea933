"""What the account set up outlives a restart of the emulator (the state file under --state-dir): a spot quota a
ticket changed, HPC clusters with their members, and the CAM policy of the long-term key."""

from __future__ import annotations

from pathlib import Path

from tencentcloud.cvm.v20170312 import cvm_client
from tencentcloud.vpc.v20170312 import models as vpc_models
from tencentcloud.vpc.v20170312 import vpc_client

from tests.emulator.conftest import REGION, cred, profile
from tests.emulator.cvm_support import api_error, call, hpc_cluster, run_one
from tests.emulator_process import start_emulator

HCC_ZONE = "ap-guangzhou-6"


def test_quotas_clusters_and_the_keys_policy_survive_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = start_emulator(state)
    try:
        cvm = cvm_client.CvmClient(cred(first), REGION, profile(first))
        first.admin.set_spot_quota(8, HCC_ZONE)
        cluster = hpc_cluster(cvm, HCC_ZONE, "kept")
        member = run_one(cvm, InstanceType="HCCPNV4h.48XLARGE1024", Placement={"Zone": HCC_ZONE},
                         HpcClusterId=cluster)
        first.admin.set_account_policy({"version": "2.0", "statement": [
            {"effect": "allow", "action": ["name/cvm:*"], "resource": ["*"]}]})
    finally:
        first.stop()

    second = start_emulator(state)
    try:
        cvm = cvm_client.CvmClient(cred(second), REGION, profile(second))
        answer = call(cvm, "DescribeAccountQuota", {"Filters": [{"Name": "zone", "Values": [HCC_ZONE]}]})
        (spot,) = answer.AccountQuotaOverview.AccountQuota.SpotPaidQuotaSet
        assert spot.TotalQuota == 8
        (kept,) = call(cvm, "DescribeHpcClusters", {"HpcClusterIds": [cluster]}).HpcClusterSet
        assert (kept.Name, kept.InstanceIds) == ("kept", [member])
        vpc = vpc_client.VpcClient(cred(second), REGION, profile(second))
        with api_error("AuthFailure.UnauthorizedOperation"):
            vpc.DescribeSecurityGroups(vpc_models.DescribeSecurityGroupsRequest())
    finally:
        second.stop()
