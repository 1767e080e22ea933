"""Under CI (``CI=true``, as CI systems set it): no silent fallback to the embedded emulator when the secrets are
missing, and a cancelled workflow (SIGTERM, SIGKILL after the runner's grace) leaves no instance behind."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest
from tencentcloud.cvm.v20170312 import cvm_client
from tencentcloud.sts.v20180813 import models as sts_models
from tencentcloud.sts.v20180813 import sts_client

from orchestrator.state.machine import EXIT_CODES, JobState
from tests.e2e.conftest import QUICKSTART, QUICKSTART_DATA, REGION, REPO, Cli
from tests.e2e.spot_support import job_folder
from tests.e2e.test_run import no_instance_left
from tests.e2e.test_signals import LONGER, training
from tests.emulator.conftest import cred, profile
from tests.emulator.cvm_support import call
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e

RUNNER_GRACE = 10.0  # the acceptance's SIGTERM-to-SIGKILL (GitHub's runner: SIGINT, SIGTERM 7.5 s on, SIGKILL 2.5 s on)
TEARDOWN_WITHIN = 60.0  # the bound on the graceful path, SIGTERM to the instance terminated


def test_ci_without_keys_is_refused_before_anything_exists_unless_the_emulator_is_asked_for(
    cli: Cli, tmp_path: Path
) -> None:
    keyless = {k: v for k, v in cli.env().items() if not k.startswith(("TENCENTCLOUD_", "CVMJOB_"))}
    home = tmp_path / "cvmjob-home"
    env = {**keyless, "CI": "true", "HOME": str(tmp_path / "user"), "CVMJOB_HOME": str(home)}

    def cvmjob(*args: str, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(cli.argv(*args), env={**env, **(extra or {})}, capture_output=True, text=True,
                              timeout=120, cwd=REPO, check=False)

    sweep = REPO / "sweeps" / "quickstart" / "sweep.yaml"
    for refused in (cvmjob("run", str(QUICKSTART), "--output", "json"), cvmjob("plan", str(QUICKSTART)),
                    cvmjob("sweep", "run", str(sweep), "--detach"), cvmjob("gc"), cvmjob("pool", "ls")):
        assert refused.returncode == 3, refused.stdout + refused.stderr
        (line,) = refused.stderr.splitlines()
        assert line.startswith("error: CI is set and no Tencent Cloud credentials were found"), line
        assert "TENCENTCLOUD_SECRET_ID" in line and "--emulator" in line and "CVMJOB_EMULATOR=1" in line, line
        assert refused.stdout == ""
    # Nothing was created: no store (no job, no study), no embedded emulator, no call to the cloud.
    assert list(home.rglob("*")) == []
    assert cli.emulator.admin.calls() == []

    # Asked for on purpose, the embedded emulator serves (its data seeded first, as the README's quick start does).
    destination = f"cos://{QUICKSTART_DATA.bucket}/{QUICKSTART_DATA.prefix}"
    seeded = cvmjob("emulator", "seed", str(QUICKSTART.parent / "dataset"), destination)
    assert seeded.returncode == 0, seeded.stdout + seeded.stderr
    for args, extra in ((["--emulator"], {}), ([], {"CVMJOB_EMULATOR": "1"})):
        planned = cvmjob("plan", str(QUICKSTART), "--output", "json", *args, extra=extra)
        assert planned.returncode == 0, (args, extra, planned.stderr)
        assert json.loads(planned.stdout)["target"].startswith("the embedded local emulator")


def where_it_waits(pid: int) -> str:
    """Each thread of a process that outlived its grace: its state and the kernel function it sleeps in (a futex:
    a lock or a join; an fsync; a poll on a socket), to tell from a CI log what held it up."""
    lines = []
    for task in sorted(Path(f"/proc/{pid}/task").glob("*")):
        try:
            state = (task / "stat").read_text().rpartition(")")[2].split()[0]
            lines.append(f"thread {task.name}: {state} in {(task / 'wchan').read_text() or '-'}, "
                         f"syscall {(task / 'syscall').read_text().split()[0]}")
        except OSError as exc:  # gone meanwhile, or /proc says less here
            lines.append(f"thread {task.name}: {exc}")
    return "\n".join(lines)


def test_a_cancelled_ci_workflow_tears_down_at_once(cli: Cli, tmp_path: Path) -> None:
    cli.extra_env["CI"] = "true"
    process = cli.start("run", str(job_folder(tmp_path)), *LONGER, "--output", "json")
    try:
        status = cli.wait_for(training)
        (instance,) = cli.emulator.admin.instances()
        process.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        stuck = ""
        try:
            code: int | None = process.wait(timeout=RUNNER_GRACE)
        except subprocess.TimeoutExpired:
            stuck = where_it_waits(process.pid)
            process.kill()  # the runner's SIGKILL
            process.wait()
            code = None
        ended = time.monotonic() - sent
    finally:
        process.kill()
        process.wait()
    if not cli.emulator.admin.calls(action="TerminateInstances"):  # at worst (a machine too slow for the grace)
        print(f"SIGTERM: no TerminateInstances before the SIGKILL {ended:.1f} s on; the ActionTimer is left")
        outlives_us_until_its_action_timer(cli, instance["instance_id"])
        return
    wait_until("the instance to be terminated", lambda: no_instance_left(cli), TEARDOWN_WITHIN)
    gone = time.monotonic() - sent
    print(f"SIGTERM: cvmjob exited {code} {ended:.1f} s on, its instance terminated {gone:.1f} s on")
    assert gone <= TEARDOWN_WITHIN
    assert code == EXIT_CODES[JobState.CANCELLED], f"{cli.output()}\nstill running after the grace:\n{stuck}"
    final = cli.status(status["job_id"])
    # No checkpoint asked for under CI: nothing resumes a cancelled job, and the runner would not wait for it.
    assert [p["state"] for p in final["phases"]][-3:] == ["RUNNING", "TEARING_DOWN", "CANCELLED"], final["phases"]


def test_a_runner_that_kills_cvmjob_outright_leaves_the_instance_to_its_action_timer(cli: Cli, tmp_path: Path) -> None:
    cli.extra_env["CI"] = "true"
    process = cli.start("run", str(job_folder(tmp_path)), *LONGER, "--output", "json")
    try:
        cli.wait_for(training)
        (instance,) = cli.emulator.admin.instances()
    finally:
        process.kill()  # SIGKILL: no handler runs
        process.wait()
    assert cli.emulator.admin.calls(action="TerminateInstances") == []
    outlives_us_until_its_action_timer(cli, instance["instance_id"])


def outlives_us_until_its_action_timer(cli: Cli, instance_id: str) -> None:
    """The instance still runs; the emulator's clock moved to its ActionTimer (the job's deadline), it is gone."""
    assert not no_instance_left(cli)
    cvm = cvm_client.CvmClient(cred(cli.emulator), REGION, profile(cli.emulator))
    (timer,) = call(cvm, "DescribeInstancesActionTimer", {"InstanceIds": [instance_id]}).ActionTimers
    cli.emulator.admin.advance(datetime.fromisoformat(timer.ActionTime).timestamp() - cli.emulator.admin.now() + 1)
    wait_until("the ActionTimer to terminate the instance", lambda: no_instance_left(cli), 60)


def test_temporary_keys_with_the_default_sts_credentials_are_refused_at_plan(cli: Cli) -> None:
    """GetFederationToken (the instances' short-lived COS keys) refuses temporary keys: a plan on them says to use
    a CAM role for the instances, before anything is created, rather than a job that fails at its launch."""
    sts = sts_client.StsClient(cred(cli.emulator), REGION, profile(cli.emulator))
    request = sts_models.GetFederationTokenRequest()
    policy = {"version": "2.0", "statement": [{"effect": "allow", "action": ["*"], "resource": ["*"]}]}
    request._deserialize({"Name": "ci", "Policy": json.dumps(policy), "DurationSeconds": 1800})
    keys = sts.GetFederationToken(request).Credentials
    temporary = Cli(cli.emulator, cli.home, extra_env={"TENCENTCLOUD_SECRET_ID": keys.TmpSecretId,
                                                       "TENCENTCLOUD_SECRET_KEY": keys.TmpSecretKey,
                                                       "TENCENTCLOUD_SESSION_TOKEN": keys.Token})
    refused = temporary.run("plan", str(QUICKSTART), timeout=120)
    assert refused.returncode == 2 and "credentials: role:<instance role>" in refused.stderr, refused.stderr
    with_role = temporary.run("plan", str(QUICKSTART), "--set", "credentials=role:cvmjob-instance", timeout=120)
    assert with_role.returncode == 0, with_role.stderr
