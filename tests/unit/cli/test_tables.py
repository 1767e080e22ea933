"""Every table the CLI prints reads at 80 columns (a terminal's default, and a pipe's): no line is wider, and no id,
instance type or zone is cut, folded or ellipsized to get there; the cloud's wire words are shown in people's."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest
from rich.console import Console
from rich.table import Table

from orchestrator.bench.results import BenchResult
from orchestrator.billing.costs import CostGroup, JobCost
from orchestrator.billing.pool import Member
from orchestrator.cli import render
from orchestrator.cli.bench import bench_tables
from orchestrator.cli.controller import controllers_table
from orchestrator.cli.cost import groups_table, jobs_table
from orchestrator.cli.pool import pool_table
from orchestrator.cli.sweep import sweeps_table, trials_table
from orchestrator.plan.models import Plan
from orchestrator.providers.tencent.vocabulary import ChargeType, InstanceState
from orchestrator.state.machine import JobState, NodeState
from orchestrator.state.store import Event, LeaseRecord, NodeRecord
from orchestrator.sweep.models import Best, SweepView, TrialView
from tests.records import job_record

WIDTH = 80
LONG_TYPE = "HCCPNV4h.48XLARGE1024"  # the longest type name of the catalog's families
ZONE = "ap-guangzhou-3"
WIRE = re.compile(r"POSTPAID_BY_HOUR|SPOTPAID|PREPAID|EnoughStock|NormalStock|UnderStock|WithoutStock|SHUTDOWN")


def shown(*tables: Table) -> str:
    out = Console(width=WIDTH, record=True, soft_wrap=True, force_terminal=False)  # as render.console, piped
    for table in tables:
        out.print(table)
    titles = {str(table.title) for table in tables if table.title}
    # A title is a line like any other (soft-wrapped: a terminal folds it, a log keeps it whole).
    return "\n".join(line for line in out.export_text().splitlines() if line.strip() not in titles)


def check(text: str, *whole: str) -> None:
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= WIDTH, text
    assert "…" not in text, text
    for word in whole:  # on one line, not cut
        assert any(re.search(rf"(?<![\w.-]){re.escape(word)}(?![\w.-])", line) for line in lines), (word, text)
    assert not WIRE.search(text), text


def test_jobs_table() -> None:
    jobs = [job_record(f"job-{i:08x}", "a-job-name-as-long-as-a-job-name-may-be", state, attempt=12,
                       created_at=1.76e9, cost_cny=12345.67)
            for i, state in enumerate([JobState.FAILED_NO_CAPACITY, JobState.SUCCEEDED, JobState.TEARING_DOWN])]
    check(shown(render.jobs_table(jobs)), *(j.job_id for j in jobs), "FAILED_NO_CAPACITY", "¥12,345.67")


def test_a_jobs_phases_and_instances() -> None:
    events = [Event(i, "job-1a2b3c4d", 1.76e9 + 60 * i, "transition", None, state, "why") for i, state in
              enumerate(["PENDING", "STAGING", "LAUNCHING", "BOOTING", "RUNNING", "RECOVERING", "TEARING_DOWN"])]
    nodes = [NodeRecord("job-1a2b3c4d", attempt, node, "t", ZONE, kind, charge, 2.0, f"ins-{attempt:02}{node:02}b3c4",
                        NodeState.LOST, end_reason="reclaimed: the spot instance was taken back (notice at 12:00:03)",
                        cost_cny=1234.5)
             for attempt, kind, charge in [(1, "GN7.2XLARGE32", ChargeType.SPOT), (12, LONG_TYPE, ChargeType.ON_DEMAND)]
             for node in (0, 15)]
    text = shown(render.phases_table(events), render.instances_table(nodes))
    check(text, *(n.instance_id or "" for n in nodes), "GN7.2XLARGE32", LONG_TYPE, ZONE, "spot", "on-demand",
          "TEARING_DOWN", "¥1,234.50")


def test_placements() -> None:
    candidates = [{"zone": ZONE, "instance_type": kind, "charge_type": charge, "price_per_hour": 288.56,
                   "on_demand_price_per_hour": 321.09, "gpus": gpus, "gpu_memory_gib": memory, "stock": stock}
                  for kind, charge, gpus, memory, stock in [
                      ("GN7.2XLARGE32", ChargeType.SPOT, 1, 16, "EnoughStock"),
                      ("GN7vw.2XLARGE32", ChargeType.ON_DEMAND, 0.25, 4, "UnderStock"),
                      (LONG_TYPE, ChargeType.RESERVED, 8, 80, "WithoutStock"),
                      ("GN10Xp.20XLARGE320", ChargeType.ON_DEMAND, 8, 32, "SomeNewCategory")]]
    plan = Plan.model_validate({"region": "ap-guangzhou", "image_id": "img-1", "candidates": candidates})
    text = shown(render.placements_table(plan))
    check(text, "GN7.2XLARGE32", "GN7vw.2XLARGE32", LONG_TYPE, ZONE, "¥288.56", "¥321.09", "0.25×4GiB",
          "8×80GiB", "spot", "reserved")
    assert [w for w in ("plenty", "low", "none", "SomeNewCategory") if w not in text] == []


def test_pool() -> None:
    paid = datetime(2027, 1, 5, tzinfo=timezone.utc)
    members = [Member(f"ins-{i}a2b3c4d", ZONE, kind, state, job, paid) for i, (kind, state, job) in enumerate([
        ("GN7.2XLARGE32", InstanceState.RUNNING, "job-1a2b3c4d"), (LONG_TYPE, InstanceState.SHUTDOWN, None),
        (LONG_TYPE, InstanceState.LAUNCH_FAILED, "job-ffffffff")])]
    text = shown(pool_table(members))
    check(text, *(m.instance_id for m in members), "job-1a2b3c4d", "job-ffffffff", LONG_TYPE, ZONE, "2027-01-05",
          "running")
    assert "RUNNING" not in text and "launch" in text and "recycle" in text


def test_sweep_tables() -> None:
    params = {"lr": 0.000123456, "hidden": 256, "optimizer": "adamw", "warmup_steps": 1000, "dropout": 0.1}
    trials = [TrialView(number=n, state=state, value=0.123456789, params=params, cost=1234.5, attempts=3,
                        job_id=f"job-{n:08x}") for n, state in enumerate(["COMPLETE", "PRUNED", "RUNNING", "FAIL"])]
    view = SweepView(study="a-study-named-as-long-as-a-study-may-be", directions=["minimize"], metrics=["val_loss"],
                     state="stopped", trials=trials, best=Best(number=0, value=0.12, params=params), cost=4938.0,
                     max_cost=5000.0, stopped_reason="its budget (max_cost) is spent")
    check(shown(trials_table(view), sweeps_table([view, view])), *(t.job_id or "" for t in trials), view.study,
          "COMPLETE", "4938.00")


@pytest.mark.parametrize("kind", ["GN7.2XLARGE32", LONG_TYPE])
def test_bench(kind: str) -> None:
    rows = [BenchResult(job_id=f"job-{i}1a2b3c4"[:12], time=1.76e9, target="tencent", type=kind, region="ap-guangzhou",
                        zone=ZONE, billing=billing, device=device, gpus=8, precision="bf16", batch_size=256,
                        image_size=224, images_per_s_1=1234.5, images_per_s_all=19876.5, scaling_efficiency=0.97,
                        gpu_utilisation=98.0, cny_per_hour=1234.56, cny_per_million_images=12.34, nvme_read_mb_s=6543.0,
                        cos_to_nvme_mb_s=1234.0)
            for i, (billing, device) in enumerate([("on-demand", "gpu"), ("spot", "cpu")])]
    text = shown(*bench_tables(rows, "bench results, cheapest per million images first"))
    check(text, *(r.job_id for r in rows), kind, "19876.5", "1234.56", "6543", "on-demand", "(CPU)")


def test_cost_tables() -> None:
    costs = [JobCost(f"job-{i:08x}", "a-job-name", JobState.SUCCEEDED, 1.76e9, types, billing, 1234.56, source,
                     600.0, 123.45)
             for i, (types, billing, source) in enumerate([
                 (("GN7.2XLARGE32", LONG_TYPE), ("spot", "on-demand"), "bill, estimate"),
                 (("GN7.2XLARGE32",), ("on-demand",), "bill (source not recorded)")])]
    groups = [CostGroup("team=a-team-with-a-long-name", 12, 12345.67, 1234.56, 3)]
    check(shown(jobs_table(costs), groups_table(groups, "tag")), *(c.job_id for c in costs), "GN7.2XLARGE32",
          LONG_TYPE, "¥1,234.56", "¥12,345.67", "(10%)")


def test_controllers() -> None:
    owner = "a-user@a-build-machine.example.com/0123456789abcdef0123456789abcdef/123456/0a1b2c3d"
    held = {owner: [LeaseRecord("job-1a2b3c4d", "a-job-name", JobState.TEARING_DOWN, owner, 1.76e9 + 75)],
            "idle@host/identity/1/nonce": []}
    text = shown(controllers_table(held, 1.76e9))
    check(text, "job-1a2b3c4d", "TEARING_DOWN", "75 s")
    assert owner in "".join(line.split()[0] for line in text.splitlines()[2:6])  # folded, every character kept


def test_a_usual_plan_has_a_line_a_placement() -> None:
    candidates = [{"zone": f"ap-guangzhou-{zone}", "instance_type": "GN7.5XLARGE80", "charge_type": charge,
                   "price_per_hour": 2.21, "on_demand_price_per_hour": 11.06, "gpus": 1, "gpu_memory_gib": 16,
                   "stock": "NormalStock"} for charge in (ChargeType.SPOT, ChargeType.ON_DEMAND) for zone in (3, 4)]
    plan = Plan.model_validate({"region": "ap-guangzhou", "image_id": "img-1", "candidates": candidates})
    rows = shown(render.placements_table(plan)).splitlines()[2:]
    assert len(rows) == 4 and all(re.match(r"GN7\.5XLARGE80 ap-guangzhou-[34] +(spot|on-demand) ", r) for r in rows)
