"""The library face's tests: a real store on SQLite, and the shared emulator seen as `cvmjob` sees a cloud (its
endpoint and keys in the environment, a home of its own, nothing inherited that would steer a lookup)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.providers.tencent import StaticCredential, TencentSdk
from orchestrator.state.store import Store
from orchestrator.target import Target
from tests.emulator_process import EmulatorProcess
from tests.records import REGION

# What would steer a lookup, a job's labels or the choice of cloud, were the test run to inherit it.
INHERITED = ("CVMJOB_REGION", "CVMJOB_STATE_BUCKET", "CVMJOB_DB", "CVMJOB_EMULATOR", "CVMJOB_REF", "CI",
             "TENCENTCLOUD_SESSION_TOKEN", "TENCENTCLOUD_APPID", "TENCENTCLOUD_ROLE_ARN", "TENCENTCLOUD_PROFILE",
             "GITHUB_REF_NAME", "GITHUB_SHA", "GITHUB_RUN_ID", "GITHUB_SERVER_URL", "GITHUB_REPOSITORY",
             "CI_COMMIT_REF_NAME", "CI_COMMIT_SHA", "CI_PIPELINE_URL")


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home of the test's own; no cloud chosen, nothing inherited."""
    for name in INHERITED:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("CVMJOB_ENDPOINT", raising=False)
    monkeypatch.setenv("CVMJOB_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / "state.db")
    yield opened
    opened.close()


@pytest.fixture
def cloud(emulator: EmulatorProcess, monkeypatch: pytest.MonkeyPatch) -> EmulatorProcess:
    """The shared emulator (reset) as the cloud of `cvmjob`: its endpoint and keys in the environment."""
    monkeypatch.setenv("CVMJOB_ENDPOINT", emulator.endpoint)
    monkeypatch.setenv("TENCENTCLOUD_SECRET_ID", emulator.secret_id)
    monkeypatch.setenv("TENCENTCLOUD_SECRET_KEY", emulator.secret_key)
    return emulator


@pytest.fixture
def sdk(cloud: EmulatorProcess) -> TencentSdk:
    return TencentSdk(StaticCredential(cloud.secret_id, cloud.secret_key), REGION, cloud.endpoint, cloud.appid)


@pytest.fixture
def target(cloud: EmulatorProcess) -> Target:
    """Where a job of the emulator is recorded to run (what api.plan resolves with CVMJOB_ENDPOINT set)."""
    return Target("emulator", REGION, cloud.appid, cloud.endpoint)
