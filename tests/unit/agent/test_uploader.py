from __future__ import annotations

import time
from pathlib import Path

import pytest

from crc64ecma import update as crc64
from orchestrator.agent.manifest import read_manifest
from orchestrator.agent.restore import restore_latest
from orchestrator.agent.status import StatusBoard
from orchestrator.agent.uploader import CheckpointUploader
from orchestrator.contract import Manifest
from orchestrator.providers.tencent.storage import ChecksumMismatch
from tests.unit.agent.fakes import MemoryStore

PREFIX = "cvmjob/j/checkpoints/"


def save(directory: Path, step: int, payload: bytes = b"") -> Path:
    """As trainkit does: write aside, then rename into place."""
    tmp = directory / f".step-{step:08d}.tmp"
    tmp.mkdir(parents=True)
    (tmp / "state.pt").write_bytes(payload or f"state {step}".encode())
    (tmp / "sub").mkdir()
    (tmp / "sub" / "extra.bin").write_bytes(b"e" * step)
    final = directory / f"step-{step:08d}"
    tmp.rename(final)
    return final


def uploader(tmp_path: Path, store: MemoryStore, keep_last: int = 2, keep_local: int = 1) -> CheckpointUploader:
    return CheckpointUploader(tmp_path / "ckpt", store, PREFIX, keep_last, attempt=1,  # type: ignore[arg-type]
                              board=StatusBoard(1, 0, "ins-1"), job_id="job-1", keep_local=keep_local)


def manifest(store: MemoryStore) -> Manifest:
    return read_manifest(store, PREFIX).manifest


def test_files_go_first_the_manifest_last_and_keep_last_deletes_old_objects(tmp_path: Path) -> None:
    store = MemoryStore()
    up = uploader(tmp_path, store)
    for step in (10, 20, 30):
        save(tmp_path / "ckpt", step)
        up.tick()
    listed = manifest(store)
    assert [c.step for c in listed.checkpoints] == [20, 30]
    entry = listed.checkpoints[-1]
    assert entry.files == {"state.pt": crc64(b"state 30"), "sub/extra.bin": crc64(b"e" * 30)}
    assert entry.size == len(b"state 30") + 30 and entry.kind == "directory" and not entry.emergency
    assert store.puts[-1] == PREFIX + "manifest/000000000003.json"  # after the files it lists, a generation each
    assert entry.job == "job-1"
    assert set(store.puts[-3:-1]) == {PREFIX + "step-00000030/state.pt", PREFIX + "step-00000030/sub/extra.bin"}
    assert not any(k.startswith(PREFIX + "step-00000010/") for k in store.objects)
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["step-00000030"]  # keep_local=1
    save(tmp_path / "ckpt", 40)
    up.tick()  # the fourth commit: generations older than the last three go
    assert sorted(k for k in store.objects if "/manifest/" in k) == [
        f"{PREFIX}manifest/00000000000{g}.json" for g in (2, 3, 4)]


def test_newest_first_an_emergency_checkpoint_jumps_the_queue_and_stale_ones_are_skipped(tmp_path: Path) -> None:
    store = MemoryStore()
    up = uploader(tmp_path, store, keep_last=2, keep_local=5)
    for step in (10, 20, 30):
        save(tmp_path / "ckpt", step)
    up.tick()  # sees three pending: the newest goes first
    up.request_emergency()
    time.sleep(0.01)
    save(tmp_path / "ckpt", 35)
    assert up.drain(time.monotonic() + 10)
    listed = manifest(store)
    assert [(c.step, c.emergency) for c in listed.checkpoints] == [(30, False), (35, True)]
    assert up.emergency_committed == "step-00000035"
    assert not any("step-00000010" in k or "step-00000020" in k for k in store.objects)  # never uploaded


def test_a_file_checkpoint_round_trips(tmp_path: Path) -> None:
    store = MemoryStore()
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "step-7.pt").write_bytes(b"weights")
    up = uploader(tmp_path, store)
    up.tick()
    (entry,) = manifest(store).checkpoints
    assert (entry.kind, entry.files) == ("file", {"step-7.pt": crc64(b"weights")})
    restored = restore_latest(manifest(store), store, PREFIX, tmp_path / "elsewhere")  # type: ignore[arg-type]
    assert restored == tmp_path / "elsewhere" / "step-7.pt" and restored.read_bytes() == b"weights"


def test_restore_downloads_the_latest_verifies_it_and_reuses_an_intact_local_copy(tmp_path: Path) -> None:
    store = MemoryStore()
    up = uploader(tmp_path, store, keep_last=3)
    for step in (5, 9):
        save(tmp_path / "ckpt", step)
        up.tick()
    target = tmp_path / "node2"
    restored = restore_latest(manifest(store), store, PREFIX, target)  # type: ignore[arg-type]
    assert restored == target / "step-00000009"
    assert (restored / "sub" / "extra.bin").read_bytes() == b"e" * 9
    gets = len(store.puts)
    assert restore_latest(manifest(store), store, PREFIX, target) == restored  # type: ignore[arg-type]
    assert len(store.puts) == gets
    (restored / "state.pt").write_bytes(b"corrupt")  # a damaged local copy is replaced
    assert (restore_latest(manifest(store), store, PREFIX, target) / "state.pt").read_bytes() == b"state 9"  # type: ignore[arg-type,operator]
    store.objects[PREFIX + "step-00000009/state.pt"] = b"tampered"
    (restored / "state.pt").unlink()
    with pytest.raises(ChecksumMismatch):
        restore_latest(manifest(store), store, PREFIX, target)  # type: ignore[arg-type]
    assert restore_latest(Manifest(), store, PREFIX, target) is None  # type: ignore[arg-type]


def test_a_restarted_uploader_does_not_upload_committed_checkpoints_again(tmp_path: Path) -> None:
    store = MemoryStore()
    save(tmp_path / "ckpt", 3)
    uploader(tmp_path, store, keep_local=5).tick()
    writes = len(store.puts)
    again = uploader(tmp_path, store, keep_local=5)
    again.read_manifest()
    save(tmp_path / "ckpt", 4)
    assert again.drain(time.monotonic() + 5)
    assert [k for k in store.puts[writes:] if "step-00000003" in k] == []
    assert [c.step for c in manifest(store).checkpoints] == [3, 4]
