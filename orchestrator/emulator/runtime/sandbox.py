"""An emulated instance on the host: its disks as directories, and how it boots.

Layout, under ``<state-dir>/instances/<instance-id>/``:
  ``system/``   the system disk, the instance's "/" (an emulated instance cannot chroot): ``root/`` is HOME,
                ``tmp/``, ``etc/``, ``var/log/cloud-init-output.log``, ``var/lib/cloud/...``
  ``nvme0/`` …  local NVMe disks, for types that have them (HCCPNV4h); they are not part of images.

Boot, as cloud-init boots a Tencent public Linux image (shared/reference/tencent-cloud-api.md §5, "User-data and
cloud-init"; cloud-init's scripts-per-boot and scripts-user modules). Each boot runs one shell as the leader of a
new process group (see processes.py), stdout and stderr appended to ``system/var/log/cloud-init-output.log``, cwd
HOME:
  1. at every boot, every executable file in ``system/var/lib/cloud/scripts/per-boot/``, in name order (like
     cloud-init, a non-executable file is skipped with a line in the log). That includes the first boot of an
     instance launched from a custom image: the image is a copy of the system disk, per-boot directory and all, so
     whatever per-boot scripts the imaged instance had run on the new instance too;
  2. on the instance's first boot, and on the first boot after ResetInstance, the UserData (base64-decoded into
     ``system/var/lib/cloud/instance/user-data.txt``; after ResetInstance the new UserData if one was given):
     executed directly when it starts with ``#!``, as cloud-init runs a user script, otherwise with ``bash``.
     ``#cloud-config`` documents are not interpreted.
Later boots (StartInstances, RebootInstances, an emulator restart) run only the per-boot scripts.

The environment, a contract the orchestrator's agent relies on (nothing is inherited from the emulator):
  PATH        ``dirname(image_python)`` first, then /usr/local/bin:/usr/bin:/bin: ``python3`` on the instance is
              the emulator's interpreter and its packages, standing in for the image's software
  HOME        ``<system>/root``;  LANG ``C.UTF-8``;  TMPDIR ``<system>/tmp``
  HTTP_PROXY, http_proxy, HTTPS_PROXY, https_proxy   ``http://<instance-id>:<secret>@127.0.0.1:<port>``: the
              emulator is the instance's only way out, and it reaches no host of the internet but Tencent's
              mirror (mirror.py). Unmodified clients (the SDK's CVMRoleCredential, curl, urllib, requests) reach
              ``http://metadata.tencentyun.com/...`` through it, and the metadata service knows the instance by
              the proxy credentials. API 3.0 and COS calls to the endpoint go through it too (it serves them);
              COS of another region only when the instance has a public IP (server.py).
  NO_PROXY, no_proxy       empty
  TENCENTCLOUD_EMULATOR_ENDPOINT     ``127.0.0.1:<port>``: API 3.0 and COS, for tools that take an endpoint
  TENCENTCLOUD_EMULATOR_ROOT         ``<system>``: software needing absolute paths resolves them under it
  TENCENTCLOUD_EMULATOR_LOCAL_DISKS  comma-separated local NVMe directories ("" when none)
  CUDA_VISIBLE_DEVICES               the real devices lent to the instance ("" when none, see gpus.py)
  TENCENTCLOUD_EMULATOR_GPUS         the same list, or ``cpu-only``
  LD_PRELOAD, TENCENTCLOUD_EMULATOR_REACH   the security groups between instances: connect() to another
              instance's address passes only where its ``reach`` table says (netfilter.py; unset without a C
              compiler)
"""

from __future__ import annotations

import os
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from ..mirror import APT_GET
from .processes import ProcessGroup

SKELETON = (
    "root",
    "tmp",
    "etc",
    "home",
    "mnt",
    "usr/local/bin",
    "usr/bin",
    "var/log",
    "var/lib/cloud/instance",
    "var/lib/cloud/scripts/per-boot",
)

# $1 is "1" when this boot runs the UserData. exec keeps the user script as the group leader.
BOOT_SCRIPT = r"""
root="$TENCENTCLOUD_EMULATOR_ROOT"
echo "cloud-init: boot at $(date -u +%Y-%m-%dT%H:%M:%SZ)"
for script in "$root"/var/lib/cloud/scripts/per-boot/*; do
  [ -e "$script" ] || continue
  if [ -f "$script" ] && [ -x "$script" ]; then
    echo "cloud-init: running per-boot script ${script##*/}"
    "$script" || echo "cloud-init: per-boot script ${script##*/} exited with $?"
  else
    echo "cloud-init: skipping non-executable per-boot script ${script##*/}"
  fi
done
if [ "$1" = 1 ]; then
  user_data="$root/var/lib/cloud/instance/user-data.txt"
  echo "cloud-init: running user data"
  if [ "$(head -c 2 "$user_data")" = "#!" ]; then
    exec "$user_data"
  fi
  exec bash "$user_data"
fi
"""


@dataclass(frozen=True)
class BootContext:
    """What a boot needs besides the disks."""

    instance_id: str
    secret: str  # the instance's proxy password: proves to the metadata service which instance asks
    endpoint: str  # host:port of the emulator
    image_python: str
    gpus: tuple[int, ...]
    user_data: bytes | None  # None: not a UserData boot
    reach_library: Path | None = None  # the security groups' preload library (netfilter.py); None: not enforced


@dataclass(frozen=True)
class Sandbox:
    path: Path
    local_disk_count: int = 0

    @property
    def system(self) -> Path:
        return self.path / "system"

    @property
    def home(self) -> Path:
        return self.system / "root"

    @property
    def user_data_file(self) -> Path:
        return self.system / "var/lib/cloud/instance/user-data.txt"

    @property
    def output_log(self) -> Path:
        return self.system / "var/log/cloud-init-output.log"

    @property
    def local_disks(self) -> list[Path]:
        return [self.path / f"nvme{i}" for i in range(self.local_disk_count)]

    def create_local_disks(self) -> None:
        for disk in self.local_disks:
            disk.mkdir(parents=True, exist_ok=True)

    def create_system(self, os_name: str, host_name: str) -> None:
        """A fresh public-image system disk."""
        for sub in SKELETON:
            (self.system / sub).mkdir(parents=True, exist_ok=True)
        (self.system / "tmp").chmod(0o1777)
        (self.system / "etc/hostname").write_text(host_name + "\n")
        (self.system / "etc/os-release").write_text(f'PRETTY_NAME="{os_name}"\nNAME="{os_name}"\n')
        apt = self.system / "usr/bin/apt-get"
        apt.write_text(APT_GET)
        apt.chmod(0o755)

    def retire_system(self) -> Path | None:
        """Move the system disk aside (to delete once nothing uses it); None when there is none."""
        if not self.system.exists():
            return None
        retired = self.path / f".retired-{uuid.uuid4().hex[:8]}"
        self.system.rename(retired)
        return retired

    def environment(self, ctx: BootContext) -> dict[str, str]:
        port = ctx.endpoint.rsplit(":", 1)[1]
        proxy = f"http://{ctx.instance_id}:{ctx.secret}@127.0.0.1:{port}"
        gpus = ",".join(str(i) for i in ctx.gpus)
        return {
            "PATH": f"{os.path.dirname(ctx.image_python)}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "TMPDIR": str(self.system / "tmp"),
            "HTTP_PROXY": proxy,
            "http_proxy": proxy,
            "HTTPS_PROXY": proxy,
            "https_proxy": proxy,
            "NO_PROXY": "",
            "no_proxy": "",
            "TENCENTCLOUD_EMULATOR_ENDPOINT": f"127.0.0.1:{port}",
            "TENCENTCLOUD_EMULATOR_ROOT": str(self.system),
            "TENCENTCLOUD_EMULATOR_LOCAL_DISKS": ",".join(str(d) for d in self.local_disks),
            "CUDA_VISIBLE_DEVICES": gpus,
            "TENCENTCLOUD_EMULATOR_GPUS": gpus or "cpu-only",
            **({} if ctx.reach_library is None else {
                "LD_PRELOAD": str(ctx.reach_library), "TENCENTCLOUD_EMULATOR_REACH": str(self.reach_table)}),
        }

    @property
    def reach_table(self) -> Path:
        """The other instances' addresses and ports this one may connect to (netfilter.py)."""
        return self.path / "reach"

    @property
    def marker(self) -> bytes:
        """The environment entry every process of this instance carries (children inherit it), whatever session
        or parent it ends up in."""
        return f"TENCENTCLOUD_EMULATOR_ROOT={self.system}".encode()

    def boot(self, ctx: BootContext) -> ProcessGroup:
        if ctx.user_data is not None:
            self.user_data_file.parent.mkdir(parents=True, exist_ok=True)
            self.user_data_file.write_bytes(ctx.user_data)
            self.user_data_file.chmod(0o700)
        self.home.mkdir(parents=True, exist_ok=True)
        self.output_log.parent.mkdir(parents=True, exist_ok=True)
        with self.output_log.open("ab") as log:  # the child keeps its own descriptor
            popen = subprocess.Popen(
                ["bash", "-c", BOOT_SCRIPT, "cloud-init", "1" if ctx.user_data is not None else "0"],
                cwd=self.home,
                env=self.environment(ctx),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        return ProcessGroup(popen, self.marker)
