"""Real CUDA devices for emulated GPU instances.

The host's GPUs are listed once with ``nvidia-smi`` (none when it is missing or fails, or with ``--gpus none``).
An instance of a type with N whole GPUs gets N free devices for its life (CUDA_VISIBLE_DEVICES); when fewer are
free, or the type is a vGPU slice (GpuCount < 1, which no local device can stand in for), it runs CPU-only.
"""

from __future__ import annotations

import logging
import subprocess
from dataclasses import dataclass

log = logging.getLogger("cvmjob.emulator")

QUERY = ["nvidia-smi", "--query-gpu=index,name,memory.total", "--format=csv,noheader"]


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    memory_mib: int


def parse_query(output: str) -> tuple[Gpu, ...]:
    gpus = []
    for line in output.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[0].isdigit():
            memory = parts[2].split()[0]
            gpus.append(Gpu(int(parts[0]), parts[1], int(memory) if memory.isdigit() else 0))
    return tuple(gpus)


def detect(mode: str) -> tuple[Gpu, ...]:
    if mode == "none":
        return ()
    try:
        result = subprocess.run(QUERY, capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return ()
    gpus = parse_query(result.stdout)
    log.info("GPUs for instances: %s", ", ".join(f"{g.index}:{g.name}" for g in gpus) or "none")
    return gpus


class GpuPool:
    def __init__(self, devices: tuple[Gpu, ...]) -> None:
        self.devices = devices
        self.assigned: dict[str, list[int]] = {}

    def assign(self, instance_id: str, gpu_count: float) -> list[int]:
        """Devices for an instance: ``gpu_count`` whole free ones, or none (CPU-only)."""
        self.release(instance_id)
        if gpu_count < 1 or gpu_count != int(gpu_count):
            return []
        used = {i for devices in self.assigned.values() for i in devices}
        free = [g.index for g in self.devices if g.index not in used]
        if len(free) < gpu_count:
            return []
        self.assigned[instance_id] = free[: int(gpu_count)]
        return self.assigned[instance_id]

    def release(self, instance_id: str) -> None:
        self.assigned.pop(instance_id, None)

    def restore(self, instance_id: str, devices: list[int]) -> list[int]:
        """Keep a persisted assignment if its devices still exist and are free (the host may have changed)."""
        used = {i for owner, ds in self.assigned.items() if owner != instance_id for i in ds}
        present = {g.index for g in self.devices}
        if devices and all(i in present and i not in used for i in devices):
            self.assigned[instance_id] = list(devices)
            return list(devices)
        self.assigned.pop(instance_id, None)
        return []
