"""The invariants every fault scenario must keep, checked once the system is quiet (written once, used by all):

- I1 no leak: every instance and image carrying cvmjob's tags belongs to a live job or is gone (a succeeded job's
  image is its product; a LAUNCH_FAILED instance never ran, bills nothing and vanishes by itself: gone). Checked
  through the official SDK (DescribeInstances / DescribeImages with tag filters) and through the emulator's own
  list; a failed lookup fails the check, it never counts as "gone".
- I2 no duplicate: at most one instance per (job, attempt, node), ever: sampled while the scenario ran, and every
  instance the emulator ever created is accounted for by a sample.
- I3 no lost checkpoint: the manifest's latest entry is complete and its files match the CRC-64 it records (and
  COS's); every attempt that trained resumed at or after the last step committed before it.
- I4 terminates: every job reached a terminal state (the scenarios wait with their own bounds).
- I5 replay: a controller restarted from the store (``drive()``, what `cvmjob resume` runs) reaches the same end
  state and touches nothing in the cloud. The crash-point suite restarts `cvmjob resume` itself at every
  transition.
- secret: the lane's long-term SecretKey appears nowhere: not in the UserData or instance disks, COS objects,
  the emulator's state, cvmjob's state store or logs.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
from tencentcloud.cvm.v20170312 import models as cvm_models

from crc64ecma import update as crc64
from orchestrator.contract import JobLayout
from orchestrator.controller.drive import drive
from orchestrator.state.machine import EXIT_CODES, JobState
from tests.faults.harness import InstanceSampler, World

T = TypeVar("T")
MUTATIONS = ("RunInstances", "TerminateInstances", "CreateImage", "DeleteImages")


def check_quiet(world: World, sampler: InstanceSampler, checks: tuple[str, ...]) -> None:
    if "I4" in checks:
        terminated(world)
    if "I1" in checks:
        no_leak(world)
    if "I2" in checks:
        no_duplicate(world, sampler)
    if "I5" in checks:
        replay(world)
    if "secret" in checks:
        no_secret(world)


def _checked(world: World, what: str) -> None:
    if what not in world.record.checked:
        world.record.checked.append(what)


# -- I4 ---------------------------------------------------------------------------------------------------------
TEARDOWN_ALLOWANCE = 120.0  # after limits.max_runtime, the teardown's own time


def terminated(world: World, timeout: float = 60) -> None:
    """Every job terminal, and ended within its bound (limits.max_runtime plus the teardown)."""
    jobs = world.jobs()
    assert jobs, "the scenario submitted no job"
    for job in jobs:
        ended = world.wait_terminal(job.job_id, timeout)
        last = world.store().events(job.job_id)[-1].at
        assert last <= ended.deadline + TEARDOWN_ALLOWANCE, f"I4: {job.job_id} ended {last - ended.deadline:.0f} s late"
    _checked(world, "I4")


# -- I1 ---------------------------------------------------------------------------------------------------------
def _sdk(call: Callable[[], T]) -> T:
    """An SDK lookup, retried while it fails: a failed lookup proves nothing either way."""
    for attempt in range(8):
        try:
            return call()
        except TencentCloudSDKException:
            if attempt == 7:
                raise AssertionError("the cloud could not be asked; a failed lookup never counts as gone") from None
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


def tagged_instances(world: World) -> list[Any]:
    client, offset = world.cvm(), 0
    found: list[Any] = []
    while True:
        request = cvm_models.DescribeInstancesRequest()
        flt = cvm_models.Filter()
        flt.Name, flt.Values = "tag-key", ["cvmjob:job"]
        request.Filters, request.Offset, request.Limit = [flt], offset, 100
        page = _sdk(lambda r=request: client.DescribeInstances(r))  # type: ignore[misc]
        found += page.InstanceSet or []
        offset += len(page.InstanceSet or [])
        if not page.InstanceSet or offset >= page.TotalCount:
            return found


def tagged_images(world: World) -> list[Any]:
    client, offset = world.cvm(), 0
    found: list[Any] = []
    while True:
        request = cvm_models.DescribeImagesRequest()
        by_tag, private = cvm_models.Filter(), cvm_models.Filter()
        by_tag.Name, by_tag.Values = "tag-key", ["cvmjob:job"]
        private.Name, private.Values = "image-type", ["PRIVATE_IMAGE"]
        request.Filters, request.Offset, request.Limit = [by_tag, private], offset, 100
        page = _sdk(lambda r=request: client.DescribeImages(r))  # type: ignore[misc]
        found += page.ImageSet or []
        offset += len(page.ImageSet or [])
        if not page.ImageSet or offset >= page.TotalCount:
            return found


def leaks(world: World) -> list[str]:
    """Tagged instances and images that belong to no live job (empty: no leak)."""
    jobs = world.jobs()
    live = {j.job_id for j in jobs if j.state.is_active()}
    products = {j.image_id for j in jobs if j.state == JobState.SUCCEEDED and j.image_id}
    found = []
    for inst in tagged_instances(world):
        job = next((t.Value for t in inst.Tags or [] if t.Key == "cvmjob:job"), "")
        if job not in live and inst.InstanceState != "LAUNCH_FAILED":  # never ran, bills nothing, vanishes by itself
            found.append(f"instance {inst.InstanceId} ({inst.InstanceState}) of {job or 'no job'}")
    for image in tagged_images(world):
        job = next((t.Value for t in image.Tags or [] if t.Key == "cvmjob:job"), "")
        if not ((image.ImageId in products and image.ImageState == "NORMAL") or job in live):
            found.append(f"image {image.ImageId} ({image.ImageState}) of {job or 'no job'}")
    for inst in world.admin.instances():
        job = (inst.get("tags") or {}).get("cvmjob:job", "")
        if (inst["state"] not in ("TERMINATED", "LAUNCH_FAILED") or inst.get("alive")) and job not in live:
            found.append(f"emulator instance {inst['instance_id']} {inst['state']} alive={inst.get('alive')}")
    return found


def no_leak(world: World, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while (found := leaks(world)) and time.monotonic() < deadline:
        time.sleep(0.5)  # processes of a released instance take a moment to die
    assert not found, f"I1 leak: {found}\n{world.describe()}"
    _checked(world, "I1")


# -- I2 ---------------------------------------------------------------------------------------------------------
def no_duplicate(world: World, sampler: InstanceSampler) -> None:
    assert not sampler.duplicates, f"I2 duplicates: {sampler.duplicates[:5]}"
    per_key: dict[tuple[str, str, str], list[str]] = {}
    for instance_id, key in sampler.keys.items():
        per_key.setdefault(key, []).append(instance_id)
    twice = {k: v for k, v in per_key.items() if len(v) > 1}
    assert not twice, f"I2: more than one instance for {twice}"
    unseen = [i["instance_id"] for i in world.admin.instances() if i["instance_id"] not in sampler.keys]
    assert not unseen, f"I2: instances created and gone between samples, unaccounted for: {unseen}"
    created = [c for c in world.admin.calls(action="RunInstances") if c["error"] is None]
    assert len(sampler.keys) <= len(created), (sampler.keys, created)
    _checked(world, "I2")


# -- I3 ---------------------------------------------------------------------------------------------------------
def checkpoints(world: World, job_id: str, final_step: int | None = None) -> int:
    """The manifest's latest checkpoint is complete and verified; resumed attempts started at or after the last
    committed step. Returns the latest step."""
    manifest = world.manifest(job_id)
    assert manifest is not None and manifest.checkpoints, f"I3: {job_id} has no manifest"
    latest = manifest.latest()
    assert latest is not None
    prefix = JobLayout(job_id).checkpoints_prefix
    for rel, expected in latest.files.items():
        key = f"{prefix}{latest.name}/{rel}"
        response = world.cos().get_object(Bucket="cvmjob-ap-guangzhou-1250000000", Key=key)
        data = response["Body"].get_raw_stream().read()
        assert crc64(data) == expected, f"I3: {key} does not match the manifest's CRC-64"
        assert int(response["x-cos-hash-crc64ecma"]) == expected, f"I3: COS's CRC-64 of {key} differs"
    if final_step is not None:
        assert latest.step == final_step, f"I3: latest step {latest.step}, expected {final_step}"
    job = world.job(job_id)
    for attempt in range(2, job.attempt + 1):
        committed = [c.step for c in manifest.checkpoints if c.attempt < attempt]
        if not committed:
            continue
        log = world.log_text(job_id, attempt)
        if "tiny: fresh start" in log:
            raise AssertionError(f"I3: attempt {attempt} started afresh although step {max(committed)} was committed")
        resumed = [int(m) for m in re.findall(r"tiny: resumed from step (\d+)", log)]
        assert all(r >= max(committed) for r in resumed), (
            f"I3: attempt {attempt} resumed from {resumed}, before the committed step {max(committed)}"
        )
    _checked(world, "I3")
    return latest.step


# -- I5 ---------------------------------------------------------------------------------------------------------
def replay(world: World) -> None:
    before = len([c for c in world.admin.calls() if c["action"] in MUTATIONS])
    store = world.store()
    # A controller SIGKILLed at a job's last transition left its lease behind. This process is not of the world's
    # CVMJOB_HOME, so it cannot tell that holder dead (controller.drive.died_here): it takes over as `cvmjob resume
    # --force` would (the jobs have ended: what is checked is that driving them again changes nothing).
    for job in world.jobs():
        again = drive(store, job.job_id, force_lease=True)
        assert (again.state, again.outcome, again.attempt) == (job.state, job.outcome, job.attempt), (again, job)
    after = len([c for c in world.admin.calls() if c["action"] in MUTATIONS])
    assert after == before, "I5: restarting the controllers of ended jobs changed the cloud"
    _checked(world, "I5")


def replay_cli(world: World, job_id: str) -> None:
    """I5 through `cvmjob resume`: same state and exit code, nothing changed in the cloud."""
    job = world.job(job_id)
    before = len([c for c in world.admin.calls() if c["action"] in MUTATIONS])
    result = world.cli("resume", job_id, "--output", "json", timeout=120)
    data = json.loads(result.stdout) if result.stdout.strip().startswith("{") else {}
    assert data.get("state") == job.state.value, f"I5: resume of {job_id} said {result.stdout[-500:]}"
    assert result.returncode == EXIT_CODES[job.state], (result.returncode, result.stderr[-500:])
    after = len([c for c in world.admin.calls() if c["action"] in MUTATIONS])
    assert after == before, f"I5: resuming the ended {job_id} changed the cloud"
    _checked(world, "I5")


# -- the long-term secret ---------------------------------------------------------------------------------------
def no_secret(world: World) -> None:
    secret = world.emulator.secret_key.encode()
    for root in (world.home, world.emulator.state_dir):
        # os.walk, not rglob: a released instance's sandbox or a deleted image vanishes while we walk
        for folder, _, files in os.walk(root):
            for name in files:
                path = Path(folder, name)
                try:
                    data = b"" if path.is_symlink() else path.read_bytes()
                except OSError:
                    continue
                assert secret not in data, f"the long-term SecretKey is in {path}"
    _checked(world, "secret")
