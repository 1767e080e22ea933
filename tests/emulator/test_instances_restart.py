"""An emulator restart on the same state directory is a reboot of the cloud: records, images, stock and tokens
persist; RUNNING instances boot again and run their per-boot scripts; processes never outlive the emulator."""

from __future__ import annotations

from pathlib import Path

from tencentcloud.cvm.v20170312 import cvm_client

from tests.emulator.conftest import REGION, cred, profile
from tests.emulator.cvm_support import (
    ZONE,
    admin_instance,
    call,
    describe,
    run,
    run_one,
    user_data,
    wait_file,
    wait_for,
    wait_state,
)
from tests.emulator_process import EmulatorProcess, start_emulator

PER_BOOT = """#!/bin/bash
echo run >> $HOME/user-data-runs
script=$TENCENTCLOUD_EMULATOR_ROOT/var/lib/cloud/scripts/per-boot/boot
printf '#!/bin/bash\\necho boot >> $HOME/boots\\nsleep 1000\\n' > $script
chmod +x $script
sleep 1000 &
echo $! > $HOME/sleep.pid
"""


def client(emulator: EmulatorProcess) -> object:
    return cvm_client.CvmClient(cred(emulator), REGION, profile(emulator))


def test_restart_keeps_the_cloud_and_reboots_running_instances(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = start_emulator(state)
    try:
        cvm = client(first)
        running = run_one(cvm, UserData=user_data(PER_BOOT), ClientToken="restart-token")
        stopped = run_one(cvm, UserData=user_data(PER_BOOT))
        gone = run_one(cvm)
        first.admin.advance(1)
        wait_state(cvm, gone, "RUNNING")
        info = admin_instance(first, running)
        home = Path(info["home"])
        sleeper = Path("/proc") / wait_file(home / "sleep.pid").strip()
        wait_file(Path(admin_instance(first, stopped)["home"]) / "sleep.pid")
        image_id = call(cvm, "CreateImage", {"InstanceId": running, "ImageName": "before-restart"}).ImageId
        call(cvm, "StopInstances", {"InstanceIds": [stopped]})
        call(cvm, "TerminateInstances", {"InstanceIds": [gone]})
        first.admin.advance(2)
        wait_for(lambda: call(cvm, "DescribeImages", {"ImageIds": [image_id]}).ImageSet[0].ImageState == "NORMAL",
                 what="the image")
        first.admin.set_stock(ZONE, "S5.MEDIUM4", "SPOTPAID", 4)
    finally:
        first.stop()
    assert not sleeper.exists()  # the emulator powered its instances off on the way out

    second = start_emulator(state)
    try:
        cvm = client(second)
        states = {i.InstanceId: i.InstanceState for i in describe(cvm, running, stopped, gone)}
        assert states == {running: "RUNNING", stopped: "STOPPED"}
        assert call(cvm, "DescribeImages", {"ImageIds": [image_id]}).ImageSet[0].ImageState == "NORMAL"
        assert run(cvm, ClientToken="restart-token") == [running]
        assert wait_file(home / "boots") == "boot\n"  # the reboot ran the per-boot script
        assert (home / "user-data-runs").read_text() == "run\n"
        assert admin_instance(second, running)["alive"]
        assert not (Path(admin_instance(second, stopped)["home"]) / "boots").exists()
        rows = call(cvm, "DescribeZoneInstanceConfigInfos", {"Filters": [
            {"Name": "zone", "Values": [ZONE]}, {"Name": "instance-type", "Values": ["S5.MEDIUM4"]},
            {"Name": "instance-charge-type", "Values": ["SPOTPAID"]}]}).InstanceTypeQuotaSet
        assert rows[0].StatusCategory == "NormalStock"  # 4 left, as set before the restart
        copy = run_one(cvm, ImageId=image_id)
        second.admin.advance(1)
        wait_state(cvm, copy, "RUNNING")
        assert (Path(admin_instance(second, copy)["home"]) / "user-data-runs").read_text() == "run\n"
    finally:
        second.stop()


def running(pid: str) -> bool:
    """The process exists and is not a zombie (a crashed emulator's orphans may be nobody's to reap)."""
    try:
        stat = (Path("/proc") / pid / "stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def test_a_crashed_emulator_leaves_no_instance_processes_behind(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = start_emulator(state)
    cvm = client(first)
    instance_id = run_one(cvm, UserData=user_data("#!/bin/bash\nsleep 1000 &\necho $! > $HOME/sleep.pid\n"))
    first.admin.advance(1)
    home = Path(admin_instance(first, instance_id)["home"])
    pid = wait_file(home / "sleep.pid").strip()
    first.process.kill()  # no orderly shutdown: the instance's processes outlive the emulator
    first.process.wait()
    assert running(pid)
    second = start_emulator(state)
    try:
        wait_for(lambda: not running(pid), what="the stray process to be killed")
        log = home.parent / "var/log/cloud-init-output.log"
        wait_for(lambda: log.read_text().count("cloud-init: boot at") == 2, what="the instance to boot again")
        assert describe(client(second), instance_id)[0].InstanceState == "RUNNING"
    finally:
        second.stop()
