"""The bill shown in the summary and in `status --output json`: per attempt, total, and against on demand; the
GPU sizing and DataLoader advice in `plan` and `plan --output json`."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from orchestrator.api import PlanReport
from orchestrator.cli import render
from orchestrator.cli.render import accounting
from orchestrator.plan.planner import make_plan
from orchestrator.plan.settings import Settings
from orchestrator.state.machine import NodeState
from orchestrator.state.store import NodeRecord
from orchestrator.target import Target
from tests.unit.plan.test_planner import BERT, facts, spec

NODE = NodeRecord(
    job_id="job-1",
    attempt=1,
    node=0,
    client_token="t",
    zone="ap-guangzhou-3",
    instance_type="GN7.2XLARGE32",
    charge_type="SPOTPAID",
    price_per_hour=2.0,
    instance_id="ins-1",
    state=NodeState.GONE,
    running_at=1000.0,
    ended_at=1000.0 + 1800,
    cost_cny=1.0,
    on_demand_price_per_hour=10.0,
)


def test_spot_attempts_are_billed_each_and_compared_with_on_demand_for_their_running_time() -> None:
    second = replace(NODE, attempt=2, instance_id="ins-2", running_at=5000.0, ended_at=5900.0, cost_cny=0.5)
    bill = accounting([NODE, second])
    assert bill["per_attempt"] == {1: 1.0, 2: 0.5}
    assert bill["total_cny"] == 1.5
    assert bill["on_demand_cny"] == pytest.approx(7.5)  # 1800 s + 900 s at 10 CNY/h
    assert bill["saved_cny"] == pytest.approx(6.0)


def test_an_on_demand_job_saves_nothing_whatever_the_controller_saw_of_its_running_time() -> None:
    # The controller saw 1810 s (5.03 CNY) between RUNNING and gone; the cloud billed 1807 s.
    on_demand = replace(NODE, charge_type="POSTPAID_BY_HOUR", price_per_hour=10.0, ended_at=2810.0, cost_cny=5.02)
    bill = accounting([on_demand])
    assert bill["total_cny"] == bill["on_demand_cny"] == 5.02
    assert bill["saved_cny"] == 0


def test_a_pool_node_is_compared_by_its_running_time() -> None:
    pool = replace(NODE, charge_type="PREPAID", price_per_hour=0.0, cost_cny=0.0)
    bill = accounting([pool])
    assert bill["total_cny"] == 0 and bill["on_demand_cny"] == 5.0 and bill["saved_cny"] == 5.0


def test_a_node_without_a_bill_yet_counts_nothing() -> None:
    running = replace(NODE, cost_cny=None, ended_at=None)
    assert accounting([running]) == {"per_attempt": {1: 0.0}, "total_cny": 0.0, "on_demand_cny": 0.0, "saved_cny": 0.0}



def report(**fields: Any) -> PlanReport:
    job = spec(**fields)
    target = Target("emulator", "ap-guangzhou", "1250000000", endpoint="127.0.0.1:9000")
    return PlanReport(job, Path("job.yaml"), target, make_plan(job, facts()), Settings())


def test_plan_json_carries_the_estimate_and_the_chosen_type_with_its_memory_and_workers() -> None:
    shown = render.plan_json(report(instance={"need": {"model": BERT}}))
    assert shown["sizing"] == {
        "instance_type": "GN7.2XLARGE32",
        "gpu_memory_gib": 16,
        "vram_estimate_gib": 2.202,  # 2,363,979,776 B, before headroom
        "headroom": 0.15,
        "required_gib": 2.532,
        "vcpus": 8,
        "processes": 1,
        "num_workers": 5,  # floor(2/3 x 8 / 1)
    }
    assert shown["plan"]["gpu_memory"]["activations_bytes"] == 603_979_776
    assert shown["plan"]["candidates"][0]["gpu_memory_gib"] == 16


def test_plan_json_without_a_model_still_advises_num_workers() -> None:
    shown = render.plan_json(report(instance={"type": "GN7.10XLARGE160"},
                                    train={"command": "python train.py", "nproc_per_node": 4}))
    assert shown["sizing"]["vram_estimate_gib"] is None and shown["sizing"]["gpu_memory_gib"] == 16
    assert (shown["sizing"]["vcpus"], shown["sizing"]["processes"], shown["sizing"]["num_workers"]) == (40, 4, 6)


def test_the_plan_shows_the_arithmetic() -> None:
    with render.console.capture() as captured:
        render.show_plan(report(instance={"need": {"model": {**BERT, "precision": "amp"}}}))
    lines = [line.strip() for line in captured.get().splitlines()]
    assert "GPU memory from instance.need.model (GiB = 2^30 bytes):" in lines
    assert "weights           110,000,000 × 6 B = 0.61 GiB" in lines
    assert "optimizer (adam)  110,000,000 × 8 B = 0.82 GiB" in lines
    assert "activations       32 × 512 × 768 × 12 × 2 B = 0.28 GiB" in lines
    assert "estimate 2.13 GiB + 15% headroom = 2.44 GiB per GPU; GN7.2XLARGE32 has 16 GiB per GPU" in lines
    assert "DataLoader num_workers: 5 per process (⅔ of GN7.2XLARGE32's 8 vCPUs / 1 process(es) per node)" in lines
