"""make_plan over a fixed set of offerings: no cloud, only the planner's choices."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.plan.planner import Facts, PlanError, PublicImage, make_plan
from orchestrator.providers.tencent.compute import Offering
from orchestrator.spec import JobSpec

ZONES = ["ap-guangzhou-3", "ap-guangzhou-4"]
PRICES = {"GN7.2XLARGE32": 8.69, "GN7.2XLARGE40": 4.66, "GN7.10XLARGE160": 22.12, "GT4.4XLARGE96": 34.5}
GPUS = {"GN7.2XLARGE32": 1.0, "GN7.2XLARGE40": 0.5, "GN7.10XLARGE160": 2.0, "GT4.4XLARGE96": 1.0}


def offering(zone: str, instance_type: str, charge: str, stock: str = "EnoughStock") -> Offering:
    price = PRICES[instance_type] * (0.2 if charge == "SPOTPAID" else 1)
    return Offering(
        zone=zone,
        instance_type=instance_type,
        charge_type=charge,
        family=instance_type.split(".", maxsplit=1)[0],
        cpu=8,
        memory_gib=32,
        gpu_count=GPUS[instance_type],
        on_sale=stock != "WithoutStock",
        stock=stock,
        unit_price=round(price, 2),
    )


def facts(*sold_out: tuple[str, str, str]) -> Facts:
    rows = [
        offering(z, t, c, "WithoutStock" if (z, t, c) in sold_out else "EnoughStock")
        for z in ZONES
        for t in PRICES
        for c in ("POSTPAID_BY_HOUR", "SPOTPAID")
    ]
    images = [
        PublicImage("img-487zeit5", "Ubuntu Server 22.04 LTS 64bit"),
        PublicImage("img-gpu5352x", "Ubuntu 22.04 GPU Driver 535 CUDA 12.2"),
    ]
    return Facts(
        region="ap-guangzhou",
        zones=ZONES,
        offerings=rows,
        image=None,
        public_images=images,
        state_bucket="cvmjob-1250000000",
    )


def spec(**fields: Any) -> JobSpec:
    data: dict[str, Any] = {
        "name": "demo",
        "region": "ap-guangzhou",
        "instance": {"type": "GN7.2XLARGE32"},
        "train": {"command": "python train.py"},
        "limits": {"max_runtime": "2h"},
    }
    data.update(fields)
    return JobSpec.model_validate(data)


def test_on_demand_plan_tries_the_zones_in_order_and_prices_the_runtime() -> None:
    plan = make_plan(spec(), facts())
    assert [(p.zone, p.charge_type) for p in plan.candidates] == [
        ("ap-guangzhou-3", "POSTPAID_BY_HOUR"),
        ("ap-guangzhou-4", "POSTPAID_BY_HOUR"),
    ]
    assert plan.estimated_cost == round(8.69 * 2, 2)
    assert plan.image_id == "img-gpu5352x"  # a GPU type boots the GPU-driver image


def test_spot_plan_puts_on_demand_fallbacks_after_spot_and_shows_the_savings() -> None:
    plan = make_plan(spec(billing={"mode": "spot"}), facts())
    assert [p.charge_type for p in plan.candidates] == ["SPOTPAID", "SPOTPAID", "POSTPAID_BY_HOUR", "POSTPAID_BY_HOUR"]
    assert plan.estimated_cost is not None and plan.on_demand_cost is not None
    assert plan.estimated_cost < plan.on_demand_cost


def test_a_gpu_need_resolves_to_the_smallest_whole_gpu_type_never_a_vgpu() -> None:
    plan = make_plan(spec(instance={"need": {"gpu": "T4", "count": 1}}), facts())
    assert {p.instance_type for p in plan.candidates} == {"GN7.2XLARGE32"}
    plan = make_plan(spec(instance={"need": {"gpu": "T4", "count": 2}}), facts())
    assert {p.instance_type for p in plan.candidates} == {"GN7.10XLARGE160"}


def test_unknown_type_and_zone_name_the_field_and_the_nearest_value() -> None:
    with pytest.raises(PlanError) as err:
        make_plan(spec(instance={"type": "GN7.2XLARGE23"}, zones=["ap-guangzhou-9"]), facts())
    problems = err.value.problems
    assert any(p.startswith("instance.type: GN7.2XLARGE23") and "GN7.2XLARGE32" in p for p in problems)
    assert any(p.startswith("zones.0: ap-guangzhou-9") for p in problems)


def test_sold_out_everywhere_is_an_error_listing_what_was_looked_at() -> None:
    gone = [(z, "GN7.2XLARGE32", "SPOTPAID") for z in ZONES]
    with pytest.raises(PlanError) as err:
        make_plan(spec(billing={"mode": "spot"}), facts(*gone))
    (problem,) = err.value.problems
    assert "no spot capacity" in problem and "ap-guangzhou-3" in problem and "sold out" in problem


def test_spot_max_price_filters_placements() -> None:
    with pytest.raises(PlanError) as err:
        make_plan(spec(billing={"mode": "spot", "spot_max_price": 0.5}), facts())
    assert "above billing.spot_max_price" in err.value.problems[0]


def test_no_spot_capacity_today_starts_on_demand_when_the_policy_falls_back() -> None:
    gone = [(z, "GN7.2XLARGE32", "SPOTPAID") for z in ZONES]
    plan = make_plan(spec(billing={"mode": "spot"}), facts(*gone), on_demand_fallback=True)
    assert [p.charge_type for p in plan.candidates] == ["POSTPAID_BY_HOUR", "POSTPAID_BY_HOUR"]
    assert plan.warnings and "starts on demand" in plan.warnings[0]
