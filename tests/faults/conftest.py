"""Fixtures of the fault suite, and the plugin that writes docs/reliability.md from a complete run.

Every test of tests/faults gets a ``Record`` (what it injected, which invariants it checked, how it ended); at the
end of a session that ran the whole suite (nothing deselected, every registered scenario run) they become
docs/reliability.md. A partial run (``-k``, or some of its files) writes nothing.
``CVMJOB_RELIABILITY_REPORT=<path>`` writes elsewhere.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.faults import report as report_module
from tests.faults.harness import ON_POSTGRES, SCENARIOS, Pool, Record, scenario_of

HERE = Path(__file__).resolve().parent
LANES = int(os.environ.get("CVMJOB_FAULT_LANES", "6"))

_records: dict[str, Record] = {}
# complete: every scenario ran in the pool; partial: some test of the suite was deselected. A run of a few of
# its files (the fencing and mix tests alone) left a seven-line docs/reliability.md behind.
_state = {"complete": False, "partial": False, "started": 0.0}


def _in_suite(item: pytest.Item) -> bool:
    return Path(str(item.fspath)).resolve().is_relative_to(HERE)


def pytest_deselected(items: list[pytest.Item]) -> None:
    if any(_in_suite(i) for i in items):
        _state["partial"] = True


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A run of some of the suite's files is partial too: SCENARIOS holds only the scenarios of the files that
    were imported, so "every registered scenario ran" held for `pytest tests/faults/test_gc.py` alone, and it
    rewrote docs/reliability.md with the gc rows only."""
    collected = {Path(str(i.fspath)).resolve() for i in items if _in_suite(i)}
    if collected and not set(HERE.glob("test_*.py")) <= collected:
        _state["partial"] = True


@pytest.fixture(scope="package")
def fault_pool(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    wanted = [
        item.callspec.params["scenario_name"]
        for item in request.session.items
        if hasattr(item, "callspec") and "scenario_name" in item.callspec.params
    ]
    # The runs named <scenario>-on-postgres (harness.scenario's on_postgres) each get a database of that cluster.
    on_postgres = any(w.endswith(ON_POSTGRES) for w in wanted)
    postgres = request.getfixturevalue("postgres_url") if on_postgres else None
    pool = Pool(tmp_path_factory.mktemp("faults"), wanted, LANES, postgres)
    _state["started"] = time.monotonic()
    yield pool
    pool.close()
    _state["complete"] = {scenario_of(w).name for w in wanted} == set(SCENARIOS)


@pytest.fixture
def record(request: pytest.FixtureRequest) -> Record:
    """This test's entry in docs/reliability.md."""
    module = request.node.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    entry = Record(request.node.name, module, " ".join((request.node.function.__doc__ or "").split()))
    _records[request.node.nodeid] = entry
    return entry


def expect_scenario(pool: Pool, name: str, record: Record) -> None:
    """Wait for a pool scenario and make its record this test's."""
    result = pool.result(name)
    for attribute in ("name", "group", "doc", "injected", "checked", "outcome", "detail", "seconds", "end_states"):
        setattr(record, attribute, getattr(result, attribute))
    assert result.outcome == "passed", f"scenario {name} failed:\n{result.detail}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome: Any = yield
    report = outcome.get_result()
    entry = _records.get(item.nodeid)
    if entry is None or report.when != "call":
        return
    if entry.outcome in ("not run", "passed") or report.failed:
        entry.outcome = "passed" if report.passed else ("FAILED" if report.failed else "skipped")
    if report.failed and not entry.detail:
        entry.detail = str(report.longrepr)[-3000:]
    if not entry.seconds:
        entry.seconds = report.duration


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workeroutput"):  # a pytest-xdist worker: the controller prints the verdict
        session.config.workeroutput["fault_suite"] = _verdict()
    if not _records or not _state["complete"] or _state["partial"]:
        return
    target = Path(os.environ.get("CVMJOB_RELIABILITY_REPORT", HERE.parents[1] / "docs" / "reliability.md"))
    wall = time.monotonic() - _state["started"] if _state["started"] else 0.0
    report_module.write(target, list(_records.values()), wall)


def _verdict() -> list[str]:
    """Scenarios passed, on which stores, and how many transitions the crash-point test killed the controller at."""
    if not _records:
        return []
    records = list(_records.values())
    passed = sum(r.outcome == "passed" for r in records)
    on_postgres = sum(r.name.endswith(ON_POSTGRES) for r in records)
    lines = [f"{passed} of {len(records)} fault-suite tests passed ({on_postgres} of them on a PostgreSQL store, "
             "the others on SQLite)"]
    for r in records:
        if r.checked == ["coverage"]:
            lines += [f"crash points: {line}" for line in r.injected]
    return lines


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The fault suite's verdict where CI shows it (under pytest-xdist, tests/conftest.py prints the worker's)."""
    lines = _verdict()
    if lines:
        terminalreporter.write_sep("-", "fault suite")
        for line in lines:
            terminalreporter.write_line(line)
