"""`cvmjob gc` converges: orphans (tagged by cvmjob, their job ended, or abandoned by a controller of this home, or
unknown to every store and bucket) are cleaned once older than the grace period; `--dry-run` shows the plan and
changes nothing; a live job's instance is never touched, whichever home's store holds the job; an instance the
cloud will not terminate yet is waited for while the rest are cleaned."""

from __future__ import annotations

import json
import secrets

import pytest
from sqlalchemy import text

from orchestrator.contract.tags import TAG_ATTEMPT, TAG_JOB, TAG_NODE, TAG_OWNER, owner
from orchestrator.providers.tencent import StaticCredential, TencentSdk, compute, images
from orchestrator.providers.tencent.vocabulary import ChargeType
from orchestrator.state.machine import JobState
from tests.faults import invariants
from tests.faults.conftest import expect_scenario
from tests.faults.harness import REGION, TYPE, ZONE, Pool, Record, World, kill, names, scenario

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


def gc(w: World, *args: str, **env: str) -> dict[str, list[str]]:
    result = w.cli("gc", "--output", "json", *args, timeout=120, **env)
    assert result.returncode == 0, result.stdout + result.stderr
    data: dict[str, list[str]] = json.loads(result.stdout)
    return data


def tagged_image(w: World, instance: str, job_id: str) -> str:
    """An image of ``instance`` tagged with ``job_id`` and this owner, once usable."""
    from tencentcloud.cvm.v20170312 import models

    request = models.CreateImageRequest()
    request._deserialize({"InstanceId": instance, "ImageName": f"image-of-{job_id}", "TagSpecification": [
        {"ResourceType": "image", "Tags": [{"Key": "cvmjob:job", "Value": job_id},
                                           {"Key": "cvmjob:owner", "Value": owner()}]}]})
    image: str = w.cvm().CreateImage(request).ImageId
    w.wait(lambda: any(i.ImageId == image and i.ImageState == "NORMAL" for i in invariants.tagged_images(w)), 30,
           f"the image of {job_id}")
    return image


def mutations(w: World) -> int:
    return len([c for c in w.admin.calls() if c["action"] in invariants.MUTATIONS])


def another_home(w: World) -> dict[str, str]:
    """The environment of a second CVMJOB_HOME (its own store) of the same $USER@hostname: a CI runner, a second
    checkout, another host of the same name."""
    home = w.home / "another-home"
    return {"CVMJOB_HOME": str(home), "CVMJOB_DB": str(home / "state.db")}


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
    image = tagged_image(w, instance, orphan)
    w.note("an image tagged with that job")
    forget(w, orphan)

    before = mutations(w)
    plan = gc(w, "--dry-run", "--grace", "0s")
    assert plan["dry_run"] and plan["instances"] == [instance] and plan["images"] == [image], plan
    assert mutations(w) == before
    assert gc(w, "--grace", "1h") == {"instances": [], "images": [], "dry_run": False}  # too young
    assert mutations(w) == before

    done = gc(w, "--grace", "0s")
    assert done["instances"] == [instance] and done["images"] == [image], done
    w.wait(lambda: not w.live_instances(orphan), 30, "the orphan instance gone")
    assert image not in [i.ImageId for i in invariants.tagged_images(w)]
    assert [i["instance_id"] for i in w.live_instances(live)] == [w.node_instance(live)]  # untouched
    assert gc(w, "--grace", "0s") == {"instances": [], "images": [], "dry_run": False}  # converged
    w.cli("cancel", live)
    assert live_controller.wait(120) == 130
    assert w.job(live).state == JobState.CANCELLED


@scenario("gc-leaves-another-homes-work", GROUP, cost=40)
def gc_leaves_another_homes_work(w: World) -> None:
    """A second CVMJOB_HOME of the same $USER@hostname (a CI runner, a second checkout) runs `gc --grace 0s` while
    the first home's job trains beside an image tagged with it: its store does not know the job, whose document in
    the state bucket says a controller of another home drives it, so it collects nothing (it terminated the live
    instance and deleted the image before). Once the job is cancelled, its document says so and the same gc
    collects the image."""
    live = w.submit(LONG)
    controller = w.resume(live)
    w.wait_phase(live, "training", min_step=2)
    instance = w.node_instance(live)
    image = tagged_image(w, instance, live)
    w.note("an image tagged with the live job; `gc --grace 0s` from another CVMJOB_HOME of the same owner")
    before = mutations(w)
    assert gc(w, "--grace", "0s", **another_home(w)) == {"instances": [], "images": [], "dry_run": False}
    assert mutations(w) == before
    assert [i["instance_id"] for i in w.live_instances(live)] == [instance]
    w.wait_phase(live, "training", min_step=3)  # it trains on
    w.cli("cancel", live)
    assert controller.wait(120) == 130
    assert w.job(live).state == JobState.CANCELLED
    assert gc(w, "--grace", "1h", **another_home(w)) == {"instances": [], "images": [image], "dry_run": False}
    assert image not in [i.ImageId for i in invariants.tagged_images(w)]


@scenario("gc-collects-past-a-pending-instance", GROUP, cost=20, checks=("I1", "I2", "secret"))
def gc_collects_past_a_pending_instance(w: World) -> None:
    """Two orphan instances and an orphan image of a job no store or bucket knows, and TerminateInstances answers
    UnsupportedOperation.InstanceStatePending (the cloud's answer while an instance is PENDING) to its first two
    calls: `gc --grace 0s` looks again until the refused instance is taken and collects the others in the same run,
    exit 0 (it stopped with exit 3 before, the image left). A real PENDING instance: tests/unit/test_gc.py."""
    sdk = TencentSdk(StaticCredential(w.emulator.secret_id, w.emulator.secret_key), REGION, w.emulator.endpoint,
                     w.emulator.appid)
    job = "job-" + secrets.token_hex(4)
    image_id = images.public(sdk)[0].image_id
    ids = sorted(compute.run_instances(sdk, compute.LaunchRequest(
        ZONE, TYPE, ChargeType.ON_DEMAND, image_id, f"gc-{job}-{node}", "gc-orphan",
        {TAG_JOB: job, TAG_ATTEMPT: "1", TAG_NODE: str(node), TAG_OWNER: owner()}))[0] for node in (0, 1))
    w.wait(lambda: all(i["state"] == "RUNNING" for i in w.instances(job)) and len(w.instances(job)) == 2, 60,
           "the orphans RUNNING")
    image = tagged_image(w, ids[0], job)
    w.note("two instances and an image of a job nobody knows")
    w.inject("error", service="cvm", action="TerminateInstances", code="UnsupportedOperation.InstanceStatePending",
             count=2)
    done = gc(w, "--grace", "0s")
    assert sorted(done["instances"]) == ids and done["images"] == [image], done
    w.wait(lambda: not w.live_instances(job), 30, "the orphan instances gone")
    assert image not in [i.ImageId for i in invariants.tagged_images(w)]
    answers = [c["error"] for c in w.admin.calls(action="TerminateInstances")]
    assert answers.count("UnsupportedOperation.InstanceStatePending") == 2 and answers[-1] is None, answers


@pytest.mark.parametrize("scenario_name", names(GROUP))
def test_gc(scenario_name: str, fault_pool: Pool, record: Record) -> None:
    expect_scenario(fault_pool, scenario_name, record)
