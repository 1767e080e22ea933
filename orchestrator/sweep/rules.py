"""The sweep's decisions, as pure functions: what a job's end means for its trial, whether the next trial may
start (money, GPU hours, the deadline, the brakes), and which placements to avoid."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import Enum

from ..state.machine import JobState


class Ending(str, Enum):
    """What a trial's job's end is for the trial."""

    COMPLETE = "complete"  # it trained to the end: the trial's value is in its result
    TRAINING = "training"  # the script failed (or hung, or ran out of time): the trial FAILs, the brake counts it
    INFRASTRUCTURE = "infrastructure"  # the cloud failed it after the job's own recovery: a retry, on a new job
    BUDGET = "budget"  # its job hit its own cost cap (its share of the sweep's): FAIL, and dispatch stops
    CANCELLED = "cancelled"  # someone cancelled the job or the sweep


_ENDINGS = {
    JobState.SUCCEEDED: Ending.COMPLETE,
    JobState.FAILED: Ending.TRAINING,
    JobState.FAILED_SETUP: Ending.TRAINING,
    JobState.FAILED_HUNG: Ending.TRAINING,
    JobState.FAILED_TIMEOUT: Ending.TRAINING,
    JobState.FAILED_BOOTSTRAP: Ending.INFRASTRUCTURE,
    JobState.FAILED_NO_CAPACITY: Ending.INFRASTRUCTURE,
    JobState.FAILED_PREEMPTED: Ending.INFRASTRUCTURE,
    JobState.FAILED_ERROR: Ending.INFRASTRUCTURE,
    JobState.FAILED_BUDGET: Ending.BUDGET,
    JobState.CANCELLED: Ending.CANCELLED,
}


def ending(state: JobState) -> Ending:
    return _ENDINGS[state]


@dataclass(frozen=True)
class Spend:
    """Money and GPU time: spent so far (ended and running jobs), and what the running trials may still cost."""

    cost: float  # CNY
    gpu_hours: float
    running_cost_left: float  # CNY the running trials may still cost, at most
    running_gpu_hours_left: float


@dataclass(frozen=True)
class NextTrial:
    cost: float | None  # CNY at most (its price times its time limit); None: not priced
    gpu_hours: float
    seconds: float  # its time limit


def may_start(spend: Spend, next_trial: NextTrial, *, max_cost: float | None, gpu_hours: float | None,
              now: float, deadline: float | None) -> str | None:
    """Why the next trial must not start (None: it may). Counted at the bounds (every running trial and the next
    run to their time limits), so that the sweep never exceeds its cap, whatever the trials do."""
    if deadline is not None and now + next_trial.seconds > deadline:
        return "the sweep's deadline would pass before another trial could finish (budget.deadline)"
    if max_cost is not None:
        if next_trial.cost is None:
            return "the next trial has no price, so budget.max_cost cannot be kept: it is not started"
        committed = spend.cost + spend.running_cost_left + next_trial.cost
        if committed > max_cost:
            return (f"budget.max_cost: {spend.cost:.2f} CNY spent, {spend.running_cost_left:.2f} CNY more at most for"
                    f" the running trials, and {next_trial.cost:.2f} CNY for the next would exceed {max_cost:.2f}")
    if gpu_hours is not None:
        committed = spend.gpu_hours + spend.running_gpu_hours_left + next_trial.gpu_hours
        if committed > gpu_hours:
            return (f"budget.gpu_hours: {spend.gpu_hours:.2f} GPU hours used, and the running and next trials' "
                    f"{spend.running_gpu_hours_left + next_trial.gpu_hours:.2f} more would exceed {gpu_hours:g}")
    return None


def started(spend: Spend, next_trial: NextTrial, share: float | None) -> Spend:
    """``spend`` once the next trial has started: it may cost up to its share of the cap (its job's
    limits.max_cost) or, without one, the estimate, and the estimate's GPU hours."""
    cost = share if share is not None else next_trial.cost or 0.0
    return replace(spend, running_cost_left=spend.running_cost_left + cost,
                   running_gpu_hours_left=spend.running_gpu_hours_left + next_trial.gpu_hours)


def consecutive_failures(endings: Sequence[Ending]) -> int:
    """Training failures at the end of the trials' endings, oldest first (a completed trial resets the count;
    the cloud's failures and cancels neither count nor reset)."""
    count = 0
    for e in reversed(endings):
        if e == Ending.TRAINING:
            count += 1
        elif e == Ending.COMPLETE:
            break
    return count


def placements_to_avoid(failures: Sequence[tuple[str, str]], limit: int) -> set[tuple[str, str]]:
    """(zone, instance type) pairs with ``limit`` infrastructure failures or more."""
    return {placement for placement, n in Counter(failures).items() if n >= limit}
