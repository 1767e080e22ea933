"""What can be bought, where and for how much: InquiryPriceRunInstances, DescribeZones,
DescribeZoneInstanceConfigInfos (with the stock left) and DescribeInstanceTypeConfigs."""

from __future__ import annotations

from typing import Any

from ...api3.dispatch import CallContext
from ...api3.params import Params
from ...catalog import CHARGE_TYPES, INSTANCE_TYPES, InstanceType, zones_of
from .. import query, views
from ..launch import parse_launch
from ..models import Cvm

ZONE_CONFIG_FILTERS = ("zone", "instance-family", "instance-type", "instance-charge-type")
TYPE_CONFIG_FILTERS = ("zone", "instance-family", "instance-type")
_TYPE_CONFIG_FIELDS = {"zone": "Zone", "instance-family": "InstanceFamily", "instance-type": "InstanceType"}

Offer = tuple[str, InstanceType, str]  # zone, instance type, charge type


def _offer_values(offer: Offer, name: str) -> list[str]:
    zone, itype, charge_type = offer
    return {"zone": [zone], "instance-family": [itype.family], "instance-type": [itype.name],
            "instance-charge-type": [charge_type]}[name]


def _type_config_values(config: dict[str, Any], name: str) -> list[str]:
    return [config[_TYPE_CONFIG_FIELDS[name]]]


def inquiry_price_run_instances(cvm: Cvm, ctx: CallContext, params: Params) -> dict[str, Any]:
    region = query.region_of(ctx)
    spec = parse_launch(params, region, cvm.clock.now(), cvm.network, inquiry=True,
                        security_groups=cvm.security_groups.ids(region), hpc_clusters=cvm.hpc.zones(region))
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


def describe_zones(cvm: Cvm, ctx: CallContext, params: Params) -> dict[str, Any]:
    zones = [views.zone_info(z) for z in zones_of(query.region_of(ctx))]
    return {"TotalCount": len(zones), "ZoneSet": zones}


def describe_zone_instance_config_infos(cvm: Cvm, ctx: CallContext, params: Params) -> dict[str, Any]:
    filters = query.parse_filters(params, ZONE_CONFIG_FILTERS, max_values=100)
    offers: list[Offer] = [
        (zone.name, itype, charge_type)
        for zone in zones_of(query.region_of(ctx))
        for itype in INSTANCE_TYPES
        if zone.name in itype.zones
        for charge_type in CHARGE_TYPES
    ]
    return {
        "InstanceTypeQuotaSet": [
            views.quota_item(zone, itype, charge_type, cvm.stock.available(zone, itype.name, charge_type))
            for zone, itype, charge_type in offers
            if query.matches((zone, itype, charge_type), filters, _offer_values)
        ]
    }


def describe_instance_type_configs(cvm: Cvm, ctx: CallContext, params: Params) -> dict[str, Any]:
    filters = query.parse_filters(params, TYPE_CONFIG_FILTERS, max_values=1)
    configs = [
        views.type_config(zone.name, itype)
        for zone in zones_of(query.region_of(ctx))
        for itype in INSTANCE_TYPES
        if zone.name in itype.zones
    ]
    return {"InstanceTypeConfigSet": [c for c in configs if query.matches(c, filters, _type_config_values)]}
