"""Spot notice -> emergency checkpoint committed in COS, for the ResNet-50 example, through the whole product.

    python benchmarks/notice_to_checkpoint.py [--cpu] [--reclaims 3] [--notice 120] [--after-steps 60]

``cvmjob run jobs/resnet50/job.yaml`` on spot, against an emulator process of its own: the emulator lends the
host's GPU to the instance (GPU mode: GT4.4XLARGE96, one A100 on Tencent, here the host's device; batch 256, bf16,
synthetic data), the real agent runs torchrun, and trainkit's Checkpointer saves asynchronously every
``--interval`` steps. Once the attempt has logged ``--after-steps`` more steps, its instance gets a spot reclaim
notice (the emulator's admin ``spot/reclaim``, which the metadata service then shows at
``spot/termination-time``, as Tencent's does). Measured from the notice, on the host's clock (the instance's too):

- seen: the node's status document (its heartbeat, written at once on a notice) carries the notice (the agent
  polls the metadata service every 2 s);
- committed: the checkpoint manifest (``checkpoints/manifest/<generation>.json``) in COS lists the emergency
  checkpoint (polled every 0.1 s): its files are uploaded and verified, and a resume would take it.

Each of ``--reclaims`` jobs is reclaimed once, then cancelled. Beside it, the
baseline a notice-blind controller leaves (SkyPilot's, which resumes from the last periodic checkpoint): the steps
run since that checkpoint, which the emergency checkpoint saves. ``--cpu``: a tiny configuration (S5.MEDIUM4, 32 px,
batch 2, fp32) to check the script where no GPU is. The last line is exactly
``notice_to_checkpoint: mode=M reclaims=K median_s=X max_s=Y checkpoint_mb=Z``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, when run as a script
from tests.e2e.conftest import Cli
from tests.e2e.spot_support import REPO, JobWatch, nothing_left
from tests.emulator_process import start_emulator
from tests.waiting import wait_until


@dataclass(frozen=True)
class Reclaim:
    step_at_notice: int
    periodic_step: int  # the newest periodic checkpoint at the notice: where a notice-blind resume starts
    seen_s: float | None  # the notice -> the agent's heartbeat carries it (None: not seen before the commit)
    committed_s: float  # the notice -> the manifest lists the emergency checkpoint
    emergency_step: int
    size_mb: float


def reclaim_once(cli: Cli, watch: JobWatch, notice: float, after_steps: int) -> Reclaim:
    """The job's first attempt, once it has trained ``after_steps`` steps, gets a notice; timed to its commit."""
    instance = watch.running(1, timeout=900)[0]
    first = watch.wait_for_step(1, 0, timeout=900)
    at_step = watch.wait_for_step(1, first + after_steps, timeout=900)
    periodic = max((c["step"] for c in watch.manifest()), default=-1)
    notice_at = float(cli.emulator.admin.reclaim(instance["instance_id"], notice_seconds=notice)["notice_at"])
    seen: float | None = None
    while time.time() < notice_at + notice:
        if seen is None and (watch.status(1) or {}).get("notice_time"):
            seen = time.time() - notice_at
        emergency = [c for c in watch.manifest() if c.get("emergency")]
        if emergency:
            return Reclaim(at_step, periodic, seen, time.time() - notice_at, emergency[0]["step"],
                           emergency[0]["size"] / 1e6)
        time.sleep(0.1)
    raise SystemExit(f"no emergency checkpoint in the manifest within the {notice:.0f} s notice")


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def measure(cli: Cli, sets: dict[str, str], notice: float, after_steps: int) -> Reclaim:
    """One job to its first reclaim; then cancelled, and gone before the next (the host's GPU is lent to one
    instance at a time, and the job's recovery would start its next attempt beside the reclaimed one)."""
    run = cli.start("run", str(REPO / "jobs" / "resnet50" / "job.yaml"),
                    *(a for k, v in sets.items() for a in ("--set", f"{k}={v}")))
    watch = JobWatch(cli.emulator)
    try:
        return reclaim_once(cli, watch, notice, after_steps)
    except BaseException:
        print(f"cvmjob run's output:\n{cli.output()[-4000:]}", file=sys.stderr)
        raise
    finally:
        if watch.job_id:
            cli.run("cancel", watch.job_id, "--no-checkpoint", timeout=120)
        try:
            run.wait(timeout=300)
        except subprocess.TimeoutExpired:
            run.kill()
        wait_until("every instance gone", lambda: nothing_left(cli.emulator), 300)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", action="store_true", help="a tiny configuration, where no GPU is")
    parser.add_argument("--reclaims", type=int, default=3, help="jobs, each reclaimed once")
    parser.add_argument("--notice", type=float, default=120.0, help="seconds from the notice to the reclaim")
    parser.add_argument("--after-steps", type=int, default=60, help="steps each job trains before its notice")
    parser.add_argument("--interval", type=int, default=500, help="periodic checkpoint every N steps")
    args = parser.parse_args()
    if args.cpu:
        instance, train = "S5.MEDIUM4", "--image-size 32 --batch-size 2 --precision fp32 --log-every 1"
    else:
        instance, train = "GT4.4XLARGE96", "--batch-size 256 --precision bf16 --no-compile --log-every 10"
    sets = {"instance.type": instance, "billing.mode": "spot", "checkpoints.interval_steps": str(args.interval),
            "train.command": f"python train.py --data synthetic --steps 1000000 {train}",
            "limits.max_runtime": "2h"}
    with tempfile.TemporaryDirectory(prefix="notice-") as tmp:
        root = Path(tmp)
        emulator = start_emulator(root / "emulator", "--boot-seconds", "2")
        cli = Cli(emulator, root / "home")
        reclaims: list[Reclaim] = []
        try:
            for _ in range(args.reclaims):
                r = measure(cli, sets, args.notice, args.after_steps)
                reclaims.append(r)
                print(f"job {len(reclaims)}: notice at step {r.step_at_notice}, seen +{seconds(r.seen_s)} s, emergency "
                      f"step-{r.emergency_step} ({r.size_mb:.0f} MB) committed +{r.committed_s:.2f} s", flush=True)
        finally:
            emulator.stop()
    print(f"{'job':>3} {'notice at step':>14} {'seen s':>7} {'committed s':>11} {'emergency step':>14} {'MB':>5} "
          f"{'steps a notice-blind resume runs again':>38}")
    for n, r in enumerate(reclaims, 1):
        print(f"{n:>3} {r.step_at_notice:>14} {seconds(r.seen_s):>7} {r.committed_s:>11.2f} {r.emergency_step:>14} "
              f"{r.size_mb:>5.0f} {r.emergency_step - r.periodic_step:>38}")
    times = [r.committed_s for r in reclaims]
    print(f"{instance} ({'the CPUs' if args.cpu else 'the host GPU'}), a {args.notice:.0f} s notice, a periodic "
          f"checkpoint every {args.interval} steps")
    print(f"notice_to_checkpoint: mode={'cpu' if args.cpu else 'gpu'} reclaims={len(reclaims)} "
          f"median_s={statistics.median(times):.2f} max_s={max(times):.2f} "
          f"checkpoint_mb={statistics.median(r.size_mb for r in reclaims):.0f}")


if __name__ == "__main__":
    main()
