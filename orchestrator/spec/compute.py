"""What to run on: instance type or GPU need, billing, image and disks."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictBool, StrictFloat, StrictInt, field_validator, model_validator

from orchestrator.spec.base import SpecModel, field_problem
from orchestrator.spec.fields import DriverVersion, ImageId, ImageName, InstanceTypeName, JobName, PoolName
from orchestrator.spec.gpus import GPU_MEMORY_GIB, GpuModel, gpu_counts, is_vgpu_type, vgpu_advice


class ModelSize(SpecModel):
    """The model to train, for sizing each GPU's memory: parameters x bytes per parameter (weights, gradients,
    optimizer state) + batch_size x seq_len x hidden_dim x layers x bytes per activation, plus headroom
    (docs/spec.md, "Sizing from the model")."""

    params: StrictInt = Field(ge=1, examples=[110_000_000])
    """Parameters, e.g. 110_000_000 (BERT-base)."""
    batch_size: StrictInt = Field(ge=1, examples=[32])
    """Samples per GPU per step: each process's batch (a step's micro-batch under gradient accumulation)."""
    seq_len: StrictInt = Field(ge=1, examples=[512])
    """Positions per sample: tokens for a sequence model, 1 for a model without a sequence."""
    hidden_dim: StrictInt = Field(ge=1, examples=[768])
    """Width of each layer's output (values per position)."""
    layers: StrictInt = Field(ge=1, examples=[12])
    """Layers (transformer blocks)."""
    precision: Literal["fp32", "amp"] = "fp32"
    """fp32: 4-byte weights, gradients and activations. amp (torch.autocast): fp32 weights plus the fp16 copies
    autocast makes of them (6 bytes per parameter), fp32 gradients (4), fp16 activations (2)."""
    optimizer: Literal["adam", "adamw", "sgd"] = "adam"
    """adam and adamw keep two fp32 moments (8 bytes per parameter), sgd its momentum buffer (4)."""
    headroom: StrictFloat = Field(0.15, ge=0, le=1)
    """Added to the estimate for the allocator's fragmentation and cuDNN workspaces: 0.15 is 15 %."""


class GpuNeed(SpecModel):
    """GPUs per node: a GPU model, or the model to train (``model``) for the planner to size the GPU from. The
    planner picks the cheapest placement that has them in the chosen zones."""

    gpu: GpuModel | None = Field(None, examples=["T4"])
    """GPU model. Optional with ``model``: unset, any GPU whose memory holds the model; set, this GPU only."""
    count: StrictInt = Field(1, ge=1, le=8)
    """Whole GPUs per node (with ``model`` and allow_vgpu, a count of 1 may also be a vGPU slice)."""
    min_gpu_memory_gib: StrictInt | None = Field(None, ge=1)
    """Memory each GPU must have, in GiB (optional)."""
    model: ModelSize | None = None
    """The model to train: each GPU must hold its memory estimate plus headroom (every GPU holds a whole copy,
    as under DDP)."""

    @model_validator(mode="after")
    def _offered(self) -> GpuNeed:
        if self.gpu is None and self.model is None:
            raise field_problem("gpu", "set a GPU model (e.g. gpu: T4), or model for the planner to size the GPU "
                                       "from (e.g. model: {params: 110000000, batch_size: 32, seq_len: 512, "
                                       "hidden_dim: 768, layers: 12})")
        counts = gpu_counts(self.gpu)
        if self.count not in counts:
            what = f"{self.count} GPUs" if self.gpu is None else f"{self.count} x {self.gpu}"
            raise field_problem("count", f"no instance type has {what}. use one of {', '.join(map(str, counts))}")
        memory = max(GPU_MEMORY_GIB.values()) if self.gpu is None else GPU_MEMORY_GIB[self.gpu]
        if self.min_gpu_memory_gib is not None and self.min_gpu_memory_gib > memory:
            bigger = ", ".join(f"{g} ({m} GiB)" for g, m in GPU_MEMORY_GIB.items() if m >= self.min_gpu_memory_gib)
            hint = f"choose {bigger}" if bigger else f"no GPU here has more than {max(GPU_MEMORY_GIB.values())} GiB"
            each = "" if self.gpu is None else f"each {self.gpu} has {memory} GiB. "
            raise field_problem("min_gpu_memory_gib", each + hint)
        return self


class InstanceSpec(SpecModel):
    """The instance type (``type``) or what it must have (``need``): exactly one of the two."""

    type: InstanceTypeName | None = None
    """A CVM instance type, FAMILY.SIZE. Whether it exists in the region is checked at plan time."""
    need: GpuNeed | None = None
    """GPUs needed; the planner resolves them to an instance type."""
    alternatives: tuple[InstanceTypeName, ...] = Field((), examples=[["GN7.5XLARGE80"]])
    """Other types the recovery policy may fall back to when the first choice has no capacity, in order."""
    allow_vgpu: StrictBool = False
    """Accept a vGPU type (a slice of a GPU, e.g. GN7.2XLARGE40 is half a T4), named or, for a need of one GPU
    with a model, chosen when the slice's memory holds the model. Off: such types are rejected."""

    @model_validator(mode="after")
    def _one_choice_no_vgpu_trap(self) -> InstanceSpec:
        if (self.type is None) == (self.need is None):
            raise ValueError("set exactly one of type (e.g. type: GN7.2XLARGE32) or need (e.g. need: {gpu: T4})")
        if not self.allow_vgpu:
            named = [("type", self.type)] + [(f"alternatives.{i}", name) for i, name in enumerate(self.alternatives)]
            for field, name in named:
                if name is not None and is_vgpu_type(name):
                    raise field_problem(field, vgpu_advice(name))
        return self


# RunInstances' InstanceChargePrepaid.Period values.
PrepaidMonths = Literal[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 24, 36, 48, 60]


class BillingSpec(SpecModel):
    """How instances are paid for."""

    mode: Literal["on-demand", "spot", "reserved"] = "on-demand"
    """on-demand: pay by the hour. spot: much cheaper, may be reclaimed with 2 minutes' notice (the job then
    resumes from its last checkpoint). reserved: run on monthly instances kept in a pool between jobs."""
    spot_max_price: StrictFloat | None = Field(None, gt=0, examples=[2.5])
    """Spot only: the highest price to pay, in CNY per hour. Unset: the market price."""
    reserved_pool: PoolName | None = None
    """Reserved only: the pool's name. Unset: "default"."""
    prepaid_period_months: PrepaidMonths | None = None
    """Reserved only: months to buy when the pool grows. Unset: 1."""

    @model_validator(mode="after")
    def _mode_fields(self) -> BillingSpec:
        if self.spot_max_price is not None and self.mode != "spot":
            raise field_problem("spot_max_price", f"applies to spot billing only. remove it or set mode: spot "
                                                  f"(mode is {self.mode})")
        for field in ("reserved_pool", "prepaid_period_months"):
            if getattr(self, field) is not None and self.mode != "reserved":
                raise field_problem(field, f"applies to reserved billing only. remove it or set mode: reserved "
                                           f"(mode is {self.mode})")
        return self

    @property
    def pool(self) -> str | None:
        """The reserved pool the job runs on ("default" unless named); None unless billing is reserved."""
        return (self.reserved_pool or "default") if self.mode == "reserved" else None


class GpuDriver(SpecModel):
    """The NVIDIA driver, CUDA and cuDNN that Tencent's auto-install puts on a GPU instance booted from a public
    image (no public image carries the driver). The default is a pairing Tencent's script accepts."""

    driver: DriverVersion = "535.161.07"
    """The Tesla driver's version."""
    cuda: DriverVersion = "12.4.0"
    """The CUDA toolkit's version."""
    cudnn: DriverVersion = "8.9.7"
    """cuDNN's version."""

    def label(self) -> str:
        return f"NVIDIA driver {self.driver} (CUDA {self.cuda}, cuDNN {self.cudnn})"


class ImageSpec(SpecModel):
    """The image to boot: at most one of ``id``, ``name`` or ``from_job`` (none: the planner picks an official
    Ubuntu), and for GPU types on a public image the driver installed at boot."""

    id: ImageId | None = None
    """An image id."""
    name: ImageName | None = None
    """A public or custom image's name, looked up at plan time."""
    from_job: JobName | None = None
    """The newest ready image that a job of this name made (its snapshot), looked up at plan time."""
    gpu_driver: GpuDriver | Literal["none"] = GpuDriver()
    """What a GPU type on a public image installs at boot (about 10 minutes), or none. A custom image (a job's
    snapshot, say) keeps the driver it was made with, so nothing installs there."""

    @model_validator(mode="after")
    def _one_of(self) -> ImageSpec:
        if sum(value is not None for value in (self.id, self.name, self.from_job)) > 1:
            raise ValueError("set one of id (e.g. id: img-487zeit5), name or from_job (a job name), not several")
        return self


CloudDiskType = Literal["LOCAL_BASIC", "LOCAL_SSD", "CLOUD_BASIC", "CLOUD_SSD", "CLOUD_PREMIUM", "CLOUD_BSSD",
                        "CLOUD_HSSD", "CLOUD_TSSD"]
# Disks an instance type brings with it; RunInstances cannot be asked for them.
_TIED_TO_TYPE = ("LOCAL_NVME", "LOCAL_PRO")


class SystemDisk(SpecModel):
    """The boot disk."""

    type: CloudDiskType = "CLOUD_PREMIUM"
    """Disk type."""
    size_gib: StrictInt = Field(100, ge=20, le=1024)
    """Size in GiB."""


class DataDisk(SpecModel):
    """An extra disk."""

    type: CloudDiskType = "CLOUD_SSD"
    """Disk type. LOCAL_NVME comes with the instance type (e.g. HCCPNV4h) and cannot be asked for."""
    size_gib: StrictInt = Field(ge=10, le=32000, multiple_of=10, examples=[500])
    """Size in GiB, a multiple of 10."""

    @field_validator("type", mode="before")
    @classmethod
    def _not_tied_to_type(cls, value: object) -> object:
        if value in _TIED_TO_TYPE:
            raise ValueError(f"{value} disks come with the instance type and cannot be requested. pick an instance "
                             "type that has them (e.g. HCCPNV4h.48XLARGE1024)")
        return value


class DiskSpec(SpecModel):
    """Disks. Local NVMe is not listed here: it comes with the instance types that have it."""

    system: SystemDisk = SystemDisk()
    """The boot disk."""
    data: tuple[DataDisk, ...] = Field((), max_length=21)
    """Extra disks: at most 20 cloud disks and 1 local disk (LOCAL_BASIC or LOCAL_SSD)."""

    @model_validator(mode="after")
    def _counts(self) -> DiskSpec:
        local = [i for i, disk in enumerate(self.data) if disk.type.startswith("LOCAL_")]
        if len(local) > 1:
            raise field_problem(f"data.{local[1]}.type", "only one local data disk is allowed")
        if len(self.data) - len(local) > 20:
            raise field_problem("data", "at most 20 cloud data disks are allowed")
        return self
