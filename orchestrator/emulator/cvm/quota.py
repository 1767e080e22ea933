"""The account's quotas per zone, as DescribeAccountQuota reports them; the spot quota is enforced at launch.

- Spot: "the spot instances for each account per availability zone can contain up to 50 vCPU cores in total",
  raised by a ticket (INTL 竞价实例 page, realcloud.md §4); SpotPaidQuota counts vCPU cores. A spot RunInstances
  (its DryRun included) whose cores do not fit what is left answers LimitExceeded.SpotQuota. An instance holds its
  cores from purchase until it begins terminating (TerminateInstances, a reclaim, its ActionTimer); a launch that
  failed (LAUNCH_FAILED) holds none. What a ticket would do, the admin API does: ``PUT /_emulator/quota``
  ``{"zone": "ap-guangzhou-3", "spot_vcpus": 16}`` (no zone: every zone; ``null``: back to 50).
- Pay-as-you-go: 30 instances per account per zone ("The purchase limit of Pay-as-you-go CVM instances for each
  user in each availability zone is 30", INTL doc 213/2664), reported, not enforced: load tests buy hundreds.
- Monthly subscription, images and placement groups: reported with the figures of Tencent's tccli example of
  DescribeAccountQuota (OnceQuota 300, 10 placement groups of 50/20/30 instances per host/switch/rack); the prepaid
  total is the emulator's choice; the image quota is the one CreateImage enforces (images.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..catalog import INSTANCE_TYPES_BY_NAME, ZONES, ZONES_BY_NAME, InstanceType
from ..errors import ApiError
from .records import LAUNCH_FAILED, SPOTPAID, TERMINATING, Instance

DEFAULT_SPOT_VCPUS = 50
POSTPAID_INSTANCES = 30
PREPAID_INSTANCES = 250
PREPAID_ONCE = 300
PLACEMENT_GROUPS = {"GroupQuota": 10, "CvmInHostGroupQuota": 50, "CvmInSwitchGroupQuota": 20,
                    "CvmInRackGroupQuota": 30}


def holds_quota(rec: Instance) -> bool:
    return rec.state not in (TERMINATING, LAUNCH_FAILED)


def instances_held(instances: Iterable[Instance], zone: str, charge_type: str) -> int:
    return sum(1 for i in instances if i.zone == zone and i.charge_type == charge_type and holds_quota(i))


def vcpus_held(instances: Iterable[Instance], zone: str, charge_type: str) -> int:
    return sum(INSTANCE_TYPES_BY_NAME[i.instance_type].cpu for i in instances
               if i.zone == zone and i.charge_type == charge_type and holds_quota(i))


class Quotas:
    """The totals a ticket raised or lowered (zone -> spot vCPU cores); every other zone has the default."""

    def __init__(self) -> None:
        self._spot_vcpus: dict[str, int] = {}

    def spot_vcpus(self, zone: str) -> int:
        return self._spot_vcpus.get(zone, DEFAULT_SPOT_VCPUS)

    def set_spot_vcpus(self, zone: str | None, vcpus: int | None) -> dict[str, int]:
        """The total of ``zone`` (None: of every zone) from now on; ``vcpus`` None: the default again."""
        if zone is not None and zone not in ZONES_BY_NAME:
            raise ValueError(f"unknown zone {zone!r}")
        if vcpus is not None and (not isinstance(vcpus, int) or isinstance(vcpus, bool) or vcpus < 0):
            raise ValueError("'spot_vcpus' must be a whole number of vCPU cores, 0 or more, or null")
        zones = [zone] if zone is not None else [z.name for z in ZONES]
        for name in zones:
            if vcpus is None:
                self._spot_vcpus.pop(name, None)
            else:
                self._spot_vcpus[name] = vcpus
        return {name: self.spot_vcpus(name) for name in zones}

    def check_spot(self, instances: Iterable[Instance], zone: str, itype: InstanceType, count: int) -> None:
        total = self.spot_vcpus(zone)
        used = vcpus_held(instances, zone, SPOTPAID)
        asked = itype.cpu * count
        if used + asked > total:
            raise ApiError(
                "LimitExceeded.SpotQuota",
                f"The spot quota of {zone} is {total} vCPU cores and {used} are in use: {count} {itype.name} "
                f"({asked} vCPU cores) do not fit in the {max(0, total - used)} left. A ticket raises the quota.",
            )

    def to_state(self) -> dict[str, Any]:
        return {"spot_vcpus": dict(self._spot_vcpus)}

    def restore(self, state: dict[str, Any]) -> None:
        self._spot_vcpus = {str(zone): int(vcpus) for zone, vcpus in state.get("spot_vcpus", {}).items()}
