"""Billing 2018-07-09 actions."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from ..api3.dispatch import CallContext, Service
from ..api3.params import Params
from ..errors import ApiError
from .models import Billing


def build(billing: Billing, now: Callable[[], float], uin: str) -> Service:
    service = Service("billing", "2018-07-09")

    @service.action("DescribeAccountBalance", mutates=False)
    def describe_account_balance(ctx: CallContext, params: Params) -> dict[str, Any]:
        """The fields and their sums as the API documents them, every amount in 分 (0.01 CNY):
        https://www.tencentcloud.com/document/product/555/50284. The account has no credit limit, so the credit
        balances equal the cash ones."""
        b = billing.balance(now())
        return {
            "Balance": b["real"],
            "Uin": int(uin),
            "RealBalance": float(b["real"]),
            "CashAccountBalance": float(b["cash"]),
            "IncomeIntoAccountBalance": 0.0,
            "PresentAccountBalance": 0.0,
            "FreezeAmount": float(b["frozen"]),
            "OweAmount": float(max(0, -b["cash"])),
            "IsAllowArrears": False,
            "IsCreditLimited": False,
            "CreditAmount": 0.0,
            "CreditBalance": float(b["cash"]),
            "RealCreditBalance": float(b["real"]),
            "TempCredit": 0.0,
            "TempAmountInfoList": [],
        }

    @service.action("DescribeBillResourceSummary", mutates=False)
    def describe_bill_resource_summary(ctx: CallContext, params: Params) -> dict[str, Any]:
        """Per-resource cost of a month. Real bills settle hourly and lag; here a resource's cost is current to
        the second, which is what lets a controller's recorded bill match the balance exactly."""
        month = params.req_str("Month")
        if not re.fullmatch(r"\d{4}-\d{2}", month):
            raise ApiError("InvalidParameterValue", f"Month must be YYYY-MM, not {month!r}.")
        offset = params.int("Offset", 0) or 0
        limit = params.int("Limit", 100) or 100
        wanted = params.str("ResourceId")
        t = now()
        rows: dict[str, dict[str, Any]] = {}
        for line in billing.ledger(t, wanted or None):
            resource = str(line["resource_id"]).split(".", 1)[0]  # a stop/start opens charge segment ins-x.1
            started = line["created_at"]
            if wanted and resource != wanted:
                continue
            if datetime.fromtimestamp(started, timezone.utc).strftime("%Y-%m") != month:
                continue
            row = rows.setdefault(resource, {"cost": 0, "begin": started, "end": started, "type": line["charge_type"]})
            row["cost"] += line["cost_fen"]
            row["end"] = max(row["end"], line["ended_at"] or t)
        items = [
            {
                "BusinessCodeName": "云服务器CVM",
                "ProductCodeName": "云服务器CVM-GPU",
                "PayModeName": _PAY_MODE.get(row["type"], row["type"]),
                "ResourceId": resource,
                "ResourceName": resource,
                "FeeBeginTime": _stamp(row["begin"]),
                "FeeEndTime": _stamp(row["end"]),
                "TotalCost": f"{row['cost'] / 100:.2f}",
                "RealTotalCost": f"{row['cost'] / 100:.2f}",
                "CashPayAmount": f"{row['cost'] / 100:.2f}",
                "BusinessCode": "p_cvm",
                "ProductCode": "sp_cvm",
                "BillMonth": month,
                "PayerUin": uin,
                "OwnerUin": uin,
                "OperateUin": uin,
                "Tags": [],
            }
            for resource, row in sorted(rows.items())
        ]
        return {"ResourceSummarySet": items[offset : offset + limit], "Total": len(items)}

    return service


_PAY_MODE = {"POSTPAID_BY_HOUR": "按量计费", "SPOTPAID": "竞价实例", "PREPAID": "包年包月"}


def _stamp(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
