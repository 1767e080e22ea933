"""cvmjob: run GPU training jobs on Tencent Cloud (or the local emulator).

Exit codes (also in the README): 0 success; 2 bad input (spec, flags), nothing created; 3 the cloud refused
before anything was created (credentials, permissions); 10-30 the job's failure states (see
``lifecycle.machine.EXIT_CODES``); 130 cancelled.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from ..controller.settings import LEASE_SECONDS
from ..errors import EXIT_BAD_INPUT, EXIT_CLOUD_ERROR, CvmjobError
from ..state.machine import EXIT_CODES, JobState
from ..text import show_values
from .bench import bench_app
from .ci import BaselineOption, CiReport, GateOption, SummaryOption, tell
from .controller import controller_app
from .cost import cost
from .download import download_command
from .emulator import emulator_app
from .lazy import lazy_module, lazy_name, loaded
from .options import Abort, Emulator, Output, Yes, check_output, help_options, version_option
from .pool import pool_app
from .sweep import sweep_app

# What the commands' bodies use is loaded when first used (cli/lazy.py): `cvmjob --help` needs none of it.
if TYPE_CHECKING:
    from .. import api
    from ..contract import FingerprintEntry
    from ..controller.drive import drive
    from ..controller.engine import Controls
    from ..spec import JobSpec
    from ..spec.durations import parse_duration
    from ..state.home import controller_name, store_url
    from ..state.outbox import Outbox
    from ..state.store import JobRecord, Store
    from ..target import embedded, in_ci, refuse_silent_emulator
    from . import render
    from .confirm import ask_to_spend, estimate
    from .live import JsonEvents, LiveRun
else:
    api = lazy_module("orchestrator.api")
    FingerprintEntry = lazy_name("orchestrator.contract", "FingerprintEntry")
    drive = lazy_name("orchestrator.controller.drive", "drive")
    Controls = lazy_name("orchestrator.controller.engine", "Controls")
    JobSpec = lazy_name("orchestrator.spec", "JobSpec")
    parse_duration = lazy_name("orchestrator.spec.durations", "parse_duration")
    controller_name = lazy_name("orchestrator.state.home", "controller_name")
    store_url = lazy_name("orchestrator.state.home", "store_url")
    Store = lazy_name("orchestrator.state.store", "Store")
    Outbox = lazy_name("orchestrator.state.outbox", "Outbox")
    embedded = lazy_module("orchestrator.target.embedded")
    in_ci = lazy_name("orchestrator.target", "in_ci")
    refuse_silent_emulator = lazy_name("orchestrator.target", "refuse_silent_emulator")
    render = lazy_module("orchestrator.cli.render")
    ask_to_spend = lazy_name("orchestrator.cli.confirm", "ask_to_spend")
    estimate = lazy_name("orchestrator.cli.confirm", "estimate")
    JsonEvents = lazy_name("orchestrator.cli.live", "JsonEvents")
    LiveRun = lazy_name("orchestrator.cli.live", "LiveRun")

app = typer.Typer(
    no_args_is_help=True, help=__doc__.split("\n")[0], pretty_exceptions_enable=False, context_settings=help_options,
    rich_markup_mode=None,
)
app.add_typer(bench_app, name="bench")
app.add_typer(controller_app, name="controller")
app.add_typer(emulator_app, name="emulator")
app.add_typer(pool_app, name="pool")
app.add_typer(sweep_app, name="sweep")
app.command()(cost)
app.command("download")(download_command)

SpecPath = Annotated[Path, typer.Argument(help="the job spec (YAML)", exists=False)]
Sets = Annotated[Optional[list[str]], typer.Option("--set", help="override a spec field: key.path=value")]  # noqa: UP045
JobRef = Annotated[str, typer.Argument(help="job id (or a unique prefix, or the job name)")]


def _store() -> Store:
    return Store(store_url())


@app.callback()
def _options(
    db: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--db", help="the state store: a postgresql:// URL (a team's shared store) or a SQLite file; default "
                     "$CVMJOB_DB, else $CVMJOB_HOME/state.db")] = None,
    version: Annotated[bool, version_option] = False,
) -> None:
    """cvmjob: run GPU training jobs on Tencent Cloud (or the local emulator)."""
    if db:
        os.environ["CVMJOB_DB"] = db  # for this process and the controllers it starts


def _say_target(report: api.PlanReport, output: str) -> None:
    if output == "text" and report.target.kind == "emulator":
        how = "no Tencent Cloud credentials were found" if report.target.embedded else "CVMJOB_ENDPOINT is set"
        render.console.print(f"[yellow]Running on the local Tencent Cloud emulator ({how}): nothing is billed.[/]")


@app.command()
def plan(spec: SpecPath, set_: Sets = None, output: Output = "text", emulator: Emulator = False) -> None:
    """Resolve the instance type and zone, price the job and validate it with a DryRun. Creates nothing."""
    check_output(output)
    report = api.plan(spec, set_ or [], emulator)
    if output == "json":
        render.print_json(render.plan_json(report))
    else:
        _say_target(report, output)
        render.show_plan(report)


@app.command()
def run(
    spec: SpecPath,
    set_: Sets = None,
    name: Annotated[Optional[str], typer.Option(help="override the job name")] = None,  # noqa: UP045
    detach: Annotated[
        bool, typer.Option("--detach", "-d", help="return once submitted; drive in the background")
    ] = False,
    output: Output = "text",
    emulator: Emulator = False,
    if_changed: Annotated[bool, typer.Option(
        "--if-changed", help="reuse a job that succeeded on the same inputs (data listings, workdir, spec, image, "
                             "cvmjob version) instead of training: exit 0 at once, no instance")] = False,
    summary: SummaryOption = None,
    gate: GateOption = None,
    baseline: BaselineOption = None,
    yes: Yes = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="on a terminal, leave the training's own output "
                                                              "out of the live view (`cvmjob logs` has it)")] = False,
    secret: Annotated[Optional[list[str]], typer.Option(  # noqa: UP045
        "--secret", help="an environment variable of this shell for the training (repeat for more), added to the "
                         "spec's secrets: its value is in no store, spec, log or fingerprint")] = None,
) -> None:
    """Run a job through its whole life: create, sync, train, checkpoint, image, destroy."""
    check_output(output)
    ci = CiReport.of(summary, gate, baseline)
    if detach and ci.wanted:
        raise Abort("--summary, --gate and --baseline tell a job's end: they need a run that waits for it "
                    "(drop --detach)", EXIT_BAD_INPUT)
    report = api.plan(spec, set_ or [], emulator, name, secret_names=secret or [])
    _say_target(report, output)
    if output == "text":  # what `plan` notes, a run says too: an unread balance, a bucket to create, stock now
        for note in report.notes:
            render.err.print(f"note: {note}", markup=False)
    ask_to_spend(f"start {report.spec.name}", estimate(report.plan), yes, output)
    inputs = api.fingerprint_of(report) if if_changed else None
    claimed = None
    if inputs is not None:
        # Another runner training on the same inputs is followed, not raced (docs/ci.md, "--if-changed").
        reused = api.claim_inputs(report, inputs, _say_following)
        if isinstance(reused, FingerprintEntry):
            store = _store()
            _say_up_to_date(store, reused, output)
            code = tell(ci, store, api.find_job(store, reused.job_id), up_to_date=True)
            if code is not None:
                raise typer.Exit(code)
            return
        claimed = reused
    store = _store()
    me = None if detach else controller_name()
    job_id = api.submit(report, store, lease=None if me is None else (me, LEASE_SECONDS), job_id=claimed,
                        inputs=inputs)
    if output == "text":
        render.console.print(f"job [bold]{job_id}[/] submitted ({report.plan.primary.label()})")
    if detach:
        handed = api.hand_to_controller(store, LEASE_SECONDS)
        if output == "json":
            render.print_json({"job_id": job_id, "detached": True, "controller": handed,
                               **({} if inputs is None else {"up_to_date": False})})
        else:
            render.console.print(f"driven by {handed}; `cvmjob status {job_id}` shows where it is")
        return
    _drive_foreground(store, job_id, output, me=me, ci=ci, quiet=quiet)


def _say_following(job_id: str) -> None:
    # On stderr whatever the output: a CI log shows why this step waits, and --output json stays one document.
    render.err.print(f"job {job_id} is training on these inputs (another runner): following it to reuse its result",
                     markup=False)


def _say_up_to_date(store: Store, entry: FingerprintEntry, output: str) -> None:
    if output == "json":  # the shape of a trained run's document (docs/schemas/run.json), up_to_date telling which
        job = api.find_job(store, entry.job_id)
        nodes, events = api.job_history(store, job)
        render.print_json({**render.job_json(job, events, nodes, api.agent_view(job, every_node=True)),
                           "up_to_date": True, "reused": render.reused_json(entry)})
        return
    render.console.print(f"up to date: job [bold]{entry.job_id}[/] ({entry.name}) succeeded on these inputs at "
                         f"{render.when(entry.finished_at)}; its outputs are in {render.cos_uri(entry.outputs)}"
                         + (f"; metrics: {show_values(entry.metrics)}" if entry.metrics else ""))


def _drive_foreground(store: Store, job_id: str, output: str, force: bool = False, me: str | None = None,
                      ci: CiReport | None = None, quiet: bool = False) -> None:
    controls = Controls()
    view = _view(store, job_id, output, quiet)
    presses = {"count": 0}

    def on_signal(signum: int, frame: Any) -> None:
        presses["count"] += 1
        # Under CI a signal is the runner cancelling the workflow, which kills us seconds later (GitHub: SIGKILL 10 s
        # after its SIGINT): a checkpoint taking longer would leave the instance billing until its ActionTimer, and
        # nothing resumes a cancelled job, so the first signal tears down at once.
        at_once = presses["count"] > 1 or in_ci()
        if presses["count"] == 1:
            store.request_cancel(job_id, time.time(), checkpoint=not at_once)  # for whoever drives it if we die
        if at_once:
            controls.tear_down_now()
        if output == "text":
            render.err.print(
                "[red]Tearing down now.[/]" if at_once else "[yellow]Cancelling: the agent checkpoints and "
                "uploads, then the instance is destroyed. Press Ctrl-C again to tear down at once.[/]"
            )
        controls.interrupted.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with view if isinstance(view, LiveRun) else contextlib.nullcontext():
            job = drive(store, job_id, controls=controls, force_lease=force, me=me, emit=view.event,
                        on_round=view.round)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    _finish(store, job, output, ci)


def _view(store: Store, job_id: str, output: str, quiet: bool) -> LiveRun | JsonEvents | render.Progress:
    """How the drive is shown: JSON lines on stderr, a live panel on a terminal, plain lines elsewhere."""
    if output == "json":
        return JsonEvents()
    if render.console.is_terminal:
        return LiveRun(store, job_id, render.console, quiet)
    return render.Progress()


def _finish(store: Store, job: Any, output: str, ci: CiReport | None = None) -> None:
    view = api.agent_view(job, every_node=True)
    gated = tell(ci, store, job, view) if ci is not None else None
    api.release_embedded(store)  # after reading the agents' last words from it
    events = store.events(job.job_id)
    if output == "json":  # docs/schemas/run.json: the shape of an up-to-date run's too
        render.print_json({"up_to_date": False, **render.job_json(job, events, store.nodes(job.job_id), view)})
    else:
        render.summary(job, events, store.nodes(job.job_id), view)
    raise typer.Exit(gated if gated is not None else EXIT_CODES.get(job.state, 1))


@app.command("_drive", hidden=True)
def drive_detached(job: JobRef) -> None:
    """Drive a submitted job to its end (the background half of `run --detach`)."""
    store = _store()
    record = api.find_job(store, job)
    _drive_foreground(store, record.job_id, "text")


@app.command()
def resume(
    job: JobRef,
    detach: Annotated[bool, typer.Option("--detach", "-d", help="return at once; drive in the background")] = False,
    force: Annotated[bool, typer.Option(help="take over even if another controller's lease looks alive")] = False,
    output: Output = "text",
) -> None:
    """Drive a job again after its controller died: the store and the cloud say where it was."""
    check_output(output)
    store = _store()
    record = api.find_job(store, job)
    if store.get(record.job_id) is None:
        raise Abort(f"{record.job_id} is held by another machine's store (its controller: {record.lease_owner}): "
                    "resume it there, or share one store between the machines (CVMJOB_DB)", EXIT_BAD_INPUT)
    if record.state.is_terminal():
        _finish(store, record, output)
    if detach:
        log = api.spawn_driver(record.job_id)
        if output == "json":
            render.print_json({"job_id": record.job_id, "detached": True, "log": str(log)})
        else:
            render.console.print(f"driven in the background (its log: {log})")
        return
    _drive_foreground(store, record.job_id, output, force)


def job_or_newest(store: Store, job: str | None) -> JobRecord:
    """The job ``job`` names, or with none the newest job (`status`, `logs`)."""
    if job is not None:
        return api.find_job(store, job)
    jobs = store.list_jobs()
    if not jobs:
        raise Abort("no jobs yet: `cvmjob run job.yaml` starts one", EXIT_BAD_INPUT)
    return jobs[0]


NewestJob = Annotated[Optional[str], typer.Argument(  # noqa: UP045
    help="job id (or a unique prefix, or the job name); default: the newest job")]


@app.command()
def status(job: NewestJob = None, output: Output = "text") -> None:
    """Show a job's state, phases with timestamps, instances, checkpoints and cost."""
    check_output(output)
    store = _store()
    record = job_or_newest(store, job)
    if output == "json":
        render.print_json(status_document(store, record))
        return
    nodes, events = api.job_history(store, record)
    render.show_job(record, events, nodes, api.agent_view(record, every_node=True))
    render.show_notifications(Outbox(store).of(record.job_id))


def status_document(store: Store, record: JobRecord) -> dict[str, Any]:
    """What `cvmjob status --output json` prints of ``record``."""
    nodes, events = api.job_history(store, record)
    return {**render.job_json(record, events, nodes, api.agent_view(record, every_node=True)),
            "notifications": render.notifications_json(Outbox(store).of(record.job_id))}


@app.command("ls")
def list_jobs(
    active: Annotated[bool, typer.Option("--active", "-a", help="only the jobs that have not ended")] = False,
    output: Output = "text",
) -> None:
    """List jobs, newest first."""
    check_output(output)
    jobs = _store().list_jobs(active_only=active)
    if output == "json":
        render.print_json(
            [
                {
                    "job_id": j.job_id,
                    "name": j.name,
                    "state": j.state.value,
                    "attempt": j.attempt,
                    "created_at": j.created_at,
                    "cost_cny": j.cost_cny,
                }
                for j in jobs
            ]
        )
    else:
        render.console.print(render.jobs_table(jobs))


@app.command()
def logs(
    job: NewestJob = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="keep printing new lines until the job ends")] = False,
    attempt: Annotated[Optional[int], typer.Option(help="default: the current attempt")] = None,  # noqa: UP045
    node: Annotated[int, typer.Option(help="which node's log, numbered from 0")] = 0,
    output: Output = "text",
) -> None:
    """Print the agent's and the training's log (shipped to COS in chunks). With --output json, one JSON object a
    line: {"job_id", "attempt", "node", "line"} (the line without its newline), as the lines come with -f."""
    check_output(output)
    store = _store()
    record = job_or_newest(store, job)
    if attempt is not None and not 1 <= attempt <= record.attempt:
        raise Abort(f"--attempt {attempt}: {record.job_id} has attempts 1..{record.attempt}", EXIT_BAD_INPUT)
    history = api.job_history(store, record)[0]
    nodes = sorted({n.node for n in history if n.attempt == (attempt or record.attempt)})
    if node < 0 or (nodes and node not in nodes):  # no nodes yet: `logs -f` waits for them
        known = f"the attempt's nodes are {', '.join(map(str, nodes))}" if nodes else "nodes are numbered from 0"
        raise Abort(f"--node {node}: {known}", EXIT_BAD_INPUT)
    gpus = render.StarvedGpus(render.err)  # on stderr: stdout is the log as it was written

    def look(current: JobRecord) -> None:
        beat = api.heartbeats(current, [node], attempt).get(node)
        if beat is not None:
            types = [n.instance_type for n in history if n.attempt == beat.attempt and n.node == node]
            gpus.tell(current, node, types[0] if types else None, beat)

    chunks = api.follow_logs(store, record, attempt, node, follow, look)
    if output == "text":
        for text in chunks:
            sys.stdout.write(text)
            sys.stdout.flush()
        return
    where = {"job_id": record.job_id, "attempt": attempt or record.attempt, "node": node}

    def say(lines: list[str]) -> None:
        sys.stdout.write("".join(json.dumps({**where, "line": line}, ensure_ascii=False) + "\n" for line in lines))
        sys.stdout.flush()

    rest = ""  # a chunk may end mid-line (the log is shipped in pieces): its end waits for the next one
    for text in chunks:
        *whole, rest = (rest + text).split("\n")
        say(whole)
    say([rest] if rest else [])


@app.command()
def cancel(job: JobRef, wait: Annotated[bool, typer.Option(help="wait until the job has ended")] = False,
           checkpoint: Annotated[bool, typer.Option(
               help="ask the training for an emergency checkpoint first; --no-checkpoint stops it at once, for work "
                    "nothing will continue: its instances go within seconds")] = True,
           output: Output = "text",
           ) -> None:
    """Cancel gracefully: the agent checkpoints and uploads, then everything is torn down. With --output json:
    {"job_id", "requested" (false: it had ended), "through" (store, state_bucket or null), "controller", "state",
    "terminal"}, the state once ended with --wait."""
    check_output(output)
    text = output == "text"
    store = _store()
    record = api.find_job(store, job)
    through = None
    if record.state.is_terminal():
        if text:
            render.console.print(f"{record.job_id} already ended: {record.state.value}")
    else:
        api.cancel(store, record, checkpoint=checkpoint)
        through = "state_bucket" if store.get(record.job_id) is None else "store"
        if through == "state_bucket" and text:
            render.console.print(f"cancel of {record.job_id} signalled in its state bucket; the controller driving it "
                                 f"({record.lease_owner or 'none known'}) acts on it at its next round")
        elif text:
            render.console.print(f"cancel requested for {record.job_id}; the controller driving it acts on it")
        if through == "store" and (record.lease_owner is None or record.lease_expires < time.time()):
            # On stderr under JSON: stdout stays one document.
            (render.console if text else render.err).print(
                "no controller is driving it: `cvmjob resume` it to carry the cancel out", markup=False)
        if wait:
            record = api.wait(store, record)
            if text:
                render.console.print(f"{record.job_id}: {record.state.value}")
    if not text:
        render.print_json({"job_id": record.job_id, "requested": through is not None, "through": through,
                           "controller": record.lease_owner, "state": record.state.value,
                           "terminal": record.state.is_terminal()})


@app.command()
def gc(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="show what would be cleaned")] = False,
    grace: Annotated[str, typer.Option(help="leave a resource of a job this store does not hold alone until this "
                                            "old (unless the job's document says it ended)")] = "10m",
    region: Annotated[str, typer.Option(help="the region to clean")] = "ap-guangzhou",
    emulator: Emulator = False,
    output: Output = "text",
) -> None:
    """Terminate instances and delete images tagged by cvmjob whose job has ended or was abandoned (never another
    home's live job; an instance still PENDING is waited for)."""
    check_output(output)
    try:
        grace_seconds = parse_duration(grace)
    except ValueError as exc:
        raise Abort(f"--grace: {exc}", EXIT_BAD_INPUT) from exc
    refuse_silent_emulator(emulator)  # before the store is opened: a refused target leaves nothing behind
    orphans = api.gc(_store(), region, emulator, grace_seconds, dry_run)
    plan_ = {"instances": [i.instance_id for i in orphans.instances], "images": [i.image_id for i in orphans.images]}
    if output == "json":
        render.print_json({**plan_, "dry_run": dry_run})
    else:
        verb = "would clean" if dry_run else "cleaned"
        render.console.print(
            f"{verb}: {len(plan_['instances'])} instance(s) {plan_['instances']}, "
            f"{len(plan_['images'])} image(s) {plan_['images']}"
        )


@app.command()
def doctor(
    region: Annotated[str | None, typer.Option(help="the region to check (default: CVMJOB_REGION, else "
                                                    "ap-guangzhou)")] = None,
    emulator: Emulator = False,
    output: Output = "text",
) -> None:
    """Check that this machine's keys could run a job: credentials, each permission (probed without creating
    anything), balance, network, spot and on-demand quotas, images, the state bucket. Exit 0 only if a job could run."""
    check_output(output)
    refuse_silent_emulator(emulator)
    checks = api.doctor(region or os.environ.get("CVMJOB_REGION") or api.HOME_REGION, emulator)
    if output == "json":
        render.print_json({"ok": all(c.ok for c in checks), "checks": [dataclasses.asdict(c) for c in checks]})
    else:
        for c in checks:
            line = f"{'ok' if c.ok else 'NO'}  {c.name}: {c.detail}" + (f". fix: {c.fix}" if c.fix else "")
            render.console.print(line, markup=False, highlight=False, soft_wrap=True)
    if not all(c.ok for c in checks):
        raise typer.Exit(EXIT_CLOUD_ERROR)


@app.command()
def schema(
    sweep: Annotated[bool, typer.Option("--sweep", help="the sweep spec's schema instead of the job spec's")] = False,
) -> None:
    """Print the job spec's (or, with --sweep, the sweep spec's) JSON Schema, for editors."""
    from ..sweep.spec import SweepSpec

    model = SweepSpec if sweep else JobSpec
    sys.stdout.write(json.dumps(model.model_json_schema(), indent=2) + "\n")


def _error(message: str) -> None:
    """One plain line per problem on stderr: no wrapping, no markup, no traceback."""
    sys.stderr.write("".join(f"error: {line}\n" for line in message.splitlines() or [message]))


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; usage errors exit 2 (typer), the project's errors are one line each with their exit code."""
    try:
        app(args=argv, prog_name="cvmjob")  # the same usage lines under `python -m orchestrator.cli.main`
    except CvmjobError as exc:  # the cloud's refusals among them (CloudError)
        _error(exc.hint())
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(EXIT_CODES[JobState.CANCELLED])
    finally:
        _release_embedded()


def _release_embedded() -> None:
    """The embedded emulator lives for the jobs' duration: once no active job needs it (a plan, a finished run, a
    rejected spec), it stops. A command that never started it (`--help`, `--version`) imports nothing for this."""
    if not loaded("orchestrator.target.embedded"):
        return
    from ..state.home import HomeError
    from ..state.store import StoreError

    with contextlib.suppress(HomeError, StoreError):  # already said, if it is what failed
        if embedded.running() is not None:
            api.release_embedded(_store())


if __name__ == "__main__":
    main()
