"""What the training writes where its agent's documents go (issue 27, items 4 and 11): the training runs with keys
that can write its node's ``status.json`` and ``result.json``. Whatever is there, the controller takes it as
absent unless it is the node's own document of this attempt, says so once in the job's events, and goes on; the
CLI shows the job without a traceback."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from orchestrator.contract import AGENT_DOC_LIMIT, JobLayout, Outcome, Phase, Result, signal_for
from orchestrator.state.machine import EXIT_CODES, JobState
from tests.faults.conftest import expect_scenario
from tests.faults.harness import STATE_BUCKET, Pool, Record, World, names, scenario
from tests.holding import held, release
from tests.waiting import holds_for

GROUP = "agent_documents"
STEPS = 30
HOLD = 5  # the training holds before this step until every document was seen (a fixed 150 s of it once ran out)
TRAIN = f"train.command=exec python3 tiny.py --steps {STEPS} --step-seconds 0.1 --every 10 {held(HOLD)}"


@contextmanager
def rewriting(w: World, key: str, body: bytes) -> Iterator[None]:
    """``body`` put at ``key`` now and again every 0.2 s while the block runs, as a training that keeps writing
    there would: the agent's heartbeat (every 5 s) replaces it for a fifth of a second at most."""
    client, stop = w.cos(), threading.Event()
    client.put_object(Bucket=STATE_BUCKET, Key=key, Body=body)

    def keep() -> None:
        while not stop.wait(0.2):
            client.put_object(Bucket=STATE_BUCKET, Key=key, Body=body)

    thread = threading.Thread(target=keep, name="hostile-training", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def said(w: World, job_id: str, key: str, fragment: str) -> list[str]:
    """The job's events that say the document at ``key`` was taken as absent for ``fragment``'s reason."""
    return [e.detail for e in w.store().events(job_id)
            if e.kind == "agent" and e.detail.startswith(key) and fragment in e.detail]


def told(w: World, job_id: str, key: str, fragment: str, controller: object) -> None:
    """Wait until the controller said it; it must not have died of the document meanwhile."""
    import subprocess

    assert isinstance(controller, subprocess.Popen)
    w.wait(lambda: said(w, job_id, key, fragment) or controller.poll() is not None, 60, f"{key}: {fragment}")
    assert controller.poll() is None, f"cvmjob run ended (exit {controller.returncode})\n{w.describe()}"


def shown(w: World, job_id: str) -> None:
    """`cvmjob status` in text and JSON: exit 0, no traceback."""
    for output in ("text", "json"):
        answer = w.cli("status", job_id, "--output", output)
        both = answer.stdout + answer.stderr
        assert answer.returncode == 0 and "Traceback" not in both, f"status --output {output}: {both[-3000:]}"


@scenario("4-malformed-agent-documents", GROUP, cost=110)
def malformed_agent_documents(w: World) -> None:
    """While the job trains, the training writes over its node's status.json again and again: text that is not
    JSON, its agent's status with a field the layout has not, the same padded past the size an agent writes; then a
    result.json of another attempt saying the training failed, and the signal of that end. Each is taken as absent
    and said once in the job's events (not every round), `cvmjob status` answers meanwhile without a traceback, and
    the job trains to its end and succeeds (`cvmjob run` exit 0). After it ended, the same documents again: `cvmjob
    status` still shows it."""
    controller = w.run(TRAIN)
    job_id = w.wait_for_job()
    w.wait_phase(job_id, "training", min_step=3)
    instance_id = w.node_instance(job_id)
    attempt = w.job(job_id).attempt
    layout = JobLayout(job_id)
    status_key, result_key = layout.status(attempt, 0), layout.result(attempt, 0)
    own = json.loads(w.get_object(status_key) or b"{}")
    padded = json.dumps({**own, "message": "x" * AGENT_DOC_LIMIT}).encode()
    # Its own status with a field this layout has not (named as rich markup: `run` prints the reason, which names it).
    extra = json.dumps({**own, "[/oops]": 1}).encode()
    statuses = [(b"\x00{ this is not JSON", "not JSON"), (extra, "not a status"), (padded, "more than the")]
    for body, fragment in statuses:
        with rewriting(w, status_key, body):
            w.note(f"status.json rewritten every 0.2 s with {fragment} ({len(body)} bytes)")
            told(w, job_id, status_key, fragment, controller)
            if fragment == "not JSON":  # several rounds see it: one event
                holds_for("one event", lambda: len(said(w, job_id, status_key, "not JSON")) == 1, 6)
            shown(w, job_id)
    foreign = Result(attempt=attempt + 6, node_rank=0, instance_id=instance_id, outcome=Outcome.TRAINING_FAILED,
                     exit_code=1, reason="another attempt's", time=0.0).model_dump_json().encode()
    client = w.cos()
    client.put_object(Bucket=STATE_BUCKET, Key=result_key, Body=foreign)
    client.put_object(Bucket=STATE_BUCKET, Key=signal_for(layout.signal(attempt, 0), Phase.FAILED), Body=b"{}")
    w.note(f"result.json of attempt {attempt + 6} (training_failed), and its end signalled")
    told(w, job_id, result_key, f"attempt {attempt + 6}", controller)
    job = w.job(job_id)
    assert job.state == JobState.RUNNING, f"the training ended before the documents were all seen\n{w.describe()}"
    assert release(w.admin, job_id) == [instance_id]

    job = w.wait_terminal(job_id, timeout=240)
    assert job.state == JobState.SUCCEEDED, w.describe()
    assert controller.wait(60) == EXIT_CODES[JobState.SUCCEEDED], w.describe()
    final = Result.model_validate_json(w.get_object(result_key) or b"{}")
    assert (final.attempt, final.outcome, final.final_step) == (attempt, Outcome.SUCCEEDED, STEPS - 1), final
    for fragment in ("not JSON", "not a status", "more than the"):
        assert len(said(w, job_id, status_key, fragment)) == 1, w.describe()

    for body, _ in statuses:
        client.put_object(Bucket=STATE_BUCKET, Key=status_key, Body=body)
        client.put_object(Bucket=STATE_BUCKET, Key=result_key, Body=body)
        shown(w, job_id)
    client.put_object(Bucket=STATE_BUCKET, Key=result_key, Body=foreign)
    shown(w, job_id)
    w.note("after the end: each of them again as status.json and result.json")


@pytest.mark.parametrize("scenario_name", names(GROUP))
def test_agent_documents(scenario_name: str, fault_pool: Pool, record: Record) -> None:
    expect_scenario(fault_pool, scenario_name, record)
