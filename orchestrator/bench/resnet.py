"""ResNet-50 and one optimizer step over it: the model, the optimizer and loss scaler, mixed precision,
channels-last, synthetic data and DDP, shared by the ResNet-50 example (jobs/resnet50/train.py), its checkpoint
benchmark (benchmarks/checkpoint_stall.py) and `cvmjob bench` (orchestrator/bench/workload.py). Here, in the
package, because the agent wheel installs the package on every instance: a bench job needs no checkout.

The model is torchvision's resnet50 when torchvision is installed, else the same architecture defined below.
``args`` is anything with the attributes the example's command line has: ``seed``, ``precision``,
``channels_last``, ``lr``, ``batch_size``, ``grad_accum``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

CLASSES = 1000
Batches = Iterator[tuple[torch.Tensor, torch.Tensor]]


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
        out: torch.Tensor = self.relu(self.bn3(self.conv3(y)) + identity)
        return out


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
        logits: torch.Tensor = self.head(self.layers(self.stem(x)))
        return logits


def build_model(classes: int) -> nn.Module:
    try:
        import torchvision
    except ImportError:
        return ResNet50(classes)
    model: nn.Module = torchvision.models.resnet50(num_classes=classes, zero_init_residual=True)
    return model


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


# -- one optimizer step -------------------------------------------------------------------------------------------
def precision(choice: str, device: torch.device) -> torch.dtype | None:
    """autocast's dtype for ``--precision`` (None: fp32, no autocast)."""
    if choice == "auto":
        if device.type != "cuda":
            return None
        choice = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}[choice]


def memory_format(args: Any) -> torch.memory_format:
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
                torch.autograd.backward(self.scaler.scale(loss))
            total += loss.detach()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return total


def build_training(args: Any, device: torch.device, world: int) -> Training:
    torch.manual_seed(args.seed)
    # torch's stubs leave out Module.to's memory_format, which it takes (and channels-last needs).
    model = build_model(CLASSES).to(device, memory_format=memory_format(args))  # type: ignore[call-overload]
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


def base_lr(args: Any, world: int) -> float:
    """``--lr`` scaled to the global batch of an optimizer step."""
    return float(args.lr * args.batch_size * args.grad_accum * world / 256)
