"""Where synced data lives: the first local NVMe disk when the instance has one, else the system disk.

- A host that lists its local disks as folders (the emulator; host.py): the first of them, if any.
- Tencent Cloud: an already-mounted ``/dev/nvme*n1`` is used as it is. Otherwise, only when running as root, the
  first whole NVMe namespace that carries no partition, no filesystem and no mount is formatted (ext4, label
  ``cvmjob-nvme``) and mounted at /mnt/cvmjob-nvme; after a reboot a disk with that label is mounted again
  without formatting. Anything else (not root, no device, a device in use, a missing tool, a failing command)
  means "no local NVMe": the data goes to the system disk and the reason is logged.
Only the first disk is used; striping several is left for later.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from pathlib import Path

from .host import current
from .paths import cvmjob_dir

log = logging.getLogger(__name__)

LABEL = "cvmjob-nvme"
MOUNT_POINT = Path("/mnt/cvmjob-nvme")
_NVME_DEVICE = re.compile(r"/dev/nvme[0-9]+n[0-9]+(p[0-9]+)?")


def data_root(job_id: str) -> Path:
    """The folder the job's data targets live under: it outlives the job's attempts on the same instance, and
    belongs to that job alone (a reserved-pool instance serves one job after another)."""
    return _data_parent() / job_id


def on_system_disk() -> bool:
    """The data lives on the system disk (no local NVMe), so a custom image would copy it."""
    return local_nvme() is None


def _data_parent() -> Path:
    disk = local_nvme()
    return disk / "cvmjob" / "data" if disk is not None else cvmjob_dir() / "data"


def remove_other_jobs_data(job_id: str) -> list[str]:
    """Delete what earlier jobs left on this instance's data disk: a job sees none of another job's data.
    Returns the job ids whose data was removed."""
    parent = _data_parent()
    removed = []
    if parent.is_dir():
        for entry in parent.iterdir():
            if entry.name != job_id:
                shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(missing_ok=True)
                removed.append(entry.name)
    return removed


def local_nvme() -> Path | None:
    listed = current().local_disks
    if listed is not None:
        return listed[0] if listed else None
    mounts = Path("/proc/mounts").read_text() if Path("/proc/mounts").exists() else ""
    return mounted_nvme(mounts) or _prepare_unused_nvme(mounts)


def _unescape(field: str) -> str:
    """/proc/mounts writes spaces and a few other characters as octal escapes (\\040)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), field)


def mounted_nvme(mounts: str) -> Path | None:
    """The mount point of the first mounted NVMe device that is not the root or boot filesystem."""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 2 or not _NVME_DEVICE.fullmatch(fields[0]):
            continue
        point = _unescape(fields[1])
        if point != "/" and not point.startswith("/boot"):
            return Path(point)
    return None


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=600, check=False)


def _prepare_unused_nvme(mounts: str) -> Path | None:
    if os.geteuid() != 0:
        return None
    devices = sorted(p for p in Path("/dev").glob("nvme*n1") if _NVME_DEVICE.fullmatch(str(p)))
    mounted = {line.split()[0] for line in mounts.splitlines() if line.split()}
    try:
        for device in devices:
            name = device.name
            if str(device) in mounted or any(Path("/sys/block", name).glob(f"{name}p*")):
                continue  # mounted, or partitioned: someone else's disk
            probe = _run("blkid", "-p", "-o", "value", "-s", "LABEL", str(device))
            if probe.returncode == 0 and probe.stdout.strip() != LABEL:
                continue  # a filesystem (or RAID/LVM member) that is not ours
            if probe.returncode not in (0, 2):  # 2: no signature found
                continue
            if probe.returncode == 2:
                made = _run("mkfs.ext4", "-q", "-F", "-L", LABEL, "-E", "lazy_itable_init=1,lazy_journal_init=1",
                            str(device))
                if made.returncode != 0:
                    log.warning("local NVMe: mkfs.ext4 %s failed: %s", device, made.stderr.strip())
                    return None
            MOUNT_POINT.mkdir(parents=True, exist_ok=True)
            mount = _run("mount", "-o", "noatime", str(device), str(MOUNT_POINT))
            if mount.returncode != 0:
                log.warning("local NVMe: mount %s failed: %s", device, mount.stderr.strip())
                return None
            log.info("local NVMe: %s mounted at %s", device, MOUNT_POINT)
            return MOUNT_POINT
    except (OSError, subprocess.SubprocessError) as exc:  # a missing blkid/mkfs/mount: no NVMe, not an error
        log.warning("local NVMe: not prepared (%s)", exc)
    return None
