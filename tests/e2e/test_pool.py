"""Reserved billing: jobs take turns on a pool of prepaid instances that no job ever terminates."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator.state.machine import EXIT_CODES, JobState
from tests.e2e.conftest import QUICKSTART, Cli
from tests.e2e.spot_support import TINY, tiny_command
from tests.holding import held, release
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e

# Short trainings: these tests are about who gets the pool member, not about training (a later --set wins).
RESERVED = ("--set", "billing.mode=reserved", "--set", "snapshot.enabled=false",
            "--set", f"train.command={tiny_command(12, 0.1, 6)}")
POLICIES = {
    "fail": "when_busy: fail\n",
    "on-demand": "when_busy: on-demand\n",
    "wait": "when_busy: wait\nwait_timeout: 5m\n",
}


def job_folder(tmp_path: Path) -> Path:
    """The quickstart and tiny.py with the pool policies of these tests next to it."""
    folder = tmp_path / "quickstart"
    shutil.copytree(QUICKSTART.parent, folder)
    shutil.copy(TINY, folder / TINY.name)
    (folder / "policies" / "pool").mkdir(parents=True)
    for name, text in POLICIES.items():
        (folder / "policies" / "pool" / f"{name}.yaml").write_text(text)
    return folder / "job.yaml"


def grow(cli: Cli) -> str:
    result = cli.run("pool", "grow", "--type", "GN7.2XLARGE32", "--zone", "ap-guangzhou-3", "--count", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    (member,) = [i["instance_id"] for i in cli.emulator.admin.instances()]
    return str(member)


# The first job leaves a file on the system disk and one on the local NVMe; the second job's setup, which runs
# before its own data sync, fails if it finds either, or any synced data at all.
LEFT_BEHIND = ("${TENCENTCLOUD_EMULATOR_ROOT:-}/root/left-by-the-first-job", "$CVMJOB_DATA_DIR/left-by-the-first-job")
LEAVE = "setup=" + json.dumps([f"mkdir -p $(dirname {path}) && echo first > {path}" for path in LEFT_BEHIND])
CHECK = "setup=" + json.dumps([f"test ! -e {path}" for path in LEFT_BEHIND] + ['test -z "$(ls -A $CVMJOB_DATA_DIR)"'])


def test_two_jobs_share_one_pool_instance_that_is_never_terminated(cli: Cli, tmp_path: Path) -> None:
    spec = job_folder(tmp_path)
    member = grow(cli)
    first = cli.run("run", str(spec), *RESERVED, "--set", LEAVE, "--output", "json")
    assert first.returncode == 0, first.stdout + first.stderr
    second = cli.run("run", str(spec), *RESERVED, "--set", CHECK, "--output", "json")
    assert second.returncode == 0, second.stdout + second.stderr

    first_id = json.loads(first.stdout)["job_id"]
    second_job = json.loads(second.stdout)
    assert {n["instance_id"] for n in second_job["nodes"]} == {member}
    instances = cli.emulator.admin.instances()
    assert [(i["instance_id"], i["state"]) for i in instances] == [(member, "RUNNING")]
    assert cli.emulator.admin.calls(action="TerminateInstances") == []
    # The second job's instance holds nothing of the first job: not its workdir, not its data.
    sandbox = Path(instances[0]["sandbox"])
    leftovers = [p for p in sandbox.rglob("*") if first_id in str(p)]
    assert leftovers == [], leftovers[:5]
    assert cli.emulator.admin.calls(action="ResetInstance")  # each job re-imaged the member


def test_a_busy_pool_follows_the_pool_policy(cli: Cli, tmp_path: Path) -> None:
    spec = job_folder(tmp_path)
    member = grow(cli)
    # Busy (its training held) through two more runs and a wait, however long they take on a loaded machine.
    holder = cli.start("run", str(spec), *RESERVED, "--set", f"train.command={tiny_command(20, 0.1, 10, held(5))}")
    waiting: subprocess.Popen[bytes] | None = None
    try:
        cli.wait_for(lambda s: s["state"] == "RUNNING")
        failed = cli.run("run", str(spec), *RESERVED, "--set", "policies.pool=fail")
        assert failed.returncode == EXIT_CODES[JobState.FAILED_NO_CAPACITY], failed.stdout + failed.stderr
        assert "reserved pool default has no idle instance" in failed.stdout
        # Submitted while the member is busy: it waits through the on-demand job and the rest of the holder's run.
        waiting = cli.start("run", str(spec), *RESERVED, "--set", "policies.pool=wait", "--name", "waiter")
        wait_until("the waiter to wait", lambda: "no idle instance for this job; waiting" in cli.output(), 60)
        on_demand = cli.run("run", str(spec), *RESERVED, "--set", "policies.pool=on-demand", "--output", "json")
        assert on_demand.returncode == 0, on_demand.stdout + on_demand.stderr
        nodes = json.loads(on_demand.stdout)["nodes"]
        assert [n["charge_type"] for n in nodes] == ["POSTPAID_BY_HOUR"] and nodes[0]["instance_id"] != member
        assert release(cli.emulator.admin) == [member]
        assert holder.wait(timeout=240) == 0, cli.output()
        assert waiting.wait(timeout=180) == 0, cli.output()
    finally:
        for process in (holder, waiting):
            if process is not None:
                process.kill()
                process.wait()
    (waiter,) = [j for j in json.loads(cli.run("ls", "--output", "json").stdout) if j["name"] == "waiter"]
    assert [n["instance_id"] for n in cli.status(waiter["job_id"])["nodes"]] == [member]
    assert [i["instance_id"] for i in cli.emulator.admin.instances() if i["state"] == "RUNNING"] == [member]
