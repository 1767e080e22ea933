"""ResNet-50 on GPUs: DDP over NCCL, mixed precision (bf16 where the GPU has it, else fp16 with loss scaling),
channels-last, checkpoints and spot-safe stops through cvmjob's trainkit.

Data: ``--data synthetic`` (default) makes each step's batch on the GPU from the step number: random images and
labels, so the loss stays near ln 1000; it measures the GPUs and the checkpoint path, not learning.
``--data folder`` reads an ImageNet-style tree (``<root>/train/<class>/*.jpg``) from ``$CVMJOB_DATA_DIR/imagenet``
(``--data-root`` to change) with torchvision's ImageFolder. The model is torchvision's resnet50 when torchvision is
installed, else the same architecture defined below.

Rank 0 prints ``step=<N> loss=<X> images/s=<Y>`` every ``--log-every`` steps. Not run in CI (it needs GPUs).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import time
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from orchestrator import trainkit


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", choices=["synthetic", "folder"], default="synthetic")
    parser.add_argument("--data-root", type=Path, default=None, help="default: $CVMJOB_DATA_DIR/imagenet")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=256, help="per GPU")
    parser.add_argument("--lr", type=float, default=0.1, help="for a global batch of 256; scaled linearly")
    parser.add_argument("--warmup-steps", type=int, default=200)
    parser.add_argument("--precision", choices=["auto", "bf16", "fp16", "fp32"], default="auto")
    parser.add_argument("--workers", type=int, default=8, help="data loader processes per GPU (folder data)")
    parser.add_argument("--checkpoint-every", type=int, default=500)
    parser.add_argument("--log-every", type=int, default=20)
    return parser.parse_args()


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
def synthetic_batches(start: int, batch: int, rank: int, device: torch.device,
                      classes: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    step = start
    while True:
        generator = torch.Generator(device=device).manual_seed(step * 1009 + rank)
        # Made as NHWC and viewed as NCHW: the channels-last layout the model runs in, without a copy.
        images = torch.randn(batch, 224, 224, 3, generator=generator, device=device).permute(0, 3, 1, 2)
        labels = torch.randint(0, classes, (batch,), generator=generator, device=device)
        yield images, labels
        step += 1


def folder_batches(root: Path, start: int, batch: int, rank: int, world: int, workers: int,
                   device: torch.device) -> tuple[Iterator[tuple[torch.Tensor, torch.Tensor]], int]:
    """Batches from step ``start`` on: the epoch order is a function of the epoch, so a resumed run continues
    the same sequence; the batches of the interrupted epoch already trained on are skipped by index."""
    try:
        from torchvision import datasets, transforms
    except ImportError as exc:
        raise SystemExit("--data folder needs torchvision (pip install torchvision)") from exc
    normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    dataset = datasets.ImageFolder(root / "train", transforms.Compose([
        transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), transforms.ToTensor(), normalize]))
    per_epoch = len(dataset) // (batch * world)

    def batches() -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        epoch, skip = divmod(start, per_epoch)
        while True:
            order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(epoch)).tolist()
            mine = order[rank : per_epoch * batch * world : world][skip * batch :]
            loader = torch.utils.data.DataLoader(dataset, batch_size=batch, sampler=mine, num_workers=workers,
                                                 pin_memory=True, drop_last=True, persistent_workers=False)
            for images, labels in loader:
                yield (images.to(device, non_blocking=True, memory_format=torch.channels_last),
                       labels.to(device, non_blocking=True))
            epoch, skip = epoch + 1, 0

    return batches(), len(dataset.classes)


def precision(choice: str) -> torch.dtype | None:
    if choice == "auto":
        choice = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}[choice]


def main() -> None:
    args = parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("this example needs CUDA GPUs; the quickstart runs on CPUs")
    dist.init_process_group("nccl", timeout=datetime.timedelta(minutes=10))
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(device)
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True

    ckpt = trainkit.Checkpointer(every=args.checkpoint_every)
    classes = 1000
    model = build_model(classes).to(device, memory_format=torch.channels_last)
    lr = args.lr * args.batch_size * world / 256
    decay = [p for n, p in model.named_parameters() if p.ndim > 1]
    no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]  # BN and biases: no weight decay
    optimizer = torch.optim.SGD([{"params": decay, "weight_decay": 5e-5}, {"params": no_decay, "weight_decay": 0}],
                                lr=lr, momentum=0.9, nesterov=True)
    dtype = precision(args.precision)
    scaler = torch.amp.GradScaler("cuda", enabled=dtype == torch.float16)

    start, state = ckpt.restore({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                 "scaler": scaler.state_dict()})
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scaler.load_state_dict(state["scaler"])
    ddp = DistributedDataParallel(model, device_ids=[device.index], gradient_as_bucket_view=True)
    if args.data == "folder":
        root = args.data_root or Path(os.environ.get("CVMJOB_DATA_DIR", ".")) / "imagenet"
        batches, classes = folder_batches(root, start, args.batch_size, rank, world, args.workers, device)
        if classes != 1000:
            raise SystemExit(f"{root}/train has {classes} classes; this script trains a 1000-class head")
    else:
        batches = synthetic_batches(start, args.batch_size, rank, device, classes)
    if rank == 0:
        print(f"world={world} precision={dtype} start_step={start} lr={lr:.3f} data={args.data}", flush=True)

    def learning_rate(step: int) -> float:
        if step < args.warmup_steps:
            return lr * (step + 1) / args.warmup_steps
        progress = (step - args.warmup_steps) / max(1, args.steps - args.warmup_steps)
        return lr * 0.5 * (1 + math.cos(math.pi * progress))

    loss_value, window_start, images_seen = float("nan"), time.perf_counter(), 0
    for step in range(start, args.steps):
        images, labels = next(batches)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step)
        with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = nn.functional.cross_entropy(ddp(images), labels)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        images_seen += images.shape[0] * world
        if (step + 1) % args.log_every == 0 or step + 1 == args.steps:
            loss_value = loss.detach().float().item()  # a sync point: only every log_every steps
            elapsed = time.perf_counter() - window_start
            if rank == 0:
                print(f"step={step} loss={loss_value:.4f} images/s={images_seen / elapsed:.0f}", flush=True)
            window_start, images_seen = time.perf_counter(), 0
        trainkit.report(step, loss_value)
        if ckpt.should_save(step):
            ckpt.save(step, {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                             "scaler": scaler.state_dict()})
        if ckpt.stop_requested:
            if rank == 0:
                print(f"stopping after the requested checkpoint at step {step}", flush=True)
            break
    else:
        if rank == 0:
            out = Path(os.environ.get("CVMJOB_OUTPUT_DIR", "outputs"))
            out.mkdir(parents=True, exist_ok=True)
            torch.save(model.state_dict(), out / "resnet50.pt")
            (out / "metrics.json").write_text(json.dumps({"steps": args.steps, "final_loss": loss_value}) + "\n")
    trainkit.finish()


if __name__ == "__main__":
    main()
