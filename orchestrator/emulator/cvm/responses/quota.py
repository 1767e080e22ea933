"""DescribeAccountQuota: the account's quotas in the call's region (the figures and what is enforced: ../quota.py).

Filters ``zone`` (the per-zone sets) and ``quota-type``, one of the five set names (DescribeAccountQuotaRequest's
docstring); the sets not asked for are left out of the answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...api3.dispatch import CallContext
from ...api3.params import Params
from ...catalog import zones_of
from ...errors import ApiError
from .. import query
from ..images import IMAGE_QUOTA
from ..models import Cvm
from ..quota import (
    PLACEMENT_GROUPS,
    POSTPAID_INSTANCES,
    PREPAID_INSTANCES,
    PREPAID_ONCE,
    instances_held,
    vcpus_held,
)
from ..records import POSTPAID, PREPAID, SPOTPAID

QUOTA_FILTERS = ("zone", "quota-type")
Rows = Callable[[Cvm, str, list[str]], list[dict[str, Any]]]


def _used(used: int, total: int) -> dict[str, int]:
    return {"UsedQuota": used, "RemainingQuota": max(0, total - used), "TotalQuota": total}


def _post_paid(cvm: Cvm, region: str, zones: list[str]) -> list[dict[str, Any]]:
    live = cvm.live(region)
    return [{**_used(instances_held(live, z, POSTPAID), POSTPAID_INSTANCES), "Zone": z} for z in zones]


def _pre_paid(cvm: Cvm, region: str, zones: list[str]) -> list[dict[str, Any]]:
    live = cvm.live(region)
    return [{**_used(instances_held(live, z, PREPAID), PREPAID_INSTANCES), "OnceQuota": PREPAID_ONCE, "Zone": z}
            for z in zones]


def _spot_paid(cvm: Cvm, region: str, zones: list[str]) -> list[dict[str, Any]]:
    live = cvm.live(region)
    return [{**_used(vcpus_held(live, z, SPOTPAID), cvm.quotas.spot_vcpus(z)), "Zone": z} for z in zones]


def _images(cvm: Cvm, region: str, zones: list[str]) -> list[dict[str, Any]]:
    return [{"UsedQuota": len(cvm.images.in_region(region)), "TotalQuota": IMAGE_QUOTA}]


def _placement_groups(cvm: Cvm, region: str, zones: list[str]) -> list[dict[str, Any]]:
    return [{**PLACEMENT_GROUPS, "CurrentNum": 0}]  # the emulator has no placement groups (launch.py)


SETS: dict[str, Rows] = {
    "PostPaidQuotaSet": _post_paid,
    "PrePaidQuotaSet": _pre_paid,
    "SpotPaidQuotaSet": _spot_paid,
    "ImageQuotaSet": _images,
    "DisasterRecoverGroupQuotaSet": _placement_groups,
}


def _wanted(filters: list[query.Filter], name: str, everything: list[str]) -> list[str]:
    """What the filters of ``name`` keep of ``everything`` (in its order); all of it without such a filter."""
    kept = everything
    for flt in filters:
        if flt.name == name:
            kept = [item for item in kept if item in flt.values]
    return kept


def describe_account_quota(cvm: Cvm, ctx: CallContext, params: Params) -> dict[str, Any]:
    region = query.region_of(ctx)
    filters = query.parse_filters(params, QUOTA_FILTERS)
    for flt in filters:
        unknown = [v for v in flt.values if flt.name == "quota-type" and v not in SETS]
        if unknown:
            raise ApiError("InvalidParameterValue", f"quota-type `{unknown[0]}` is not one of {', '.join(SETS)}.")
    zones = _wanted(filters, "zone", [z.name for z in zones_of(region)])
    quota = {name: SETS[name](cvm, region, zones) for name in _wanted(filters, "quota-type", list(SETS))}
    return {
        "AppId": int(cvm.config.appid),
        "AccountQuotaOverview": {"Region": region, "AccountQuota": quota},
    }
