"""``cvmjob bench TYPE`` and ``cvmjob bench compare``: ResNet-50 images/s and CNY per million images of a type."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional, cast

import typer
from typer.core import TyperGroup

from ..bench.errors import GpusError
from ..controller.settings import LEASE_SECONDS
from ..errors import EXIT_BAD_INPUT
from .lazy import lazy_module, lazy_name
from .options import Abort, Emulator, Output, check_output

if TYPE_CHECKING:  # loaded at first use (cli/lazy.py): `cvmjob --help` needs none of it
    from rich.table import Table

    from .. import api
    from ..bench import results as R
    from ..bench import run as B
    from ..bench.spec import BenchOptions, Billing, Phases, Precision
    from ..controller.drive import drive
    from ..controller.engine import Controls
    from ..state.home import controller_name, store_url
    from ..state.store import Store
    from . import render
else:
    Table = lazy_name("rich.table", "Table")
    api = lazy_module("orchestrator.api")
    R = lazy_module("orchestrator.bench.results")
    B = lazy_module("orchestrator.bench.run")
    BenchOptions = lazy_name("orchestrator.bench.spec", "BenchOptions")
    Billing = lazy_name("orchestrator.bench.spec", "Billing")
    Precision = lazy_name("orchestrator.bench.spec", "Precision")
    Phases = lazy_name("orchestrator.bench.spec", "Phases")
    drive = lazy_name("orchestrator.controller.drive", "drive")
    Controls = lazy_name("orchestrator.controller.engine", "Controls")
    controller_name = lazy_name("orchestrator.state.home", "controller_name")
    store_url = lazy_name("orchestrator.state.home", "store_url")
    Store = lazy_name("orchestrator.state.store", "Store")
    render = lazy_module("orchestrator.cli.render")


class _TypeOrCommand(TyperGroup):
    """``bench TYPE …`` is ``bench run TYPE …``: no instance type is named like one of the group's commands."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # Any: typer keeps click's Context private
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


bench_app = typer.Typer(help="Benchmark instance types (ResNet-50, synthetic data) and rank them by cost per image: "
                             "`cvmjob bench TYPE`, `cvmjob bench compare`.", no_args_is_help=True, cls=_TypeOrCommand)

Region = Annotated[str, typer.Option(help="the region to run (and look up results) in")]
DEFAULT_REGION = "ap-guangzhou"


def _cell(value: float | None, digits: str = ".1f") -> str:
    return "-" if value is None else format(value, digits)


@bench_app.command("run")
def bench(
    instance_type: Annotated[str, typer.Argument(metavar="TYPE", help="the instance type, e.g. GN7.2XLARGE32")],
    gpus: Annotated[str, typer.Option(help="phases: 1 (one GPU), all (every GPU, DDP) or a GPU count")] = "1,all",
    precision: Annotated[str, typer.Option(help="auto (bf16, else fp16; fp32 on CPUs), bf16, fp16 or fp32")] = "auto",
    batch_size: Annotated[Optional[int], typer.Option(  # noqa: UP045
        min=1, help="per GPU (default 256; 2 on CPUs)")] = None,
    steps: Annotated[Optional[int], typer.Option(min=1, help="timed steps per phase (default 100; 2 on CPUs)")] = None,  # noqa: UP045
    billing: Annotated[str, typer.Option(help="on-demand or spot")] = "on-demand",
    region: Region = DEFAULT_REGION,
    output: Output = "text",
    emulator: Emulator = False,
) -> None:
    """Run the benchmark on TYPE through the normal life cycle and store its result for `bench compare`."""
    check_output(output)
    if billing not in ("on-demand", "spot"):
        raise Abort(f"--billing must be on-demand or spot, not {billing!r}", EXIT_BAD_INPUT)
    if precision not in ("auto", "bf16", "fp16", "fp32"):
        raise Abort(f"--precision must be auto, bf16, fp16 or fp32, not {precision!r}", EXIT_BAD_INPUT)
    try:
        phases = Phases.parse(gpus)
    except GpusError as exc:
        raise Abort(str(exc), EXIT_BAD_INPUT) from None
    options = BenchOptions(instance_type, region, cast(Billing, billing), phases, cast(Precision, precision),
                           batch_size, steps)
    report = B.plan(options, emulator)
    if output == "text":
        render.console.print(f"bench of {report.plan.primary.label()} on {report.target.describe()}")
    store = Store(store_url())
    me = controller_name()
    job_id = api.submit(report, store, lease=(me, LEASE_SECONDS))
    job = _drive(store, job_id, me, output)
    result = B.result_of(job, store.nodes(job_id))
    B.store(result, region, emulator)
    api.release_embedded(store)
    if output == "json":
        render.print_json(result.model_dump(mode="json"))
        return
    _table([result], f"bench {result.type} ({result.billing}, {result.zone}): job {job_id}")


def _drive(store: Store, job_id: str, me: str, output: str) -> Any:
    """The job to its end in this process; a signal tears it down at once (a benchmark has nothing to keep)."""
    controls = Controls()
    progress = render.Progress()

    def on_signal(signum: int, frame: Any) -> None:
        store.request_cancel(job_id, time.time(), checkpoint=False)
        controls.tear_down_now()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return drive(store, job_id, controls=controls, me=me,
                     emit=progress.event if output == "text" else lambda kind, message: None,
                     on_round=progress.round if output == "text" else None)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@bench_app.command()
def compare(
    png: Annotated[Path, typer.Option(help="where the bar chart goes")] = Path("bench-compare.png"),
    region: Region = DEFAULT_REGION,
    output: Output = "text",
    emulator: Emulator = False,
) -> None:
    """Rank the measured types (the state bucket's results) by CNY per million images; a table and a PNG chart."""
    check_output(output)
    found, unreadable = B.stored(region, emulator)
    ranked = R.rank(found)
    chart = B.chart(ranked, png) if ranked else None
    if output == "json":
        render.print_json({"results": [r.model_dump(mode="json") for r in ranked],
                           "png": None if chart is None else str(chart), "unreadable": unreadable})
        return
    if not ranked:
        render.console.print("no bench results yet: `cvmjob bench TYPE` measures one")
        return
    _table(ranked, "bench results, cheapest per million images first")
    for key in unreadable:
        render.err.print(f"note: {key} does not decode (a newer cvmjob wrote it?)", markup=False)
    render.console.print(f"chart: {chart}")


def _table(rows: list[R.BenchResult], title: str) -> None:
    for table in bench_tables(rows, title):
        render.console.print(table)
    if any(r.device == "cpu" for r in rows):
        render.console.print(f"[yellow]{R.CPU_LABEL}[/] (tiny ResNet-50: 32 px images, batch 2)")
    render.console.print("img/s N: on all N GPUs (DDP); CNY/M img: CNY per million images; NVMe MB/s reads back the "
                         "data just synced: the page cache may serve part of it")


def bench_tables(rows: list[R.BenchResult], title: str) -> tuple[Table, Table]:
    """Two tables that read at 80 columns, rows in the same order: what a type does and costs, then how (its
    precision, price, disk and COS rates) and which job measured it. A header of several words may wrap."""
    speed = render.table(title)
    how = render.table()
    for table in (speed, how):
        table.add_column("type", no_wrap=True)
        table.add_column("billing", no_wrap=True)
    for column in ("GPUs", "img/s 1", "img/s N", "scaling", "GPU%"):
        speed.add_column(column, justify="right", no_wrap=True)
    speed.add_column("CNY/M img", justify="right")
    for column in ("prec", "CNY/h"):
        how.add_column(column, justify="right", no_wrap=True)
    for column in ("NVMe MB/s", "COS→NVMe MB/s"):
        how.add_column(column, justify="right")
    how.add_column("job", no_wrap=True)
    for r in rows:
        kind = r.type + ("\n(CPU)" if r.device == "cpu" else "")  # under the type: its column stays narrow
        speed.add_row(kind, r.billing, str(r.gpus), _cell(r.images_per_s_1), _cell(r.images_per_s_all),
                      _cell(r.scaling_efficiency, ".0%"), _cell(r.gpu_utilisation, ".0f"),
                      _cell(r.cny_per_million_images, ".2f"))
        how.add_row(kind, r.billing, r.precision, _cell(r.cny_per_hour, ".2f"), _cell(r.nvme_read_mb_s, ".0f"),
                    _cell(r.cos_to_nvme_mb_s, ".0f"), r.job_id)
    return speed, how
