"""How the CLI shows things: rich tables and a live progress view for people, JSON for machines."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import Any

from pydantic import ValidationError
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..api import AgentView, PlanReport
from ..ci.fingerprint import digest
from ..contract import ENDED_PHASES, LOW_UTILISATION, FingerprintEntry, GpuUse, Location, Status
from ..lifecycle.observation import Observation
from ..plan import sizing
from ..plan.models import Plan
from ..providers.tencent.vocabulary import ChargeType, stock_word
from ..spec.notify import NotifyTarget
from ..staging.agent_config import locations
from ..state.machine import EXIT_CODES, JobState
from ..state.outbox import Notification
from ..state.store import Event, JobRecord, NodeRecord
from ..text import duration, show_values

# Lines are never wrapped (logs and CI read them); tables take the terminal's width ($COLUMNS, else 80 when piped)
# and are laid out to be read at 80 columns.
console = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def when(ts: float | None, seconds: bool = True) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, timezone.utc).astimezone().strftime("%Y-%m-%d %H:%M" + (":%S" if seconds else ""))


def money(value: float | None) -> str:
    return "-" if value is None else f"¥{value:,.2f}"


def print_json(data: Any) -> None:
    console.print_json(json.dumps(data, default=str))


def table(title: str | None = None) -> Table:
    """A table laid out to be read at 80 columns: a rule under the header, no frame. Its callers mark the columns
    whose values must stay whole (ids, types, zones) ``no_wrap``: the others wrap between words to make room."""
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                 padding=(0, 1, 0, 0))


def billing_word(charge_type: str) -> str:
    """The spec's word (on-demand, spot, reserved) for a charge type as records keep it."""
    return ChargeType(charge_type).billing


# -- plan ----------------------------------------------------------------------------------------------------
def plan_json(report: PlanReport) -> dict[str, Any]:
    plan = report.plan.model_dump(mode="json")
    for placement in [*plan["candidates"], *plan["rejected"]]:  # beside the cloud's charge_type, the spec's word
        placement["billing"] = billing_word(placement["charge_type"])
    return {
        "name": report.spec.name,
        "target": report.target.describe(),
        "plan": plan,
        "sizing": plan_sizing(report),
        "notes": report.notes,
    }


def plan_sizing(report: PlanReport) -> dict[str, Any]:
    """The chosen type: what each of its GPUs must hold (instance.need.model; None without), what it has, and the
    DataLoader workers its vCPUs afford each process."""
    primary = report.plan.primary
    memory = report.plan.gpu_memory
    processes = sizing.processes_per_node(report.spec.train, primary.gpus)
    return {
        "instance_type": primary.instance_type,
        "gpu_memory_gib": primary.gpu_memory_gib,
        "vram_estimate_gib": None if memory is None else round(memory.vram_estimate_gib, 3),
        "headroom": None if memory is None else memory.headroom,
        "required_gib": None if memory is None else round(memory.required_gib, 3),
        "vcpus": primary.cpus,
        "processes": processes,
        "num_workers": sizing.num_workers(primary.cpus, processes),
    }


def ceiling(plan: Plan) -> str:
    """The most the job may cost: its time limit at the first placement's price (`plan`'s line, `run`'s estimate)."""
    return f"at most {plan.expected_hours:g} h (limits.max_runtime): {money(plan.estimated_cost)}"


def show_plan(report: PlanReport) -> None:
    plan = report.plan
    console.print(f"[bold]{report.spec.name}[/] on {report.target.describe()}")
    console.print(f"image {plan.image_id} ({plan.image_name}), {plan.nnodes} node(s), state bucket {plan.state_bucket}")
    console.print(placements_table(plan))
    if plan.rejected:
        console.print(
            "not used: " + "; ".join(f"{r.instance_type} in {r.zone} ({r.reason})" for r in plan.rejected[:6])
        )
    line = ceiling(plan)
    if plan.on_demand_cost and plan.estimated_cost and plan.on_demand_cost > plan.estimated_cost:
        saved = 100 * (1 - plan.estimated_cost / plan.on_demand_cost)
        line += f" (on-demand {money(plan.on_demand_cost)}: {saved:.0f}% saved)"
    console.print(line)
    _show_sizing(report)
    for note in [*plan.warnings, *report.notes]:
        console.print(f"note: {note}")


def placements_table(plan: Plan) -> Table:
    shown = table("placements, in the order they will be tried")
    # The one column that wraps: type and zone on a line where the width allows, else the zone under the type (rich
    # narrows all wrapping columns alike, and would cut a type beside a longer text).
    shown.add_column("placement")
    shown.add_column("billing", no_wrap=True)
    shown.add_column("GPUs", no_wrap=True)
    shown.add_column("stock", no_wrap=True)
    shown.add_column("CNY/h", justify="right", no_wrap=True)
    shown.add_column("on-demand", justify="right", no_wrap=True)
    for p in plan.candidates:
        gpus = f"{p.gpus:g}" + ("" if p.gpu_memory_gib is None else f"×{p.gpu_memory_gib}GiB")
        shown.add_row(f"{p.instance_type} {p.zone}", p.billing, gpus, stock_word(p.stock),
                      money(p.price_per_hour), money(p.on_demand_price_per_hour))
    return shown


def _show_sizing(report: PlanReport) -> None:
    """The arithmetic behind the GPU's memory (with instance.need.model) and the DataLoader workers."""
    shown = plan_sizing(report)
    need = report.spec.instance.need
    memory = report.plan.gpu_memory
    if memory is not None and need is not None and need.model is not None:
        console.print("GPU memory from instance.need.model (GiB = 2^30 bytes):")
        for term in sizing.terms(need.model):
            product = " × ".join(f"{factor:,}" for factor in term.factors)
            console.print(f"  {term.name:<17} {product} × {term.bytes_each} B = {term.bytes / sizing.GIB:.2f} GiB")
        console.print(f"  estimate {memory.vram_estimate_gib:.2f} GiB + {memory.headroom:.0%} headroom = "
                      f"{memory.required_gib:.2f} GiB per GPU; {shown['instance_type']} has "
                      f"{shown['gpu_memory_gib']} GiB per GPU")
    console.print(f"DataLoader num_workers: {shown['num_workers']} per process (⅔ of {shown['instance_type']}'s "
                  f"{shown['vcpus']} vCPUs / {shown['processes']} process(es) per node)")


# -- status --------------------------------------------------------------------------------------------------
def phases(events: list[Event]) -> list[tuple[str, float, float | None, str]]:
    """(state, entered, left, why it was entered) for each transition."""
    transitions = [e for e in events if e.kind == "transition" and e.to_state]
    out = []
    for i, e in enumerate(transitions):
        left = transitions[i + 1].at if i + 1 < len(transitions) else None
        out.append((str(e.to_state), e.at, left, e.detail))
    return out


def accounting(nodes: list[NodeRecord]) -> dict[str, Any]:
    """Each attempt's bill, the total, and what the same instance time would have cost on demand."""
    per_attempt: dict[int, float] = {}
    on_demand = 0.0
    for n in nodes:
        per_attempt[n.attempt] = round(per_attempt.get(n.attempt, 0.0) + (n.cost_cny or 0.0), 2)
        if n.charge_type == ChargeType.ON_DEMAND and n.cost_cny is not None:
            # Its own bill: the controller's view of the running time differs from the cloud's by a second or two,
            # which showed an on-demand job "saving" a fen.
            on_demand += n.cost_cny
        elif n.ended_at is not None and (would := n.priced(n.on_demand_price_per_hour, n.ended_at)) is not None:
            on_demand += would
    total = round(sum(per_attempt.values()), 2)
    return {
        "per_attempt": per_attempt,
        "total_cny": total,
        "on_demand_cny": round(on_demand, 2),
        "saved_cny": round(max(0.0, on_demand - total), 2),
    }


def job_json(job: JobRecord, events: list[Event], nodes: list[NodeRecord], view: AgentView | None) -> dict[str, Any]:
    return {
        "job_id": job.job_id,
        "name": job.name,
        "state": job.state.value,
        "terminal": job.state.is_terminal(),
        "exit_code": EXIT_CODES.get(job.state),
        "reason": job.reason,
        "attempt": job.attempt,
        "created_at": job.created_at,
        "updated_at": job.updated_at,
        "cost_cny": job.cost_cny,
        "bill": accounting(nodes),
        "image_id": job.image_id,
        "phases": [{"state": s, "entered_at": a, "left_at": b, "reason": why} for s, a, b, why in phases(events)],
        "nodes": [
            {
                "attempt": n.attempt,
                "node": n.node,
                "instance_id": n.instance_id,
                "zone": n.zone,
                "instance_type": n.instance_type,
                "charge_type": n.charge_type,
                "billing": billing_word(n.charge_type),
                "state": n.state,
                "end_reason": n.end_reason,
                "cost_cny": n.cost_cny,
            }
            for n in nodes
        ],
        "agent": None if view is None or view.status is None else view.status.model_dump(mode="json"),
        "gpu_use": [{"node": node, **use.model_dump(mode="json"), "starved": use.starved}
                    for node, use in gpu_uses(view).items()],
        "result": None if view is None or view.result is None else view.result.model_dump(mode="json"),
        "checkpoints": []
        if view is None or view.manifest is None
        else [{"name": c.name, "step": c.step, "emergency": c.emergency} for c in view.manifest.checkpoints],
        **answer(job, events, nodes, view),
        **({} if job.fingerprint is None else
           {"up_to_date": False, "fingerprint": digest(job.fingerprint)}),
    }


def answer(job: JobRecord, events: list[Event], nodes: list[NodeRecord], view: AgentView | None) -> dict[str, Any]:
    """What a run ends with: the final metrics, where the outputs and checkpoints are, how long it took and was
    billed, and the commands that take it further."""
    where = locations(job.job_id, job.spec, job.plan.state_bucket)
    ended = [e.at for e in events if e.kind == "transition"]
    billed = [s for n in nodes if (s := n.ran_seconds(job.updated_at)) is not None]
    commands = [f"cvmjob logs {job.job_id}", f"cvmjob download {job.job_id} outputs",
                f"cvmjob download {job.job_id} checkpoints"]
    if not job.state.is_terminal():
        commands = [f"cvmjob status {job.job_id}", f"cvmjob logs {job.job_id} --follow"]
    elif job.state not in (JobState.SUCCEEDED, JobState.CANCELLED):
        commands = [f"cvmjob logs {job.job_id}", f"cvmjob download {job.job_id} checkpoints"]
    return {
        "metrics": {} if view is None or view.result is None else view.result.metrics,
        "outputs": cos_uri(where.outputs),
        "outputs_uploaded": None if view is None or view.result is None else view.result.outputs_uploaded,
        "checkpoints_location": cos_uri(where.checkpoints),
        "total_seconds": round(max(ended) - job.created_at, 1) if ended else 0.0,
        "billed_seconds": round(sum(billed), 1),
        "next": commands,
    }


def cos_uri(location: Location) -> str:
    return f"cos://{location.bucket}/{location.prefix}"


def reused_json(entry: FingerprintEntry) -> dict[str, Any]:
    """What `run --if-changed` says of the job it reuses (beside ``"up_to_date": true``)."""
    return {"job_id": entry.job_id, "name": entry.name, "state": JobState.SUCCEEDED.value,
            "finished_at": entry.finished_at, "outputs": cos_uri(entry.outputs), "metrics": entry.metrics,
            "image_id": entry.image_id, "fingerprint": digest(entry.fingerprint)}


def show_job(job: JobRecord, events: list[Event], nodes: list[NodeRecord], view: AgentView | None) -> None:
    style = "green" if job.state == JobState.SUCCEEDED else "red" if job.state.is_terminal() else "yellow"
    # A reason may repeat what the training wrote (its result's): text, never markup (a "[/x]" raised MarkupError).
    console.print(f"[bold]{job.job_id}[/] ({escape(job.name)}): [{style}]{job.state.value}[/] — {escape(job.reason)}")
    console.print(phases_table(events))
    if nodes:
        console.print(instances_table(nodes))
    if view is not None and view.status is not None:
        s = view.status
        console.print(
            f"agent: {s.phase.value}"
            + (f" ({escape(s.message)})" if s.message and s.phase not in ENDED_PHASES else "")
            + (f", step {s.step}" if s.step is not None else "")
            + (f", loss {s.loss:.4f}" if s.loss is not None else "")
        )
    for node, use in gpu_uses(view).items():
        if use.starved:
            current = [n.instance_type for n in nodes if n.attempt == job.attempt and n.node == node]
            console.print(gpu_hint(job, node, current[0] if current else None, use), style="yellow", markup=False)
        else:
            console.print(f"GPU: node {node} at {use.mean_utilization:g}% on average while training")
    if view is not None and view.manifest is not None and view.manifest.checkpoints:
        latest = view.manifest.latest()
        assert latest is not None
        console.print(
            f"checkpoints: {len(view.manifest.checkpoints)} complete, latest {latest.name} (step {latest.step})"
        )
    if job.image_id:
        console.print(f"image: {job.image_id}")
    if job.state.is_terminal():
        console.print(f"cost: {money(job.cost_cny)}; exit code {EXIT_CODES.get(job.state)}")


def notifications_json(told: list[Notification]) -> list[dict[str, Any]]:
    return [{"event": n.event, "id": n.key, "target": _told_to(n), "state": n.state, "tries": n.tries,
             "sent_at": n.sent_at, "last_error": n.last_error} for n in told]


def show_notifications(told: list[Notification]) -> None:
    """One line per notification not sent yet (or given up): a webhook that fails is worth knowing about."""
    for n in told:
        if n.state != "sent":
            style = "red" if n.state == "gave_up" else "yellow"
            console.print(f"notify: {n.event} {_told_to(n)}: {n.state.replace('_', ' ')} after {n.tries} "
                          f"tr{'y' if n.tries == 1 else 'ies'}" + (f" ({n.last_error})" if n.last_error else ""),
                          style=style, markup=False)


def _told_to(n: Notification) -> str:
    try:
        return NotifyTarget.model_validate(n.target).describe()
    except ValidationError:
        return "(a target this cvmjob cannot read)"


def phases_table(events: list[Event]) -> Table:
    shown = table("phases")
    shown.add_column("state", no_wrap=True)
    shown.add_column("entered", no_wrap=True)
    shown.add_column("took", no_wrap=True)
    for state, entered, left, _ in phases(events):
        shown.add_row(state, when(entered), duration((left or time.time()) - entered) if left else "")
    return shown


def instances_table(nodes: list[NodeRecord]) -> Table:
    """Each node of each attempt: ids, type and zone whole; the state and its reason, last, wrap."""
    shown = table("instances")
    shown.add_column("try", justify="right", no_wrap=True)
    shown.add_column("node", justify="right", no_wrap=True)
    shown.add_column("instance", no_wrap=True)
    shown.add_column("placement", no_wrap=True)
    shown.add_column("cost", justify="right", no_wrap=True)
    shown.add_column("state", overflow="fold")
    for n in nodes:
        placement = f"{n.instance_type}\n{n.zone} {billing_word(n.charge_type)}"  # the state wraps, not this
        shown.add_row(str(n.attempt), str(n.node), n.instance_id or "-", placement, money(n.cost_cny),
                      escape(n.state + (f" ({n.end_reason})" if n.end_reason else "")))
    return shown


def jobs_table(jobs: list[JobRecord]) -> Table:
    shown = table()
    shown.add_column("job", no_wrap=True)
    shown.add_column("name", overflow="fold")
    shown.add_column("state", no_wrap=True)
    shown.add_column("try", justify="right", no_wrap=True)
    shown.add_column("created", no_wrap=True)
    shown.add_column("cost", justify="right", no_wrap=True)
    for j in jobs:
        shown.add_row(j.job_id, j.name, j.state.value, str(j.attempt), when(j.created_at, seconds=False),
                      money(j.cost_cny))
    return shown


# -- GPU utilisation -----------------------------------------------------------------------------------------
def gpu_uses(view: AgentView | None) -> dict[int, GpuUse]:
    """Each node's GPU use over the training, as its last heartbeat says (nodes without GPU figures left out)."""
    beats = {} if view is None else view.heartbeats
    return {node: beat.gpu_use for node, beat in sorted(beats.items()) if beat.gpu_use is not None}


def gpu_hint(job: JobRecord, node: int, instance_type: str | None, use: GpuUse) -> str:
    """What a node whose GPUs wait (GpuUse.starved) is told: the usual cause and its fixes, in the numbers of
    the node (its type's vCPUs, the processes the agent starts there) and of the job (where its data is)."""
    spec = job.spec
    candidates = job.plan.candidates
    placement = next((p for p in candidates if p.instance_type == instance_type), candidates[0])
    processes = sizing.processes_per_node(spec.train, placement.gpus)
    # A plan stored before placements had their vCPUs (cpus 0) cannot say the number.
    workers = (f"num_workers={sizing.num_workers(placement.cpus, processes)} (⅔ of {placement.instance_type}'s "
               f"{placement.cpus} vCPUs / {processes} process(es) per node)" if placement.cpus
               else f"num_workers up to ⅔ of the vCPUs / {processes} process(es) per node")
    data = (f"read the data from {', '.join(f'$CVMJOB_DATA_DIR/{d.target}' for d in spec.data)}, where it is synced "
            "to the node's local disk (its NVMe where the type has one) before training" if spec.data
            else "list the data under data: in the spec, so that it is synced to the node's local NVMe before "
                 "training instead of read over the network")
    return (f"node {node}: GPU utilisation below {LOW_UTILISATION:g}% for {duration(use.low_seconds)} of training "
            f"(mean {use.mean_utilization:g}%): the data loader is likely the bottleneck. Give the DataLoader "
            f"{workers}, persistent_workers=True, pin_memory=True; {data}")


class StarvedGpus:
    """Tells of a node whose GPUs wait (GpuUse.starved) the first time a heartbeat says so: once a job, not at
    every look (`run`'s rounds, `logs -f`'s polls)."""

    def __init__(self, out: Console) -> None:
        self._out = out
        self._told: set[int] = set()

    def tell(self, job: JobRecord, node: int, instance_type: str | None, status: Status) -> None:
        if node in self._told or status.gpu_use is None or not status.gpu_use.starved:
            return
        self._told.add(node)
        self._out.print(f"{time.strftime('%H:%M:%S')}   {gpu_hint(job, node, instance_type, status.gpu_use)}",
                        style="yellow", markup=False)


# -- live progress -------------------------------------------------------------------------------------------
class Progress:
    """One line per change while a job runs (works in logs and CI as well as in a terminal)."""

    def __init__(self) -> None:
        self._last = ""
        self._gpus = StarvedGpus(console)

    def event(self, kind: str, message: str) -> None:
        console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {escape(message)}")

    def round(self, job: JobRecord, observation: Observation | None) -> None:
        if observation is None or not observation.nodes:
            return
        for seen in observation.nodes:
            if seen.status is not None:
                self._gpus.tell(job, seen.node, seen.instance.instance_type if seen.instance else None, seen.status)
        status = observation.nodes[0].status
        if status is None:
            return
        said = status.message if status.message and status.phase not in ENDED_PHASES else ""
        parts = [status.phase.value + (f" ({escape(said)})" if said else "")]
        if status.sync_bytes_total:
            parts.append(f"data {status.sync_bytes_done / 1e6:.1f}/{status.sync_bytes_total / 1e6:.1f} MB")
        if status.step is not None:
            parts.append(f"step {status.step}" + (f" loss {status.loss:.4f}" if status.loss is not None else ""))
        if status.checkpoints_uploaded:
            parts.append(f"{status.checkpoints_uploaded} checkpoint(s) uploaded")
        line = ", ".join(parts)
        if line != self._last:
            self._last = line
            console.print(f"[dim]{time.strftime('%H:%M:%S')}[/]   {line}")


def summary(job: JobRecord, events: list[Event], nodes: list[NodeRecord], view: AgentView | None) -> None:
    console.rule(f"{job.job_id}: {job.state.value}")
    for state, entered, left, _ in phases(events):
        if left is not None:
            console.print(f"  {state:<14} {duration(left - entered)}")
    bill = accounting(nodes)
    attempts = (
        ""
        if len(bill["per_attempt"]) < 2
        else " (" + ", ".join(f"attempt {a}: {money(c)}" for a, c in sorted(bill["per_attempt"].items())) + ")"
    )
    saved = f"; {money(bill['saved_cny'])} less than on demand" if bill["saved_cny"] > 0 else ""
    console.print(f"  cost           {money(job.cost_cny)}{attempts}{saved}")
    if uses := gpu_uses(view):
        console.print("  GPU use (mean) " + ", ".join(f"node {n}: {u.mean_utilization:g}%" for n, u in uses.items()))
    if view is not None and view.manifest is not None and view.manifest.checkpoints:
        latest = view.manifest.latest()
        assert latest is not None
        console.print(f"  checkpoints    {len(view.manifest.checkpoints)} (latest step {latest.step})")
    if job.image_id:
        console.print(f"  image          {job.image_id}")
    said = answer(job, events, nodes, view)
    if said["metrics"]:
        console.print(f"  metrics        {show_values(said['metrics'])}", markup=False)
    files = said["outputs_uploaded"]
    console.print(f"  outputs        {said['outputs']}" + ("" if files is None else f" ({files} file(s))"),
                  markup=False)
    console.print(f"  checkpoints at {said['checkpoints_location']}", markup=False)
    console.print(f"  time           {duration(said['total_seconds'])} in all, "
                  f"{duration(said['billed_seconds'])} of instance time billed", markup=False)
    if job.state != JobState.SUCCEEDED:
        console.print(f"  reason         {job.reason}", markup=False)
        if view is not None and view.result is not None and view.result.log_tail:
            console.print("  last log lines:")
            for line in view.result.log_tail.splitlines():
                console.print(f"    {line}", markup=False)
    console.print("  next:", markup=False)
    for command in said["next"]:
        console.print(f"    {command}", markup=False)
