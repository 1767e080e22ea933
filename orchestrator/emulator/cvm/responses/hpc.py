"""HPC cluster actions: CreateHpcCluster, DescribeHpcClusters, DeleteHpcClusters (the rules: ../hpc.py).

Limits from the request models' docstrings: Name 1-60 characters, Remark 1-256, HpcClusterType CDC, CHC or
STANDARD (the default), HpcClusterBusinessId only with CDC ("非CDC场景不支持HpcClusterBusinessId"), at most 100
HpcClusterIds and no more than Limit ("不能超过Limit值"), tags of ResourceType "hpc" (TagSpecification).
"""

from __future__ import annotations

from typing import Any

from ...api3.dispatch import CallContext
from ...api3.params import Params
from ...catalog import INSTANCE_TYPES_BY_NAME
from ...errors import ApiError
from .. import query, views
from ..hpc import CLUSTER_TYPES, members
from ..launch import check_zone
from ..models import Cvm
from ..records import HpcCluster
from ..tags import parse_tag_specification, tag_filter_values

NAME_MAX = 60
REMARK_MAX = 256
MAX_IDS = 100


def _text(params: Params, name: str, maximum: int, *, required: bool) -> str:
    value = params.str(name, required=required)
    if value is None:
        return ""
    if not value:
        raise ApiError("InvalidParameterValue.NotEmpty", f"`{name}` cannot be empty.")
    if len(value) > maximum:
        raise ApiError("InvalidParameterValue.TooLong", f"`{name}` is longer than {maximum} characters.")
    return value


def _cluster_type(params: Params) -> tuple[str, str]:
    """HpcClusterType and HpcClusterBusinessId, the second only for a CDC cluster."""
    cluster_type = params.str("HpcClusterType", "STANDARD") or "STANDARD"
    if cluster_type not in CLUSTER_TYPES:
        raise ApiError("InvalidParameterValue", f"HpcClusterType must be one of {', '.join(CLUSTER_TYPES)}.")
    business_id = params.str("HpcClusterBusinessId", "") or ""
    if business_id and cluster_type != "CDC":
        raise ApiError(
            "InvalidParameterValue.HpcClusterBusinessIdNotSupported",
            "HpcClusterBusinessId is only for a CDC cluster.",
        )
    return cluster_type, business_id


def create_hpc_cluster(cvm: Cvm, ctx: CallContext, params: Params) -> dict[str, Any]:
    region = query.region_of(ctx)
    zone = check_zone(params.req_str("Zone"), region)
    name = _text(params, "Name", NAME_MAX, required=True)
    remark = _text(params, "Remark", REMARK_MAX, required=False)
    cluster_type, business_id = _cluster_type(params)
    tags = parse_tag_specification(params, "hpc")
    cluster = cvm.hpc.create(region, zone, name, remark, cluster_type, business_id, tags, cvm.clock.now())
    return {"HpcClusterSet": [views.hpc_cluster(cluster, [])]}


def _matches(cluster: HpcCluster, params: Params, filters: list[query.Filter]) -> bool:
    """Name, Zone, HpcClusterType and HpcClusterBusinessId compare exactly; InstanceType keeps the clusters that
    type can be bought into (every cluster for an HCC type, none for another); Filters are the tag filters."""
    wanted = {"Name": cluster.name, "Zone": cluster.zone, "HpcClusterType": cluster.cluster_type,
              "HpcClusterBusinessId": cluster.business_id}
    if any(params.str(key) is not None and params.str(key) != value for key, value in wanted.items()):
        return False
    instance_type = params.str("InstanceType")
    if instance_type is not None:
        itype = INSTANCE_TYPES_BY_NAME.get(instance_type)
        if itype is None or not itype.needs_hpc_cluster:
            return False
    return query.matches(cluster, filters, lambda c, name: tag_filter_values(c.tags, name) or [])


def describe_hpc_clusters(cvm: Cvm, ctx: CallContext, params: Params) -> dict[str, Any]:
    region = query.region_of(ctx)
    ids = params.str_list("HpcClusterIds", max_items=MAX_IDS)
    if len(ids) > (params.int("Limit", 20) or 20):
        raise ApiError("InvalidParameterValue.LimitExceeded", "HpcClusterIds may not hold more ids than Limit.")
    filters = query.parse_filters(params, ("tag-key", "tag-value"), tag_filters=True)
    found = [c for c in cvm.hpc.in_region(region) if (not ids or c.cluster_id in ids) and _matches(c, params, filters)]
    live = list(cvm.instances.values())
    return {
        "TotalCount": len(found),
        "HpcClusterSet": [views.hpc_cluster(c, members(live, c.cluster_id)) for c in query.page(found, params)],
    }


def delete_hpc_clusters(cvm: Cvm, ctx: CallContext, params: Params) -> dict[str, Any]:
    ids = params.str_list("HpcClusterIds", required=True, max_items=MAX_IDS)
    if not ids:
        raise ApiError("MissingParameter", "The request is missing a required parameter `HpcClusterIds`.")
    cvm.hpc.delete(query.region_of(ctx), list(dict.fromkeys(ids)), cvm.instances.values())
    return {}
