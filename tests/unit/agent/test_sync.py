"""sync_data over an in-memory store: what lands, what the index names once durable, what a later sync skips."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

from orchestrator.agent.status import StatusBoard
from orchestrator.agent.stop import StopSignal
from orchestrator.agent.sync import INDEX_DIR, DataEntry, sync_data

from .fakes import MemoryStores

BUCKET = "data-1250000000"
ENTRY = DataEntry(BUCKET, "set/", "set")


def sync(root: Path, stores: MemoryStores) -> int:
    synced = sync_data([ENTRY], root, cast(Any, stores), StatusBoard(1, 0, "ins-1"), StopSignal())
    synced.durable.join(timeout=30)
    assert not synced.durable.is_alive()
    return synced.bytes_downloaded


def index_of(root: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((root / INDEX_DIR / "set.json").read_text())
    return doc


def test_the_files_land_and_the_index_names_them_once_saved(tmp_path: Path) -> None:
    stores = MemoryStores()
    store = stores.bucket(BUCKET)
    store.put_bytes("set/a.jpg", b"a" * 10)
    store.put_bytes("set/sub/b.jpg", b"b" * 5)
    assert sync(tmp_path, stores) == 15
    assert (tmp_path / "set" / "a.jpg").read_bytes() == b"a" * 10
    assert (tmp_path / "set" / "sub" / "b.jpg").read_bytes() == b"b" * 5
    doc = index_of(tmp_path)
    assert doc["source"] == "cos://data-1250000000/set/" and set(doc["objects"]) == {"a.jpg", "sub/b.jpg"}


def test_a_second_sync_downloads_only_what_changed_and_forgets_what_is_gone(tmp_path: Path) -> None:
    stores = MemoryStores()
    store = stores.bucket(BUCKET)
    store.put_bytes("set/a.jpg", b"a" * 10)
    store.put_bytes("set/b.jpg", b"b" * 5)
    sync(tmp_path, stores)
    store.put_bytes("set/a.jpg", b"A" * 12)
    store.delete(["set/b.jpg"])
    assert sync(tmp_path, stores) == 12
    assert (tmp_path / "set" / "a.jpg").read_bytes() == b"A" * 12 and not (tmp_path / "set" / "b.jpg").exists()
    assert set(index_of(tmp_path)["objects"]) == {"a.jpg"}
    assert sync(tmp_path, stores) == 0
