"""Zones, instance-type configurations, stock rows and prices through the official SDK."""

from __future__ import annotations

from typing import Any

from tests.emulator.cvm_support import SPOT_TYPE, ZONE, api_error, call, launch_params
from tests.emulator_process import EmulatorProcess


def quota(cvm: Any, **filters: list[str]) -> list[Any]:
    params = {"Filters": [{"Name": name.replace("_", "-"), "Values": v} for name, v in filters.items()]}
    return list(call(cvm, "DescribeZoneInstanceConfigInfos", params).InstanceTypeQuotaSet)


def test_describe_zones(cvm: Any) -> None:
    resp = call(cvm, "DescribeZones")
    assert resp.TotalCount == len(resp.ZoneSet) == 4
    assert {(z.Zone, z.ZoneState) for z in resp.ZoneSet} >= {(ZONE, "AVAILABLE")}
    assert next(z for z in resp.ZoneSet if z.Zone == ZONE).ZoneName == "广州三区"


def test_zone_instance_config_rows(emulator: EmulatorProcess, cvm: Any) -> None:
    rows = quota(cvm, zone=[ZONE], instance_family=["GN7"])
    types = {r.InstanceType for r in rows}
    assert "GN7.2XLARGE40" in types and all(r.InstanceFamily == "GN7" for r in rows)
    assert len(rows) == len(types) * 3  # one row per charge type
    (half,) = quota(cvm, zone=[ZONE], instance_type=["GN7.2XLARGE40"], instance_charge_type=["SPOTPAID"])
    assert (half.Gpu, half.GpuCount, half.Cpu, half.Memory) == (1, 0.5, 10, 40)
    assert half.Status == "SELL" and half.StatusCategory == "NormalStock"
    assert half.Price.UnitPriceDiscount < half.Price.UnitPrice and half.Price.ChargeUnit == "HOUR"
    assert half.Remark.startswith("emulator price")
    (hcc,) = quota(cvm, instance_type=["HCCPNV4h.48XLARGE1024"], zone=["ap-guangzhou-6"],
                   instance_charge_type=["POSTPAID_BY_HOUR"])
    assert [(d.Type, d.Required) for d in hcc.LocalDiskTypeList] == [("LOCAL_NVME", "REQUIRED")]
    emulator.admin.set_stock(ZONE, SPOT_TYPE, "SPOTPAID", 2)
    (low,) = quota(cvm, zone=[ZONE], instance_type=[SPOT_TYPE], instance_charge_type=["SPOTPAID"])
    assert (low.Status, low.StatusCategory) == ("SELL", "UnderStock")
    with api_error("InvalidFilter"):
        quota(cvm, colour=["red"])


def test_instance_type_configs(cvm: Any) -> None:
    configs = call(cvm, "DescribeInstanceTypeConfigs", {"Filters": [
        {"Name": "instance-type", "Values": ["GN7.2XLARGE32"]}, {"Name": "zone", "Values": [ZONE]}]})
    (t4,) = configs.InstanceTypeConfigSet
    assert (t4.GPU, t4.GpuCount, t4.GpuType, t4.GpuMemory, t4.CPU, t4.Memory) == (1, 1.0, "NVIDIA T4", 16.0, 8, 32)
    with api_error("InvalidFilterValue.LimitExceeded"):
        call(cvm, "DescribeInstanceTypeConfigs", {"Filters": [{"Name": "zone", "Values": [ZONE, "ap-guangzhou-4"]}]})


def test_inquiry_price(emulator: EmulatorProcess, cvm: Any) -> None:
    hourly = call(cvm, "InquiryPriceRunInstances", launch_params(InstanceType=SPOT_TYPE, InstanceCount=2))
    price = hourly.Price.InstancePrice
    assert (price.UnitPrice, price.UnitPriceDiscount, price.ChargeUnit) == (17.38, 17.38, "HOUR")
    spot = call(cvm, "InquiryPriceRunInstances", launch_params(InstanceType=SPOT_TYPE, InstanceChargeType="SPOTPAID"))
    assert (spot.Price.InstancePrice.UnitPrice, spot.Price.InstancePrice.UnitPriceDiscount) == (8.69, 1.74)
    monthly = call(cvm, "InquiryPriceRunInstances", launch_params(
        InstanceType=SPOT_TYPE, InstanceChargeType="PREPAID", InstanceChargePrepaid={"Period": 3}))
    # 869 fen x 720 h x 0.6, for 3 months
    assert monthly.Price.InstancePrice.OriginalPrice == monthly.Price.InstancePrice.DiscountPrice == 11262.24
    with api_error("InvalidParameterValue.InsufficientPrice"):
        call(cvm, "InquiryPriceRunInstances", launch_params(
            InstanceType=SPOT_TYPE, InstanceChargeType="SPOTPAID",
            InstanceMarketOptions={"MarketType": "spot", "SpotOptions": {"MaxPrice": "1.00"}}))
    emulator.admin.set_stock(ZONE, SPOT_TYPE, "POSTPAID_BY_HOUR", 0)
    with api_error("ResourcesSoldOut.SpecifiedInstanceType"):
        call(cvm, "InquiryPriceRunInstances", launch_params(InstanceType=SPOT_TYPE))
