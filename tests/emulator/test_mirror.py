"""What an emulated instance reaches beyond the cloud's own services: Tencent's mirror (its PyPI and the GPU
driver's auto-install), and nothing else of the internet. Clients here use the emulator as their proxy, as an
instance's do (runtime/sandbox.py)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
import requests

from tests.emulator_process import EmulatorProcess


def through(emulator: EmulatorProcess) -> dict[str, str]:
    proxy = f"http://{emulator.endpoint}"
    return {"http": proxy, "https": proxy}


def test_a_host_of_the_internet_is_unreachable_over_http_and_https(emulator: EmulatorProcess) -> None:
    plain = requests.get("http://pypi.org/simple/requests/", proxies=through(emulator), timeout=10)
    assert plain.status_code == 502
    assert plain.text == ("pypi.org is unreachable from this instance: it has no public IP, and reaches only the "
                          "metadata service, COS of its region and mirrors.tencentyun.com\n")
    with pytest.raises(requests.exceptions.ProxyError, match="502"):
        requests.get("https://pypi.org/simple/requests/", proxies=through(emulator), timeout=10)


def test_the_mirrors_pypi_answers_and_holds_nothing(emulator: EmulatorProcess) -> None:
    index = requests.get("http://mirrors.tencentyun.com/pypi/simple/", proxies=through(emulator), timeout=10)
    assert index.status_code == 200 and "<a " not in index.text
    project = requests.get("http://mirrors.tencentyun.com/pypi/simple/requests/", proxies=through(emulator),
                           timeout=10)
    assert project.status_code == 404


def installer(emulator: EmulatorProcess, root: Path) -> Path:
    script = requests.get("http://mirrors.tencentyun.com/install/GPU/auto_install.sh", proxies=through(emulator),
                          timeout=10)
    assert script.status_code == 200
    path = root / "tmp" / "auto_install.sh"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(script.text)
    path.chmod(0o755)
    return path


def install(path: Path, root: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "TMPDIR": str(root / "tmp"), "TENCENTCLOUD_EMULATOR_ROOT": str(root)}
    return subprocess.run([str(path)], env=env, capture_output=True, text=True, timeout=60, check=False)


def test_the_driver_installer_reads_its_settings_then_puts_the_driver_on_after_a_while(
        emulator: EmulatorProcess, tmp_path: Path) -> None:
    script = installer(emulator, tmp_path)
    refused = install(script, tmp_path)
    assert refused.returncode == 1
    assert refused.stderr == f"auto_install: no DRIVER_VERSION in {tmp_path}/tmp/user_define_install_info.ini\n"
    assert not (tmp_path / "usr/bin/nvidia-smi").exists()  # no driver on a public image until it is installed

    (tmp_path / "tmp" / "user_define_install_info.ini").write_text(
        "DRIVER_VERSION=535.161.07\nCUDA_VERSION=12.4.0\nCUDNN_VERSION=8.9.7\n")
    started = time.monotonic()
    done = install(script, tmp_path)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started >= 0.3  # the emulator's driver_install_seconds (the tests' timings)
    assert done.stdout.splitlines()[-1] == "auto_install: NVIDIA driver 535.161.07 installed"
    smi = str(tmp_path / "usr/bin/nvidia-smi")
    env = {"PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": ""}  # no GPU lent: a driver that sees none
    assert subprocess.run([smi, "-L"], env=env, capture_output=True, text=True, check=True).stdout == ""
    banner = subprocess.run([smi], env=env, capture_output=True, text=True, check=True).stdout
    assert "Driver Version: 535.161.07" in banner
