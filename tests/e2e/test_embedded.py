"""The embedded default: with no credentials anywhere, `cvmjob run` starts the local emulator for the job's
duration and says so; commands that need a finished job's cloud (its checkpoints, its logs) start it again, and
stop it after."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import QUICKSTART, QUICKSTART_DATA, REPO
from tests.e2e.spot_support import job_folder, tiny_command
from tests.emulator_process import clean_env

pytestmark = pytest.mark.e2e


def test_without_credentials_the_embedded_emulator_runs_the_job_and_serves_its_logs_afterwards(tmp_path: Path) -> None:
    # Nor CI (the tests' runner's): under CI no keys is an error (tests/e2e/test_ci_mode.py).
    env = {k: v for k, v in clean_env().items() if not k.startswith(("TENCENTCLOUD_", "CVMJOB_")) and k != "CI"}
    env.update(HOME=str(tmp_path / "user"), CVMJOB_HOME=str(tmp_path / "cvmjob-home"))  # no ~/.tencentcloud either
    server_info = tmp_path / "cvmjob-home" / "emulator" / "server.json"

    def cvmjob(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "orchestrator.cli.main", *args]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, cwd=REPO, check=False)

    # The README's quick start: the emulator's own command seeds the example data; cvmjob itself never does.
    destination = f"cos://{QUICKSTART_DATA.bucket}/{QUICKSTART_DATA.prefix}"
    seeded = cvmjob("emulator", "seed", str(QUICKSTART.parent / "dataset"), destination)
    files = len(list((QUICKSTART.parent / "dataset").iterdir()))
    assert seeded.returncode == 0 and seeded.stdout.startswith(f"seeded {files} files"), seeded.stdout + seeded.stderr
    assert not server_info.exists(), "the embedded emulator started for `emulator seed` was left running"
    again = cvmjob("emulator", "seed", str(QUICKSTART.parent / "dataset"), destination)
    assert "already holds objects: nothing seeded" in again.stdout, again.stdout + again.stderr
    missing = cvmjob("emulator", "seed", str(tmp_path / "nowhere"), destination)
    assert missing.returncode == 2 and missing.stderr.startswith("error: ") and "Traceback" not in missing.stderr

    # The quickstart with tiny.py for a training: the subject is the emulator that starts and stops with cvmjob.
    short = ("--set", "snapshot.enabled=false", "--set", f"train.command={tiny_command(12, 0.1, 4)}")
    run = cvmjob("run", str(job_folder(tmp_path)), *short)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "Running on the local Tencent Cloud emulator (no Tencent Cloud credentials were found)" in run.stdout
    assert not server_info.exists(), "the embedded emulator outlived the job"

    job = json.loads(cvmjob("status", "--output", "json").stdout)
    assert job["state"] == "SUCCEEDED" and job["checkpoints"], job  # the manifest, read from the restarted emulator
    assert [j["job_id"] for j in json.loads(cvmjob("ls", "--output", "json").stdout)] == [job["job_id"]]
    assert json.loads(cvmjob("ls", "--active", "--output", "json").stdout) == []
    logs = cvmjob("logs", job["job_id"])
    assert logs.returncode == 0, logs.stderr
    assert "step=11" in logs.stdout, logs.stdout[-2000:]
    assert not server_info.exists(), "the embedded emulator started for `logs` was left running"

    # Bad references and options: one `error:` line each, exit 2, no traceback.
    for bad in (["logs", ""], ["logs", job["job_id"], "--attempt", "9"], ["logs", job["job_id"], "--node", "-1"],
                ["status", "job_"], ["gc", "--dry-run", "--grace", "banana"]):
        refused = cvmjob(*bad)
        assert refused.returncode == 2 and refused.stderr.count("error:") == 1, (bad, refused.stderr)
        assert "Traceback" not in refused.stderr + refused.stdout, bad
    env["CVMJOB_HOME"] = str(QUICKSTART)  # a file
    refused = cvmjob("ls")
    expected = f"{QUICKSTART} cannot hold cvmjob's files (it is a file): set CVMJOB_HOME to a folder you can write"
    assert (refused.returncode, refused.stderr) == (2, f"error: {expected}\n")
