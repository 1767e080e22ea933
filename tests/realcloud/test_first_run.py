"""The first real run, for a user with a Tencent Cloud account (never run by CI: no machine there reaches Tencent
Cloud). `CVMJOB_REALCLOUD=1 pytest -m realcloud tests/realcloud` with TENCENTCLOUD_SECRET_ID, _SECRET_KEY and
TENCENTCLOUD_APPID set (CVMJOB_REGION: the region, default ap-guangzhou). It spends money, capped by the job's
max_cost: `cvmjob doctor`, then the quickstart on the cheapest spot T4 with 15 minutes of training at most, then
`cvmjob gc --dry-run` must find nothing left. README "A first run on Tencent Cloud" says what it costs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.providers.tencent import StaticCredential, TencentSdk
from orchestrator.providers.tencent.storage import ObjectStore

pytestmark = [
    pytest.mark.realcloud,
    pytest.mark.skipif(not (os.environ.get("TENCENTCLOUD_SECRET_ID") and os.environ.get("CVMJOB_REALCLOUD") == "1"),
                       reason="spends money on Tencent Cloud: set TENCENTCLOUD_SECRET_ID and CVMJOB_REALCLOUD=1"),
]
REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "jobs" / "quickstart"
REGION = os.environ.get("CVMJOB_REGION") or "ap-guangzhou"
MAX_COST_CNY = 5  # the job's limits.max_cost: the run stops there whatever happens


def cvmjob(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CVMJOB_ENDPOINT", "CVMJOB_EMULATOR")}
    return subprocess.run([sys.executable, "-m", "orchestrator.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO, check=False)


def test_doctor_then_the_quickstart_on_spot_then_nothing_left(tmp_path: Path) -> None:
    doctor = cvmjob("doctor", "--region", REGION, timeout=300)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr

    # The quickstart's data, in the region's own state bucket (an instance reaches COS of its region only).
    appid = os.environ["TENCENTCLOUD_APPID"]
    sdk = TencentSdk(StaticCredential(os.environ["TENCENTCLOUD_SECRET_ID"], os.environ["TENCENTCLOUD_SECRET_KEY"]),
                     REGION, None, appid)
    state = ObjectStore(sdk, f"cvmjob-{REGION}-{appid}")
    if not state.bucket_exists():
        state.create_bucket()
    for path in sorted((QUICKSTART / "dataset").iterdir()):
        state.upload_file(path, f"cvmjob/_realcloud/quickstart/{path.name}")

    run = cvmjob(
        "run", str(QUICKSTART / "job.yaml"), "--output", "json",
        "--set", f"region={REGION}",
        "--set", "instance={need: {gpu: T4, count: 1}}",
        "--set", "billing.mode=spot",
        "--set", f"data.0.source=cos://cvmjob-{REGION}-{appid}/cvmjob/_realcloud/quickstart/",
        # Ubuntu's python3 has no torch: pip brings it from Tencent's in-VPC mirror (the CUDA wheels).
        "--set", "setup=['python3 -m pip install torch numpy']",
        "--set", "snapshot.enabled=false",
        "--set", "limits.max_runtime=15m",
        "--set", "limits.bootstrap_timeout=25m",  # the driver's install at boot takes about 10 minutes
        "--set", f"limits.max_cost={MAX_COST_CNY}",
        timeout=3600)
    assert run.returncode == 0, run.stdout + run.stderr
    job = json.loads(run.stdout)
    assert job["state"] == "SUCCEEDED" and job["checkpoints"], job

    left = cvmjob("gc", "--dry-run", "--region", REGION, "--output", "json", "--grace", "0s", timeout=300)
    assert left.returncode == 0, left.stderr
    assert json.loads(left.stdout) == {"instances": [], "images": [], "dry_run": True}
