"""Two writers of one checkpoint manifest (a stale agent of an earlier attempt and the current one) interleave
their read-update-write: neither loses the other's entry (issue 27, item 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.agent.manifest import read_manifest
from orchestrator.agent.restore import restorable
from orchestrator.agent.status import StatusBoard
from orchestrator.agent.uploader import CheckpointUploader
from orchestrator.providers.tencent.storage import ObjectInfo
from tests.unit.agent.fakes import MemoryStore
from tests.unit.agent.test_uploader import save

PREFIX = "cvmjob/j/checkpoints/"


class Interleaving(MemoryStore):
    """Runs ``between`` once, when the first file of ``checkpoint`` is put: after its writer read the manifest,
    before it writes its own."""

    def __init__(self, checkpoint: str) -> None:
        super().__init__()
        self.checkpoint = checkpoint
        self.between: list[Any] = []

    def put_bytes(self, key: str, data: bytes, content_type: str = "application/octet-stream",
                  **options: Any) -> ObjectInfo:
        if f"/{self.checkpoint}/" in key and self.between:
            self.between.pop()()
        return super().put_bytes(key, data, content_type, **options)


def writer(directory: Path, store: MemoryStore, attempt: int) -> CheckpointUploader:
    return CheckpointUploader(directory, store, PREFIX, keep_last=5, attempt=attempt,  # type: ignore[arg-type]
                              board=StatusBoard(attempt, 0, f"ins-{attempt}"), job_id="job-1", keep_local=5)


def test_two_writers_racing_on_the_manifest_both_keep_their_entries(tmp_path: Path) -> None:
    store = Interleaving("step-00000005")
    stale, current = writer(tmp_path / "stale", store, 1), writer(tmp_path / "current", store, 2)
    save(tmp_path / "stale", 5)
    save(tmp_path / "current", 7)
    store.between.append(current.tick)  # the current agent commits step 7 while the stale one uploads step 5
    stale.tick()
    listed = writer(tmp_path / "reader", store, 3).read_manifest()
    assert sorted((c.step, c.attempt) for c in listed.checkpoints) == [(5, 1), (7, 2)]


def test_the_legacy_manifest_is_read_until_the_first_generation_carries_it_on(tmp_path: Path) -> None:
    store = MemoryStore()
    old = writer(tmp_path / "old", store, 1)
    save(tmp_path / "old", 3)
    old.tick()
    legacy = store.objects.pop(f"{PREFIX}manifest/000000000001.json")  # as an agent of an earlier release left it
    store.objects[PREFIX + "manifest.json"] = legacy
    assert [c.step for c in read_manifest(store, PREFIX).manifest.checkpoints] == [3]
    save(tmp_path / "new", 5)
    writer(tmp_path / "new", store, 2).tick()
    assert [c.step for c in read_manifest(store, PREFIX).manifest.checkpoints] == [3, 5]


def test_only_the_jobs_own_entries_are_restorable(tmp_path: Path) -> None:
    store = MemoryStore()
    save(tmp_path / "mine", 3)
    writer(tmp_path / "mine", store, 1).tick()
    theirs = read_manifest(store, PREFIX).manifest
    assert [c.step for c in restorable(theirs, "job-1", PREFIX).checkpoints] == [3]
    assert restorable(theirs, "job-2", PREFIX).latest() is None  # another job's: ignored
