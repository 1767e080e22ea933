"""GPU instance families, as Tencent documents them (shared/reference/tencent-cloud-api.md §8).

Pure facts for the spec's checks and the planner's GPU-need resolution. Whether a type is sold in a zone, and at
what price, is the cloud's catalog's business, not this table's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

GpuModel = Literal["T4", "V100", "A100", "A10"]
GPU_MODELS: tuple[GpuModel, ...] = get_args(GpuModel)

GPU_MEMORY_GIB: dict[GpuModel, int] = {"T4": 16, "V100": 32, "A100": 40, "A10": 24}


@dataclass(frozen=True)
class GpuType:
    """An instance type usable for CUDA training: whole GPUs (GPU_TYPES), or one slice of a GPU (VGPU_TYPES)."""

    name: str
    gpu: GpuModel
    gpus: int  # CUDA devices: a vGPU slice is one
    memory_gib: int  # each device's


def _family(family: str, gpu: GpuModel, sizes: dict[str, int]) -> tuple[GpuType, ...]:
    return tuple(GpuType(f"{family}.{size}", gpu, count, GPU_MEMORY_GIB[gpu]) for size, count in sizes.items())


GPU_TYPES: tuple[GpuType, ...] = (
    *_family("GN7", "T4", {"2XLARGE32": 1, "5XLARGE80": 1, "8XLARGE128": 1, "10XLARGE160": 2, "20XLARGE320": 4}),
    *_family("GN10Xp", "V100", {"2XLARGE40": 1, "5XLARGE80": 2, "10XLARGE160": 4, "20XLARGE320": 8}),
    *_family("GN10X", "V100", {"2XLARGE40": 1, "4XLARGE80": 2, "9XLARGE160": 4, "18XLARGE320": 8}),
    *_family("GT4", "A100", {"4XLARGE96": 1, "8XLARGE192": 2, "20XLARGE474": 4, "41XLARGE948": 8}),
    *_family("HCCPNV4h", "A100", {"48XLARGE1024": 8}),
    *_family("PNV4", "A10", {"7XLARGE116": 1, "14XLARGE232": 2, "28XLARGE466": 4, "56XLARGE932": 8}),
)

# The smallest whole-card type of each GPU: what to suggest instead of a vGPU slice.
_SMALLEST: dict[GpuModel, str] = {"T4": "GN7.2XLARGE32", "V100": "GN10Xp.2XLARGE40", "A100": "GT4.4XLARGE96",
                                  "A10": "PNV4.7XLARGE116"}


@dataclass(frozen=True)
class VgpuSlice:
    """A vComputeServer slice of one GPU: CUDA works, but with a fraction of the card's memory and compute."""

    name: str
    gpu: GpuModel
    share: str  # "a quarter of", "half"
    memory_gib: int


_VGPU_SLICES = {s.name: s for s in (VgpuSlice("GN7.LARGE20", "T4", "a quarter of", 4),
                                     VgpuSlice("GN7.2XLARGE40", "T4", "half", 8))}
# GN7vw (every size) is a rendering vGPU (vDWS): graphics APIs, not for training.
_RENDERING_FAMILY = "GN7vw"

# The slices as training types, for a job that allows vGPUs and sizes its GPU by memory (instance.need.model).
VGPU_TYPES: tuple[GpuType, ...] = tuple(GpuType(s.name, s.gpu, 1, s.memory_gib) for s in _VGPU_SLICES.values())


def is_vgpu_type(name: str) -> bool:
    """Whether ``name`` is a known vGPU type (GN7.LARGE20, GN7.2XLARGE40, GN7vw.*)."""
    return name in _VGPU_SLICES or name.partition(".")[0] == _RENDERING_FAMILY


def vgpu_advice(name: str) -> str:
    """Why a vGPU type is rejected and what to use instead; ``name`` must satisfy ``is_vgpu_type``."""
    slice_ = _VGPU_SLICES.get(name)
    gpu: GpuModel = "T4" if slice_ is None else slice_.gpu
    if slice_ is None:
        what = f"{name} is a rendering vGPU (GN7vw: graphics APIs, not CUDA training)"
    else:
        what = f"{name} is {slice_.share} a {slice_.gpu} (vGPU, {slice_.memory_gib} GB)"
    return f"{what}; for a full {gpu} use {_SMALLEST[gpu]}, or set instance.allow_vgpu: true"


KNOWN_TYPE_NAMES: tuple[str, ...] = (*(t.name for t in GPU_TYPES), *_VGPU_SLICES)


def types_with(gpu: GpuModel) -> tuple[GpuType, ...]:
    """The whole-card types carrying ``gpu``, in the table's order (smallest first within a family)."""
    return tuple(t for t in GPU_TYPES if t.gpu == gpu)


def gpu_counts(gpu: GpuModel | None = None) -> tuple[int, ...]:
    """The GPU counts one instance of ``gpu`` (None: of any GPU) can have, ascending."""
    return tuple(sorted({t.gpus for t in GPU_TYPES if gpu is None or t.gpu == gpu}))


def gpu_memory_of(name: str) -> int | None:
    """GiB of each GPU of the training type ``name`` (a vGPU slice's share); None for any other type."""
    return next((t.memory_gib for t in (*GPU_TYPES, *VGPU_TYPES) if t.name == name), None)
