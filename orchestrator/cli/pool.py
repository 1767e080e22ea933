"""``cvmjob pool ls|grow|shrink``: the reserved pool of prepaid instances."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from .lazy import lazy_module, lazy_name
from .options import Emulator, Output, Yes, check_output

if TYPE_CHECKING:  # loaded at first use (cli/lazy.py): `cvmjob --help` needs none of it
    from rich.table import Table

    from .. import api
    from ..billing import pool as pools
    from . import render
    from .confirm import ask_to_spend
else:
    Table = lazy_name("rich.table", "Table")
    api = lazy_module("orchestrator.api")
    pools = lazy_module("orchestrator.billing.pool")
    render = lazy_module("orchestrator.cli.render")
    ask_to_spend = lazy_name("orchestrator.cli.confirm", "ask_to_spend")

pool_app = typer.Typer(no_args_is_help=True, help="The reserved pool: prepaid instances shared by reserved jobs.")

Name = Annotated[str, typer.Option("--name", help="the pool")]
Region = Annotated[str, typer.Option(help="the region of the pool's instances")]


@pool_app.command("ls")
def list_pool(
    name: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--name", help="only this pool (default: every pool)"),
    ] = None,
    region: Region = "ap-guangzhou",
    emulator: Emulator = False,
    output: Output = "text",
) -> None:
    """Members of the pool(s): type, zone, state, the job holding each, and when the prepaid period ends."""
    check_output(output)
    store, sdk = api.pool_access(region, emulator)
    members = pools.sync(store, sdk, name, time.time())
    if output == "json":  # "state" as the cloud says it, "state_word" as `pool ls` shows it
        render.print_json([{**m.__dict__, "state_word": m.state.word} for m in members])
        return
    render.console.print(pool_table(members))


def pool_table(members: list[pools.Member]) -> Table:
    table = render.table()
    table.add_column("instance", no_wrap=True)
    table.add_column("placement", no_wrap=True)
    table.add_column("state", overflow="fold")
    table.add_column("held by", no_wrap=True)
    table.add_column("paid until", no_wrap=True)
    for m in members:
        table.add_row(m.instance_id, f"{m.instance_type}\n{m.zone}", m.state.word, m.job_id or "idle",
                      m.expires_at.strftime("%Y-%m-%d") if m.expires_at else "-")
    return table


@pool_app.command()
def grow(
    instance_type: Annotated[str, typer.Option("--type", help="instance type, e.g. GN7.2XLARGE32")],
    zone: Annotated[str, typer.Option(help="e.g. ap-guangzhou-3")],
    name: Name = "default",
    count: Annotated[int, typer.Option(min=1, max=100, help="how many instances to buy")] = 1,
    months: Annotated[int, typer.Option(help="prepaid period: 1-12, 24, 36, 48 or 60 months")] = 1,
    auto_renew: Annotated[bool, typer.Option(help="renew automatically at the end of the period")] = False,
    image: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help="image the idle instances boot (default: the one a job of this type would get)"),
    ] = None,
    region: Region = "ap-guangzhou",
    emulator: Emulator = False,
    output: Output = "text",
    yes: Yes = False,
) -> None:
    """Buy prepaid instances into the pool (reserved billing: paid for the months up front)."""
    check_output(output)
    store, sdk = api.pool_access(region, emulator)
    ids = pools.grow(store, sdk, name, zone, instance_type, image, count, months, auto_renew,
                     warn=lambda line: render.err.print(f"warning: {line}", markup=False),
                     confirm=lambda cost: ask_to_spend(f"buy them into pool {name}", cost, yes, output))
    if output == "json":
        render.print_json({"pool": name, "added": ids, "instance_type": instance_type, "zone": zone,
                           "months": months, "auto_renew": auto_renew})
        return
    render.console.print(
        f"pool {name}: added {', '.join(ids)} ({instance_type}, {zone}, {months} month(s)"
        + (", auto-renew" if auto_renew else "")
        + ")"
    )


@pool_app.command()
def shrink(
    name: Name = "default",
    count: Annotated[int, typer.Option(min=1, help="how many idle instances to return")] = 1,
    region: Region = "ap-guangzhou",
    emulator: Emulator = False,
    output: Output = "text",
) -> None:
    """Return idle prepaid instances (to the recycle bin; refunds follow Tencent Cloud's prepaid rules)."""
    check_output(output)
    store, sdk = api.pool_access(region, emulator)
    returned = pools.shrink(store, sdk, name, count, time.time())
    if output == "json":
        render.print_json({"pool": name, "returned": returned})
        return
    render.console.print(f"pool {name}: returned {', '.join(returned)} (moved to the recycle bin)")
