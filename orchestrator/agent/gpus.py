"""The node's GPUs: how many (for nproc_per_node=auto and preflight), how many the instance has whatever its
driver, the driver's version, and live utilisation for the heartbeat.

A host that lists the instance's GPUs (the emulator, host.py; also in CUDA_VISIBLE_DEVICES) is believed. On
Tencent Cloud ``nvidia-smi`` is the source of what the driver uses; one where it exists and fails has a broken
driver, which is an error rather than "CPU-only". Without it the GPUs are still on the PCI bus, which needs no
driver: that is how preflight tells a GPU type booted without its driver from a CPU type.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from orchestrator.contract import GpuStat

from . import host


class GpuProbeError(Exception):
    pass


def _nvidia_smi(*args: str) -> str | None:
    """nvidia-smi's output; None when it is not installed."""
    program = host.current().program("nvidia-smi")
    if program is None:
        return None
    try:
        done = subprocess.run([program, *args], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise GpuProbeError(f"nvidia-smi failed: {exc}") from exc
    if done.returncode != 0:
        raise GpuProbeError(f"nvidia-smi exited with {done.returncode}: {(done.stderr or done.stdout).strip()}")
    return done.stdout


def visible_gpu_count() -> int:
    listed = host.current().gpus
    if listed is not None:
        return len(listed)
    listing = _nvidia_smi("-L")
    if listing is None:
        return 0
    count = sum(1 for line in listing.splitlines() if line.startswith("GPU "))
    visible = _visible_indices()
    return min(count, len(visible)) if visible is not None else count


def _visible_indices() -> list[int] | None:
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value is None or not re.fullmatch(r"\s*\d+(\s*,\s*\d+)*\s*", value):
        return None
    return [int(v) for v in value.split(",")]


PCI_DEVICES = Path("/sys/bus/pci/devices")
_NVIDIA_VENDOR = "0x10de"
_DISPLAY_CLASS = "0x03"  # PCI base class 03, display controllers: VGA (0300, a vGPU) and 3D (0302, a data-centre GPU)


def installed_gpu_count(devices: Path = PCI_DEVICES) -> int:
    """The NVIDIA GPUs the instance has, driver or not: the host's list, else the PCI bus (NVIDIA's audio and
    NVSwitch functions are of other classes)."""
    listed = host.current().gpus
    if listed is not None:
        return len(listed)
    count = 0
    for device in devices.glob("*"):
        try:
            vendor, device_class = ((device / name).read_text().strip() for name in ("vendor", "class"))
        except OSError:
            continue
        if vendor == _NVIDIA_VENDOR and device_class.startswith(_DISPLAY_CLASS):
            count += 1
    return count


def driver_answers() -> bool:
    """Whether the NVIDIA driver is installed and loaded: nvidia-smi lists the GPUs (during an install the program
    may exist before its kernel module answers)."""
    try:
        return _nvidia_smi("-L") is not None
    except GpuProbeError:
        return False


def driver_version() -> tuple[int, ...] | None:
    """The NVIDIA driver's version, 535.104.05 as (535, 104, 5); None when no driver is installed (no nvidia-smi)."""
    out = _nvidia_smi("--query-gpu=driver_version", "--format=csv,noheader")
    match = re.match(r"\s*(\d+(?:\.\d+)*)", out or "")
    return tuple(int(part) for part in match[1].split(".")) if match else None


def gpu_stats() -> list[GpuStat]:
    """Utilisation and memory of the visible GPUs; [] when there are none or they cannot be read."""
    if host.current().gpus == ():
        return []
    try:
        stats = _nvml_stats()
        if stats is None:
            stats = _smi_stats()
    except (GpuProbeError, OSError):
        return []
    visible = _visible_indices()
    return [s for s in stats if visible is None or s.index in visible]


def _nvml_stats() -> list[GpuStat] | None:
    try:
        nvml: Any = importlib.import_module("pynvml")  # optional: a richer, cheaper source than nvidia-smi
    except ImportError:
        return None
    try:
        nvml.nvmlInit()
    except Exception:  # pynvml raises its own NVMLError classes; no usable driver here
        return None
    try:
        stats = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            util = nvml.nvmlDeviceGetUtilizationRates(handle)
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            stats.append(GpuStat(index=index, utilization=float(util.gpu), memory_used_mib=memory.used / 2**20))
        return stats
    finally:
        nvml.nvmlShutdown()


def _smi_stats() -> list[GpuStat]:
    out = _nvidia_smi("--query-gpu=index,utilization.gpu,memory.used", "--format=csv,noheader,nounits")
    stats = []
    for line in (out or "").splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 3 and fields[0].isdigit():
            try:
                stats.append(GpuStat(index=int(fields[0]), utilization=float(fields[1]),
                                     memory_used_mib=float(fields[2])))
            except ValueError:  # "[N/A]" on some boards
                continue
    return stats
