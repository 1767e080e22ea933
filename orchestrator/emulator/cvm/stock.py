"""Capacity: how many more instances of a type can be bought in a zone, per charge type.

Each zone x type x charge type starts at ``catalog.DEFAULT_STOCK`` (types not sold in a zone have none); a live
instance holds one unit from purchase until release, and ``admin.set_stock`` sets what is left. SPOTPAID stock is
the spot market's capacity.
"""

from __future__ import annotations

from typing import Any

from ..catalog import CHARGE_TYPES, DEFAULT_STOCK, INSTANCE_TYPES_BY_NAME, ZONES_BY_NAME

Key = tuple[str, str, str]  # zone, instance type, charge type


def sold_in(zone: str, instance_type: str) -> bool:
    itype = INSTANCE_TYPES_BY_NAME.get(instance_type)
    return itype is not None and zone in itype.zones


def status_category(available: int) -> str:
    """DescribeZoneInstanceConfigInfos' StatusCategory for what is left."""
    if available <= 0:
        return "WithoutStock"
    if available <= 2:
        return "UnderStock"
    if available <= 10:
        return "NormalStock"
    return "EnoughStock"


class Stock:
    def __init__(self) -> None:
        self._available: dict[Key, int] = {}

    def available(self, zone: str, instance_type: str, charge_type: str) -> int:
        if not sold_in(zone, instance_type):
            return 0
        return self._available.get((zone, instance_type, charge_type), DEFAULT_STOCK[charge_type])

    def take(self, zone: str, instance_type: str, charge_type: str, count: int = 1) -> None:
        self._available[(zone, instance_type, charge_type)] = self.available(zone, instance_type, charge_type) - count

    def give_back(self, zone: str, instance_type: str, charge_type: str, count: int = 1) -> None:
        self.take(zone, instance_type, charge_type, -count)

    def set(self, zone: str, instance_type: str, charge_type: str, count: int) -> dict[str, Any]:
        if zone not in ZONES_BY_NAME:
            raise ValueError(f"unknown zone {zone!r}")
        if not sold_in(zone, instance_type):
            raise ValueError(f"{instance_type!r} is not sold in {zone}")
        if charge_type not in CHARGE_TYPES:
            raise ValueError(f"charge type must be one of {CHARGE_TYPES}")
        if count < 0:
            raise ValueError("stock cannot be negative")
        self._available[(zone, instance_type, charge_type)] = count
        return {"zone": zone, "instance_type": instance_type, "charge_type": charge_type, "available": count}

    def to_state(self) -> list[list[Any]]:
        return [[*key, count] for key, count in self._available.items()]

    def restore(self, state: list[list[Any]]) -> None:
        self._available = {(str(z), str(t), str(c)): int(n) for z, t, c, n in state}
