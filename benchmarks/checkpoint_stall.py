"""Checkpoint stall: the ResNet-50 example's steady images/s with a checkpoint every N steps, next to none.

    python benchmarks/checkpoint_stall.py [--cpu] [--rounds R] [--interval N] [--batch-size B] [--image-size S]
                                          [--precision P] [--compile] [--directory DIR]

The model, its optimizer and one optimizer step are jobs/resnet50/train.py's own (imported, not copied), on
synthetic data, in one process (no DDP: one GPU, or the CPUs); checkpoints are trainkit.Checkpointer's, as the
example takes them. Three ways of checkpointing are timed in the same run, in windows of N steps:

- none: no checkpoint;
- async: ``Checkpointer(every=N)``, trainkit's default (the state copied to CPU memory in ``save``, written by a
  background thread);
- sync: ``Checkpointer(every=N, async_save=False)``, the write inside ``save``.

A window starts at a checkpoint step, so it holds one checkpoint, and its write has the rest of the window to
overlap, as it has until the next checkpoint in a training. The window's clock stops after the device finished its
work and, for async, after the write still in flight (what the next save would wait for): no window pays for
another's write. Each round runs one window of each way, in an order rotated from round to round, so the
machine's drifts reach all three alike; untimed steps up to the first checkpoint step and an untimed save of each
way first warm the kernels' autotuning, the pinned buffers and the disk. Shown per way: the median images/s of the
rounds (min and max beside it), the slowdown against none, the median time inside ``save`` (the loop's stall at
the checkpoint step) and of the write left at the window's end. Only the newest checkpoint of each way is kept on
disk, in a temporary folder (under --directory: put it on the disk a job's checkpoints go to).

GPU mode (the default where CUDA is): batch 256, bf16, channels-last, 224 px, a checkpoint every 100 steps, 5
rounds. ``--cpu``: a tiny configuration (batch 2, 32 px, fp32, every 10 steps, 2 rounds, the training on all cores
but one) that runs in well under a minute on 2 cores. The last line is exactly
``checkpoint_stall: mode=M images_per_s_none=X images_per_s_every<N>=Y slowdown_pct=Z`` (async's numbers).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, when run as a script
from orchestrator import trainkit

ROOT = Path(__file__).resolve().parents[1]
WAYS = ("none", "async", "sync")


@dataclass(frozen=True)
class Mode:
    batch_size: int
    image_size: int
    precision: str
    interval: int
    rounds: int


MODES = {"gpu": Mode(batch_size=256, image_size=224, precision="bf16", interval=100, rounds=5),
         "cpu": Mode(batch_size=2, image_size=32, precision="fp32", interval=10, rounds=2)}


@dataclass(frozen=True)
class Window:
    way: str
    images_per_s: float
    save_s: float  # inside save(): the loop's stall at the checkpoint step
    left_s: float  # the write still in flight at the window's end, waited for inside the window


def load_example() -> ModuleType:
    """jobs/resnet50/train.py as a module (jobs/ is no package)."""
    spec = importlib.util.spec_from_file_location("resnet50_train", ROOT / "jobs" / "resnet50" / "train.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while they are made
    spec.loader.exec_module(module)
    return module


class Run:
    """The example's training, stepped window by window, with one Checkpointer per way that checkpoints."""

    def __init__(self, example: ModuleType, options: argparse.Namespace, device: torch.device,
                 directory: Path, compile_model: bool) -> None:
        self.training = example.build_training(options, device, 1)
        if compile_model:
            self.training.forward = torch.compile(self.training.model)
        self.batches = example.synthetic_batches(0, options.batch_size, 0, device, options.image_size,
                                                 example.memory_format(options))
        self.lr = example.base_lr(options, 1)
        self.images_per_step = options.batch_size
        self.interval = int(options.checkpoint_every)
        self.device = device
        self.checkpointers = {
            way: trainkit.Checkpointer(every=self.interval, directory=directory / way, async_save=way == "async")
            for way in WAYS if way != "none"}
        self.step = 0

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def train(self, steps: int, checkpointer: trainkit.Checkpointer | None) -> float:
        """Run ``steps`` steps, checkpointing where ``checkpointer`` says; the seconds spent inside save()."""
        in_save = 0.0
        for _ in range(steps):
            self.training.step(self.batches, self.lr)
            if checkpointer is not None and checkpointer.should_save(self.step):
                started = time.perf_counter()
                checkpointer.save(self.step, self.training.state())
                in_save += time.perf_counter() - started
            self.step += 1
        return in_save

    def warm_up(self) -> None:
        """Steps up to the first checkpoint step, and an untimed save of each way: the kernels' autotuning, the
        CPU buffers of async saves and the disk's first writes are behind the timed windows."""
        self.train(self.interval - 1, None)
        for checkpointer in self.checkpointers.values():
            checkpointer.save(self.step - 1, self.training.state())
            checkpointer.wait()

    def window(self, way: str) -> Window:
        checkpointer = self.checkpointers.get(way)
        self.synchronize()
        started = time.perf_counter()
        in_save = self.train(self.interval, checkpointer)
        self.synchronize()
        drained = time.perf_counter()
        if checkpointer is not None:
            checkpointer.wait()
        ended = time.perf_counter()
        if checkpointer is not None:
            keep_newest(checkpointer.directory)
        images_per_s = self.interval * self.images_per_step / (ended - started)
        return Window(way, images_per_s, in_save, ended - drained if way == "async" else 0.0)


def keep_newest(directory: Path) -> None:
    """Play the uploader's pruning: the disk holds one checkpoint per way, not one per window."""
    for old in sorted(directory.glob("step-*"))[:-1]:
        shutil.rmtree(old)


def checkpoint_mb(directory: Path) -> float:
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file()) / 1e6


def rounds(run: Run, count: int, on_window: Callable[[Window], None]) -> list[Window]:
    """``count`` rounds of a window of each way, each round's order rotated by one from the round before."""
    windows = []
    for number in range(count):
        for way in WAYS[number % len(WAYS):] + WAYS[: number % len(WAYS)]:
            windows.append(run.window(way))
            on_window(windows[-1])
    return windows


def median(windows: list[Window], way: str, field: Callable[[Window], float]) -> float:
    return statistics.median(field(w) for w in windows if w.way == way)


def report(windows: list[Window], mode: str, interval: int) -> None:
    none = median(windows, "none", lambda w: w.images_per_s)
    print(f"\n{'checkpoints':<34}{'images/s':>10}{'min':>9}{'max':>9}{'slowdown %':>12}{'in save() ms':>14}"
          f"{'write left ms':>15}")
    labels = {"none": "none", "async": f"every {interval}, async (default)",
              "sync": f"every {interval}, sync (async_save=False)"}
    slowdown: dict[str, float] = {}
    stall_ms: dict[str, float] = {}
    for way in WAYS:
        rates = [w.images_per_s for w in windows if w.way == way]
        rate = statistics.median(rates)
        slowdown[way] = 100 * (none - rate) / none
        stall_ms[way] = 1000 * median(windows, way, lambda w: w.save_s)
        left_ms = 1000 * median(windows, way, lambda w: w.left_s)
        print(f"{labels[way]:<34}{rate:>10.1f}{min(rates):>9.1f}{max(rates):>9.1f}{slowdown[way]:>12.2f}"
              f"{stall_ms[way]:>14.1f}{left_ms:>15.1f}")
    print(f"\nasync against sync: {stall_ms['async']:.1f} ms against {stall_ms['sync']:.1f} ms inside save() per "
          f"checkpoint, a slowdown of {slowdown['async']:.2f} % against {slowdown['sync']:.2f} %")
    rate = median(windows, "async", lambda w: w.images_per_s)
    print(f"checkpoint_stall: mode={mode} images_per_s_none={none:.1f} images_per_s_every{interval}={rate:.1f} "
          f"slowdown_pct={slowdown['async']:.2f}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", action="store_true", help="the tiny CPU configuration (the default without CUDA)")
    parser.add_argument("--rounds", type=int, help="timed rounds (gpu 5, cpu 2)")
    parser.add_argument("--interval", type=int, help="steps between checkpoints, and of a window (gpu 100, cpu 10)")
    parser.add_argument("--batch-size", type=int, help="gpu 256, cpu 2")
    parser.add_argument("--image-size", type=int, help="gpu 224, cpu 32")
    parser.add_argument("--precision", choices=["bf16", "fp16", "fp32"], help="gpu bf16, cpu fp32")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model")
    parser.add_argument("--directory", type=Path, help="where the checkpoints go (default: a temporary folder)")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    mode = "cpu" if args.cpu or not torch.cuda.is_available() else "gpu"
    defaults = MODES[mode]
    interval = args.interval or defaults.interval
    example = load_example()
    options = example.parse_args([
        "--batch-size", str(args.batch_size or defaults.batch_size),
        "--image-size", str(args.image_size or defaults.image_size),
        "--precision", args.precision or defaults.precision,
        "--checkpoint-every", str(interval)])
    device = torch.device("cuda", 0) if mode == "gpu" else torch.device("cpu")
    if mode == "gpu":
        example.use_gpu(device)
    else:
        # A core for the background writer, as a GPU node has cores to spare: with every core in the training's
        # OpenMP regions, each region would wait for the thread that the writer took the core from.
        torch.set_num_threads(max(1, (os.cpu_count() or 1) - 1))
    directory = Path(tempfile.mkdtemp(prefix="checkpoint_stall-", dir=args.directory))
    try:
        run = Run(example, options, device, directory, args.compile)
        run.warm_up()
        what = torch.cuda.get_device_name(device) if mode == "gpu" else f"{torch.get_num_threads()} CPU threads"
        count = args.rounds or defaults.rounds
        print(f"checkpoint stall of jobs/resnet50/train.py's ResNet-50 on {what}: batch {options.batch_size}, "
              f"{options.precision}, {'channels-last' if options.channels_last else 'NCHW'}, "
              f"{options.image_size} px synthetic{', compiled' if args.compile else ''}; {count} rounds of "
              f"{interval}-step windows, checkpoints in {directory}", flush=True)

        def progress(window: Window) -> None:
            print(f"  {window.way:<6} {window.images_per_s:9.1f} images/s  save() {1000 * window.save_s:8.1f} ms  "
                  f"write left {1000 * window.left_s:8.1f} ms", flush=True)

        windows = rounds(run, count, progress)
        print(f"a checkpoint is {checkpoint_mb(directory / 'sync'):.0f} MB")
        report(windows, mode, interval)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
