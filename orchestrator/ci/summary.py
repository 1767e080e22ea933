"""A run told to its pull request: GitHub-flavoured Markdown (`--summary markdown`, `$GITHUB_STEP_SUMMARY`) with
its metrics against a baseline run, what it cost and took, how often it was reclaimed, and its quality gates."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path

from ..contract import RunFacts
from ..state.machine import JobState
from ..text import duration
from .gate import GateResult

# Names, not a declared objective, say which way a metric should move: "acc" covers accuracy. A name that matches
# both lists, or neither, gets its change without a verdict.
_LOWER_IS_BETTER = ("loss", "error")
_HIGHER_IS_BETTER = ("acc", "f1", "auc", "precision", "recall")
_MISSING = "-"


def markdown(current: RunFacts, baseline: RunFacts | None, gates: list[GateResult]) -> str:
    blocks = [_heading(current, gates)]
    if current.up_to_date:
        blocks.append(f"Training was skipped: job `{current.job_id}` already succeeded on the same inputs (data, "
                      f"code, spec, image and cvmjob version){_finished(current)}; these are its results.")
    blocks += [_metrics(current, baseline), _baseline(current, baseline), _facts(current, baseline)]
    if gates:
        blocks.append("\n".join(["### Gates", "", *(_gate(r) for r in gates)]))
    return "\n\n".join(blocks)


def append_step_summary(text: str, env: Mapping[str, str]) -> Path | None:
    """Append to the file GitHub names in ``GITHUB_STEP_SUMMARY`` (each step's summaries add up on the run's page)."""
    name = env.get("GITHUB_STEP_SUMMARY")
    if not name:
        return None
    path = Path(name)
    with path.open("a", encoding="utf-8") as out:
        out.write(text + "\n")
    return path


def _heading(current: RunFacts, gates: list[GateResult]) -> str:
    failed = sum(not r.passed for r in gates)
    good = current.state == JobState.SUCCEEDED.value and not failed
    missed = f", {failed} of {len(gates)} gates failed" if failed else ""
    return f"## {'✅' if good else '❌'} {current.name}: {current.state}{missed}"


def _metrics(current: RunFacts, baseline: RunFacts | None) -> str:
    names = sorted(current.metrics.keys() | (baseline.metrics.keys() if baseline else set()))
    if not names:
        return "No metrics were reported (`trainkit.report(step, loss, name=value)` reports them)."
    if baseline is None:
        rows = ["| metric | this run |", "|---|---:|"]
        rows += [f"| `{n}` | {_number(current.metrics[n])} |" for n in names]
        return "\n".join(rows)
    rows = ["| metric | this run | baseline | change |", "|---|---:|---:|---|"]
    for n in names:
        now, then = current.metrics.get(n), baseline.metrics.get(n)
        rows.append(f"| `{n}` | {_number(now)} | {_number(then)} | {_change(n, now, then)} |")
    return "\n".join(rows)


def _change(name: str, now: float | None, then: float | None) -> str:
    if now is None:
        return "only in the baseline"
    if then is None:
        return "only in this run"
    delta = now - then
    if delta == 0:
        return "unchanged"
    relative = f" ({100 * delta / abs(then):+.1f}%)" if then else ""
    lower_is_better = _lower_is_better(name)
    verdict = "" if lower_is_better is None else ", better" if (delta < 0) == lower_is_better else ", worse"
    return f"{delta:+.4g}{relative}{verdict}"


def _lower_is_better(name: str) -> bool | None:
    lowered = name.lower()
    lower = any(word in lowered for word in _LOWER_IS_BETTER)
    higher = any(word in lowered for word in _HIGHER_IS_BETTER)
    return None if lower == higher else lower


def _baseline(current: RunFacts, baseline: RunFacts | None) -> str:
    if baseline is not None:
        ref = f" on `{baseline.ref}`" if baseline.ref else ""
        return f"**Baseline:** job `{baseline.job_id}`{_finished(baseline)}{ref}."
    ref = f" on `{current.ref}`" if current.ref else ""
    if current.state == JobState.SUCCEEDED.value:
        return f"**No baseline:** the first successful run of {current.name}{ref}."
    return f"**No baseline:** no successful run of {current.name}{ref} yet."


def _facts(current: RunFacts, baseline: RunFacts | None) -> str:
    cost, took = _cost(current.cost_cny), _duration(current.duration_seconds)
    if baseline is not None:
        cost += f" (baseline {_cost(baseline.cost_cny)})"
        took += f" (baseline {_duration(baseline.duration_seconds)})"
    return "\n".join([
        f"- **Cost:** {cost}",
        f"- **Duration:** {took}",
        f"- **Attempts:** {current.attempts}, **spot reclaims:** {current.reclaims}",
        f"- **Job:** `{current.job_id}`",
    ])


def _gate(result: GateResult) -> str:
    return f"- {'✅' if result.passed else '❌'} `{result.gate.expression}`: {result.message}"


def _finished(run: RunFacts) -> str:
    if run.finished_at is None:
        return ""
    return f", finished {datetime.fromtimestamp(run.finished_at, timezone.utc):%Y-%m-%d %H:%M} UTC"


def _number(value: float | None) -> str:
    # The precision of the CLI's metrics (text.show_values), so a value reads the same in both.
    return _MISSING if value is None else f"{value:.4g}"


def _cost(cny: float | None) -> str:
    return "unknown" if cny is None else f"{cny:.2f} CNY"


def _duration(seconds: float | None) -> str:
    return "unknown" if seconds is None else duration(seconds)
