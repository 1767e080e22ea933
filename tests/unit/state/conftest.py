from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from orchestrator.plan.settings import Settings
from orchestrator.state.store import Store
from tests.records import new_job

Opener = Callable[[], Store]


@pytest.fixture
def open_store(store_url: str) -> Iterator[Opener]:
    """Opens the test's store (each call a new Store over the same database, as another process would)."""
    opened: list[Store] = []

    def open_() -> Store:
        opened.append(Store(store_url))
        return opened[-1]

    yield open_
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store: Opener) -> Store:
    """A store holding one PENDING job, ``job-1``, created at 100."""
    store = open_store()
    store.create_job(new_job("job-1", "demo", settings=Settings(poll_seconds=2.0), deadline=200.0, source_dir="/src"),
                     now=100.0)
    return store
