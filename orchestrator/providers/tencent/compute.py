"""CVM: launch, look up, terminate; offerings and prices. Idempotent functions over typed records
(SkyPilot's ``sky/provision/<cloud>/instance.py`` shape).

Lookups distinguish "the cloud answered: no such instance" (absent from the result) from "the lookup failed"
(an exception): design.md §4.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from . import errors
from ._sdk import TencentSdk
from .paging import pages
from .vocabulary import ChargeType, InstanceState

# Tencent accepts at most 100 instance ids per call (TerminateInstances, DescribeInstances).
MAX_IDS = 100
MAX_FILTER_VALUES = 5  # DescribeInstances: at most 10 filters of at most 5 values each


@dataclass(frozen=True)
class InstanceView:
    instance_id: str
    state: InstanceState
    zone: str
    instance_type: str
    charge_type: str
    private_ip: str | None
    created_at: datetime | None
    tags: dict[str, str]
    error_message: str | None = None  # LatestOperationErrorMsg, e.g. why LAUNCH_FAILED
    expires_at: datetime | None = None  # prepaid instances: the end of the paid period

    def __post_init__(self) -> None:
        # A view built by hand (a test, the fault model) may be given the wire string: the record holds a member.
        object.__setattr__(self, "state", InstanceState(self.state))

    @classmethod
    def from_api(cls, item: dict[str, Any]) -> InstanceView:
        created = item.get("CreatedTime")
        expires = item.get("ExpiredTime")
        return cls(
            instance_id=item["InstanceId"],
            state=InstanceState(item.get("InstanceState")),
            zone=(item.get("Placement") or {}).get("Zone", ""),
            instance_type=item.get("InstanceType", ""),
            charge_type=item.get("InstanceChargeType", ""),
            private_ip=(item.get("PrivateIpAddresses") or [None])[0],
            created_at=_utc(created) if created else None,
            tags={t["Key"]: t["Value"] for t in item.get("Tags") or []},
            error_message=item.get("LatestOperationErrorMsg") or None,
            expires_at=_utc(expires) if expires else None,
        )


@dataclass(frozen=True)
class Disk:
    disk_type: str
    size_gib: int


@dataclass(frozen=True)
class LaunchRequest:
    zone: str
    instance_type: str
    charge_type: ChargeType
    image_id: str
    client_token: str
    name: str
    tags: dict[str, str]
    user_data_b64: str | None = None
    terminate_at: datetime | None = None  # ActionTimer: the instance dies then even if every controller is gone
    system_disk: Disk | None = None
    data_disks: tuple[Disk, ...] = ()
    spot_max_price: float | None = None  # CNY/hour
    prepaid_months: int | None = None
    prepaid_renew: bool = False
    cam_role: str | None = None
    count: int = 1
    vpc_id: str | None = None  # with subnet_id: VirtualPrivateCloud (None: the account's defaults decide)
    subnet_id: str | None = None
    security_group_ids: tuple[str, ...] = ()
    public_bandwidth_mbps: int | None = None  # a public IP, traffic billed; None: no public IP (RunInstances' own)
    hpc_cluster_id: str | None = None  # HCC types only: the cloud refuses it for any other type

    def __post_init__(self) -> None:
        # A wire string given by a caller becomes its member here, so that a misspelt one fails before any call.
        object.__setattr__(self, "charge_type", ChargeType(self.charge_type))

    def params(self) -> dict[str, Any]:
        p: dict[str, Any] = {
            "InstanceChargeType": self.charge_type.value,
            "Placement": {"Zone": self.zone},
            "InstanceType": self.instance_type,
            "ImageId": self.image_id,
            "InstanceCount": self.count,
            "InstanceName": self.name,
            "ClientToken": self.client_token,
            # Bound to the instance and to the cloud disks created with it (RunInstancesRequest.TagSpecification:
            # "同时绑定标签到相应的云服务器、云硬盘实例"): cost allocation by tag sees both.
            "TagSpecification": [
                {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in self.tags.items()]}
            ],
        }
        if self.user_data_b64:
            p["UserData"] = self.user_data_b64
        if self.terminate_at is not None:
            p["ActionTimer"] = {
                "TimerAction": "TerminateInstances",
                "ActionTime": self.terminate_at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        if self.system_disk is not None:
            p["SystemDisk"] = {"DiskType": self.system_disk.disk_type, "DiskSize": self.system_disk.size_gib}
        if self.data_disks:
            p["DataDisks"] = [{"DiskType": d.disk_type, "DiskSize": d.size_gib} for d in self.data_disks]
        if self.charge_type is ChargeType.SPOT and self.spot_max_price is not None:
            # Without InstanceMarketOptions a spot instance bids the current fixed discount price (reference §1.1).
            p["InstanceMarketOptions"] = {
                "MarketType": "spot",
                "SpotOptions": {"MaxPrice": f"{self.spot_max_price:.4f}", "SpotInstanceType": "one-time"},
            }
        if self.charge_type is ChargeType.RESERVED:
            p["InstanceChargePrepaid"] = {
                "Period": self.prepaid_months or 1,
                "RenewFlag": "NOTIFY_AND_AUTO_RENEW" if self.prepaid_renew else "NOTIFY_AND_MANUAL_RENEW",
            }
        if self.cam_role:
            p["CamRoleName"] = self.cam_role
        if self.vpc_id is not None and self.subnet_id is not None:
            p["VirtualPrivateCloud"] = {"VpcId": self.vpc_id, "SubnetId": self.subnet_id}
        if self.security_group_ids:
            p["SecurityGroupIds"] = list(self.security_group_ids)
        if self.public_bandwidth_mbps is not None:
            p["InternetAccessible"] = {"InternetChargeType": "TRAFFIC_POSTPAID_BY_HOUR", "PublicIpAssigned": True,
                                       "InternetMaxBandwidthOut": self.public_bandwidth_mbps}
        if self.hpc_cluster_id is not None:
            p["HpcClusterId"] = self.hpc_cluster_id
        return p


def _utc(stamp: str) -> datetime:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)


def run_instances(sdk: TencentSdk, request: LaunchRequest) -> list[str]:
    result = sdk.call("cvm", "RunInstances", request.params())
    return list(result.get("InstanceIdSet") or [])


def dry_run(sdk: TencentSdk, request: LaunchRequest) -> None:
    """Validate a launch (parameters, quota and stock) without creating anything. Raises on any problem."""
    try:
        sdk.call("cvm", "RunInstances", {**request.params(), "DryRun": True})
    except errors.CloudError as exc:
        # A successful dry run is reported as the DryRunOperation error by the API.
        if exc.code != "DryRunOperation":
            raise


def _described(sdk: TencentSdk, params: dict[str, Any]) -> list[InstanceView]:
    return [InstanceView.from_api(i) for i in pages(sdk, "cvm", "DescribeInstances", params, "InstanceSet")]


def find_by_tags(sdk: TencentSdk, tags: dict[str, str]) -> list[InstanceView]:
    """Every instance carrying all these tags (Tencent filters by one `tag:<key>` per filter)."""
    filters = [{"Name": f"tag:{k}", "Values": [v]} for k, v in tags.items()]
    return _described(sdk, {"Filters": filters})


def find_by_tag_values(sdk: TencentSdk, key: str, values: list[str]) -> list[InstanceView]:
    """Every instance whose tag ``key`` has one of ``values`` (a filter takes at most 5 values: one call per 5)."""
    found: list[InstanceView] = []
    for start in range(0, len(values), MAX_FILTER_VALUES):
        chunk = values[start : start + MAX_FILTER_VALUES]
        found += _described(sdk, {"Filters": [{"Name": f"tag:{key}", "Values": chunk}]})
    return found


def find_by_tag_key(sdk: TencentSdk, key: str) -> list[InstanceView]:
    """Every instance carrying the tag key ``key``, whatever its value."""
    return _described(sdk, {"Filters": [{"Name": "tag-key", "Values": [key]}]})


def describe(sdk: TencentSdk, instance_ids: list[str]) -> dict[str, InstanceView]:
    """The instances the cloud knows; an id missing from the result is one the cloud says does not exist."""
    found: dict[str, InstanceView] = {}
    for start in range(0, len(instance_ids), MAX_IDS):
        chunk = instance_ids[start : start + MAX_IDS]
        found.update((view.instance_id, view) for view in _described(sdk, {"InstanceIds": chunk}))
    return found


# Terminating something already going or gone is success (reference §2.4 / §9.2: which code the API picks for
# an already-terminated id is undocumented, so all of them count). A LAUNCH_FAILED instance cannot be terminated:
# the cloud removes it itself (§1.3).
_ALREADY_GONE = (
    "InvalidInstanceId.NotFound",
    "UnsupportedOperation.InstanceStateTerminated",
    "UnsupportedOperation.InstanceStateTerminating",
    "UnsupportedOperation.InstanceStateLaunchFailed",
    "InvalidInstanceState.Terminating",
)


def terminate(sdk: TencentSdk, instance_ids: list[str]) -> None:
    """Every instance named is going or gone, or StateConflictError: one could not be terminated in the state it
    is in (PENDING, STARTING, REBOOTING, …: a later call can), while the others were."""
    refusals = [r for start in range(0, len(instance_ids), MAX_IDS)
                if (r := _refusal(sdk, instance_ids[start : start + MAX_IDS])) is not None]
    if refusals:
        raise refusals[0]


def _refusal(sdk: TencentSdk, batch: list[str]) -> errors.StateConflictError | None:
    """One TerminateInstances call; None once every id is going or gone. One id that fails a batch, gone or in a
    state the API refuses, fails the whole batch, which is then asked for one id at a time."""
    try:
        sdk.call("cvm", "TerminateInstances", {"InstanceIds": batch})
        return None
    except errors.CloudError as exc:
        if exc.code in _ALREADY_GONE:
            if len(batch) == 1:
                return None
        elif isinstance(exc, errors.StateConflictError):
            if len(batch) == 1:
                return exc
        else:
            raise
    refusals = [r for instance_id in batch if (r := _refusal(sdk, [instance_id])) is not None]
    return refusals[0] if refusals else None


def reset_instance(sdk: TencentSdk, instance_id: str, image_id: str, user_data_b64: str | None) -> None:
    params: dict[str, Any] = {"InstanceId": instance_id, "ImageId": image_id}
    if user_data_b64:
        params["UserData"] = user_data_b64
    sdk.call("cvm", "ResetInstance", params)


@dataclass(frozen=True)
class Offering:
    zone: str
    instance_type: str
    charge_type: str
    family: str
    cpu: int
    memory_gib: int
    gpu_count: float
    on_sale: bool
    stock: str  # EnoughStock | NormalStock | UnderStock | WithoutStock
    unit_price: float | None  # CNY/hour after discount (postpaid, spot)
    local_disk_types: tuple[str, ...] = field(default=())
    sold_out_reason: str | None = None
    bandwidth_gbps: float | None = None  # the instance's network (InstanceBandwidth)


def offerings(
    sdk: TencentSdk, zones: list[str], instance_types: list[str] | None, charge_type: ChargeType
) -> list[Offering]:
    filters: list[dict[str, Any]] = [
        {"Name": "zone", "Values": zones},
        {"Name": "instance-charge-type", "Values": [str(charge_type)]},
    ]
    if instance_types:
        filters.append({"Name": "instance-type", "Values": instance_types})
    result = sdk.call("cvm", "DescribeZoneInstanceConfigInfos", {"Filters": filters})
    out = []
    for row in result.get("InstanceTypeQuotaSet") or []:
        price = row.get("Price") or {}
        unit = price.get("UnitPriceDiscount", price.get("UnitPrice"))
        out.append(
            Offering(
                zone=row["Zone"],
                instance_type=row["InstanceType"],
                charge_type=row["InstanceChargeType"],
                family=row.get("InstanceFamily", ""),
                cpu=int(row.get("Cpu") or 0),
                memory_gib=int(row.get("Memory") or 0),
                gpu_count=float(row.get("GpuCount") or row.get("Gpu") or 0),
                on_sale=row.get("Status") == "SELL",
                stock=row.get("StatusCategory") or ("EnoughStock" if row.get("Status") == "SELL" else "WithoutStock"),
                unit_price=float(unit) if unit is not None else None,
                local_disk_types=tuple(d.get("Type", "") for d in row.get("LocalDiskTypeList") or []),
                sold_out_reason=row.get("SoldOutReason") or None,
                bandwidth_gbps=float(row["InstanceBandwidth"]) if row.get("InstanceBandwidth") else None,
            )
        )
    return out


@dataclass(frozen=True)
class Price:
    charge_type: ChargeType
    per_hour: float | None  # CNY/hour, postpaid and spot
    list_per_hour: float | None  # before discount
    upfront: float | None  # CNY, prepaid


def inquiry_price(sdk: TencentSdk, request: LaunchRequest) -> Price:
    params = request.params()
    for key in ("ClientToken", "TagSpecification", "ActionTimer", "UserData", "CamRoleName", "InstanceName"):
        params.pop(key, None)
    result = sdk.call("cvm", "InquiryPriceRunInstances", params)
    item = (result.get("Price") or {}).get("InstancePrice") or {}
    return Price(
        charge_type=request.charge_type,
        per_hour=_float(item.get("UnitPriceDiscount")),
        list_per_hour=_float(item.get("UnitPrice")),
        upfront=_float(item.get("DiscountPrice")),
    )


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def zones(sdk: TencentSdk) -> list[tuple[str, bool]]:
    result = sdk.call("cvm", "DescribeZones", {})
    return [(z["Zone"], z.get("ZoneState") == "AVAILABLE") for z in result.get("ZoneSet") or []]


@dataclass(frozen=True)
class ZoneQuota:
    """One of the account's quotas in one zone: spot in vCPU cores (50 unless a ticket raised it), pay-as-you-go in
    instances."""

    zone: str
    total: int
    used: int
    remaining: int


def _zone_quotas(sdk: TencentSdk, zones: list[str], quota_type: str) -> dict[str, ZoneQuota]:
    result = sdk.call("cvm", "DescribeAccountQuota", {"Filters": [
        {"Name": "zone", "Values": zones}, {"Name": "quota-type", "Values": [quota_type]}]})
    rows = ((result.get("AccountQuotaOverview") or {}).get("AccountQuota") or {}).get(quota_type) or []
    return {row["Zone"]: ZoneQuota(row["Zone"], int(row.get("TotalQuota") or 0), int(row.get("UsedQuota") or 0),
                                   int(row.get("RemainingQuota") or 0)) for row in rows if row.get("Zone") in zones}


def spot_quotas(sdk: TencentSdk, zones: list[str]) -> dict[str, ZoneQuota]:
    """The spot quota (vCPU cores) of each of ``zones`` that the cloud reports (DescribeAccountQuota)."""
    return _zone_quotas(sdk, zones, "SpotPaidQuotaSet")


def on_demand_quotas(sdk: TencentSdk, zones: list[str]) -> dict[str, ZoneQuota]:
    """The pay-as-you-go quota (instances) of each of ``zones`` that the cloud reports."""
    return _zone_quotas(sdk, zones, "PostPaidQuotaSet")


@dataclass(frozen=True)
class HpcCluster:
    cluster_id: str
    zone: str
    name: str
    room: int  # instances it can still take (CvmQuotaTotal - CurrentNum)


def hpc_clusters(sdk: TencentSdk, cluster_ids: list[str] | None = None) -> dict[str, HpcCluster]:
    """The region's HPC clusters (those of ``cluster_ids`` when given), by id."""
    params: dict[str, Any] = {"Limit": 100}
    if cluster_ids:
        params["HpcClusterIds"] = cluster_ids
    rows = sdk.call("cvm", "DescribeHpcClusters", params).get("HpcClusterSet") or []
    return {row["HpcClusterId"]: HpcCluster(row["HpcClusterId"], row.get("Zone", ""), row.get("Name", ""),
                                            int(row.get("CvmQuotaTotal") or 0) - int(row.get("CurrentNum") or 0))
            for row in rows}
