"""What one resource cost."""

from __future__ import annotations

from datetime import datetime, timezone

from . import errors
from ._sdk import TencentSdk
from .paging import pages


def resource_cost(sdk: TencentSdk, resource_id: str, when: datetime) -> float | None:
    """What the bill says ``resource_id`` cost in the month of ``when`` (CNY), or None when the bill does not
    list it yet (Tencent settles pay-as-you-go hourly, so bills lag)."""
    month = when.astimezone(timezone.utc).strftime("%Y-%m")
    # NeedRecordNum asks for Total, without which a listing cannot tell its last page by count.
    params = {"Month": month, "ResourceId": resource_id, "NeedRecordNum": 1}
    try:
        rows = list(pages(sdk, "billing", "DescribeBillResourceSummary", params, "ResourceSummarySet", "Total"))
    except errors.InvalidRequestError:
        return None
    if not rows:
        return None
    return sum(float(r.get("RealTotalCost") or 0) for r in rows)
