"""Billing 2018-07-09 actions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..api3.dispatch import CallContext, Service
from ..api3.params import Params
from .models import Billing


def build(billing: Billing, now: Callable[[], float], uin: str) -> Service:
    service = Service("billing", "2018-07-09")

    @service.action("DescribeAccountBalance", mutates=False)
    def describe_account_balance(ctx: CallContext, params: Params) -> dict[str, Any]:
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

    return service
