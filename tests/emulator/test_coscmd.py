"""coscmd, the official COS command line, against the emulator as its HTTP proxy (client-recipes §4.2): it only
builds ``http://<bucket>.cos.<region>.myqcloud.com`` URLs, so the emulator receives absolute-form targets."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from qcloud_cos import CosS3Client

from tests.emulator.conftest import REGION
from tests.emulator_process import EmulatorProcess, clean_env

pytestmark = pytest.mark.clients

MiB = 1024 * 1024


def clients_venv() -> Path:
    configured = os.environ.get("CVMJOB_CLIENTS_VENV")
    return Path(configured) if configured else Path(__file__).resolve().parents[2] / ".venv-clients"


class Coscmd:
    """coscmd with its configuration, log and $HOME in a scratch directory, run through the emulator proxy."""

    def __init__(self, executable: Path, home: Path, emulator: EmulatorProcess, bucket: str) -> None:
        self.home = home
        self.conf = home / "cos.conf"
        self.base = [str(executable), "-c", str(self.conf), "-l", str(home / "cos.log")]
        env = {**clean_env(), "HOME": str(home)}
        self.run_env = {**env, "HTTP_PROXY": f"http://{emulator.endpoint}"}
        subprocess.run(
            [*self.base, "config", "-a", emulator.secret_id, "-s", emulator.secret_key, "-b", bucket,
             "-r", REGION, "--do-not-use-ssl"],
            env=env, check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        # coscmd's smallest multipart threshold is 20 MB (default 100 MB).
        with self.conf.open("a") as conf:
            conf.write("multiupload_threshold = 20\nmultidownload_threshold = 20\n")

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.base, *args], env=self.run_env, capture_output=True, text=True, timeout=120, check=False
        )


@pytest.fixture
def coscmd(emulator: EmulatorProcess, bucket: str, tmp_path: Path) -> Coscmd:
    executable = clients_venv() / "bin" / "coscmd"
    if not executable.exists():
        pytest.skip(
            f"coscmd not installed: set CVMJOB_CLIENTS_VENV to a virtualenv with coscmd (looked at {executable})"
        )
    return Coscmd(executable, tmp_path, emulator, bucket)


def test_upload_list_info_download_delete(coscmd: Coscmd, cos: CosS3Client, bucket: str, tmp_path: Path) -> None:
    small = tmp_path / "small.txt"
    small.write_bytes(b"small file\n")
    big = tmp_path / "f22m.bin"
    big.write_bytes(os.urandom(22 * MiB))

    assert coscmd("upload", str(small), "docs/small file.txt").returncode == 0
    assert coscmd("upload", str(big), "big/f22m.bin").returncode == 0
    assert cos.head_object(Bucket=bucket, Key="big/f22m.bin")["ETag"].endswith('-22"')  # went multipart

    listed = coscmd("list", "docs/")
    assert listed.returncode == 0
    assert "docs/small file.txt" in listed.stdout
    root = coscmd("list")
    assert root.returncode == 0
    assert "big/" in root.stdout and "DIR" in root.stdout

    info = coscmd("info", "docs/small file.txt")
    assert info.returncode == 0
    assert cos.head_object(Bucket=bucket, Key="docs/small file.txt")["ETag"] in info.stdout

    downloaded = tmp_path / "f22m.dl"
    assert coscmd("download", "-f", "big/f22m.bin", str(downloaded)).returncode == 0
    assert downloaded.read_bytes() == big.read_bytes()
    small_back = tmp_path / "small.dl"
    assert coscmd("download", "-f", "docs/small file.txt", str(small_back)).returncode == 0
    assert small_back.read_bytes() == small.read_bytes()

    assert coscmd("delete", "-f", "docs/small file.txt").returncode == 0
    assert not cos.object_exists(Bucket=bucket, Key="docs/small file.txt")


def test_failure_exits_255(coscmd: Coscmd, tmp_path: Path) -> None:
    coscmd.conf.write_text(coscmd.conf.read_text().replace("secret_key = ", "secret_key = wrong"))
    small = tmp_path / "small.txt"
    small.write_bytes(b"x")
    failed = coscmd("upload", str(small), "docs/x.txt")
    assert failed.returncode == 255
    assert "SignatureDoesNotMatch" in failed.stdout + failed.stderr
