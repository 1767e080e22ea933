from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.agent import host


def test_on_tencent_cloud_the_host_says_nothing_and_the_agent_looks_for_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TENCENTCLOUD_EMULATOR_ROOT", "TENCENTCLOUD_EMULATOR_LOCAL_DISKS", "TENCENTCLOUD_EMULATOR_GPUS"):
        monkeypatch.delenv(name, raising=False)
    assert host.current() == host.Host(root=Path("/"), local_disks=None, gpus=None)


def test_a_sandboxed_host_lists_its_root_disks_and_gpus(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TENCENTCLOUD_EMULATOR_ROOT", str(tmp_path))
    monkeypatch.setenv("TENCENTCLOUD_EMULATOR_LOCAL_DISKS", f"{tmp_path}/nvme0, {tmp_path}/nvme1")
    monkeypatch.setenv("TENCENTCLOUD_EMULATOR_GPUS", "0,3")
    assert host.current() == host.Host(root=tmp_path, local_disks=(tmp_path / "nvme0", tmp_path / "nvme1"),
                                       gpus=("0", "3"))
    monkeypatch.setenv("TENCENTCLOUD_EMULATOR_LOCAL_DISKS", "")
    monkeypatch.setenv("TENCENTCLOUD_EMULATOR_GPUS", "cpu-only")
    assert (host.current().local_disks, host.current().gpus) == ((), ())


def test_a_program_the_instance_installed_is_found_under_its_root_on_an_emulated_host(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TENCENTCLOUD_EMULATOR_ROOT", str(tmp_path))
    assert host.current().program("nvidia-smi") is None  # the machine's own nvidia-smi is not the instance's
    smi = tmp_path / "usr/bin/nvidia-smi"
    smi.parent.mkdir(parents=True)
    smi.write_text("#!/bin/sh\n")
    assert host.current().program("nvidia-smi") is None  # not executable: not a program
    smi.chmod(0o755)
    assert host.current().program("nvidia-smi") == str(smi)
    monkeypatch.delenv("TENCENTCLOUD_EMULATOR_ROOT")
    assert host.current().program("sh") is not None  # on Tencent Cloud: PATH
