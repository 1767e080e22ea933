from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.emulator_process import EmulatorProcess, clean_env, start_emulator
from tests.receiver import Receiver, receiving

pytest_plugins = ["tests.postgres"]  # postgres_url, store_url

# Tests talk to 127.0.0.1 only; an inherited proxy would capture SDK calls.
for _name in set(os.environ) - set(clean_env()):
    del os.environ[_name]
# One cache for every emulator, CLI and controller the tests start, whatever HOME they give them (the fault worlds
# give each its own): the emulator's security-group library is built once a machine (runtime/netfilter.py), not
# once a scenario.
os.environ.setdefault("XDG_CACHE_HOME", str(Path.home() / ".cache"))

TESTS = Path(__file__).resolve().parent
# Under pytest-xdist (`make test` runs -n) every worker has its own emulators, stores and PostgreSQL cluster (session
# fixtures), so tests spread freely, except the fault suite: its scenarios share one pool of emulators
# (tests/faults/conftest.py) and its report needs every record, so it is one unit of work, on one worker. Work is
# handed out in collection order (after that unit): the end-to-end tests, which wait more than they compute, go
# first, so the unit tests fill the gaps instead of a long test starting last.
_FIRST = ("faults", "e2e", "agent", "emulator")
_FAULTS = f"tests/{_FIRST[0]}/"  # the fault suite's node ids: one unit of work


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = Path(str(item.fspath)).resolve()
        part = path.relative_to(TESTS).parts[0] if path.is_relative_to(TESTS) else ""
        return _FIRST.index(part) if part in _FIRST else len(_FIRST)

    items.sort(key=rank)  # stable: within a part, the order of the files


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """One unit of work for the fault suite, one per test elsewhere. (xdist's own `--dist loadgroup` marks a
    group by editing Item._nodeid, which pytest 9 no longer reads.)"""
    from xdist.scheduler import LoadScopeScheduling

    class FaultSuiteTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _FAULTS if nodeid.startswith(_FAULTS) else nodeid

    return FaultSuiteTogether(config, log)


_from_workers: list[str] = []


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist, on the controller (which loads no conftest below this one): the fault suite's verdict from the
    worker that ran it (tests/faults/conftest.py)."""
    _from_workers.extend(getattr(node, "workeroutput", {}).get("fault_suite", []))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _from_workers:
        terminalreporter.write_sep("-", "fault suite")
        for line in _from_workers:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def emulator_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorProcess]:
    server = start_emulator(Path(tmp_path_factory.mktemp("emulator")) / "state")
    yield server
    server.stop()


@pytest.fixture
def emulator(emulator_server: EmulatorProcess) -> EmulatorProcess:
    """The shared emulator, reset to a new account with default rate limits and no faults."""
    emulator_server.admin.reset()
    return emulator_server


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A webhook receiver on 127.0.0.1 (tests/receiver.py)."""
    with receiving() as found:
        yield found
