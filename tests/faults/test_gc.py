"""`cvmjob gc` converges: orphans (tagged by cvmjob, owned by no job this controller knows) are cleaned once older
than the grace period; `--dry-run` shows the plan and changes nothing; a live job's instance is never touched."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from orchestrator.lifecycle.machine import JobState
from orchestrator.tags import owner
from tests.faults import invariants
from tests.faults.conftest import expect_scenario
from tests.faults.harness import Pool, Record, World, kill, names, scenario

GROUP = "gc"
LONG = "train.command=exec python3 tiny.py --steps 100000 --step-seconds 0.1 --every 10"


def forget(w: World, job_id: str) -> None:
    """The job's records vanish from the store (a lost or reset state store, a submit that crashed)."""
    store = w.store()
    try:
        with store._write() as db:  # the store has no way to forget a job: only losing the store does that
            for table in ("events", "nodes", "images", "jobs"):
                db.execute(text(f"DELETE FROM {table} WHERE job_id = :job"), {"job": job_id})
    finally:
        store.close()
    w.note("the store forgets a job whose instance runs")


def gc(w: World, *args: str) -> dict[str, list[str]]:
    result = w.cli("gc", "--output", "json", *args, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    data: dict[str, list[str]] = json.loads(result.stdout)
    return data


@scenario("gc-collects-orphans", GROUP, cost=45)
def gc_collects_orphans(w: World) -> None:
    """An orphan instance (its job forgotten by the store after its controller was killed) and an orphan image
    (tagged with that job): `gc --dry-run` lists exactly them and changes nothing; within the grace period gc
    leaves them; `gc --grace 0s` terminates and deletes them, never touching the live job running beside them."""
    live = w.submit(LONG)
    live_controller = w.resume(live)
    orphan = w.submit(LONG)
    controller = w.resume(orphan)
    w.wait_phase(orphan, "training", min_step=2)
    w.wait_phase(live, "training", min_step=2)
    instance = w.node_instance(orphan)
    kill(controller)
    w.note("controller SIGKILL")
    from tencentcloud.cvm.v20170312 import models

    request = models.CreateImageRequest()
    request._deserialize({"InstanceId": instance, "ImageName": "orphan-image", "TagSpecification": [
        {"ResourceType": "image", "Tags": [{"Key": "cvmjob:job", "Value": orphan},
                                           {"Key": "cvmjob:owner", "Value": owner()}]}]})
    image = w.cvm().CreateImage(request).ImageId
    w.note("an image tagged with that job")
    forget(w, orphan)
    w.wait(lambda: any(i.ImageId == image and i.ImageState == "NORMAL" for i in invariants.tagged_images(w)), 30,
           "the orphan image")

    mutations = len([c for c in w.admin.calls() if c["action"] in invariants.MUTATIONS])
    plan = gc(w, "--dry-run", "--grace", "0s")
    assert plan["dry_run"] and plan["instances"] == [instance] and plan["images"] == [image], plan
    assert len([c for c in w.admin.calls() if c["action"] in invariants.MUTATIONS]) == mutations
    assert gc(w, "--grace", "1h") == {"instances": [], "images": [], "dry_run": False}  # too young
    assert len([c for c in w.admin.calls() if c["action"] in invariants.MUTATIONS]) == mutations

    done = gc(w, "--grace", "0s")
    assert done["instances"] == [instance] and done["images"] == [image], done
    w.wait(lambda: not w.live_instances(orphan), 30, "the orphan instance gone")
    assert image not in [i.ImageId for i in invariants.tagged_images(w)]
    assert [i["instance_id"] for i in w.live_instances(live)] == [w.node_instance(live)]  # untouched
    assert gc(w, "--grace", "0s") == {"instances": [], "images": [], "dry_run": False}  # converged
    w.cli("cancel", live)
    assert live_controller.wait(120) == 130
    assert w.job(live).state == JobState.CANCELLED


@pytest.mark.parametrize("scenario_name", names(GROUP))
def test_gc(scenario_name: str, fault_pool: Pool, record: Record) -> None:
    expect_scenario(fault_pool, scenario_name, record)
