"""A PostgreSQL outage while `cvmjob controller` drives a job: the replica says so once, waits with backoff instead
of dying, and drives the job to its end once the server is back, on its first attempt (issue 27, item 10)."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.state.machine import JobState
from orchestrator.state.store import Store
from tests.e2e.conftest import Cli
from tests.e2e.spot_support import job_folder, tiny_command
from tests.holding import held, release
from tests.postgres import Cluster, running_cluster
from tests.waiting import holds_for, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

OUTAGE_SAID = "the store is tried again with backoff"
BACK_SAID = "the store answers again"


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """A cluster of this test's own: it is stopped and started again, which the session's shared one must not be."""
    with running_cluster() as cluster:
        yield cluster


def test_a_controller_waits_out_a_postgresql_outage_and_its_job_succeeds(cli: Cli, cluster: Cluster,
                                                                         tmp_path: Path) -> None:
    cli.extra_env["CVMJOB_DB"] = cluster.url
    spec = job_folder(tmp_path / "jobs")
    controller = cli.start("controller", "--lease", "10")
    try:
        wait_until("the controller to register", lambda: "driving up to" in cli.output(), 60)
        # Held in training until the outage is over, however long it takes on a loaded machine.
        submitted = cli.run("run", str(spec), "--set", f"train.command={tiny_command(20, 0.1, 10, held(5))}", "--set",
                            "snapshot.enabled=false", "--detach", "--output", "json")
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        job_id = json.loads(submitted.stdout)["job_id"]
        wait_until("the controller to claim the job", lambda: f"{job_id} claimed" in cli.output(), 60)
        cli.wait_for(lambda s: s["state"] == "RUNNING", timeout=240, job=job_id)
        cluster.halt()

        def said(what: str) -> bool:
            assert controller.poll() is None, f"the controller died:\n{cli.output()[-4000:]}"
            return what in cli.output()

        wait_until("the controller to say the store is unreachable", lambda: said(OUTAGE_SAID), 60)
        holds_for("the controller to live through the outage", lambda: controller.poll() is None, 5)
        cluster.serve_again()
        wait_until("the controller to find the store again", lambda: said(BACK_SAID), 120)
        assert len(release(cli.emulator.admin, job_id)) == 1
        job = cli.wait_for(lambda s: JobState(s["state"]).is_terminal(), timeout=300, job=job_id)
        assert job["state"] == "SUCCEEDED", cli.output()[-4000:]
        # This controller drove it to the end: its round reports the job done, a moment after the store says so.
        wait_until("the controller to report the job done", lambda: said(f"{job_id} SUCCEEDED"), 60)
    finally:
        if controller.poll() is None:
            controller.send_signal(signal.SIGTERM)
            try:
                controller.wait(timeout=60)
            except subprocess.TimeoutExpired:
                controller.kill()
    output = cli.output()
    assert output.count(OUTAGE_SAID) == 1, output[-4000:]
    assert "Traceback" not in output, output[-4000:]
    store = Store(cluster.url)
    try:
        record = store.get(job_id)
        assert record is not None and record.attempt == 1  # nothing was lost: no second attempt was needed
    finally:
        store.close()
