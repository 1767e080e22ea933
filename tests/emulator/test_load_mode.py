"""The load-test switch: with ``run_user_data`` off, instances boot, bill, get reclaimed and terminate with no
process at all (a load generator plays their agents); switched back on, boots run their UserData again. Also what
load tests read: the numbered call log (``since``) and each instance's launch time and ClientToken; and the state
file written at most every ``--state-save-seconds``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.emulator.cli import config_from, parser
from orchestrator.emulator.client import AdminError
from tests.emulator.cvm_support import (
    SPOT_TYPE,
    admin_instance,
    boot,
    run_one,
    state_of,
    user_data,
    wait_file,
    wait_for,
    wait_state,
)
from tests.emulator_process import EmulatorProcess, start_emulator
from tests.waiting import holds_for

WRITER = "#!/bin/bash\necho ran > $HOME/ran\n"
SPOT = {"InstanceChargeType": "SPOTPAID", "InstanceType": SPOT_TYPE}
# How long a process started by a boot would take at most to write its file on a busy machine: the negative checks
# wait this long before they conclude that nothing ran.
QUIET_SECONDS = 2.0


@pytest.fixture
def load_mode(emulator: EmulatorProcess) -> Iterator[EmulatorProcess]:
    """The switch belongs to the emulator process, which the session shares: always turned back on."""
    assert emulator.admin.set_run_user_data(False) == {"run_user_data": False}
    try:
        yield emulator
    finally:
        emulator.admin.set_run_user_data(True)


def test_instances_boot_without_running_their_user_data(load_mode: EmulatorProcess, cvm: Any) -> None:
    emulator = load_mode
    assert emulator.admin.settings() == {"run_user_data": False}
    instance_id = run_one(cvm, UserData=user_data(WRITER), ClientToken="load-test-token-1")
    boot(emulator, cvm, instance_id)
    home = Path(admin_instance(emulator, instance_id)["home"])
    holds_for("no UserData run", lambda: not (home / "ran").exists(), QUIET_SECONDS)
    info = admin_instance(emulator, instance_id)
    assert info["state"] == "RUNNING" and not info["boots_pending"]
    assert (info["pid"], info["alive"]) == (None, False)  # no process, not even the boot shell
    assert info["client_token"] == "load-test-token-1" and info["created_at"] <= info["first_running_at"]
    assert not (Path(info["home"]) / "ran").exists()
    assert state_of(cvm, instance_id) == "RUNNING"  # stays RUNNING with nothing in it

    # Switching back affects later boots only: this instance's UserData counts as run and never starts.
    emulator.admin.set_run_user_data(True)
    emulator.admin.advance(1)
    holds_for("no UserData run at a later tick", lambda: not (home / "ran").exists(), QUIET_SECONDS)


def test_switching_back_runs_user_data_again(load_mode: EmulatorProcess, cvm: Any) -> None:
    emulator = load_mode
    silent = run_one(cvm, UserData=user_data(WRITER))
    boot(emulator, cvm, silent)
    assert emulator.admin.set_run_user_data(True) == {"run_user_data": True}
    normal = run_one(cvm, UserData=user_data(WRITER))
    boot(emulator, cvm, normal)
    assert wait_file(Path(admin_instance(emulator, normal)["home"]) / "ran") == "ran\n"
    assert not (Path(admin_instance(emulator, silent)["home"]) / "ran").exists()


def test_load_mode_instances_bill_get_reclaimed_and_terminate(load_mode: EmulatorProcess, cvm: Any) -> None:
    emulator = load_mode
    instance_id = run_one(cvm, UserData=user_data(WRITER), **SPOT)
    boot(emulator, cvm, instance_id)
    emulator.admin.advance(30)
    answer = emulator.admin.reclaim(instance_id, 60)
    assert admin_instance(emulator, instance_id)["notice_at"] == answer["notice_at"]
    emulator.admin.advance(61)  # the notice runs out: TERMINATING, then gone
    wait_state(cvm, instance_id, None)
    charge = next(c for c in emulator.admin.billing()["ledger"] if c["resource_id"] == instance_id)
    assert charge["released"] and charge["billed_seconds"] >= 90 and charge["cost_fen"] > 0
    assert not any(i["instance_id"] == instance_id and i["alive"] for i in emulator.admin.instances())


def test_settings_refuse_what_they_do_not_know(emulator: EmulatorProcess) -> None:
    for body in ({"run_user_data": "no"}, {"boot": False}):
        with pytest.raises(AdminError) as err:
            emulator.admin._call("PUT", "settings", body)
        assert err.value.status == 400
    assert emulator.admin.settings() == {"run_user_data": True}


def test_the_serve_flag_starts_in_load_mode(tmp_path: Path) -> None:
    def config(*extra: str) -> bool:
        args = parser().parse_args(["serve", "--state-dir", str(tmp_path), *extra])
        return config_from(args, "k" * 32).run_user_data

    assert config() is True and config("--no-user-data") is False


def test_the_call_log_is_numbered_and_read_since(emulator: EmulatorProcess, cvm: Any) -> None:
    run_one(cvm)
    calls = emulator.admin.calls(service="cvm")
    seqs = [c["seq"] for c in calls]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    last = emulator.admin.calls()[-1]["seq"]
    assert emulator.admin.calls(since=last) == []
    run_one(cvm)
    newer = wait_for(lambda: emulator.admin.calls(since=last) or None, what="a newer call")
    assert [c["action"] for c in newer] == ["RunInstances"] and newer[0]["seq"] > last


def test_a_save_interval_holds_writes_back_until_a_tick_or_the_exit(tmp_path: Path) -> None:
    server = start_emulator(tmp_path / "state", "--state-save-seconds", "3")
    state_file = tmp_path / "state" / "state.json"

    def saved() -> list[str]:  # the messages of the launch-failure rules in the state file
        return [r["message"] for r in json.loads(state_file.read_text())["faults"]["launch_failures"]]

    try:
        server.admin.add_launch_failures(message="first")  # nothing written for 3 s before: written at once
        assert saved() == ["first"]
        server.admin.add_launch_failures(message="second")  # within 3 s of that write: held back
        assert saved() == ["first"]
        wait_for(lambda: "second" in saved() or None, timeout=10, what="a tick to write the held-back change")
        server.admin.add_launch_failures(message="third")
    finally:
        server.stop()  # SIGTERM: the exit writes what is left
    assert saved() == ["first", "second", "third"]
