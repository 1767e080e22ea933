from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.agent.nvme import data_root, mounted_nvme, remove_other_jobs_data

MOUNTS = """/dev/vda1 / ext4 rw,relatime 0 0
/dev/nvme0n1p1 /boot/efi vfat rw 0 0
proc /proc proc rw 0 0
/dev/nvme1n1 /data\\040disk xfs rw,noatime 0 0
/dev/nvme2n1 /mnt/other ext4 rw 0 0
"""


def test_the_first_mounted_nvme_that_is_not_root_or_boot_is_used() -> None:
    assert mounted_nvme(MOUNTS) == Path("/data disk")
    assert mounted_nvme("/dev/vda1 / ext4 rw 0 0\n/dev/nvme0n1 / ext4 rw 0 0\n") is None


def test_on_the_emulator_the_first_local_disk_folder_is_used(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TENCENTCLOUD_EMULATOR_ROOT", str(tmp_path / "system"))
    monkeypatch.setenv("TENCENTCLOUD_EMULATOR_LOCAL_DISKS", f"{tmp_path}/nvme0,{tmp_path}/nvme1")
    assert data_root("job-1") == tmp_path / "nvme0" / "cvmjob" / "data" / "job-1"
    monkeypatch.setenv("TENCENTCLOUD_EMULATOR_LOCAL_DISKS", "")
    assert data_root("job-1") == tmp_path / "system" / "opt" / "cvmjob" / "data" / "job-1"


def test_a_job_removes_the_data_earlier_jobs_left(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TENCENTCLOUD_EMULATOR_ROOT", str(tmp_path / "system"))
    monkeypatch.setenv("TENCENTCLOUD_EMULATOR_LOCAL_DISKS", f"{tmp_path}/nvme0")
    for job in ("job-old", "job-new"):
        (data_root(job) / "set").mkdir(parents=True)
        (data_root(job) / "set" / "x.bin").write_bytes(b"private")
    assert remove_other_jobs_data("job-new") == ["job-old"]
    assert not data_root("job-old").exists() and (data_root("job-new") / "set" / "x.bin").exists()
