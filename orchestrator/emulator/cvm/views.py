"""Records as the wire shows them: every key is a field of the SDK's model (tencentcloud/cvm/v20170312/models.py),
so responses deserialize without "fileds are useless" warnings.

Deviation: an instance's private address is reported in its loopback form, 127 and the last three octets of the
address allocated from the subnet (Instance.PrivateIpAddresses, metadata local-ipv4). Emulated instances share the
host's loopback, so that is where a peer reaches them, as far as their security groups let it
(runtime/netfilter.py); the subnet's address is kept in the record and shown by the admin API.
"""

from __future__ import annotations

from typing import Any

from ..catalog import INSTANCE_TYPES_BY_NAME, PRICE_REMARK, InstanceType, Zone
from .hpc import CVM_QUOTA_TOTAL
from .images import PUBLIC_BY_ID
from .records import PREPAID, STOPPED, ActionTimer, HpcCluster, Image, Instance
from .stock import status_category
from .times import iso_utc

# The public images predate every account; their CreatedTime is fixed.
PUBLIC_IMAGE_CREATED = "2024-01-01T00:00:00Z"


def gpu_ids(itype: InstanceType) -> list[str]:
    """GPUInfo.GPUId ("实例GPU地址"): one PCI-style address per card, a vGPU slice shows its card's."""
    return [f"0000:00:{8 + i:02x}.0" for i in range(max(1, int(itype.gpu_count)))]


def whole_gpus(itype: InstanceType) -> int:
    """The integer GPU fields (Gpu, GPU): a vGPU slice counts as the one card it lives on."""
    return 0 if itype.gpu_count == 0 else max(1, int(itype.gpu_count))


def instance(rec: Instance) -> dict[str, Any]:
    itype = INSTANCE_TYPES_BY_NAME[rec.instance_type]
    view: dict[str, Any] = {
        "Placement": {"Zone": rec.zone, "ProjectId": 0},
        "InstanceId": rec.instance_id,
        "InstanceType": rec.instance_type,
        "CPU": itype.cpu,
        "Memory": itype.memory_gib,
        "RestrictState": "NORMAL",
        "InstanceName": rec.name,
        "InstanceChargeType": rec.charge_type,
        "SystemDisk": rec.system_disk,
        "DataDisks": rec.data_disks,
        "PrivateIpAddresses": [rec.address],
        "InternetAccessible": rec.internet,
        "VirtualPrivateCloud": {"VpcId": rec.vpc_id, "SubnetId": rec.subnet_id, "AsVpcGateway": False},
        "ImageId": rec.image_id,
        "CreatedTime": iso_utc(rec.created_at),
        "OsName": rec.os_name,
        "SecurityGroupIds": rec.security_group_ids,
        "InstanceState": rec.state,
        "Tags": rec.tags,
        "StopChargingMode": rec.stopped_mode if rec.state == STOPPED else "NOT_APPLICABLE",
        "Uuid": rec.uuid,
        "LatestOperation": rec.latest_operation,
        "LatestOperationState": rec.latest_operation_state,
        "LatestOperationRequestId": rec.latest_operation_request_id,
        "IsolatedSource": rec.isolated_source,
        "LicenseType": "TencentCloud",
        "DisableApiTermination": rec.disable_api_termination,
        "HostName": rec.host_name,
        "DefaultLoginUser": "ubuntu" if "Ubuntu" in rec.os_name else "root",
        "DefaultLoginPort": 22,
        "DisasterRecoverGroupIds": [],
        "EnableJumboFrame": False,
    }
    if rec.charge_type == PREPAID and rec.expired_at is not None:
        view["ExpiredTime"] = iso_utc(rec.expired_at)
        view["RenewFlag"] = rec.renew_flag
    if rec.latest_operation_error:
        view["LatestOperationErrorMsg"] = rec.latest_operation_error
    if rec.cam_role:
        view["CamRoleName"] = rec.cam_role
    if rec.hpc_cluster_id:
        view["HpcClusterId"] = rec.hpc_cluster_id
    if itype.gpu_model is not None:
        view["GPUInfo"] = {"GPUCount": float(itype.gpu_count), "GPUId": gpu_ids(itype), "GPUType": itype.gpu_model}
    return view


def instance_status(rec: Instance) -> dict[str, Any]:
    return {"InstanceId": rec.instance_id, "InstanceState": rec.state}


def _image_common(size_gib: int) -> dict[str, Any]:
    return {
        "ImageSize": size_gib,
        "Architecture": "x86_64",
        "IsSupportCloudinit": True,
        "LicenseType": "TencentCloud",
        "ImageFamily": "",
        "ImageDeprecated": False,
    }


def public_image(image_id: str) -> dict[str, Any]:
    image = PUBLIC_BY_ID[image_id]
    return {
        **_image_common(20),
        "ImageId": image_id,
        "OsName": image["OsName"],
        "ImageType": "PUBLIC_IMAGE",
        "CreatedTime": PUBLIC_IMAGE_CREATED,
        "ImageName": image["ImageName"],
        "ImageDescription": image["ImageName"],
        "ImageState": "NORMAL",
        "Platform": image["Platform"],
        "ImageCreator": "",
        "ImageSource": "OFFICIAL",
        "SnapshotSet": [],
        "Tags": [],
    }


def private_image(image: Image, uin: str) -> dict[str, Any]:
    return {
        **_image_common(image.size_gib),
        "ImageId": image.image_id,
        "OsName": image.os_name,
        "ImageType": "PRIVATE_IMAGE",
        "CreatedTime": iso_utc(image.created_at),
        "ImageName": image.name,
        "ImageDescription": image.description,
        "ImageState": image.state,
        "Platform": image.platform,
        "ImageCreator": uin,
        "ImageSource": "CREATE_IMAGE",
        "SnapshotSet": [{"SnapshotId": "snap-" + image.image_id[4:], "DiskUsage": "SYSTEM_DISK",
                         "DiskSize": image.size_gib}],
        "Tags": image.tags,
    }


def hourly_price(itype: InstanceType, charge_type: str, count: int = 1) -> dict[str, Any]:
    """ItemPrice for pay-as-you-go and spot, in yuan: UnitPrice is the list price, UnitPriceDiscount what is
    paid (the spot price for SPOTPAID); Discount 20.0 means 20 % of list ("2折")."""
    paid = itype.price_fen_per_hour_for(charge_type)
    return {
        "UnitPrice": round(itype.price_fen_per_hour * count / 100, 2),
        "UnitPriceDiscount": round(paid * count / 100, 2),
        "Discount": round(100.0 * paid / itype.price_fen_per_hour, 1),
        "ChargeUnit": "HOUR",
    }


def prepaid_price(itype: InstanceType, period: int, count: int = 1) -> dict[str, Any]:
    """ItemPrice for a monthly subscription of ``period`` months, in yuan (no extra discount)."""
    total = round(itype.monthly_price_fen * period * count / 100, 2)
    return {"OriginalPrice": total, "DiscountPrice": total, "Discount": 100.0}


def item_price(itype: InstanceType, charge_type: str, period: int = 1, count: int = 1) -> dict[str, Any]:
    return prepaid_price(itype, period, count) if charge_type == PREPAID else hourly_price(itype, charge_type, count)


def quota_item(zone: str, itype: InstanceType, charge_type: str, available: int) -> dict[str, Any]:
    item: dict[str, Any] = {
        "Zone": zone,
        "InstanceType": itype.name,
        "InstanceChargeType": charge_type,
        "NetworkCard": int(itype.bandwidth_gbps),
        "Externals": {},
        "Cpu": itype.cpu,
        "Memory": itype.memory_gib,
        "InstanceFamily": itype.family,
        "TypeName": itype.type_name,
        "LocalDiskTypeList": [],
        "Status": "SELL" if available > 0 else "SOLD_OUT",
        "Price": item_price(itype, charge_type),
        "SoldOutReason": "" if available > 0 else "ResourcesSoldOut.SpecifiedInstanceType",
        "InstanceBandwidth": itype.bandwidth_gbps,
        "InstancePps": int(itype.bandwidth_gbps * 50),
        "StorageBlockAmount": 0,
        "CpuType": itype.cpu_type,
        "Gpu": whole_gpus(itype),
        "Fpga": 0,
        "Remark": PRICE_REMARK,
        "GpuCount": float(itype.gpu_count),
        "Frequency": "2.5/3.1GHz",
        "StatusCategory": status_category(available),
    }
    if itype.local_nvme is not None:
        count, size = itype.local_nvme
        item["StorageBlockAmount"] = count
        item["LocalDiskTypeList"] = [
            {"Type": "LOCAL_NVME", "PartitionType": "DATA", "MinSize": size, "MaxSize": size, "Required": "REQUIRED"}
        ]
    return item


def type_config(zone: str, itype: InstanceType) -> dict[str, Any]:
    return {
        "Zone": zone,
        "InstanceType": itype.name,
        "InstanceFamily": itype.family,
        "GPU": whole_gpus(itype),
        "CPU": itype.cpu,
        "Memory": itype.memory_gib,
        "FPGA": 0,
        "GpuCount": float(itype.gpu_count),
        "GpuType": itype.gpu_model or "",
        "GpuMemory": float(itype.gpu_memory_gib),
    }


def zone_info(zone: Zone) -> dict[str, Any]:
    return {"Zone": zone.name, "ZoneName": zone.display_name, "ZoneId": zone.zone_id, "ZoneState": "AVAILABLE"}


def hpc_cluster(cluster: HpcCluster, instance_ids: list[str]) -> dict[str, Any]:
    """HpcClusterInfo; ``instance_ids``: its members (hpc.py)."""
    view: dict[str, Any] = {
        "HpcClusterId": cluster.cluster_id,
        "Name": cluster.name,
        "Remark": cluster.remark,
        "CvmQuotaTotal": CVM_QUOTA_TOTAL,
        "Zone": cluster.zone,
        "CurrentNum": len(instance_ids),
        "CreateTime": iso_utc(cluster.created_at),
        "InstanceIds": instance_ids,
        "HpcClusterType": cluster.cluster_type,
        "Tags": cluster.tags,
    }
    if cluster.business_id:
        view["HpcClusterBusinessId"] = cluster.business_id
    return view


def action_timer(timer: ActionTimer) -> dict[str, Any]:
    return {
        "TimerAction": "TerminateInstances",
        "ActionTime": iso_utc(timer.action_time),
        "Externals": {"ReleaseAddress": False},
        "ActionTimerId": timer.timer_id,
        "Status": timer.status,
        "InstanceId": timer.instance_id,
    }

