"""ResNet-50: DDP (NCCL on GPUs, gloo on CPUs), mixed precision, channels-last, gradient accumulation,
torch.compile on GPUs, with asynchronous checkpoints and spot-safe stops through cvmjob's trainkit.

Data: ``--data synthetic`` (default) makes each micro-batch on the device from its index: random images and
labels, so the loss stays near ln 1000; it measures the GPUs and the checkpoint path, not learning.
``--data folder`` reads an ImageNet-style tree (``<root>/train/<class>/*.jpg``) from ``$CVMJOB_DATA_DIR/imagenet``
(``--data-root`` to change) with torchvision's ImageFolder. The model is torchvision's resnet50 when torchvision is
installed, else the same architecture (orchestrator/bench/resnet.py).

Speed: the defaults are the fastest correct configuration measured on one H200 (torch 2.11, batch 256, synthetic
data, 2026-12-02): bf16 with ``torch.compile`` 6,300 images/s, against fp16 eager 5,250 and bf16 eager 4,610.
``--precision`` auto (default) is bf16 on a GPU that has it, fp16 on one that has not, fp32 on CPUs; fp16 scales
the loss with a GradScaler whose state is in the checkpoint. ``--compile`` (default on GPUs, ``--no-compile`` to
skip it) compiles the DDP model: it costs about a minute at each start, a resumed attempt's too, which a run of a
few hundred steps does not win back. ``--channels-last`` (default; the layout tensor cores run convolutions in),
and checkpoints written in the background (``--no-async-checkpoints`` writes them in the loop).

``--grad-accum N``: each step is an optimizer step over N micro-batches of ``--batch-size`` per GPU (DDP reduces
the gradients once, at the last); the learning rate scales with the global batch, step numbers, the schedule and
checkpoints count optimizer steps, so a checkpoint is always taken at an accumulation boundary and a resumed run
continues with the next step's first micro-batch.

Rank 0 prints ``step=<N> loss=<X> images/s=<Y>`` every ``--log-every`` steps. It runs on CPUs too, slowly
(``--image-size 32`` for a quick look). benchmarks/checkpoint_stall.py times its optimizer steps with and without
checkpoints (CI runs that benchmark's CPU mode: the script itself is not run there).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist

from orchestrator import trainkit

# The model and its optimizer step are the package's (the agent wheel brings it to every instance), shared with
# `cvmjob bench`; benchmarks/checkpoint_stall.py reaches them through this module's names.
from orchestrator.bench.resnet import (
    CLASSES,
    Batches,
    base_lr,
    build_training,
    distribute,
    memory_format,
    synthetic_batches,
    use_gpu,
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", choices=["synthetic", "folder"], default="synthetic")
    parser.add_argument("--data-root", type=Path, default=None, help="default: $CVMJOB_DATA_DIR/imagenet")
    parser.add_argument("--steps", type=int, default=2000, help="optimizer steps")
    parser.add_argument("--batch-size", type=int, default=256, help="per GPU and micro-batch")
    parser.add_argument("--grad-accum", type=int, default=1, help="micro-batches per optimizer step")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--lr", type=float, default=0.1, help="for a global batch of 256; scaled linearly")
    parser.add_argument("--warmup-steps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0, help="initial weights (the same on every rank)")
    parser.add_argument("--precision", choices=["auto", "bf16", "fp16", "fp32"], default="auto")
    parser.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                        help="torch.compile the model (default: on GPUs, off on CPUs)")
    parser.add_argument("--async-checkpoints", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--workers", type=int, default=8, help="data loader processes per GPU (folder data)")
    parser.add_argument("--checkpoint-every", type=int, default=500)
    parser.add_argument("--log-every", type=int, default=20)
    args = parser.parse_args(argv)
    if args.grad_accum < 1:
        parser.error("--grad-accum must be at least 1")
    return args


# -- data ---------------------------------------------------------------------------------------------------------
def folder_batches(root: Path, start: int, batch: int, rank: int, world: int, workers: int, device: torch.device,
                   image_size: int, memory_format: torch.memory_format) -> tuple[Batches, int]:
    """Micro-batches from index ``start`` on: the epoch order is a function of the epoch, so a resumed run
    continues the same sequence; the batches of the interrupted epoch already trained on are skipped by index."""
    try:
        from torchvision import datasets, transforms
    except ImportError as exc:
        raise SystemExit("--data folder needs torchvision (pip install torchvision)") from exc
    normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    dataset = datasets.ImageFolder(root / "train", transforms.Compose([
        transforms.RandomResizedCrop(image_size), transforms.RandomHorizontalFlip(), transforms.ToTensor(),
        normalize]))
    per_epoch = len(dataset) // (batch * world)

    def batches() -> Batches:
        epoch, skip = divmod(start, per_epoch)
        while True:
            order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(epoch)).tolist()
            mine = order[rank : per_epoch * batch * world : world][skip * batch :]
            loader = torch.utils.data.DataLoader(dataset, batch_size=batch, sampler=mine, num_workers=workers,
                                                 pin_memory=True, drop_last=True, persistent_workers=False)
            for images, labels in loader:
                yield (images.to(device, non_blocking=True, memory_format=memory_format),
                       labels.to(device, non_blocking=True))
            epoch, skip = epoch + 1, 0

    return batches(), len(dataset.classes)


def main() -> None:
    args = parse_args()
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo", timeout=datetime.timedelta(minutes=10))
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else torch.device("cpu")
    if cuda:
        use_gpu(device)
    compile_model = cuda if args.compile is None else args.compile

    ckpt = trainkit.Checkpointer(every=args.checkpoint_every, async_save=args.async_checkpoints)
    training = build_training(args, device, world)
    start, state = ckpt.restore(training.state())
    training.load(state)
    distribute(training, compile_model)
    first = start * args.grad_accum  # the micro-batch the resumed step starts with
    layout = memory_format(args)
    if args.data == "folder":
        root = args.data_root or Path(os.environ.get("CVMJOB_DATA_DIR", ".")) / "imagenet"
        batches, classes = folder_batches(root, first, args.batch_size, rank, world, args.workers, device,
                                          args.image_size, layout)
        if classes != CLASSES:
            raise SystemExit(f"{root}/train has {classes} classes; this script trains a {CLASSES}-class head")
    else:
        batches = synthetic_batches(first, args.batch_size, rank, device, args.image_size, layout)
    lr, warmup, steps = base_lr(args, world), int(args.warmup_steps), int(args.steps)
    if rank == 0:
        print(f"world={world} device={device.type} precision={training.dtype} grad_accum={args.grad_accum} "
              f"compile={compile_model} start_step={start} lr={lr:.4g} data={args.data}", flush=True)

    def learning_rate(step: int) -> float:
        if step < warmup:
            return lr * (step + 1) / warmup
        progress = (step - warmup) / max(1, steps - warmup)
        return lr * 0.5 * (1 + math.cos(math.pi * progress))

    loss_value, window_start, images_seen = float("nan"), time.perf_counter(), 0
    for step in range(start, steps):
        loss = training.step(batches, learning_rate(step))
        images_seen += args.batch_size * args.grad_accum * world
        if (step + 1) % args.log_every == 0 or step + 1 == steps:
            loss_value = loss.float().item()  # a sync point: only every log_every steps
            elapsed = time.perf_counter() - window_start
            if rank == 0:
                print(f"step={step} loss={loss_value:.4f} images/s={images_seen / elapsed:.0f}", flush=True)
            window_start, images_seen = time.perf_counter(), 0
        trainkit.report(step, loss_value, total=steps)
        if ckpt.should_save(step):
            ckpt.save(step, training.state())
        if ckpt.stop_requested:
            if rank == 0:
                print(f"stopping after the requested checkpoint at step {step}", flush=True)
            break
    else:
        if rank == 0:
            out = Path(os.environ.get("CVMJOB_OUTPUT_DIR", "outputs"))
            out.mkdir(parents=True, exist_ok=True)
            torch.save(training.model.state_dict(), out / "resnet50.pt")
            (out / "metrics.json").write_text(json.dumps({"steps": steps, "final_loss": loss_value}) + "\n")
    trainkit.finish()


if __name__ == "__main__":
    main()
