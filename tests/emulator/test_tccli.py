"""tccli, the official Tencent Cloud command line, against the emulator (client-recipes §4.1): it reaches plain HTTP
only through an ``--endpoint`` that carries ``http://``, prints the JSON response on success (exit 0) and the
SDK exception on stderr on failure (exit 255)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.emulator.conftest import REGION
from tests.emulator.cvm_support import IMAGE, SMALL, ZONE, wait_for
from tests.emulator_process import EmulatorProcess, clean_env

pytestmark = pytest.mark.clients


def clients_venv() -> Path:
    configured = os.environ.get("CVMJOB_CLIENTS_VENV")
    return Path(configured) if configured else Path(__file__).resolve().parents[2] / ".venv-clients"


class Tccli:
    """tccli with a scratch $HOME (it writes its configuration and log there) and the keys in the environment."""

    def __init__(self, executable: Path, home: Path, emulator: EmulatorProcess) -> None:
        self.executable = executable
        self.endpoint = f"http://{emulator.endpoint}"
        self.env = {**clean_env(), "HOME": str(home), "TENCENTCLOUD_SECRET_ID": emulator.secret_id,
                    "TENCENTCLOUD_SECRET_KEY": emulator.secret_key}

    def __call__(self, service: str, action: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.executable), service, action, "--region", REGION, "--endpoint", self.endpoint, *args],
            env=self.env, capture_output=True, text=True, timeout=60, check=False,
        )

    def json(self, service: str, action: str, *args: str) -> Any:
        result = self(service, action, *args)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)


@pytest.fixture
def tccli(emulator: EmulatorProcess, tmp_path: Path) -> Tccli:
    executable = clients_venv() / "bin" / "tccli"
    if not executable.exists():
        pytest.skip(
            f"tccli not installed: set CVMJOB_CLIENTS_VENV to a virtualenv with tccli (looked at {executable})"
        )
    return Tccli(executable, tmp_path, emulator)


def test_run_describe_terminate(emulator: EmulatorProcess, tccli: Tccli) -> None:
    zones = tccli.json("cvm", "DescribeZones")
    assert zones["TotalCount"] == 4 and ZONE in {z["Zone"] for z in zones["ZoneSet"]}

    launched = tccli.json(
        "cvm", "RunInstances", "--Placement", json.dumps({"Zone": ZONE}), "--ImageId", IMAGE,
        "--InstanceType", SMALL, "--InstanceName", "from-tccli",
        "--TagSpecification", json.dumps([{"ResourceType": "instance", "Tags": [{"Key": "via", "Value": "tccli"}]}]),
    )
    (instance_id,) = launched["InstanceIdSet"]
    assert launched["RequestId"]

    emulator.admin.advance(1)
    described = tccli.json("cvm", "DescribeInstances", "--InstanceIds", json.dumps([instance_id]))
    assert described["TotalCount"] == 1
    (inst,) = described["InstanceSet"]
    assert (inst["InstanceState"], inst["InstanceName"], inst["Tags"]) == (
        "RUNNING", "from-tccli", [{"Key": "via", "Value": "tccli"}])

    assert tccli("cvm", "TerminateInstances", "--InstanceIds", json.dumps([instance_id])).returncode == 0
    emulator.admin.advance(1)
    wait_for(
        lambda: tccli.json("cvm", "DescribeInstances", "--InstanceIds", json.dumps([instance_id]))["TotalCount"] == 0,
        what="the instance to be gone",
    )


def test_errors_exit_255_with_the_code_on_stderr(tccli: Tccli) -> None:
    result = tccli("cvm", "TerminateInstances", "--InstanceIds", json.dumps(["ins-00000000"]))
    assert result.returncode == 255
    assert result.stdout == ""
    assert "code:InvalidInstanceId.NotFound" in result.stderr
