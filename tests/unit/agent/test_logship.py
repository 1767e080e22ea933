from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.agent.logship import LogShipper
from orchestrator.providers.tencent import errors
from tests.unit.agent.fakes import MemoryStore


def shipper(tmp_path: Path, store: MemoryStore, **kwargs: float) -> LogShipper:
    return LogShipper(tmp_path / "run.log", tmp_path / "logship.json", store,  # type: ignore[arg-type]
                      lambda seq: f"logs/{seq:08d}.log", **kwargs)  # type: ignore[arg-type]


def shipped(store: MemoryStore) -> list[bytes]:
    return [store.objects[k] for k in sorted(store.objects)]


def test_lines_ship_when_due_and_the_rest_at_the_final_flush(tmp_path: Path) -> None:
    store = MemoryStore()
    log = tmp_path / "run.log"
    ship = shipper(tmp_path, store, every_seconds=0)
    log.write_bytes(b"one\ntwo\npart")
    ship.tick()
    assert shipped(store) == [b"one\ntwo\n"]  # the partial line waits...
    ship.tick()
    assert shipped(store)[1:] == [b"part"]  # ...for one interval, then goes as it is
    with log.open("ab") as f:
        f.write(b"ial\n")
    ship.tick(final=True)
    assert b"".join(shipped(store)) == log.read_bytes()


def test_nothing_ships_before_the_interval_unless_a_chunk_is_full(tmp_path: Path) -> None:
    store = MemoryStore()
    log = tmp_path / "run.log"
    ship = shipper(tmp_path, store, every_seconds=3600, chunk_bytes=10)
    log.write_bytes(b"short\n")
    ship.tick()
    assert store.objects == {}
    log.write_bytes(b"short\n" + b"x" * 25 + b"\nend\n")
    ship.tick()
    # Full chunks go at once (cut at a newline when they hold one); the partial line waits.
    assert shipped(store) == [b"short\n", b"x" * 10, b"x" * 10, b"xxxxx\nend\n"]
    log.write_bytes(log.read_bytes() + b"tail")
    ship.tick()
    assert len(store.objects) == 4
    ship.tick(final=True)
    assert b"".join(shipped(store)) == log.read_bytes()


def test_a_restarted_shipper_never_sends_shipped_bytes_again(tmp_path: Path) -> None:
    store = MemoryStore()
    log = tmp_path / "run.log"
    log.write_bytes(b"first run\n")
    shipper(tmp_path, store).tick(final=True)
    with log.open("ab") as f:
        f.write(b"second run\n")
    shipper(tmp_path, store).tick(final=True)
    assert store.objects == {"logs/00000000.log": b"first run\n", "logs/00000001.log": b"second run\n"}


def test_a_failed_put_is_retried_by_the_next_tick_with_the_same_key(tmp_path: Path) -> None:
    store = MemoryStore()
    (tmp_path / "run.log").write_bytes(b"line\n")
    ship = shipper(tmp_path, store)
    store.fail_next.append(errors.TransientError("InternalError", "boom"))
    with pytest.raises(errors.TransientError):
        ship.tick(final=True)
    ship.tick(final=True)
    assert store.objects == {"logs/00000000.log": b"line\n"}
