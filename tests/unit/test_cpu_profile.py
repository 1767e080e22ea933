"""tests/cpu_profile.py's reading of the accounting records and its attribution of CPU to tests."""

from __future__ import annotations

from tests.cpu_profile import Exited, Span, attribute, kind, parse_accounting

# dump-acct's lines, as Debian's acct 6.6 prints them
RECORDS = "\n".join([
    "python3         |v3|   120.00|    30.00|   800.00|     0|     0|  3828.00|     0.00|     200|     100|     |"
    "       0|__      |Mon Dec  7 05:28:10 2026",
    "bash            |v3|     1.00|     0.00|    10.00|     0|     0|  4488.00|     0.00|     300|     200| F   |"
    "       0|__      |Mon Dec  7 05:28:40 2026",
    "not a record",
])


def test_the_accounting_records_give_cpu_seconds_pid_parent_and_start() -> None:
    first, second = parse_accounting(RECORDS)
    assert (first.comm, first.cpu, first.pid, first.ppid) == ("python3", 1.5, 200, 100)
    assert second.started - first.started == 30
    assert second.cpu == 0.01


def test_a_process_counts_for_the_test_its_worker_ran_when_it_started() -> None:
    spans = [Span(10, "tests/e2e/test_a.py::one", 100.0, 110.0), Span(10, "tests/e2e/test_a.py::two", 111.0, 130.0),
             Span(11, "tests/faults/test_x.py::s1", 100.0, 500.0)]
    exited = [
        Exited("python3", 2.0, 20, 10, 105.0),  # a child of worker 10 during `one`
        Exited("python3", 3.0, 21, 20, 120.0),  # its grandchild, started during `two`
        Exited("python3", 4.0, 22, 1, 125.0),  # reparented to init; the watcher saw its parent, 20
        Exited("python3", 5.0, 30, 11, 200.0),  # the fault suite's pool: one entry
        Exited("pip", 6.0, 40, 1, 50.0),  # outside pytest
        Exited("python3", 7.0, 10, 9, 90.0),  # the worker itself
    ]
    by_test = attribute(exited, {22: 20}, spans)
    assert by_test == {"tests/e2e/test_a.py::one": 2.0, "tests/e2e/test_a.py::two": 7.0, "tests/faults/": 5.0,
                       "(outside pytest)": 6.0, "(pytest-xdist workers: the tests that run in process)": 7.0}


def test_kinds_come_from_the_command_line() -> None:
    assert kind("python3", "/v/bin/python -m orchestrator.cli.main resume job-1") == "cvmjob resume"
    assert kind("python3", "python3 -m orchestrator.agent --config /x/agent.json") == "agent"
    assert kind("python3", "python3 -m orchestrator.agent.install --stage /x") == "agent installer"
    assert kind("sleep", None) == "sleep (too short to be seen)"
    assert kind("sleep", "sleep 1") == "sleep"
