"""Whether the account can pay, asked before anything is bought: the most a launch may cost (a job's plan, a reserved
pool's prepaid purchase) against the balance DescribeAccountBalance reports.

Tencent Cloud itself refuses a purchase only when the balance cannot cover its first hour (a pay-as-you-go
instance freezes one hour of its price) and shuts instances down two hours into arrears; a job planned for a day
on an account that holds an hour would die mid-run. An account whose keys may not read the balance (no CAM
permission for billing) is not stopped: it is told, and the launch goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import EXIT_CLOUD_ERROR
from ..plan.planner import PlanError
from ..providers.tencent import TencentSdk, billing
from ..providers.tencent.errors import CloudError
from ..providers.tencent.retry import retrying

TOP_UP = "top up the account (Billing Center, Top up)"


class InsufficientFunds(PlanError):
    """The launch may cost more than the account's available balance: nothing was bought."""

    exit_code = EXIT_CLOUD_ERROR


@dataclass(frozen=True)
class Need:
    """What a purchase needs the balance to hold, why, and how to need less."""

    cost: float  # CNY
    basis: str
    lower: str


def job_need(estimate: float | None, max_cost: float | None, first_hour: float | None, hours: float) -> Need | None:
    """The most a job may cost: its plan's estimate (its first placement, every node, all of limits.max_runtime),
    or limits.max_cost where that is lower (the job stops itself there); but never less than the hour of its
    nodes' price that Tencent freezes at a pay-as-you-go purchase. None when the plan has no price."""
    if estimate is None:
        return None
    need = Need(estimate, f"for limits.max_runtime, {hours:g} h", "lower limits.max_runtime or limits.max_cost")
    if max_cost is not None and max_cost < estimate:
        need = Need(max_cost, "up to limits.max_cost", "lower limits.max_cost")
    if first_hour is not None and first_hour > need.cost:
        need = Need(first_hour, "one hour, frozen at purchase", "choose a cheaper instance type or billing.mode")
    return need


def refusal(what: str, need: Need, balance: billing.AccountBalance) -> str | None:
    """Why ``what`` may not be bought, or None when the balance covers it."""
    if need.cost <= balance.available:
        return None
    return (f"{what} ({need.basis}) needs ¥{need.cost:,.2f}, more than the account's available balance of "
            f"¥{balance.available:,.2f}: {TOP_UP}, or {need.lower}; nothing was launched")


def ensure(sdk: TencentSdk, what: str, need: Need | None, warn: Callable[[str], None]) -> None:
    """Raise InsufficientFunds when the balance does not cover ``need``; ``warn``, and go on, when the balance
    cannot be read."""
    if need is None or need.cost <= 0:
        return
    try:
        balance = retrying(lambda: billing.account_balance(sdk))
    except CloudError as exc:  # a CAM refusal above all: users without billing rights still launch
        warn(f"the account balance could not be read ({exc.code}), so it was not checked against the "
             f"¥{need.cost:,.2f} {what} needs; allow the keys {billing.BALANCE_PERMISSION} to have it checked")
        return
    problem = refusal(what, need, balance)
    if problem is not None:
        raise InsufficientFunds([problem])
