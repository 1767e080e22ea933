"""CVM 2017-03-12 actions: parse the request, call the model, render the answer (views.py).

Every request and response field is checked against the SDK's models (tencentcloud/cvm/v20170312/models.py);
the error codes are the per-API lists' (shared/reference/tencent-cloud-api.md §1-§2). Instances, images and
timers are regional: each call sees only those of its X-TC-Region.
"""

from __future__ import annotations

from typing import Any

from ..api3.dispatch import CallContext, Service
from ..api3.params import Params
from ..catalog import CHARGE_TYPES, INSTANCE_TYPES, INSTANCE_TYPES_BY_NAME, REGIONS, zones_of
from ..errors import ApiError
from . import query, views
from .images import PUBLIC_BY_ID
from .launch import check_client_token, parse_action_time, parse_launch, parse_user_data
from .models import KEEP_CHARGING, STOP_CHARGING, Cvm
from .records import ActionTimer, Instance
from .tags import parse_tag_specification, tag_filter_values
from .times import parse_cst

INSTANCE_FILTERS = (
    "zone", "project-id", "vpc-id", "subnet-id", "instance-id", "uuid", "security-group-id", "instance-name",
    "instance-charge-type", "instance-state", "private-ip-address", "image-id",
)
IMAGE_FILTERS = ("image-id", "image-type", "image-name", "platform")
ZONE_CONFIG_FILTERS = ("zone", "instance-family", "instance-type", "instance-charge-type")
TYPE_CONFIG_FILTERS = ("zone", "instance-family", "instance-type")
STOP_TYPES = ("SOFT", "HARD", "SOFT_FIRST")
TIMER_STATUSES = ("UNDO", "DOING", "DONE")


def region_of(ctx: CallContext) -> str:
    if ctx.region not in REGIONS:
        raise ApiError("InvalidRegion.NotFound", f"The region `{ctx.region}` does not exist; use one of {REGIONS}.")
    return ctx.region


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
        "private-ip-address": [views.LOCAL_IPV4, rec.vpc_ip],
        "image-id": [rec.image_id],
    }[name]


def image_values(image: dict[str, Any], name: str) -> list[str]:
    tags = tag_filter_values(image["Tags"], name)
    if tags is not None:
        return tags
    field = {"image-id": "ImageId", "image-type": "ImageType", "image-name": "ImageName", "platform": "Platform"}
    return [image[field[name]]]


def _hard_stop(params: Params, force_flag: str) -> bool:
    stop_type = params.str("StopType", "SOFT") or "SOFT"
    if stop_type not in STOP_TYPES:
        raise ApiError("InvalidParameterValue", f"StopType must be one of {', '.join(STOP_TYPES)}.")
    return stop_type == "HARD" or params.bool(force_flag)


def _required_instance_ids(params: Params) -> list[str]:
    ids = query.instance_ids(params)
    if not ids:
        raise ApiError("MissingParameter", "The request is missing a required parameter `InstanceIds`.")
    return ids


def build(cvm: Cvm) -> Service:
    service = Service("cvm", "2017-03-12")
    uin = cvm.iam.uin

    # -- instances ---------------------------------------------------------------------------------------
    @service.action("RunInstances")
    def run_instances(ctx: CallContext, params: Params) -> dict[str, Any]:
        region = region_of(ctx)
        client_token = check_client_token(params.str("ClientToken"))
        replayed = cvm.replay(client_token) if client_token else None
        if replayed is not None:
            return {"InstanceIdSet": replayed}
        spec = parse_launch(params, region, cvm.clock.now())
        dry_run = params.bool("DryRun")
        ids = cvm.run_instances(spec, client_token, ctx.request_id, dry_run)
        # DryRun: the docstring says a request that passes the checks "returns the RequestId", and DryRunOperation
        # is not in RunInstances' error list (§1.1, §9.4), so a passing dry run is a success without InstanceIdSet.
        return {} if dry_run else {"InstanceIdSet": ids}

    @service.action("DescribeInstances", mutates=False)
    def describe_instances(ctx: CallContext, params: Params) -> dict[str, Any]:
        region = region_of(ctx)
        ids = query.instance_ids(params)
        filters = query.parse_filters(params, INSTANCE_FILTERS, tag_filters=True)
        if ids and filters:
            raise ApiError("InvalidParameter", "InstanceIds and Filters cannot be given together.")
        live = {rec.instance_id: rec for rec in cvm.live(region)}
        # Unknown (or released) well-formed ids are simply absent: DescribeInstances has no NotFound (§2.1).
        recs = [live[i] for i in dict.fromkeys(ids) if i in live] if ids else list(live.values())
        recs = [r for r in recs if query.matches(r, filters, instance_values)]
        return {"TotalCount": len(recs), "InstanceSet": [views.instance(r) for r in query.page(recs, params)]}

    @service.action("DescribeInstancesStatus", mutates=False)
    def describe_instances_status(ctx: CallContext, params: Params) -> dict[str, Any]:
        region = region_of(ctx)
        ids = query.instance_ids(params)
        recs = [r for r in cvm.live(region) if not ids or r.instance_id in ids]
        return {
            "TotalCount": len(recs),
            "InstanceStatusSet": [views.instance_status(r) for r in query.page(recs, params)],
        }

    @service.action("TerminateInstances")
    def terminate_instances(ctx: CallContext, params: Params) -> dict[str, Any]:
        cvm.terminate(region_of(ctx), _required_instance_ids(params), ctx.request_id)
        return {}

    @service.action("StopInstances")
    def stop_instances(ctx: CallContext, params: Params) -> dict[str, Any]:
        region = region_of(ctx)
        ids = _required_instance_ids(params)
        stopped_mode = params.str("StoppedMode", KEEP_CHARGING) or KEEP_CHARGING
        if stopped_mode not in (KEEP_CHARGING, STOP_CHARGING):
            raise ApiError("InvalidParameterValue", "StoppedMode must be KEEP_CHARGING or STOP_CHARGING.")
        cvm.stop(region, ids, _hard_stop(params, "ForceStop"), stopped_mode, ctx.request_id)
        return {}

    @service.action("StartInstances")
    def start_instances(ctx: CallContext, params: Params) -> dict[str, Any]:
        cvm.start(region_of(ctx), _required_instance_ids(params), ctx.request_id)
        return {}

    @service.action("RebootInstances")
    def reboot_instances(ctx: CallContext, params: Params) -> dict[str, Any]:
        region = region_of(ctx)
        cvm.reboot(region, _required_instance_ids(params), _hard_stop(params, "ForceReboot"), ctx.request_id)
        return {}

    @service.action("ResetInstance")
    def reset_instance(ctx: CallContext, params: Params) -> dict[str, Any]:
        """LoginSettings, EnhancedService and HostName are accepted without effect (no SSH, no agents)."""
        region = region_of(ctx)
        instance_id = query.check_instance_id(params.req_str("InstanceId"))
        image_id = params.str("ImageId")
        if image_id is not None:
            query.check_image_id(image_id)
        user_data = parse_user_data(params) if "UserData" in params else None
        disk = params.obj("SystemDisk")
        disk_size = disk.int("DiskSize") if disk is not None else None
        cvm.reinstall(region, instance_id, image_id, user_data, disk_size, ctx.request_id)
        return {}

    # -- images ------------------------------------------------------------------------------------------
    @service.action("CreateImage")
    def create_image(ctx: CallContext, params: Params) -> dict[str, Any]:
        region = region_of(ctx)
        name = params.req_str("ImageName")
        if "SnapshotIds" in params:
            raise ApiError("InvalidParameter.SnapshotNotFound", "There are no snapshots; image an instance instead.")
        instance_id = params.str("InstanceId")
        if instance_id is None:
            raise ApiError("InvalidParameter.SpecifyOneParameter", "CreateImage needs InstanceId or SnapshotIds.")
        query.check_instance_id(instance_id)
        description = params.str("ImageDescription", "") or ""
        if len(description) > 256:
            raise ApiError("InvalidParameter.ValueTooLarge", "ImageDescription is longer than 256 characters.")
        if (params.str("ForcePoweroff", "false") or "false") not in ("true", "false"):
            raise ApiError("InvalidParameterValue", "ForcePoweroff is the string `true` or `false`.")
        if params.str_list("DataDiskIds"):
            # Data disks hold nothing here: only the system disk is captured.
            raise ApiError("InvalidParameter.LocalDataDiskNotSupport", "Only the system disk is imaged.")
        tags = parse_tag_specification(params, "image")
        image = cvm.create_image(region, instance_id, name, description, tags, ctx.request_id, params.bool("DryRun"))
        return {} if image is None else {"ImageId": image.image_id}

    @service.action("DescribeImages", mutates=False)
    def describe_images(ctx: CallContext, params: Params) -> dict[str, Any]:
        region = region_of(ctx)
        ids = query.image_ids(params)
        filters = query.parse_filters(params, IMAGE_FILTERS, tag_filters=True)
        if ids and filters:
            raise ApiError(
                "InvalidParameter.InvalidParameterCoexistImageIdsFilters", "ImageIds and Filters cannot be combined."
            )
        instance_type = params.str("InstanceType")
        if instance_type is not None and instance_type not in INSTANCE_TYPES_BY_NAME:
            raise ApiError(
                "InvalidParameterValue.InstanceTypeNotFound", f"The instance type `{instance_type}` does not exist."
            )
        images = [views.public_image(i) for i in PUBLIC_BY_ID]
        images += [views.private_image(i, uin) for i in cvm.images.in_region(region)]
        if ids:
            images = [i for i in images if i["ImageId"] in ids]
        images = [i for i in images if query.matches(i, filters, image_values, fuzzy=("image-name", "platform"))]
        return {"TotalCount": len(images), "ImageSet": query.page(images, params)}

    @service.action("DeleteImages")
    def delete_images(ctx: CallContext, params: Params) -> dict[str, Any]:
        region = region_of(ctx)
        ids = query.image_ids(params)
        if not ids:
            raise ApiError("MissingParameter", "The request is missing a required parameter `ImageIds`.")
        cvm.images.delete(region, ids, dry_run=params.bool("DryRun"))
        return {}

    # -- prices and the catalog --------------------------------------------------------------------------
    @service.action("InquiryPriceRunInstances", mutates=False)
    def inquiry_price_run_instances(ctx: CallContext, params: Params) -> dict[str, Any]:
        spec = parse_launch(params, region_of(ctx), cvm.clock.now(), inquiry=True)
        cvm.check_price(spec)
        traffic = spec.internet["InternetChargeType"] == "TRAFFIC_POSTPAID_BY_HOUR"
        return {
            "Price": {
                "InstancePrice": views.item_price(spec.itype, spec.charge_type, spec.prepaid_period, spec.count),
                # The emulator meters no network: bandwidth and traffic are free here.
                "BandwidthPrice": {"UnitPrice": 0.0, "UnitPriceDiscount": 0.0,
                                   "ChargeUnit": "GB" if traffic else "HOUR"},
            }
        }

    @service.action("DescribeZones", mutates=False)
    def describe_zones(ctx: CallContext, params: Params) -> dict[str, Any]:
        zones = [views.zone_info(z) for z in zones_of(region_of(ctx))]
        return {"TotalCount": len(zones), "ZoneSet": zones}

    @service.action("DescribeZoneInstanceConfigInfos", mutates=False)
    def describe_zone_instance_config_infos(ctx: CallContext, params: Params) -> dict[str, Any]:
        filters = query.parse_filters(params, ZONE_CONFIG_FILTERS, max_values=100)
        rows = [
            (zone.name, itype, charge_type)
            for zone in zones_of(region_of(ctx))
            for itype in INSTANCE_TYPES
            if zone.name in itype.zones
            for charge_type in CHARGE_TYPES
        ]

        def values(row: tuple[str, Any, str], name: str) -> list[str]:
            zone, itype, charge_type = row
            return {"zone": [zone], "instance-family": [itype.family], "instance-type": [itype.name],
                    "instance-charge-type": [charge_type]}[name]

        return {
            "InstanceTypeQuotaSet": [
                views.quota_item(zone, itype, charge_type, cvm.stock.available(zone, itype.name, charge_type))
                for zone, itype, charge_type in rows
                if query.matches((zone, itype, charge_type), filters, values)
            ]
        }

    @service.action("DescribeInstanceTypeConfigs", mutates=False)
    def describe_instance_type_configs(ctx: CallContext, params: Params) -> dict[str, Any]:
        filters = query.parse_filters(params, TYPE_CONFIG_FILTERS, max_values=1)
        configs = [
            views.type_config(zone.name, itype)
            for zone in zones_of(region_of(ctx))
            for itype in INSTANCE_TYPES
            if zone.name in itype.zones
        ]

        fields = {"zone": "Zone", "instance-family": "InstanceFamily", "instance-type": "InstanceType"}

        def values(config: dict[str, Any], name: str) -> list[str]:
            return [config[fields[name]]]

        return {"InstanceTypeConfigSet": [c for c in configs if query.matches(c, filters, values)]}

    # -- action timers -----------------------------------------------------------------------------------
    @service.action("ImportInstancesActionTimer")
    def import_instances_action_timer(ctx: CallContext, params: Params) -> dict[str, Any]:
        region = region_of(ctx)
        ids = _required_instance_ids(params)
        timer = params.obj("ActionTimer", required=True)
        assert timer is not None
        return {"ActionTimerIds": cvm.import_timers(region, ids, parse_action_time(timer, cvm.clock.now()))}

    @service.action("DescribeInstancesActionTimer", mutates=False)
    def describe_instances_action_timer(ctx: CallContext, params: Params) -> dict[str, Any]:
        region = region_of(ctx)
        timer_ids = params.str_list("ActionTimerIds")
        instance_ids = query.instance_ids(params)
        action = params.str("TimerAction")
        statuses = params.str_list("StatusList")
        if any(s not in TIMER_STATUSES for s in statuses):
            raise ApiError("InvalidParameterValue", f"StatusList holds only {', '.join(TIMER_STATUSES)}.")
        bounds = []
        for name in ("StartActionTime", "EndActionTime"):
            text = params.str(name)
            bound = parse_cst(text) if text is not None else None
            if text is not None and bound is None:
                raise ApiError("InvalidParameterValue.InvalidTimeFormat", f"{name} is `YYYY-MM-DD hh:mm:ss`.")
            bounds.append(bound)
        start, end = bounds

        def wanted(timer: ActionTimer) -> bool:
            return (
                timer.region == region
                and (not timer_ids or timer.timer_id in timer_ids)
                and (not instance_ids or timer.instance_id in instance_ids)
                and action in (None, "TerminateInstances")
                and (not statuses or timer.status in statuses)
                and (start is None or timer.action_time >= start)
                and (end is None or timer.action_time <= end)
            )

        return {"ActionTimers": [views.action_timer(t) for t in cvm.timers.values() if wanted(t)]}

    @service.action("DeleteInstancesActionTimer")
    def delete_instances_action_timer(ctx: CallContext, params: Params) -> dict[str, Any]:
        region = region_of(ctx)
        timer_ids = params.str_list("ActionTimerIds", required=True)
        cvm.delete_timers(region, timer_ids)
        return {}

    return service
