"""What the training chose shows as it is written: a job's reason (from its result), a node's end reason and an
event (naming a field of a document the training wrote) are text, not rich markup: a `[/x]` in them crashed `run`'s
progress and `status` with a MarkupError (issue 27, item 4)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from orchestrator.cli import render
from orchestrator.state.machine import JobState
from tests.unit.cli.test_render import NODE
from tests.unit.cli.test_render_gpu import job

HOSTILE = "training_failed: [/oops] [bold]loud[/bold] [link=http://x]"


def test_a_reason_the_training_chose_is_printed_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    failed = replace(job(), state=JobState.FAILED, reason=HOSTILE)
    render.show_job(failed, [], [replace(NODE, end_reason=HOSTILE)], None)
    render.summary(failed, [], [replace(NODE, end_reason=HOSTILE)], None)
    out = capsys.readouterr().out
    assert out.count("[/oops] [bold]loud[/bold]") >= 2, out  # the heading and the summary (the table wraps it)


def test_an_event_the_training_caused_is_printed_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    render.Progress().event("agent", f"cvmjob/job-1/attempts/1/nodes/0/status.json: not a status ({HOSTILE})")
    assert "[/oops] [bold]loud[/bold]" in capsys.readouterr().out
