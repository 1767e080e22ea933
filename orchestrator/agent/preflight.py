"""Preflight: what must hold before hours of training are paid for, each failure with its reason.

- the training's Python (``python3`` on PATH, the interpreter the launcher uses) is 3.9 or newer and imports
  torch;
- a node with GPUs (as the host lists them, or ``nvidia-smi -L`` on Tencent Cloud) has a
  CUDA build of torch that sees exactly those GPUs, and a driver whose CUDA version is at least torch's;
- a node without GPUs is fine: the run uses ``cpu_nproc`` processes per node and the script picks gloo (a
  script that insists on NCCL fails in training, with its own message);
- the data and checkpoint folders have at least 1 GiB free (sync checks the data's own size separately).
It runs after setup (which may install torch) and before the data sync (which may take long).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from orchestrator.contract import Outcome

from . import gpus
from .errors import AttemptEnded

MIN_PYTHON = (3, 9)
MIN_FREE_BYTES = 1 << 30

_PROBE = """
import json, sys
info = {"python": list(sys.version_info[:3])}
try:
    import torch
except Exception as exc:
    info["error"] = f"{type(exc).__name__}: {exc}"
else:
    info.update(torch=torch.__version__, cuda=torch.version.cuda, cuda_available=torch.cuda.is_available(),
                device_count=torch.cuda.device_count() if torch.cuda.is_available() else 0)
print(json.dumps(info))
"""


@dataclass(frozen=True)
class TorchProbe:
    python: tuple[int, ...]
    torch: str | None = None
    cuda: str | None = None
    cuda_available: bool = False
    device_count: int = 0
    error: str | None = None


def probe_torch(python: str, env: Mapping[str, str], cwd: Path) -> TorchProbe:
    try:
        done = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, env=dict(env), cwd=cwd,
                              timeout=300, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return TorchProbe(python=(), error=f"cannot run {python}: {exc}")
    try:
        info = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return TorchProbe(python=(), error=f"{python} failed: {(done.stderr or done.stdout).strip()[-500:]}")
    return TorchProbe(python=tuple(info["python"]), torch=info.get("torch"), cuda=info.get("cuda"),
                      cuda_available=bool(info.get("cuda_available")), device_count=int(info.get("device_count", 0)),
                      error=info.get("error"))


def _version(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


def problems(probe: TorchProbe, gpu_count: int, driver_cuda: tuple[int, int] | None,
             free_bytes: Mapping[Path, int]) -> list[str]:
    """Everything wrong, as sentences; [] when the node is fit to train."""
    found = []
    if probe.python and probe.python[:2] < MIN_PYTHON:
        found.append(f"Python {'.'.join(map(str, probe.python))} is too old: {'.'.join(map(str, MIN_PYTHON))}+ "
                     "is needed")
    if probe.error is not None:
        found.append(f"torch cannot be imported: {probe.error}")
    elif gpu_count > 0:
        if not probe.cuda_available:
            found.append(f"the node has {gpu_count} GPU(s) but torch {probe.torch} cannot use CUDA "
                         f"(torch.version.cuda={probe.cuda}): install a CUDA build of torch")
        elif probe.device_count != gpu_count:
            found.append(f"torch sees {probe.device_count} GPU(s), the node has {gpu_count}")
        if probe.cuda and driver_cuda is not None and driver_cuda < _version(probe.cuda):
            found.append(f"the driver supports CUDA {driver_cuda[0]}.{driver_cuda[1]}, torch {probe.torch} needs "
                         f"CUDA {probe.cuda}: use an image with a newer driver or a torch built for an older CUDA")
    for path, free in free_bytes.items():
        if free < MIN_FREE_BYTES:
            found.append(f"only {free >> 20} MiB free in {path}: at least {MIN_FREE_BYTES >> 20} MiB is needed")
    return found


def _free_bytes(path: Path) -> int:
    existing = path
    while not existing.exists():  # the folder may not be there yet: its file system is what matters
        existing = existing.parent
    return shutil.disk_usage(existing).free


def run_preflight(python: str, env: Mapping[str, str], cwd: Path, folders: list[Path]) -> TorchProbe:
    """Check the node; raise AttemptEnded(PREFLIGHT_FAILED) with every problem found."""
    try:
        gpu_count = gpus.visible_gpu_count()
        driver = gpus.driver_cuda_version() if gpu_count else None
    except gpus.GpuProbeError as exc:
        raise AttemptEnded(Outcome.PREFLIGHT_FAILED, f"the GPU driver does not answer: {exc}") from exc
    probe = probe_torch(python, env, cwd)
    found = problems(probe, gpu_count, driver, {f: _free_bytes(f) for f in folders})
    if found:
        raise AttemptEnded(Outcome.PREFLIGHT_FAILED, "; ".join(found))
    return probe
