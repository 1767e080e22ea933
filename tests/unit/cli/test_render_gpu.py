"""What `run`, `status` and `logs -f` say of GPUs that wait on their data: once a node, with the DataLoader advice
in the node's numbers and where the job's data is; and the mean utilisation of each node in the summary
(issue 14, item 3)."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from orchestrator.api import AgentView
from orchestrator.cli import render
from orchestrator.contract import GpuUse, Phase, Status
from orchestrator.lifecycle.observation import NodeSeen, Observation
from orchestrator.plan.planner import make_plan
from orchestrator.state.machine import JobState
from orchestrator.state.store import JobRecord
from tests.records import job_record
from tests.unit.cli.test_render import NODE
from tests.unit.plan.test_planner import facts, spec

STARVED = GpuUse(samples=30, mean_utilization=41.5, low_seconds=150)
BUSY = GpuUse(samples=30, mean_utilization=93, low_seconds=0)
DATA = [{"source": "cos://datasets-1250000000/imagenet/", "target": "imagenet"}]


def job(**fields: Any) -> JobRecord:
    job_spec = spec(**fields)
    return job_record("job-1", "demo", JobState.RUNNING, reason="training", spec=job_spec,
                      plan=make_plan(job_spec, facts()), created_at=1000.0, updated_at=2000.0, deadline=9000.0)


def status(node: int, use: GpuUse | None) -> Status:
    return Status(attempt=1, node_rank=node, instance_id=f"ins-{node}", phase=Phase.TRAINING, time=2000.0, seq=40,
                  step=100, gpu_use=use)


def view(*uses: GpuUse | None) -> AgentView:
    beats = {node: status(node, use) for node, use in enumerate(uses)}
    return AgentView(beats[0], None, None, beats)


def test_the_hint_says_the_numbers_of_the_node_and_where_the_data_is() -> None:
    assert render.gpu_hint(job(data=DATA), 0, "GN7.2XLARGE32", STARVED) == (
        "node 0: GPU utilisation below 80% for 2m30s of training (mean 41.5%): the data loader is likely the "
        "bottleneck. Give the DataLoader num_workers=5 (⅔ of GN7.2XLARGE32's 8 vCPUs / 1 process(es) per node), "
        "persistent_workers=True, pin_memory=True; read the data from $CVMJOB_DATA_DIR/imagenet, where it is synced "
        "to the node's local disk (its NVMe where the type has one) before training")


def test_the_hint_follows_the_type_the_node_runs_on() -> None:
    fallback = job(instance={"type": "GN7.2XLARGE32", "alternatives": ["GN7.10XLARGE160"]})
    hint = render.gpu_hint(fallback, 1, "GN7.10XLARGE160", STARVED)
    assert "num_workers=13 (⅔ of GN7.10XLARGE160's 40 vCPUs / 2 process(es) per node)" in hint  # 2 GPUs, auto
    assert "list the data under data: in the spec, so that it is synced to the node's local NVMe" in hint
    # An instance not seen (yet): the plan's first choice.
    assert "GN7.2XLARGE32's 8 vCPUs" in render.gpu_hint(fallback, 0, None, STARVED)


def test_run_says_it_once_a_node() -> None:
    record = job(data=DATA)
    progress = render.Progress()
    rounds = [(STARVED, BUSY), (STARVED, STARVED), (STARVED, STARVED)]
    with render.console.capture() as captured:
        for uses in rounds:
            nodes = tuple(NodeSeen(n, f"ins-{n}", None, status(n, use), None) for n, use in enumerate(uses))
            progress.round(record, Observation(now=2000.0, cloud_ok=True, nodes=nodes))
    hints = [line for line in captured.get().splitlines() if "GPU utilisation below" in line]
    assert [h.split("   ")[1][:7] for h in hints] == ["node 0:", "node 1:"]


def test_logs_follow_says_it_on_its_own_console_once() -> None:
    out = Console(width=400, record=True)
    starved = render.StarvedGpus(out)
    for use in (BUSY, STARVED, STARVED):
        starved.tell(job(), 0, "GN7.2XLARGE32", status(0, use))
    assert out.export_text().count("node 0: GPU utilisation below 80% for 2m30s") == 1


def test_status_tells_a_starved_node_and_the_mean_of_the_others() -> None:
    with render.console.capture() as captured:
        render.show_job(job(data=DATA), [], [NODE], view(BUSY, STARVED, None))
    lines = captured.get().splitlines()
    assert "GPU: node 0 at 93% on average while training" in lines
    assert any(line.startswith("node 1: GPU utilisation below 80% for 2m30s") for line in lines)
    assert not any("node 2" in line for line in lines)  # no GPU figures: nothing to say


def test_the_summary_shows_the_mean_per_node() -> None:
    record = job()
    with render.console.capture() as captured:
        render.summary(record, [], [NODE], view(BUSY, STARVED))
    assert "  GPU use (mean) node 0: 93%, node 1: 41.5%" in captured.get().splitlines()
    with render.console.capture() as cpu_only:
        render.summary(record, [], [NODE], view(None))
    assert "GPU use" not in cpu_only.get()


def test_status_json_carries_each_nodes_use() -> None:
    shown = render.job_json(job(), [], [NODE], view(BUSY, STARVED))
    assert shown["gpu_use"] == [
        {"node": 0, "samples": 30, "mean_utilization": 93.0, "low_seconds": 0.0, "starved": False},
        {"node": 1, "samples": 30, "mean_utilization": 41.5, "low_seconds": 150.0, "starved": True},
    ]
