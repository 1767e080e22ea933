"""A training without torch for the fault suite, the e2e tests and the sweeps whose subject is not DDP: a fraction
of a second to start instead of torchrun's and torch's seconds of CPU, the same contract (design.md §3).

Run it as it is (``exec python3 tiny.py``: a bare ``python tiny.py`` would go through torchrun). Each step sleeps
``--step-seconds``; every ``--every`` steps (and when SIGUSR1 asks, then it stops) it commits ``step-<N>/``
(state.json and a payload of ``--payload`` bytes) by atomic rename; it reports progress in the format trainkit
writes, with ``val_loss`` = ``--val-offset`` + 1/(step+1) every ``--eval-every`` steps when an offset is given (a
sweep's objective). ``--check-data`` prints the synced data's digests. Faults of its own: ``--fail-at`` exits 3,
``--hang-at`` stops reporting and sleeps forever, ``--kill-at`` SIGKILLs itself (what the OOM killer does).
``--hold-at N --release NAME`` waits before step N until ``~/NAME`` exists on its instance (or a checkpoint is asked
for): a test keeps the job training for as long as it looks, however slow the machine, then lets it end. Its
log has the quickstart's lines (``start_step=N``, ``step=N loss=X``, ``stopping after the requested checkpoint at
step N``) and its own (``tiny: resumed from step N``), so a test can check the steps against the manifest.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import sys
import time
from pathlib import Path

requested = False


def on_checkpoint_request(signum: int, frame: object) -> None:
    global requested
    requested = True


def write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


metrics: dict[str, float] = {}
metrics_step: list[int] = []
TOTAL: list[int] = [1]  # --steps, for the report's total_steps


def report(step: int, stopped: bool = False) -> None:
    target = os.environ.get("CVMJOB_PROGRESS_FILE")
    if target:
        doc = {"step": step, "total_steps": TOTAL[0], "loss": 1.0 / (step + 1), "time": time.time(), "stopped": stopped,
               "metrics": metrics,
               "metrics_step": metrics_step[-1] if metrics_step else None}
        write_atomically(Path(target), json.dumps(doc).encode())


def save(folder: Path, step: int, payload: int) -> None:
    work = folder / f".step-{step:08d}.tmp"
    work.mkdir(parents=True, exist_ok=True)
    (work / "state.json").write_text(json.dumps({"step": step}))
    (work / "payload.bin").write_bytes(bytes((step + i) % 251 for i in range(payload)))
    os.replace(work, folder / f"step-{step:08d}")
    print(f"tiny: committed step {step}", flush=True)


def hold(release: Path, step: int) -> None:
    """Wait until ``release`` exists or a checkpoint is asked for (a reclaim notice ends a hold, as it would end
    the training's next step)."""
    print(f"tiny: holding before step {step} until {release} exists", flush=True)
    while not release.exists() and not requested:
        time.sleep(0.2)
    print(f"tiny: released at step {step}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--step-seconds", type=float, default=0.1)
    parser.add_argument("--every", type=int, default=5)
    parser.add_argument("--payload", type=int, default=4096)
    parser.add_argument("--fail-at", type=int)
    parser.add_argument("--hang-at", type=int)
    parser.add_argument("--kill-at", type=int)
    parser.add_argument("--faults-in-attempt", type=int,
                        help="--fail-at, --kill-at and --hang-at apply in this attempt only (CVMJOB_ATTEMPT)")
    parser.add_argument("--hold-at", type=int, help="wait before this step until ~/<--release> exists")
    parser.add_argument("--release", default="tiny.release", help="the file under $HOME that ends a hold")
    parser.add_argument("--check-data", action="store_true", help="print the synced files' sizes and SHA-256")
    parser.add_argument("--val-offset", type=float, help="report val_loss = this + 1/(step+1)")
    parser.add_argument("--eval-every", type=int, default=1, help="steps between val_loss reports")
    args = parser.parse_args()
    TOTAL[0] = args.steps
    if args.check_data:
        data = Path(os.environ.get("CVMJOB_DATA_DIR", "data"))
        for path in sorted(p for p in data.rglob("*") if p.is_file()):
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            print(f"tiny: data {path.relative_to(data)} {path.stat().st_size} {digest}", flush=True)
    signal.signal(signal.SIGUSR1, on_checkpoint_request)
    folder = Path(os.environ.get("CVMJOB_CHECKPOINT_DIR", "checkpoints"))
    resume = os.environ.get("CVMJOB_RESUME_FROM", "")
    start = 0
    if resume:
        start = json.loads((Path(resume) / "state.json").read_text())["step"] + 1
        print(f"tiny: resumed from step {start - 1}", flush=True)
    else:
        print("tiny: fresh start", flush=True)
    print(f"start_step={start}", flush=True)
    if args.faults_in_attempt is not None and os.environ.get("CVMJOB_ATTEMPT") != str(args.faults_in_attempt):
        args.fail_at = args.kill_at = args.hang_at = None
    for step in range(start, args.steps):
        if step == args.hold_at:
            hold(Path.home() / args.release, step)
        time.sleep(args.step_seconds)
        if step == args.fail_at:
            print(f"tiny: failing at step {step}", flush=True)
            return 3
        if step == args.kill_at:
            print(f"tiny: killed at step {step}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        if step == args.hang_at:
            print(f"tiny: hanging at step {step}", flush=True)
            while True:
                time.sleep(3600)
        print(f"step={step} loss={1.0 / (step + 1):.4f}", flush=True)
        if args.val_offset is not None and (step + 1) % args.eval_every == 0:
            metrics["val_loss"] = args.val_offset + 1.0 / (step + 1)
            metrics_step.append(step)
        report(step)
        if requested or (step + 1) % args.every == 0 or step == args.steps - 1:
            save(folder, step, args.payload)
            if requested:
                report(step, stopped=True)
                print(f"tiny: stopped at step {step} on request", flush=True)
                print(f"stopping after the requested checkpoint at step {step}", flush=True)
                return 0
    out = Path(os.environ.get("CVMJOB_OUTPUT_DIR", "outputs"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "done.txt").write_text(f"{args.steps}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
