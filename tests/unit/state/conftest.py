from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from orchestrator.state.store import Store

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
    store.create_job("job-1", "demo", {"name": "demo"}, {"region": "r", "image_id": "img-1"}, {"kind": "emulator"},
                     now=100.0, deadline=200.0, source_dir="/src", settings={"poll": 1})
    return store
