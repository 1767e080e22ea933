"""The account's money, in 分 (0.01 CNY) as DescribeAccountBalance reports it.

Pay-as-you-go and spot instances are billed per second of their life from RUNNING to termination, at the hourly
price fixed when they were bought (spot at its discount); one hour of that price is frozen from purchase until
release (RunInstances docstring). Prepaid instances are paid up front for their period.
"""

from __future__ import annotations

import math
import threading
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Charge:
    resource_id: str
    charge_type: str  # POSTPAID_BY_HOUR, SPOTPAID, PREPAID
    price_per_hour_fen: int
    created_at: float
    started_at: float | None = None  # billing starts when the instance is RUNNING
    ended_at: float | None = None
    upfront_fen: int = 0
    released: bool = False  # frozen hour returned

    def billed_seconds(self, now: float) -> int:
        if self.started_at is None:
            return 0
        end = self.ended_at if self.ended_at is not None else now
        return max(0, math.floor(end - self.started_at))

    def cost_fen(self, now: float) -> int:
        metered = round(self.price_per_hour_fen * self.billed_seconds(now) / 3600)
        return self.upfront_fen + (0 if self.charge_type == "PREPAID" else metered)

    def frozen_fen(self) -> int:
        if self.charge_type == "PREPAID" or self.released:
            return 0
        return self.price_per_hour_fen


@dataclass
class Billing:
    initial_fen: int
    charges: dict[str, Charge] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def open(
        self, resource_id: str, charge_type: str, price_per_hour_fen: int, now: float, upfront_fen: int = 0
    ) -> None:
        with self._lock:
            self.charges[resource_id] = Charge(
                resource_id, charge_type, price_per_hour_fen, now, upfront_fen=upfront_fen
            )

    def start(self, resource_id: str, now: float) -> None:
        with self._lock:
            charge = self.charges.get(resource_id)
            if charge and charge.started_at is None and charge.ended_at is None:
                charge.started_at = now

    def stop(self, resource_id: str, now: float) -> None:
        """Metering ends (termination, reclaim, launch failure): the frozen hour is released."""
        with self._lock:
            charge = self.charges.get(resource_id)
            if charge and charge.ended_at is None:
                charge.ended_at = now
                charge.released = True

    def set_cash(self, fen: int, now: float) -> None:
        """The cash balance is ``fen`` from ``now`` (the admin API's top-up or drain): what was consumed stays
        consumed, what is frozen stays frozen."""
        with self._lock:
            consumed = sum(c.cost_fen(now) for c in self.charges.values())
            self.initial_fen = fen + consumed

    def balance(self, now: float) -> dict[str, int]:
        with self._lock:
            consumed = sum(c.cost_fen(now) for c in self.charges.values())
            frozen = sum(c.frozen_fen() for c in self.charges.values())
        cash = self.initial_fen - consumed
        return {"cash": cash, "frozen": frozen, "real": cash - frozen, "consumed": consumed}

    def ledger(self, now: float, resource: str | None = None) -> list[dict[str, Any]]:
        """Every charge, or one resource's (its segments ``ins-x``, ``ins-x.1``, ...): a controller asks for one
        job's instances, and building all thousand charges for each of them was most of a load test's emulator."""
        with self._lock:
            return [
                {**asdict(c), "billed_seconds": c.billed_seconds(now), "cost_fen": c.cost_fen(now)}
                for c in self.charges.values()
                if resource is None or c.resource_id.split(".", 1)[0] == resource
            ]

    def to_state(self) -> dict[str, Any]:
        with self._lock:
            return {"initial_fen": self.initial_fen, "charges": [asdict(c) for c in self.charges.values()]}

    def restore(self, state: dict[str, Any]) -> None:
        with self._lock:
            self.initial_fen = int(state.get("initial_fen", self.initial_fen))
            self.charges = {c["resource_id"]: Charge(**c) for c in state.get("charges", [])}
