"""make_plan over a fixed set of offerings: no cloud, only the planner's choices."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from orchestrator.plan.models import Plan
from orchestrator.plan.planner import Facts, PlanError, PublicImage, make_plan
from orchestrator.providers.tencent.compute import HpcCluster, Offering, ZoneQuota
from orchestrator.spec import JobSpec
from orchestrator.spec.compute import GpuDriver

ZONES = ["ap-guangzhou-3", "ap-guangzhou-4"]
PRICES = {"GN7.2XLARGE32": 8.69, "GN7.2XLARGE40": 4.66, "GN7.5XLARGE80": 13.3, "GN7.10XLARGE160": 22.12,
          "GT4.4XLARGE96": 34.5}
GPUS = {"GN7.2XLARGE32": 1.0, "GN7.2XLARGE40": 0.5, "GN7.5XLARGE80": 1.0, "GN7.10XLARGE160": 2.0,
        "GT4.4XLARGE96": 1.0}
CPUS = {"GN7.2XLARGE32": 8, "GN7.2XLARGE40": 10, "GN7.5XLARGE80": 20, "GN7.10XLARGE160": 40, "GT4.4XLARGE96": 16}


def offering(zone: str, instance_type: str, charge: str, stock: str = "EnoughStock",
             price: float | None = None) -> Offering:
    price = (PRICES[instance_type] if price is None else price) * (0.2 if charge == "SPOTPAID" else 1)
    return Offering(
        zone=zone,
        instance_type=instance_type,
        charge_type=charge,
        family=instance_type.split(".", maxsplit=1)[0],
        cpu=CPUS[instance_type],
        memory_gib=32,
        gpu_count=GPUS[instance_type],
        on_sale=stock != "WithoutStock",
        stock=stock,
        unit_price=round(price, 2),
        bandwidth_gbps=float(CPUS[instance_type]),  # any figure that tells the types apart
    )


def facts(*sold_out: tuple[str, str, str], prices: dict[tuple[str, str], float] | None = None) -> Facts:
    """Every type in every zone, on demand and spot (a fifth of the price); ``prices``: (zone, type) -> on-demand
    price where it differs from PRICES."""
    rows = [
        offering(z, t, c, "WithoutStock" if (z, t, c) in sold_out else "EnoughStock", (prices or {}).get((z, t)))
        for z in ZONES
        for t in PRICES
        for c in ("POSTPAID_BY_HOUR", "SPOTPAID")
    ]
    images = [
        PublicImage("img-9qrfy1xt", "TencentOS Server 4 for x86_64"),
        PublicImage("img-487zeit5", "Ubuntu Server 22.04 LTS 64bit"),
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
    assert plan.image_id == "img-487zeit5"  # an official Ubuntu: no public image carries the GPU driver...
    assert plan.gpu_driver == GpuDriver(driver="535.161.07", cuda="12.4.0", cudnn="8.9.7")  # ...it installs


def test_the_driver_installs_on_whole_gpus_of_a_public_image_unless_the_spec_says_none() -> None:
    chosen = make_plan(spec(image={"gpu_driver": {"driver": "550.54.15", "cuda": "12.4.1", "cudnn": "9.1.0"}}),
                       facts())
    assert chosen.gpu_driver == GpuDriver(driver="550.54.15", cuda="12.4.1", cudnn="9.1.0")
    assert chosen.driver_for("GN7.2XLARGE32") == chosen.gpu_driver
    assert chosen.driver_for("S5.LARGE8") is None  # not a candidate, no GPUs: nothing to install
    assert make_plan(spec(image={"gpu_driver": "none"}), facts()).gpu_driver is None
    custom = dataclasses.replace(facts(), image=PublicImage("img-cust0001", "quickstart-2026", public=False))
    assert make_plan(spec(), custom).gpu_driver is None  # a job's snapshot keeps the driver it was made with
    vgpu = make_plan(spec(instance={"type": "GN7.2XLARGE40", "allow_vgpu": True}), facts())
    assert vgpu.gpu_driver is None  # half a T4 takes NVIDIA's GRID driver, which the auto-install is not
    assert "GN7.2XLARGE40: a vGPU type needs the GRID driver, which no public image with Python 3.10+ carries. " \
           "set image.id to an image that has it" in vgpu.warnings


def test_spot_plan_puts_on_demand_fallbacks_after_spot_and_shows_the_savings() -> None:
    plan = make_plan(spec(billing={"mode": "spot"}), facts())
    assert [p.charge_type for p in plan.candidates] == ["SPOTPAID", "SPOTPAID", "POSTPAID_BY_HOUR", "POSTPAID_BY_HOUR"]
    assert plan.estimated_cost is not None and plan.on_demand_cost is not None
    assert plan.estimated_cost < plan.on_demand_cost


def test_a_gpu_need_resolves_to_the_types_with_the_fewest_whole_gpus_never_a_vgpu() -> None:
    plan = make_plan(spec(instance={"need": {"gpu": "T4", "count": 1}, "allow_vgpu": True}), facts())
    assert {p.instance_type for p in plan.candidates} == {"GN7.2XLARGE32", "GN7.5XLARGE80"}
    plan = make_plan(spec(instance={"need": {"gpu": "T4", "count": 2}}), facts())
    assert {p.instance_type for p in plan.candidates} == {"GN7.10XLARGE160"}


def placements(plan: Plan) -> list[tuple[str, str, float | None]]:
    return [(p.instance_type, p.zone, p.price_per_hour) for p in plan.candidates]


def test_a_need_tries_the_cheapest_placement_first_not_the_first_name() -> None:
    # GN7.5XLARGE80 sorts after GN7.2XLARGE32 by name; in ap-guangzhou-4 it is the cheapest T4 today.
    cheap = facts(prices={("ap-guangzhou-4", "GN7.5XLARGE80"): 8.0, ("ap-guangzhou-3", "GN7.2XLARGE32"): 9.0})
    plan = make_plan(spec(instance={"need": {"gpu": "T4"}}), cheap)
    assert placements(plan) == [
        ("GN7.5XLARGE80", "ap-guangzhou-4", 8.0),
        ("GN7.2XLARGE32", "ap-guangzhou-4", 8.69),
        ("GN7.2XLARGE32", "ap-guangzhou-3", 9.0),
        ("GN7.5XLARGE80", "ap-guangzhou-3", 13.3),
    ]
    assert plan.primary.gpu_memory_gib == 16 and plan.primary.cpus == 20


def test_equal_prices_follow_the_zones_order_then_the_type_name() -> None:
    same = facts(prices={(z, "GN7.5XLARGE80"): 8.69 for z in ZONES})
    plan = make_plan(spec(instance={"need": {"gpu": "T4"}}, zones=["ap-guangzhou-4", "ap-guangzhou-3"]), same)
    assert placements(plan) == [
        ("GN7.2XLARGE32", "ap-guangzhou-4", 8.69),
        ("GN7.5XLARGE80", "ap-guangzhou-4", 8.69),
        ("GN7.2XLARGE32", "ap-guangzhou-3", 8.69),
        ("GN7.5XLARGE80", "ap-guangzhou-3", 8.69),
    ]


def test_spot_placements_are_ordered_by_the_spot_price_then_the_on_demand_fallbacks() -> None:
    cheap = facts(prices={("ap-guangzhou-4", "GN7.2XLARGE32"): 5.0})
    plan = make_plan(spec(instance={"need": {"gpu": "T4"}}, billing={"mode": "spot"}), cheap)
    assert [(p.instance_type, p.zone, p.charge_type) for p in plan.candidates[:2]] == [
        ("GN7.2XLARGE32", "ap-guangzhou-4", "SPOTPAID"),
        ("GN7.2XLARGE32", "ap-guangzhou-3", "SPOTPAID"),
    ]
    on_demand = [p.price_per_hour for p in plan.candidates if p.charge_type == "POSTPAID_BY_HOUR"]
    assert on_demand == sorted(on_demand) and len(on_demand) == 4


def test_the_types_the_spec_names_follow_in_its_order_whatever_they_cost() -> None:
    plan = make_plan(spec(instance={"need": {"gpu": "T4"}, "alternatives": ["GT4.4XLARGE96", "GN7.2XLARGE40"],
                                    "allow_vgpu": True}), facts())
    assert [p.instance_type for p in plan.candidates] == [
        "GN7.2XLARGE32", "GN7.2XLARGE32", "GN7.5XLARGE80", "GN7.5XLARGE80",
        "GT4.4XLARGE96", "GT4.4XLARGE96", "GN7.2XLARGE40", "GN7.2XLARGE40",
    ]


BERT = {"params": 110_000_000, "batch_size": 32, "seq_len": 512, "hidden_dim": 768, "layers": 12}
BIG_BATCH = {**BERT, "batch_size": 768}  # 15.14 GiB, 17.41 GiB with headroom: more than a T4's 16
# 16 B x 2 B parameters + 6 GiB of activations: 41.17 GiB with headroom, more than an A100's 40 GiB.
LARGE = {"params": 2_000_000_000, "batch_size": 16, "seq_len": 2048, "hidden_dim": 2048, "layers": 24}


def model_need(model: dict[str, Any], **need: Any) -> dict[str, Any]:
    return {"need": {"model": model, **need}}


def test_a_model_takes_the_cheapest_gpu_that_holds_it() -> None:
    plan = make_plan(spec(instance=model_need(BERT)), facts())  # 2.53 GiB: any GPU
    assert placements(plan)[0] == ("GN7.2XLARGE32", "ap-guangzhou-3", 8.69)
    assert plan.gpu_memory is not None and round(plan.gpu_memory.required_gib, 2) == 2.53
    # 13.5 GiB of activations: 15.14 GiB estimate, 17.41 GiB with headroom, more than a T4: the A100.
    plan = make_plan(spec(instance=model_need(BIG_BATCH)), facts())
    assert {p.instance_type for p in plan.candidates} == {"GT4.4XLARGE96"}
    assert plan.primary.gpu_memory_gib == 40


def test_a_model_takes_a_vgpu_slice_only_when_allowed() -> None:
    plan = make_plan(spec(instance=model_need(BERT)), facts())
    assert not any(p.instance_type == "GN7.2XLARGE40" for p in plan.candidates)
    plan = make_plan(spec(instance={**model_need(BERT), "allow_vgpu": True}), facts())
    assert placements(plan)[0] == ("GN7.2XLARGE40", "ap-guangzhou-3", 4.66)
    assert plan.primary.gpu_memory_gib == 8  # half a T4
    # 8.35 GiB with headroom: more than the half T4's 8 GiB, so the whole T4 even with vGPUs allowed.
    plan = make_plan(spec(instance={**model_need({**BERT, "batch_size": 320}), "allow_vgpu": True}), facts())
    assert plan.primary.instance_type == "GN7.2XLARGE32"
    # A slice is one GPU: never for two.
    plan = make_plan(spec(instance={**model_need(BERT, count=2), "allow_vgpu": True}), facts())
    assert {p.instance_type for p in plan.candidates} == {"GN7.10XLARGE160"}


def test_a_named_gpu_that_cannot_hold_the_model_is_one_line_naming_those_that_can() -> None:
    with pytest.raises(PlanError) as err:
        make_plan(spec(instance=model_need(BIG_BATCH, gpu="T4")), facts())
    (problem,) = err.value.problems
    assert problem == (
        "instance.need.gpu: each T4 has 16 GiB and the model needs 17.41 GiB per GPU (15.14 GiB estimate + 15% "
        "headroom). choose A10 (24 GiB), V100 (32 GiB), A100 (40 GiB), or leave gpu unset. what would fit on one "
        "T4: model.batch_size: 384 with 2 steps of gradient accumulation (the same effective batch, 768): 9.65 GiB; "
        # 0.82 GiB of weights and gradients and 13.5 GiB of activations leave no room for any share of Adam's state
        "activation checkpointing (the activations of 7 of 12 layers kept): 10.94 GiB "
        "(sharding and checkpointing are the script's; with them, size the GPUs with instance.need.gpu and count, "
        "without model)"
    )


def test_nothing_fits_one_gpu_names_what_would_with_numbers() -> None:
    with pytest.raises(PlanError) as err:
        make_plan(spec(instance=model_need(LARGE)), facts())
    (problem,) = err.value.problems
    assert problem == (
        "instance.need.model: needs 41.17 GiB per GPU (35.80 GiB estimate + 15% headroom), more than any GPU has "
        "(A100: 40 GiB). what would fit on one A100: "
        "model.batch_size: 8 with 2 steps of gradient accumulation (the same effective batch, 16): 37.72 GiB; "
        "the optimizer state sharded over 2 GPUs (ZeRO-1, e.g. ZeroRedundancyOptimizer): 32.60 GiB each, "
        "e.g. instance.need.count: 2; "
        "activation checkpointing (the activations of 10 of 24 layers kept): 37.15 GiB "
        "(sharding and checkpointing are the script's; with them, size the GPUs with instance.need.gpu and count, "
        "without model)"
    )


@pytest.mark.parametrize(("nnodes", "layout"), [
    (1, "e.g. instance.need.count: 8 on train.nnodes: 2"),  # 9 GPUs: more than one node has
    (2, "e.g. instance.need.count: 8 on 2 nodes"),
    (3, "e.g. instance.need.count: 4 on 3 nodes"),
])
def test_when_no_one_remedy_fits_it_shards_everything_over_enough_gpus(nnodes: int, layout: str) -> None:
    # 20 B parameters: 320 GB of weights, gradients and Adam state (298.02 GiB); 1.5 GiB of activations at batch 1.
    huge = {"params": 20_000_000_000, "batch_size": 1, "seq_len": 2048, "hidden_dim": 4096, "layers": 48}
    with pytest.raises(PlanError) as err:
        make_plan(spec(instance=model_need(huge), train={"command": "python train.py", "nnodes": nnodes}), facts())
    (problem,) = err.value.problems
    _, advice = problem.split("what would fit on one A100: ")
    # (320 GB / 9 + 1.5 GiB) x 1.15 = 39.81 GiB; 8 shares would be 44.57 GiB.
    assert advice.startswith("weights, gradients and optimizer state sharded over 9 GPUs (ZeRO-3, FSDP): 39.81 GiB "
                             f"each, {layout} (sharding")


def test_when_even_sharding_everything_cannot_fit_it_says_to_combine() -> None:
    # 8 x 32768 x 4096 x 48 x 4 B = 192 GiB of activations: more than an A100 before any parameter.
    long = {"params": 1_000_000_000, "batch_size": 8, "seq_len": 32768, "hidden_dim": 4096, "layers": 48}
    with pytest.raises(PlanError) as err:
        make_plan(spec(instance=model_need(long)), facts())
    (problem,) = err.value.problems
    assert problem.endswith("what would fit on one A100: nothing alone: a batch of 8 has 192.00 GiB of activations. "
                            "combine a smaller batch, activation checkpointing and sharding (FSDP), or train a "
                            "smaller model")


def test_an_alternative_that_cannot_hold_the_model_is_an_error() -> None:
    instance = {**model_need(BIG_BATCH), "alternatives": ["GN7.5XLARGE80"]}
    with pytest.raises(PlanError) as err:
        make_plan(spec(instance=instance), facts())
    assert err.value.problems == ["instance.alternatives.0: GN7.5XLARGE80 has 16 GiB per GPU and the model needs "
                                  "17.41 GiB per GPU (15.14 GiB estimate + 15% headroom). remove it or name a type "
                                  "with more memory per GPU"]


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


def test_each_placement_carries_its_types_network_bandwidth() -> None:
    plan = make_plan(spec(instance={"type": "GT4.4XLARGE96"}), facts())
    assert {p.bandwidth_gbps for p in plan.candidates} == {16.0}


def test_placements_to_avoid_are_rejected_with_their_reason_and_the_next_one_leads() -> None:
    why = "failed 2 times in this sweep (brakes.per_placement_failures)"
    plan = make_plan(spec(billing={"mode": "spot"}), facts(), avoid={("ap-guangzhou-3", "GN7.2XLARGE32"): why})
    assert all(p.zone != "ap-guangzhou-3" for p in plan.candidates)  # spot and its on-demand fallback alike
    assert plan.primary.zone == "ap-guangzhou-4" and plan.estimated_cost is not None
    assert {(r.zone, r.reason) for r in plan.rejected if r.zone == "ap-guangzhou-3"} == {("ap-guangzhou-3", why)}
    with pytest.raises(PlanError, match=r"brakes\.per_placement_failures"):
        make_plan(spec(), facts(), avoid={("ap-guangzhou-3", "GN7.2XLARGE32"): why,
                                          ("ap-guangzhou-4", "GN7.2XLARGE32"): why})


# -- what the account allows: its spot quota, HPC clusters -------------------------------------------------------
def test_spot_placements_the_quota_cannot_hold_are_dropped_in_one_line() -> None:
    quotas = {"ap-guangzhou-3": ZoneQuota("ap-guangzhou-3", 50, 44, 6),
              "ap-guangzhou-4": ZoneQuota("ap-guangzhou-4", 50, 0, 50)}
    plan = make_plan(spec(billing={"mode": "spot"}, train={"command": "python train.py", "nnodes": 2}),
                     dataclasses.replace(facts(), spot_quotas=quotas))
    assert [(p.zone, p.charge_type) for p in plan.candidates] == [
        ("ap-guangzhou-4", "SPOTPAID"), ("ap-guangzhou-3", "POSTPAID_BY_HOUR"), ("ap-guangzhou-4", "POSTPAID_BY_HOUR")]
    [dropped] = [r for r in plan.rejected if r.charge_type == "SPOTPAID"]
    assert (dropped.zone, dropped.reason) == ("ap-guangzhou-3", (
        "the spot quota of ap-guangzhou-3 is 50 vCPU (6 free) and GN7.2XLARGE32 needs 8 × 2 nodes: ask Tencent for "
        "more spot quota by ticket, or use on-demand"))
    assert [w for w in plan.warnings if w.startswith("spot quota")] == [
        "spot quota: dropped GN7.2XLARGE32 in ap-guangzhou-3: the account's spot vCPUs in those zones cannot hold "
        "the job's nodes. ask Tencent for more spot quota by ticket, or use on-demand"]
    on_demand = make_plan(spec(), dataclasses.replace(facts(), spot_quotas=quotas))
    assert not on_demand.rejected  # the spot quota binds spot alone


def test_a_spot_plan_the_quota_rules_out_everywhere_is_refused_naming_the_quota() -> None:
    full = {z: ZoneQuota(z, 50, 50, 0) for z in ZONES}
    with pytest.raises(PlanError) as refused:
        make_plan(spec(billing={"mode": "spot"}), dataclasses.replace(facts(), spot_quotas=full))
    assert "the spot quota of ap-guangzhou-3 is 50 vCPU (0 free)" in str(refused.value)


def eight_a100s(zone: str, instance_type: str, cpu: int, price: float) -> Offering:
    return Offering(zone=zone, instance_type=instance_type, charge_type="POSTPAID_BY_HOUR",
                    family=instance_type.split(".", maxsplit=1)[0], cpu=cpu, memory_gib=1024, gpu_count=8.0,
                    on_sale=True, stock="EnoughStock", unit_price=price)


def hcc_facts(cluster: HpcCluster | None = None) -> Facts:
    rows = [*facts().offerings, *(eight_a100s(z, "HCCPNV4h.48XLARGE1024", 192, 298.0) for z in ZONES),
            *(eight_a100s(z, "GT4.41XLARGE948", 164, 276.0) for z in ZONES)]
    return dataclasses.replace(facts(), offerings=rows, hpc_cluster=cluster)


def test_an_hcc_type_without_an_hpc_cluster_is_never_planned() -> None:
    need = {"need": {"gpu": "A100", "count": 8}}
    plan = make_plan(spec(instance=need), hcc_facts())
    assert {p.instance_type for p in plan.candidates} == {"GT4.41XLARGE948"}
    assert {r.reason for r in plan.rejected if r.instance_type.startswith("HCC")} == {
        "an HCC type is sold only into an HPC cluster: set network.hpc_cluster_id (one of this zone, made with "
        "CreateHpcCluster or in the console)"}
    with pytest.raises(PlanError, match="sold only into an HPC cluster"):
        make_plan(spec(instance={"type": "HCCPNV4h.48XLARGE1024"}), hcc_facts())


def test_an_hcc_type_goes_into_the_hpc_cluster_of_its_zone_and_only_it_names_the_cluster() -> None:
    cluster = HpcCluster("hpc-n1i6ehfo", "ap-guangzhou-4", "cvmjob", 50)
    plan = make_plan(spec(instance={"type": "HCCPNV4h.48XLARGE1024", "alternatives": ["GT4.41XLARGE948"]},
                          network={"hpc_cluster_id": "hpc-n1i6ehfo"}), hcc_facts(cluster))
    assert [(p.instance_type, p.zone) for p in plan.candidates] == [
        ("HCCPNV4h.48XLARGE1024", "ap-guangzhou-4"), ("GT4.41XLARGE948", "ap-guangzhou-3"),
        ("GT4.41XLARGE948", "ap-guangzhou-4")]
    assert plan.network is None  # facts without a network: the launch's HpcClusterId is checked in staging


def test_a_container_job_says_what_runs_its_container_and_what_its_gpus_need() -> None:
    container = {"image": "ccr.ccs.tencentyun.com/t/x:1.0"}
    [note] = [w for w in make_plan(spec(container=container), facts()).warnings if w.startswith("container:")]
    assert "ccr.ccs.tencentyun.com/t/x:1.0" in note and "docker.io installed from the image's package mirror" in note
    assert "NVIDIA's container toolkit" in note  # GN7: its T4 reaches the container only through the toolkit
    assert not any(w.startswith("container:") for w in make_plan(spec(), facts()).warnings)
