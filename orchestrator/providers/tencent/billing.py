"""The account balance and what one resource cost."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from . import errors
from ._sdk import TencentSdk


@dataclass(frozen=True)
class Balance:
    available_fen: int
    frozen_fen: int


def account_balance(sdk: TencentSdk) -> Balance:
    result = sdk.call("billing", "DescribeAccountBalance", {})
    return Balance(int(result.get("Balance") or 0), int(float(result.get("FreezeAmount") or 0)))


def resource_cost(sdk: TencentSdk, resource_id: str, when: datetime) -> float | None:
    """What the bill says ``resource_id`` cost in the month of ``when`` (CNY), or None when the bill does not
    list it yet (Tencent settles pay-as-you-go hourly, so bills lag)."""
    month = when.astimezone(timezone.utc).strftime("%Y-%m")
    try:
        result = sdk.call(
            "billing",
            "DescribeBillResourceSummary",
            {"Offset": 0, "Limit": 100, "Month": month, "ResourceId": resource_id},
        )
    except errors.InvalidRequestError:
        return None
    rows = result.get("ResourceSummarySet") or []
    if not rows:
        return None
    return sum(float(r.get("RealTotalCost") or 0) for r in rows)
