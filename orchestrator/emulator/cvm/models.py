"""CVM state and behaviour: instances and their life cycle, stock, quotas, HPC clusters, action timers, images,
spot reclaims.

Life cycle (shared/reference/tencent-cloud-api.md §2.2), every step a due time in the record that ``tick`` acts on
at that time, so transitions survive restarts and jump with ``admin.advance()``; a transition takes effect at its
due time, not at the tick that notices it, so billing is exact whatever the tick rate:
  RunInstances -> PENDING -(boot_seconds, disk ready)-> RUNNING, or LAUNCH_FAILED (injected launch failures; shown
      for LAUNCH_FAILED_VISIBLE_SECONDS, then gone, like the TF provider observes)
  RUNNING -StopInstances-> STOPPING -(stop_seconds)-> STOPPED -StartInstances-> STARTING -(stop_seconds)-> RUNNING
  RUNNING -RebootInstances-> REBOOTING -(stop_seconds)-> RUNNING;  ResetInstance: REBOOTING -(boot_seconds)-> RUNNING
  postpaid/spot -TerminateInstances-> TERMINATING -(terminate_seconds)-> gone
  PREPAID -TerminateInstances-> SHUTDOWN (recycle bin) -TerminateInstances-> TERMINATING -> gone
  ActionTimer at its time, and a spot reclaim at its kill time: TERMINATING (never the recycle bin) -> gone
Processes follow the state (``_reconcile``): an instance runs a boot while RUNNING and is powered off otherwise.
In the load-test mode (``Host.run_user_data`` False) a boot starts no process; the states, bills and reclaims
are the same.

Billing (billing/models.py): a charge opens at purchase (one hour frozen; a prepaid period paid up front), meters
from RUNNING, and stops at termination, at the recycle bin, at a launch failure, and at a STOP_CHARGING stop,
after which StartInstances opens the next charge (``Instance.billing_id``). Prepaid periods are not refunded.
"""

from __future__ import annotations

import base64
import ipaddress
import itertools
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..billing.models import Billing
from ..catalog import INSTANCE_TYPES_BY_NAME
from ..clock import Clock
from ..config import EmulatorConfig
from ..errors import ApiError
from ..iam import Iam, random_token
from ..ids import new_id
from ..runtime import spot
from ..runtime.background import Background
from ..runtime.faults import Faults
from ..runtime.gpus import GpuPool
from ..runtime.host import Host
from ..vpc.models import DefaultNetwork, Policy, SecurityGroups
from ..vpc.reach import Member, tcp_ports
from .hpc import HpcClusters, check_room, members
from .images import Images
from .launch import LaunchSpec
from .quota import Quotas
from .records import (
    LAUNCH_FAILED,
    PENDING,
    POSTPAID,
    PREPAID,
    REBOOTING,
    RUNNING,
    SHUTDOWN,
    SPOTPAID,
    STARTING,
    STOPPED,
    STOPPING,
    TERMINATING,
    ActionTimer,
    Gone,
    Image,
    Instance,
    dump,
    load,
)
from .stock import Stock
from .times import add_months

LAUNCH_FAILED_VISIBLE_SECONDS = 300.0
KEEP_CHARGING, STOP_CHARGING = "KEEP_CHARGING", "STOP_CHARGING"
OPERATING, SUCCESS, FAILED = "OPERATING", "SUCCESS", "FAILED"


def state_error(rec: Instance) -> ApiError:
    """The UnsupportedOperation.InstanceState* code for an action the instance's state does not allow."""
    message = f"The instance `{rec.instance_id}` is {rec.state}."
    match rec.state:
        case "PENDING":
            return ApiError("UnsupportedOperation.InstanceStatePending", message)
        case "LAUNCH_FAILED":
            return ApiError("UnsupportedOperation.InstanceStateLaunchFailed", message)
        case "RUNNING":
            return ApiError("UnsupportedOperation.InstanceStateRunning", message)
        case "STOPPING":
            return ApiError("UnsupportedOperation.InstanceStateStopping", message)
        case "STOPPED":
            return ApiError("UnsupportedOperation.InstanceStateStopped", message)
        case "STARTING":
            return ApiError("UnsupportedOperation.InstanceStateStarting", message)
        case "REBOOTING":
            return ApiError("UnsupportedOperation.InstanceStateRebooting", message)
        case "SHUTDOWN":
            return ApiError("UnsupportedOperation.InstanceStateShutdown", message)
        case _:
            return ApiError("UnsupportedOperation.InstanceStateTerminating", message)


class Cvm:
    """One account's CVM: built anew by a reset, on the same ``host`` (emptied by the reset)."""

    def __init__(
        self, config: EmulatorConfig, clock: Clock, iam: Iam, billing: Billing, faults: Faults, host: Host,
        images_root: Path, background: Background,
    ) -> None:
        self.config, self.clock, self.iam, self.billing, self.faults = config, clock, iam, billing, faults
        self.host = host
        self.instances: dict[str, Instance] = {}
        self.gone: dict[str, Gone] = {}
        self.client_tokens: dict[str, list[str]] = {}
        self.timers: dict[str, ActionTimer] = {}
        self._timers_by_instance: dict[str, list[ActionTimer]] | None = None  # during a tick only (see tick)
        self.stock = Stock()
        self.quotas = Quotas()
        self.hpc = HpcClusters()
        self.gpus = GpuPool(host.devices)
        self.images = Images(images_root, clock.now, config.image_seconds, faults, background)
        self.security_groups = SecurityGroups()  # the VPC API's, which a launch names
        self.network = DefaultNetwork()  # the regions' default VPCs and subnets, as the VPC API left them
        self._reach_signature: object = None  # what the instances' reach tables were written for (_publish_reach)

    # -- lookups -----------------------------------------------------------------------------------------
    def live(self, region: str) -> list[Instance]:
        return [i for i in self.instances.values() if i.region == region]

    def get(self, region: str, instance_ids: list[str]) -> list[Instance]:
        found = []
        for instance_id in dict.fromkeys(instance_ids):
            rec = self.instances.get(instance_id)
            if rec is None or rec.region != region:
                raise ApiError("InvalidInstanceId.NotFound", f"The instance `{instance_id}` does not exist.")
            found.append(rec)
        return found

    def replay(self, client_token: str) -> list[str] | None:
        """The InstanceIdSet of an earlier RunInstances with this ClientToken (§9.1: the emulator answers a replay
        with the original ids, whatever the other parameters say)."""
        return self.client_tokens.get(client_token)

    # -- RunInstances ------------------------------------------------------------------------------------
    def run_instances(self, spec: LaunchSpec, client_token: str, request_id: str, dry_run: bool) -> list[str]:
        """Launch, or with ``dry_run`` only check everything a launch checks (stock included) and launch nothing."""
        now = self.clock.now()
        os_name, platform, tree = self.images.launchable(spec.region, spec.image_id)
        count = self._deliverable(spec)
        self._check_quotas(spec, count)
        needed = count * (spec.upfront_fen if spec.charge_type == PREPAID else spec.price_fen_per_hour)
        if self.billing.balance(now)["real"] < needed:
            raise ApiError("InvalidAccount.InsufficientBalance", "The account balance cannot pay for these instances.")
        addresses = self._addresses(spec, count)
        if dry_run:
            return []
        ids = []
        for index in range(count):
            rec = self._new_instance(spec, index, addresses[index], os_name, platform, request_id, now)
            self.instances[rec.instance_id] = rec
            if rec.launch_failure is None:
                rec.disk_ready_at = self.host.provision(
                    rec.instance_id, rec.local_disks, os_name, rec.host_name, tree
                )
            else:
                rec.disk_ready_at = now
            self.stock.take(rec.zone, rec.instance_type, rec.charge_type)
            self.billing.open(rec.billing_id, rec.charge_type, rec.price_fen_per_hour, now, spec.upfront_fen)
            if spec.action_time is not None:
                self._add_timer(rec, spec.action_time)
            ids.append(rec.instance_id)
        if client_token:
            self.client_tokens[client_token] = ids
        return ids

    def check_price(self, spec: LaunchSpec) -> None:
        """What InquiryPriceRunInstances checks besides the request itself: the image and the stock."""
        self.images.launchable(spec.region, spec.image_id)
        self._deliverable(spec)

    def _deliverable(self, spec: LaunchSpec) -> int:
        """How many to launch: InstanceCount, or with MinCount as many as the stock allows down to MinCount."""
        available = self.stock.available(spec.zone, spec.itype.name, spec.charge_type)
        if available >= spec.count:
            return spec.count
        if available == 0:
            raise ApiError(
                "ResourcesSoldOut.SpecifiedInstanceType", f"{spec.itype.name} is sold out in {spec.zone}."
            )
        if spec.min_count < spec.count:
            if available >= spec.min_count:
                return available
            raise ApiError(
                "ResourceInsufficient.InsufficientOfferingMinimum",
                f"Only {available} {spec.itype.name} left in {spec.zone}, fewer than MinCount {spec.min_count}.",
            )
        raise ApiError(
            "ResourceInsufficient.SpecifiedInstanceType",
            f"Only {available} {spec.itype.name} left in {spec.zone} for {spec.charge_type}.",
        )

    def _check_quotas(self, spec: LaunchSpec, count: int) -> None:
        """The account's spot vCPU quota in the zone, and the room left in the HPC cluster named."""
        if spec.charge_type == SPOTPAID:
            self.quotas.check_spot(self.instances.values(), spec.zone, spec.itype, count)
        if spec.hpc_cluster_id:
            cluster = self.hpc.get(spec.region, spec.hpc_cluster_id)
            check_room(cluster, len(members(self.instances.values(), cluster.cluster_id)), count)

    def _addresses(self, spec: LaunchSpec, count: int) -> list[str]:
        used = {i.vpc_ip for i in self.instances.values() if i.subnet_id == spec.subnet.subnet_id}
        if spec.private_ips:
            taken = [ip for ip in spec.private_ips if ip in used]
            if taken:
                raise ApiError("VpcIpIsUsed", f"The private address {taken[0]} is in use.")
            return spec.private_ips
        free = []
        # The subnet's first host address is its gateway. Walked, not listed: a /16 has 65 534 of them, and listing
        # them for every RunInstances was a twentieth of a busy emulator's CPU.
        for host in itertools.islice(ipaddress.ip_network(spec.subnet.cidr).hosts(), 1, None):
            if str(host) not in used:
                free.append(str(host))
                if len(free) == count:
                    return free
        raise ApiError("FailedOperation.NoAvailableIpAddressCountInSubnet", f"{spec.subnet.subnet_id} is full.")

    def _new_instance(
        self, spec: LaunchSpec, index: int, vpc_ip: str, os_name: str, platform: str, request_id: str, now: float,
    ) -> Instance:
        instance_id = new_id("ins")
        while instance_id in self.instances or instance_id in self.gone:
            instance_id = new_id("ins")
        octets = vpc_ip.split(".")
        data_disks = [
            {**d, "DiskId": new_id("ldisk" if d["DiskType"].startswith("LOCAL") else "disk")}
            for d in spec.data_disks
        ]
        return Instance(
            instance_id=instance_id,
            uuid=str(uuid.uuid4()),
            region=spec.region,
            zone=spec.zone,
            instance_type=spec.itype.name,
            charge_type=spec.charge_type,
            image_id=spec.image_id,
            os_name=os_name,
            platform=platform,
            name=spec.names[index],
            host_name=spec.host_names[index] if spec.host_names else f"VM-{octets[2]}-{octets[3]}-{platform.lower()}",
            created_at=now,
            price_fen_per_hour=spec.price_fen_per_hour,
            secret=random_token(24),
            vpc_id=spec.subnet.vpc_id,
            subnet_id=spec.subnet.subnet_id,
            vpc_ip=vpc_ip,
            security_group_ids=spec.security_group_ids,
            system_disk={**spec.system_disk, "DiskId": new_id("disk")},
            data_disks=data_disks,
            internet=spec.internet,
            local_disks=sum(1 for d in spec.data_disks if d["DiskType"] == "LOCAL_NVME"),
            tags=spec.tags,
            user_data=spec.user_data,
            cam_role=spec.cam_role,
            disable_api_termination=spec.disable_api_termination,
            prepaid_period=spec.prepaid_period,
            renew_flag=spec.renew_flag,
            expired_at=add_months(now, spec.prepaid_period) if spec.charge_type == PREPAID else None,
            due_at=now + self.config.boot_seconds,
            latest_operation_request_id=request_id,
            launch_failure=self.faults.launch_failure(spec.zone, spec.itype.name, spec.charge_type),
            gpus=self.gpus.assign(instance_id, spec.itype.gpu_count),
            hpc_cluster_id=spec.hpc_cluster_id,
        )

    # -- actions on instances ----------------------------------------------------------------------------
    def terminate(self, region: str, instance_ids: list[str], request_id: str) -> None:
        """Postpaid and spot: TERMINATING, then gone. Prepaid: the first call isolates to the recycle bin
        (SHUTDOWN), the second destroys (§2.4). All checks pass before anything changes."""
        now = self.clock.now()
        recs = self.get(region, instance_ids)
        for rec in recs:
            if rec.state not in (RUNNING, STOPPED, SHUTDOWN):
                raise state_error(rec)
        if len({rec.charge_type for rec in recs}) > 1:
            raise ApiError(
                "UnsupportedOperation.InstanceMixedPricingModel", "The instances do not share one charge type."
            )
        for rec in recs:
            if rec.disable_api_termination:
                raise ApiError(
                    "UnsupportedOperation.InstancesProtected", f"`{rec.instance_id}` has termination protection on."
                )
        for rec in recs:
            self._operation(rec, "TerminateInstances", request_id)
            if rec.charge_type == PREPAID and rec.state != SHUTDOWN:
                self._isolate(rec, now)
            else:
                self._begin_termination(rec, now)

    def stop(self, region: str, instance_ids: list[str], hard: bool, stopped_mode: str, request_id: str) -> None:
        now = self.clock.now()
        recs = self.get(region, instance_ids)
        for rec in recs:
            if rec.state != RUNNING:
                raise state_error(rec)
            # "Only valid for some pay-as-you-go instances using cloud disks" (StopInstances docstring).
            if stopped_mode == STOP_CHARGING and (rec.charge_type != POSTPAID or rec.local_disks):
                raise ApiError(
                    "UnsupportedOperation.StoppedModeStopCharging",
                    f"`{rec.instance_id}` cannot stop without charging: only pay-as-you-go cloud-disk instances can.",
                )
        for rec in recs:
            self._operation(rec, "StopInstances", request_id)
            rec.state, rec.due_at = STOPPING, now + self.config.stop_seconds
            rec.stopped_mode, rec.kill_grace = stopped_mode, 0.0 if hard else None

    def start(self, region: str, instance_ids: list[str], request_id: str) -> None:
        """A STOP_CHARGING instance gave its capacity back when it stopped, so starting it needs stock again."""
        now = self.clock.now()
        recs = self.get(region, instance_ids)
        for rec in recs:
            if rec.state != STOPPED:
                raise state_error(rec)
        for rec in recs:
            if not rec.holds_capacity and self.stock.available(rec.zone, rec.instance_type, rec.charge_type) < 1:
                raise ApiError(
                    "ResourceInsufficient.SpecifiedInstanceType",
                    f"No {rec.instance_type} is left in {rec.zone} to start `{rec.instance_id}` on.",
                )
        for rec in recs:
            if not rec.holds_capacity:
                self.stock.take(rec.zone, rec.instance_type, rec.charge_type)
                rec.holds_capacity = True
                rec.gpus = self.gpus.assign(rec.instance_id, INSTANCE_TYPES_BY_NAME[rec.instance_type].gpu_count)
                rec.billing_segment += 1
                self.billing.open(rec.billing_id, rec.charge_type, rec.price_fen_per_hour, now)
            self._operation(rec, "StartInstances", request_id)
            rec.state, rec.due_at = STARTING, now + self.config.stop_seconds

    def reboot(self, region: str, instance_ids: list[str], hard: bool, request_id: str) -> None:
        now = self.clock.now()
        recs = self.get(region, instance_ids)
        for rec in recs:
            if rec.state != RUNNING:
                raise state_error(rec)
        for rec in recs:
            self._operation(rec, "RebootInstances", request_id)
            rec.state, rec.due_at, rec.kill_grace = REBOOTING, now + self.config.stop_seconds, 0.0 if hard else None

    def reinstall(self, region: str, instance_id: str, image_id: str | None, user_data: str | None,
                  disk_size: int | None, request_id: str) -> None:
        """Re-image the system disk (a public image: empty; a custom one: its tree) and boot like a fresh
        instance: the UserData (the new one if given) runs again."""
        now = self.clock.now()
        (rec,) = self.get(region, [instance_id])
        if rec.state not in (RUNNING, STOPPED):
            raise state_error(rec)
        if rec.state == STOPPED and not rec.holds_capacity:
            raise ApiError("UnsupportedOperation.StoppedModeStopCharging", "Start the instance before resetting it.")
        if self.images.creating_from(instance_id):
            raise ApiError("OperationDenied.InstanceOperationInProgress", "An image is being created from it.")
        image_id = image_id or rec.image_id
        os_name, platform, tree = self.images.launchable(region, image_id)
        if disk_size is not None:
            if disk_size < rec.system_disk["DiskSize"]:
                raise ApiError("InvalidParameterValue", "ResetInstance can grow the system disk, never shrink it.")
            rec.system_disk["DiskSize"] = disk_size
        if user_data is not None:
            rec.user_data = user_data
        self.host.power_off(instance_id)
        rec.image_id, rec.os_name, rec.platform = image_id, os_name, platform
        rec.disk_ready_at = self.host.provision(instance_id, rec.local_disks, os_name, rec.host_name, tree)
        self._operation(rec, "ResetInstance", request_id)
        rec.state, rec.due_at, rec.user_data_pending = REBOOTING, now + self.config.boot_seconds, True

    # -- images ------------------------------------------------------------------------------------------
    def create_image(
        self, region: str, instance_id: str, name: str, description: str, tags: list[dict[str, str]],
        request_id: str, dry_run: bool,
    ) -> Image | None:
        (rec,) = self.get(region, [instance_id])
        if rec.state not in (RUNNING, STOPPED):
            raise state_error(rec)
        if self.images.creating_from(instance_id):
            raise ApiError("OperationDenied.InstanceOperationInProgress", "An image is being created from it.")
        if dry_run:
            self.images.check_new(region, name)
            return None
        system = self.host.sandbox(instance_id).system
        image = self.images.create(rec, rec.platform, system, name, description, tags, request_id, self.clock.now())
        self._operation(rec, "CreateImage", request_id)
        return image

    # -- action timers -----------------------------------------------------------------------------------
    def import_timers(self, region: str, instance_ids: list[str], action_time: float) -> list[str]:
        recs = self.get(region, instance_ids)
        for rec in recs:
            if rec.state in (TERMINATING, LAUNCH_FAILED):
                raise ApiError(
                    "UnsupportedOperation.NotSupportImportInstancesActionTimer",
                    f"`{rec.instance_id}` is {rec.state}: it takes no timer.",
                )
            if self._undo_timer(rec.instance_id) is not None:
                raise ApiError("FailedOperation.MutActionTimerExist", f"`{rec.instance_id}` has a timer already.")
        return [self._add_timer(rec, action_time).timer_id for rec in recs]

    def delete_timers(self, region: str, timer_ids: list[str]) -> None:
        for timer_id in timer_ids:
            timer = self.timers.get(timer_id)
            if timer is None or timer.region != region:
                raise ApiError("InvalidParameterValue", f"The action timer `{timer_id}` does not exist.")
            if timer.status != "UNDO":
                raise ApiError("InvalidParameterValue", f"The action timer `{timer_id}` is {timer.status}.")
        for timer_id in timer_ids:
            del self.timers[timer_id]

    def _add_timer(self, rec: Instance, action_time: float) -> ActionTimer:
        timer = ActionTimer(new_id("at"), rec.instance_id, rec.region, action_time)
        self.timers[timer.timer_id] = timer
        return timer

    def _undo_timer(self, instance_id: str) -> ActionTimer | None:
        index = self._timers_by_instance
        timers = index.get(instance_id, []) if index is not None else self.timers.values()
        return next((t for t in timers if t.instance_id == instance_id and t.status == "UNDO"), None)

    # -- time --------------------------------------------------------------------------------------------
    def tick(self, now: float) -> bool:
        changed = False
        for image in self.images.tick(now):
            changed = True
            rec = self.instances.get(image.source_instance_id)
            if rec is not None and rec.latest_operation_request_id == image.request_id:
                rec.latest_operation_state = SUCCESS if image.state == "NORMAL" else FAILED
                rec.latest_operation_error = image.error
        # The timers indexed by instance for this tick: every instance has its ActionTimer, and looking each one up
        # among all of them made a tick O(n^2) (seconds of CPU a second with a thousand instances, ticking 20 times a
        # second and on every API call). The same objects: a timer fired in this tick reads DONE at once.
        self._timers_by_instance = {}
        for timer in self.timers.values():
            self._timers_by_instance.setdefault(timer.instance_id, []).append(timer)
        try:
            for rec in list(self.instances.values()):
                while rec.instance_id in self.instances and self._step(rec, now):
                    changed = True
        finally:
            self._timers_by_instance = None
        changed = self._reconcile() or changed
        self._publish_reach()
        self.host.reap()
        return changed

    def _publish_reach(self) -> None:
        """Each running instance's table of what it may connect to of the others (runtime/netfilter.py), rewritten
        when an instance starts or stops running or a group's rules change."""
        if self.host.reach_library is None or not self.host.run_user_data:
            return
        running = {rec.instance_id: rec for rec in self.instances.values() if rec.state == RUNNING}
        signature = (tuple((i, tuple(r.security_group_ids)) for i, r in sorted(running.items())),
                     tuple(sorted((g.group_id, g.version) for g in self.security_groups.groups.values())))
        if signature == self._reach_signature:
            return
        self._reach_signature = signature
        members = {i: Member(r.vpc_ip, r.vpc_id, tuple(r.security_group_ids)) for i, r in running.items()}
        for instance_id, rec in running.items():
            def rules(group: str, region: str = rec.region) -> tuple[list[Policy], list[Policy]] | None:
                return self.security_groups.rules(region, group)

            table = [(rec.address, 1, 65535)] + [
                (running[other].address, low, high) for other, member in members.items() if other != instance_id
                for low, high in tcp_ports(members[instance_id], member, rules)]
            self.host.write_reach(instance_id, table)

    def _step(self, rec: Instance, now: float) -> bool:
        """Apply the record's earliest event due by ``now``, at its own time."""
        self._collect_disk(rec)
        events: list[tuple[float, Callable[[Instance, float], None]]] = []
        if rec.state in (PENDING, STARTING, REBOOTING) and rec.due_at is not None and rec.disk_ready_at is not None:
            events.append((max(rec.due_at, rec.disk_ready_at), self._finish_boot))
        elif rec.state == STOPPING and rec.due_at is not None:
            events.append((rec.due_at, self._finish_stop))
        elif rec.state in (TERMINATING, LAUNCH_FAILED) and rec.due_at is not None:
            events.append((rec.due_at, self._release))
        if rec.state not in (TERMINATING, LAUNCH_FAILED):
            if rec.random_notice_at is not None and rec.notice_at is None:
                events.append((rec.random_notice_at, self._give_notice))
            if rec.reclaim_at is not None:
                events.append((rec.reclaim_at, self._begin_termination))
            timer = self._undo_timer(rec.instance_id)
            if timer is not None:
                events.append((timer.action_time, self._fire_timer))
        if not events:
            return False
        when, apply = min(events, key=lambda event: event[0])
        if when > now:
            return False
        apply(rec, when)
        return True

    def _collect_disk(self, rec: Instance) -> None:
        if rec.disk_ready_at is not None:
            return
        job = self.host.finished_copy(rec.instance_id)
        if job is None:
            return
        assert job.finished_at is not None
        rec.disk_ready_at = job.finished_at
        if job.error:
            if rec.state == PENDING:
                rec.launch_failure = f"creating the system disk from {rec.image_id} failed: {job.error}"
            else:
                rec.latest_operation_state, rec.latest_operation_error = FAILED, job.error

    def _finish_boot(self, rec: Instance, when: float) -> None:
        if rec.state == PENDING and rec.launch_failure is not None:
            rec.state, rec.due_at = LAUNCH_FAILED, when + LAUNCH_FAILED_VISIBLE_SECONDS
            rec.latest_operation_state, rec.latest_operation_error = FAILED, rec.launch_failure
            self.billing.stop(rec.billing_id, when)
            self._give_back_capacity(rec)
            return
        rec.state, rec.due_at, rec.boot_pending = RUNNING, None, True
        if rec.latest_operation_state == OPERATING:
            rec.latest_operation_state = SUCCESS
        self.billing.start(rec.billing_id, when)
        if rec.first_running_at is None:
            rec.first_running_at = when
            delay = spot.reclaim_delay(self.config.seed, rec.instance_id, self.config.spot_reclaim_rate)
            if rec.charge_type == SPOTPAID and delay is not None:
                rec.random_notice_at = when + delay

    def _finish_stop(self, rec: Instance, when: float) -> None:
        rec.state, rec.due_at, rec.latest_operation_state = STOPPED, None, SUCCESS
        if rec.stopped_mode == STOP_CHARGING:
            self.billing.stop(rec.billing_id, when)
            self._give_back_capacity(rec)

    def _give_notice(self, rec: Instance, when: float) -> None:
        rec.notice_at, rec.reclaim_at = when, when + self.config.spot_notice_seconds

    def _fire_timer(self, rec: Instance, when: float) -> None:
        """ActionTimer termination skips the recycle bin, prepaid or not (console doc, §2.4)."""
        timer = self._undo_timer(rec.instance_id)
        assert timer is not None
        timer.status = "DONE"
        self._begin_termination(rec, when)

    def _isolate(self, rec: Instance, when: float) -> None:
        rec.state, rec.due_at, rec.isolated_source = SHUTDOWN, None, "MANMADE"
        rec.latest_operation_state = SUCCESS
        self.billing.stop(rec.billing_id, when)

    def _begin_termination(self, rec: Instance, when: float) -> None:
        rec.state, rec.due_at = TERMINATING, when + self.config.terminate_seconds
        self.billing.stop(rec.billing_id, when)

    def _release(self, rec: Instance, when: float) -> None:
        del self.instances[rec.instance_id]
        self.gone[rec.instance_id] = Gone(rec.instance_id, rec.region, when)
        self.host.destroy(rec.instance_id)
        self._give_back_capacity(rec)
        self.timers = {
            k: t for k, t in self.timers.items() if not (t.instance_id == rec.instance_id and t.status == "UNDO")
        }

    def _give_back_capacity(self, rec: Instance) -> None:
        if rec.holds_capacity:
            self.stock.give_back(rec.zone, rec.instance_type, rec.charge_type)
            rec.holds_capacity = False
        self.gpus.release(rec.instance_id)
        rec.gpus = []

    def _operation(self, rec: Instance, action: str, request_id: str) -> None:
        rec.latest_operation, rec.latest_operation_state = action, OPERATING
        rec.latest_operation_request_id, rec.latest_operation_error = request_id, ""

    def _reconcile(self) -> bool:
        """Processes follow the records: a RUNNING instance boots once its previous boot is gone; any other
        state is powered off."""
        changed = False
        for rec in self.instances.values():
            instance_id = rec.instance_id
            # A RUNNING instance whose next boot waits while the previous one lives: its power-off is under way,
            # or a clock jump went over the whole REBOOTING period between two ticks and it is due now.
            if rec.state != RUNNING or (rec.boot_pending and self.host.running(instance_id)):
                if rec.kill_grace is None:
                    self.host.power_off(instance_id)
                else:
                    self.host.power_off(instance_id, rec.kill_grace)
            elif rec.boot_pending:
                if not self.host.run_user_data:
                    # Load-test mode: the boot happens with nothing in it (its UserData counts as run: switching
                    # back does not start it later, as a real cloud-init would not run it twice).
                    rec.boot_pending, rec.user_data_pending, rec.kill_grace = False, False, None
                    changed = True
                    continue
                run_user_data = rec.user_data_pending and bool(rec.user_data)
                rec.pgid = self.host.boot(
                    instance_id, rec.local_disks, rec.secret, rec.gpus,
                    base64.b64decode(rec.user_data) if run_user_data else None,
                )
                rec.boot_pending, rec.user_data_pending, rec.kill_grace = False, False, None
                changed = True
        return changed

    # -- spot market -----------------------------------------------------------------------------------
    def reclaim(self, instance_id: str, notice_seconds: float | None) -> Instance:
        """The spot market takes a SPOTPAID instance back: a notice now and death ``notice_seconds`` later, or
        (None) death at once."""
        rec = self.instances.get(instance_id)
        if rec is None:
            raise KeyError(f"no live instance {instance_id}")
        if rec.charge_type != SPOTPAID:
            raise ValueError(f"{instance_id} is {rec.charge_type}: only SPOTPAID instances are reclaimed")
        if rec.state in (TERMINATING, LAUNCH_FAILED) or rec.reclaim_at is not None:
            raise ValueError(f"{instance_id} is {rec.state} and already on its way out")
        now = self.clock.now()
        if notice_seconds is None:
            rec.reclaim_at = now
            self._begin_termination(rec, now)
        else:
            rec.notice_at, rec.reclaim_at = now, now + notice_seconds
        return rec

    # -- persistence -------------------------------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        return {
            "instances": [dump(i) for i in self.instances.values()],
            "gone": [dump(g) for g in self.gone.values()],
            "client_tokens": self.client_tokens,
            "timers": [dump(t) for t in self.timers.values()],
            "stock": self.stock.to_state(),
            "quotas": self.quotas.to_state(),
            "hpc_clusters": self.hpc.to_state(),
            "images": self.images.to_state(),
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Instances come back as after a reboot: RUNNING ones boot again (their per-boot scripts run), a disk
        copy cut short starts over. After a crash (no orderly shutdown) what the instances left running is killed
        and the disks of released instances that were not deleted yet are."""
        self.images.restore(state.get("images", []))
        self.stock.restore(state.get("stock", []))
        self.quotas.restore(state.get("quotas", {}))
        self.hpc.restore(state.get("hpc_clusters", []))
        self.client_tokens = {k: list(v) for k, v in state.get("client_tokens", {}).items()}
        self.timers = {t.timer_id: t for t in (load(ActionTimer, d) for d in state.get("timers", []))}
        self.gone = {g.instance_id: g for g in (load(Gone, d) for d in state.get("gone", []))}
        for instance_id in self.gone:
            if self.host.sandbox(instance_id).path.exists():
                self.host.destroy(instance_id)
        for item in state.get("instances", []):
            rec = load(Instance, item)
            self.instances[rec.instance_id] = rec
            if rec.pgid is not None:
                self.host.power_off_stray(rec.instance_id, rec.pgid)
            if rec.gpus:
                rec.gpus = self.gpus.restore(rec.instance_id, rec.gpus)
            if rec.state == RUNNING:
                rec.boot_pending = True
            if rec.disk_ready_at is None:
                self._reprovision(rec)

    def _reprovision(self, rec: Instance) -> None:
        try:
            _, _, tree = self.images.launchable(rec.region, rec.image_id)
        except ApiError as exc:
            rec.launch_failure, rec.disk_ready_at = exc.message, self.clock.now()
            return
        rec.disk_ready_at = self.host.provision(rec.instance_id, rec.local_disks, rec.os_name, rec.host_name, tree)

    def shutdown(self) -> None:
        self.host.shutdown()
        self.images.shutdown()
