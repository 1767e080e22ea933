"""Preflight: what must hold before hours of training are paid for, each failure with its reason and its fix.

- the training's Python (``python3`` on PATH, the interpreter the launcher uses) is 3.9 or newer and imports
  torch, when the command runs under torchrun (launch.runs_under_torchrun); a command that runs as it is (``bash
  run.sh``, ``exec python3 x.py``) brings its own launcher and framework, so torch is not asked for and a node with
  GPUs needs only a driver;
- a node with NVIDIA GPUs (as the host lists them, or on the PCI bus on Tencent Cloud, driver or not) has a
  driver, one new enough for the CUDA torch was built for (CUDA_FAMILIES), a CUDA build of torch that sees exactly
  the GPUs the driver lists, and, when the training runs more than one process (several on a node, or several
  nodes), NCCL that this torch loads: a GPU type never trains on its CPU in silence;
- a node without GPUs is fine: the run uses ``cpu_nproc`` processes per node and the script picks gloo (a
  script that insists on NCCL fails in training, with its own message);
- the data and checkpoint folders have at least 1 GiB free (sync checks the data's own size separately).
It runs after setup (which may install torch) and before the data sync (which may take long). torch is asked in
the training's interpreter, with the training's environment: the agent's own Python may have none.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.contract import Outcome
from orchestrator.plan.sizing import processes_per_node
from orchestrator.spec.workload import TrainSpec

from . import gpus
from .errors import AttemptEnded
from .launch import runs_under_torchrun

# Runs a command to its end: (args, env, cwd, timeout) -> its exit code and output; subprocess's errors when it
# cannot start or passes the timeout. On the host, subprocess.run; in a container, Container.run_to_end.
Runner = Callable[[Sequence[str], Mapping[str, str], Path, float], "subprocess.CompletedProcess[str]"]
PROBE_TIMEOUT_SECONDS = 300.0

MIN_PYTHON = (3, 9)
MIN_FREE_BYTES = 1 << 30
WHEEL_INDEX = "https://download.pytorch.org/whl/"

_PROBE = """
import json, sys
info = {"python": list(sys.version_info[:3])}
try:
    import torch
except Exception as exc:
    info["error"] = f"{type(exc).__name__}: {exc}"
else:
    available = torch.cuda.is_available()
    info.update(torch=torch.__version__, cuda=torch.version.cuda, cuda_available=available,
                device_count=torch.cuda.device_count() if available else 0)
    if torch.version.cuda and not available:
        try:
            torch.cuda.init()  # raises with the reason that is_available() keeps to itself
        except Exception as exc:
            info["cuda_error"] = f"{type(exc).__name__}: {exc}"
    if available:
        try:
            import torch.distributed as dist
            if not (dist.is_available() and dist.is_nccl_available()):
                raise RuntimeError("torch.distributed.is_nccl_available() is False: built without NCCL")
            info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))  # calls into libnccl: loadable
        except Exception as exc:
            info["nccl_error"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(info))
"""


@dataclass(frozen=True)
class TorchProbe:
    python: tuple[int, ...]
    torch: str | None = None
    cuda: str | None = None  # torch.version.cuda: None for a CPU build
    cuda_available: bool = False
    device_count: int = 0
    error: str | None = None  # torch cannot be imported
    cuda_error: str | None = None  # why a CUDA build cannot use CUDA here
    nccl: str | None = None  # the NCCL version torch loaded (asked only when CUDA is available)
    nccl_error: str | None = None


@dataclass(frozen=True)
class GpuFacts:
    """The node's GPUs as it knows them without torch."""

    installed: int  # NVIDIA GPUs on the instance, driver or not (gpus.installed_gpu_count)
    listed: int  # those the driver lists, within CUDA_VISIBLE_DEVICES (gpus.visible_gpu_count)
    driver: tuple[int, ...] | None = None  # the driver's version; None: no driver (no nvidia-smi)


NO_GPUS = GpuFacts(installed=0, listed=0)


@dataclass(frozen=True)
class CudaFamily:
    min_driver: tuple[int, ...]  # the oldest Linux driver that runs what any release of the family built
    wheels: str  # the PyTorch wheel index of the family to install for such a driver (WHEEL_INDEX + wheels)


# By CUDA major version, from NVIDIA's "CUDA Compatibility" guide, Minor Version Compatibility, Table 1 (13.x >= 580,
# 12.x >= 525, 11.x >= 450; https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html) and
# the CUDA Toolkit Release Notes' table "CUDA Toolkit and Minimum Required Driver Version for CUDA Minor Version
# Compatibility" (12.x >= 525.60.13, 11.x >= 450.80.02; https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/).
# Since CUDA 11 a build of any minor release runs on its family's oldest driver, so that, not the driver the
# toolkit shipped with (CUDA 12.4: 550.54.14), is the line between a node that trains and one that cannot. 11.0
# itself shipped with 450.36.06, but the family needs 450.80.02.
CUDA_FAMILIES = {
    13: CudaFamily((580,), "cu130"),
    12: CudaFamily((525, 60, 13), "cu126"),
    11: CudaFamily((450, 80, 2), "cu118"),
}
# What a node without any driver is told to install, with the torch that runs on it: the family of most GPU images.
SUGGESTED_FAMILY = 12


def driver_text(version: tuple[int, ...]) -> str:
    """As NVIDIA writes it: 450.80.02."""
    return ".".join([str(version[0]), *(f"{part:02d}" for part in version[1:])])


def wheel_for(driver: tuple[int, ...]) -> str | None:
    """The PyTorch wheel index of the newest CUDA family this driver runs; None when it is older than all."""
    fits = [major for major, family in CUDA_FAMILIES.items() if driver >= family.min_driver]
    return CUDA_FAMILIES[max(fits)].wheels if fits else None


def _install(wheels: str) -> str:
    return f"pip install torch --index-url {WHEEL_INDEX}{wheels}"


def _driver_and_torch() -> str:
    """The fix where no driver runs a CUDA build of torch: both, of the suggested family."""
    suggested = CUDA_FAMILIES[SUGGESTED_FAMILY]
    return f"install the NVIDIA driver {driver_text(suggested.min_driver)} or newer, then {_install(suggested.wheels)}"


def run_on_host(args: Sequence[str], env: Mapping[str, str], cwd: Path,
                timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, env=dict(env), cwd=cwd, timeout=timeout,
                          check=False)


def _last_document(output: str) -> dict[str, object] | None:
    """The probe's JSON line: the last line of its output that is one (a runtime may mix stderr in)."""
    for line in reversed(output.strip().splitlines()):
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict):
            return found
    return None


def probe_torch(python: Sequence[str], env: Mapping[str, str], cwd: Path, run: Runner = run_on_host) -> TorchProbe:
    try:
        done = run([*python, "-c", _PROBE], env, cwd, PROBE_TIMEOUT_SECONDS)
    except (OSError, subprocess.SubprocessError) as exc:
        return TorchProbe(python=(), error=f"cannot run {python[-1]}: {exc}")
    info: dict[str, Any] | None = _last_document(done.stdout)
    if info is None or "python" not in info:
        return TorchProbe(python=(), error=f"{python[-1]} failed: {(done.stderr or done.stdout).strip()[-500:]}")
    return TorchProbe(python=tuple(info["python"]), torch=info.get("torch"), cuda=info.get("cuda"),
                      cuda_available=bool(info.get("cuda_available")), device_count=int(info.get("device_count", 0)),
                      error=info.get("error"), cuda_error=info.get("cuda_error"), nccl=info.get("nccl"),
                      nccl_error=info.get("nccl_error"))


def _gpu_problem(probe: TorchProbe, node: GpuFacts, processes: int) -> str | None:
    """What keeps a node with GPUs from training on them (the first cause found: the others follow from it)."""
    count = max(node.installed, node.listed)
    family = CUDA_FAMILIES.get(int(probe.cuda.split(".")[0])) if probe.cuda else None
    built = f"torch {probe.torch} (CUDA {probe.cuda})"
    if node.driver is None and not probe.cuda_available:  # a container may use the driver without nvidia-smi
        missing = f"the node has {count} NVIDIA GPU(s) and no driver (no nvidia-smi)"
        if family is not None:
            return (f"{missing}: install the NVIDIA driver {driver_text(family.min_driver)} or newer, the oldest "
                    f"that runs {built}")
        if probe.cuda is not None:
            return f"{missing}: install the NVIDIA driver that {built} needs"
        return f"{missing}, and torch {probe.torch} is a CPU build: {_driver_and_torch()}"
    wheels = None if node.driver is None else wheel_for(node.driver)
    if node.driver is not None and family is not None and node.driver < family.min_driver:
        instead = f", or the torch built for this driver: {_install(wheels)}" if wheels else ""
        return (f"the NVIDIA driver {driver_text(node.driver)} is too old for {built}, which needs "
                f"{driver_text(family.min_driver)} or newer: install driver {driver_text(family.min_driver)} or "
                f"newer{instead}")
    if not probe.cuda_available:
        if probe.cuda is None:
            fix = _install(wheels) if wheels else _driver_and_torch()
            return f"the node has {count} NVIDIA GPU(s) but torch {probe.torch} is a CPU build: {fix}"
        why = probe.cuda_error or "torch.cuda.is_available() is False"
        return f"{built} cannot use the node's {count} GPU(s): {why}"
    expected = node.listed or node.installed
    if probe.device_count != expected:
        return f"torch sees {probe.device_count} GPU(s), the node has {expected}"
    if processes > 1 and probe.nccl is None:
        fix = _install(wheels or (family.wheels if family else CUDA_FAMILIES[SUGGESTED_FAMILY].wheels))
        return (f"the training's {processes} processes need NCCL, and torch {probe.torch} cannot load it "
                f"({probe.nccl_error}): install a torch that bundles it, {fix}")
    return None


def problems(probe: TorchProbe | None, node: GpuFacts, processes: int, free_bytes: Mapping[Path, int]) -> list[str]:
    """Everything wrong, as sentences with their fixes; [] when the node is fit to train. ``processes``: the
    training's, on all its nodes. ``probe`` None: torch was not asked (the command runs as it is)."""
    found = []
    count = max(node.installed, node.listed)
    if probe is None:
        if count and node.driver is None:
            found.append(f"the node has {count} NVIDIA GPU(s) and no driver (no nvidia-smi): install the NVIDIA "
                         f"driver {driver_text(CUDA_FAMILIES[SUGGESTED_FAMILY].min_driver)} or newer")
    elif probe.python and probe.python[:2] < MIN_PYTHON:
        found.append(f"Python {'.'.join(map(str, probe.python))} is too old: {'.'.join(map(str, MIN_PYTHON))}+ "
                     "is needed")
    if probe is not None and probe.error is not None:
        found.append(f"torch cannot be imported: {probe.error}")
    elif probe is not None and count and (gpu := _gpu_problem(probe, node, processes)) is not None:
        found.append(gpu)
    for path, free in free_bytes.items():
        if free < MIN_FREE_BYTES:
            found.append(f"only {free >> 20} MiB free in {path}: at least {MIN_FREE_BYTES >> 20} MiB is needed")
    return found


def _free_bytes(path: Path) -> int:
    existing = path
    while not existing.exists():  # the folder may not be there yet: its file system is what matters
        existing = existing.parent
    return shutil.disk_usage(existing).free


def run_preflight(python: Sequence[str], env: Mapping[str, str], cwd: Path, folders: list[Path], train: TrainSpec,
                  nnodes: int, run: Runner = run_on_host) -> TorchProbe | None:
    """Check the node for ``train`` on ``nnodes`` nodes; raise AttemptEnded(PREFLIGHT_FAILED) with every problem
    found. ``python``: the command that starts the training's interpreter, run by ``run`` (in the job's container,
    if it has one).
    The torch probe it made, None when the command runs as it is."""
    try:
        listed = gpus.visible_gpu_count()
        installed = gpus.installed_gpu_count()
        driver = gpus.driver_version() if listed or installed else None
    except gpus.GpuProbeError as exc:
        raise AttemptEnded(Outcome.PREFLIGHT_FAILED, f"the GPU driver does not answer: {exc}") from exc
    probe = probe_torch(python, env, cwd, run) if runs_under_torchrun(train.command) else None
    processes = processes_per_node(train, listed) * nnodes
    found = problems(probe, GpuFacts(installed, listed, driver), processes, {f: _free_bytes(f) for f in folders})
    if found:
        raise AttemptEnded(Outcome.PREFLIGHT_FAILED, "; ".join(found))
    return probe
