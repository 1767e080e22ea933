"""Random mixes of the same faults, seeded.

Two kinds, said plainly:
- ``test_mix_against_pure_decide``: the pure ``decide()`` driven against a small in-process model of the world
  (tests/faults/model.py: no I/O, a simulated clock; decide is pure by design), ``CVMJOB_FAULT_SEEDS`` seeds
  (default 1000, a few seconds). The longer mode: ``CVMJOB_FAULT_SEEDS=20000 pytest tests/faults -k mix``.
- ``mix-emulator-<seed>``: a few seeds against the real emulator through the real CLI, each drawing three or four
  recoverable faults from the matrix's catalogue (API error bursts, COS 503 bursts, a lost RunInstances answer,
  a spot reclaim, a controller SIGKILL at a random moment) and checked against every invariant.
"""

from __future__ import annotations

import collections
import os
import random
import time
from collections.abc import Callable

import pytest

from orchestrator.state.machine import JobState
from tests.faults import invariants
from tests.faults.conftest import expect_scenario
from tests.faults.harness import Pool, Record, World, kill, names, scenario
from tests.faults.model import Violation, simulate

GROUP = "mix"
SEEDS = int(os.environ.get("CVMJOB_FAULT_SEEDS", "1000"))
EMULATOR_SEEDS = (11, 23, 37)


def test_mix_against_pure_decide(record: Record) -> None:
    """decide() against the in-process world model, one seeded mix of faults per seed: every move allowed by the
    machine, nothing concluded from a failed lookup, never two attempts alive, never an end with a live instance
    or a failed image left, SUCCEEDED only when every node succeeded, each failure state explained by a fault."""
    started = time.monotonic()
    ends: collections.Counter[str] = collections.Counter()
    failures = []
    for seed in range(SEEDS):
        try:
            ends[simulate(seed).job.state.value] += 1
        except Violation as exc:
            failures.append(f"seed {seed}: {exc}")
    record.injected = [f"{SEEDS} seeds (model: failed lookups, unreadable reports, lost RunInstances answers, "
                       "capacity, launch failures, failing terminations, reclaims with and without notice, crashed, "
                       "hung and overlong trainings, silent agents, cancels, image failures and hangs, permanent "
                       "errors, controller crashes between a cloud call and its record)",
                       "ends: " + ", ".join(f"{k} {v}" for k, v in sorted(ends.items()))]
    record.checked = ["transitions", "no conclusion from a failed lookup", "one attempt alive", "I1", "I2", "I4",
                      "outcome explained"]
    record.seconds = time.monotonic() - started
    assert not failures, "\n".join(failures[:20])
    assert len(ends) >= 8, ends  # the mixes reach most end states


# -- on the real emulator ----------------------------------------------------------------------------------------
Injector = Callable[[World, str, random.Random], None]


def api_burst(w: World, job_id: str, rng: random.Random) -> None:
    action = rng.choice(["RunInstances", "DescribeInstances", "TerminateInstances", "CreateImage", "DescribeImages"])
    w.inject("error", service="cvm", action=action, code=rng.choice(["InternalError", "RequestLimitExceeded"]),
             count=rng.randint(1, 4))


def cos_burst(w: World, job_id: str, rng: random.Random) -> None:
    target = rng.choice(["status.json", "result.json"])
    w.inject_cos("error", operation="GetObject", key_prefix=f"cvmjob/{job_id}/attempts/1/nodes/0/{target}",
                 status=503, count=rng.randint(2, 6))


def lost_answer(w: World, job_id: str, rng: random.Random) -> None:
    w.inject("drop_response", service="cvm", action="RunInstances", count=1)


def checkpoint_resets(w: World, job_id: str, rng: random.Random) -> None:
    w.inject_cos("reset_body", operation="PutObject", key_prefix=f"cvmjob/{job_id}/checkpoints/",
                 after_bytes=rng.randint(10, 2000), count=rng.randint(1, 3))


CATALOGUE: dict[str, Injector] = {"api": api_burst, "cos": cos_burst, "lost": lost_answer, "ckpt": checkpoint_resets}


def mix_on_emulator(seed: int) -> Callable[[World], None]:
    def run(w: World) -> None:
        rng = random.Random(seed)
        picks = rng.sample(sorted(CATALOGUE), k=rng.randint(2, 3))
        spot, kill_after = rng.random() < 0.5, rng.choice([None, rng.uniform(3, 12)])
        job_id = w.submit("billing.mode=spot" if spot else "billing.mode=on-demand",
                          "train.command=exec python3 tiny.py --steps 40 --step-seconds 0.1 --every 5")
        for pick in picks:
            CATALOGUE[pick](w, job_id, rng)
        controller = w.resume(job_id)
        if spot:
            w.wait_phase(job_id, "training", min_step=rng.randint(3, 15))
            w.admin.reclaim(w.node_instance(job_id), notice_seconds=rng.choice([None, 10.0]))
            w.note("spot reclaim during training")
        if kill_after is not None:
            time.sleep(kill_after)
            if controller.poll() is None:
                kill(controller)
                w.note(f"controller SIGKILL after {kill_after:.1f} s")
                controller = w.resume(job_id)
        assert controller.wait(180) == 0, w.describe()
        job = w.job(job_id)
        assert job.state == JobState.SUCCEEDED, w.describe()
        invariants.checkpoints(w, job_id, final_step=39)

    run.__doc__ = f"Seed {seed}: two or three recoverable faults drawn from the catalogue, maybe a spot reclaim and " \
                  "a controller SIGKILL at a random moment; the job succeeds."
    return run


for _seed in EMULATOR_SEEDS:
    scenario(f"mix-emulator-{_seed}", GROUP, cost=30)(mix_on_emulator(_seed))


@pytest.mark.parametrize("scenario_name", names(GROUP))
def test_mix_on_the_emulator(scenario_name: str, fault_pool: Pool, record: Record) -> None:
    expect_scenario(fault_pool, scenario_name, record)
