"""Job states and the only transitions allowed between them.

Each failure reason is its own terminal state (SkyPilot ``sky/jobs/state.py``), so ``cvmjob status`` and exit codes
say *why* a job ended. A job that has cloud resources never jumps to a terminal state: it passes through
TEARING_DOWN, which ends only when the cloud confirms every instance is gone. ``outcome`` on the job record holds
the terminal state it is heading for.
"""

from __future__ import annotations

from enum import Enum


class JobState(str, Enum):
    PENDING = "PENDING"  # recorded; nothing in the cloud yet
    STAGING = "STAGING"  # spec, bundle and agent configs going to COS
    LAUNCHING = "LAUNCHING"  # RunInstances intent persisted for the current attempt
    BOOTING = "BOOTING"  # instances exist; waiting for RUNNING and the agent's first heartbeat
    RUNNING = "RUNNING"  # the agent reports (setup, sync, preflight, training, uploads)
    RECOVERING = "RECOVERING"  # the attempt was lost (reclaim, launch failure); choosing the next placement
    CANCELLING = "CANCELLING"  # asked the agents to checkpoint, upload and stop
    IMAGING = "IMAGING"  # CreateImage issued; waiting for NORMAL
    KEEPING = "KEEPING"  # failed, instance kept for inspection until a deadline
    TEARING_DOWN = "TEARING_DOWN"  # terminating; waiting until the cloud confirms the instances are gone
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"  # training exited non-zero
    FAILED_SETUP = "FAILED_SETUP"  # setup commands, data sync or preflight failed
    FAILED_BOOTSTRAP = "FAILED_BOOTSTRAP"  # the instance ran but the agent never reported
    FAILED_HUNG = "FAILED_HUNG"  # training made no progress for the hang timeout
    FAILED_NO_CAPACITY = "FAILED_NO_CAPACITY"  # every placement the policy allows was tried
    FAILED_PREEMPTED = "FAILED_PREEMPTED"  # more reclaims than the recovery policy allows
    FAILED_TIMEOUT = "FAILED_TIMEOUT"  # limits.max_runtime reached
    FAILED_BUDGET = "FAILED_BUDGET"  # limits.max_cost reached
    FAILED_ERROR = "FAILED_ERROR"  # a permanent cloud or agent error
    CANCELLED = "CANCELLED"

    def is_terminal(self) -> bool:
        return self in TERMINAL

    def is_active(self) -> bool:
        return not self.is_terminal()


TERMINAL = frozenset(
    {
        JobState.SUCCEEDED,
        JobState.FAILED,
        JobState.FAILED_SETUP,
        JobState.FAILED_BOOTSTRAP,
        JobState.FAILED_HUNG,
        JobState.FAILED_NO_CAPACITY,
        JobState.FAILED_PREEMPTED,
        JobState.FAILED_TIMEOUT,
        JobState.FAILED_BUDGET,
        JobState.FAILED_ERROR,
        JobState.CANCELLED,
    }
)

S = JobState
# Only edges some code path takes (tests/faults/test_crash_points.py kills the controller at each): BOOTING and
# CANCELLING once also allowed CANCELLING and RECOVERING respectively, which decide never chooses (a cancel while
# booting tears down at once; a cancelled job is never relaunched), and PENDING -> FAILED_ERROR, since PENDING runs
# no cloud action that could fail for good.
ALLOWED: dict[JobState, frozenset[JobState]] = {
    S.PENDING: frozenset({S.STAGING, S.CANCELLED}),
    S.STAGING: frozenset({S.LAUNCHING, S.TEARING_DOWN}),
    S.LAUNCHING: frozenset({S.BOOTING, S.RECOVERING, S.TEARING_DOWN}),
    S.BOOTING: frozenset({S.RUNNING, S.RECOVERING, S.TEARING_DOWN, S.KEEPING}),
    S.RUNNING: frozenset({S.IMAGING, S.RECOVERING, S.CANCELLING, S.TEARING_DOWN, S.KEEPING}),
    S.RECOVERING: frozenset({S.LAUNCHING, S.TEARING_DOWN}),
    S.CANCELLING: frozenset({S.TEARING_DOWN}),
    S.IMAGING: frozenset({S.TEARING_DOWN}),
    S.KEEPING: frozenset({S.TEARING_DOWN}),
    S.TEARING_DOWN: TERMINAL,
    **{t: frozenset() for t in TERMINAL},
}


class IllegalTransition(RuntimeError):
    pass


def check_transition(current: JobState, target: JobState) -> None:
    if target not in ALLOWED[current]:
        raise IllegalTransition(f"{current.value} -> {target.value} is not an allowed transition")


def all_transitions() -> list[tuple[JobState, JobState]]:
    """Every persisted transition: the crash-point suite kills the controller at each one."""
    return sorted(((a, b) for a, targets in ALLOWED.items() for b in targets), key=lambda t: (t[0].value, t[1].value))


# Documented exit codes of `cvmjob run` / `cvmjob status --wait` (README "Exit codes").
EXIT_CODES: dict[JobState, int] = {
    S.SUCCEEDED: 0,
    S.FAILED: 10,
    S.FAILED_SETUP: 11,
    S.FAILED_BOOTSTRAP: 12,
    S.FAILED_HUNG: 13,
    S.FAILED_NO_CAPACITY: 20,
    S.FAILED_PREEMPTED: 21,
    S.FAILED_TIMEOUT: 22,
    S.FAILED_BUDGET: 23,
    S.FAILED_ERROR: 30,
    S.CANCELLED: 130,
}


class NodeState(str, Enum):
    """Where one node of an attempt is: the store's record of it, written by the executor only."""

    INTENT = "intent"  # about to be launched: its ClientToken recorded before RunInstances
    LAUNCHED = "launched"  # RunInstances answered (or a pool member was reset for it)
    RUNNING = "running"  # the cloud says RUNNING
    LOST = "lost"  # reclaimed, disappeared or silent: its attempt is over
    FAILED = "failed"  # the launch was refused
    GONE = "gone"  # terminated at teardown
    RELEASED = "released"  # a reserved pool member handed back to the pool

    def __str__(self) -> str:  # as it is stored and shown: "running", not "NodeState.RUNNING"
        return self.value

    def is_ended(self) -> bool:
        """It no longer serves its attempt."""
        return self in (NodeState.LOST, NodeState.FAILED, NodeState.GONE)
