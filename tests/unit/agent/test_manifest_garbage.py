"""A manifest generation that is not one (the training's keys can write the checkpoint prefix) is passed over for
the one before it, never crashes its reader, and the next commit still goes after it."""

from __future__ import annotations

import json

from orchestrator.agent.manifest import MANIFEST_LIMIT, commit, generation_key, read_manifest, with_entry
from orchestrator.contract import CheckpointEntry
from tests.unit.agent.fakes import MemoryStore

PREFIX = "cvmjob/job-1/checkpoints/"


def entry(step: int) -> CheckpointEntry:
    return CheckpointEntry(name=f"step-{step:08d}", step=step, files={"model.pt": 1}, size=1, attempt=1, time=step,
                           job="job-1")


def test_garbage_or_oversized_generations_are_passed_over_and_the_next_commit_goes_after_them() -> None:
    store = MemoryStore()
    commit(store, PREFIX, lambda m: with_entry(m, entry(5), keep_last=3))
    for garbage in (b"{not json", json.dumps({"checkpoints": "x"}).encode(), b" " * (MANIFEST_LIMIT + 1)):
        latest = read_manifest(store, PREFIX).generation
        store.objects[generation_key(PREFIX, latest + 1)] = garbage
        read = read_manifest(store, PREFIX)
        assert [c.step for c in read.manifest.checkpoints] == [5]  # the last manifest before the garbage
        assert read.generation == latest + 1  # and a commit writes after the garbage, never over it
    manifest, _ = commit(store, PREFIX, lambda m: with_entry(m, entry(9), keep_last=3))
    assert [c.step for c in manifest.checkpoints] == [5, 9]
    assert [c.step for c in read_manifest(store, PREFIX).manifest.checkpoints] == [5, 9]


def test_nothing_readable_is_an_empty_manifest_not_an_error() -> None:
    store = MemoryStore()
    store.objects[generation_key(PREFIX, 1)] = b"[[[["
    store.objects[PREFIX + "manifest.json"] = b"\xff\xfe"
    read = read_manifest(store, PREFIX)
    assert (read.manifest.checkpoints, read.generation) == ([], 1)
    store.objects.clear()
    store.objects[PREFIX + "manifest.json"] = b"\xff\xfe"  # an earlier release's, as garbage
    assert read_manifest(store, PREFIX).manifest.checkpoints == []
