"""``cvmjob controller [status]``: the service that drives every job it can claim from the store."""

from __future__ import annotations

import signal
import time
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..controller.settings import LEASE_SECONDS, ServiceSettings
from .lazy import lazy_module, lazy_name
from .options import Output, check_output

if TYPE_CHECKING:  # loaded at first use (cli/lazy.py): `cvmjob --help` needs none of it
    from rich.table import Table

    from ..controller.service import Service
    from ..state.home import store_url
    from ..state.store import Store
    from . import render
else:
    Table = lazy_name("rich.table", "Table")
    Service = lazy_name("orchestrator.controller.service", "Service")
    store_url = lazy_name("orchestrator.state.home", "store_url")
    Store = lazy_name("orchestrator.state.store", "Store")
    render = lazy_module("orchestrator.cli.render")

controller_app = typer.Typer(help="The controller service: drives every job it can claim from the store.")


def _say(line: str) -> None:
    print(f"{datetime.now().strftime('%H:%M:%S')} {line}", flush=True)


DEFAULTS = ServiceSettings()

@controller_app.callback(invoke_without_command=True)
def serve(
    ctx: typer.Context,
    max_jobs: Annotated[int, typer.Option(min=1, help="the most jobs this replica drives at once")] = DEFAULTS.max_jobs,
    workers: Annotated[int, typer.Option(min=1, max=256, help="threads stepping jobs (cloud calls in flight)")] = (
        DEFAULTS.workers),
    lease: Annotated[float, typer.Option(min=5, help="seconds a lease lasts unrenewed: a dead replica's jobs are "
                                                     "taken over after it")] = LEASE_SECONDS,
    exit_when_idle: Annotated[bool, typer.Option(help="exit once no job is left to drive")] = False,
) -> None:
    """Drive every job this store holds that no live controller drives, until SIGTERM or Ctrl-C (which drain: no
    more claims, the steps in flight finish, the leases are handed back)."""
    if ctx.invoked_subcommand is not None:
        return
    settings = ServiceSettings(max_jobs=max_jobs, lease_seconds=lease, workers=workers, exit_when_idle=exit_when_idle)
    service = Service(Store(store_url()), settings, say=_say)

    def on_signal(signum: int, frame: Any) -> None:
        _say(f"{signal.Signals(signum).name}: draining")
        service.drain()

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, on_signal)
    service.run()


@controller_app.command()
def status(output: Output = "text") -> None:
    """The live controllers of this store, the jobs each holds and when their leases expire."""
    check_output(output)
    store = Store(store_url())
    now = time.time()
    replicas = store.live_controllers(now, LEASE_SECONDS)
    leases = store.leases(now)
    held: dict[str, list[Any]] = {r.owner: [] for r in replicas}
    for lease in leases:
        held.setdefault(lease.owner, []).append(lease)
    if output == "json":
        render.print_json([
            {"owner": r.owner, "started_at": r.started_at, "beat_at": r.beat_at, "info": r.info,
             "jobs": [{"job_id": x.job_id, "name": x.name, "state": x.state, "lease_expires_in": x.expires_at - now}
                      for x in held.get(r.owner, [])]}
            for r in replicas
        ])
        return
    if not replicas:
        render.console.print("no live controller holds this store (`cvmjob controller` starts one)")
    render.console.print(controllers_table(held, now))


def controllers_table(held: dict[str, list[Any]], now: float) -> Table:
    """Each controller's leases, at 80 columns: a controller's long name (user@host/home/pid/nonce) folds, a job id
    does not."""
    table = render.table()
    table.add_column("controller", overflow="fold")
    table.add_column("job", no_wrap=True)
    table.add_column("name", overflow="fold")
    table.add_column("state", no_wrap=True)
    table.add_column("lease expires in", justify="right")
    for owner, jobs in held.items():
        for x in jobs or [None]:
            table.add_row(owner, *(("-", "-", "-", "-") if x is None else
                                   (x.job_id, x.name, x.state.value, f"{x.expires_at - now:.0f} s")))
    return table
