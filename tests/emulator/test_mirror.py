"""What an emulated instance reaches beyond the cloud's own services: Tencent's mirror (its PyPI and the GPU
driver's auto-install), COS of another region only with a public IP, and nothing else of the internet. Clients
here use the emulator as their proxy, as an instance's do (runtime/sandbox.py)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from qcloud_cos import CosConfig, CosS3Client, CosServiceError

from tests.emulator.conftest import make_cos
from tests.emulator.cvm_support import admin_instance, run_one
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


def cos_through(emulator: EmulatorProcess, proxy: str, region: str) -> CosS3Client:
    """The COS SDK as a process behind ``proxy`` sees it (an instance's HTTP_PROXY carries its credentials)."""
    conf = CosConfig(Region=region, SecretId=emulator.secret_id, SecretKey=emulator.secret_key, Scheme="http",
                     Proxies={"http": proxy})
    return CosS3Client(conf, retry=0)


def read(client: CosS3Client, bucket: str) -> bytes:
    return bytes(client.get_object(Bucket=bucket, Key="k")["Body"].get_raw_stream().read())


def test_cos_of_another_region_is_reached_from_an_instance_only_with_a_public_ip(
        emulator: EmulatorProcess, cvm: Any) -> None:
    near, far = f"near-{emulator.appid}", f"far-{emulator.appid}"
    for bucket, region in ((near, "ap-guangzhou"), (far, "ap-shanghai")):
        controller = make_cos(emulator, region=region)
        controller.create_bucket(Bucket=bucket)
        controller.put_object(Bucket=bucket, Key="k", Body=region.encode())
    private = admin_instance(emulator, run_one(cvm))["proxy"]  # no InternetAccessible: no public IP
    public = admin_instance(emulator, run_one(
        cvm, InternetAccessible={"InternetMaxBandwidthOut": 10, "PublicIpAssigned": True}))["proxy"]

    assert read(cos_through(emulator, private, "ap-guangzhou"), near) == b"ap-guangzhou"
    with pytest.raises(CosServiceError) as err:
        read(cos_through(emulator, private, "ap-shanghai"), far)
    assert err.value.get_status_code() == 502
    answer = requests.get(f"http://{far}.cos.ap-shanghai.myqcloud.com/k", proxies={"http": private}, timeout=10)
    assert (answer.status_code, answer.text) == (502, (
        f"{far}.cos.ap-shanghai.myqcloud.com is unreachable from this instance: it has no public IP, and reaches only "
        "the metadata service, COS of its region and mirrors.tencentyun.com\n"))

    assert read(cos_through(emulator, public, "ap-shanghai"), far) == b"ap-shanghai"
    # The controller on the host is no instance: through the proxy without credentials, or directly.
    assert read(cos_through(emulator, f"http://{emulator.endpoint}", "ap-shanghai"), far) == b"ap-shanghai"
    assert read(make_cos(emulator, region="ap-shanghai"), far) == b"ap-shanghai"
