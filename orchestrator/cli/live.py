"""What `cvmjob run` shows while it drives a job: on a terminal a live panel (phase and its time, step N of M, pace
and ETA, cost so far, each node's GPUs) with the events and the training's own output (node 0's shipped log)
printed above it; with ``--output json`` the same events as JSON lines on stderr. Off a terminal, the plain lines
of render.Progress."""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from .. import api
from ..contract import Status
from ..lifecycle.observation import Observation
from ..providers.tencent.errors import CloudError
from ..state.store import JobRecord, Store
from ..sweep.models import SweepView
from ..text import duration
from .render import StarvedGpus, money

LOG_EVERY = 2.0  # seconds between looks for newly shipped log chunks (a LIST of the attempt's log prefix each)


@dataclass
class Pace:
    """Steps per second of the current attempt, from the first and the newest heartbeat seen of it."""

    attempt: int = 0
    first: tuple[int, float] | None = None
    last: tuple[int, float] | None = None

    def see(self, attempt: int, status: Status) -> None:
        if status.step is None:
            return
        if attempt != self.attempt:
            self.attempt, self.first = attempt, None
        point = (status.step, status.time)
        self.first = self.first or point
        self.last = point

    def per_second(self) -> float | None:
        if self.first is None or self.last is None or self.last[1] <= self.first[1] or self.last[0] <= self.first[0]:
            return None
        return (self.last[0] - self.first[0]) / (self.last[1] - self.first[1])


@dataclass
class Seen:
    """What the panel shows, updated by the driving thread and read by rich's refresh thread."""

    job: JobRecord | None = None
    status: Status | None = None
    gpus: dict[int, float] = field(default_factory=dict)  # node -> mean utilisation of its GPUs now
    cost: float = 0.0
    notice: str | None = None


def cost_so_far(store: Store, job_id: str, now: float) -> float:
    """The bill where the cloud gave one, else each node's price for its running time until ``now``."""
    total = 0.0
    for node in store.nodes(job_id):
        known = node.cost_cny if node.cost_cny is not None else node.priced(node.price_per_hour, now)
        total += known or 0.0
    return total


class LiveRun:
    """The live panel of one job on a terminal (a context manager around the drive)."""

    def __init__(self, store: Store, job_id: str, console: Console, quiet: bool = False,
                 now: Callable[[], float] = time.time) -> None:
        self._store, self._job_id, self._console, self._quiet, self._now = store, job_id, console, quiet, now
        self._seen = Seen(job=store.get(job_id))
        self._pace = Pace()
        self._gpus = StarvedGpus(console)
        self._live = Live(self, console=console, refresh_per_second=2, transient=True, redirect_stdout=False,
                          redirect_stderr=False)
        self._stop = threading.Event()
        self._logs = threading.Thread(target=self._follow_logs, name="live-logs", daemon=True)

    def __enter__(self) -> LiveRun:
        self._live.start()
        if not self._quiet:
            self._logs.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        if self._logs.is_alive():
            self._logs.join(timeout=10)
        self._live.stop()

    def event(self, kind: str, message: str) -> None:
        self._console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {escape(message)}")

    def round(self, job: JobRecord, observation: Observation | None) -> None:
        seen = self._seen
        seen.job = job
        seen.cost = cost_so_far(self._store, job.job_id, self._now())
        if observation is None:
            return
        gpus = {}
        for node in observation.nodes:
            if node.status is None:
                continue
            if node.status.gpus:
                gpus[node.node] = sum(g.utilization for g in node.status.gpus) / len(node.status.gpus)
            self._gpus.tell(job, node.node, node.instance.instance_type if node.instance else None, node.status)
        seen.gpus = gpus
        status = observation.nodes[0].status if observation.nodes else None
        if status is not None:
            seen.status = status
            seen.notice = status.notice_time
            self._pace.see(job.attempt, status)

    def _follow_logs(self) -> None:
        """Node 0's log as the agent ships it (every few seconds), printed above the panel."""
        attempt, after = 0, ""
        while not self._stop.wait(LOG_EVERY):
            job = self._seen.job
            if job is None:
                continue
            if job.attempt != attempt:
                attempt, after = job.attempt, ""
            try:
                for key, text in api.log_chunks(job, attempt, 0, after=after):
                    after = key
                    self._console.print(Text(text.rstrip("\n"), style="dim"), highlight=False, soft_wrap=True)
            except CloudError:
                continue  # the next look tries again; the drive itself says when COS is really gone

    def __rich__(self) -> RenderableType:
        return panel(self._seen, self._pace, self._now())


def panel(seen: Seen, pace: Pace, now: float) -> RenderableType:
    """The panel's lines: job and phase, the training's progress, money and GPUs."""
    job = seen.job
    if job is None:
        return Text("")
    head = Text.assemble((job.job_id, "bold"), f" ({job.name})  ", (job.state.value, "bold cyan"),
                         f" {duration(max(0.0, now - job.entered_at))}", f"  attempt {job.attempt}")
    lines: list[RenderableType] = [head]
    status = seen.status
    if status is not None and status.attempt == job.attempt:
        lines.append(training_line(status, pace))
        if status.total_steps and status.step is not None:
            lines.append(ProgressBar(total=status.total_steps, completed=status.step + 1, width=40))
    grid = Table.grid(padding=(0, 2))
    grid.add_row(f"cost so far {money(seen.cost)}",
                 "  ".join(f"GPU node {n}: {u:.0f}%" for n, u in sorted(seen.gpus.items())))
    lines.append(grid)
    if seen.notice:
        lines.append(Text(f"spot reclaim notice: the instance goes at {seen.notice}", style="yellow"))
    return Group(*lines)


def training_line(status: Status, pace: Pace) -> Text:
    """``phase  step N/M (P%)  R steps/s  ETA T  loss L``, each part when known."""
    parts = [status.phase.value]
    if status.sync_bytes_total and status.step is None:
        parts.append(f"data {status.sync_bytes_done / 1e6:.1f}/{status.sync_bytes_total / 1e6:.1f} MB")
    if status.step is not None:
        done = status.step + 1
        parts.append(f"step {done}/{status.total_steps} ({100 * done / status.total_steps:.0f}%)"
                     if status.total_steps else f"step {done}")
        rate = pace.per_second()
        if rate:
            parts.append(f"{rate:.3g} steps/s")
            if status.total_steps and status.total_steps > done:
                parts.append(f"ETA {duration((status.total_steps - done) / rate)}")
    if status.loss is not None:
        parts.append(f"loss {status.loss:.4g}")
    if status.checkpoints_uploaded:
        parts.append(f"{status.checkpoints_uploaded} checkpoint(s)")
    return Text("  ".join(parts))


class JsonEvents:
    """``--output json``: each event, and each change of the training's phase or step, as one JSON line on stderr
    (stdout keeps the one result document)."""

    def __init__(self, out: Any = None) -> None:
        self._out = out or sys.stderr
        self._last: tuple[Any, ...] = ()

    def _write(self, doc: dict[str, Any]) -> None:
        self._out.write(json.dumps({"time": round(time.time(), 3), **doc}) + "\n")
        self._out.flush()

    def event(self, kind: str, message: str) -> None:
        self._write({"event": kind, "message": message})

    def round(self, job: JobRecord, observation: Observation | None) -> None:
        status = observation.nodes[0].status if observation is not None and observation.nodes else None
        if status is None:
            return
        now = (job.attempt, status.phase.value, status.step, status.checkpoints_uploaded)
        if now != self._last:
            self._last = now
            self._write({"event": "progress", "job_id": job.job_id, "state": job.state.value, "attempt": job.attempt,
                         "phase": status.phase.value, "step": status.step, "total_steps": status.total_steps,
                         "loss": status.loss, "checkpoints_uploaded": status.checkpoints_uploaded})


class LiveSweep:
    """A sweep's live table on a terminal: each trial's state, step, latest value, cost and job, and the best so
    far, read from the study every few seconds; the sweep's lines printed above it (``say``)."""

    def __init__(self, view: Callable[[], SweepView], console: Console, every: float = 3.0) -> None:
        self._view, self._console, self._every = view, console, every
        self._shown: RenderableType = Text("")
        self._at = 0.0
        self._live = Live(self, console=console, refresh_per_second=1, transient=True, redirect_stdout=False,
                          redirect_stderr=False)

    def __enter__(self) -> LiveSweep:
        self._live.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._live.stop()

    def say(self, line: str) -> None:
        self._console.print(f"{time.strftime('%H:%M:%S')} {line}", markup=False, highlight=False)

    def __rich__(self) -> RenderableType:
        if time.monotonic() - self._at >= self._every:
            self._at = time.monotonic()
            # A failed look keeps the last table; the sweep itself says what failed.
            with contextlib.suppress(Exception):
                self._shown = sweep_panel(self._view())
        return self._shown


def sweep_panel(view: SweepView) -> RenderableType:
    """The trials as they stand, the best so far and the money."""
    table = Table(title=f"sweep {view.study}: {view.state}", title_justify="left", box=None, padding=(0, 1))
    for column, justify in (("trial", "right"), ("state", "left"), ("step", "right"), ("value", "right"),
                            ("CNY", "right"), ("job", "left")):
        table.add_column(column, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for t in view.trials:
        step = max(t.intermediate, default=None)
        value = t.value if t.value is not None else (t.intermediate[step] if step is not None else None)
        table.add_row(str(t.number), t.state.value, "-" if step is None else str(step),
                      "-" if value is None else f"{value:.4g}", f"{t.cost:.2f}", t.job_id or "-")
    best = (f"best so far: trial {view.best.number}, {view.metrics[0] if view.metrics else 'value'} "
            f"{view.best.value:.4g}" if view.best is not None and view.best.value is not None else "best so far: -")
    money_line = f"cost {money(view.cost)}" + (f" of {money(view.max_cost)}" if view.max_cost else "")
    return Group(table, Text(f"{best}   {money_line}"))
