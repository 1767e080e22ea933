"""Ask before spending: on a terminal, a command that starts billing shows what it will cost and waits for a yes;
a script, a pipe or CI (no terminal, or CI set) goes on as before, the estimate printed on stderr."""

from __future__ import annotations

import json
import sys
import time

import typer

from ..plan.models import Plan
from ..state.machine import EXIT_CODES, JobState
from ..target import in_ci
from .render import ceiling, err, money


def interactive() -> bool:
    """A person at a terminal who can answer: stdin and stdout are terminals and no CI runs us."""
    return sys.stdin.isatty() and sys.stdout.isatty() and not in_ci()


def estimate(plan: Plan) -> str:
    """The placement tried first and what the job may cost at most, in one line."""
    first = plan.primary
    line = (f"{plan.nnodes} x {first.label()} at "
            f"{money(first.price_per_hour)}/h each; {ceiling(plan)}")
    if len(plan.candidates) > 1:
        line += f"; {len(plan.candidates) - 1} other placement(s) if it is out of stock"
    return line


def ask_to_spend(what: str, cost: str, yes: bool, output: str) -> None:
    """``what`` (e.g. "start job demo") costs ``cost``: on a terminal, unless ``yes``, ask; a no ends the command
    with the cancelled exit code and nothing created. Elsewhere say the cost on stderr and go on."""
    if output == "json":
        sys.stderr.write(json.dumps({"time": round(time.time(), 3), "event": "estimate", "message": cost}) + "\n")
    else:
        err.print(f"estimate: {cost}", markup=False, highlight=False)
    if yes or not interactive():
        return
    if not typer.confirm(f"{what}?", default=False, err=True):
        err.print("not started: nothing was created", markup=False)
        raise typer.Exit(EXIT_CODES[JobState.CANCELLED])
