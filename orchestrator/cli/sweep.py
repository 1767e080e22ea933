"""``cvmjob sweep run|status|ls|cancel|report``: hyperparameter sweeps over Optuna, each trial a cvmjob job."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from ..controller.settings import ServiceSettings
from ..errors import EXIT_BAD_INPUT
from ..extras import need
from ..sweep.errors import SweepBusy
from ..text import show_values
from .lazy import lazy_module, lazy_name
from .options import Abort, Emulator, Output, Yes, check_output

if TYPE_CHECKING:  # loaded at first use (cli/lazy.py): `cvmjob --help` needs none of it
    from rich.table import Table

    from .. import api
    from ..controller.service import Service
    from ..spec.userconfig import load_user_config, unset_urls, with_user_defaults
    from ..state.home import controller_name, cvmjob_home, store_url
    from ..state.store import Store
    from ..sweep import study as S
    from ..sweep.models import SweepView
    from ..sweep.run import JobTemplate, Sweeper, cancel_sweep
    from ..sweep.spec import load_sweep
    from ..sweep.view import sweep_view
    from ..target import refuse_silent_emulator
    from . import render
    from .confirm import ask_to_spend
    from .live import LiveSweep
else:
    Table = lazy_name("rich.table", "Table")
    api = lazy_module("orchestrator.api")
    Service = lazy_name("orchestrator.controller.service", "Service")
    controller_name = lazy_name("orchestrator.state.home", "controller_name")
    cvmjob_home = lazy_name("orchestrator.state.home", "cvmjob_home")
    load_user_config = lazy_name("orchestrator.spec.userconfig", "load_user_config")
    unset_urls = lazy_name("orchestrator.spec.userconfig", "unset_urls")
    with_user_defaults = lazy_name("orchestrator.spec.userconfig", "with_user_defaults")
    store_url = lazy_name("orchestrator.state.home", "store_url")
    Store = lazy_name("orchestrator.state.store", "Store")
    S = lazy_module("orchestrator.sweep.study")
    JobTemplate = lazy_name("orchestrator.sweep.run", "JobTemplate")
    Sweeper = lazy_name("orchestrator.sweep.run", "Sweeper")
    cancel_sweep = lazy_name("orchestrator.sweep.run", "cancel_sweep")
    load_sweep = lazy_name("orchestrator.sweep.spec", "load_sweep")
    sweep_view = lazy_name("orchestrator.sweep.view", "sweep_view")
    refuse_silent_emulator = lazy_name("orchestrator.target", "refuse_silent_emulator")
    render = lazy_module("orchestrator.cli.render")
    ask_to_spend = lazy_name("orchestrator.cli.confirm", "ask_to_spend")
    LiveSweep = lazy_name("orchestrator.cli.live", "LiveSweep")

sweep_app = typer.Typer(help="Hyperparameter sweeps: Optuna asks, every trial is a cvmjob job.", no_args_is_help=True)


@sweep_app.callback()
def _need_optuna() -> None:
    # Before any sweep command (a `run --detach` too, whose background log nobody reads at once): the one line.
    need("sweep", "optuna")


StudyName = Annotated[str, typer.Argument(help="the sweep's study name (`cvmjob sweep ls` lists them)")]
EXIT_STOPPED = 4  # the sweep stopped before its trials (budget, brakes, deadline): nothing failed in cvmjob
EXIT_CANCELLED = 130


def _say(line: str) -> None:
    render.err.print(f"{datetime.now().strftime('%H:%M:%S')} {line}", markup=False, highlight=False)


Sets = Annotated[Optional[list[str]], typer.Option(  # noqa: UP045
    "--set", help="override a sweep spec field: key.path=value (as `run --set` does a job spec's)")]


@sweep_app.command("run")
def run(
    spec: Annotated[Path, typer.Argument(help="the sweep spec (YAML)")],
    set_: Sets = None,
    detach: Annotated[bool, typer.Option("--detach", "-d", help="run the sweep in the background")] = False,
    output: Output = "text",
    emulator: Emulator = False,
    yes: Yes = False,
) -> None:
    """Run the sweep (or continue it: the same study name goes on where it stopped) until it has its trials."""
    check_output(output)
    sweep = with_user_defaults(load_sweep(spec, set_ or []), load_user_config(cvmjob_home()))
    if unset := unset_urls(sweep.notify, os.environ):
        raise Abort("; ".join(unset), EXIT_BAD_INPUT)
    template = JobTemplate.of(sweep, spec.resolve())
    template.check(sweep)
    refuse_silent_emulator(emulator)  # the study is recorded before any trial resolves its target
    cap = (f"at most {render.money(sweep.budget.max_cost)} in all (budget.max_cost)" if sweep.budget.max_cost
           else "no budget.max_cost: nothing caps the total")
    job = template.document.get("name", template.path.name)
    ask_to_spend(f"start sweep {sweep.study}", f"{sweep.trials} trial(s) of {job}, {sweep.parallel} at a time, each at "
                 f"most its limits.max_runtime; {cap}", yes, output)
    if detach:
        sets = [arg for override in set_ or [] for arg in ("--set", override)]
        log = api.in_background(["sweep", "run", str(spec.resolve()), *sets, *(["--emulator"] if emulator else [])],
                                f"sweep-{sweep.study}")
        if output == "json":
            render.print_json({"study": sweep.study, "detached": True, "log": str(log)})
        else:
            render.console.print(f"sweep {sweep.study} runs in the background (its log: {log}); "
                                 f"`cvmjob sweep status {sweep.study}` follows it")
        return
    url = store_url()
    store = Store(url)
    study = S.open_study(sweep, url)
    me = controller_name()
    # The trials' jobs are driven in this process, by the controller service (other replicas of a shared store
    # take their share): a sweep killed with its controller loses nothing, the next run continues both.
    service = Service(Store(url), ServiceSettings(), say=lambda line: None)
    driver = threading.Thread(target=service.run, name="cvmjob-controller", daemon=True)
    live = LiveSweep(lambda: sweep_view(study, store), render.console) if (
        output == "text" and render.console.is_terminal) else None
    say = live.say if live is not None else _say
    sweeper = Sweeper(sweep, template, store, url, study, force_emulator=emulator, say=say, me=me)
    presses = {"count": 0}

    def on_signal(signum: int, frame: Any) -> None:
        presses["count"] += 1
        if presses["count"] == 1:
            say("cancelling the sweep: the running trials checkpoint and their instances go; Ctrl-C again leaves "
                 "them to a later `cvmjob sweep run`")

    try:
        sweeper.take_over()
    except SweepBusy as exc:
        raise Abort(str(exc), EXIT_BAD_INPUT) from None
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    driver.start()
    try:
        with live if live is not None else contextlib.nullcontext():
            state = sweeper.run(cancel=lambda: presses["count"] > 0, stop=lambda: presses["count"] > 1)
        sweeper.release()
    except SweepBusy as exc:  # another run took the study over while this one was stopped or cut off
        raise Abort(str(exc), EXIT_BAD_INPUT) from None
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        service.drain()
        driver.join(timeout=120)
    view = sweep_view(study, store)
    _show(view, output)
    if state == "cancelled":
        raise typer.Exit(EXIT_CANCELLED)
    if state == "stopped":
        raise typer.Exit(EXIT_STOPPED)


def _load(name: str) -> tuple[Any, Store]:
    url = store_url()
    try:
        return S.load_study(name, url), Store(url)
    except KeyError:
        raise Abort(f"no sweep {name!r} in this store: `cvmjob sweep ls` lists them", EXIT_BAD_INPUT) from None


@sweep_app.command()
def status(study: StudyName, output: Output = "text") -> None:
    """The sweep's trials, its best, and what it cost."""
    check_output(output)
    loaded, store = _load(study)
    _show(sweep_view(loaded, store), output)


@sweep_app.command("ls")
def list_sweeps(output: Output = "text") -> None:
    """Every sweep of this store."""
    check_output(output)
    url = store_url()
    store = Store(url)
    views = [sweep_view(S.load_study(name, url), store) for name in S.study_names(url)]
    if output == "json":
        render.print_json([{"study": v.study, "state": v.state, "trials": len(v.trials), "cost": v.cost,
                            "best": v.best.model_dump(mode="json") if v.best else None} for v in views])
        return
    render.console.print(sweeps_table(views))


def sweeps_table(views: list[SweepView]) -> Table:
    table = render.table()
    table.add_column("study", no_wrap=True)
    table.add_column("state", no_wrap=True)
    for column in ("trials", "best", "cost CNY"):
        table.add_column(column, justify="right", no_wrap=True)
    for v in views:
        table.add_row(v.study, v.state, str(len(v.trials)), f"{v.best.value:.4g}" if v.best and v.best.value is not
                      None else "-", f"{v.cost:.2f}")
    return table


@sweep_app.command()
def cancel(study: StudyName, output: Output = "text") -> None:
    """Stop the sweep: no more trials, and the running ones' jobs cancelled (checkpoint, upload, destroy)."""
    check_output(output)
    loaded, store = _load(study)
    cancel_sweep(loaded, store)
    if output == "json":
        render.print_json({"study": study, "cancelled": True})
        return
    render.console.print(f"sweep {study}: cancelled; its running trials' jobs are being torn down")


@sweep_app.command()
def report(
    study: StudyName,
    out: Annotated[Optional[Path], typer.Option("--out", help="the HTML file (default: <study>.html)")] = None,  # noqa: UP045
    output: Output = "text",
) -> None:
    """One self-contained HTML file (Optuna's plots, the cost per trial, the reclaims) and a PNG summary."""
    from ..sweep.report import write_report

    check_output(output)
    loaded, store = _load(study)
    html, png = write_report(loaded, sweep_view(loaded, store), out or Path(f"{study}.html"))
    if output == "json":
        render.print_json({"study": study, "html": str(html), "png": str(png)})
        return
    render.console.print(f"wrote {html} and {png}")


def _show(view: SweepView, output: str) -> None:
    if output == "json":
        render.print_json(view.model_dump(mode="json"))
        return
    render.console.print(trials_table(view))
    if view.best is not None:
        render.console.print(f"best: trial {view.best.number}, value {view.best.value}, params {view.best.params}")
    render.console.print(f"cost: {view.cost:.2f} CNY" + (f" of {view.max_cost:.2f}" if view.max_cost else ""))


def trials_table(view: SweepView) -> Table:
    """The trials, the parameters wrapping between values; the job ids whole."""
    table = render.table(f"sweep {view.study}: {view.state}" + (f" ({view.stopped_reason})" if view.stopped_reason
                                                                 else ""))
    table.add_column("trial", justify="right", no_wrap=True)
    table.add_column("state", no_wrap=True)
    table.add_column("value", justify="right", no_wrap=True)
    table.add_column("params", overflow="fold")
    table.add_column("CNY", justify="right", no_wrap=True)
    table.add_column("tries", justify="right", no_wrap=True)
    table.add_column("job", no_wrap=True)
    for t in view.trials:
        table.add_row(str(t.number), t.state.value, "-" if t.value is None else f"{t.value:.4g}",
                      show_values(t.params), f"{t.cost:.2f}", str(t.attempts), t.job_id or "-")
    return table
