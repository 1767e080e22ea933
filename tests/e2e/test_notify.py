"""Notifications (issue 33) end to end: a spot job posts its events to receiver on 127.0.0.1 through every
controller that drives it. The first `cvmjob run` is SIGKILLed while training; the instance is reclaimed; a `cvmjob
resume` records the reclaim and is killed at once (CVMJOB_CRASH_AT: before its sender could post it); a second
resume posts it, relaunches and succeeds. Each event reaches each receiver once, and receiver that answer 500 or
never answer hold nothing up."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.e2e.conftest import Cli
from tests.e2e.spot_support import JobWatch, job_folder, tiny_command
from tests.e2e.test_spot import finish
from tests.holding import held, release
from tests.receiver import Receiver

pytestmark = pytest.mark.e2e

EVENTS = "[succeeded, failed, cancelled, reclaimed]"


def notify_job(tmp_path: Path, receiver: Receiver) -> Path:
    spec = job_folder(tmp_path)
    targets = "".join(f"  - {{{where}, format: {fmt}, on: {EVENTS}}}\n" for where, fmt in (
        (f"url: '{receiver.url('json')}'", "json"), ("url_env: WECOM_HOOK", "wecom"),
        (f"url: '{receiver.url('down')}'", "json"), (f"url: '{receiver.url('silent')}'", "json")))
    spec.write_text(
        "name: told\nregion: ap-guangzhou\ninstance: {type: GN7.2XLARGE32}\nbilling: {mode: spot}\n"
        f"train:\n  command: {tiny_command(10, 0.05, 5, held(5))}\n"
        f"notify:\n{targets}snapshot: {{enabled: false}}\nlimits: {{max_runtime: 20m}}\n")
    return spec


def test_each_event_reaches_each_receiver_once_across_a_killed_controller(
        cli: Cli, tmp_path: Path, receiver: Receiver) -> None:
    cli.extra_env["WECOM_HOOK"] = receiver.url("wecom") + "?key=robot-token"
    watch = JobWatch(cli.emulator)
    first = cli.start("run", str(notify_job(tmp_path, receiver)))
    try:
        (instance,) = watch.running(attempt=1)
        watch.wait_for_step(attempt=1, step=4)
    finally:
        first.kill()
        first.wait()
    cli.emulator.admin.reclaim(instance["instance_id"], None)  # no notice: the next controller finds it gone
    cli.extra_env["CVMJOB_CRASH_AT"] = "RUNNING->RECOVERING"
    crashed = cli.start("resume", watch.job_id)
    assert finish(crashed, cli) != 0  # killed right after recording the move and its notifications
    del cli.extra_env["CVMJOB_CRASH_AT"]
    resuming = cli.start("resume", watch.job_id)
    try:
        watch.running(attempt=2, timeout=180)
        release(cli.emulator.admin, watch.job_id)
    finally:
        code = finish(resuming, cli)
    exited = time.time()
    assert code == 0, cli.output()[-3000:]

    job = watch.job_id
    expected = [f"{job}/reclaimed/1", f"{job}/succeeded/2"]
    assert [b["id"] for b in receiver.bodies("json")] == expected  # each once, in order, across the three processes
    assert [b["event"] for b in receiver.bodies("json")] == ["reclaimed", "succeeded"]
    succeeded = receiver.bodies("json")[1]
    assert succeeded["schema"] == "cvmjob.notification/v1"
    assert succeeded["job"]["state"] == "SUCCEEDED" and succeeded["job"]["exit_code"] == 0  # type: ignore[index]
    wecom = receiver.bodies("wecom")
    assert [m["msgtype"] for m in wecom] == ["markdown", "markdown"], wecom
    assert "told succeeded" in wecom[1]["markdown"]["content"]  # type: ignore[index]
    # The 500 and the silent receiver were tried and held nothing up: the last controller left within the
    # sender's flush (3 s) of the job's end, their notifications pending for the store's next controller.
    assert receiver.bodies("down") and receiver.bodies("silent")
    final = cli.status(job)
    assert exited - final["updated_at"] < 10, (exited, final["updated_at"])
    told = {(n["target"], n["event"]): n for n in final["notifications"]}
    assert told[("json to " + receiver.url("json"), "succeeded")]["state"] == "sent"
    assert told[("wecom to $WECOM_HOOK", "reclaimed")]["state"] == "sent"
    down = told[("json to " + receiver.url("down"), "reclaimed")]
    assert down["state"] == "pending" and down["tries"] >= 1 and down["last_error"] == "HTTP 500: down", down
    text = cli.run("status", job, timeout=60).stdout
    assert f"notify: reclaimed json to {receiver.url('down')}: pending after" in text, text
    assert "robot-token" not in cli.output() and "robot-token" not in (cli.home / "state.db").read_bytes().decode(
        "latin-1")
