"""`cvmjob bench` (the command, and its workload alone) next to a plain PyTorch loop of the same model, in one run,
on one GPU.

    python benchmarks/bench_vs_plain.py [--rounds 2] [--steps 100] [--warmup 20] [--batch-size 256]
                                        [--type GT4.4XLARGE96 | --no-command] [--cpu]

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

``--cpu``: the three on the CPUs at the workload's CPU defaults (batch 2, 32 px, fp32, 1 warm-up and 2 timed steps;
the command on S5.MEDIUM4, whose emulated instance runs on the host's CPUs), to check the script where no GPU is.
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
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, when run as a script
from orchestrator.bench.resnet import build_model
from tests.e2e.conftest import Cli
from tests.emulator_process import start_emulator


@dataclass(frozen=True)
class Mode:
    device: str  # "cuda" or "cpu"
    precision: str  # "bf16" (autocast) or "fp32"
    image_size: int
    instance_type: str  # what the command runs on unless --type says otherwise
    steps: int
    warmup: int
    batch_size: int


MODES = {"gpu": Mode("cuda", "bf16", 224, "GT4.4XLARGE96", steps=100, warmup=20, batch_size=256),
         "cpu": Mode("cpu", "fp32", 32, "S5.MEDIUM4", steps=2, warmup=1, batch_size=2)}  # the workload's CPU sizes


def plain_loop(mode: Mode, steps: int, warmup: int, batch: int) -> float:
    torch.backends.cudnn.benchmark = True
    device = torch.device(mode.device)
    # torch's stubs leave out Module.to's memory_format, which it takes (as in orchestrator/bench/resnet.py).
    model = build_model(1000).to(device).to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5)
    size = mode.image_size
    images = torch.randn(batch, 3, size, size, device=device).to(memory_format=torch.channels_last)
    labels = torch.randint(0, 1000, (batch,), device=device)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(mode.device, dtype=torch.bfloat16, enabled=mode.precision == "bf16"):
            loss = nn.functional.cross_entropy(model(images), labels)
        torch.autograd.backward(loss)  # Tensor.backward is untyped
        optimizer.step()

    def synchronize() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    for _ in range(warmup):
        step()
    synchronize()
    started = time.perf_counter()
    for _ in range(steps):
        step()
    synchronize()
    return steps * batch / (time.perf_counter() - started)


def workload(mode: Mode, steps: int, warmup: int, batch: int) -> float:
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator.bench.workload", "--phase", "single", "--precision", mode.precision,
         "--image-size", str(mode.image_size), "--steps", str(steps), "--warmup", str(warmup),
         "--batch-size", str(batch)],
        capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parents[1],
    )  # fmt: skip
    found = re.search(r"images_per_s_1=([0-9.e+]+)", done.stdout)
    if found is None:
        raise SystemExit(f"no images_per_s_1 in the workload's output:\n{done.stdout}\n{done.stderr[-2000:]}")
    return float(found.group(1))


def command(cli: Cli, mode: Mode, instance_type: str, steps: int, batch: int) -> float:
    ran = cli.run("bench", instance_type, "--gpus", "1", "--precision", mode.precision, "--batch-size", str(batch),
                  "--steps", str(steps), "--output", "json", timeout=900)
    if ran.returncode != 0:
        raise SystemExit(f"cvmjob bench exited {ran.returncode}:\n{ran.stdout[-2000:]}\n{ran.stderr[-3000:]}")
    result = json.loads(ran.stdout)
    expected = "gpu" if mode.device == "cuda" else "cpu"
    if result["device"] != expected:
        raise SystemExit(f"cvmjob bench ran on {result['device']}, not the {expected}: {ran.stdout[-2000:]}")
    return float(result["images_per_s_1"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, help="timed steps (gpu 100, cpu 2)")
    parser.add_argument("--warmup", type=int, help="untimed steps first (gpu 20, cpu 1)")
    parser.add_argument("--batch-size", type=int, help="gpu 256, cpu 2")
    parser.add_argument("--type", help="the instance type `cvmjob bench` runs (gpu GT4.4XLARGE96, cpu S5.MEDIUM4)")
    parser.add_argument("--no-command", action="store_true", help="leave the command out (the workload alone)")
    parser.add_argument("--cpu", action="store_true", help="a tiny run on the CPUs, to check the script")
    args = parser.parse_args()
    mode = MODES["cpu" if args.cpu else "gpu"]
    for name in ("steps", "warmup", "batch_size"):  # the mode's size where none is given
        if getattr(args, name) is None:
            setattr(args, name, getattr(mode, name))
    args.type = args.type or mode.instance_type
    if not args.cpu and not torch.cuda.is_available():
        sys.exit("bench_vs_plain needs a GPU (--cpu: a tiny run on the CPUs, to check the script)")
    with tempfile.TemporaryDirectory(prefix="bench-vs-plain-") as tmp:
        emulator = None if args.no_command else start_emulator(Path(tmp) / "emulator", "--boot-seconds", "2")
        try:
            rounds = [run_round(args, mode, None if emulator is None else Cli(emulator, Path(tmp) / "home"))
                      for _ in range(args.rounds)]
        finally:
            if emulator is not None:
                emulator.stop()
    p, w = (statistics.median(r[i] for r in rounds) for i in (0, 1))
    where = torch.cuda.get_device_name() if mode.device == "cuda" else f"the CPUs ({torch.get_num_threads()} threads)"
    print(f"{where}, batch {args.batch_size}, {mode.precision}, channels-last, {args.steps} steps")
    line = f"bench_vs_plain: plain={rate(p)} workload={rate(w)}"
    if not args.no_command:
        c = statistics.median(r[2] for r in rounds)
        line += f" command={rate(c)} ratio={w / p:.3f} command_ratio={c / p:.3f}"
    else:
        line += f" ratio={w / p:.3f}"
    print(line)


def rate(images_per_s: float) -> str:
    """Whole images/s, as a GPU's thousands read; two decimals for the CPUs' few (nan: left out)."""
    return f"{images_per_s:.2f}" if images_per_s < 100 else f"{images_per_s:.0f}"


def run_round(args: argparse.Namespace, mode: Mode, cli: Cli | None) -> tuple[float, float, float]:
    """One round: the plain loop, the workload, then the command (nan when left out)."""
    plain = plain_loop(mode, args.steps, args.warmup, args.batch_size)
    if mode.device == "cuda":
        torch.cuda.empty_cache()  # the other two run in processes of their own, on the same device
    ours = workload(mode, args.steps, args.warmup, args.batch_size)
    through = float("nan") if cli is None else command(cli, mode, args.type, args.steps, args.batch_size)
    print(f"round: plain {rate(plain)} images/s, workload {rate(ours)} images/s, command {rate(through)} images/s",
          flush=True)
    return plain, ours, through


if __name__ == "__main__":
    main()
