"""Row 10: the controller SIGKILLed at every persisted transition, then `cvmjob resume`.

``CVMJOB_CRASH_AT="A->B"`` (state/store.py) makes the controller SIGKILL itself right after that transition
commits. Each scenario below takes one job along one path and kills its controller at each listed transition in
turn: `cvmjob resume` with the next crash point starts from the store and the cloud alone, is killed at its own
point, and so on; a last `cvmjob resume` runs the job to its end. Every transition of ``machine.all_transitions()``
is killed at, by some scenario (the machine holds only edges some code path takes); the summary test says how
many. After each scenario the common invariants (I1 no leak, I2 no duplicate, I4 terminal with the
expected state and exit code, I5 replay, no secret) are checked, and I3 where the path committed checkpoints.
"""

from __future__ import annotations

import signal
import subprocess
import threading

import pytest

from orchestrator.contract import AGENT_WHEELS_PREFIX
from orchestrator.state.machine import EXIT_CODES, JobState, all_transitions
from orchestrator.state.store import CRASH_AT_ENV
from tests.faults import invariants
from tests.faults.conftest import expect_scenario
from tests.faults.harness import ON_POSTGRES, TYPE, Pool, Record, World, names, scenario

GROUP = "crash_points"
SPOT = "billing.mode=spot"
ZONES = ("ap-guangzhou-3", "ap-guangzhou-4", "ap-guangzhou-6", "ap-guangzhou-7")

_killed: dict[str, list[str]] = {}
_lock = threading.Lock()


def crash(w: World, job_id: str, transition: str, timeout: float = 150, *, transition_point: bool = True,
          process: subprocess.Popen[bytes] | None = None) -> None:
    """`cvmjob resume` that dies by SIGKILL right after ``transition`` commits (or at another crash point);
    ``process``: one started earlier with that crash point."""
    process = process or w.resume(job_id, **{CRASH_AT_ENV: transition})
    code = process.wait(timeout)
    assert code == -signal.SIGKILL, f"the controller exited {code} without reaching {transition}\n{w.describe()}"
    if transition_point:
        last = [e for e in w.store().events(job_id) if e.kind == "transition"][-1]
        assert f"{last.from_state}->{last.to_state}" == transition, (last, transition)
    w.note(f"SIGKILL at {transition}")
    with _lock:
        _killed.setdefault(w.record.name, []).append(transition)


def end(w: World, job_id: str, expected: JobState, timeout: float = 150) -> None:
    """The last `cvmjob resume`: runs the job to its end, with the expected state and exit code."""
    code = w.resume(job_id).wait(timeout)
    job = w.job(job_id)
    assert job.state == expected, f"{job_id} ended {job.state.value} ({job.reason}), expected {expected.value}"
    assert code == EXIT_CODES[expected], f"exit code {code}, expected {EXIT_CODES[expected]}\n{w.describe()}"


def cancel(w: World, job_id: str) -> None:
    result = w.cli("cancel", job_id)
    assert result.returncode == 0, result.stderr
    w.note("cvmjob cancel")


def train(steps: int = 20, **flags: object) -> str:
    extra = "".join(f" --{k.replace('_', '-')} {v}" for k, v in flags.items())
    return f"train.command=exec python3 tiny.py --steps {steps} --step-seconds 0.1 --every 5{extra}"


def one_instance(w: World) -> None:
    assert len(w.admin.instances()) == 1, w.admin.instances()


@scenario("success-path", GROUP, cost=40, on_postgres=True)
def success_path(w: World) -> None:
    """A job that succeeds, its controller killed at each of its seven transitions: one instance, one image,
    the training finished from where it was."""
    job_id = w.submit()
    for transition in ("PENDING->STAGING", "STAGING->LAUNCHING", "LAUNCHING->BOOTING", "BOOTING->RUNNING",
                       "RUNNING->IMAGING", "IMAGING->TEARING_DOWN", "TEARING_DOWN->SUCCEEDED"):
        crash(w, job_id, transition)
    end(w, job_id, JobState.SUCCEEDED)
    one_instance(w)
    assert len([c for c in w.admin.calls(action="CreateImage") if c["error"] is None]) == 1
    invariants.checkpoints(w, job_id, final_step=19)


@scenario("between-call-and-record", GROUP, cost=25, on_postgres=True)
def between_call_and_record(w: World) -> None:
    """Killed after RunInstances answered but before the instance id was recorded (node:launched), and after
    CreateImage answered but before the image was recorded (image:CREATING): the ClientToken returns the same
    instance, the tagged image is adopted; one of each."""
    job_id = w.submit()
    for point in ("node:launched", "image:CREATING"):
        crash(w, job_id, point, transition_point=False)
    end(w, job_id, JobState.SUCCEEDED)
    one_instance(w)
    assert len([c for c in w.admin.calls(action="CreateImage") if c["error"] is None]) == 1
    assert len(w.store().images(job_id)) == 1
    invariants.checkpoints(w, job_id, final_step=19)


@scenario("cancelled-while-pending", GROUP, cost=8, on_postgres=True)
def cancelled_while_pending(w: World) -> None:
    """Cancelled before its controller ever ran; killed at PENDING->CANCELLED: nothing was created."""
    job_id = w.submit()
    cancel(w, job_id)
    crash(w, job_id, "PENDING->CANCELLED")
    end(w, job_id, JobState.CANCELLED)
    assert w.admin.instances() == []


@scenario("cancelled-while-staging", GROUP, cost=12, on_postgres=True)
def cancelled_while_staging(w: World) -> None:
    """Killed as it starts staging, cancelled, killed again at STAGING->TEARING_DOWN and TEARING_DOWN->CANCELLED:
    no instance was ever created."""
    job_id = w.submit()
    crash(w, job_id, "PENDING->STAGING")
    cancel(w, job_id)
    crash(w, job_id, "STAGING->TEARING_DOWN")
    crash(w, job_id, "TEARING_DOWN->CANCELLED")
    end(w, job_id, JobState.CANCELLED)
    assert w.admin.instances() == []


@scenario("no-capacity", GROUP, cost=25, on_postgres=True)
def no_capacity(w: World) -> None:
    """Sold out everywhere: killed at the first failed launch, at the relaunch, at giving up and at the end
    (FAILED_NO_CAPACITY): the count of failed launches survives the restarts."""
    job_id = w.submit()
    for zone in ZONES:
        w.admin.set_stock(zone, TYPE, "POSTPAID_BY_HOUR", 0)
    w.note(f"stock 0 for {TYPE} in every zone")
    for transition in ("LAUNCHING->RECOVERING", "RECOVERING->LAUNCHING", "RECOVERING->TEARING_DOWN",
                       "TEARING_DOWN->FAILED_NO_CAPACITY"):
        crash(w, job_id, transition)
    end(w, job_id, JobState.FAILED_NO_CAPACITY)
    assert w.admin.instances() == []
    assert len({n.attempt for n in w.store().nodes(job_id)}) == 4  # the fast policy's max_launch_failures


@scenario("permanent-cloud-error", GROUP, cost=12, on_postgres=True)
def permanent_cloud_error(w: World) -> None:
    """RunInstances refused with a permanent error (InvalidParameter): killed at LAUNCHING->TEARING_DOWN and at
    TEARING_DOWN->FAILED_ERROR (exit 30)."""
    job_id = w.submit()
    w.inject("error", service="cvm", action="RunInstances", code="InvalidParameter.InstanceImageNotSupport", count=1)
    crash(w, job_id, "LAUNCHING->TEARING_DOWN")
    crash(w, job_id, "TEARING_DOWN->FAILED_ERROR")
    end(w, job_id, JobState.FAILED_ERROR)
    assert w.admin.instances() == []


@scenario("launch-failed-then-cancelled-while-booting", GROUP, cost=25, on_postgres=True)
def launch_failed_then_cancelled(w: World) -> None:
    """The first instance ends LAUNCH_FAILED (killed at BOOTING->RECOVERING), the relaunch is killed at
    LAUNCHING->BOOTING, then cancelled: killed at BOOTING->TEARING_DOWN and TEARING_DOWN->CANCELLED."""
    job_id = w.submit(train(steps=200))
    w.admin.add_launch_failures(1, "injected: host failure")
    w.note("launch failure x1")
    crash(w, job_id, "BOOTING->RECOVERING")
    crash(w, job_id, "LAUNCHING->BOOTING")
    cancel(w, job_id)
    crash(w, job_id, "BOOTING->TEARING_DOWN")
    crash(w, job_id, "TEARING_DOWN->CANCELLED")
    end(w, job_id, JobState.CANCELLED)


@scenario("bootstrap-fails-kept", GROUP, cost=30, on_postgres=True)
def bootstrap_fails_kept(w: World) -> None:
    """The agent cannot be fetched, teardown.on_failure keep: killed at BOOTING->KEEPING; cancelled (ends the
    keep); killed at KEEPING->TEARING_DOWN and TEARING_DOWN->FAILED_BOOTSTRAP: the failure stays the outcome."""
    job_id = w.submit("limits.bootstrap_timeout=10s", "teardown.on_failure=keep", "teardown.keep_for=10m")
    w.note("limits.bootstrap_timeout 10 s; teardown.on_failure keep")
    w.inject_cos("error", operation="GetObject", key_prefix=AGENT_WHEELS_PREFIX, status=503, count=None)
    crash(w, job_id, "BOOTING->KEEPING")
    assert len(w.live_instances(job_id)) == 1  # kept
    cancel(w, job_id)
    crash(w, job_id, "KEEPING->TEARING_DOWN")
    crash(w, job_id, "TEARING_DOWN->FAILED_BOOTSTRAP")
    end(w, job_id, JobState.FAILED_BOOTSTRAP)


@scenario("training-fails-kept", GROUP, cost=20, on_postgres=True)
def training_fails_kept(w: World) -> None:
    """The training exits non-zero, teardown.on_failure keep: killed at RUNNING->KEEPING; cancelled; killed at
    TEARING_DOWN->FAILED (exit 10)."""
    job_id = w.submit(train(fail_at=7), "teardown.on_failure=keep", "teardown.keep_for=10m")
    w.note("the training exits 3 at step 7; teardown.on_failure keep")
    crash(w, job_id, "RUNNING->KEEPING")
    cancel(w, job_id)
    crash(w, job_id, "TEARING_DOWN->FAILED")
    end(w, job_id, JobState.FAILED)
    invariants.checkpoints(w, job_id)


@scenario("cancelled-while-running", GROUP, cost=25, on_postgres=True)
def cancelled_while_running(w: World) -> None:
    """Cancelled while training: killed at RUNNING->CANCELLING and CANCELLING->TEARING_DOWN; the agent
    checkpointed on request and the job ends CANCELLED (exit 130)."""
    job_id = w.submit(train(steps=300))
    controller = w.resume(job_id, **{CRASH_AT_ENV: "RUNNING->CANCELLING"})
    w.wait_phase(job_id, "training", min_step=3)
    cancel(w, job_id)
    crash(w, job_id, "RUNNING->CANCELLING", process=controller)
    crash(w, job_id, "CANCELLING->TEARING_DOWN")
    end(w, job_id, JobState.CANCELLED)
    one_instance(w)
    invariants.checkpoints(w, job_id)


@scenario("reclaimed-and-given-up", GROUP, cost=25, on_postgres=True)
def reclaimed_and_given_up(w: World) -> None:
    """A spot instance reclaimed without notice mid-training, under a policy that tolerates no reclaim: killed
    at RUNNING->RECOVERING, RECOVERING->TEARING_DOWN and TEARING_DOWN->FAILED_PREEMPTED."""
    job_id = w.submit(SPOT, "policies.recovery=no-reclaims", train(steps=300))
    controller = w.resume(job_id, **{CRASH_AT_ENV: "RUNNING->RECOVERING"})
    w.wait_phase(job_id, "training", min_step=3)
    w.admin.reclaim(w.node_instance(job_id), notice_seconds=None)
    w.note("spot reclaim without notice")
    crash(w, job_id, "RUNNING->RECOVERING", process=controller)
    crash(w, job_id, "RECOVERING->TEARING_DOWN")
    crash(w, job_id, "TEARING_DOWN->FAILED_PREEMPTED")
    end(w, job_id, JobState.FAILED_PREEMPTED)
    one_instance(w)


@scenario("setup-fails", GROUP, cost=15, on_postgres=True)
def setup_fails(w: World) -> None:
    """A setup command exits 7: killed at RUNNING->TEARING_DOWN and TEARING_DOWN->FAILED_SETUP (exit 11)."""
    job_id = w.submit('setup=["exit 7"]')
    w.note("setup: exit 7")
    crash(w, job_id, "RUNNING->TEARING_DOWN")
    crash(w, job_id, "TEARING_DOWN->FAILED_SETUP")
    end(w, job_id, JobState.FAILED_SETUP)


@scenario("hung", GROUP, cost=25, on_postgres=True)
def hung(w: World) -> None:
    """The training hangs (train.hang_timeout 10 s): killed at TEARING_DOWN->FAILED_HUNG (exit 13)."""
    job_id = w.submit(train(hang_at=3), "train.hang_timeout=10s")
    w.note("the training hangs at step 3 (train.hang_timeout 10 s)")
    crash(w, job_id, "TEARING_DOWN->FAILED_HUNG")
    end(w, job_id, JobState.FAILED_HUNG)


@scenario("timed-out", GROUP, cost=75, on_postgres=True)
def timed_out(w: World) -> None:
    """limits.max_runtime (1 m, the least) runs out mid-training: killed at TEARING_DOWN->FAILED_TIMEOUT
    (exit 22)."""
    job_id = w.submit(train(steps=100_000), "limits.max_runtime=1m")
    w.note("limits.max_runtime 1 m")
    crash(w, job_id, "TEARING_DOWN->FAILED_TIMEOUT", timeout=150)
    end(w, job_id, JobState.FAILED_TIMEOUT)
    one_instance(w)


@scenario("over-budget", GROUP, cost=12, on_postgres=True)
def over_budget(w: World) -> None:
    """limits.max_cost (0.00001 CNY) is reached as soon as the instance runs: killed at
    TEARING_DOWN->FAILED_BUDGET (exit 23)."""
    job_id = w.submit(train(steps=1000), "limits.max_cost=0.00001")
    w.note("limits.max_cost 0.00001 CNY")
    crash(w, job_id, "TEARING_DOWN->FAILED_BUDGET")
    end(w, job_id, JobState.FAILED_BUDGET)


# On both stores: the store is what a killed controller leaves behind, and what `cvmjob resume` starts from.
@pytest.mark.parametrize("scenario_name", names(GROUP))
def test_crash_point(scenario_name: str, fault_pool: Pool, record: Record) -> None:
    expect_scenario(fault_pool, scenario_name, record)


def test_every_transition_was_killed_at(fault_pool: Pool, record: Record) -> None:
    """The union of the crash points, on each store: every transition of machine.all_transitions()."""
    wanted = names(GROUP)
    if not all(n in fault_pool.futures for n in wanted):
        pytest.skip("only some crash-point scenarios were selected")
    for name in wanted:
        fault_pool.result(name)
    every = {f"{a.value}->{b.value}" for a, b in all_transitions()}
    summaries, missing = [], {}
    on_postgres = [n for n in wanted if n.endswith(ON_POSTGRES)]
    for store, runs in (("SQLite", [n for n in wanted if n not in on_postgres]), ("PostgreSQL", on_postgres)):
        killed = {t for name in runs for t in _killed.get(name, []) if "->" in t}
        others = sorted({t for name in runs for t in _killed.get(name, []) if "->" not in t})
        kills = sum(len(_killed.get(name, [])) for name in runs)
        summaries.append(f"{store}: killed the controller at {len(killed)} of the machine's {len(every)} transitions "
                         f"({kills} kills, also at {', '.join(others)})")
        missing[store] = sorted(every - killed)
    print("\n".join(summaries))
    record.injected = summaries
    record.checked = ["coverage"]
    assert not any(missing.values()), f"transitions no scenario killed at: {missing}"
