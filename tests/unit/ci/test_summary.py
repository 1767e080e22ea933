"""The pull request's summary: the metrics against a baseline, the run's facts, the gates, the step summary file."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from orchestrator.ci.gate import check, parse_gate
from orchestrator.ci.summary import append_step_summary, markdown
from orchestrator.contract import RunFacts

FINISHED = datetime(2024, 5, 1, 12, 30, tzinfo=timezone.utc).timestamp()


def facts(**changes: Any) -> RunFacts:
    run: dict[str, Any] = {
        "job_id": "j-new", "name": "quickstart", "state": "SUCCEEDED",
        "metrics": {"val_loss": 0.281, "val_accuracy": 0.91}, "cost_cny": 1.234, "duration_seconds": 252.7,
        "attempts": 2, "reclaims": 1, "finished_at": FINISHED + 86400, "ref": "refs/pull/7/merge",
    }
    return RunFacts(**{**run, **changes})


BASELINE = facts(job_id="j-old", metrics={"val_loss": 0.342, "val_accuracy": 0.88}, cost_cny=1.5,
                 duration_seconds=300.0, attempts=1, reclaims=0, finished_at=FINISHED, ref="main")


def table(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("|")]


def test_the_summary_against_a_baseline() -> None:
    assert markdown(facts(), BASELINE, []) == "\n".join([
        "## ✅ quickstart: SUCCEEDED",
        "",
        "| metric | this run | baseline | change |",
        "|---|---:|---:|---|",
        "| `val_accuracy` | 0.91 | 0.88 | +0.03 (+3.4%), better |",
        "| `val_loss` | 0.281 | 0.342 | -0.061 (-17.8%), better |",
        "",
        "**Baseline:** job `j-old`, finished 2024-05-01 12:30 UTC on `main`.",
        "",
        "- **Cost:** 1.23 CNY (baseline 1.50 CNY)",
        "- **Duration:** 4m12s (baseline 5m00s)",
        "- **Attempts:** 2, **spot reclaims:** 1",
        "- **Job:** `j-new`",
    ])


def test_the_first_successful_run_has_no_baseline_and_says_so() -> None:
    assert markdown(facts(), None, []) == "\n".join([
        "## ✅ quickstart: SUCCEEDED",
        "",
        "| metric | this run |",
        "|---|---:|",
        "| `val_accuracy` | 0.91 |",
        "| `val_loss` | 0.281 |",
        "",
        "**No baseline:** the first successful run of quickstart on `refs/pull/7/merge`.",
        "",
        "- **Cost:** 1.23 CNY",
        "- **Duration:** 4m12s",
        "- **Attempts:** 2, **spot reclaims:** 1",
        "- **Job:** `j-new`",
    ])


def test_a_failed_run_without_a_baseline_is_not_called_the_first_successful_one() -> None:
    text = markdown(facts(state="FAILED_PREEMPTED", ref=None, cost_cny=None, duration_seconds=None), None, [])
    assert text.splitlines()[0] == "## ❌ quickstart: FAILED_PREEMPTED"
    assert "**No baseline:** no successful run of quickstart yet." in text
    assert "- **Cost:** unknown\n- **Duration:** unknown\n" in text


def test_a_metric_of_only_one_run_is_shown_with_the_other_side_missing() -> None:
    current = facts(metrics={"val_loss": 0.3, "val_f1": 0.7})
    baseline = facts(job_id="j-old", metrics={"val_loss": 0.3, "perplexity": 12.5})
    assert table(markdown(current, baseline, []))[2:] == [
        "| `perplexity` | - | 12.5 | only in the baseline |",
        "| `val_f1` | 0.7 | - | only in this run |",
        "| `val_loss` | 0.3 | 0.3 | unchanged |",
    ]


@pytest.mark.parametrize(("name", "now", "then", "change"), [
    ("train_loss", 0.5, 0.4, "+0.1 (+25.0%), worse"),
    ("val_error_rate", 0.1, 0.2, "-0.1 (-50.0%), better"),
    ("top1_acc", 0.7, 0.8, "-0.1 (-12.5%), worse"),
    ("val_accuracy", 0.8, 0.7, "+0.1 (+14.3%), better"),
    ("F1", 0.6, 0.5, "+0.1 (+20.0%), better"),  # names are matched whatever their case
    ("roc_auc", 0.6, 0.5, "+0.1 (+20.0%), better"),
    ("precision", 0.6, 0.5, "+0.1 (+20.0%), better"),
    ("recall", 0.4, 0.5, "-0.1 (-20.0%), worse"),
    ("perplexity", 10.0, 12.5, "-2.5 (-20.0%)"),  # no direction known: the change alone
    ("loss_of_acc", 0.6, 0.5, "+0.1 (+20.0%)"),  # both directions match: no verdict
    ("margin", 0.5, 0.0, "+0.5"),  # no relative change from zero
    ("bias", -1.0, -2.0, "+1 (+50.0%)"),  # relative to the baseline's magnitude
])
def test_the_change_says_better_or_worse_only_where_the_name_tells_the_direction(
        name: str, now: float, then: float, change: str) -> None:
    (row,) = table(markdown(facts(metrics={name: now}), facts(metrics={name: then}), []))[2:]
    assert row == f"| `{name}` | {now:.4g} | {then:.4g} | {change} |"


def test_a_run_without_metrics_says_how_to_report_them() -> None:
    text = markdown(facts(metrics={}), facts(job_id="j-old", metrics={}), [])
    assert table(text) == []
    assert "No metrics were reported (`trainkit.report(step, loss, name=value)` reports them)." in text


def test_an_up_to_date_run_says_training_was_skipped_and_names_the_job_it_reused() -> None:
    text = markdown(facts(job_id="j-reused", up_to_date=True, finished_at=FINISHED), None, [])
    assert text.splitlines()[2] == (
        "Training was skipped: job `j-reused` already succeeded on the same inputs (data, code, spec, image and "
        "cvmjob version), finished 2024-05-01 12:30 UTC; these are its results.")
    assert "Training was skipped" not in markdown(facts(), None, [])


def test_the_gates_are_listed_and_a_failed_one_fails_the_heading() -> None:
    gates = check([parse_gate("val_loss<=0.30"), parse_gate("val_accuracy>=0.95"), parse_gate("val_f1>0.5")],
                  facts().metrics)
    text = markdown(facts(), BASELINE, gates)
    assert text.splitlines()[0] == "## ❌ quickstart: SUCCEEDED, 2 of 3 gates failed"
    assert text.endswith("\n".join([
        "- **Job:** `j-new`",
        "",
        "### Gates",
        "",
        "- ✅ `val_loss<=0.30`: val_loss=0.281 <= 0.30",
        "- ❌ `val_accuracy>=0.95`: val_accuracy=0.91 < 0.95 (missed by 0.04)",
        "- ❌ `val_f1>0.5`: val_f1 was never reported: the training script must report it, "
        "e.g. trainkit.report(step, loss, val_f1=value)",
    ]))


def test_passing_gates_keep_the_heading_green() -> None:
    gates = check([parse_gate("val_loss<=0.30")], facts().metrics)
    assert markdown(facts(), None, gates).splitlines()[0] == "## ✅ quickstart: SUCCEEDED"


@pytest.mark.parametrize(("seconds", "shown"), [(0.4, "0s"), (59.9, "59s"), (60, "1m00s"), (3725, "1h02m05s")])
def test_durations_read_like_a_person_would_say_them(seconds: float, shown: str) -> None:
    assert f"- **Duration:** {shown}\n" in markdown(facts(duration_seconds=seconds), None, [])


def test_run_facts_refuse_an_unknown_field() -> None:
    with pytest.raises(ValidationError, match="extra_forbidden"):
        facts(cost=1.0)


def test_the_step_summary_is_appended_to_the_file_github_names(tmp_path: Path) -> None:
    target = tmp_path / "step_summary.md"
    env = {"GITHUB_STEP_SUMMARY": str(target)}
    assert append_step_summary("## ✅ first", env) == target
    assert append_step_summary("## ❌ second", env) == target
    assert target.read_text(encoding="utf-8") == "## ✅ first\n## ❌ second\n"


@pytest.mark.parametrize("env", [{}, {"GITHUB_STEP_SUMMARY": ""}])
def test_without_a_step_summary_file_nothing_is_written(env: dict[str, str]) -> None:
    assert append_step_summary("## ✅ quickstart", env) is None
