"""HPC clusters: the only way to buy the HCC families (RDMA between the instances of one cluster).

CreateHpcCluster, DescribeHpcClusters and DeleteHpcClusters follow the SDK's models and client docstrings
(tencentcloud/cvm/v20170312) and Tencent's tccli examples, which show ``CvmQuotaTotal`` 50 and ``HpcClusterType``
STANDARD (realcloud.md §1.1). A cluster belongs to one zone of its region; each call sees its X-TC-Region's.
Its members are the live instances that name it (Instance.hpc_cluster_id), so ``CurrentNum`` and ``InstanceIds``
follow launches and releases with no bookkeeping; a launch that did not get a machine (LAUNCH_FAILED) is no member.
DeleteHpcClusters deletes only empty clusters ("当高性能计算集群为空, 即集群内没有任何设备时候, 可以删除该集群",
else ResourceInUse.HpcCluster). RunInstances' rules (an HCC type needs a cluster of its zone, any other type may
name none) are in launch.py; a cluster full to its CvmQuotaTotal takes no more instances (``check_room``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ..errors import ApiError
from ..ids import new_id
from .records import LAUNCH_FAILED, HpcCluster, Instance, dump, load

CVM_QUOTA_TOTAL = 50
CLUSTER_TYPES = ("STANDARD", "CDC", "CHC")
CLUSTER_ID = re.compile(r"^hpc-[a-z0-9]{8}$")


def members(instances: Iterable[Instance], cluster_id: str) -> list[str]:
    return [i.instance_id for i in instances if i.hpc_cluster_id == cluster_id and i.state != LAUNCH_FAILED]


def check_room(cluster: HpcCluster, held: int, count: int) -> None:
    """Whether ``count`` more instances fit in a cluster that holds ``held``. The SDK lists no code of its own for a
    full cluster: LimitExceeded.InstanceQuota ("当前配额不足够生产指定数量的实例") is the nearest."""
    if held + count > CVM_QUOTA_TOTAL:
        raise ApiError(
            "LimitExceeded.InstanceQuota",
            f"The HPC cluster `{cluster.cluster_id}` holds {held} of its {CVM_QUOTA_TOTAL} instances: "
            f"{count} more do not fit.",
        )


class HpcClusters:
    def __init__(self) -> None:
        self.clusters: dict[str, HpcCluster] = {}

    def in_region(self, region: str) -> list[HpcCluster]:
        return [c for c in self.clusters.values() if c.region == region]

    def zones(self, region: str) -> dict[str, str]:
        """The region's clusters: id -> zone (what a launch checks its HpcClusterId against)."""
        return {c.cluster_id: c.zone for c in self.in_region(region)}

    def get(self, region: str, cluster_id: str) -> HpcCluster:
        cluster = self.clusters.get(cluster_id)
        if cluster is None or cluster.region != region:
            raise ApiError("ResourceNotFound.HpcCluster", f"The HPC cluster `{cluster_id}` does not exist.")
        return cluster

    def create(self, region: str, zone: str, name: str, remark: str, cluster_type: str, business_id: str,
               tags: list[dict[str, str]], now: float) -> HpcCluster:
        cluster_id = new_id("hpc")
        while cluster_id in self.clusters:
            cluster_id = new_id("hpc")
        cluster = HpcCluster(cluster_id, region, zone, name, remark, cluster_type, business_id, tags, now)
        self.clusters[cluster_id] = cluster
        return cluster

    def delete(self, region: str, cluster_ids: list[str], instances: Iterable[Instance]) -> None:
        """All or nothing: every cluster must exist and be empty before any is deleted."""
        live = list(instances)
        for cluster_id in cluster_ids:
            self.get(region, cluster_id)
            held = members(live, cluster_id)
            if held:
                raise ApiError(
                    "ResourceInUse.HpcCluster",
                    f"The HPC cluster `{cluster_id}` holds {len(held)} instances ({', '.join(held)}): "
                    "terminate them first.",
                )
        for cluster_id in cluster_ids:
            del self.clusters[cluster_id]

    def to_state(self) -> list[dict[str, Any]]:
        return [dump(c) for c in self.clusters.values()]

    def restore(self, state: list[dict[str, Any]]) -> None:
        self.clusters = {c.cluster_id: c for c in (load(HpcCluster, item) for item in state)}
