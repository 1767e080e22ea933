"""`cvmjob run` through its whole life on the emulator: the quickstart, a failing training, bad specs."""

from __future__ import annotations

import base64
import itertools
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from tencentcloud.billing.v20180709 import billing_client
from tencentcloud.billing.v20180709 import models as billing_models
from tencentcloud.common import credential
from tencentcloud.cvm.v20170312 import cvm_client
from tencentcloud.cvm.v20170312 import models as cvm_models

from orchestrator.errors import EXIT_BAD_INPUT
from orchestrator.state.machine import EXIT_CODES, JobState
from tests.e2e.conftest import E2E_SECRET_KEY, QUICKSTART, REGION, Cli, cos_keys
from tests.emulator.conftest import profile

pytestmark = pytest.mark.e2e

PHASES = ["PENDING", "STAGING", "LAUNCHING", "BOOTING", "RUNNING", "IMAGING", "TEARING_DOWN", "SUCCEEDED"]


def balance_fen(cli: Cli) -> int:
    client = billing_client.BillingClient(
        credential.Credential(cli.emulator.secret_id, cli.emulator.secret_key), REGION, profile(cli.emulator)
    )
    return int(client.DescribeAccountBalance(billing_models.DescribeAccountBalanceRequest()).Balance)


def cvm(cli: Cli) -> cvm_client.CvmClient:
    return cvm_client.CvmClient(
        credential.Credential(cli.emulator.secret_id, cli.emulator.secret_key), REGION, profile(cli.emulator)
    )


def test_quickstart_runs_its_whole_life(cli: Cli) -> None:
    before = balance_fen(cli)
    listed_before, started = listings(cli), time.monotonic()
    result = cli.run("run", str(QUICKSTART), "--output", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    # The controller lists its agents' signals about once a second (controller.engine.SIGNALS_SECONDS): it once
    # listed again as soon as COS answered, a hundred billed requests a second for the whole life of a job.
    seconds = time.monotonic() - started
    assert listings(cli) - listed_before <= 2 * seconds + 20, (listings(cli) - listed_before, seconds)
    job = json.loads(result.stdout)
    job_id = job["job_id"]
    assert job["state"] == "SUCCEEDED" and job["exit_code"] == 0

    # every phase, in order, with timestamps
    phases = job["phases"]
    assert [p["state"] for p in phases] == PHASES
    assert all(p["entered_at"] > 0 for p in phases)
    assert all(a["entered_at"] <= b["entered_at"] for a, b in itertools.pairwise(phases))

    # COS holds the checkpoints, the manifest (written last) and the outputs
    keys = cos_keys(cli.emulator, "cvmjob-ap-guangzhou-1250000000", f"cvmjob/{job_id}/")
    assert any(k.startswith(f"cvmjob/{job_id}/checkpoints/manifest/") for k in keys)
    assert any(k.startswith(f"cvmjob/{job_id}/checkpoints/step-") for k in keys)
    assert any(k.startswith(f"cvmjob/{job_id}/outputs/") for k in keys)
    assert job["checkpoints"] and job["checkpoints"][-1]["step"] == 59  # index of the last of 60 steps

    # the custom image exists and is NORMAL
    image_id = job["image_id"]
    request = cvm_models.DescribeImagesRequest()
    request.ImageIds = [image_id]
    images = cvm(cli).DescribeImages(request).ImageSet
    assert [(i.ImageId, i.ImageState) for i in images] == [(image_id, "NORMAL")]
    # GN7 booted Ubuntu 22.04, which has no driver: Tencent's auto-install put it on, and the snapshot keeps it
    system = cli.emulator.state_dir / "images" / image_id
    smi = next(system.rglob("usr/bin/nvidia-smi"))
    assert "NVIDIA driver 535.161.07" in smi.read_text()
    assert "NVIDIA driver 535.161.07 installed" in next(system.rglob("tmp/auto_install.log")).read_text()

    # no instance remains
    request = cvm_models.DescribeInstancesRequest()
    flt = cvm_models.Filter()
    flt.Name, flt.Values = "tag:cvmjob:job", [job_id]
    request.Filters = [flt]
    assert cvm(cli).DescribeInstances(request).TotalCount == 0
    assert no_instance_left(cli)

    # the bill is recorded and is what the account paid
    assert job["cost_cny"] > 0
    assert before - balance_fen(cli) == round(job["cost_cny"] * 100)

    # the long-term SecretKey is nowhere: not in UserData, COS objects, logs or the state store
    assert_secret_absent(cli, job_id)
    assert_dry_run_sent_what_the_launch_sent(cli, job_id)


def assert_dry_run_sent_what_the_launch_sent(cli: Cli, job_id: str) -> None:
    """The plan's DryRun asked for the network, image and UserData the launch then sent: only the job's names and
    its presigned URLs differ."""
    [probe, launch] = [c["params"] for c in cli.emulator.admin.calls(action="RunInstances")]
    assert probe["DryRun"] is True and "DryRun" not in launch

    def script(params: dict[str, Any], job: str) -> str:
        text = base64.b64decode(params["UserData"]).decode()
        return re.sub(r"'https?://[^']*'", "URL", text.replace(job, "JOB"))

    assert script(probe, "plan-dry-run") == script(launch, job_id)
    assert "DRIVER_VERSION=535.161.07" in script(launch, job_id)  # GN7 on Ubuntu: the driver installs at boot
    for field in ("ImageId", "VirtualPrivateCloud", "SecurityGroupIds", "InternetAccessible", "Placement",
                  "InstanceType", "InstanceChargeType", "SystemDisk", "DataDisks", "CamRoleName"):
        assert probe.get(field) == launch.get(field), field


def listings(cli: Cli) -> int:
    """The listings (GET Bucket) the state bucket was sent so far."""
    return cli.emulator.admin.cos_requests("cvmjob-ap-guangzhou-1250000000").get("GetBucket", 0)


def no_instance_left(cli: Cli) -> bool:
    """Every instance the emulator ever ran is released and its processes are dead."""
    return all(i["state"] == "TERMINATED" and not i["alive"] for i in cli.emulator.admin.instances())


def assert_secret_absent(cli: Cli, job_id: str) -> None:
    from tests.emulator.conftest import make_cos

    client = make_cos(cli.emulator)
    for bucket in ("cvmjob-ap-guangzhou-1250000000", "cvmjob-examples-1250000000"):
        for key in cos_keys(cli.emulator, bucket):
            body = client.get_object(Bucket=bucket, Key=key)["Body"].get_raw_stream().read()
            assert E2E_SECRET_KEY.encode() not in body, f"cos://{bucket}/{key}"
    roots = [cli.home, cli.emulator.state_dir / "instances", cli.emulator.state_dir / "state.json"]
    for root in roots:
        paths = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
        for path in paths:
            assert E2E_SECRET_KEY.encode() not in path.read_bytes(), path
    logs = cli.run("logs", job_id)
    assert logs.returncode == 0 and E2E_SECRET_KEY not in logs.stdout
    assert "step=" in logs.stdout  # the training's log was shipped


def failing_job(tmp_path: Path, keep: bool = False) -> Path:
    tmp_path = tmp_path / "job"
    tmp_path.mkdir()
    (tmp_path / "fail.py").write_text(
        "import sys\nprint('about to fail', flush=True)\nprint('boom: the loss went NaN', flush=True)\nsys.exit(3)\n"
    )
    teardown = "teardown: {on_failure: keep, keep_for: 1m}\n" if keep else ""  # the shortest allowed
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: failing\nregion: ap-guangzhou\ninstance: {type: S5.MEDIUM4}\n"
        "train: {command: python fail.py, cpu_nproc: 1}\nlimits: {max_runtime: 20m}\n" + teardown
    )
    return spec


def test_a_failing_training_exits_with_its_code_shows_the_log_and_leaves_nothing(cli: Cli, tmp_path: Path) -> None:
    result = cli.run("run", str(failing_job(tmp_path)))
    assert result.returncode == EXIT_CODES[JobState.FAILED], result.stdout + result.stderr
    assert "boom: the loss went NaN" in result.stdout  # the log tail is shown
    status = cli.status()
    assert status["state"] == "FAILED" and status["image_id"] is None
    assert status["result"]["exit_code"] == 3  # the script's own code, not torchrun's 1
    assert no_instance_left(cli)
    assert cli.emulator.admin.calls(action="CreateImage") == []


def test_a_setup_that_installs_from_pypi_without_a_public_ip_fails_naming_the_mirror(cli: Cli, tmp_path: Path) -> None:
    spec = failing_job(tmp_path)
    # The machine's pip configuration may name local indexes: ignored, as on a fresh instance.
    pip = "PIP_CONFIG_FILE=/dev/null python3 -m pip install --index-url https://pypi.org/simple --retries 1 tinydb"
    spec.write_text(spec.read_text() + f"setup: [{pip!r}]\n")
    result = cli.run("run", str(spec))
    assert result.returncode == EXIT_CODES[JobState.FAILED_SETUP], result.stdout + result.stderr
    reason = cli.status()["reason"]
    assert reason.startswith(f"setup_failed: setup command 1 ({pip!r}) exited with 1: it could not reach the "
                             "network, and this "
                             "instance has no public IP, so it reaches only Tencent's mirror "
                             "http://mirrors.tencentyun.com/pypi/simple"), reason
    assert "\n" not in reason
    assert no_instance_left(cli)


def test_a_failed_instance_is_kept_for_the_configured_time_then_destroyed(cli: Cli, tmp_path: Path) -> None:
    process = cli.start("run", str(failing_job(tmp_path, keep=True)))
    try:
        status = cli.wait_for(lambda s: s["state"] == "KEEPING")
        assert [i["state"] for i in cli.emulator.admin.instances()] == ["RUNNING"]
        assert process.wait(timeout=180) == EXIT_CODES[JobState.FAILED], cli.output()
    finally:
        process.kill()
        process.wait()
    assert no_instance_left(cli)
    entered = {p["state"]: p for p in cli.status(status["job_id"])["phases"]}
    kept = entered["KEEPING"]["left_at"] - entered["KEEPING"]["entered_at"]
    assert 60 <= kept < 90, kept  # teardown: keep_for: 1m


BAD_SPECS = {
    "misspelt field": (["--set", "trian.command=python x.py"], "trian", "did you mean 'train'?"),
    "unknown instance type": (["--set", "instance.type=GN7.2XLARGE23"], "instance.type", "GN7.2XLARGE32"),
    "malformed COS URI": (["--set", "data.0.source=s3://bucket/x/"], "data.0.source", "cos://"),
    "missing bucket": (
        ["--set", "data.0.source=cos://missing-1250000000/x/"],
        "data.0.source",
        "missing-1250000000 does not exist",
    ),
    "negative count": (["--set", "train.nnodes=-1"], "train.nnodes", "allowed: 1..64"),
    "vGPU type for a full-GPU job": (["--set", "instance.type=GN7.2XLARGE40"], "instance", "GN7.2XLARGE32"),
}


@pytest.mark.parametrize("case", list(BAD_SPECS))
def test_bad_specs_fail_with_one_clear_error_and_create_nothing(cli: Cli, case: str) -> None:
    overrides, path, hint = BAD_SPECS[case]
    result = cli.run("run", str(QUICKSTART), *overrides, timeout=120)
    assert result.returncode == EXIT_BAD_INPUT, result.stdout + result.stderr
    error = result.stderr.strip()
    assert error.startswith("error:") and "Traceback" not in error
    assert path in error and hint in error, error
    assert len(error.splitlines()) == 1, error
    assert cli.emulator.admin.calls(action="RunInstances") == []


def test_a_job_in_a_second_region_runs_with_its_own_state_bucket_and_data_of_its_region(cli: Cli,
                                                                                      tmp_path: Path) -> None:
    """The instance reaches COS of its own region only (the emulator refuses the rest, as Tencent's network does):
    its state bucket and its data are ap-shanghai's, found and made by name."""
    cli.emulator.admin.seed("data-sh-1250000000", "quickstart/", QUICKSTART.parent / "dataset", region="ap-shanghai")
    job = tmp_path / "job"
    job.mkdir()
    (job / "check.py").write_text(
        "import os, pathlib, sys\n"
        "found = sorted(p.name for p in pathlib.Path(os.environ['CVMJOB_DATA_DIR'], 'mnist').iterdir())\n"
        "print('synced', found, flush=True)\n"
        "sys.exit(0 if 'x_train.npy' in found else 4)\n")
    spec = job / "job.yaml"
    spec.write_text("name: shanghai\nregion: ap-shanghai\ninstance: {type: S5.MEDIUM4}\n"
                    "data: [{source: 'cos://data-sh-1250000000/quickstart/', target: mnist}]\n"
                    "train: {command: python check.py, cpu_nproc: 1}\nlimits: {max_runtime: 20m}\n")
    result = cli.run("run", str(spec), "--output", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    job_id = json.loads(result.stdout)["job_id"]
    assert cos_keys(cli.emulator, "cvmjob-ap-shanghai-1250000000", f"cvmjob/{job_id}/job.json", "ap-shanghai")
    [_, launch] = [c["params"] for c in cli.emulator.admin.calls(action="RunInstances")]
    assert launch["Placement"]["Zone"].startswith("ap-shanghai-"), launch
    assert no_instance_left(cli)
    # The same job with the data of ap-guangzhou is refused before anything is made, in one line.
    spec.write_text(spec.read_text().replace("data-sh-1250000000", "cvmjob-examples-1250000000"))
    refused = cli.run("plan", str(spec))
    assert refused.returncode == EXIT_BAD_INPUT and refused.stderr.count("\n") == 1, refused.stderr
    assert refused.stderr.startswith("error: data.0.source: bucket cvmjob-examples-1250000000 is in ap-guangzhou and "
                                     "the job runs in ap-shanghai"), refused.stderr
    # Allowed, over a public IP: the agent reads it in ap-guangzhou (the emulator refuses an instance without one).
    result = cli.run("run", str(spec), "--output", "json", "--set", "network.allow_cross_region=true",
                     "--set", "network.public_ip.bandwidth_mbps=10")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "synced ['x_train.npy'" in cli.run("logs", json.loads(result.stdout)["job_id"]).stdout
