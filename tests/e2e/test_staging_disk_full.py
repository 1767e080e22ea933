"""A disk that fills while the workdir is archived: the job fails saying so, with nothing created in the cloud
(issue 27, item 11: it stayed in STAGING, and `cvmjob run` died with a traceback)."""

from __future__ import annotations

import random
import resource
import subprocess
from pathlib import Path

import pytest

from orchestrator.state.machine import EXIT_CODES, JobState
from tests.e2e.conftest import REPO, Cli, cos_keys
from tests.e2e.spot_support import STATE_BUCKET, job_folder

pytestmark = pytest.mark.e2e

LIMIT = 8_000_000  # bytes a file of the `cvmjob run` process may hold: its store and logs fit, the archive not


def _limit_file_size() -> None:
    # RLIMIT_FSIZE fails a write past it with EFBIG (Python ignores SIGXFSZ), as a full disk fails it with ENOSPC,
    # deterministically and for root too.
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


def test_a_disk_full_while_bundling_fails_the_job_with_the_reason_and_creates_nothing(cli: Cli, tmp_path: Path) -> None:
    spec = job_folder(tmp_path)
    (spec.parent / "weights.bin").write_bytes(random.Random(1).randbytes(LIMIT + 1_000_000))  # incompressible
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    cli.extra_env["TMPDIR"] = str(scratch)
    done = subprocess.run(cli.argv("run", str(spec), "--set", "snapshot.enabled=false"), env=cli.env(),
                          capture_output=True, text=True, timeout=300, cwd=REPO, check=False,
                          preexec_fn=_limit_file_size)
    printed = done.stdout + done.stderr
    assert done.returncode == EXIT_CODES[JobState.FAILED_ERROR], printed
    assert "Traceback" not in printed, printed
    assert "cannot write the workdir archive" in printed and "File too large" in printed, printed
    assert "MB free in" in printed, printed

    status = cli.status()
    assert status["state"] == JobState.FAILED_ERROR.value, status
    assert cli.emulator.admin.instances() == []  # only the plan's DryRun reached RunInstances
    shipped = [key for key in cos_keys(cli.emulator, STATE_BUCKET) if "/bundle/" in key or key.endswith("spec.json")]
    assert shipped == []  # the job's record is there; no spec, archive nor wheel
    assert list(scratch.iterdir()) == []  # the partial archive and its folder are gone
