"""The live view's parts that need no cloud: the pace and ETA, the training line, the sweep's table, the JSON
events, and the question before spending."""

from __future__ import annotations

import io
import json

import pytest
import typer
from rich.console import Console

from orchestrator.cli import confirm
from orchestrator.cli.live import JsonEvents, Pace, sweep_panel, training_line
from orchestrator.contract import Phase, Status
from orchestrator.sweep.models import Best, SweepView, TrialState, TrialView


def status(step: int | None, at: float, total: int | None = 100, attempt: int = 1) -> Status:
    return Status(attempt=attempt, node_rank=0, instance_id="ins-1", phase=Phase.TRAINING, time=at, seq=1, step=step,
                  total_steps=total, loss=0.25)


def test_the_pace_is_steps_over_seconds_of_the_current_attempt_and_gives_the_eta() -> None:
    pace = Pace()
    pace.see(1, status(9, 100.0))
    assert pace.per_second() is None  # one look is no pace
    pace.see(1, status(29, 110.0))
    assert pace.per_second() == pytest.approx(2.0)
    line = training_line(status(29, 110.0), pace).plain
    assert line == "training  step 30/100 (30%)  2 steps/s  ETA 35s  loss 0.25"
    pace.see(2, status(31, 200.0, attempt=2))  # a new attempt starts its own pace
    assert pace.per_second() is None


def test_without_a_total_the_line_says_the_step_alone() -> None:
    assert training_line(status(4, 1.0, total=None), Pace()).plain == "training  step 5  loss 0.25"


def test_the_sweep_table_shows_each_trials_step_and_latest_value_and_the_best() -> None:
    view = SweepView(study="lr", directions=["minimize"], metrics=["val_loss"], state="running", cost=1.5,
                     max_cost=10.0, best=Best(number=0, value=0.31),
                     trials=[TrialView(number=0, state=TrialState.COMPLETE, value=0.31, cost=1.0,
                                       job_id="job-0000000a"),
                             TrialView(number=1, state=TrialState.RUNNING, intermediate={10: 0.7, 20: 0.5},
                                       cost=0.5, job_id="job-0000000b")])
    out = Console(width=80, record=True, file=io.StringIO())
    out.print(sweep_panel(view))
    text = out.export_text()
    assert "job-0000000b" in text and " 20 " in text and "0.5" in text
    assert "best so far: trial 0, val_loss 0.31" in text and "cost ¥1.50 of ¥10.00" in text


def test_json_events_are_one_line_each() -> None:
    out = io.StringIO()
    events = JsonEvents(out)
    events.event("state", "RUNNING: the agents report")
    (line,) = out.getvalue().splitlines()
    assert json.loads(line)["event"] == "state" and json.loads(line)["message"] == "RUNNING: the agents report"


def test_no_terminal_goes_on_and_says_the_estimate(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    def never(*args: object, **kwargs: object) -> bool:
        raise AssertionError("asked without a terminal")

    monkeypatch.setattr(confirm, "interactive", lambda: False)
    monkeypatch.setattr(typer, "confirm", never)
    confirm.ask_to_spend("start it", "¥4.34 at most", yes=False, output="json")
    event = json.loads(capsys.readouterr().err)
    assert (event["event"], event["message"]) == ("estimate", "¥4.34 at most")
    confirm.ask_to_spend("start it", "¥4.34 at most", yes=False, output="text")
    assert capsys.readouterr().err == "estimate: ¥4.34 at most\n"


def test_a_no_at_a_terminal_stops_with_the_cancelled_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(confirm, "interactive", lambda: True)
    monkeypatch.setattr(typer, "confirm", lambda *args, **kwargs: False)
    with pytest.raises(typer.Exit) as stopped:
        confirm.ask_to_spend("start it", "¥4.34 at most", yes=False, output="text")
    assert stopped.value.exit_code == 130
    confirm.ask_to_spend("start it", "¥4.34 at most", yes=True, output="text")  # --yes: no question
