"""``cvmjob cost [--since 7d|2025-06-01] [--by name|tag|sweep]``: what jobs cost, from the store alone (no cloud
call), with the share billed while their instances were not training."""

from __future__ import annotations

import time
from dataclasses import asdict
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Optional, cast, get_args

import typer

from ..errors import EXIT_BAD_INPUT
from .lazy import lazy_module, lazy_name
from .options import Abort, Output, check_output

if TYPE_CHECKING:  # loaded at first use (cli/lazy.py): `cvmjob --help` needs none of it
    from rich.table import Table

    from ..billing import costs as billing_costs
    from ..billing.costs import CostGroup, GroupBy, JobCost, group, job_costs, total
    from ..spec.durations import parse_duration
    from ..state.home import store_url
    from ..state.store import Store
    from . import render
else:
    Table = lazy_name("rich.table", "Table")
    billing_costs = lazy_module("orchestrator.billing.costs")
    GroupBy = lazy_name("orchestrator.billing.costs", "GroupBy")
    group = lazy_name("orchestrator.billing.costs", "group")
    job_costs = lazy_name("orchestrator.billing.costs", "job_costs")
    total = lazy_name("orchestrator.billing.costs", "total")
    parse_duration = lazy_name("orchestrator.spec.durations", "parse_duration")
    store_url = lazy_name("orchestrator.state.home", "store_url")
    Store = lazy_name("orchestrator.state.store", "Store")
    render = lazy_module("orchestrator.cli.render")

WHERE_FROM = (
    "cost: an ended job's bill as recorded at its end, each instance's line of the cloud's bill (bill) or, without "
    "one yet, its price for its running time (estimate); a reserved pool member adds nothing (pool); a running "
    "job: an estimate so far. not training: each instance's billed time outside its training (boot, setup, "
    "preflight, sync, uploads, imaging, teardown) at its hourly price; - where not known (running, or billed "
    "before cvmjob recorded the training's time)."
)


def since_of(value: str, now: float) -> float:
    """``--since``: a duration back from now (``7d``, ``24h``, ``90m``) or an ISO date or time (local time
    unless it names its zone)."""
    try:
        return now - parse_duration(value)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        raise Abort(f"--since {value!r}: give a duration back from now (7d, 24h, 1h30m) or an ISO date "
                    "(2025-06-01, 2025-06-01T09:00)", EXIT_BAD_INPUT) from None


def cost(
    since: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="only jobs created since: a duration back from now (7d, 24h) or an ISO date (2025-06-01)")] = None,
    by: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="group by job name, tag (each key=value; a job counts in each of its tags) or sweep")] = None,
    output: Output = "text",
) -> None:
    """Bills per job (or per name, tag or sweep), and the share billed while not training. Reads the store only."""
    check_output(output)
    if by is not None and by not in get_args(billing_costs.GroupBy):
        raise Abort(f"--by must be one of {', '.join(get_args(billing_costs.GroupBy))}, not {by!r}", EXIT_BAD_INPUT)
    now = time.time()
    start = None if since is None else since_of(since, now)
    url = store_url()
    store = Store(url)
    jobs = store.list_jobs(since=start)
    sweeps = None
    if by == "sweep":
        from ..sweep.view import sweeps_of_jobs  # Optuna: only when asked for

        sweeps = sweeps_of_jobs(url)
    costs = job_costs(jobs, store.nodes_of(j.job_id for j in jobs), now, sweeps)
    groups = None if by is None else group(costs, cast(GroupBy, by))
    if output == "json":
        render.print_json(cost_json(costs, groups, start, by))
        return
    if groups is None:
        render.console.print(jobs_table(costs))
    else:
        render.console.print(groups_table(groups, by or ""))
    everything = total(costs)
    render.console.print(f"total: {everything.jobs} job(s), {render.money(everything.cost_cny)}, of which not training "
                         f"{render.money(everything.not_training_cny)}{_unknown(everything)}"
                         + ("" if start is None else f" (jobs created since {render.when(start)})"))
    render.console.print(WHERE_FROM, style="dim")


def _unknown(g: CostGroup) -> str:
    return f" ({g.unknown} job(s) not known)" if g.unknown else ""


def _share(part: float | None, whole: float) -> str:
    return "-" if part is None or whole <= 0 else f"{100 * part / whole:.0f}%"


def jobs_table(costs: list[JobCost]) -> Table:
    """Laid out for 80 columns (render.table): the job id and each type whole, a type a line and the billing under
    them; the state is in the JSON and `cvmjob ls`."""
    table = render.table("cost per job, newest first")
    table.add_column("job", no_wrap=True)
    table.add_column("name", overflow="fold")
    table.add_column("type, billing", no_wrap=True)
    table.add_column("cost", justify="right", no_wrap=True)
    table.add_column("not training", justify="right")
    table.add_column("source", overflow="fold")
    for c in costs:
        idle = render.money(c.not_training_cny) + ("" if c.not_training_cny is None else
                                                   f"\n({_share(c.not_training_cny, c.cost_cny)})")
        table.add_row(c.job_id, c.name, "\n".join([*c.instance_types, ", ".join(c.billing)]).strip() or "-",
                      render.money(c.cost_cny), idle, c.source)
    return table


def groups_table(groups: list[CostGroup], by: str) -> Table:
    table = render.table(f"cost per {by}, costliest first")
    table.add_column(by, overflow="fold")
    for column in ("jobs", "cost"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("not training", justify="right")
    table.add_column("share", justify="right", no_wrap=True)
    for g in groups:
        table.add_row(g.key, str(g.jobs), render.money(g.cost_cny), render.money(g.not_training_cny) + _unknown(g),
                      _share(g.not_training_cny, g.cost_cny))
    return table


def cost_json(costs: list[JobCost], groups: list[CostGroup] | None, since: float | None,
              by: str | None) -> dict[str, Any]:
    return {
        "since": since,
        "by": by,
        "jobs": [{**asdict(c), "state": c.state.value} for c in costs],
        **({} if groups is None else {"groups": [asdict(g) for g in groups]}),
        "total": asdict(total(costs)),
        "where_from": WHERE_FROM,
    }
