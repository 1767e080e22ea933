"""Spot recovery overhead: seeded reclaims of one job on the emulator, next to a poll-based detector.

    python benchmarks/recovery.py [--reclaims 10] [--seed 1] [--notice 15] [--poll 15] [--boot-seconds 0.5]

One spot job (a copy of the quickstart whose steps take at least --pace seconds, a checkpoint every --every steps,
the builtin ``aggressive-spot`` recovery policy so that every attempt stays on spot) runs through the real CLI
against an emulator process. Each attempt, once its training runs, works on for a seeded time and is reclaimed,
with the notice (--notice seconds) or without one (dies at once); half of each kind, in seeded order. From the
emulator's call log, the controller's phases, the emulator's instance records and the training's log, per
reclaim:

- detect: reclaim -> the controller enters RECOVERING;
- ->launch: reclaim -> the new attempt's RunInstances call (the controller's recovery overhead);
- boot: the emulated boot (RunInstances -> RUNNING);
- ->resumed: reclaim -> the first training step of the new attempt; ``-boot``: the same minus the emulated boot;
- lost: steps run again after the resume (the last step the lost attempt logged - the resumed checkpoint's step).

The baseline is computed, not run: the same controller with SkyPilot's detector, a DescribeInstances poll every
--poll seconds (``JOB_STATUS_CHECK_GAP_SECONDS = 15``) that ignores the notice. It sees the loss at its first poll
after the instance leaves RUNNING on its own (at once without a notice, at the end of the notice with one), on a
poll grid of seeded phase; from there its launch and its resume take what ours took from our detection. Without a
notice it loses what ours lost; with a notice it trains on until the kill and loses at least the steps since the
last periodic checkpoint before our emergency one (shown as >=N).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, when run as a script
from tests.agent.conftest import LIGHT
from tests.e2e.conftest import Cli, seed_quickstart
from tests.e2e.spot_support import JobWatch, job_folder, steps_in
from tests.emulator_process import start_emulator
from tests.waiting import wait_until

# paced.py's twin that also prints when its first step ends: the moment training resumed, on the host's clock
# (emulated instances share it).
TIMED = """
import runpy, sys, time
from orchestrator import trainkit

report, seconds, first = trainkit.report, float(sys.argv.pop(1)), []
def paced(step, loss=None, **metrics):
    if not first and trainkit.rank() == 0:
        first.append(step)
        print(f"first_step={step} at={time.time():.3f}", flush=True)
    report(step, loss, **metrics)
    time.sleep(seconds)
trainkit.report = paced
sys.argv[0] = "train.py"
runpy.run_path("train.py", run_name="__main__")
"""
_FIRST = re.compile(r"^first_step=(\d+) at=([0-9.]+)$", re.MULTILINE)
_STOPPED = re.compile(r"stopping after the requested checkpoint at step (\d+)")


@dataclass
class Reclaim:
    attempt: int
    notice: float | None
    at: float  # when the reclaim was asked for
    leaves_running: float  # when the instance leaves RUNNING by itself (the emulator's reclaim time)
    step: int  # the newest step logged when reclaimed (the log ships every 5 s: a lower bound)


@dataclass
class Attempt:
    running_at: float  # the instance's first RUNNING (emulator records)
    first_step: int
    first_step_at: float
    last_step: int
    emergency: int | None  # the step of the checkpoint a notice asked for


@dataclass
class Row:
    reclaim: Reclaim
    detect: float
    launch: float
    boot: float
    start: float  # the new instance's RUNNING -> its first step (agent, data sync, torchrun, restore)
    resumed: float
    lost: int
    base_detect: float
    base_launch: float
    base_resumed: float
    base_lost: int
    base_lost_at_least: bool


def first_step(log: str) -> tuple[int, float]:
    found = _FIRST.search(log)
    assert found, log[-2000:]
    return int(found[1]), float(found[2])


def wait_for_training(watch: JobWatch, attempt: int) -> None:
    wait_until(f"attempt {attempt} training", lambda: _FIRST.search(watch.log(attempt)), 180, poll=0.5)


def run_job(
    args: argparse.Namespace, root: Path, rng: random.Random
) -> tuple[Cli, JobWatch, list[Reclaim], dict[int, float]]:
    emulator = start_emulator(root / "state", "--boot-seconds", str(args.boot_seconds))
    seed_quickstart(emulator)  # the quickstart's data where its spec reads it, as `cvmjob emulator seed` puts it
    cli = Cli(emulator, root / "home")
    spec = job_folder(root)
    (spec.parent / "timed.py").write_text(TIMED)
    # Spelled out rather than edited from spot_overrides: what is timed is the quickstart's DDP under torchrun,
    # through timed.py, whatever training the spot tests' helper defaults to.
    sets = ("billing.mode=spot", f"train.command=python timed.py {args.pace} --steps {10**6} {LIGHT}",
            f"checkpoints.interval_steps={args.every}", "policies.recovery=aggressive-spot")
    overrides = [arg for value in sets for arg in ("--set", value)]
    kinds = [True] * (args.reclaims // 2) + [False] * (args.reclaims - args.reclaims // 2)
    rng.shuffle(kinds)
    watch = JobWatch(emulator)
    reclaims: list[Reclaim] = []
    running_at: dict[int, float] = {}
    process = cli.start("run", str(spec), *overrides)
    try:
        for attempt, with_notice in enumerate(kinds, start=1):
            (instance,) = watch.running(attempt)
            running_at[attempt] = instance["first_running_at"]
            wait_for_training(watch, attempt)
            time.sleep(rng.uniform(0, args.work))  # the seeded moment of the reclaim
            notice = args.notice if with_notice else None
            step = watch.last_step(attempt)
            asked = time.time()
            answer = emulator.admin.reclaim(instance["instance_id"], notice)
            reclaims.append(Reclaim(attempt, notice, asked, float(answer["reclaim_at"]), step))
            print(
                f"reclaim {attempt}/{len(kinds)}: {'notice' if notice else 'no notice'} near step {step}",
                file=sys.stderr,
                flush=True,
            )
        last = len(kinds) + 1
        (instance,) = watch.running(last)
        running_at[last] = instance["first_running_at"]
        wait_for_training(watch, last)
        cancelled = cli.run("cancel", watch.job_id)
        assert cancelled.returncode == 0, cancelled.stderr
        process.wait(timeout=300)
    except BaseException:
        emulator.stop()
        raise
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return cli, watch, reclaims, running_at


def measure(
    args: argparse.Namespace,
    cli: Cli,
    watch: JobWatch,
    reclaims: list[Reclaim],
    running_at: dict[int, float],
    rng: random.Random,
) -> list[Row]:
    status = cli.status(watch.job_id)
    recovering = [p["entered_at"] for p in status["phases"] if p["state"] == "RECOVERING"]
    launches = watch.launches()  # one per attempt: aggressive-spot relaunches in place and nothing failed
    assert len(recovering) == len(reclaims) and len(launches) == len(reclaims) + 1, (recovering, launches)
    attempts: dict[int, Attempt] = {}
    for attempt in range(1, len(reclaims) + 2):
        log = watch.log(attempt)
        step, at = first_step(log)
        stopped = _STOPPED.search(log)
        attempts[attempt] = Attempt(
            running_at[attempt], step, at, steps_in(log)[-1], int(stopped[1]) if stopped else None
        )
    phase = rng.uniform(0, args.poll)  # the baseline poller's ticks: phase + k * poll
    rows = []
    for index, r in enumerate(reclaims):
        lost_attempt, new = attempts[r.attempt], attempts[r.attempt + 1]
        detect, launch = recovering[index] - r.at, launches[r.attempt] - r.at
        resumed = new.first_step_at - r.at
        lost = lost_attempt.last_step - (new.first_step - 1)
        tick = phase + math.ceil((r.leaves_running - phase) / args.poll) * args.poll
        base_detect = tick - r.at
        base_launch = base_detect + (launch - detect)
        if r.notice is None:
            base_lost, at_least = lost, False
        else:
            stop = lost_attempt.emergency if lost_attempt.emergency is not None else lost_attempt.last_step
            last_periodic = (stop + 1) // args.every * args.every - 1
            base_lost, at_least = stop - last_periodic, True
        rows.append(
            Row(
                r,
                detect,
                launch,
                new.running_at - launches[r.attempt],
                new.first_step_at - new.running_at,
                resumed,
                lost,
                base_detect,
                base_launch,
                base_detect + (resumed - detect),
                base_lost,
                at_least,
            )
        )
    return rows


def report(args: argparse.Namespace, rows: list[Row], load: tuple[float, float, float]) -> None:
    print(
        f"spot recovery on the emulator ({os.cpu_count()} CPUs, load average {load[0]:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after; seed {args.seed}; notice {args.notice:.0f} s; checkpoint every "
        f"{args.every} steps; emulated boot {args.boot_seconds} s; times in s from the reclaim)"
    )
    print(f"{'':>3} {'':<9} {'':>5} | {'cvmjob':^44} | {f'baseline: {args.poll:.0f} s poll, no notice':^33}")
    print(
        f"{'#':>3} {'kind':<9} {'step':>5} | {'detect':>6} {'->launch':>8} {'boot':>5} {'start':>5} "
        f"{'->resumed':>9} {'-boot':>5} {'lost':>4} | {'detect':>6} {'->launch':>8} {'->resumed':>9} "
        f"{'lost':>6}"
    )
    for i, row in enumerate(rows, start=1):
        kind = "notice" if row.reclaim.notice is not None else "no notice"
        base_lost = f"{'>=' if row.base_lost_at_least else ''}{row.base_lost}"
        print(
            f"{i:>3} {kind:<9} {row.reclaim.step:>5} | {row.detect:>6.1f} {row.launch:>8.1f} {row.boot:>5.1f} "
            f"{row.start:>5.1f} {row.resumed:>9.1f} {row.resumed - row.boot:>5.1f} {row.lost:>4} | "
            f"{row.base_detect:>6.1f} {row.base_launch:>8.1f} {row.base_resumed:>9.1f} {base_lost:>6}"
        )

    def line(label: str, ours: list[float], base: list[float], unit: str = "s") -> None:
        print(
            f"{label:<44} {statistics.median(ours):>7.1f} {max(ours):>7.1f}   {statistics.median(base):>8.1f} "
            f"{max(base):>7.1f}  {unit}"
        )

    notice = [r for r in rows if r.reclaim.notice is not None]
    silent = [r for r in rows if r.reclaim.notice is None]
    print()
    print(f"{'summary over ' + str(len(rows)) + ' reclaims':<44} {'median':>7} {'max':>7}   {'base med':>8} {'max':>7}")
    line("reclaim -> new RunInstances", [r.launch for r in rows], [r.base_launch for r in rows])
    line(
        "reclaim -> training resumed, minus boot",
        [r.resumed - r.boot for r in rows],
        [r.base_resumed - r.boot for r in rows],
    )
    for label, group in (("with notice", notice), ("without notice", silent)):
        if group:
            line(
                f"steps lost {label} ({len(group)})",
                [float(r.lost) for r in group],
                [float(r.base_lost) for r in group],
                "steps",
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reclaims", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--notice", type=float, default=15.0, help="seconds of notice of the reclaims that have one")
    parser.add_argument("--poll", type=float, default=15.0, help="the baseline's DescribeInstances period")
    parser.add_argument("--boot-seconds", type=float, default=0.5, help="the emulator's PENDING -> RUNNING")
    parser.add_argument("--every", type=int, default=50, help="periodic checkpoint interval, in steps")
    parser.add_argument("--pace", type=float, default=0.05, help="seconds per step at least")
    parser.add_argument("--work", type=float, default=8.0, help="an attempt trains up to this long before its reclaim")
    args = parser.parse_args()
    if args.reclaims < 2:
        parser.error("--reclaims: at least 2 (one of each kind)")
    rng = random.Random(args.seed)
    load = os.getloadavg()  # other work on the machine slows every start-up: say how busy it was
    with tempfile.TemporaryDirectory(prefix="recovery-bench-") as scratch:
        cli, watch, reclaims, running_at = run_job(args, Path(scratch), rng)
        try:
            rows = measure(args, cli, watch, reclaims, running_at, rng)
        finally:
            cli.emulator.stop()
    report(args, rows, load)


if __name__ == "__main__":
    try:
        main()
    except subprocess.TimeoutExpired as exc:
        sys.exit(f"timed out: {exc}")
