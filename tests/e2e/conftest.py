"""End-to-end: the `cvmjob` CLI as a user runs it, against a real emulator process, with the real agent and
torchrun on emulated instances. The emulator runs with its own random SecretKey so tests can prove the key never
leaks anywhere."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from orchestrator.cli.main import job_or_newest, status_document
from orchestrator.emulator.config import DEFAULT_SECRET_ID
from orchestrator.errors import CvmjobError
from orchestrator.spec import load_spec
from orchestrator.state.home import store_url
from orchestrator.state.store import Store
from tests.emulator.conftest import REGION, make_cos
from tests.emulator_process import EmulatorProcess, clean_env, start_emulator

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "jobs" / "quickstart" / "job.yaml"
QUICKSTART_DATA = load_spec(QUICKSTART).data[0].source
E2E_SECRET_KEY = "e2e" + secrets.token_hex(16)


@dataclass
class Cli:
    emulator: EmulatorProcess
    home: Path
    extra_env: dict[str, str] = field(default_factory=dict)  # e.g. CI=true: a test's own, set last

    def env(self) -> dict[str, str]:
        # CI changes what the CLI does (target.in_ci); the tests' own CI (their runner's) is not the CLI's.
        env = {k: v for k, v in clean_env().items() if k != "CI"}
        env.update(
            CVMJOB_HOME=str(self.home),
            CVMJOB_ENDPOINT=self.emulator.endpoint,
            TENCENTCLOUD_SECRET_ID=self.emulator.secret_id,
            TENCENTCLOUD_SECRET_KEY=self.emulator.secret_key,
            PYTHONUNBUFFERED="1",
        )
        env.update(self.extra_env)  # over the defaults: a test's own keys, say
        return env

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "orchestrator.cli.main", *args]

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args), env=self.env(), capture_output=True, text=True, timeout=timeout, cwd=REPO, check=False
        )

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        """A CLI process in the background; its output goes to ``output.log`` under the test's CVMJOB_HOME."""
        self.home.mkdir(parents=True, exist_ok=True)
        with (self.home / "output.log").open("ab") as log:
            return subprocess.Popen(self.argv(*args), env=self.env(), stdout=log, stderr=subprocess.STDOUT, cwd=REPO)

    def output(self) -> str:
        return (self.home / "output.log").read_text(errors="replace")

    def status(self, job: str | None = None) -> dict[str, Any]:
        # A deadline only: 60 s once ran out on a CI machine's loaded cores.
        result = self.run("status", *([job] if job else []), "--output", "json", timeout=180)
        assert result.returncode == 0, result.stderr
        data: dict[str, Any] = json.loads(result.stdout)
        return data

    def look(self, job: str | None = None) -> dict[str, Any]:
        """What `cvmjob status --output json` prints, from the function that command prints, called in this
        process with the CLI's environment: a `cvmjob` process per poll cost about a second of CPU (121 of them
        in a run, docs/testing.md), and the polls only wait. The tests' verdicts still ask the CLI (``status``)."""
        with mock.patch.dict(os.environ, self.env(), clear=True):
            store = Store(store_url())
            try:
                document = status_document(store, job_or_newest(store, job))
            finally:
                store.close()
        parsed: dict[str, Any] = json.loads(json.dumps(document, default=str))  # as print_json writes it
        return parsed

    def wait_for(self, predicate: Any, timeout: float = 180, job: str | None = None) -> dict[str, Any]:
        """The first status (``look``) that satisfies ``predicate``, asked every second. One that fails (no job
        yet, a store in its outage) is asked again."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                status = self.look(job)
            except CvmjobError:
                status = {}
            if status and predicate(status):
                return status
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; last status: {json.dumps(status)[:2000]}")
            time.sleep(1)


@pytest.fixture(scope="session")
def e2e_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorProcess]:
    server = start_emulator(Path(tmp_path_factory.mktemp("e2e")) / "state", secret_key=E2E_SECRET_KEY)
    server.secret_key = E2E_SECRET_KEY
    server.secret_id = DEFAULT_SECRET_ID
    yield server
    server.stop()


@pytest.fixture
def cli(e2e_emulator: EmulatorProcess, tmp_path: Path) -> Cli:
    e2e_emulator.admin.reset()
    seed_quickstart(e2e_emulator)
    os.environ.pop("CVMJOB_HOME", None)
    return Cli(e2e_emulator, tmp_path / "cvmjob-home")


def seed_quickstart(emulator: EmulatorProcess) -> None:
    """The quickstart's dataset where its spec reads it, as the README's `cvmjob emulator seed` puts it."""
    emulator.admin.seed(QUICKSTART_DATA.bucket, QUICKSTART_DATA.prefix, QUICKSTART.parent / "dataset")


def cos_keys(emulator: EmulatorProcess, bucket: str, prefix: str = "", region: str = REGION) -> list[str]:
    client = make_cos(emulator, region=region)
    keys: list[str] = []
    marker = ""
    while True:
        page = client.list_objects(Bucket=bucket, Prefix=prefix, Marker=marker, MaxKeys=1000)
        keys += [c["Key"] for c in page.get("Contents", [])]
        if page.get("IsTruncated") != "true":
            return keys
        marker = page["NextMarker"]


__all__ = ["QUICKSTART", "REGION", "REPO", "Cli", "cos_keys"]
