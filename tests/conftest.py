from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.emulator_process import EmulatorProcess, clean_env, start_emulator

pytest_plugins = ["tests.postgres"]  # postgres_url, store_url

# Tests talk to 127.0.0.1 only; an inherited proxy would capture SDK calls.
for _name in set(os.environ) - set(clean_env()):
    del os.environ[_name]


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
