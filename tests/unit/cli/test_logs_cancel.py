"""`cvmjob logs` and `cvmjob cancel` over a store populated directly (the log's chunks stand in for COS): logs of the
newest job when none is named, --output json as one object a line (lines cut across chunks joined), and cancel's
JSON document."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from orchestrator import api
from orchestrator.cli.main import app
from orchestrator.cli.options import Abort
from orchestrator.state.machine import JobState
from orchestrator.state.store import JobRecord, Store
from tests.records import new_job

CHUNKS = ["first li", "ne\nsecond\n", "thi", "rd, unended"]


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    """Two jobs, the newer created last; their logs are CHUNKS, as COS would list them."""
    monkeypatch.setenv("CVMJOB_DB", str(tmp_path / "state.db"))
    monkeypatch.setenv("CVMJOB_HOME", str(tmp_path / "home"))
    store = Store(tmp_path / "state.db")
    now = time.time()
    for age, job_id in ((60, "job-0000000a"), (0, "job-0000000b")):
        store.create_job(new_job(job_id, "demo", deadline=now + 3600), now=now - age)

    def chunks(job: JobRecord, attempt: int | None = None, node: int = 0, after: str = "") -> Iterator[tuple[str, str]]:
        assert (job.job_id, node) == ("job-0000000b", 0)
        yield from ((f"{i:03}", text) for i, text in enumerate(CHUNKS) if f"{i:03}" > after)

    monkeypatch.setattr(api, "log_chunks", chunks)
    yield store
    store.close()


def cvmjob(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def test_logs_default_to_the_newest_job(store: Store) -> None:
    result = cvmjob("logs")
    assert result.exit_code == 0, result.output
    assert result.stdout == "".join(CHUNKS)  # as written: nothing added, nothing wrapped


def test_logs_as_json_lines(store: Store) -> None:
    result = cvmjob("logs", "job-0000000b", "--output", "json")
    assert result.exit_code == 0, result.output
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {"job_id": "job-0000000b", "attempt": 0, "node": 0, "line": line}  # 0: PENDING, before its first attempt
        for line in ("first line", "second", "third, unended")]


def test_logs_without_any_job_say_how_to_start_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CVMJOB_DB", str(tmp_path / "empty.db"))
    result = cvmjob("logs")
    assert isinstance(result.exception, Abort) and "no jobs yet: `cvmjob run job.yaml` starts one" in str(
        result.exception)


def cancelled(*args: str) -> Any:
    result = cvmjob("cancel", *args, "--output", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_cancel_as_json(store: Store) -> None:
    assert cancelled("job-0000000a", "--no-checkpoint") == {
        "job_id": "job-0000000a", "requested": True, "through": "store", "controller": None, "state": "PENDING",
        "terminal": False}
    record = store.get("job-0000000a")
    assert record is not None and record.cancel_requested and not record.cancel_checkpoint
    token = store.acquire("job-0000000b", "test", ttl=60, now=time.time())
    store.transition("job-0000000b", token, JobState.PENDING, JobState.CANCELLED, "", time.time())
    assert cancelled("job-0000000b") == {"job_id": "job-0000000b", "requested": False, "through": None,
                                         "controller": "test", "state": "CANCELLED", "terminal": True}
