"""CVM's persistent records: plain dataclasses that round-trip through the state file.

Times are seconds on the cloud clock. Every scheduled transition is a due time stored here (never a timer in
memory), so it survives restarts and jumps with ``admin.advance()``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypeVar

from ..runtime.netfilter import loopback_of

# InstanceState values (shared/reference/tencent-cloud-api.md §2.2).
PENDING = "PENDING"
LAUNCH_FAILED = "LAUNCH_FAILED"
RUNNING = "RUNNING"
STOPPING = "STOPPING"
STOPPED = "STOPPED"
STARTING = "STARTING"
REBOOTING = "REBOOTING"
SHUTDOWN = "SHUTDOWN"  # prepaid, in the recycle bin
TERMINATING = "TERMINATING"

PREPAID = "PREPAID"
POSTPAID = "POSTPAID_BY_HOUR"
SPOTPAID = "SPOTPAID"


@dataclass
class Instance:
    instance_id: str
    uuid: str
    region: str
    zone: str
    instance_type: str
    charge_type: str
    image_id: str
    os_name: str
    platform: str
    name: str
    host_name: str
    created_at: float
    price_fen_per_hour: int
    secret: str  # the password of the instance's proxy URL, which the metadata service checks
    vpc_id: str
    subnet_id: str
    vpc_ip: str  # allocated from the subnet; the wire shows its loopback form (``address``, views.py)
    security_group_ids: list[str]
    system_disk: dict[str, Any]  # wire form: DiskType, DiskId, DiskSize
    data_disks: list[dict[str, Any]]
    internet: dict[str, Any]
    local_disks: int
    tags: list[dict[str, str]]
    user_data: str = ""  # base64, as given
    cam_role: str = ""
    disable_api_termination: bool = False
    prepaid_period: int = 0
    renew_flag: str = ""
    expired_at: float | None = None
    state: str = PENDING
    due_at: float | None = None  # when the current transitional state ends
    latest_operation: str = "RunInstances"
    latest_operation_state: str = "OPERATING"
    latest_operation_request_id: str = ""
    latest_operation_error: str = ""
    launch_failure: str | None = None  # set: the launch ends LAUNCH_FAILED with this message
    disk_ready_at: float | None = None  # None while the system disk is being (re)written
    stopped_mode: str = ""  # KEEP_CHARGING / STOP_CHARGING of the current stop
    isolated_source: str = "NOTISOLATED"
    billing_segment: int = 0  # STOP_CHARGING closes a charge; each restart opens the next
    gpus: list[int] = field(default_factory=list)
    kill_grace: float | None = None  # seconds from SIGTERM to SIGKILL at the next power-off; None: default
    user_data_pending: bool = True  # the next boot runs the UserData (first boot, after ResetInstance)
    boot_pending: bool = False  # RUNNING, but this boot's processes have not been started yet
    pgid: int | None = None  # the last boot's process group, for strays after an emulator crash
    first_running_at: float | None = None
    random_notice_at: float | None = None  # seeded random reclaim (runtime/spot.py)
    notice_at: float | None = None  # spot reclaim notice given
    reclaim_at: float | None = None  # spot instance dies
    holds_capacity: bool = True  # one unit of stock, from purchase until release (or a STOP_CHARGING stop)
    role_secret_id: str = ""  # metadata role credential currently handed out
    hpc_cluster_id: str = ""  # the HPC cluster an HCC type was bought into (cvm/hpc.py)

    @property
    def address(self) -> str:
        """Where its processes listen and its peers reach it on this machine (runtime/netfilter.py)."""
        return loopback_of(self.vpc_ip)

    @property
    def billing_id(self) -> str:
        return self.instance_id if self.billing_segment == 0 else f"{self.instance_id}.{self.billing_segment}"


@dataclass
class Gone:
    """What is remembered of a released instance: enough for NotFound and for ClientToken replays."""

    instance_id: str
    region: str
    gone_at: float


@dataclass
class Image:
    image_id: str
    region: str
    name: str
    description: str
    state: str  # CREATING, NORMAL, CREATEFAILED
    created_at: float
    ready_at: float  # CREATING lasts at least until then, and until the copy is done
    source_instance_id: str
    source_dir: str  # the system disk being captured
    os_name: str
    platform: str
    size_gib: int
    tags: list[dict[str, str]]
    request_id: str  # CreateImage's: the instance's LatestOperationRequestId while it runs
    copy_done_at: float | None = None
    error: str = ""


@dataclass
class ActionTimer:
    timer_id: str
    instance_id: str
    region: str
    action_time: float
    status: str = "UNDO"  # UNDO, DOING, DONE


@dataclass
class HpcCluster:
    """An HPC cluster (CreateHpcCluster): its members are the instances that name it (cvm/hpc.py)."""

    cluster_id: str
    region: str
    zone: str
    name: str
    remark: str
    cluster_type: str  # STANDARD, CDC or CHC
    business_id: str
    tags: list[dict[str, str]]
    created_at: float


Record = TypeVar("Record", Instance, Gone, Image, ActionTimer, HpcCluster)


def dump(record: Instance | Gone | Image | ActionTimer | HpcCluster) -> dict[str, Any]:
    return asdict(record)


def load(cls: type[Record], data: dict[str, Any]) -> Record:
    """Tolerates fields added since the state was written (their defaults) and fields since removed."""
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})
