"""Spot recovery through the CLI (issue 4): reclaims with and without notice in the middle of training, spot sold
out in one zone or everywhere. Each test runs a copy of the quickstart whose steps take at least PACE seconds, so
the reclaim lands mid-run on any machine, and reads every attempt's log to prove the step sequence continuous."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from orchestrator.contract import checkpoint_name
from orchestrator.state.machine import EXIT_CODES, JobState
from tests.e2e.conftest import Cli
from tests.e2e.spot_support import (
    JobWatch,
    LiveCount,
    job_folder,
    nothing_left,
    spot_overrides,
    start_steps,
    steps_in,
)
from tests.e2e.test_run import no_instance_left
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e

PACE = 0.05  # seconds per step at least: 20 steps/s at most
# Long enough that a reclaim seen to land after step 10 stops the training well before the end: the agent ships
# the log every 5 s and polls the notice every 2 s, so up to ~8 s (at most 160 steps) pass in between.
STEPS = 200
NOTICE = 15.0
_STOPPED = re.compile(r"stopping after the requested checkpoint at step (\d+)")


def finish(process: subprocess.Popen[bytes], cli: Cli, timeout: float = 240) -> int:
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the run did not end in {timeout:.0f} s:\n{cli.output()[-4000:]}") from None
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def attempt_log(cli: Cli, job_id: str, attempt: int, node: int = 0) -> str:
    result = cli.run("logs", job_id, "--attempt", str(attempt), "--node", str(node), timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def assert_one_attempt_alive_at_a_time(cli: Cli, watch: JobWatch, live: LiveCount, nodes: int = 1) -> None:
    """Never more instances alive than one attempt has, and each attempt's RunInstances after the earlier
    attempts' instances were gone (TERMINATED in the emulator's own records)."""
    assert live.samples > 10 and live.peak <= nodes, f"{live.peak} instances alive at once"
    status = cli.status(watch.job_id)
    gone_at = {i["instance_id"]: i.get("gone_at") for i in cli.emulator.admin.instances()}
    launches = watch.launches()
    attempts = sorted({n["attempt"] for n in status["nodes"]})
    assert len(launches) == len(attempts) * nodes, (launches, status["nodes"])
    for index, attempt in enumerate(attempts[1:], start=1):
        first_launch = launches[index * nodes]
        earlier = [n["instance_id"] for n in status["nodes"] if n["attempt"] < attempt and n["instance_id"]]
        for instance_id in earlier:
            gone = gone_at[instance_id]
            assert gone is not None and gone <= first_launch, (
                f"attempt {attempt} launched at {first_launch} before {instance_id} was gone ({gone})"
            )


def test_a_reclaim_with_notice_resumes_exactly_after_the_emergency_checkpoint(cli: Cli, tmp_path: Path) -> None:
    steps = STEPS
    spec = job_folder(tmp_path)
    watch = JobWatch(cli.emulator)
    with LiveCount(cli.emulator) as live:
        # The only periodic checkpoint is the last step's: only the emergency one can save the work.
        process = cli.start("run", str(spec), *spot_overrides(steps, every=steps, pace=PACE))
        try:
            (first,) = watch.running(attempt=1)
            watch.wait_for_step(attempt=1, step=10)
            cli.emulator.admin.reclaim(first["instance_id"], NOTICE)
        finally:
            code = finish(process, cli)
    assert code == 0, cli.output()[-4000:]
    job_id = watch.job_id
    final = cli.status(job_id)
    assert final["state"] == "SUCCEEDED" and final["attempt"] == 2, final["reason"]
    assert final["result"]["final_step"] == steps - 1 and final["checkpoints"][-1]["step"] == steps - 1

    first_log, second_log = attempt_log(cli, job_id, 1), attempt_log(cli, job_id, 2)
    stopped = _STOPPED.search(first_log)
    assert stopped, first_log[-3000:]
    emergency = int(stopped[1])
    assert [c["step"] for c in final["checkpoints"]] == [emergency, steps - 1]
    assert steps_in(first_log) == list(range(emergency + 1))
    assert start_steps(second_log) == [emergency + 1]
    assert steps_in(second_log) == list(range(emergency + 1, steps))  # none repeated, none skipped

    lost = watch.result(1)
    assert lost["outcome"] == "preempted", lost
    assert f"emergency checkpoint {checkpoint_name(emergency)} committed" in lost["reason"], lost["reason"]
    nodes = {n["attempt"]: n for n in final["nodes"]}
    assert nodes[1]["state"] == "lost" and "preempted" in nodes[1]["end_reason"]
    # Reclaims come from a lack of stock, not price: the default policy tries the same placement first.
    assert (nodes[2]["zone"], nodes[2]["charge_type"]) == (first["zone"], "SPOTPAID")
    bill = final["bill"]  # each attempt's bill, the total, and the saving against on demand for the same time
    assert sorted(bill["per_attempt"]) == ["1", "2"] and bill["total_cny"] == final["cost_cny"]
    assert bill["on_demand_cny"] > bill["total_cny"] and bill["saved_cny"] > 0, bill
    assert_one_attempt_alive_at_a_time(cli, watch, live)
    assert no_instance_left(cli)


def test_a_reclaim_without_notice_loses_at_most_one_checkpoint_interval(cli: Cli, tmp_path: Path) -> None:
    steps, every = 150, 50
    spec = job_folder(tmp_path)
    watch = JobWatch(cli.emulator)
    with LiveCount(cli.emulator) as live:
        process = cli.start("run", str(spec), *spot_overrides(steps, every=every, pace=PACE))
        try:
            (first,) = watch.running(attempt=1)
            # Right after a checkpoint is uploaded (the manifest is read directly, not through the 5 s-late log),
            # so the reclaim never lands between the next one's commit and its upload.
            wait_until("the first checkpoint in the manifest", lambda: every - 1 in watch.manifest_steps(), 120)
            cli.emulator.admin.reclaim(first["instance_id"], None)  # gone at once: no notice, no checkpoint
            saved = every - 1
        finally:
            code = finish(process, cli)
    assert code == 0, cli.output()[-4000:]
    job_id = watch.job_id
    final = cli.status(job_id)
    assert final["state"] == "SUCCEEDED" and final["attempt"] == 2, final["reason"]
    assert final["result"]["final_step"] == steps - 1 and final["checkpoints"][-1]["step"] == steps - 1

    first_log, second_log = attempt_log(cli, job_id, 1), attempt_log(cli, job_id, 2)
    first_steps = steps_in(first_log)
    reached = first_steps[-1]  # the last step whose line was shipped before the instance died
    assert first_steps == list(range(reached + 1))
    assert start_steps(second_log) == [saved + 1]  # from the newest checkpoint uploaded before the reclaim
    assert steps_in(second_log) == list(range(saved + 1, steps))
    assert reached - saved <= every, f"lost steps {saved + 1}..{reached}"

    nodes = {n["attempt"]: n for n in final["nodes"]}
    # TERMINATING, or already gone when the controller looked (the emulator releases it within a second).
    assert nodes[1]["state"] == "lost", nodes[1]
    assert "TERMINATING" in nodes[1]["end_reason"] or "disappeared" in nodes[1]["end_reason"], nodes[1]
    assert_one_attempt_alive_at_a_time(cli, watch, live)
    assert no_instance_left(cli)


# The default recovery policy with second-long waits between same-zone retries (its 5 s and 10 s would make these
# tests walk three zones in a minute); everything else as in the builtin default.
QUICK_RETRIES = """\
description: The default policy with short waits between retries.
max_preemptions: 10
max_launch_failures: 10
same_zone_retries: 2
backoff: {initial: 0s, max: 1s, multiplier: 2, jitter: 0}
next_zone: true
alternative_types: true
fallback_to_on_demand: {after_preemptions: 3, after_minutes: 30}
give_up_after: 2h
"""
NO_FALLBACK = QUICK_RETRIES.replace(
    "fallback_to_on_demand: {after_preemptions: 3, after_minutes: 30}", "fallback_to_on_demand: null"
)
SPOT_ZONES = ("ap-guangzhou-3", "ap-guangzhou-4", "ap-guangzhou-6")  # where the quickstart's GN7.2XLARGE32 is sold
SOLD_OUT = "ResourceInsufficient.SpecifiedInstanceType: spot sold out (test)"


def sold_out(cli: Cli, *zones: str) -> None:
    """Launches of spot instances in ``zones`` (every zone: none given) fail as sold out while being created: the
    plan's stock check and DryRun pass, as when capacity goes between planning and launching."""
    for zone in zones or (None,):
        match = {"zone": zone} if zone else {}
        cli.emulator.admin.add_launch_failures(100, SOLD_OUT, charge_type="SPOTPAID", **match)


def short_run(tmp_path: Path, policy: str) -> list[str]:
    spec = job_folder(tmp_path, {"quick-retries": QUICK_RETRIES, "no-fallback": NO_FALLBACK})
    return ["run", str(spec), *spot_overrides(20, every=10, pace=0, extra=(f"policies.recovery={policy}",))]


def placements(status: dict[str, object]) -> list[tuple[str, str, str]]:
    nodes = status["nodes"]
    assert isinstance(nodes, list)
    return [(n["zone"], n["charge_type"], n["state"]) for n in nodes]


def test_spot_sold_out_in_the_first_zone_runs_in_the_next(cli: Cli, tmp_path: Path) -> None:
    sold_out(cli, SPOT_ZONES[0])
    result = cli.run(*short_run(tmp_path, "quick-retries"), "--output", "json", timeout=240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    status = cli.status()
    a, b = SPOT_ZONES[:2]
    # the first zone, then its two same-zone retries, then the next zone
    assert placements(status) == [*[(a, "SPOTPAID", "failed")] * 3, (b, "SPOTPAID", "gone")], status["nodes"]
    assert status["result"]["final_step"] == 19
    assert nothing_left(cli.emulator)


def test_spot_sold_out_everywhere_falls_back_to_on_demand(cli: Cli, tmp_path: Path) -> None:
    sold_out(cli)
    result = cli.run(*short_run(tmp_path, "quick-retries"), timeout=240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    status = cli.status()
    tried = [(zone, "SPOTPAID", "failed") for zone in SPOT_ZONES for _ in range(3)]
    assert placements(status) == [*tried, (SPOT_ZONES[0], "POSTPAID_BY_HOUR", "gone")], status["nodes"]
    assert status["result"]["final_step"] == 19
    assert nothing_left(cli.emulator)


def test_spot_sold_out_everywhere_without_fallback_fails_listing_what_was_tried(cli: Cli, tmp_path: Path) -> None:
    sold_out(cli)
    result = cli.run(*short_run(tmp_path, "no-fallback"), timeout=240)
    assert result.returncode == EXIT_CODES[JobState.FAILED_NO_CAPACITY], result.stdout[-3000:] + result.stderr[-3000:]
    status = cli.status()
    assert status["state"] == "FAILED_NO_CAPACITY"
    for zone in SPOT_ZONES:  # each placement once, with its count and reason
        assert f"GN7.2XLARGE32 in {zone} (spot) (3 times): {SOLD_OUT}" in status["reason"], status["reason"]
    assert "FAILED_NO_CAPACITY" in result.stdout and SPOT_ZONES[-1] in result.stdout
    # bounded: three tries per zone, no on-demand, no loop; at most the policy's max_launch_failures
    assert placements(status) == [(zone, "SPOTPAID", "failed") for zone in SPOT_ZONES for _ in range(3)]
    assert len(JobWatch(cli.emulator).launches()) == 9  # within the policy's max_launch_failures (10)
    assert nothing_left(cli.emulator)
