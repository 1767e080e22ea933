"""`cvmjob bench`'s workload: ResNet-50 on synthetic data (orchestrator/bench/resnet.py, the example's own model
and optimizer step), mixed precision and channels-last, timed on one process and on all of them under DDP, then
the synced bench data read back from the node's disk.

    python -m orchestrator.bench.workload --phase single              # one GPU (or the CPU), no torchrun
    torchrun --standalone --nproc_per_node=8 -m orchestrator.bench.workload --phase ddp
    torchrun ... -m orchestrator.bench.workload --phase all --read DIR --out bench.json   # what a bench job runs

``--phase all`` runs the single phase on rank 0 while the other ranks wait, then the DDP phase on every rank.
Each phase builds its model, runs ``--warmup`` untimed steps (cuDNN's autotuning, the allocator), then times
``--steps`` optimizer steps, the clock stopped once the device has finished them; images/s counts every rank's
images. GPU utilisation is the mean of ``torch.cuda.utilization()`` over the node's GPUs in use, sampled during
the timed steps (None without NVML). The read rate (``--read``: a file or folder) is a plain sequential read of
data the agent has just written, so the page cache may serve part of it: it is labelled so, not a cold-disk figure.

Defaults follow the device found: on a GPU batch 256, 224 px, 20 warm-up and 100 timed steps, ``--precision auto``
bf16 (fp16 where the GPU has no bf16); on CPUs (the emulator) a tiny run: batch 2, 32 px, 1 and 2 steps, fp32,
gloo. Rank 0 prints one ``bench: …`` line and writes the report (``--out``; results.WorkloadReport) as JSON.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from .resnet import build_training, distribute, memory_format, precision, synthetic_batches, use_gpu
from .results import Precision, WorkloadReport

READ_CHUNK = 16 * 2**20
UTILISATION_EVERY = 0.2  # seconds between NVML readings


@dataclass(frozen=True)
class Defaults:
    batch_size: int
    image_size: int
    warmup: int
    steps: int


DEFAULTS = {"gpu": Defaults(batch_size=256, image_size=224, warmup=20, steps=100),
            "cpu": Defaults(batch_size=2, image_size=32, warmup=1, steps=2)}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m orchestrator.bench.workload", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--phase", choices=["single", "ddp", "all"], default="single")
    parser.add_argument("--precision", choices=["auto", "bf16", "fp16", "fp32"], default="auto")
    parser.add_argument("--batch-size", type=int, help="per process (gpu 256, cpu 2)")
    parser.add_argument("--image-size", type=int, help="gpu 224, cpu 32")
    parser.add_argument("--warmup", type=int, help="untimed steps first (gpu 20, cpu 1)")
    parser.add_argument("--steps", type=int, help="timed optimizer steps per phase (gpu 100, cpu 2)")
    parser.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--read", type=Path, help="a file or folder to read back for the disk's read rate")
    parser.add_argument("--out", type=Path, help="where rank 0 writes the report (JSON)")
    args = parser.parse_args(argv)
    if args.phase != "single" and "RANK" not in os.environ:
        parser.error(f"--phase {args.phase} runs under torchrun (torchrun --nproc_per_node=N -m "
                     "orchestrator.bench.workload ...)")
    device = "gpu" if torch.cuda.is_available() else "cpu"
    for name, value in vars(DEFAULTS[device]).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    # What resnet.build_training reads besides: a fixed seed, no accumulation, the example's learning rate.
    args.seed, args.grad_accum, args.lr = 0, 1, 0.1
    return args


class Utilisation:
    """Mean NVML utilisation of some GPUs, sampled in a thread between ``start`` and ``stop``."""

    def __init__(self, devices: list[int]) -> None:
        self.devices = devices
        self.samples: list[float] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="gpu-utilisation", daemon=True)

    def _reading(self) -> float | None:
        try:
            return statistics.fmean(torch.cuda.utilization(d) for d in self.devices)
        except (ModuleNotFoundError, RuntimeError):  # no pynvml, or NVML refused: no figure rather than a guess
            return None

    def _sample(self) -> None:
        while not self._done.wait(UTILISATION_EVERY):
            reading = self._reading()
            if reading is None:
                return
            self.samples.append(reading)

    def start(self) -> None:
        if self.devices:
            self._thread.start()

    def stop(self) -> float | None:
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()
        return statistics.fmean(self.samples) if self.samples else None


def _finish(loss: torch.Tensor, device: torch.device) -> None:
    loss.item()  # the last step's result: every kernel before it has run
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(args: argparse.Namespace, device: torch.device, rank: int, world: int) -> tuple[float, float | None]:
    """(images/s over ``world`` processes, GPU utilisation) of one phase; under DDP when ``world`` > 1."""
    training = build_training(args, device, world)
    if world > 1:
        distribute(training, compile_model=False)
    batches = synthetic_batches(0, args.batch_size, rank, device, args.image_size, memory_format(args))
    loss = torch.zeros(())
    for _ in range(args.warmup):
        loss = training.step(batches, args.lr)
    _finish(loss, device)
    if world > 1:
        dist.barrier()  # every rank starts its timed steps together
    utilisation = Utilisation(list(range(world)) if device.type == "cuda" and rank == 0 else [])
    utilisation.start()
    started = time.perf_counter()
    for _ in range(args.steps):
        loss = training.step(batches, args.lr)
    _finish(loss, device)
    elapsed = time.perf_counter() - started
    if world > 1:
        # The slowest rank's time: DDP's reductions keep them within a step of each other, and the phase is theirs.
        slowest = torch.tensor([elapsed], device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        elapsed = float(slowest.item())
    return args.batch_size * args.steps * world / elapsed, utilisation.stop()


def read_rate(path: Path) -> tuple[float | None, int]:
    """(MB/s, bytes) of reading every file under ``path`` once, sequentially."""
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    nbytes = 0
    started = time.perf_counter()
    for file in files:
        with file.open("rb", buffering=0) as f:
            while chunk := f.read(READ_CHUNK):
                nbytes += len(chunk)
    seconds = time.perf_counter() - started
    return (nbytes / 1e6 / seconds if nbytes and seconds > 0 else None), nbytes


def resolved_precision(args: argparse.Namespace, device: torch.device) -> Precision:
    """What ``--precision auto`` came to on this device."""
    names: dict[torch.dtype | None, Precision] = {torch.bfloat16: "bf16", torch.float16: "fp16", None: "fp32"}
    return names[precision(args.precision, device)]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    cuda = torch.cuda.is_available()
    distributed = "RANK" in os.environ
    if distributed:
        # Long enough for rank 0's single phase, which the other ranks wait out at the barrier.
        dist.init_process_group("nccl" if cuda else "gloo", timeout=datetime.timedelta(minutes=30))
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else torch.device("cpu")
    if cuda:
        use_gpu(device)
    single = all_ = utilisation = None
    if args.phase in ("single", "all"):
        if rank == 0:
            single, utilisation = measure(args, device, 0, 1)
        if distributed:
            dist.barrier()
    if args.phase in ("ddp", "all"):
        all_, utilisation = measure(args, device, rank, world)
    if distributed:
        dist.destroy_process_group()
    if rank != 0:
        return
    read_mb_s, read_bytes = read_rate(args.read) if args.read is not None and args.read.exists() else (None, 0)
    report = WorkloadReport(
        device="gpu" if cuda else "cpu", gpu_name=torch.cuda.get_device_name(device) if cuda else None,
        world=world, precision=resolved_precision(args, device), batch_size=args.batch_size,
        image_size=args.image_size, steps=args.steps, channels_last=args.channels_last, images_per_s_1=single,
        images_per_s_all=all_, gpu_utilisation=utilisation, nvme_read_mb_s=read_mb_s, nvme_read_bytes=read_bytes,
        torch=torch.__version__)
    shown = {k: v for k, v in report.model_dump().items() if v is not None}
    print("bench: " + " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in shown.items()),
          flush=True)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report.model_dump_json(indent=2) + "\n")


if __name__ == "__main__":
    main()
