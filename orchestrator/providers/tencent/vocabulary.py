"""Tencent Cloud's words that the rest of cvmjob needs: charge types, instance states, image states.

They are written here once, as enums whose values are the wire strings; everything outside this package compares
against the members, never against the strings (tests/unit/test_boundaries.py enforces it). A member equals its
wire string, so records stored with the strings (node rows, plans) read back unchanged. What a state *means* to a
job (gone, never ran, billed) is said here too, beside the state, instead of as tuples of strings at each use.
"""

from __future__ import annotations

from enum import Enum


class _Wire(str, Enum):
    """A wire value that prints as itself (a plain str mixin prints as ``Class.MEMBER`` in f-strings)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class _State(_Wire):
    """A state word: one this version does not know reads as UNKNOWN, never as an error (the cloud adds states)."""

    @classmethod
    def _missing_(cls, value: object) -> _State:
        return cls["UNKNOWN"]

    @property
    def word(self) -> str:
        """What a person is shown for the state: the wire word in lower case, unless a class says better."""
        return str(self.value).lower()


class ChargeType(_Wire):
    ON_DEMAND = "POSTPAID_BY_HOUR"
    SPOT = "SPOTPAID"
    RESERVED = "PREPAID"  # monthly prepaid: cvmjob's reserved pools

    @classmethod
    def for_billing(cls, mode: str) -> ChargeType:
        """The charge type of a spec's ``billing.mode`` (on-demand, spot, reserved)."""
        return _BY_BILLING[mode]

    @property
    def billing(self) -> str:
        """The spec's name for this charge type."""
        return next(mode for mode, charge in _BY_BILLING.items() if charge is self)


_BY_BILLING = {"on-demand": ChargeType.ON_DEMAND, "spot": ChargeType.SPOT, "reserved": ChargeType.RESERVED}


class InstanceState(_State):
    """DescribeInstances' InstanceState (tencent-cloud-api.md §1.3)."""

    PENDING = "PENDING"
    LAUNCH_FAILED = "LAUNCH_FAILED"
    RUNNING = "RUNNING"
    STOPPED = "STOPPED"
    STARTING = "STARTING"
    STOPPING = "STOPPING"
    REBOOTING = "REBOOTING"
    SHUTDOWN = "SHUTDOWN"  # isolated: a prepaid instance in the recycle bin
    TERMINATING = "TERMINATING"
    UNKNOWN = "UNKNOWN"  # a state this version does not know: treated as neither running nor gone

    @property
    def never_ran(self) -> bool:
        """A failed launch: it bills nothing, yet the cloud lists it for minutes more."""
        return self is InstanceState.LAUNCH_FAILED

    @property
    def leaving(self) -> bool:
        """On its way out by itself: terminating it again is pointless."""
        return self in (InstanceState.TERMINATING, InstanceState.LAUNCH_FAILED)

    @property
    def terminable(self) -> bool:
        """TerminateInstances takes it now: not on its way out already, and not in a transition the API refuses
        to terminate in (UnsupportedOperation.InstanceStatePending and its like, §2.4): a later look can."""
        return not self.leaving and self not in (InstanceState.PENDING, InstanceState.STARTING,
                                                 InstanceState.STOPPING, InstanceState.REBOOTING)

    @property
    def down(self) -> bool:
        """Exists but runs nothing of the job any more (reclaimed, stopped, isolated, terminating)."""
        return self in (InstanceState.TERMINATING, InstanceState.SHUTDOWN, InstanceState.STOPPED,
                        InstanceState.STOPPING)

    @property
    def isolated(self) -> bool:
        """In the prepaid recycle bin: no longer billed, not yet released."""
        return self is InstanceState.SHUTDOWN

    @property
    def usable(self) -> bool:
        """Alive, or on its way to or from alive: what a pool can still count as a member."""
        return not (self.leaving or self.isolated)

    @property
    def word(self) -> str:
        """What a person is shown for the state (the wire word only where ours would say no more)."""
        return _INSTANCE_WORDS.get(self, self.value.lower())


class ImageState(_State):
    """DescribeImages' ImageState."""

    CREATING = "CREATING"
    NORMAL = "NORMAL"
    CREATEFAILED = "CREATEFAILED"
    USING = "USING"
    SYNCING = "SYNCING"
    IMPORTING = "IMPORTING"
    IMPORTFAILED = "IMPORTFAILED"
    UNKNOWN = "UNKNOWN"

    @property
    def ready(self) -> bool:
        return self is ImageState.NORMAL

    @property
    def failed(self) -> bool:
        return self in (ImageState.CREATEFAILED, ImageState.IMPORTFAILED)


class StockStatus(_Wire):
    """DescribeZoneInstanceConfigInfos' StatusCategory: how much of a placement is left to sell."""

    ENOUGH = "EnoughStock"
    NORMAL = "NormalStock"
    UNDER = "UnderStock"
    NONE = "WithoutStock"


_INSTANCE_WORDS = {InstanceState.LAUNCH_FAILED: "launch failed", InstanceState.SHUTDOWN: "isolated (recycle bin)"}
_STOCK_WORDS = {StockStatus.ENOUGH: "plenty", StockStatus.NORMAL: "some", StockStatus.UNDER: "low",
                StockStatus.NONE: "none"}


def stock_word(status: str) -> str:
    """What a person is shown for a placement's stock: a word for a known StatusCategory, "-" for none recorded,
    and any other (newer) category as the cloud says it."""
    if not status:
        return "-"
    try:
        return _STOCK_WORDS[StockStatus(status)]
    except ValueError:
        return status


def needs_hpc_cluster(instance_type: str) -> bool:
    """Whether the type is sold only into an HPC cluster (the HCC families: RunInstances' HpcClusterId, "若创建的实例
    为高性能计算实例，需指定实例放置的集群，否则不可指定")."""
    return instance_type.startswith("HCC")
