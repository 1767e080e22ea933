"""ResNet-50: DDP (NCCL on GPUs, gloo on CPUs), mixed precision, channels-last, gradient accumulation,
optionally torch.compile, with asynchronous checkpoints and spot-safe stops through cvmjob's trainkit.

Data: ``--data synthetic`` (default) makes each micro-batch on the device from its index: random images and
labels, so the loss stays near ln 1000; it measures the GPUs and the checkpoint path, not learning.
``--data folder`` reads an ImageNet-style tree (``<root>/train/<class>/*.jpg``) from ``$CVMJOB_DATA_DIR/imagenet``
(``--data-root`` to change) with torchvision's ImageFolder. The model is torchvision's resnet50 when torchvision is
installed, else the same architecture defined below.

Speed: ``--precision`` auto (default) is bf16 on a GPU that has it, fp16 on one that has not, fp32 on CPUs; fp16
scales the loss with a GradScaler whose state is in the checkpoint. ``--channels-last`` (default; the layout tensor
cores run convolutions in), ``--compile`` (torch.compile of the DDP model), and checkpoints written in the
background (``--no-async-checkpoints`` writes them in the loop).

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
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from orchestrator import trainkit

CLASSES = 1000
Batches = Iterator[tuple[torch.Tensor, torch.Tensor]]


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
    parser.add_argument("--compile", action="store_true", help="torch.compile the model")
    parser.add_argument("--async-checkpoints", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--workers", type=int, default=8, help="data loader processes per GPU (folder data)")
    parser.add_argument("--checkpoint-every", type=int, default=500)
    parser.add_argument("--log-every", type=int, default=20)
    args = parser.parse_args(argv)
    if args.grad_accum < 1:
        parser.error("--grad-accum must be at least 1")
    return args


# -- the model: torchvision's, or the same architecture (He et al. 2015, v1.5 strides) ----------------------------
class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int) -> None:
        super().__init__()
        width, out = planes, planes * self.expansion
        self.conv1 = nn.Conv2d(inplanes, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        nn.init.zeros_(self.bn3.weight)  # each block starts as the identity: stabler early training
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or inplanes != out:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, out, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        return self.relu(self.bn3(self.conv3(y)) + identity)


class ResNet50(nn.Module):
    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64),
                                  nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2, padding=1))
        layers: list[nn.Module] = []
        inplanes = 64
        for planes, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for i in range(blocks):
                layers.append(Bottleneck(inplanes, planes, stride if i == 0 else 1))
                inplanes = planes * Bottleneck.expansion
        self.layers = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(inplanes, classes))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.layers(self.stem(x)))


def build_model(classes: int) -> nn.Module:
    try:
        import torchvision
    except ImportError:
        return ResNet50(classes)
    return torchvision.models.resnet50(num_classes=classes, zero_init_residual=True)


# -- data ---------------------------------------------------------------------------------------------------------
def synthetic_batches(start: int, batch: int, rank: int, device: torch.device, image_size: int,
                      memory_format: torch.memory_format) -> Batches:
    """Micro-batches from index ``start`` on, each a function of its index and the rank alone."""
    index = start
    while True:
        generator = torch.Generator(device=device).manual_seed(index * 1009 + rank)
        if memory_format == torch.channels_last:
            # Made as NHWC and viewed as NCHW: the channels-last layout the model runs in, without a copy.
            shape = (batch, image_size, image_size, 3)
            images = torch.randn(shape, generator=generator, device=device).permute(0, 3, 1, 2)
        else:
            images = torch.randn(batch, 3, image_size, image_size, generator=generator, device=device)
        labels = torch.randint(0, CLASSES, (batch,), generator=generator, device=device)
        yield images, labels
        index += 1


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


# -- one optimizer step -------------------------------------------------------------------------------------------
def precision(choice: str, device: torch.device) -> torch.dtype | None:
    """autocast's dtype for ``--precision`` (None: fp32, no autocast)."""
    if choice == "auto":
        if device.type != "cuda":
            return None
        choice = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}[choice]


def memory_format(args: argparse.Namespace) -> torch.memory_format:
    return torch.channels_last if args.channels_last else torch.contiguous_format


@dataclass
class Training:
    """The model, its optimizer and loss scaler, and how one optimizer step runs over them."""

    model: nn.Module  # never a wrapper: the checkpoint's names stay those of a plain ResNet-50
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    dtype: torch.dtype | None
    grad_accum: int
    forward: Callable[[torch.Tensor], torch.Tensor]
    no_sync: Callable[[], AbstractContextManager[object]] = nullcontext  # DDP's, once distributed

    def state(self) -> dict[str, Any]:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "scaler": self.scaler.state_dict()}

    def load(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scaler.load_state_dict(state["scaler"])

    def step(self, batches: Batches, lr: float) -> torch.Tensor:
        """One optimizer step over ``grad_accum`` micro-batches; the mean loss, left on the device."""
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.zero_grad(set_to_none=True)
        device = next(self.model.parameters()).device
        total = torch.zeros((), device=device)
        for micro in range(self.grad_accum):
            images, labels = next(batches)
            # Gradients are reduced across the ranks once, in the last micro-batch's backward.
            with nullcontext() if micro == self.grad_accum - 1 else self.no_sync():
                with torch.autocast(device.type, dtype=self.dtype or torch.float32, enabled=self.dtype is not None):
                    loss = nn.functional.cross_entropy(self.forward(images), labels) / self.grad_accum
                self.scaler.scale(loss).backward()
            total += loss.detach()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return total


def build_training(args: argparse.Namespace, device: torch.device, world: int) -> Training:
    torch.manual_seed(args.seed)
    model = build_model(CLASSES).to(device, memory_format=memory_format(args))
    decay = [p for p in model.parameters() if p.ndim > 1]
    no_decay = [p for p in model.parameters() if p.ndim <= 1]  # BN and biases: no weight decay
    optimizer = torch.optim.SGD([{"params": decay, "weight_decay": 5e-5}, {"params": no_decay, "weight_decay": 0}],
                                lr=base_lr(args, world), momentum=0.9, nesterov=True)
    dtype = precision(args.precision, device)
    scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)
    return Training(model, optimizer, scaler, dtype, args.grad_accum, forward=model)


def distribute(training: Training, compile_model: bool) -> None:
    """Wrap the model in DDP (after the checkpoint is loaded: DDP broadcasts rank 0's weights), then compile."""
    device = next(training.model.parameters()).device
    ddp = DistributedDataParallel(training.model, device_ids=[device.index] if device.type == "cuda" else None,
                                  gradient_as_bucket_view=True)
    training.no_sync = ddp.no_sync
    training.forward = torch.compile(ddp) if compile_model else ddp


def use_gpu(device: torch.device) -> None:
    """This process's GPU, with cuDNN's autotuner and TF32 matrix products (for the fp32 parts)."""
    torch.cuda.set_device(device)
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True


def base_lr(args: argparse.Namespace, world: int) -> float:
    """``--lr`` scaled to the global batch of an optimizer step."""
    return float(args.lr * args.batch_size * args.grad_accum * world / 256)


def main() -> None:
    args = parse_args()
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo", timeout=datetime.timedelta(minutes=10))
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else torch.device("cpu")
    if cuda:
        use_gpu(device)

    ckpt = trainkit.Checkpointer(every=args.checkpoint_every, async_save=args.async_checkpoints)
    training = build_training(args, device, world)
    start, state = ckpt.restore(training.state())
    training.load(state)
    distribute(training, args.compile)
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
              f"compile={args.compile} start_step={start} lr={lr:.4g} data={args.data}", flush=True)

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
        trainkit.report(step, loss_value)
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
