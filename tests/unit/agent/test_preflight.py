"""Preflight: the node must be able to run the training it is about to pay for, each problem with its fix. A GPU type
whose driver is missing or too old for the image's torch, whose torch cannot use CUDA, or that lacks the NCCL
several processes need, fails here, never trains on its CPU in silence (issue 14, item 4)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from orchestrator.agent import gpus, preflight
from orchestrator.agent.errors import AttemptEnded
from orchestrator.agent.preflight import (
    CUDA_FAMILIES,
    MIN_FREE_BYTES,
    NO_GPUS,
    GpuFacts,
    TorchProbe,
    driver_text,
    probe_torch,
    problems,
    run_on_host,
    run_preflight,
    wheel_for,
)
from orchestrator.contract import Outcome
from orchestrator.spec.workload import TrainSpec

GOOD_CPU = TorchProbe(python=(3, 11, 7), torch="2.13.0+cpu", cuda=None)
GOOD_GPU = TorchProbe(python=(3, 11, 7), torch="2.13.0+cu124", cuda="12.4", cuda_available=True, device_count=2,
                      nccl="2.21.5")
TWO_GPUS = GpuFacts(installed=2, listed=2, driver=(550, 54, 15))
ROOMY = {Path("/data"): MIN_FREE_BYTES}


def test_a_cpu_node_with_a_cpu_torch_is_fit_and_needs_no_driver_nor_nccl() -> None:
    assert problems(GOOD_CPU, NO_GPUS, processes=4, free_bytes=ROOMY) == []


def test_a_gpu_node_with_a_new_enough_driver_a_cuda_torch_and_nccl_is_fit() -> None:
    assert problems(GOOD_GPU, TWO_GPUS, 2, ROOMY) == []
    # Minor version compatibility: a CUDA 12.4 build runs on any driver of the 12 family, 12.2's among them.
    assert problems(GOOD_GPU, GpuFacts(2, 2, (535, 104, 5)), 2, ROOMY) == []
    assert problems(GOOD_GPU, GpuFacts(2, 2, (525, 60, 13)), 2, ROOMY) == []


def test_a_gpu_type_without_a_driver_is_told_which_to_install() -> None:
    # nvidia-smi missing: the driver lists nothing, but the GPUs are on the PCI bus; torch then has no CUDA either.
    no_cuda = GpuFacts(installed=2, listed=0, driver=None)
    (found,) = problems(replace(GOOD_GPU, cuda_available=False, device_count=0, nccl=None), no_cuda, 2, ROOMY)
    assert found == ("the node has 2 NVIDIA GPU(s) and no driver (no nvidia-smi): install the NVIDIA driver "
                     "525.60.13 or newer, the oldest that runs torch 2.13.0+cu124 (CUDA 12.4)")
    (cpu,) = problems(GOOD_CPU, no_cuda, 1, ROOMY)
    assert "no driver" in cpu and "a CPU build" in cpu
    assert "525.60.13 or newer, then pip install torch --index-url https://download.pytorch.org/whl/cu126" in cpu


def test_a_driver_too_old_for_the_torch_build_is_told_the_driver_or_the_wheel() -> None:
    torch_cu124 = TorchProbe(python=(3, 11, 7), torch="2.4.0+cu124", cuda="12.4",
                             cuda_error="RuntimeError: The NVIDIA driver on your system is too old")
    (found,) = problems(torch_cu124, GpuFacts(2, 2, (470, 82, 1)), 2, ROOMY)
    assert found == ("the NVIDIA driver 470.82.01 is too old for torch 2.4.0+cu124 (CUDA 12.4), which needs "
                     "525.60.13 or newer: install driver 525.60.13 or newer, or the torch built for this driver: "
                     "pip install torch --index-url https://download.pytorch.org/whl/cu118")
    # Older than every family: only a driver helps.
    (ancient,) = problems(torch_cu124, GpuFacts(1, 1, (418, 39)), 1, ROOMY)
    assert ancient.endswith("install driver 525.60.13 or newer")
    # A CUDA 13 build on a 12-family driver.
    torch_cu130 = TorchProbe(python=(3, 12, 3), torch="2.9.0+cu130", cuda="13.0")
    (newer,) = problems(torch_cu130, GpuFacts(8, 8, (570, 124, 6)), 8, ROOMY)
    assert "which needs 580 or newer" in newer and newer.endswith("--index-url https://download.pytorch.org/whl/cu126")


def test_a_gpu_type_whose_torch_cannot_use_cuda_fails_with_the_reason_or_the_wheel() -> None:
    (cpu_build,) = problems(GOOD_CPU, TWO_GPUS, 2, ROOMY)
    assert cpu_build == ("the node has 2 NVIDIA GPU(s) but torch 2.13.0+cpu is a CPU build: pip install torch "
                         "--index-url https://download.pytorch.org/whl/cu126")
    broken = TorchProbe(python=(3, 11, 7), torch="2.13.0+cu124", cuda="12.4",
                        cuda_error="RuntimeError: No CUDA GPUs are available")
    assert problems(broken, TWO_GPUS, 2, ROOMY) == [
        "torch 2.13.0+cu124 (CUDA 12.4) cannot use the node's 2 GPU(s): RuntimeError: No CUDA GPUs are available"]


def test_torch_must_see_every_gpu_the_driver_lists() -> None:
    assert problems(GOOD_GPU, GpuFacts(4, 4, (550, 54, 15)), 4, ROOMY) == ["torch sees 2 GPU(s), the node has 4"]
    # CUDA_VISIBLE_DEVICES leaves torch 2 of 4: the driver lists those 2.
    assert problems(GOOD_GPU, GpuFacts(4, 2, (550, 54, 15)), 2, ROOMY) == []


def test_several_processes_need_nccl_one_does_not() -> None:
    without = TorchProbe(python=(3, 11, 7), torch="2.13.0+cu124", cuda="12.4", cuda_available=True, device_count=2,
                         nccl_error="RuntimeError: torch.distributed.is_nccl_available() is False: built without NCCL")
    (found,) = problems(without, TWO_GPUS, 2, ROOMY)
    assert found == ("the training's 2 processes need NCCL, and torch 2.13.0+cu124 cannot load it (RuntimeError: "
                     "torch.distributed.is_nccl_available() is False: built without NCCL): install a torch that "
                     "bundles it, pip install torch --index-url https://download.pytorch.org/whl/cu126")
    one_gpu = GpuFacts(1, 1, (550, 54, 15))
    assert problems(replace(without, device_count=1), one_gpu, 1, ROOMY) == []
    assert len(problems(replace(without, device_count=1), one_gpu, 2, ROOMY)) == 1  # one on each of 2 nodes


def test_a_container_without_nvidia_smi_whose_torch_uses_cuda_is_fit() -> None:
    assert problems(GOOD_GPU, GpuFacts(installed=2, listed=0, driver=None), 2, ROOMY) == []


def test_every_problem_is_reported_at_once() -> None:
    old = TorchProbe(python=(3, 8, 10), error="ModuleNotFoundError: No module named 'torch'")
    found = problems(old, NO_GPUS, 1, {Path("/ckpt"): 1 << 20})
    assert len(found) == 3
    assert "Python 3.8.10 is too old" in found[0] and "No module named 'torch'" in found[1]
    assert "only 1 MiB free in /ckpt" in found[2]


def test_the_driver_table() -> None:
    assert [driver_text(CUDA_FAMILIES[m].min_driver) for m in (11, 12, 13)] == ["450.80.02", "525.60.13", "580"]
    assert wheel_for((450, 80, 2)) == "cu118" and wheel_for((450, 36, 6)) is None
    assert wheel_for((535, 104, 5)) == "cu126" and wheel_for((580, 65, 6)) == "cu130"


def test_the_preflight_counts_the_processes_and_fails_the_attempt(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    monkeypatch.setattr(gpus, "visible_gpu_count", lambda: 2)
    monkeypatch.setattr(gpus, "installed_gpu_count", lambda: 2)
    monkeypatch.setattr(gpus, "driver_version", lambda: (550, 54, 15))
    without = TorchProbe(python=(3, 11, 7), torch="2.13.0+cu124", cuda="12.4", cuda_available=True, device_count=2,
                         nccl_error="RuntimeError: no NCCL")
    monkeypatch.setattr(preflight, "probe_torch", lambda python, env, cwd, run: without)
    with pytest.raises(AttemptEnded) as ended:  # nproc_per_node auto: one process per GPU
        run_preflight(["python3"], {}, tmp_path, [tmp_path], TrainSpec(command="python train.py"), nnodes=1)
    assert ended.value.outcome == Outcome.PREFLIGHT_FAILED
    assert "the training's 2 processes need NCCL" in ended.value.reason
    single = TrainSpec(command="python train.py", nproc_per_node=1)
    assert run_preflight(["python3"], {}, tmp_path, [tmp_path], single, nnodes=1) == without


def test_gpus_on_the_pci_bus_are_counted_without_a_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TENCENTCLOUD_EMULATOR_GPUS", raising=False)
    for name, vendor, device_class in (("0000:00:08.0", "0x10de", "0x030200"),  # a T4: 3D controller
                                       ("0000:00:09.0", "0x10de", "0x030000"),  # a vGPU: VGA
                                       ("0000:00:0a.0", "0x10de", "0x040300"),  # NVIDIA audio
                                       ("0000:00:02.0", "0x1af4", "0x020000")):  # virtio network
        device = tmp_path / name
        device.mkdir()
        (device / "vendor").write_text(vendor + "\n")
        (device / "class").write_text(device_class + "\n")
    assert gpus.installed_gpu_count(tmp_path) == 2
    assert gpus.installed_gpu_count(tmp_path / "absent") == 0
    monkeypatch.setenv("TENCENTCLOUD_EMULATOR_GPUS", "cpu-only")  # the emulator's word is believed
    assert gpus.installed_gpu_count(tmp_path) == 0


def test_the_probe_runs_the_given_interpreter(tmp_path: Path) -> None:
    probe = probe_torch([sys.executable], {"PATH": "/usr/bin:/bin"}, tmp_path)
    assert probe.python[:2] == sys.version_info[:2] and probe.torch is not None and probe.error is None
    assert probe_torch(["/nonexistent/python3"], {}, tmp_path).error is not None


def test_the_probe_reads_its_document_from_output_that_mixes_stderr_in(tmp_path: Path) -> None:
    """A container's output, from the runtime's log: stdout and stderr together, a warning after the document."""
    def in_a_container(args: Sequence[str], env: Mapping[str, str], cwd: Path,
                       timeout: float) -> subprocess.CompletedProcess[str]:
        done = run_on_host(args, env, cwd, timeout)
        return subprocess.CompletedProcess(args, done.returncode, done.stdout + "UserWarning: a torch warning\n", "")

    probe = probe_torch([sys.executable], {"PATH": "/usr/bin:/bin"}, tmp_path, in_a_container)
    assert probe.python[:2] == sys.version_info[:2] and probe.error is None

    def broken(args: Sequence[str], env: Mapping[str, str], cwd: Path,
               timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(args, 1, "Traceback ...\nModuleNotFoundError: No module named 'json'\n", "")

    assert "No module named 'json'" in (probe_torch(["python3"], {}, tmp_path, broken).error or "")


def test_a_command_that_runs_as_it_is_is_not_asked_for_torch_but_its_gpus_need_a_driver(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def no_probe(python: str, env: object, cwd: Path, run: object) -> TorchProbe:
        raise AssertionError("torch was probed for a command that runs as it is")

    monkeypatch.setattr(preflight, "probe_torch", no_probe)
    monkeypatch.setattr(gpus, "visible_gpu_count", lambda: 0)
    monkeypatch.setattr(gpus, "installed_gpu_count", lambda: 0)
    own_launcher = TrainSpec(command="exec python3 train.py")
    assert run_preflight(["python3"], {}, tmp_path, [tmp_path], own_launcher, nnodes=1) is None
    monkeypatch.setattr(gpus, "installed_gpu_count", lambda: 2)  # on the PCI bus, no nvidia-smi
    monkeypatch.setattr(gpus, "driver_version", lambda: None)
    with pytest.raises(AttemptEnded) as ended:
        run_preflight(["python3"], {}, tmp_path, [tmp_path], TrainSpec(command="bash run.sh"), nnodes=1)
    assert "2 NVIDIA GPU(s) and no driver" in ended.value.reason
    monkeypatch.setattr(gpus, "driver_version", lambda: (550, 54, 15))
    assert run_preflight(["python3"], {}, tmp_path, [tmp_path], own_launcher, nnodes=1) is None
