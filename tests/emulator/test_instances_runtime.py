"""Instances are processes: UserData runs as a shell with the documented environment, reaches the metadata service
and the API through its proxy, and dies with its whole process group."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from orchestrator.emulator.runtime.host import KILL_GRACE_SECONDS
from tests.emulator.cvm_support import (
    admin_instance,
    boot,
    call,
    hpc_cluster,
    run_one,
    user_data,
    wait_file,
    wait_for,
    wait_state,
)
from tests.emulator_process import EmulatorProcess
from tests.waiting import holds_for

HELLO = """#!/bin/bash
echo hello > $HOME/hello
curl -s http://metadata.tencentyun.com/latest/meta-data/instance-id > $HOME/instance-id
env > $HOME/env.txt
sleep 1000 &
echo $! > $HOME/sleep.pid
"""

ROLE_CALL = """#!/bin/bash
python3 - <<'EOF' > $HOME/balance.txt 2> $HOME/balance.err
import os
from tencentcloud.common import credential
from tencentcloud.common.profile.client_profile import ClientProfile
from tencentcloud.common.profile.http_profile import HttpProfile
from tencentcloud.billing.v20180709 import billing_client, models
cred = credential.CVMRoleCredential()
profile = ClientProfile(httpProfile=HttpProfile(protocol="http", endpoint=os.environ["TENCENTCLOUD_EMULATOR_ENDPOINT"]))
client = billing_client.BillingClient(cred, "ap-guangzhou", profile)
balance = client.DescribeAccountBalance(models.DescribeAccountBalanceRequest()).Balance
print(cred.secret_id[:4], cred.role, balance)
EOF
"""


# A per-boot script that takes 0.3 s to exit on SIGTERM, run at the first boot too.
SLOW_EXIT = """#!/bin/bash
per_boot=$TENCENTCLOUD_EMULATOR_ROOT/var/lib/cloud/scripts/per-boot
printf '#!/bin/bash\\ntrap "sleep 0.3; exit 0" TERM\\necho $$ >> $HOME/boots\\nwhile true; do sleep 0.05; done\\n' \\
    > $per_boot/50-slow-exit
chmod +x $per_boot/50-slow-exit
$per_boot/50-slow-exit
"""


def environment(home: Path) -> dict[str, str]:
    text = wait_file(home / "env.txt")
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def test_user_data_runs_with_the_documented_environment(emulator: EmulatorProcess, cvm: Any) -> None:
    instance_id = run_one(cvm, UserData=user_data(HELLO))
    boot(emulator, cvm, instance_id)
    info = admin_instance(emulator, instance_id)
    home, system = Path(info["home"]), Path(info["system"])
    assert wait_file(home / "hello") == "hello\n"
    assert wait_file(home / "instance-id") == instance_id  # curl through HTTP_PROXY to the metadata service
    env = environment(home)
    port = emulator.port
    assert env["PATH"] == f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin"
    assert (env["HOME"], env["TMPDIR"], env["LANG"]) == (str(home), str(system / "tmp"), "C.UTF-8")
    proxy = info["proxy"].replace(emulator.endpoint, f"127.0.0.1:{port}")
    assert env["HTTP_PROXY"] == env["http_proxy"] == env["HTTPS_PROXY"] == env["https_proxy"] == proxy
    assert env["HTTP_PROXY"].startswith(f"http://{instance_id}:")
    assert env["NO_PROXY"] == env["no_proxy"] == ""
    assert env["TENCENTCLOUD_EMULATOR_ENDPOINT"] == f"127.0.0.1:{port}"
    assert env["TENCENTCLOUD_EMULATOR_ROOT"] == str(system)
    assert env["TENCENTCLOUD_EMULATOR_LOCAL_DISKS"] == ""
    assert (env["CUDA_VISIBLE_DEVICES"], env["TENCENTCLOUD_EMULATOR_GPUS"]) == ("", "cpu-only")
    inherited = set(env) - {"PWD", "SHLVL", "_", "OLDPWD"}
    assert inherited == {
        "PATH", "HOME", "LANG", "TMPDIR", "HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY",
        "no_proxy",
        "TENCENTCLOUD_EMULATOR_ENDPOINT", "TENCENTCLOUD_EMULATOR_ROOT", "TENCENTCLOUD_EMULATOR_LOCAL_DISKS",
        "CUDA_VISIBLE_DEVICES", "TENCENTCLOUD_EMULATOR_GPUS", "LD_PRELOAD", "TENCENTCLOUD_EMULATOR_REACH",
    }
    assert env["TENCENTCLOUD_EMULATOR_REACH"] == str(system.parent / "reach")  # the security groups, enforced
    log = (system / "var/log/cloud-init-output.log").read_text()
    assert "running user data" in log
    assert (system / "var/lib/cloud/instance/user-data.txt").read_text() == HELLO


def test_terminate_kills_the_process_group_and_deletes_the_sandbox(emulator: EmulatorProcess, cvm: Any) -> None:
    instance_id = run_one(cvm, UserData=user_data(HELLO))
    boot(emulator, cvm, instance_id)
    home = Path(admin_instance(emulator, instance_id)["home"])
    sleeper = Path("/proc") / wait_file(home / "sleep.pid").strip()
    # Looked at once its processes are known to run: a look taken before (a loaded machine starts the UserData
    # late) saw none yet.
    info = admin_instance(emulator, instance_id)
    assert sleeper.exists() and info["alive"] and info["pgid"]
    # A sampler of states asks for no processes: the same instance, its processes unknown rather than dead.
    (light,) = [i for i in emulator.admin.instances(processes=False) if i["instance_id"] == instance_id]
    assert {**light, "pid": info["pid"], "pgid": info["pgid"], "alive": True} == info
    assert (light["pid"], light["pgid"], light["alive"]) == (None, None, None)
    call(cvm, "TerminateInstances", {"InstanceIds": [instance_id]})
    wait_for(lambda: not sleeper.exists(), what="the instance's background process to die and be reaped")
    emulator.admin.advance(1)
    wait_state(cvm, instance_id, None)
    wait_for(lambda: not Path(info["sandbox"]).exists(), what="the sandbox to be deleted")
    gone = admin_instance(emulator, instance_id)
    assert (gone["state"], gone["alive"]) == ("TERMINATED", False)


def test_per_boot_scripts_run_at_every_later_boot(emulator: EmulatorProcess, cvm: Any) -> None:
    script = """#!/bin/bash
echo run >> $HOME/user-data-runs
per_boot=$TENCENTCLOUD_EMULATOR_ROOT/var/lib/cloud/scripts/per-boot
printf '#!/bin/bash\\necho boot >> $HOME/boots\\n' > $per_boot/20-count
chmod +x $per_boot/20-count
echo 'echo never >> $HOME/boots' > $per_boot/10-not-executable
"""
    instance_id = run_one(cvm, UserData=user_data(script))
    boot(emulator, cvm, instance_id)
    home = Path(admin_instance(emulator, instance_id)["home"])
    wait_file(home / "user-data-runs")
    assert not (home / "boots").exists()
    call(cvm, "StopInstances", {"InstanceIds": [instance_id]})
    emulator.admin.advance(2)
    wait_state(cvm, instance_id, "STOPPED")
    call(cvm, "StartInstances", {"InstanceIds": [instance_id]})
    emulator.admin.advance(2)
    assert wait_file(home / "boots") == "boot\n"
    call(cvm, "RebootInstances", {"InstanceIds": [instance_id]})
    emulator.admin.advance(2)
    wait_for(lambda: (home / "boots").read_text() == "boot\nboot\n", what="a second per-boot run")
    assert (home / "user-data-runs").read_text() == "run\n"  # UserData runs once per instance
    log = (Path(admin_instance(emulator, instance_id)["system"]) / "var/log/cloud-init-output.log").read_text()
    assert "skipping non-executable per-boot script 10-not-executable" in log


def test_a_reboot_starts_the_next_boot_only_after_the_power_off_has_finished(emulator: EmulatorProcess,
                                                                           cvm: Any) -> None:
    # Each boot's process takes a moment to exit on SIGTERM (a trainer saving). The power-off that waits for it
    # signals every process with the instance's marker: a next boot started before that wait is over would be
    # killed with the old one at the end of the grace (seen as an agent dead in its preflight after a reboot).
    instance_id = run_one(cvm, UserData=user_data(SLOW_EXIT))
    boot(emulator, cvm, instance_id)
    home = Path(admin_instance(emulator, instance_id)["home"])
    wait_file(home / "boots")
    for boots in (2, 3):
        call(cvm, "RebootInstances", {"InstanceIds": [instance_id]})
        emulator.admin.advance(2)
        wait_for(lambda n=boots: len((home / "boots").read_text().split()) == n, what=f"boot {boots}")
        newest = int((home / "boots").read_text().split()[-1])
        # Alive all along, past the old power-off's grace, when its SIGKILL would come.
        holds_for(f"boot {boots}'s process alive after the power-off before it",
                  Path(f"/proc/{newest}").exists, KILL_GRACE_SECONDS + 0.5)


def test_role_credentials_work_with_the_sdk_inside_an_instance(emulator: EmulatorProcess, cvm: Any) -> None:
    instance_id = run_one(cvm, UserData=user_data(ROLE_CALL), CamRoleName="cvmjob-trainer")
    boot(emulator, cvm, instance_id)
    (inst,) = call(cvm, "DescribeInstances", {"InstanceIds": [instance_id]}).InstanceSet
    assert inst.CamRoleName == "cvmjob-trainer"
    home = Path(admin_instance(emulator, instance_id)["home"])
    result = wait_file(home / "balance.txt", timeout=20)
    # 10 000 000 fen minus the hour frozen for the running S5.MEDIUM4 (32 fen).
    assert result.split() == ["AKID", "cvmjob-trainer", "9999968"], (home / "balance.err").read_text()
    assert [c["error"] for c in emulator.admin.calls(service="billing")] == [None]


def test_gpu_and_local_disk_environment(emulator: EmulatorProcess, cvm: Any) -> None:
    vgpu = run_one(cvm, InstanceType="GN7.2XLARGE40", UserData=user_data("env > $HOME/env.txt\n"))
    hcc = run_one(cvm, InstanceType="HCCPNV4h.48XLARGE1024", Placement={"Zone": "ap-guangzhou-6"},
                  HpcClusterId=hpc_cluster(cvm, "ap-guangzhou-6"), UserData=user_data("env > $HOME/env.txt\n"))
    emulator.admin.advance(1)
    vgpu_env = environment(Path(admin_instance(emulator, vgpu)["home"]))
    assert (vgpu_env["CUDA_VISIBLE_DEVICES"], vgpu_env["TENCENTCLOUD_EMULATOR_GPUS"]) == ("", "cpu-only")
    info = admin_instance(emulator, hcc)
    hcc_env = environment(Path(info["home"]))
    disks = hcc_env["TENCENTCLOUD_EMULATOR_LOCAL_DISKS"].split(",")
    assert disks == info["local_disks"] and len(disks) == 4 and all(Path(d).is_dir() for d in disks)
    # Real CUDA devices when this host has 8 free ones, CPU-only otherwise (runtime/gpus.py).
    devices = ",".join(str(i) for i in info["gpus"])
    assert hcc_env["CUDA_VISIBLE_DEVICES"] == devices
    assert hcc_env["TENCENTCLOUD_EMULATOR_GPUS"] == (devices or "cpu-only")
