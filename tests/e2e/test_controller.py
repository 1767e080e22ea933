"""`cvmjob controller`: one process drives many jobs, several share a PostgreSQL store, a killed one's jobs are
taken over within the lease TTL, and no attempt or node ever has two live instances."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from orchestrator.contract.tags import TAG_ATTEMPT, TAG_JOB, TAG_NODE
from orchestrator.controller.engine import IDLE_SECONDS
from orchestrator.state.store import Store
from tests.e2e.conftest import Cli
from tests.e2e.spot_support import job_folder, tiny_command
from tests.holding import held, release
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e

# tiny.py: what is tested is the controller's claim of jobs, not their training, held before step 5 until the test
# has seen the controllers hold them (however late a loaded machine's `controller status` gets round to looking).
LIGHT = ("--set", f"train.command={tiny_command(20, 0.1, 10, held(5))}", "--set", "snapshot.enabled=false")
LEASE = 10.0


class LiveInstances:
    """Samples the emulator's instances while the jobs run: for every (job, attempt, node), the ids ever seen
    alive at the same moment."""

    def __init__(self, cli: Cli) -> None:
        self.cli = cli
        self.most: dict[tuple[str, str, str], int] = defaultdict(int)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self.stop.wait(0.3):
            alive: dict[tuple[str, str, str], int] = defaultdict(int)
            for i in self.cli.emulator.admin.instances():
                tags = i.get("tags") or {}
                if TAG_JOB in tags and i["state"] not in ("TERMINATED", "LAUNCH_FAILED", "TERMINATING"):
                    alive[(tags[TAG_JOB], tags.get(TAG_ATTEMPT, ""), tags.get(TAG_NODE, ""))] += 1
            for key, count in alive.items():
                self.most[key] = max(self.most[key], count)

    def __enter__(self) -> LiveInstances:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def _replicas(cli: Cli) -> list[dict[str, Any]]:
    shown = cli.run("controller", "status", "--output", "json", timeout=60)
    assert shown.returncode == 0, shown.stderr
    replicas: list[dict[str, Any]] = json.loads(shown.stdout)
    return replicas


def _submit(cli: Cli, count: int, *extra: str) -> list[str]:
    root = cli.home.parent / "controller-jobs"
    spec = root / "job" / "job.yaml" if root.exists() else job_folder(root)
    ids = []
    for index in range(count):
        submitted = cli.run("run", str(spec), *LIGHT, *extra, "--name", f"many-{index}", "--detach", "--output",
                            "json")
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        ids.append(json.loads(submitted.stdout)["job_id"])
    return ids


def _all_succeed(cli: Cli, ids: list[str], timeout: float) -> None:
    def ended() -> bool | None:
        states = {j["job_id"]: j["state"] for j in json.loads(cli.run("ls", "--output", "json").stdout)}
        assert not any(states.get(i, "").startswith(("FAILED", "CANCELLED")) for i in ids), states
        return all(states.get(i) == "SUCCEEDED" for i in ids) or None

    wait_until("every job to succeed", ended, timeout, poll=2)


def test_one_controller_drives_several_jobs_and_drains_on_sigterm(cli: Cli) -> None:
    controller = cli.start("controller")
    try:
        wait_until("the controller to register", lambda: _replicas(cli) or None, 60)
        ids = _submit(cli, 3)
        with LiveInstances(cli) as live:
            wait_until("the controller to hold the three jobs",
                       lambda: {j["job_id"] for r in _replicas(cli) for j in r["jobs"]} >= set(ids) or None, 60)
            (replica,) = _replicas(cli)
            assert replica["info"]["pid"] == controller.pid
            wait_until("the three jobs to be let go", lambda: len(release(cli.emulator.admin, *ids)) == 3 or None, 60)
            _all_succeed(cli, ids, 300)
        assert live.most and max(live.most.values()) == 1, live.most
    finally:
        controller.send_signal(signal.SIGTERM)
        code = controller.wait(timeout=60)
    assert code == 0, cli.output()[-3000:]
    assert "SIGTERM: draining" in cli.output() and "stopped" in cli.output()
    assert _replicas(cli) == []


@pytest.mark.postgres
def test_two_controllers_on_postgres_share_jobs_and_one_takes_over_when_the_other_is_killed(
    cli: Cli, postgres_url: str, tmp_path: Path
) -> None:
    from tests.postgres import fresh_database

    with fresh_database(postgres_url) as url:
        os.environ["CVMJOB_DB"] = url  # for cli's processes: Cli.env copies this environment
        try:
            _share_and_take_over(cli)
        finally:
            os.environ.pop("CVMJOB_DB", None)


def _share_and_take_over(cli: Cli) -> None:
    lease = ("--lease", str(LEASE))
    first = cli.start("controller", *lease)
    second = cli.start("controller", *lease)
    try:
        wait_until("both controllers to register", lambda: len(_replicas(cli)) == 2 or None, 60)
        ids = _submit(cli, 4)  # held in training until the takeover was seen
        with LiveInstances(cli) as live:
            def both_hold() -> dict[int, set[str]] | None:
                held = {r["info"]["pid"]: {j["job_id"] for j in r["jobs"]} for r in _replicas(cli)}
                return held if len(held) == 2 and all(held.values()) and set().union(*held.values()) == set(ids) \
                    else None

            held = wait_until("the two controllers to share the jobs", both_hold, 90)
            victim = held[first.pid]
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=30)
            killed_at = time.monotonic()

            survivor = next(r["owner"] for r in _replicas(cli) if r["info"]["pid"] == second.pid)
            store = Store(os.environ["CVMJOB_DB"])

            def taken_over() -> bool | None:
                return victim <= {x.job_id for x in store.leases(time.time()) if x.owner == survivor} or None

            wait_until("the survivor to take over the killed controller's jobs", taken_over, LEASE * 3, poll=0.05)
            takeover = time.monotonic() - killed_at
            store.close()
            print(f"takeover: {takeover:.1f} s after SIGKILL (lease TTL {LEASE:.0f} s, a tick {IDLE_SECONDS:.0f} s)")
            # The goal is the TTL and one tick (9-11 s here on a quiet machine; benchmarks/controller_takeover.py
            # checks it with 50 jobs). On two loaded cores (four trainings, two controllers, PostgreSQL, the
            # emulator) a CI run once saw the survivor's loop come round 9 s late (19.5 s): what this test must
            # catch is a takeover that waits for more than one lease to run out, or never comes.
            assert takeover < 2 * LEASE
            wait_until("the four jobs to be let go", lambda: len(release(cli.emulator.admin, *ids)) == 4 or None, 60)
            _all_succeed(cli, ids, 400)
        assert live.most and max(live.most.values()) == 1, live.most
    finally:
        for process in (first, second):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    process.kill()
