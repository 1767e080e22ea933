"""`cvmjob run --summary markdown --gate ... --baseline JOB`: what a CI run tells its pull request once the job has
ended (or was reused): the summary (to ``$GITHUB_STEP_SUMMARY`` when set, else stderr) and the quality gates,
whose miss is its own exit code (errors.EXIT_GATE_FAILED)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..errors import EXIT_BAD_INPUT, EXIT_GATE_FAILED
from .lazy import lazy_module, lazy_name
from .options import Abort

if TYPE_CHECKING:  # loaded at first use (cli/lazy.py): `cvmjob --help` needs none of it
    from .. import api
    from ..ci.gate import Gate, check, parse_gate
    from ..ci.summary import append_step_summary, markdown
    from ..state.store import JobRecord, Store
    from . import render
else:
    api = lazy_module("orchestrator.api")
    check = lazy_name("orchestrator.ci.gate", "check")
    parse_gate = lazy_name("orchestrator.ci.gate", "parse_gate")
    append_step_summary = lazy_name("orchestrator.ci.summary", "append_step_summary")
    markdown = lazy_name("orchestrator.ci.summary", "markdown")
    render = lazy_module("orchestrator.cli.render")

SummaryOption = Annotated[Optional[str], typer.Option(  # noqa: UP045
    "--summary", help="markdown: once the job has ended, its metrics against a baseline, cost, duration, attempts "
                      "and reclaims, appended to $GITHUB_STEP_SUMMARY when set (else printed to stderr)")]
GateOption = Annotated[Optional[list[str]], typer.Option(  # noqa: UP045
    "--gate", help=f"a metric's bound, e.g. \"val_loss<=0.30\" (repeatable); a succeeded job that misses one exits "
                   f"{EXIT_GATE_FAILED}")]
BaselineOption = Annotated[Optional[str], typer.Option(  # noqa: UP045
    "--baseline", help="the job id the summary compares with; default: the newest success of the same name on the "
                       "default branch (CVMJOB_BASELINE_REF, else the repository's)")]


@dataclass(frozen=True)
class CiReport:
    summary: bool = False
    gates: list[Gate] = field(default_factory=list)
    baseline: str | None = None

    @classmethod
    def of(cls, summary: str | None, gates: list[str] | None, baseline: str | None) -> CiReport:
        """Checked before anything is submitted: a bad flag creates nothing."""
        if summary not in (None, "markdown"):
            raise Abort(f"--summary {summary}: the one format is markdown", EXIT_BAD_INPUT)
        return cls(summary == "markdown", [parse_gate(g) for g in gates or []], baseline)

    @property
    def wanted(self) -> bool:
        return self.summary or bool(self.gates) or self.baseline is not None


def tell(report: CiReport, store: Store, job: JobRecord, view: api.AgentView | None = None,
         up_to_date: bool = False) -> int | None:
    """The summary written and the gates checked; EXIT_GATE_FAILED when the job succeeded and missed one."""
    if not report.wanted:
        return None
    current = api.run_facts_of(store, job, view, up_to_date)
    results = check(report.gates, current.metrics)
    if report.summary:
        text = markdown(current, api.baseline_for(store, job, report.baseline), results)
        if append_step_summary(text, os.environ) is None:
            render.err.print(text, markup=False)
    missed = [f"gate {r.gate.expression}: {r.message}" for r in results if not r.passed]
    for line in missed:
        render.err.print(line, markup=False)
    if not missed or current.state != "SUCCEEDED":
        return None
    api.notify_gate_missed(store, job, missed)
    return EXIT_GATE_FAILED
