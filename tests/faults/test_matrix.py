"""The fault matrix: each row a seeded, deterministic scenario against the emulator, through the real CLI.

Rows (issue 5): 1 lost RunInstances response · 2 throttling and 5xx on every call kind · 3 no stock, quota ·
4 bootstrap never reports · 5 COS faults during sync and upload · 6 local disk full · 7 spot notice in every
phase · 8 reclaim without notice · 9 training crash, hang, OOM-like kill, and train.retry of a crash and a hang
(issue 33) · 11 two controllers · 12 controller cut off from COS · 13 credentials expire · 14 image creation
fails, hangs, quota · 15 TerminateInstances keeps failing · 16 fifty jobs at once. Row 10 (controller SIGKILL
at every transition) is test_crash_points.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.contract import AGENT_WHEELS_PREFIX
from orchestrator.contract.tags import owner
from orchestrator.state.machine import EXIT_CODES, JobState
from orchestrator.state.store import JobRecord, NewJob
from tests.faults import invariants
from tests.faults.conftest import expect_scenario
from tests.faults.harness import BOOTED_WITHIN, JOB, REPO, TYPE, ZONE, Pool, Record, World, names, scenario
from tests.holding import RELEASE, release
from tests.waiting import holds_for

GROUP = "matrix"


def finish(w: World, job_id: str, expected: JobState, timeout: float = 150) -> JobRecord:
    job = w.wait_terminal(job_id, timeout)
    assert job.state == expected, f"{job_id} ended {job.state.value} ({job.reason}), expected {expected.value}\n" + (
        w.describe()
    )
    return job


def exit_code(w: World, process: object, expected: JobState, timeout: float = 60) -> None:
    import subprocess

    assert isinstance(process, subprocess.Popen)
    code = process.wait(timeout=timeout)
    assert code == EXIT_CODES[expected], f"exit code {code}, expected {EXIT_CODES[expected]}\n{w.describe()}"


def successful(w: World, job_id: str, process: object, steps: int = 20) -> None:
    finish(w, job_id, JobState.SUCCEEDED)
    exit_code(w, process, JobState.SUCCEEDED)
    invariants.checkpoints(w, job_id, final_step=steps - 1)


@scenario("baseline", GROUP, cost=15, on_postgres=True)
def baseline(w: World) -> None:
    """No fault: the job trains, images and tears down (the reference for every other row)."""
    process = w.run()
    successful(w, w.wait_for_job(), process)


@scenario("1-run-instances-response-lost", GROUP, cost=15)
def lost_run_instances_response(w: World) -> None:
    """RunInstances commits, then its response is lost: the retry reuses the ClientToken, one instance exists."""
    job_id = w.submit()
    w.inject("drop_response", service="cvm", action="RunInstances", count=1)
    process = w.resume(job_id)
    successful(w, job_id, process)
    calls = w.admin.calls(action="RunInstances")
    dropped = [i for i, c in enumerate(calls) if c["dropped"]]
    assert len(dropped) == 1 and dropped[0] < len(calls) - 1, calls  # lost once, then retried
    assert len(w.admin.instances()) == 1, w.admin.instances()  # the lane was reset for this scenario


# -- helpers -------------------------------------------------------------------------------------------------
DATA_BUCKET = "cvmjob-data-1250000000"
SPOT = "billing.mode=spot"


def train(steps: int = 20, step_seconds: float = 0.1, every: int = 5, payload: int = 4096, **flags: object) -> str:
    extra = "".join(f" --{k.replace('_', '-')}" + ("" if v is True else f" {v}") for k, v in flags.items())
    return (f"train.command=exec python3 tiny.py --steps {steps} --step-seconds {step_seconds} --every {every}"
            f" --payload {payload}{extra}")


def put_data(w: World, files: int = 2, size: int = 1_500_000) -> dict[str, str]:
    """Training data in COS (its own bucket); name -> SHA-256."""
    client = w.cos()
    client.create_bucket(Bucket=DATA_BUCKET)
    digests = {}
    for index in range(files):
        body = bytes((index * 7 + i) % 253 for i in range(size))
        client.put_object(Bucket=DATA_BUCKET, Key=f"faulty/part-{index}.bin", Body=body)
        digests[f"d/part-{index}.bin"] = hashlib.sha256(body).hexdigest()
    return digests


WITH_DATA = (f"data.0.source=cos://{DATA_BUCKET}/faulty/", "data.0.target=d")


def data_arrived(w: World, job_id: str, digests: dict[str, str]) -> None:
    log = w.log_text(job_id, w.job(job_id).attempt)
    for name, digest in digests.items():
        assert f"tiny: data {name} " in log and digest in log, f"{name} did not arrive intact:\n{log[-2000:]}"


def pids(job_id: str, needle: str) -> list[int]:
    """Processes of this job's instance (cmdline or cwd under /opt/cvmjob/<job>/) whose cmdline has needle."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        where = f"/opt/cvmjob/{job_id}/"
        if needle in cmdline and (where in cmdline or where in cwd):
            found.append(int(entry.name))
    return found


def limit_file_size(pid: int, size: int) -> None:
    """RLIMIT_FSIZE on a running process: its writes past ``size`` bytes fail (EFBIG), as on a full disk."""
    _, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (size, hard))


def running(w: World, job_id: str, min_step: int = 3, timeout: float = BOOTED_WITHIN) -> str:
    """Wait until the training runs (step >= min_step); the instance id."""
    w.wait_phase(job_id, "training", timeout, min_step=min_step)
    return w.node_instance(job_id)


def recovered(w: World, job_id: str, expected: JobState = JobState.SUCCEEDED, timeout: float = 150) -> JobRecord:
    job = finish(w, job_id, expected, timeout)
    assert job.attempt >= 2, f"{job_id} did not relaunch\n{w.describe()}"
    return job


# -- 2: throttling and 5xx ----------------------------------------------------------------------------------
@scenario("2-throttled-create-and-terminate", GROUP, cost=16)
def throttled_create_and_terminate(w: World) -> None:
    """RunInstances answers RequestLimitExceeded then InternalError (retried with the same ClientToken: one
    instance); TerminateInstances answers InternalError and RequestLimitExceeded (teardown retries)."""
    job_id = w.submit()
    w.inject("error", service="cvm", action="RunInstances", code="RequestLimitExceeded", count=3)
    w.inject("error", service="cvm", action="RunInstances", code="InternalError", count=2)
    w.inject("error", service="cvm", action="TerminateInstances", code="InternalError", count=3)
    w.inject("error", service="cvm", action="TerminateInstances", code="RequestLimitExceeded", count=2)
    successful(w, job_id, w.resume(job_id))
    assert len(w.admin.instances()) == 1
    failed = {a: [c for c in w.admin.calls(action=a) if c["error"]] for a in ("RunInstances", "TerminateInstances")}
    assert len(failed["RunInstances"]) == 5 and len(failed["TerminateInstances"]) == 5, failed


@scenario("2-throttled-describe-and-images", GROUP, cost=18)
def throttled_describe_and_images(w: World) -> None:
    """DescribeInstances fails half the time (seeded) and is rate-limited to 3/s; CreateImage and DescribeImages
    fail a few times: nothing is concluded from a failed lookup, one image is made, the job finishes."""
    job_id = w.submit()
    w.inject("error", service="cvm", action="DescribeInstances", code="InternalError", count=6, probability=0.5)
    w.admin.set_rate_limit("cvm:DescribeInstances", 3)
    w.note("rate limit cvm:DescribeInstances 3/s")
    w.inject("error", service="cvm", action="CreateImage", code="InternalError", count=2)
    w.inject("error", service="cvm", action="DescribeImages", code="RequestLimitExceeded", count=3)
    successful(w, job_id, w.resume(job_id))
    assert [c for c in w.admin.calls(action="DescribeInstances") if c["error"]], "the fault never fired"
    assert "RECOVERING" not in [e.to_state for e in w.store().events(job_id)]
    made = [c for c in w.admin.calls(action="CreateImage") if c["error"] is None]
    assert len(made) == 1 and w.job(job_id).image_id, made


@scenario("2-throttled-beyond-the-retries", GROUP, cost=35)
def throttled_beyond_the_retries(w: World) -> None:
    """STS GetFederationToken (the agents' keys) answers RequestLimitExceeded and COS answers 503 to the spec's
    upload more times than one action's retries: the controller waits and tries again, it does not die; the job
    succeeds."""
    job_id = w.submit()
    w.inject("error", service="sts", action="GetFederationToken", code="RequestLimitExceeded", count=8)
    w.inject_cos("error", operation="PutObject", key_prefix=f"cvmjob/{job_id}/spec.json", status=503, count=8)
    successful(w, job_id, w.resume(job_id))


# -- 3: capacity and quota --------------------------------------------------------------------------------
@scenario("3-out-of-stock-then-next-zone", GROUP, cost=22)
def out_of_stock(w: World) -> None:
    """The planned zone is sold out at launch: the next zone is tried, and the job succeeds there."""
    job_id = w.submit()
    w.admin.set_stock(ZONE, TYPE, "POSTPAID_BY_HOUR", 0)
    w.note(f"stock 0 for {TYPE} in {ZONE}")
    successful(w, job_id, w.resume(job_id))
    nodes = w.store().nodes(job_id)
    assert nodes[0].state == "failed" and nodes[-1].zone != ZONE, nodes


@scenario("3-out-of-stock-everywhere", GROUP, cost=25)
def no_stock_anywhere(w: World) -> None:
    """Every zone sold out: the policy's launch failures are spent, the job ends FAILED_NO_CAPACITY (exit 20)
    with what it tried; nothing was created."""
    job_id = w.submit()
    for zone in ("ap-guangzhou-3", "ap-guangzhou-4", "ap-guangzhou-6", "ap-guangzhou-7"):
        w.admin.set_stock(zone, TYPE, "POSTPAID_BY_HOUR", 0)
    w.note(f"stock 0 for {TYPE} in every zone")
    process = w.resume(job_id)
    job = finish(w, job_id, JobState.FAILED_NO_CAPACITY)
    exit_code(w, process, JobState.FAILED_NO_CAPACITY)
    assert "tried" in job.reason, job.reason
    assert w.admin.instances() == []


@scenario("3-quota-exceeded", GROUP, cost=20)
def quota_exceeded(w: World) -> None:
    """RunInstances answers LimitExceeded.InstanceQuota once: counted as a failed launch, retried, succeeds."""
    job_id = w.submit()
    w.inject("error", service="cvm", action="RunInstances", code="LimitExceeded.InstanceQuota", count=1)
    successful(w, job_id, w.resume(job_id))


@scenario("3-launch-failed", GROUP, cost=20)
def launch_failed(w: World) -> None:
    """The instance is created but ends LAUNCH_FAILED: recovery launches another attempt."""
    job_id = w.submit()
    w.admin.add_launch_failures(1, "injected: host failure")
    w.note("launch failure x1")
    process = w.resume(job_id)
    recovered(w, job_id)
    exit_code(w, process, JobState.SUCCEEDED)


# -- 4: the agent never reports -----------------------------------------------------------------------------
@scenario("4-bootstrap-never-reports", GROUP, cost=30)
def bootstrap_fails(w: World) -> None:
    """The agent wheel cannot be fetched (COS 503 on every GET of it): the instance runs, its agent never
    reports, and the job fails FAILED_BOOTSTRAP (exit 12) after limits.bootstrap_timeout."""
    job_id = w.submit("limits.bootstrap_timeout=12s")
    w.inject_cos("error", operation="GetObject", key_prefix=AGENT_WHEELS_PREFIX, status=503, count=None)
    process = w.resume(job_id)
    job = finish(w, job_id, JobState.FAILED_BOOTSTRAP)
    exit_code(w, process, JobState.FAILED_BOOTSTRAP)
    assert "without the agent reporting" in job.reason, job.reason


# -- 5: COS faults during sync and upload -------------------------------------------------------------------
@scenario("5-cos-faults-during-sync", GROUP, cost=25)
def cos_faults_sync(w: World) -> None:
    """Data sync meets COS 503s, connections reset mid-body (truncated), and a slow link: the data arrives
    intact (SHA-256 checked by the training) and the job succeeds."""
    digests = put_data(w)
    job_id = w.submit(*WITH_DATA, train(check_data=True))
    w.inject_cos("error", operation="GetObject", bucket=DATA_BUCKET, status=503, count=2)
    w.inject_cos("reset_body", operation="GetObject", bucket=DATA_BUCKET, after_bytes=200_000, count=2)
    w.inject_cos("slow_body", operation="GetObject", bucket=DATA_BUCKET, bytes_per_second=1_000_000, count=1)
    successful(w, job_id, w.resume(job_id))
    data_arrived(w, job_id, digests)


@scenario("5-cos-faults-during-upload", GROUP, cost=30)
def cos_faults_upload(w: World) -> None:
    """Checkpoint uploads (17 MB: multipart) meet a reset mid-part, 503s on parts and on the manifest, and a
    slow link: every checkpoint lands intact (CRC-64 checked) and the job succeeds."""
    job_id = w.submit(train(steps=20, every=10, payload=17_000_000))
    prefix = f"cvmjob/{job_id}/checkpoints/"
    w.inject_cos("reset_body", operation="UploadPart", key_prefix=prefix, after_bytes=1_000_000, count=2)
    w.inject_cos("error", operation="UploadPart", key_prefix=prefix, status=503, count=2)
    w.inject_cos("error", operation="PutObject", key_prefix=prefix + "manifest/", status=503, count=2)
    w.inject_cos("slow_body", operation="UploadPart", key_prefix=prefix, bytes_per_second=8_000_000, count=1)
    successful(w, job_id, w.resume(job_id))


# -- 6: local disk full --------------------------------------------------------------------------------------
@scenario("6-disk-full-during-sync", GROUP, cost=22)
def disk_full_sync(w: World) -> None:
    """The agent's writes past 1 MB fail (RLIMIT_FSIZE: EFBIG, the kernel's refusal as on a full disk) while it
    syncs 1.5 MB files: the attempt fails FAILED_SETUP (exit 11) with the reason; nothing leaks."""
    put_data(w)
    job_id = w.submit(*WITH_DATA)
    process = w.resume(job_id)
    agent = w.wait(lambda: pids(job_id, "orchestrator.agent"), BOOTED_WITHIN, "the agent process", every=0.05)
    limit_file_size(agent[0], 1_000_000)
    w.note("RLIMIT_FSIZE 1 MB on the agent before its data sync")
    job = finish(w, job_id, JobState.FAILED_SETUP)
    exit_code(w, process, JobState.FAILED_SETUP)
    assert "sync" in job.reason.lower(), job.reason


@scenario("6-disk-full-during-checkpoint", GROUP, cost=22)
def disk_full_checkpoint(w: World) -> None:
    """After the first checkpoint, the training's writes past 1 MB fail (RLIMIT_FSIZE): its next checkpoint
    cannot be written, it exits non-zero, the job fails FAILED (exit 10), and the committed checkpoint stays
    complete."""
    job_id = w.submit(train(steps=40, step_seconds=0.15, every=5, payload=2_000_000))
    process = w.resume(job_id)
    w.wait(lambda: (m := w.manifest(job_id)) and m.checkpoints, BOOTED_WITHIN, "a committed checkpoint")
    tiny = w.wait(lambda: pids(job_id, "tiny.py"), 30, "the training process")
    limit_file_size(tiny[0], 1_000_000)
    w.note("RLIMIT_FSIZE 1 MB on the training after its first checkpoint")
    finish(w, job_id, JobState.FAILED)
    exit_code(w, process, JobState.FAILED)
    invariants.checkpoints(w, job_id)


# -- 7, 8: spot reclaims -----------------------------------------------------------------------------------
@scenario("7-notice-during-sync", GROUP, cost=35)
def notice_during_sync(w: World) -> None:
    """A reclaim notice (10 s) while the data sync crawls (slow link): the attempt ends preempted before
    training, the job relaunches on spot and succeeds with the data intact."""
    digests = put_data(w)
    job_id = w.submit(SPOT, *WITH_DATA, train(check_data=True))
    w.inject_cos("slow_body", operation="GetObject", bucket=DATA_BUCKET, bytes_per_second=100_000, count=2)
    process = w.resume(job_id)
    w.wait_phase(job_id, "syncing")
    w.admin.reclaim(w.node_instance(job_id), notice_seconds=10)
    w.note("spot reclaim, 10 s notice, during sync")
    w.clear_faults()
    recovered(w, job_id)
    exit_code(w, process, JobState.SUCCEEDED)
    data_arrived(w, job_id, digests)
    invariants.checkpoints(w, job_id, final_step=19)


@scenario("7-notice-during-training", GROUP, cost=35)
def notice_during_training(w: World) -> None:
    """A reclaim notice (15 s) mid-training: emergency checkpoint, relaunch, resume from it, success."""
    # Held before step 10 until the notice's checkpoint request: the reclaim always comes before the end (with 6 s
    # of training, a loaded CI runner saw it finish before the agent read the notice).
    job_id = w.submit(SPOT, train(steps=30, every=10, hold_at=10, release=RELEASE))
    process = w.resume(job_id)
    instance = running(w, job_id, min_step=8)
    w.admin.reclaim(instance, notice_seconds=15)
    w.note("spot reclaim, 15 s notice, during training")
    recovered(w, job_id)
    exit_code(w, process, JobState.SUCCEEDED)
    manifest = w.manifest(job_id)
    assert manifest is not None and any(c.emergency for c in manifest.checkpoints), manifest
    invariants.checkpoints(w, job_id, final_step=29)


@scenario("7-notice-during-upload", GROUP, cost=40)
def notice_during_upload(w: World) -> None:
    """A reclaim notice (8 s) while a 3 MB checkpoint crawls to COS at 200 kB/s: whatever is not in the
    manifest does not count; the next attempt resumes from the last complete checkpoint."""
    job_id = w.submit(SPOT, train(steps=40, every=10, payload=3_000_000))
    prefix = f"cvmjob/{job_id}/checkpoints/"
    process = w.resume(job_id)
    w.wait(lambda: (m := w.manifest(job_id)) and m.checkpoints, BOOTED_WITHIN, "a committed checkpoint")
    w.inject_cos("slow_body", operation="PutObject", key_prefix=prefix + "step-", bytes_per_second=200_000,
                 count=None)
    w.wait(lambda: (s := w.agent_phase(job_id)) and (s.get("step") or 0) >= 21, 120, "the second checkpoint on its way")
    assert len(w.manifest(job_id).checkpoints) == 1  # type: ignore[union-attr]
    w.admin.reclaim(w.node_instance(job_id), notice_seconds=8)
    w.note("spot reclaim, 8 s notice, during a checkpoint upload")
    w.wait(lambda: w.job(job_id).attempt >= 2, 60, "the next attempt")
    w.clear_faults()
    recovered(w, job_id)
    exit_code(w, process, JobState.SUCCEEDED)
    invariants.checkpoints(w, job_id, final_step=39)


@scenario("7-notice-during-imaging", GROUP, cost=25)
def notice_during_imaging(w: World) -> None:
    """A reclaim notice (3 s) while the image is being created: the job still ends SUCCEEDED, the image is
    kept or reported missing, and nothing leaks."""
    job_id = w.submit(SPOT)
    w.inject("latency", service="cvm", action="DescribeImages", seconds=1.5, count=3)
    process = w.resume(job_id)
    w.wait_state(job_id, "IMAGING")
    w.admin.reclaim(w.node_instance(job_id), notice_seconds=3)
    w.note("spot reclaim, 3 s notice, in IMAGING")
    finish(w, job_id, JobState.SUCCEEDED)
    exit_code(w, process, JobState.SUCCEEDED)


@scenario("7-notice-during-teardown", GROUP, cost=25)
def notice_during_teardown(w: World) -> None:
    """TerminateInstances fails while a reclaim notice (3 s) runs out in TEARING_DOWN: the reclaim ends the
    instance; the job ends SUCCEEDED only once it is gone."""
    job_id = w.submit(SPOT)
    process = w.resume(job_id)
    w.wait_state(job_id, "IMAGING")
    w.inject("error", service="cvm", action="TerminateInstances", code="InternalError", count=None)
    w.wait_state(job_id, "TEARING_DOWN", timeout=60)
    w.admin.reclaim(w.node_instance(job_id), notice_seconds=3)
    w.note("spot reclaim, 3 s notice, in TEARING_DOWN")
    finish(w, job_id, JobState.SUCCEEDED, timeout=60)
    exit_code(w, process, JobState.SUCCEEDED)
    w.clear_faults()


@scenario("8-reclaim-without-notice", GROUP, cost=35)
def reclaim_without_notice(w: World) -> None:
    """The instance vanishes mid-training (no notice): the job relaunches and resumes from the last committed
    checkpoint."""
    # Held before step 15 (after the checkpoint of step 14) until the reclaim, and its next attempt until it runs:
    # 5 s of free training ended before a loaded lane saw step 12.
    job_id = w.submit(SPOT, train(steps=50, every=5, hold_at=15, release=RELEASE))
    process = w.resume(job_id)
    instance = running(w, job_id, min_step=12)
    w.admin.reclaim(instance, notice_seconds=None)
    w.note("spot reclaim without notice during training")
    w.wait(lambda: [i for i in release(w.admin, job_id) if i != instance], BOOTED_WITHIN, "the next attempt")
    recovered(w, job_id)
    exit_code(w, process, JobState.SUCCEEDED)
    invariants.checkpoints(w, job_id, final_step=49)


# -- 9: the training itself fails ---------------------------------------------------------------------------
@scenario("9-training-exits-non-zero", GROUP, cost=15)
def training_crash(w: World) -> None:
    """The training exits 3 at step 7, a code train.retry does not list: FAILED (exit 10), no image, the checkpoint
    of step 4 stays complete."""
    job_id = w.submit(train(fail_at=7), "train.retry.on_exit_codes=[4]")
    w.note("the training exits 3 at step 7 (train.retry.on_exit_codes [4]: not this one)")
    process = w.resume(job_id)
    finish(w, job_id, JobState.FAILED)
    exit_code(w, process, JobState.FAILED)
    assert w.admin.calls(action="CreateImage") == []
    assert invariants.checkpoints(w, job_id) == 4


@scenario("9-training-hangs", GROUP, cost=28)
def training_hang(w: World) -> None:
    """The training stops making progress at step 7: after train.hang_timeout (10 s) the agent kills it and the
    job ends FAILED_HUNG (exit 13)."""
    job_id = w.submit(train(hang_at=7), "train.hang_timeout=10s")
    w.note("the training stops reporting at step 7 (train.hang_timeout 10 s)")
    process = w.resume(job_id)
    finish(w, job_id, JobState.FAILED_HUNG)
    exit_code(w, process, JobState.FAILED_HUNG)
    assert invariants.checkpoints(w, job_id) == 4


@scenario("9-training-exits-a-listed-code", GROUP, cost=25)
def training_crash_retried(w: World) -> None:
    """train.retry on exit code 3: the first attempt's training exits 3 at step 7; the attempt ends, a new instance
    (another zone first) resumes from the checkpoint of step 4 and succeeds."""
    job_id = w.submit(train(fail_at=7, faults_in_attempt=1), "train.retry.on_exit_codes=[3]")
    w.note("the training exits 3 at step 7 of attempt 1 (train.retry.on_exit_codes [3])")
    process = w.resume(job_id)
    successful(w, job_id, process)
    job = w.job(job_id)
    assert job.attempt == 2, w.describe()
    first, second = sorted(w.store().nodes(job_id), key=lambda n: n.attempt)
    assert first.end_reason == "retry: the training exited with 3" and first.zone != second.zone, (first, second)
    assert "tiny: resumed from step 4" in w.log_text(job_id, 2)
    assert any("retry 1 of 2 (train.retry): the training exited with 3" in e.detail
               for e in w.store().events(job_id)), w.describe()


@scenario("9-training-hangs-retried", GROUP, cost=35)
def training_hang_retried(w: World) -> None:
    """train.retry.on_hang: the first attempt hangs at step 7, is killed after hang_timeout (10 s), and a new
    instance resumes it to success."""
    job_id = w.submit(train(hang_at=7, faults_in_attempt=1), "train.hang_timeout=10s", "train.retry.on_hang=true")
    w.note("the training stops reporting at step 7 of attempt 1 (train.hang_timeout 10 s, train.retry.on_hang)")
    process = w.resume(job_id)
    successful(w, job_id, process)
    assert w.job(job_id).attempt == 2, w.describe()


@scenario("9-training-oom-killed", GROUP, cost=20)
def training_killed(w: World) -> None:
    """A worker is SIGKILLed mid-training (what the OOM killer does): FAILED (exit 10) with the signal in the
    reason; the last checkpoint stays complete."""
    job_id = w.submit(train(steps=80, every=5))
    process = w.resume(job_id)
    running(w, job_id, min_step=7)
    for pid in pids(job_id, "tiny.py"):
        os.kill(pid, signal.SIGKILL)
    w.note("SIGKILL of the training process")
    job = finish(w, job_id, JobState.FAILED)
    exit_code(w, process, JobState.FAILED)
    assert "-9" in job.reason or "signal" in job.reason.lower() or "kill" in job.reason.lower(), job.reason
    invariants.checkpoints(w, job_id)


# -- 11: two controllers ------------------------------------------------------------------------------------
@scenario("11-two-controllers", GROUP, cost=20, on_postgres=True)
def two_controllers(w: World) -> None:
    """A second `cvmjob resume` while the first controller drives the job: refused (exit 3, one line naming the
    holder); the job finishes once, with one instance and one image."""
    # Held until the second `cvmjob resume` was refused, so that it starts while the first still drives the job on a
    # loaded machine too (with 40 steps of 0.1 s a slow start of the second found the job already ended).
    job_id = w.submit(train(steps=20, hold_at=5, release=RELEASE))
    first = w.resume(job_id)
    running(w, job_id)
    second = w.cli("resume", job_id, timeout=60)
    assert second.returncode == 3, second.stdout + second.stderr
    assert second.stderr.startswith("error:") and "Traceback" not in second.stderr, second.stderr
    assert "driven by controller" in second.stderr, second.stderr
    w.note("a second controller on the same job")
    assert len(release(w.admin, job_id)) == 1
    finish(w, job_id, JobState.SUCCEEDED)
    exit_code(w, first, JobState.SUCCEEDED)
    assert len(w.admin.instances()) == 1
    assert len([c for c in w.admin.calls(action="CreateImage") if c["error"] is None]) == 1
    assert [e.to_state for e in w.store().events(job_id)].count("SUCCEEDED") == 1


# -- 12: the controller cut off from COS --------------------------------------------------------------------
@scenario("12-controller-cut-off-from-cos", GROUP, cost=40)
def controller_cut_off(w: World) -> None:
    """For 20 s (longer than the 15 s heartbeat staleness) every GET of the agent's status and result answers
    503, while the agent (which only PUTs them) keeps going: the controller concludes nothing, then finishes."""
    # Held through the 20 s window however late a loaded lane sees it start (6 s of training ended before the
    # window once, and the controller had moved on).
    job_id = w.submit(train(steps=30, step_seconds=0.1, every=10, hold_at=5, release=RELEASE))
    process = w.resume(job_id)
    running(w, job_id)
    node = f"cvmjob/{job_id}/attempts/1/nodes/0/"
    w.inject_cos("error", operation="GetObject", key_prefix=node + "status.json", status=503, count=None)
    w.inject_cos("error", operation="GetObject", key_prefix=node + "result.json", status=503, count=None)
    holds_for(f"{job_id} RUNNING while its documents cannot be read", lambda: w.job(job_id).state == JobState.RUNNING,
              20)
    w.clear_faults()
    assert len(release(w.admin, job_id)) == 1
    finish(w, job_id, JobState.SUCCEEDED)
    exit_code(w, process, JobState.SUCCEEDED)
    assert w.job(job_id).attempt == 1
    invariants.checkpoints(w, job_id, final_step=29)


# -- 13: credentials expire ---------------------------------------------------------------------------------
@scenario("13-credentials-expire", GROUP, cost=45)
def credentials_expire(w: World) -> None:
    """Every temporary credential expires mid-training: the controller's refresh gives the agent new keys and
    the attempt carries on to success."""
    # The default policy's 60 s heartbeat staleness: the agent is silent from the expiry until its new keys.
    job_id = w.submit(train(steps=150, step_seconds=0.1, every=10), "policies.recovery=default")
    process = w.resume(job_id)
    running(w, job_id)
    w.admin.expire_credentials()
    w.note("admin: every STS credential expires now")
    finish(w, job_id, JobState.SUCCEEDED, timeout=120)
    exit_code(w, process, JobState.SUCCEEDED)
    assert w.job(job_id).attempt == 1, w.describe()
    invariants.checkpoints(w, job_id, final_step=149)


# -- 14: images ---------------------------------------------------------------------------------------------
@scenario("14-image-fails", GROUP, cost=16)
def image_fails(w: World) -> None:
    """The capture fails (CREATEFAILED): the job succeeds without an image, and the failed image is not left."""
    job_id = w.submit()
    w.admin.add_image_faults("fail")
    w.note("image capture fails (CREATEFAILED)")
    successful(w, job_id, w.resume(job_id))


@scenario("14-image-refused", GROUP, cost=16)
def image_refused(w: World) -> None:
    """CreateImage is refused (ImageQuotaLimitExceeded, as with 500 images): success without an image."""
    job_id = w.submit()
    w.inject("error", service="cvm", action="CreateImage", code="ImageQuotaLimitExceeded", count=1)
    successful(w, job_id, w.resume(job_id))
    assert w.job(job_id).image_id is None


@scenario("14-image-hangs", GROUP, cost=30)
def image_hangs(w: World) -> None:
    """The capture never finishes: after snapshot.timeout (10 s) the job succeeds without the image; once the
    capture settles, nothing is left behind."""
    job_id = w.submit("snapshot.timeout=10s")
    w.admin.add_image_faults("hang")
    w.note("image capture hangs (CREATING)")
    process = w.resume(job_id)
    job = finish(w, job_id, JobState.SUCCEEDED)
    exit_code(w, process, JobState.SUCCEEDED)
    assert "still creating" in job.reason, job.reason
    w.clear_faults()


@scenario("14-image-retention-spares-others", GROUP, cost=25)
def image_retention(w: World) -> None:
    """snapshot.keep_last 1 with three older images of the same job name: the one of an earlier job of this store
    is deleted; one another user made (another cvmjob:owner) and one of a job another home holds (the same owner
    tag: a second CVMJOB_HOME, a CI runner) are not this job's to judge."""
    from tencentcloud.cvm.v20170312 import models

    job_id = w.submit("snapshot.keep_last=1", "train.command=exec python3 tiny.py --steps 60 --step-seconds 0.1")
    job, store = w.job(job_id), w.store()
    now = job.created_at  # an earlier job of the same name in this store, long finished
    store.create_job(NewJob(job_id="job-earlier0", name=job.name, spec=job.spec, plan=job.plan, target=job.target,
                            settings=job.settings, deadline=now + 60, source_dir=job.source_dir), now)
    token = store.acquire("job-earlier0", "fault-test", ttl=60, now=now)
    store.transition("job-earlier0", token, JobState.PENDING, JobState.CANCELLED, "an earlier job", now)
    store.release("job-earlier0", token)
    process = w.resume(job_id)
    w.wait_phase(job_id, "training", min_step=2)
    instance = w.node_instance(job_id)
    made: dict[str, str] = {}
    earlier = (("ours", owner(), "job-earlier0"), ("another user's", "someone-else@elsewhere", "job-earlier0"),
               ("another home's", owner(), "job-elsewh0"))
    for label, who, of in earlier:
        request = models.CreateImageRequest()
        tags = {"cvmjob:job": of, "cvmjob:name": job.name, "cvmjob:owner": who}
        request._deserialize({"InstanceId": instance, "ImageName": f"faulty-earlier-{len(made)}", "TagSpecification": [
            {"ResourceType": "image", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]})
        image_id: str = w.cvm().CreateImage(request).ImageId
        made[label] = image_id

        def ready(image_id: str = image_id) -> bool:
            return any(x.ImageId == image_id and x.ImageState == "NORMAL" for x in invariants.tagged_images(w))

        w.wait(ready, 30, "an earlier image")
    w.note("three earlier images of the job's name: of this store's earlier job, another user's, another home's")
    successful(w, job_id, process, steps=60)
    left = {i.ImageId for i in invariants.tagged_images(w)}
    assert made["ours"] not in left, (made, left)
    assert made["another user's"] in left and made["another home's"] in left, (made, left)
    request = models.DeleteImagesRequest()
    request.ImageIds = [made["another user's"], made["another home's"]]
    w.cvm().DeleteImages(request)  # not ours: the invariants judge what this controller owns


# -- 15: TerminateInstances keeps failing -------------------------------------------------------------------
@scenario("15-terminate-keeps-failing", GROUP, cost=35)
def terminate_keeps_failing(w: World) -> None:
    """TerminateInstances keeps failing (three refusals at least): the job stays TEARING_DOWN while the instance
    lives (no success is claimed); once the fault clears, teardown converges."""
    job_id = w.submit()
    w.inject("error", service="cvm", action="TerminateInstances", code="InternalError", count=None)
    process = w.resume(job_id)
    w.wait_state(job_id, "TEARING_DOWN")
    w.wait(lambda: len([c for c in w.admin.calls(action="TerminateInstances") if c["error"]]) >= 3, 120,
           "three refused TerminateInstances")
    assert w.job(job_id).state == JobState.TEARING_DOWN and w.live_instances(job_id), w.describe()
    w.clear_faults()
    finish(w, job_id, JobState.SUCCEEDED, timeout=90)
    exit_code(w, process, JobState.SUCCEEDED)


@scenario("15-terminate-refused", GROUP, cost=30)
def terminate_refused(w: World) -> None:
    """TerminateInstances is refused for good (UnauthorizedOperation: the permission was taken away): the
    controller stops with one `error:` line and exit 3, the job stays TEARING_DOWN (no success claimed, the
    instance lives, gc leaves a live job alone); once the permission is back, `cvmjob resume` converges."""
    job_id = w.submit()
    w.inject("error", service="cvm", action="TerminateInstances", code="UnauthorizedOperation", count=None)
    process = w.resume(job_id)
    assert process.wait(120) == 3, w.describe()
    assert w.job(job_id).state == JobState.TEARING_DOWN and w.live_instances(job_id), w.describe()
    errors = [line for line in w.output().splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "UnauthorizedOperation" in errors[0], errors
    gc = w.cli("gc", "--grace", "0s", "--output", "json")
    assert json.loads(gc.stdout) == {"instances": [], "images": [], "dry_run": False}, gc.stdout + gc.stderr
    w.clear_faults()
    exit_code(w, w.resume(job_id), JobState.SUCCEEDED, timeout=120)
    finish(w, job_id, JobState.SUCCEEDED)


# -- 16: fifty jobs at once -----------------------------------------------------------------------------------
FIFTY = int(os.environ.get("CVMJOB_FAULT_FIFTY", "50"))
# "launch" (default): each job is cancelled once its instance exists: launches and teardowns in bursts, no agent
# start-up (torch's import in preflight is most of a job's CPU). "run": every job trains to its end.
FIFTY_MODE = os.environ.get("CVMJOB_FAULT_FIFTY_MODE", "launch")


@scenario("16-fifty-jobs-at-once", GROUP, cost=60, on_postgres=True)
def fifty_jobs(w: World) -> None:
    """Fifty jobs planned, staged, launched and driven at the same moment under the emulator's rate limits
    (RunInstances and TerminateInstances 10/s, DescribeInstances 40/s, 20/s otherwise), more than one zone's
    stock: each cancelled once its instance exists (CVMJOB_FAULT_FIFTY_MODE=run: each trains to its end). Every
    one ends as expected, with exactly one instance, and nothing is left."""
    w.note(f"{FIFTY} jobs at once under the default rate limits ({FIFTY_MODE})")
    for zone in ("ap-guangzhou-3", "ap-guangzhou-4"):  # 20 each by default: the overflow moves to the next zone
        w.admin.set_stock(zone, TYPE, "POSTPAID_BY_HOUR", 30)
    w.note(f"stock 30 for {TYPE} in ap-guangzhou-3 and -4")
    extra = ["--cancel-when-booting"] if FIFTY_MODE == "launch" else []
    # Cancelled: a training long enough (60 s) that the cancel always reaches it first. With three steps of 50 ms,
    # an agent that started before its controller stepped the job again finished first, and the job rightly
    # SUCCEEDED (17 of 50 in a CI run once the controller reached RUNNING sooner).
    training = train(steps=3, step_seconds=0.05, every=3) if FIFTY_MODE == "run" else \
        train(steps=1200, step_seconds=0.05, every=200)
    result = subprocess.run(
        [sys.executable, "-m", "tests.faults.many", str(FIFTY), str(JOB), "--set", "snapshot.enabled=false",
         "--set", training, *extra],
        # About 130 s alone on the 2-core machine; a CI run's PostgreSQL pass, with other scenarios beside it, went
        # past 400 s. The bound is for a hang, not a speed goal (that is benchmarks/controller_scale.py's), and stays
        # under pytest's 600 s so that the scenario's own report says what was left.
        env=w.env(), capture_output=True, text=True, timeout=540, cwd=REPO, check=False,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    states = json.loads(result.stdout.strip().splitlines()[-1])
    expected = "CANCELLED" if FIFTY_MODE == "launch" else "SUCCEEDED"
    bad = {k: v for k, v in states.items() if v != expected}
    assert not bad and len(states) == FIFTY, \
        f"{len(bad)} did not end {expected}: {sorted(set(bad.values()))[:5]}\n{result.stderr[-4000:]}"
    throttled = [c for c in w.admin.calls() if c["error"] == "RequestLimitExceeded"]
    w.note(f"{len(throttled)} calls answered RequestLimitExceeded")
    assert len(w.admin.instances()) == FIFTY


# The rows marked on_postgres run on both stores: the reference run, two controllers contending for one job's
# lease, and fifty jobs written at once. The other rows' subject is the cloud's fault; the store's part in them is
# the crash points' (each transition killed at, on both stores).
@pytest.mark.parametrize("scenario_name", names(GROUP))
def test_matrix(scenario_name: str, fault_pool: Pool, record: Record) -> None:
    expect_scenario(fault_pool, scenario_name, record)
