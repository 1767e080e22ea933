"""GPU memory from the model (``instance.need.model``) and DataLoader workers for a type: pure arithmetic.

Each GPU holds one training process's whole copy (DDP):

    params x (weights + gradients + optimizer state) bytes per parameter
  + batch_size x seq_len x hidden_dim x layers x bytes per activation

and must have that plus ``headroom`` (the allocator's fragmentation, cuDNN workspaces). GiB = 2**30 bytes.

Bytes per parameter     weights  gradients  optimizer: adam, adamw | sgd   total: adam, adamw | sgd
  fp32                        4          4                   8 | 4                        16 | 12
  amp (torch.autocast)        6          4                   8 | 4                        18 | 14

amp keeps the fp32 weights the optimizer steps plus the fp16 copies autocast casts them to (4 + 2), and the
gradients land in the fp32 weights' ``.grad`` (4). adam and adamw keep two fp32 moments (adamw's weight decay
needs no state), sgd one momentum buffer. Activations are 4 bytes in fp32, 2 in amp (autocast's fp16 outputs are
what backward keeps). The activation term is the rule of thumb of the documents cvmjob grew from: one hidden-wide
value per position and layer; attention scores and intermediate tensors are what the headroom has to cover.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from ..spec.compute import ModelSize
from ..spec.workload import TrainSpec

GIB = 2**30

_WEIGHTS = {"fp32": 4, "amp": 6}
_GRADIENTS = {"fp32": 4, "amp": 4}
_OPTIMIZER = {"adam": 8, "adamw": 8, "sgd": 4}
_ACTIVATION = {"fp32": 4, "amp": 2}


@dataclass(frozen=True)
class Term:
    """One line of the estimate: the product of ``factors``, ``bytes_each`` bytes each."""

    name: str
    factors: tuple[int, ...]
    bytes_each: int

    @property
    def bytes(self) -> int:
        return math.prod(self.factors) * self.bytes_each


def terms(model: ModelSize) -> tuple[Term, Term, Term, Term]:
    """Weights, gradients, optimizer state and activations: the arithmetic ``cvmjob plan`` shows."""
    return (
        Term("weights", (model.params,), _WEIGHTS[model.precision]),
        Term("gradients", (model.params,), _GRADIENTS[model.precision]),
        Term(f"optimizer ({model.optimizer})", (model.params,), _OPTIMIZER[model.optimizer]),
        Term("activations", (model.batch_size, model.seq_len, model.hidden_dim, model.layers),
             _ACTIVATION[model.precision]),
    )


class MemoryEstimate(BaseModel):
    """What each GPU holds for its training process, in bytes, and the headroom it must have on top."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    weights_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    headroom: float

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes + self.activations_bytes

    @property
    def vram_estimate_gib(self) -> float:
        """The estimate before headroom."""
        return self.total_bytes / GIB

    @property
    def required_gib(self) -> float:
        """What each GPU must have: the estimate plus headroom."""
        return self.vram_estimate_gib * (1 + self.headroom)

    def fits(self, memory_gib: float) -> bool:
        return self.required_gib <= memory_gib


def estimate(model: ModelSize) -> MemoryEstimate:
    weights, gradients, optimizer, activations = terms(model)
    return MemoryEstimate(weights_bytes=weights.bytes, gradients_bytes=gradients.bytes,
                          optimizer_bytes=optimizer.bytes, activations_bytes=activations.bytes,
                          headroom=model.headroom)


# -- what would fit when one GPU cannot hold the estimate ----------------------------------------------------
def sharded(memory: MemoryEstimate, gpus: int, everything: bool = False) -> MemoryEstimate:
    """Each GPU's share when ``gpus`` data-parallel GPUs split the optimizer state (ZeRO-1), or with
    ``everything`` the weights and gradients too (ZeRO-3, FSDP); each GPU keeps its own activations."""

    def share(size: int) -> int:
        return -(-size // gpus)

    update = {"optimizer_bytes": share(memory.optimizer_bytes)}
    if everything:
        update |= {"weights_bytes": share(memory.weights_bytes), "gradients_bytes": share(memory.gradients_bytes)}
    return memory.model_copy(update=update)


def fewest_gpus(memory: MemoryEstimate, memory_gib: float, everything: bool = False) -> int | None:
    """The fewest GPUs whose ``sharded`` shares fit ``memory_gib`` each; None when no number of them does."""
    kept = memory.activations_bytes + (0 if everything else memory.weights_bytes + memory.gradients_bytes)
    room = memory_gib * GIB / (1 + memory.headroom) - kept  # bytes each GPU has for its share of the rest
    if room < 1:
        return None
    least = max(1, math.ceil((memory.total_bytes - kept) / room))
    # The float division and the shares' rounding up may disagree by one GPU, never more.
    return next((gpus for gpus in (least, least + 1) if sharded(memory, gpus, everything).fits(memory_gib)), None)


def with_batch(memory: MemoryEstimate, model: ModelSize, batch: int) -> MemoryEstimate:
    """The estimate at ``batch`` samples per GPU instead of ``model.batch_size``: activations scale with it."""
    return memory.model_copy(update={"activations_bytes": memory.activations_bytes // model.batch_size * batch})


def largest_batch(memory: MemoryEstimate, model: ModelSize, memory_gib: float) -> int | None:
    """The largest divisor of ``model.batch_size`` that fits ``memory_gib``: accumulating the gradients of
    batch_size // it steps keeps the effective batch exactly. None when not even one sample fits."""
    return next((batch for batch in range(model.batch_size, 0, -1)
                 if model.batch_size % batch == 0 and with_batch(memory, model, batch).fits(memory_gib)), None)


def checkpointed_layers(layers: int) -> int:
    """Layers' worth of activations kept under activation checkpointing in segments of ⌈√layers⌉ layers (Chen et
    al. 2016, torch.utils.checkpoint): each segment's input, plus the one segment backward is recomputing."""
    segment = math.isqrt(layers - 1) + 1
    return min(layers, -(-layers // segment) + segment)


def checkpointed(memory: MemoryEstimate, model: ModelSize) -> MemoryEstimate:
    kept = memory.activations_bytes // model.layers * checkpointed_layers(model.layers)
    return memory.model_copy(update={"activations_bytes": kept})


# -- DataLoader workers --------------------------------------------------------------------------------------
def processes_per_node(train: TrainSpec, gpus: float) -> int:
    """torchrun's workers on a node with ``gpus`` GPUs, as the agent starts them: ``nproc_per_node``, or for
    "auto" one per CUDA device (a vGPU slice is one) and ``cpu_nproc`` without any."""
    if isinstance(train.nproc_per_node, int):
        return train.nproc_per_node
    return math.ceil(gpus) or train.cpu_nproc


def num_workers(vcpus: int, processes: int) -> int:
    """DataLoader workers per process: ⅔ of the node's vCPUs shared by its processes (the other third runs the
    processes themselves, the agent and the system), at least 1."""
    return max(1, 2 * vcpus // (3 * processes))
