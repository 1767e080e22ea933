"""`cvmjob bench`'s workload next to a plain PyTorch loop of the same model, in one run, on one GPU.

    python benchmarks/bench_vs_plain.py [--rounds 2] [--steps 100] [--warmup 20] [--batch-size 256]

The plain loop is what a user would write to measure ResNet-50: the model of orchestrator/bench/resnet.py on the
GPU in channels-last, SGD with momentum, ``torch.autocast`` bf16, one random batch made once, ``--warmup`` untimed
steps then ``--steps`` timed ones, the clock stopped after ``torch.cuda.synchronize``. The workload is
``python -m orchestrator.bench.workload --phase single`` with the same steps, batch and precision, as a bench job
runs it (in a process of its own, as there). Rounds alternate the two; the median of each is shown. The last line
is ``bench_vs_plain: plain=X workload=Y ratio=Z`` (images/s; the goal is a ratio within 5 % of 1).
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, when run as a script
from orchestrator.bench.resnet import build_model


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_vs_plain needs a GPU")
    plain, ours = [], []
    for _ in range(args.rounds):
        plain.append(plain_loop(args.steps, args.warmup, args.batch_size))
        ours.append(workload(args.steps, args.warmup, args.batch_size))
        print(f"round: plain {plain[-1]:.0f} images/s, workload {ours[-1]:.0f} images/s", flush=True)
    p, w = statistics.median(plain), statistics.median(ours)
    print(f"{torch.cuda.get_device_name()}, batch {args.batch_size}, bf16, channels-last, {args.steps} steps")
    print(f"bench_vs_plain: plain={p:.0f} workload={w:.0f} ratio={w / p:.3f}")


if __name__ == "__main__":
    main()
