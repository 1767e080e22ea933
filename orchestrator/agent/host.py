"""What the host tells the agent about itself: where "/" is (and so where programs the instance installed are),
its local disks and its GPUs. The only module of the agent that reads it.

On Tencent Cloud the host says nothing: "/" is "/", local NVMe disks are found under /dev (nvme.py) and GPUs
through ``nvidia-smi`` (gpus.py). A sandboxed instance of the local emulator cannot chroot, so it says all three in
its environment; the rest of the agent asks here and never knows which of the two it runs on. The node's address
comes from the metadata service on both (rendezvous.py).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

_CPU_ONLY = "cpu-only"


@dataclass(frozen=True)
class Host:
    root: Path
    """The instance's "/"."""
    local_disks: tuple[Path, ...] | None
    """The local disks as folders, when the host lists them; None: look for NVMe devices."""
    gpus: tuple[str, ...] | None
    """The GPUs the instance got, when the host lists them (empty: none); None: ask nvidia-smi."""

    def program(self, name: str) -> str | None:
        """Where the instance has program ``name`` installed (one the image or the node's own installs put there,
        as the NVIDIA driver's nvidia-smi): PATH on Tencent Cloud, the usual folders under "/" on an emulated
        instance, whose PATH is the machine's."""
        if self.root == Path("/"):
            return shutil.which(name)
        folders = ("usr/local/sbin", "usr/local/bin", "usr/sbin", "usr/bin", "sbin", "bin")
        return shutil.which(name, path=os.pathsep.join(str(self.root / f) for f in folders))


def current() -> Host:
    env = os.environ
    root = env.get("TENCENTCLOUD_EMULATOR_ROOT")
    disks = env.get("TENCENTCLOUD_EMULATOR_LOCAL_DISKS")
    gpus = env.get("TENCENTCLOUD_EMULATOR_GPUS")
    return Host(
        root=Path(root or "/"),
        local_disks=None if disks is None else tuple(Path(d.strip()) for d in disks.split(",") if d.strip()),
        gpus=None if gpus is None else () if gpus.strip() == _CPU_ONLY else tuple(
            g.strip() for g in gpus.split(",") if g.strip()),
    )


def instance_root() -> Path:
    return current().root
