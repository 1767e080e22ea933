"""RunInstances and InquiryPriceRunInstances parameters, checked and normalised into a LaunchSpec.

This module checks what the request alone decides (shapes, formats, ranges, combinations, the catalog, the
default VPC); the model checks what depends on the account's state (images, stock, balance, addresses in use).
Rules and codes follow the SDK's RunInstancesRequest docstrings and the per-API error list
(shared/reference/tencent-cloud-api.md §1). An HCC type is sold only into an HPC cluster of its zone and any other
type into none ("若创建的实例为高性能计算实例，需指定实例放置的集群，否则不可指定"): RunInstances refuses the one
without HpcClusterId and the other with it; InquiryPriceRunInstances, whose docstring says only "高性能计算集群ID",
checks just that a cluster it names exists in the zone. Accepted but without effect here: EnhancedService,
Metadata, CpuTopology, NetworkInterfaces, EnableJumboFrame, PartitionNumber, DedicatedClusterId, LoginSettings (no
SSH: instances are processes).
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from ..api3.params import Params
from ..catalog import INSTANCE_TYPES_BY_NAME, ZONES_BY_NAME, InstanceType
from ..errors import ApiError
from ..vpc.models import DefaultNetwork, Subnet, default_vpc
from .query import check_image_id
from .records import POSTPAID, PREPAID, SPOTPAID
from .tags import parse_tag_specification
from .times import parse_iso_utc

# What RunInstances picks when InstanceType is left out (the docstring says "the system chooses one").
DEFAULT_INSTANCE_TYPE = "S5.MEDIUM4"
DEFAULT_INSTANCE_NAME = "未命名"
MAX_INSTANCES = 500
MAX_INQUIRY_INSTANCES = 100
USER_DATA_MAX_BYTES = 16 * 1024
CLIENT_TOKEN_MAX = 64
ACTION_TIMER_MIN_LEAD_SECONDS = 300
PERIODS = (*range(1, 13), 24, 36, 48, 60)
RENEW_FLAGS = ("NOTIFY_AND_AUTO_RENEW", "NOTIFY_AND_MANUAL_RENEW", "DISABLE_NOTIFY_AND_MANUAL_RENEW")
CLOUD_DISK_TYPES = ("CLOUD_BASIC", "CLOUD_SSD", "CLOUD_PREMIUM", "CLOUD_BSSD", "CLOUD_HSSD", "CLOUD_TSSD")
LOCAL_DISK_TYPES = ("LOCAL_BASIC", "LOCAL_SSD")
INTERNET_CHARGE_TYPES = (
    "BANDWIDTH_PREPAID", "TRAFFIC_POSTPAID_BY_HOUR", "BANDWIDTH_POSTPAID_BY_HOUR", "BANDWIDTH_PACKAGE",
)
VPC_ID = re.compile(r"^vpc-[a-z0-9]{8}$")
SUBNET_ID = re.compile(r"^subnet-[a-z0-9]{8}$")
SG_ID = re.compile(r"^sg-[a-z0-9]{8}$")
CAM_ROLE = re.compile(r"^[A-Za-z0-9+=,.@_-]{1,128}$")
HOST_LABEL = re.compile(r"^[A-Za-z0-9-]+$")
NAME_PATTERN = re.compile(r"\{R:(\d+)(?:,F:(\d))?\}")


@dataclass(frozen=True)
class LaunchSpec:
    region: str
    zone: str
    itype: InstanceType
    charge_type: str
    image_id: str
    count: int
    min_count: int
    names: list[str]
    host_names: list[str] | None  # None: derived from the address (model)
    system_disk: dict[str, Any]
    data_disks: list[dict[str, Any]]
    subnet: Subnet
    private_ips: list[str]
    security_group_ids: list[str]
    internet: dict[str, Any]
    tags: list[dict[str, str]]
    user_data: str
    cam_role: str
    disable_api_termination: bool
    action_time: float | None
    prepaid_period: int
    renew_flag: str
    max_price_yuan: float | None
    hpc_cluster_id: str = ""

    @property
    def price_fen_per_hour(self) -> int:
        return self.itype.price_fen_per_hour_for(self.charge_type)

    @property
    def upfront_fen(self) -> int:
        """Paid at purchase, per instance: the whole prepaid period."""
        return self.itype.monthly_price_fen * self.prepaid_period if self.charge_type == PREPAID else 0


def check_client_token(token: str | None) -> str:
    if token is not None and len(token) > CLIENT_TOKEN_MAX:
        raise ApiError("InvalidClientToken.TooLong", f"ClientToken must be at most {CLIENT_TOKEN_MAX} characters.")
    return token or ""


def parse_user_data(params: Params) -> str:
    """The UserData as given (base64), after checking it decodes and fits in 16 KB."""
    user_data = params.str("UserData", "") or ""
    if len(user_data) > USER_DATA_MAX_BYTES:
        raise ApiError("InvalidParameterValue.TooLarge", f"UserData is larger than {USER_DATA_MAX_BYTES} bytes.")
    try:
        base64.b64decode(user_data, validate=True)
    except (binascii.Error, ValueError):
        raise ApiError("InvalidParameterValue.InvalidUserDataFormat", "UserData must be base64-encoded.") from None
    return user_data


def parse_action_time(timer: Params, now: float) -> float:
    """ActionTimer: TimerAction TerminateInstances only; ActionTime ISO 8601 UTC, later than now + 5 minutes."""
    action = timer.req_str("TimerAction")
    if action != "TerminateInstances":
        raise ApiError("InvalidParameterValue", "ActionTimer.TimerAction supports only `TerminateInstances`.")
    text = timer.req_str("ActionTime")
    when = parse_iso_utc(text)
    if when is None:
        raise ApiError(
            "InvalidParameterValue.InvalidTimeFormat", f"ActionTime `{text}` is not YYYY-MM-DDThh:mm:ssZ (UTC)."
        )
    if when <= now + ACTION_TIMER_MIN_LEAD_SECONDS:
        raise ApiError(
            "InvalidParameterValue.InvalidTimeFormat", "ActionTime must be later than the current time plus 5 minutes."
        )
    return when


def expand_names(pattern: str, count: int) -> list[str]:
    """``{R:x}`` / ``{R:x,F:y}`` number the instances from x (zero-padded to y digits); without a pattern,
    several instances get the suffixes 1..n (RunInstancesRequest.InstanceName docstring)."""
    match = NAME_PATTERN.search(pattern)
    if match is None:
        return [pattern] if count == 1 else [f"{pattern}{i}" for i in range(1, count + 1)]
    start, width = int(match[1]), int(match[2] or 0)
    return [NAME_PATTERN.sub(str(start + i).zfill(width), pattern, count=1) for i in range(count)]


def _check_host_name(name: str) -> None:
    labels = name.split(".")
    if not 2 <= len(name) <= 60 or not all(
        HOST_LABEL.match(label) and not label.startswith("-") and not label.endswith("-") and "--" not in label
        for label in labels
    ):
        raise ApiError(
            "InvalidParameterValue.IllegalHostName",
            f"HostName `{name}`: 2-60 characters of letters, digits, dots and dashes; dots and dashes may not "
            "start, end or repeat.",
        )


def _charge_type(params: Params) -> str:
    charge_type = params.str("InstanceChargeType", POSTPAID) or POSTPAID
    if charge_type in ("CDHPAID", "CDCPAID", "UNDERWRITE"):
        raise ApiError(
            "UnsupportedOperation.InstanceChargeType", f"InstanceChargeType {charge_type} is not offered here."
        )
    if charge_type not in (POSTPAID, SPOTPAID, PREPAID):
        raise ApiError("InvalidParameterValue", f"InstanceChargeType `{charge_type}` is not a charge type.")
    return charge_type


def check_zone(zone_name: str, region: str) -> str:
    zone = ZONES_BY_NAME.get(zone_name)
    if zone is None:
        raise ApiError("InvalidParameterValue.ZoneNotSupported", f"The zone `{zone_name}` is not offered.")
    if zone.region != region:
        raise ApiError("InvalidZone.MismatchRegion", f"The zone `{zone_name}` is not in the region `{region}`.")
    return zone_name


def _zone(params: Params, region: str) -> str:
    placement = params.obj("Placement", required=True)
    assert placement is not None
    zone_name = check_zone(placement.req_str("Zone"), region)
    if (placement.int("ProjectId", 0) or 0) != 0:
        raise ApiError("InvalidProjectId.NotFound", "Only the default project (0) exists.")
    return zone_name


def _instance_type(params: Params, zone: str) -> InstanceType:
    name = params.str("InstanceType", DEFAULT_INSTANCE_TYPE) or DEFAULT_INSTANCE_TYPE
    itype = INSTANCE_TYPES_BY_NAME.get(name)
    if itype is None:
        raise ApiError("InvalidParameterValue.InstanceTypeNotFound", f"The instance type `{name}` does not exist.")
    if zone not in itype.zones:
        raise ApiError("ResourceUnavailable.InstanceType", f"The instance type `{name}` is not sold in `{zone}`.")
    return itype


def _counts(params: Params, maximum: int) -> tuple[int, int]:
    count = params.int("InstanceCount", 1)
    assert count is not None
    if not 1 <= count <= maximum:
        raise ApiError("InvalidParameterValue.Range", f"InstanceCount must be between 1 and {maximum}.")
    min_count = params.int("MinCount", count)
    assert min_count is not None
    if not 1 <= min_count <= count:
        raise ApiError(
            "InvalidParameterValue.InvalidParameterMinCount", "MinCount must be between 1 and InstanceCount."
        )
    return count, min_count


def _prepaid(params: Params, charge_type: str) -> tuple[int, str]:
    prepaid = params.obj("InstanceChargePrepaid", required=charge_type == PREPAID)
    if charge_type != PREPAID:
        return 0, ""
    assert prepaid is not None
    period = prepaid.int("Period", required=True)
    if period is None or period not in PERIODS:
        raise ApiError("InvalidPeriod", f"Period must be one of {', '.join(map(str, PERIODS))} (months).")
    renew_flag = prepaid.str("RenewFlag", "NOTIFY_AND_MANUAL_RENEW") or "NOTIFY_AND_MANUAL_RENEW"
    if renew_flag not in RENEW_FLAGS:
        raise ApiError("InvalidParameterValue", f"RenewFlag must be one of {', '.join(RENEW_FLAGS)}.")
    return period, renew_flag


def _max_price(params: Params, charge_type: str, itype: InstanceType) -> float | None:
    """A spot bid below the current spot price fails (InvalidParameterValue.InsufficientPrice, "竞价失败");
    SPOTPAID without InstanceMarketOptions bids the current price (§1.1)."""
    market = params.obj("InstanceMarketOptions")
    if market is None:
        return None
    if charge_type != SPOTPAID:
        raise ApiError("InvalidParameterCombination", "InstanceMarketOptions needs InstanceChargeType SPOTPAID.")
    if (market.str("MarketType", "spot") or "spot") != "spot":
        raise ApiError("InvalidParameterValue", "InstanceMarketOptions.MarketType supports only `spot`.")
    options = market.obj("SpotOptions")
    if options is None:
        return None
    if (options.str("SpotInstanceType", "one-time") or "one-time") != "one-time":
        raise ApiError("InvalidParameterValue", "SpotOptions.SpotInstanceType supports only `one-time`.")
    text = options.req_str("MaxPrice")
    try:
        max_price = float(text)
    except ValueError:
        raise ApiError("InvalidParameterValue", f"SpotOptions.MaxPrice `{text}` is not a price in yuan.") from None
    if max_price < itype.spot_price_fen_per_hour / 100:
        raise ApiError(
            "InvalidParameterValue.InsufficientPrice",
            f"The bid {max_price} is below the spot price of {itype.name}, {itype.spot_price_fen_per_hour / 100} "
            "yuan per hour.",
        )
    return max_price


def _system_disk(params: Params) -> dict[str, Any]:
    disk = params.obj("SystemDisk") or Params({})
    disk_type = disk.str("DiskType", "CLOUD_PREMIUM") or "CLOUD_PREMIUM"
    if disk_type not in CLOUD_DISK_TYPES + LOCAL_DISK_TYPES:
        raise ApiError("InvalidParameterValue", f"SystemDisk.DiskType `{disk_type}` is not a system disk type.")
    size = disk.int("DiskSize", 50)
    assert size is not None
    if not 20 <= size <= 2048:
        raise ApiError("InvalidParameterValue.Range", "SystemDisk.DiskSize must be between 20 and 2048 GiB.")
    return {"DiskType": disk_type, "DiskSize": size}


def _data_disks(params: Params, itype: InstanceType) -> list[dict[str, Any]]:
    """The cloud and local data disks asked for, then the type's local NVMe disks (they come with the type:
    "tied to the InstanceType", DataDisk docstring) that were not listed."""
    disks: list[dict[str, Any]] = []
    for disk in params.objs("DataDisks", max_items=21):
        disk_type = disk.str("DiskType", "LOCAL_BASIC") or "LOCAL_BASIC"
        size = disk.int("DiskSize", required=True)
        assert size is not None
        if disk_type == "LOCAL_NVME":
            if itype.local_nvme is None:
                raise ApiError("UnsupportedOperation.InvalidDisk", f"{itype.name} has no local NVMe disks.")
            if size != itype.local_nvme[1]:
                raise ApiError(
                    "InvalidParameterValue.LocalDiskSizeRange",
                    f"A LOCAL_NVME disk of {itype.name} is {itype.local_nvme[1]} GiB.",
                )
        elif disk_type in CLOUD_DISK_TYPES + LOCAL_DISK_TYPES:
            if size == 0:
                continue
            if not 10 <= size <= 32000 or size % 10:
                raise ApiError(
                    "InvalidParameterValue.Range", "A data disk's DiskSize is 10 to 32000 GiB in steps of 10."
                )
        else:
            raise ApiError("InvalidParameterValue", f"DataDisks.DiskType `{disk_type}` is not a data disk type.")
        disks.append({
            "DiskType": disk_type, "DiskSize": size,
            "DeleteWithInstance": disk.bool("DeleteWithInstance", True), "Encrypt": disk.bool("Encrypt", False),
        })
    nvme_listed = sum(1 for d in disks if d["DiskType"] == "LOCAL_NVME")
    if itype.local_nvme is not None:
        count, size = itype.local_nvme
        if nvme_listed > count:
            raise ApiError("InvalidParameterValue.LimitExceeded", f"{itype.name} has {count} local NVMe disks.")
        disks += [{"DiskType": "LOCAL_NVME", "DiskSize": size, "DeleteWithInstance": True, "Encrypt": False}
                  for _ in range(count - nvme_listed)]
    if sum(1 for d in disks if d["DiskType"] in LOCAL_DISK_TYPES) > 1:
        raise ApiError("InvalidParameterValue.LimitExceeded", "At most one LOCAL_BASIC or LOCAL_SSD data disk.")
    return disks


def _subnet(params: Params, region: str, zone: str, count: int,
            defaults: DefaultNetwork) -> tuple[Subnet, list[str]]:
    """The VPC and subnet: the region's default VPC and the zone's default subnet unless named ("DEFAULT"
    names them too; they must exist: ``defaults``); fixed private addresses must number InstanceCount and lie in
    the subnet."""
    vpc = defaults.vpc(region)
    subnets = {s.subnet_id: s for s in defaults.subnets(region)}
    zone_subnet = next((s for s in subnets.values() if s.zone == zone), None)
    given = params.obj("VirtualPrivateCloud")
    vpc_id, subnet_id = ("DEFAULT", "DEFAULT") if given is None else (given.req_str("VpcId"), given.req_str("SubnetId"))
    if subnet_id == "DEFAULT" and zone_subnet is None:
        raise ApiError("InvalidParameterValue.SubnetNotExist",
                       f"{zone} has no default subnet (CreateDefaultVpc makes one): name a subnet.")
    if given is None:
        assert zone_subnet is not None
        return zone_subnet, []
    if vpc_id != "DEFAULT":
        if not VPC_ID.match(vpc_id):
            raise ApiError("InvalidParameterValue.VpcIdMalformed", f"`{vpc_id}` is not a VPC id like vpc-xxxxxxxx.")
        if vpc is None or vpc_id != vpc.vpc_id:
            raise ApiError("InvalidParameterValue.VpcIdNotExist", f"The VPC `{vpc_id}` does not exist.")
    subnet = zone_subnet
    if subnet_id != "DEFAULT":
        if not SUBNET_ID.match(subnet_id):
            raise ApiError(
                "InvalidParameterValue.SubnetIdMalformed", f"`{subnet_id}` is not a subnet id like subnet-xxxxxxxx."
            )
        if subnet_id not in subnets:
            raise ApiError("InvalidParameterValue.SubnetNotExist", f"The subnet `{subnet_id}` does not exist.")
        subnet = subnets[subnet_id]
        if subnet.zone != zone:
            raise ApiError(
                "InvalidParameterValue.SubnetIdZoneIdNotMatch", f"The subnet `{subnet_id}` is not in `{zone}`."
            )
    assert subnet is not None  # named, or the zone's default, checked above
    ips = given.str_list("PrivateIpAddresses")
    if ips and len(ips) != count:
        raise ApiError("InvalidParameterValue.AmountNotEqual", "PrivateIpAddresses must hold InstanceCount addresses.")
    network = ipaddress.ip_network(subnet.cidr)
    for ip in ips:
        try:
            address = ipaddress.ip_address(ip)
        except ValueError:
            raise ApiError("InvalidParameterValue.IPAddressMalformed", f"`{ip}` is not an IP address.") from None
        if address not in network:
            raise ApiError("VpcAddrNotInSubNet", f"`{ip}` is not in the subnet {subnet.cidr}.")
    return subnet, ips


def _security_groups(params: Params, region: str, known: Collection[str]) -> list[str]:
    """The groups named (``known``: the region's), else the project's default group, as RunInstances binds it."""
    default = default_vpc(region).security_group_id
    groups = params.str_list("SecurityGroupIds") or [default]
    for group in groups:
        if not SG_ID.match(group):
            raise ApiError("InvalidSgId.Malformed", f"`{group}` is not a security group id like sg-xxxxxxxx.")
        if group != default and group not in known:
            raise ApiError("InvalidSecurityGroupId.NotFound", f"The security group `{group}` does not exist.")
    return groups


def _internet(params: Params) -> dict[str, Any]:
    """Recorded as asked; the emulator hands out no public addresses (metadata public-ipv4 is 404)."""
    given = params.obj("InternetAccessible") or Params({})
    charge = given.str("InternetChargeType", "TRAFFIC_POSTPAID_BY_HOUR") or "TRAFFIC_POSTPAID_BY_HOUR"
    if charge not in INTERNET_CHARGE_TYPES:
        raise ApiError("InvalidParameterValue", f"InternetChargeType `{charge}` is not a network charge type.")
    bandwidth = given.int("InternetMaxBandwidthOut", 0)
    assert bandwidth is not None
    if not 0 <= bandwidth <= 200:
        raise ApiError("InvalidParameterValue.Range", "InternetMaxBandwidthOut must be between 0 and 200 Mbps.")
    assigned = given.bool("PublicIpAssigned", bandwidth > 0)
    if assigned and bandwidth == 0:
        raise ApiError("InvalidParameterCombination", "PublicIpAssigned needs InternetMaxBandwidthOut above 0.")
    return {"InternetChargeType": charge, "InternetMaxBandwidthOut": bandwidth, "PublicIpAssigned": assigned}


def _hpc_cluster(params: Params, itype: InstanceType, zone: str, clusters: Mapping[str, str], inquiry: bool) -> str:
    """The HPC cluster named (``clusters``: the region's, id -> zone), "" for none."""
    cluster_id = params.str("HpcClusterId", "") or ""
    if not inquiry and itype.needs_hpc_cluster and not cluster_id:
        raise ApiError(
            "InvalidParameterValue.InstanceTypeRequiredHpcCluster",
            f"{itype.name} is a high-performance computing type: name the HPC cluster of {zone} it goes into "
            "(HpcClusterId; CreateHpcCluster makes one).",
        )
    if not inquiry and cluster_id and not itype.needs_hpc_cluster:
        raise ApiError(
            "InvalidParameterValue.InstanceTypeNotSupportHpcCluster",
            f"{itype.name} cannot join an HPC cluster: only the HCC types can.",
        )
    if cluster_id and cluster_id not in clusters:
        raise ApiError("ResourceNotFound.HpcCluster", f"The HPC cluster `{cluster_id}` does not exist.")
    if cluster_id and clusters[cluster_id] != zone:
        raise ApiError(
            "InvalidParameterValue.HpcClusterIdZoneIdNotMatch",
            f"The HPC cluster `{cluster_id}` is in {clusters[cluster_id]}, not in {zone}.",
        )
    return cluster_id


def _unsupported_references(params: Params) -> None:
    """Resources the request may name that this account cannot have: the emulator has no API to create them."""
    if "LaunchTemplate" in params:
        raise ApiError("InvalidParameterValue.LaunchTemplateNotFound", "There are no launch templates.")
    if params.str_list("DisasterRecoverGroupIds"):
        raise ApiError("FailedOperation.DisasterRecoverGroupNotFound", "There are no placement groups.")
    if params.str_list("ChcIds"):
        raise ApiError("InvalidParameterValue.ChcHostsNotFound", "There are no CHC hosts.")


def parse_launch(params: Params, region: str, now: float, defaults: DefaultNetwork, *, inquiry: bool = False,
                 security_groups: Collection[str] = (), hpc_clusters: Mapping[str, str] | None = None) -> LaunchSpec:
    """``defaults``: the account's default VPCs and subnets; ``security_groups``: the groups it has in ``region``
    (besides its default one); ``hpc_clusters``: its HPC clusters in ``region``, id -> zone."""
    _unsupported_references(params)
    charge_type = _charge_type(params)
    zone = _zone(params, region)
    itype = _instance_type(params, zone)
    image_id = check_image_id(params.req_str("ImageId"))
    count, min_count = _counts(params, MAX_INQUIRY_INSTANCES if inquiry else MAX_INSTANCES)
    period, renew_flag = _prepaid(params, charge_type)
    max_price = _max_price(params, charge_type, itype)
    name = params.str("InstanceName", DEFAULT_INSTANCE_NAME) or DEFAULT_INSTANCE_NAME
    if len(name) > 128:
        raise ApiError("InvalidInstanceName.TooLong", "InstanceName is longer than 128 characters.")
    host_pattern = params.str("HostName")
    host_names = expand_names(host_pattern, count) if host_pattern else None
    for host_name in host_names or []:
        _check_host_name(host_name)
    cam_role = params.str("CamRoleName", "") or ""
    if cam_role and not CAM_ROLE.match(cam_role):
        raise ApiError(
            "InvalidParameterValue.CamRoleNameMalformed", "CamRoleName may hold only letters, digits and +=,.@_-."
        )
    timer = params.obj("ActionTimer")
    subnet, private_ips = _subnet(params, region, zone, count, defaults)
    return LaunchSpec(
        region=region,
        zone=zone,
        itype=itype,
        charge_type=charge_type,
        image_id=image_id,
        count=count,
        min_count=min_count,
        names=expand_names(name, count),
        host_names=host_names,
        system_disk=_system_disk(params),
        data_disks=_data_disks(params, itype),
        subnet=subnet,
        private_ips=private_ips,
        security_group_ids=_security_groups(params, region, security_groups),
        internet=_internet(params),
        tags=parse_tag_specification(params, "instance"),
        user_data=parse_user_data(params),
        cam_role=cam_role,
        disable_api_termination=params.bool("DisableApiTermination"),
        action_time=parse_action_time(timer, now) if timer is not None else None,
        prepaid_period=period,
        renew_flag=renew_flag,
        max_price_yuan=max_price,
        hpc_cluster_id=_hpc_cluster(params, itype, zone, hpc_clusters or {}, inquiry),
    )
