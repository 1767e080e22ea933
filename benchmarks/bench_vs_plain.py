"""`cvmjob bench` (the command, and its workload alone) next to a plain PyTorch loop of the same model, in one run,
on one GPU.

    python benchmarks/bench_vs_plain.py [--rounds 2] [--steps 100] [--warmup 20] [--batch-size 256]
                                        [--type GT4.4XLARGE96 | --no-command]

The plain loop is what a user would write to measure ResNet-50: the model of orchestrator/bench/resnet.py on the
GPU in channels-last, SGD with momentum, ``torch.autocast`` bf16, one random batch made once, ``--warmup`` untimed
steps then ``--steps`` timed ones, the clock stopped after ``torch.cuda.synchronize``. The workload is
``python -m orchestrator.bench.workload --phase single`` with the same steps, batch and precision, as a bench job
runs it (in a process of its own, as there). The command is ``cvmjob bench TYPE --gpus 1`` with the same steps,
batch and precision, through the whole life cycle against an emulator process of its own, which lends the host's
GPU to the instance of TYPE (a one-GPU type): the agent syncs the bench data, torchrun starts the workload, and
the command reads images_per_s_1 from its JSON. Rounds alternate the three; the median of each is shown. The last
line is ``bench_vs_plain: plain=X workload=Y command=C ratio=Z command_ratio=R`` (images/s, each ratio against
plain; the goal is a ratio within 5 % of 1).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, when run as a script
from orchestrator.bench.resnet import build_model
from tests.e2e.conftest import Cli
from tests.emulator_process import start_emulator


def plain_loop(steps: int, warmup: int, batch: int) -> float:
    torch.backends.cudnn.benchmark = True
    device = torch.device("cuda")
    model = build_model(1000).to(device).to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5)
    images = torch.randn(batch, 3, 224, 224, device=device).to(memory_format=torch.channels_last)
    labels = torch.randint(0, 1000, (batch,), device=device)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    return steps * batch / (time.perf_counter() - started)


def workload(steps: int, warmup: int, batch: int) -> float:
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator.bench.workload", "--phase", "single", "--precision", "bf16",
         "--steps", str(steps), "--warmup", str(warmup), "--batch-size", str(batch)],
        capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parents[1],
    )  # fmt: skip
    found = re.search(r"images_per_s_1=([0-9.e+]+)", done.stdout)
    if found is None:
        raise SystemExit(f"no images_per_s_1 in the workload's output:\n{done.stdout}\n{done.stderr[-2000:]}")
    return float(found.group(1))


def command(cli: Cli, instance_type: str, steps: int, batch: int) -> float:
    ran = cli.run("bench", instance_type, "--gpus", "1", "--precision", "bf16", "--batch-size", str(batch),
                  "--steps", str(steps), "--output", "json", timeout=900)
    if ran.returncode != 0:
        raise SystemExit(f"cvmjob bench exited {ran.returncode}:\n{ran.stdout[-2000:]}\n{ran.stderr[-3000:]}")
    result = json.loads(ran.stdout)
    if result["device"] != "gpu":
        raise SystemExit(f"cvmjob bench ran on {result['device']}, not the GPU: {ran.stdout[-2000:]}")
    return float(result["images_per_s_1"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--type", default="GT4.4XLARGE96", help="the one-GPU instance type `cvmjob bench` runs")
    parser.add_argument("--no-command", action="store_true", help="leave the command out (the workload alone)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_vs_plain needs a GPU")
    with tempfile.TemporaryDirectory(prefix="bench-vs-plain-") as tmp:
        emulator = None if args.no_command else start_emulator(Path(tmp) / "emulator", "--boot-seconds", "2")
        try:
            rounds = [run_round(args, None if emulator is None else Cli(emulator, Path(tmp) / "home"))
                      for _ in range(args.rounds)]
        finally:
            if emulator is not None:
                emulator.stop()
    p, w = (statistics.median(r[i] for r in rounds) for i in (0, 1))
    print(f"{torch.cuda.get_device_name()}, batch {args.batch_size}, bf16, channels-last, {args.steps} steps")
    line = f"bench_vs_plain: plain={p:.0f} workload={w:.0f}"
    if not args.no_command:
        c = statistics.median(r[2] for r in rounds)
        line += f" command={c:.0f} ratio={w / p:.3f} command_ratio={c / p:.3f}"
    else:
        line += f" ratio={w / p:.3f}"
    print(line)


def run_round(args: argparse.Namespace, cli: Cli | None) -> tuple[float, float, float]:
    """One round: the plain loop, the workload, then the command (nan when left out)."""
    plain = plain_loop(args.steps, args.warmup, args.batch_size)
    torch.cuda.empty_cache()  # the other two run in processes of their own, on the same device
    ours = workload(args.steps, args.warmup, args.batch_size)
    through = float("nan") if cli is None else command(cli, args.type, args.steps, args.batch_size)
    print(f"round: plain {plain:.0f} images/s, workload {ours:.0f} images/s, command {through:.0f} images/s",
          flush=True)
    return plain, ours, through


if __name__ == "__main__":
    main()
