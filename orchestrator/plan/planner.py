"""make_plan(spec, facts) -> Plan: pure. Chooses instance types (a named type, or the types with the fewest GPUs
meeting a GPU need, each GPU holding the model's memory estimate when the need has one: sizing.py), zones in the
spec's order, the charge type for the billing mode, and orders the placements the recovery policy will walk
through: the planner's own choice cheapest first, then the types the spec names, in its order. Whatever cannot
work is an error naming the field and the nearest valid value; nothing here talks to the cloud.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import CvmjobError
from ..providers.tencent.compute import HpcCluster, Offering, ZoneQuota
from ..providers.tencent.vocabulary import ChargeType, StockStatus, needs_hpc_cluster
from ..spec.compute import GpuDriver, ImageSpec
from ..spec.gpus import (
    GPU_MEMORY_GIB,
    GPU_MODELS,
    GPU_TYPES,
    VGPU_TYPES,
    GpuType,
    gpu_counts,
    gpu_memory_of,
    is_vgpu_type,
)
from ..spec.models import JobSpec
from ..spec.suggest import did_you_mean
from .models import Placement, Plan, PlannedNetwork, Rejected
from .sizing import (
    GIB,
    MemoryEstimate,
    checkpointed,
    checkpointed_layers,
    estimate,
    fewest_gpus,
    largest_batch,
    sharded,
    with_batch,
)


class PlanError(CvmjobError, ValueError):
    """The spec cannot run on this cloud as written; one line per problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class PublicImage:
    image_id: str
    name: str
    public: bool = True  # an official image (no GPU driver on it); False: a custom one, which keeps what it has


@dataclass(frozen=True)
class NetworkFacts:
    """The network the job's launches name, as the cloud has it: the VPC, its subnet in each zone that has one
    (the spec's, else the zone's default or first), and the security groups."""

    vpc_id: str
    subnets: dict[str, str]  # zone -> subnet id
    security_group_ids: list[str]
    made: list[str] = field(default_factory=list)  # what gathering them created (the plan says it)


@dataclass(frozen=True)
class Facts:
    region: str
    zones: list[str]  # the region's zones, as the cloud lists them
    offerings: list[Offering]  # DescribeZoneInstanceConfigInfos rows for the charge types involved
    image: PublicImage | None  # the spec's image, resolved; None: choose a public one
    public_images: list[PublicImage] = field(default_factory=list)
    state_bucket: str = ""
    network: NetworkFacts | None = None  # None: no network named (facts gathered by hand, without the VPC's)
    spot_quotas: dict[str, ZoneQuota] | None = None  # by zone; None: not read (not a spot job)
    hpc_cluster: HpcCluster | None = None  # the spec's network.hpc_cluster_id, as the cloud has it


def make_plan(spec: JobSpec, facts: Facts, on_demand_fallback: bool = False,
              avoid: Mapping[tuple[str, str], str] | None = None) -> Plan:
    """``on_demand_fallback``: the job's policy lets it continue on demand (a spot recovery policy with
    fallback_to_on_demand, a pool policy with when_busy: on-demand); then no spot capacity today is a start on
    demand, not an error. ``avoid``: (zone, instance type) pairs not to use, whatever the charge type, and why
    (a sweep's brakes): rejected like any other."""
    avoid = avoid or {}
    network = facts.network
    problems: list[str] = []
    zones = _zones(spec, facts, problems)
    need = spec.instance.need
    memory = None if need is None or need.model is None else estimate(need.model)
    chosen, named = _instance_types(spec, facts, memory, problems)
    types = [*chosen, *named]
    if problems:
        raise PlanError(problems)
    charge = ChargeType.for_billing(spec.billing.mode)
    on_demand_price = {
        (o.zone, o.instance_type): o.unit_price for o in facts.offerings if o.charge_type == ChargeType.ON_DEMAND
    }
    candidates: list[Placement] = []
    rejected: list[Rejected] = []
    over_quota: list[str] = []  # spot placements the account's quota cannot hold: said in one line
    # Spot and reserved jobs may continue on demand (recovery policy, pool policy): those placements follow.
    charges = [charge] + ([ChargeType.ON_DEMAND] if charge != ChargeType.ON_DEMAND else [])
    for charge_type in charges:
        placements: list[Placement] = []
        for instance_type in types:
            for zone in zones:
                offer = next(
                    (
                        o
                        for o in facts.offerings
                        if o.zone == zone and o.instance_type == instance_type and o.charge_type == charge_type
                    ),
                    None,
                )
                reason = (avoid.get((zone, instance_type)) or _no_subnet(network, zone)
                          or _no_hpc_cluster(facts.hpc_cluster, instance_type, zone)
                          or _unusable(offer, spec, charge_type))
                if not reason and (quota := _over_spot_quota(facts.spot_quotas, offer, charge_type,
                                                               spec.train.nnodes)):
                    reason = quota
                    over_quota.append(f"{instance_type} in {zone}")
                if reason:
                    rejected.append(
                        Rejected(zone=zone, instance_type=instance_type, charge_type=charge_type, reason=reason)
                    )
                    continue
                assert offer is not None
                placements.append(
                    Placement(
                        zone=zone,
                        instance_type=instance_type,
                        charge_type=charge_type,
                        price_per_hour=offer.unit_price,
                        on_demand_price_per_hour=on_demand_price.get((zone, instance_type)),
                        gpus=offer.gpu_count,
                        stock=offer.stock,
                        gpu_memory_gib=gpu_memory_of(instance_type),
                        cpus=offer.cpu,
                        bandwidth_gbps=offer.bandwidth_gbps,
                    )
                )
        candidates += _cheapest_first([p for p in placements if p.instance_type in chosen], zones)
        candidates += [p for p in placements if p.instance_type not in chosen]
    warnings = []
    if over_quota:
        warnings.append(f"spot quota: dropped {', '.join(over_quota)}: the account's spot vCPUs in those zones "
                        "cannot hold the job's nodes. ask Tencent for more spot quota by ticket, or use on-demand")
    if not any(c.charge_type == charge for c in candidates):
        tried = "; ".join(f"{r.instance_type} in {r.zone}: {r.reason}" for r in rejected if r.charge_type == charge)
        if on_demand_fallback and candidates:
            warnings.append(
                f"no {spec.billing.mode} capacity now ({tried}): the job starts on demand, as its policy allows"
            )
        else:
            raise PlanError(
                [
                    f"instance: no {spec.billing.mode} capacity for {', '.join(types)} in "
                    f"{', '.join(zones)} ({tried}). add zones, instance.alternatives, or another billing.mode"
                ]
            )
    image = facts.image or default_image(facts.public_images)
    hours = spec.limits.max_runtime / 3600
    nnodes = spec.train.nnodes
    primary = candidates[0]
    if image is None:
        raise PlanError(["image: no public image found in this region. set image.id"])
    if primary.gpus == 0:
        warnings.append(f"{primary.instance_type} has no GPU: training runs on CPU")
    driver = _driver(spec, image, candidates, warnings)
    if spec.container is not None:
        warnings.append(_container_note(spec, primary.gpus > 0))
    return Plan(
        region=spec.region,
        image_id=image.image_id,
        image_name=image.name,
        nnodes=nnodes,
        candidates=candidates,
        rejected=rejected,
        expected_hours=hours,
        estimated_cost=_cost(primary.price_per_hour, nnodes, hours),
        on_demand_cost=_cost(primary.on_demand_price_per_hour, nnodes, hours),
        state_bucket=facts.state_bucket,
        network=None if network is None else PlannedNetwork(
            vpc_id=network.vpc_id,
            subnets={z: s for z, s in network.subnets.items() if any(c.zone == z for c in candidates)},
            security_group_ids=network.security_group_ids,
            public_bandwidth_mbps=spec.network.public_ip.bandwidth_mbps if spec.network.public_ip else None,
            hpc_cluster_id=None if facts.hpc_cluster is None else facts.hpc_cluster.cluster_id),
        warnings=warnings,
        gpu_memory=memory,
        gpu_driver=driver,
    )


def _container_note(spec: JobSpec, gpus: bool) -> str:
    """What runs the job's container: the host's runtime, or Docker installed at boot (agent/container.py)."""
    assert spec.container is not None
    note = (f"container: the training runs in {spec.container.image}, in the boot image's Docker or Podman, or in "
            "docker.io installed from the image's package mirror at boot")
    if gpus:
        note += ("; the GPUs reach it only with NVIDIA's container toolkit on the host: boot from an image that "
                 "has it, or install it in setup (it is not on Tencent's mirror: that needs a public IP)")
    return note


def _driver(spec: JobSpec, image: PublicImage, candidates: list[Placement],
            warnings: list[str]) -> GpuDriver | None:
    """The driver the UserData installs: on a public image (none carries one) when a candidate has whole GPUs and
    the spec did not say none. A vGPU slice needs NVIDIA's GRID driver instead, which the auto-install does not set
    up and whose public images ship a python3 too old for the agent."""
    if not image.public:
        return None
    vgpu = sorted({c.instance_type for c in candidates if is_vgpu_type(c.instance_type)})
    if vgpu:
        warnings.append(f"{', '.join(vgpu)}: a vGPU type needs the GRID driver, which no public image with Python "
                        f"3.10+ carries. set image.id to an image that has it")
    wanted = (spec.image or ImageSpec()).gpu_driver  # the spec's default when it names no image
    if wanted == "none" or not any(c.gpus >= 1 for c in candidates):
        return None
    return wanted


def _cheapest_first(placements: list[Placement], zones: list[str]) -> list[Placement]:
    """By live price, unpriced last; equal prices in the zones' order, then by type name: the same plan every
    time."""
    return sorted(placements, key=lambda p: (p.price_per_hour is None, p.price_per_hour or 0.0,
                                             zones.index(p.zone), p.instance_type))


def _cost(price: float | None, nodes: int, hours: float) -> float | None:
    return None if price is None else round(price * nodes * hours, 2)


def _zones(spec: JobSpec, facts: Facts, problems: list[str]) -> list[str]:
    if not facts.zones:
        problems.append(f"region: {spec.region} has no zones on this cloud. check the region name")
        return []
    for index, zone in enumerate(spec.zones):
        if zone not in facts.zones:
            hint = did_you_mean(zone, facts.zones) or f"zones of {spec.region}: {', '.join(facts.zones)}"
            problems.append(f"zones.{index}: {zone} is not a zone of {spec.region}. {hint}")
    return list(spec.zones) or list(facts.zones)


def _offered_types(facts: Facts) -> list[str]:
    return sorted({o.instance_type for o in facts.offerings})


def _instance_types(
    spec: JobSpec, facts: Facts, memory: MemoryEstimate | None, problems: list[str]
) -> tuple[list[str], list[str]]:
    """(the types the planner chooses for a need, the types the spec names): the first are tried cheapest first,
    the second in the spec's order."""
    offered = _offered_types(facts)
    chosen = [] if spec.instance.need is None else _need_types(spec, memory, offered, problems)
    named: list[str] = [] if spec.instance.type is None else [spec.instance.type]
    for index, alternative in enumerate(spec.instance.alternatives):
        if alternative in chosen or alternative in named:
            continue
        if is_vgpu_type(alternative) and not spec.instance.allow_vgpu:
            problems.append(
                f"instance.alternatives.{index}: {alternative} is a vGPU type. remove it or set "
                "instance.allow_vgpu: true"
            )
            continue
        held = gpu_memory_of(alternative)
        if memory is not None and held is not None and not memory.fits(held):
            problems.append(
                f"instance.alternatives.{index}: {alternative} has {held} GiB per GPU and the model needs "
                f"{_needs(memory)}. remove it or name a type with more memory per GPU"
            )
            continue
        named.append(alternative)
    for field_name, name in _named_types(spec):
        if name not in offered:
            hint = did_you_mean(name, offered) or f"offered types include {', '.join(offered[:8])}"
            problems.append(f"{field_name}: {name} is not an instance type offered in {spec.region}. {hint}")
    return chosen, named


def _need_types(spec: JobSpec, memory: MemoryEstimate | None, offered: list[str], problems: list[str]) -> list[str]:
    """The offered types with the fewest GPUs (at least ``need.count``) of the need's GPU, or of any GPU whose
    memory holds the model's estimate; vGPU slices too for a single GPU sized from the model, when allowed."""
    need = spec.instance.need
    assert need is not None
    gpus = GPU_MODELS if need.gpu is None else (need.gpu,)
    kinds = [t for t in GPU_TYPES if t.gpu in gpus and t.gpus >= need.count]
    if memory is not None and spec.instance.allow_vgpu and need.count == 1:
        kinds += [t for t in VGPU_TYPES if t.gpu in gpus]
    min_memory = need.min_gpu_memory_gib or 0
    holding = [t for t in kinds if t.memory_gib >= min_memory and (memory is None or memory.fits(t.memory_gib))]
    if memory is not None and not holding:
        problems.append(_does_not_fit(spec, memory, kinds))
        return []
    fitting = [t for t in holding if t.name in offered]
    if not fitting:
        what = f"whole {need.gpu} GPU(s)" if need.gpu else "GPU(s)"
        each = max(min_memory, math.ceil(memory.required_gib)) if memory is not None else min_memory
        problems.append(
            f"instance.need: no offered instance type has {need.count} {what}"
            + (f" with {each} GiB each" if each else "")
            + f" in {spec.region}. lower instance.need.count" + (" or choose another gpu" if need.gpu else "")
        )
        return []
    fewest = min(t.gpus for t in fitting)
    return sorted(t.name for t in fitting if t.gpus == fewest)


def _needs(memory: MemoryEstimate) -> str:
    return (f"{memory.required_gib:.2f} GiB per GPU ({memory.vram_estimate_gib:.2f} GiB estimate + "
            f"{memory.headroom:.0%} headroom)")


def _does_not_fit(spec: JobSpec, memory: MemoryEstimate, kinds: list[GpuType]) -> str:
    """One GPU cannot hold the model: say so, and what would fit on the largest GPU the need allows."""
    need = spec.instance.need
    assert need is not None
    largest = max(kinds, key=lambda t: t.memory_gib)
    if need.gpu is None:
        head = (f"instance.need.model: needs {_needs(memory)}, more than any GPU has "
                f"({largest.gpu}: {largest.memory_gib} GiB)")
    else:
        holders = ", ".join(f"{gpu} ({size} GiB)" for gpu, size in sorted(GPU_MEMORY_GIB.items(), key=lambda g: g[1])
                            if memory.fits(size))
        head = (f"instance.need.gpu: each {need.gpu} has {largest.memory_gib} GiB and the model needs "
                f"{_needs(memory)}" + (f". choose {holders}, or leave gpu unset" if holders else ""))
    return f"{head}. what would fit on one {largest.gpu}: {_what_would_fit(spec, memory, largest)}"


def _what_would_fit(spec: JobSpec, memory: MemoryEstimate, gpu: GpuType) -> str:
    """Each way alone that makes the estimate fit ``gpu``, with its numbers."""
    need = spec.instance.need
    assert need is not None and need.model is not None
    model = need.model
    in_script = []  # the planner sizes whole copies (DDP): these are the training script's to do
    shards = fewest_gpus(memory, gpu.memory_gib)
    if shards is not None:
        in_script.append(f"the optimizer state sharded over {shards} GPUs (ZeRO-1, e.g. ZeroRedundancyOptimizer): "
                         f"{sharded(memory, shards).required_gib:.2f} GiB each, {_layout(spec, gpu, shards)}")
    kept = checkpointed(memory, model)
    if kept.fits(gpu.memory_gib):
        in_script.append(f"activation checkpointing (the activations of {checkpointed_layers(model.layers)} of "
                         f"{model.layers} layers kept): {kept.required_gib:.2f} GiB")
    batch = largest_batch(memory, model, gpu.memory_gib)
    in_spec = [] if batch is None else [
        f"model.batch_size: {batch} with {model.batch_size // batch} steps of gradient accumulation (the same "
        f"effective batch, {model.batch_size}): {with_batch(memory, model, batch).required_gib:.2f} GiB"]
    if not in_script and not in_spec:
        everything = fewest_gpus(memory, gpu.memory_gib, everything=True)
        if everything is None:
            return (f"nothing alone: a batch of {model.batch_size} has {memory.activations_bytes / GIB:.2f} GiB of "
                    "activations. combine a smaller batch, activation checkpointing and sharding (FSDP), or train "
                    "a smaller model")
        in_script.append(f"weights, gradients and optimizer state sharded over {everything} GPUs (ZeRO-3, FSDP): "
                         f"{sharded(memory, everything, everything=True).required_gib:.2f} GiB each, "
                         f"{_layout(spec, gpu, everything)}")
    tail = " (sharding and checkpointing are the script's; with them, size the GPUs with instance.need.gpu and " \
           "count, without model)" if in_script else ""
    return "; ".join([*in_spec, *in_script]) + tail


def _layout(spec: JobSpec, gpu: GpuType, gpus: int) -> str:
    """How a job gets ``gpus`` GPUs of ``gpu``: GPUs per node on its nodes, or more nodes."""
    nodes = spec.train.nnodes
    per_node = next((count for count in gpu_counts(gpu.gpu) if count * nodes >= gpus), None)
    if per_node is not None:
        return f"e.g. instance.need.count: {per_node}" + (f" on {nodes} nodes" if nodes > 1 else "")
    most = gpu_counts(gpu.gpu)[-1]
    return f"e.g. instance.need.count: {most} on train.nnodes: {math.ceil(gpus / most)}"


def _named_types(spec: JobSpec) -> list[tuple[str, str]]:
    named = [("instance.type", spec.instance.type)] if spec.instance.type else []
    named += [(f"instance.alternatives.{i}", t) for i, t in enumerate(spec.instance.alternatives)]
    return named


def _no_subnet(network: NetworkFacts | None, zone: str) -> str:
    if network is None or zone in network.subnets:
        return ""
    return f"{network.vpc_id} has no subnet in this zone (network.subnet_ids)"


def _no_hpc_cluster(cluster: HpcCluster | None, instance_type: str, zone: str) -> str:
    """Why an HCC type cannot be bought here: the cloud sells one only into an HPC cluster of its zone."""
    if not needs_hpc_cluster(instance_type) or (cluster is not None and cluster.zone == zone):
        return ""
    if cluster is None:
        return ("an HCC type is sold only into an HPC cluster: set network.hpc_cluster_id (one of this zone, made "
                "with CreateHpcCluster or in the console)")
    return f"an HCC type goes into network.hpc_cluster_id's zone, and {cluster.cluster_id} is in {cluster.zone}"


def _over_spot_quota(quotas: dict[str, ZoneQuota] | None, offer: Offering | None, charge_type: ChargeType,
                     nnodes: int) -> str:
    """Why the account's spot quota (vCPUs per zone) cannot hold the job's nodes here: no retry fixes that."""
    quota = None if quotas is None or offer is None or charge_type != ChargeType.SPOT else quotas.get(offer.zone)
    if quota is None or offer is None or offer.cpu * nnodes <= quota.remaining:
        return ""
    nodes = f" × {nnodes} nodes" if nnodes > 1 else ""
    return (f"the spot quota of {offer.zone} is {quota.total} vCPU ({quota.remaining} free) and {offer.instance_type} "
            f"needs {offer.cpu}{nodes}: ask Tencent for more spot quota by ticket, or use on-demand")


def _unusable(offer: Offering | None, spec: JobSpec, charge_type: ChargeType) -> str:
    if offer is None:
        return "not sold in this zone"
    if charge_type == ChargeType.RESERVED:
        return ""  # reserved jobs run on pool members already bought: today's stock does not matter
    if not offer.on_sale or offer.stock == StockStatus.NONE:
        return f"sold out ({offer.sold_out_reason or offer.stock})"
    if (
        charge_type == ChargeType.SPOT
        and spec.billing.spot_max_price is not None
        and offer.unit_price is not None
        and offer.unit_price > spec.billing.spot_max_price
    ):
        return f"spot price {offer.unit_price:.2f} CNY/h is above billing.spot_max_price {spec.billing.spot_max_price}"
    return ""


def default_image(images: list[PublicImage]) -> PublicImage | None:
    """Ubuntu 22.04 (GPU types get their driver at boot: _driver), else the first image that runs the agent."""
    ubuntu = [i for i in images if "UBUNTU" in i.name.upper() and "22.04" in i.name]
    choices = ubuntu or images
    return choices[0] if choices else None
