"""Instance actions: RunInstances, DescribeInstances(Status), Terminate/Stop/Start/Reboot/ResetInstance(s)."""

from __future__ import annotations

from typing import Any

from ...api3.dispatch import CallContext
from ...api3.params import Params
from ...errors import ApiError
from .. import query, views
from ..launch import check_client_token, parse_launch, parse_user_data
from ..models import KEEP_CHARGING, STOP_CHARGING, Cvm
from ..records import Instance
from ..tags import tag_filter_values

INSTANCE_FILTERS = (
    "zone", "project-id", "vpc-id", "subnet-id", "instance-id", "uuid", "security-group-id", "instance-name",
    "instance-charge-type", "instance-state", "private-ip-address", "image-id",
)
STOP_TYPES = ("SOFT", "HARD", "SOFT_FIRST")


def instance_values(rec: Instance, name: str) -> list[str]:
    tags = tag_filter_values(rec.tags, name)
    if tags is not None:
        return tags
    return {
        "zone": [rec.zone],
        "project-id": ["0"],
        "vpc-id": [rec.vpc_id],
        "subnet-id": [rec.subnet_id],
        "instance-id": [rec.instance_id],
        "uuid": [rec.uuid],
        "security-group-id": rec.security_group_ids,
        "instance-name": [rec.name],
        "instance-charge-type": [rec.charge_type],
        "instance-state": [rec.state],
        "private-ip-address": [rec.address, rec.vpc_ip],
        "image-id": [rec.image_id],
    }[name]


def _hard_stop(params: Params, force_flag: str) -> bool:
    stop_type = params.str("StopType", "SOFT") or "SOFT"
    if stop_type not in STOP_TYPES:
        raise ApiError("InvalidParameterValue", f"StopType must be one of {', '.join(STOP_TYPES)}.")
    return stop_type == "HARD" or params.bool(force_flag)


def run_instances(cvm: Cvm, ctx: CallContext, params: Params) -> dict[str, Any]:
    region = query.region_of(ctx)
    client_token = check_client_token(params.str("ClientToken"))
    replayed = cvm.replay(client_token) if client_token else None
    if replayed is not None:
        return {"InstanceIdSet": replayed}
    spec = parse_launch(params, region, cvm.clock.now(), cvm.network, security_groups=cvm.security_groups.ids(region),
                        hpc_clusters=cvm.hpc.zones(region))
    dry_run = params.bool("DryRun")
    ids = cvm.run_instances(spec, client_token, ctx.request_id, dry_run)
    # DryRun: the docstring says a request that passes the checks "returns the RequestId", and DryRunOperation
    # is not in RunInstances' error list (§1.1, §9.4), so a passing dry run is a success without InstanceIdSet.
    return {} if dry_run else {"InstanceIdSet": ids}


def describe_instances(cvm: Cvm, ctx: CallContext, params: Params) -> dict[str, Any]:
    region = query.region_of(ctx)
    ids = query.instance_ids(params)
    filters = query.parse_filters(params, INSTANCE_FILTERS, tag_filters=True)
    if ids and filters:
        raise ApiError("InvalidParameter", "InstanceIds and Filters cannot be given together.")
    live = {rec.instance_id: rec for rec in cvm.live(region)}
    # Unknown (or released) well-formed ids are simply absent: DescribeInstances has no NotFound (§2.1).
    recs = [live[i] for i in dict.fromkeys(ids) if i in live] if ids else list(live.values())
    recs = [r for r in recs if query.matches(r, filters, instance_values)]
    return {"TotalCount": len(recs), "InstanceSet": [views.instance(r) for r in query.page(recs, params)]}


def describe_instances_status(cvm: Cvm, ctx: CallContext, params: Params) -> dict[str, Any]:
    region = query.region_of(ctx)
    ids = query.instance_ids(params)
    recs = [r for r in cvm.live(region) if not ids or r.instance_id in ids]
    return {
        "TotalCount": len(recs),
        "InstanceStatusSet": [views.instance_status(r) for r in query.page(recs, params)],
    }


def terminate_instances(cvm: Cvm, ctx: CallContext, params: Params) -> dict[str, Any]:
    cvm.terminate(query.region_of(ctx), query.required_instance_ids(params), ctx.request_id)
    return {}


def stop_instances(cvm: Cvm, ctx: CallContext, params: Params) -> dict[str, Any]:
    region = query.region_of(ctx)
    ids = query.required_instance_ids(params)
    stopped_mode = params.str("StoppedMode", KEEP_CHARGING) or KEEP_CHARGING
    if stopped_mode not in (KEEP_CHARGING, STOP_CHARGING):
        raise ApiError("InvalidParameterValue", "StoppedMode must be KEEP_CHARGING or STOP_CHARGING.")
    cvm.stop(region, ids, _hard_stop(params, "ForceStop"), stopped_mode, ctx.request_id)
    return {}


def start_instances(cvm: Cvm, ctx: CallContext, params: Params) -> dict[str, Any]:
    cvm.start(query.region_of(ctx), query.required_instance_ids(params), ctx.request_id)
    return {}


def reboot_instances(cvm: Cvm, ctx: CallContext, params: Params) -> dict[str, Any]:
    region = query.region_of(ctx)
    cvm.reboot(region, query.required_instance_ids(params), _hard_stop(params, "ForceReboot"), ctx.request_id)
    return {}


def reset_instance(cvm: Cvm, ctx: CallContext, params: Params) -> dict[str, Any]:
    """LoginSettings, EnhancedService and HostName are accepted without effect (no SSH, no agents)."""
    region = query.region_of(ctx)
    instance_id = query.check_instance_id(params.req_str("InstanceId"))
    image_id = params.str("ImageId")
    if image_id is not None:
        query.check_image_id(image_id)
    user_data = parse_user_data(params) if "UserData" in params else None
    disk = params.obj("SystemDisk")
    disk_size = disk.int("DiskSize") if disk is not None else None
    cvm.reinstall(region, instance_id, image_id, user_data, disk_size, ctx.request_id)
    return {}
