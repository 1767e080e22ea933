"""The machines behind CVM's instance records: sandboxes, boots, power-offs and disk copies.

Called from the event-loop thread only. What blocks (a power-off's grace period, copying or deleting a disk tree)
runs in threads that touch only their own files and process groups; the model learns their outcome by polling
(``finished_copy``, ``running``), so records change only on the loop thread.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import netfilter
from .background import Background, remove_tree, set_aside
from .copytree import CopyJob
from .gpus import Gpu
from .processes import ProcessGroup, become_subreaper, group_members, reap_groups, reap_orphans
from .sandbox import BootContext, Sandbox

# SIGTERM first, like an ACPI power-off, then SIGKILL: enough for a trainer to write an emergency checkpoint
# marker, short enough for tests.
KILL_GRACE_SECONDS = 3.0
REAP_INTERVAL_SECONDS = 1.0


class Host:
    """The machine: it outlives resets (a reset empties it), and so do its GPUs (``devices``)."""

    def __init__(
        self, root: Path, endpoint: str, image_python: str, now: Callable[[], float], devices: tuple[Gpu, ...],
        background: Background,
    ) -> None:
        self.root = root
        self.endpoint = endpoint
        self.image_python = image_python
        self.devices = devices
        self._now = now
        self._background = background
        self._groups: dict[str, ProcessGroup] = {}
        # Groups of released instances, kept while they die so that ``describe`` can tell when they are dead.
        self._released: dict[str, ProcessGroup] = {}
        self._copies: dict[str, CopyJob] = {}
        self._last_reap = 0.0
        # The load-test switch (config.run_user_data, admin ``PUT settings``): False and a boot starts nothing, so a
        # thousand emulated instances cost no processes. It belongs to the machine: a reset keeps it.
        self.run_user_data = True
        root.mkdir(parents=True, exist_ok=True)
        # The security groups between instances (netfilter.py); None: not enforced (no C compiler). Beside the
        # instances' root, which a reset replaces.
        self.reach_library = netfilter.build(root.parent)
        become_subreaper()

    def sandbox(self, instance_id: str, local_disks: int = 0) -> Sandbox:
        return Sandbox(self.root / instance_id, local_disks)

    # -- disks -------------------------------------------------------------------------------------------
    def provision(
        self, instance_id: str, local_disks: int, os_name: str, host_name: str, image_tree: Path | None
    ) -> float | None:
        """(Re)create the system disk: empty from a public image (now), or a copy of a custom image's tree (in
        the background). Returns the cloud time the disk was ready, None while the copy runs."""
        sandbox = self.sandbox(instance_id, local_disks)
        sandbox.create_local_disks()
        retired = sandbox.retire_system()
        if retired is not None:
            self._background.run(self._delete_after, self._groups.get(instance_id), retired)
        if image_tree is None:
            sandbox.create_system(os_name, host_name)
            return self._now()
        self._copies[instance_id] = CopyJob(image_tree, sandbox.system, self._now)
        return None

    def finished_copy(self, instance_id: str) -> CopyJob | None:
        """The instance's disk copy once it has finished (then forgotten); None while it runs or without one."""
        job = self._copies.get(instance_id)
        if job is None or not job.done:
            return None
        return self._copies.pop(instance_id)

    # -- processes ---------------------------------------------------------------------------------------
    def boot(self, instance_id: str, local_disks: int, secret: str, gpus: list[int], user_data: bytes | None) -> int:
        """Start a boot; returns its process group id."""
        ctx = BootContext(instance_id, secret, self.endpoint, self.image_python, tuple(gpus), user_data,
                          self.reach_library)
        group = self._groups[instance_id] = self.sandbox(instance_id, local_disks).boot(ctx)
        return group.pgid

    def write_reach(self, instance_id: str, reachable: list[tuple[str, int, int]]) -> None:
        """What the instance's processes may connect to of the other instances (netfilter.py)."""
        sandbox = self.sandbox(instance_id)
        if sandbox.path.is_dir():
            netfilter.write_table(sandbox.reach_table, reachable)

    def running(self, instance_id: str) -> bool:
        """Some process of the instance's last boot still lives, or its power-off has not finished: until then
        its killer may still signal every process carrying the instance's marker, which a next boot's carry too."""
        group = self._groups.get(instance_id)
        return group is not None and (group.powering_off() or group.alive())

    def power_off(self, instance_id: str, grace: float = KILL_GRACE_SECONDS) -> None:
        group = self._groups.get(instance_id)
        if group is not None and not group.killing:
            group.kill(grace)

    def destroy(self, instance_id: str) -> None:
        """Release: the process group dies, then the sandbox is deleted."""
        group = self._groups.pop(instance_id, None)
        if group is not None:
            self._released[instance_id] = group
        self._background.run(self._delete_after, group, self.root / instance_id, self._copies.pop(instance_id, None))

    def reap(self) -> None:
        now = time.monotonic()
        if now - self._last_reap >= REAP_INTERVAL_SECONDS:
            self._last_reap = now
            reap_groups(self._groups.values())
            reap_orphans(g.popen.pid for g in (*self._groups.values(), *self._released.values()))
            self._released = {i: g for i, g in self._released.items() if g.alive()}

    def describe(self, local_disks: dict[str, int], processes: bool = True) -> dict[str, dict[str, Any]]:
        """Sandbox paths and processes of instances (id -> its number of local disks), in one pass over /proc;
        without ``processes`` no pass (pid, pgid and alive are None): a sampler polling states twice a second per
        emulator read every /proc/<pid>/stat of the machine each time."""
        groups = {i: g for i in local_disks if (g := self._groups.get(i) or self._released.get(i)) is not None
                  } if processes else {}
        members = group_members(g.pgid for g in groups.values())
        described = {}
        for instance_id, disks in local_disks.items():
            sandbox = self.sandbox(instance_id, disks)
            group = groups.get(instance_id)
            described[instance_id] = {
                "sandbox": str(sandbox.path),
                "system": str(sandbox.system),
                "home": str(sandbox.home),
                "local_disks": [str(d) for d in sandbox.local_disks],
                "pid": group.popen.pid if group else None,
                "pgid": group.pgid if group else None,
                "alive": (group is not None and group.reap(members[group.pgid])) if processes else None,
            }
        return described

    def power_off_stray(self, instance_id: str, pgid: int) -> None:
        """Kill what a previous emulator that died without powering off left running of an instance's boot. The
        group must still hold this sandbox's processes: a reused group id is someone else's."""
        marker = f"TENCENTCLOUD_EMULATOR_ROOT={self.sandbox(instance_id).system}".encode()
        for pid, _ in group_members([pgid])[pgid]:
            try:
                environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if marker in environment:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
                return

    # -- the whole host ----------------------------------------------------------------------------------
    def shutdown(self, grace: float = KILL_GRACE_SECONDS) -> None:
        """Emulator exit: every instance powers off (they boot again on the next start), disk copies end."""
        groups = [*self._groups.values(), *self._released.values()]
        self._groups.clear()
        self._released.clear()
        for group in groups:
            group.kill(grace)
        for group in groups:
            group.join()
        for job in self._copies.values():
            job.join()

    def reset(self) -> None:
        """A new account: every instance dies at once and every sandbox goes. Disk copies finish first (a copy
        still running would recreate its directory in the new root); the deletion runs in the background."""
        for job in self._copies.values():
            job.join()
        groups = [*self._groups.values(), *self._released.values()]
        self._groups.clear()
        self._released.clear()
        self._copies.clear()
        trash = set_aside(self.root) if self.root.exists() else None
        self.root.mkdir(parents=True, exist_ok=True)
        for group in groups:
            group.kill(0)
        self._background.run(self._wipe, groups, trash)

    # -- background work ---------------------------------------------------------------------------------
    @staticmethod
    def _delete_after(group: ProcessGroup | None, path: Path, copy: CopyJob | None = None) -> None:
        if group is not None:
            group.kill(KILL_GRACE_SECONDS)
            group.join()
        if copy is not None:
            copy.join()
        remove_tree(path)

    @staticmethod
    def _wipe(groups: list[ProcessGroup], trash: Path | None) -> None:
        for group in groups:
            group.join()
        if trash is not None:
            remove_tree(trash)
