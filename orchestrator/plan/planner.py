"""make_plan(spec, facts) -> Plan: pure. Chooses instance types (a named type, or the smallest whole-GPU types
meeting a GPU need), zones in the spec's order, the charge type for the billing mode, and orders the
placements the recovery policy will walk through. Whatever cannot work is an error naming the field and the
nearest valid value; nothing here talks to the cloud.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import CvmjobError
from ..providers.tencent.compute import Offering
from ..providers.tencent.vocabulary import ChargeType, StockStatus
from ..spec.gpus import GPU_MEMORY_GIB, is_vgpu_type, types_with
from ..spec.models import JobSpec
from ..spec.suggest import did_you_mean
from .models import Placement, Plan, Rejected


class PlanError(CvmjobError, ValueError):
    """The spec cannot run on this cloud as written; one line per problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class PublicImage:
    image_id: str
    name: str


@dataclass(frozen=True)
class Facts:
    region: str
    zones: list[str]  # the region's zones, as the cloud lists them
    offerings: list[Offering]  # DescribeZoneInstanceConfigInfos rows for the charge types involved
    image: PublicImage | None  # the spec's image, resolved; None: choose a public one
    public_images: list[PublicImage] = field(default_factory=list)
    state_bucket: str = ""


def make_plan(spec: JobSpec, facts: Facts, on_demand_fallback: bool = False) -> Plan:
    """``on_demand_fallback``: the job's policy lets it continue on demand (a spot recovery policy with
    fallback_to_on_demand, a pool policy with when_busy: on-demand); then no spot capacity today is a start on
    demand, not an error."""
    problems: list[str] = []
    zones = _zones(spec, facts, problems)
    types = _instance_types(spec, facts, problems)
    if problems:
        raise PlanError(problems)
    charge = ChargeType.for_billing(spec.billing.mode)
    on_demand_price = {
        (o.zone, o.instance_type): o.unit_price for o in facts.offerings if o.charge_type == ChargeType.ON_DEMAND
    }
    candidates: list[Placement] = []
    rejected: list[Rejected] = []
    # Spot and reserved jobs may continue on demand (recovery policy, pool policy): those placements follow.
    charges = [charge] + ([ChargeType.ON_DEMAND] if charge != ChargeType.ON_DEMAND else [])
    for charge_type in charges:
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
                reason = _unusable(offer, spec, charge_type)
                if reason:
                    rejected.append(
                        Rejected(zone=zone, instance_type=instance_type, charge_type=charge_type, reason=reason)
                    )
                    continue
                assert offer is not None
                candidates.append(
                    Placement(
                        zone=zone,
                        instance_type=instance_type,
                        charge_type=charge_type,
                        price_per_hour=offer.unit_price,
                        on_demand_price_per_hour=on_demand_price.get((zone, instance_type)),
                        gpus=offer.gpu_count,
                        stock=offer.stock,
                    )
                )
    warnings = []
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
    image = facts.image or default_image(facts.public_images, candidates[0].gpus)
    hours = spec.limits.max_runtime / 3600
    nnodes = spec.train.nnodes
    primary = candidates[0]
    if image is None:
        raise PlanError(["image: no public image found in this region. set image.id"])
    if primary.gpus == 0:
        warnings.append(f"{primary.instance_type} has no GPU: training runs on CPU")
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
        warnings=warnings,
    )


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


def _instance_types(spec: JobSpec, facts: Facts, problems: list[str]) -> list[str]:
    offered = _offered_types(facts)
    wanted: list[str] = []
    if spec.instance.type is not None:
        wanted.append(spec.instance.type)
    else:
        need = spec.instance.need
        assert need is not None
        min_memory = need.min_gpu_memory_gib or 0
        fitting = [
            t.name
            for t in sorted(types_with(need.gpu), key=lambda t: (t.gpus, t.name))
            if t.gpus >= need.count and GPU_MEMORY_GIB[need.gpu] >= min_memory and t.name in offered
        ]
        if not fitting:
            problems.append(
                f"instance.need: no offered instance type has {need.count} whole {need.gpu} GPU(s)"
                + (f" with {min_memory} GiB each" if min_memory else "")
                + f" in {spec.region}. lower instance.need.count or choose another gpu"
            )
            return []
        smallest = min(t.gpus for t in types_with(need.gpu) if t.name in fitting)
        wanted.extend(n for n in fitting if next(t.gpus for t in types_with(need.gpu) if t.name == n) == smallest)
    for index, alternative in enumerate(spec.instance.alternatives):
        if alternative in wanted:
            continue
        if is_vgpu_type(alternative) and not spec.instance.allow_vgpu:
            problems.append(
                f"instance.alternatives.{index}: {alternative} is a vGPU type. remove it or set "
                "instance.allow_vgpu: true"
            )
            continue
        wanted.append(alternative)
    for field_name, name in _named_types(spec):
        if name not in offered:
            hint = did_you_mean(name, offered) or f"offered types include {', '.join(offered[:8])}"
            problems.append(f"{field_name}: {name} is not an instance type offered in {spec.region}. {hint}")
    return wanted


def _named_types(spec: JobSpec) -> list[tuple[str, str]]:
    named = [("instance.type", spec.instance.type)] if spec.instance.type else []
    named += [(f"instance.alternatives.{i}", t) for i, t in enumerate(spec.instance.alternatives)]
    return named


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


def default_image(images: list[PublicImage], gpus: float) -> PublicImage | None:
    """A GPU-driver image for GPU types, a plain Ubuntu otherwise."""
    if gpus > 0:
        gpu_images = [i for i in images if "GPU" in i.name.upper() or "CUDA" in i.name.upper()]
        if gpu_images:
            return gpu_images[0]
    ubuntu = [i for i in images if "UBUNTU" in i.name.upper() and "22.04" in i.name]
    choices = ubuntu or images
    return choices[0] if choices else None
