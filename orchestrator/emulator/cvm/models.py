"""CVM state and behaviour (placeholder until the CVM backend lands)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..billing.models import Billing
from ..clock import Clock
from ..config import EmulatorConfig
from ..iam import Iam


class Cvm:
    def __init__(self, config: EmulatorConfig, clock: Clock, iam: Iam, billing: Billing, root: Path) -> None:
        self.config, self.clock, self.iam, self.billing, self.root = config, clock, iam, billing, root

    def tick(self, now: float) -> bool:
        return False

    def to_state(self) -> dict[str, Any]:
        return {}

    def restore(self, state: dict[str, Any]) -> None:
        pass

    def reset(self) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def admin_instances(self) -> list[dict[str, Any]]:
        return []

    def reclaim(self, instance_id: str, notice_seconds: float | None) -> dict[str, Any]:
        raise KeyError(instance_id)

    def set_stock(self, zone: str, instance_type: str, charge_type: str, count: int) -> dict[str, Any]:
        raise KeyError(zone)

    def add_launch_failures(self, spec: dict[str, Any]) -> dict[str, Any]:
        raise KeyError("launch failures")
