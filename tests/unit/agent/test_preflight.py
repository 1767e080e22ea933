from __future__ import annotations

import sys
from pathlib import Path

from orchestrator.agent.preflight import MIN_FREE_BYTES, TorchProbe, probe_torch, problems

GOOD_CPU = TorchProbe(python=(3, 11, 7), torch="2.13.0+cpu", cuda=None)
GOOD_GPU = TorchProbe(python=(3, 11, 7), torch="2.13.0+cu124", cuda="12.4", cuda_available=True, device_count=2)
ROOMY = {Path("/data"): MIN_FREE_BYTES}


def test_a_cpu_node_with_a_cpu_torch_is_fit() -> None:
    assert problems(GOOD_CPU, gpu_count=0, driver_cuda=None, free_bytes=ROOMY) == []


def test_a_gpu_node_needs_a_cuda_torch_that_sees_every_gpu_and_a_new_enough_driver() -> None:
    assert problems(GOOD_GPU, 2, (12, 4), ROOMY) == []
    assert "cannot use CUDA" in problems(GOOD_CPU, 2, (12, 4), ROOMY)[0]
    assert problems(GOOD_GPU, 4, (12, 4), ROOMY) == ["torch sees 2 GPU(s), the node has 4"]
    (driver,) = problems(GOOD_GPU, 2, (12, 2), ROOMY)
    assert "driver supports CUDA 12.2" in driver and "needs CUDA 12.4" in driver


def test_every_problem_is_reported_at_once() -> None:
    old = TorchProbe(python=(3, 8, 10), error="ModuleNotFoundError: No module named 'torch'")
    found = problems(old, 0, None, {Path("/ckpt"): 1 << 20})
    assert len(found) == 3
    assert "Python 3.8.10 is too old" in found[0] and "No module named 'torch'" in found[1]
    assert "only 1 MiB free in /ckpt" in found[2]


def test_the_probe_runs_the_given_interpreter(tmp_path: Path) -> None:
    probe = probe_torch(sys.executable, {"PATH": "/usr/bin:/bin"}, tmp_path)
    assert probe.python[:2] == sys.version_info[:2] and probe.torch is not None and probe.error is None
    assert probe_torch("/nonexistent/python3", {}, tmp_path).error is not None
