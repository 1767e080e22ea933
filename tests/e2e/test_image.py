"""A job's custom image launches clean: cloud-init runs every per-boot script at every boot, the first boot of an
instance made from the image included, so whatever of the job the image kept would run again (its agent, with
the job's keys and presigned URLs). The agent cleans the disk before the image is taken (agent/seal.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.contract import AgentConfig, JobLayout
from tests.e2e.conftest import QUICKSTART, Cli
from tests.e2e.spot_support import job_folder, tiny_command
from tests.e2e.test_run import cvm
from tests.emulator.conftest import make_cos
from tests.emulator.cvm_support import admin_instance, call, launch_params, user_data, wait_file, wait_state

pytestmark = pytest.mark.e2e

SHORT = ("--set", f"train.command={tiny_command(12, 0.05, 6)}")  # the image is the subject, not the training
STATE_BUCKET = "cvmjob-ap-guangzhou-1250000000"


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_a_jobs_image_holds_nothing_of_the_job_and_a_job_launched_from_it_works(cli: Cli, tmp_path: Path) -> None:
    spec = job_folder(tmp_path)
    made = cli.run("run", str(spec), *SHORT, "--output", "json")
    assert made.returncode == 0, made.stdout + made.stderr
    job = json.loads(made.stdout)
    image_id, job_id = job["image_id"], job["job_id"]
    assert job["state"] == "SUCCEEDED" and image_id
    assert job["result"]["image"]["data"] == [] and job["result"]["image"]["problem"] == ""
    imaging = next(p for p in job["phases"] if p["state"] == "IMAGING")
    assert "it holds the base image and no job data; the job's keys, agent and logs were removed" in imaging["reason"]
    cos = make_cos(cli.emulator)
    layout = JobLayout(job_id)
    config = AgentConfig.model_validate_json(cos.get_object(Bucket=STATE_BUCKET, Key=layout.agent_config(1, 0))[
        "Body"].get_raw_stream().read())
    assert config.keys is not None

    # An instance launched from the image with a plain UserData of its own.
    client = cvm(cli)
    plain = "#!/bin/bash\necho plain boot > \"$HOME/plain.txt\"\n"
    (instance_id,) = call(client, "RunInstances", launch_params(ImageId=image_id, UserData=user_data(plain))
                          ).InstanceIdSet
    wait_state(client, instance_id, "RUNNING", timeout=30)
    system = Path(admin_instance(cli.emulator, instance_id)["system"])
    assert wait_file(system / "root" / "plain.txt", timeout=30) == "plain boot\n"
    files = _files(system)
    leftovers = [f for f in files if f.startswith((f"opt/cvmjob/{job_id}", "opt/cvmjob/data/"))
                 or "cvmjob-agent" in f]
    assert leftovers == [], leftovers
    assert files["var/lib/cloud/instance/user-data.txt"] == plain.encode()
    secrets = (config.keys.secret_id.encode(), config.keys.token.encode(), b"q-signature", job_id.encode())
    holding = {f for f, data in files.items() for s in secrets if s in data} - {"opt/cvmjob/image.json"}
    assert holding == set(), holding  # the image's own description names the job that made it, and nothing else
    described = json.loads(files["opt/cvmjob/image.json"])
    assert (described["job_id"], described["data"], described["problem"]) == (job_id, [], "")
    assert "cvmjob-agent" not in files["var/log/cloud-init-output.log"].decode()
    call(client, "TerminateInstances", {"InstanceIds": [instance_id]})

    # A job launched from that image, named by the job that made it, runs; the old job hears nothing of it.
    from_job = ("--set", "image.from_job=quickstart", "--set", "snapshot.enabled=false")
    planned = cli.run("plan", str(QUICKSTART), *from_job, "--output", "json")
    assert planned.returncode == 0 and json.loads(planned.stdout)["plan"]["image_id"] == image_id, planned.stderr
    old_status = cos.get_object(Bucket=STATE_BUCKET, Key=layout.status(1, 0))["Body"].get_raw_stream().read()
    again = cli.run("run", str(spec), *SHORT, *from_job, "--output", "json")
    assert again.returncode == 0, again.stdout + again.stderr
    assert json.loads(again.stdout)["state"] == "SUCCEEDED"
    assert cos.get_object(Bucket=STATE_BUCKET, Key=layout.status(1, 0))["Body"].get_raw_stream().read() == old_status
    assert cos.list_objects(Bucket=STATE_BUCKET, Prefix=layout.attempt_prefix(2)).get("Contents", []) == []

    unknown = cli.run("plan", str(QUICKSTART), "--set", "image.from_job=never-ran")
    assert unknown.returncode == 2, unknown.stdout + unknown.stderr
    assert "image.from_job: no ready image made by a job named 'never-ran'" in unknown.stderr
