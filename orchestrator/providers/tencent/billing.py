"""What one resource cost; what the account can still pay."""

from __future__ import annotations

from dataclasses import dataclass
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


BALANCE_PERMISSION = "billing:DescribeAccountBalance"  # the CAM action keys need to read the balance


@dataclass(frozen=True)
class AccountBalance:
    """DescribeAccountBalance in CNY (it answers in 分). The fields, in cents, and how they add up:
    https://www.tencentcloud.com/document/product/555/50284 (RealBalance = cash + income + present - frozen -
    owed; RealCreditBalance = the same with the credit limit)."""

    real: float  # RealBalance: what is there to spend now
    real_credit: float | None  # RealCreditBalance: with the account's credit limit; None when not answered
    frozen: float  # FreezeAmount: e.g. one hour of each pay-as-you-go instance, held from its purchase
    owed: float  # OweAmount

    @property
    def available(self) -> float:
        """What a purchase may spend: the balance, or the credit balance for an account with a credit limit."""
        return max(self.real, self.real_credit if self.real_credit is not None else self.real)


def account_balance(sdk: TencentSdk) -> AccountBalance:
    answer = sdk.call("billing", "DescribeAccountBalance", {})
    real = answer.get("RealBalance", answer.get("Balance", 0))
    credit = answer.get("RealCreditBalance")
    return AccountBalance(
        real=float(real) / 100,
        real_credit=None if credit is None else float(credit) / 100,
        frozen=float(answer.get("FreezeAmount") or 0) / 100,
        owed=float(answer.get("OweAmount") or 0) / 100,
    )
