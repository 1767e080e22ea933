"""The checkpoint manifest: reading and committing it in COS, pure updates, and finding complete checkpoints in a
local folder.

The manifest lists the complete checkpoints; it is written after their files, so whatever it lists can be
restored. ``keep_last`` counts by step: adding a checkpoint drops the oldest entries beyond it, and their
objects are deleted only after the manifest that no longer lists them is written.

It is a series of generations, ``<checkpoints>manifest/<generation>.json``, the highest the current one. COS has
no conditional PUT on an ETag, but it refuses to overwrite a key with ``x-cos-forbid-overwrite`` (create_only): a
writer reads generation G, applies its update, and writes G+1 create-only; when another writer took G+1 first it
reads again and applies its update to theirs, so neither loses an entry (a stale agent of an earlier attempt and
the current one). Older generations are deleted after a commit, all but the last few. ``manifest.json`` at the
same prefix is what agents of an earlier release wrote: read while no generation exists. The agent and
`cvmjob status` both read here.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from orchestrator.contract import CheckpointEntry, Manifest, Unread, checkpoint_step, decode_doc, too_large
from orchestrator.providers.tencent.errors import AlreadyExistsError, CloudError, TransientError
from orchestrator.providers.tencent.storage import ObjectInfo, ObjectTooLarge

log = logging.getLogger(__name__)

LEGACY_MANIFEST = "manifest.json"
GENERATIONS = "manifest/"
_GENERATION = re.compile(r"(?P<generation>[0-9]+)\.json")
KEEP_GENERATIONS = 3  # a reader that listed the newest a moment ago still finds it, or a newer one
# Writers of one manifest are an agent and at most a stale one of an earlier attempt; a writer beaten this many
# times in a row is facing something else, and fails (transiently: its caller tries again later).
_COMMIT_TRIES = 20
# A manifest lists keep_last entries of a few hundred bytes each; more is not one an agent wrote (the training holds
# keys that can write here), and reading it whole would hold whatever was put there in memory.
MANIFEST_LIMIT = 4 * 1024 * 1024

Update = Callable[[Manifest], tuple[Manifest, list[CheckpointEntry]]]


class ManifestStore(Protocol):
    """What the manifest needs of an ObjectStore."""

    def get_bytes(self, key: str, limit: int | None = None) -> bytes | None: ...

    def put_json(self, key: str, value: Any, *, create_only: bool = False) -> ObjectInfo: ...

    def iter_objects(self, prefix: str) -> Iterator[ObjectInfo]: ...

    def delete(self, keys: list[str]) -> None: ...


def generation_key(prefix: str, generation: int) -> str:
    """Zero-padded: a listing's order is the generations' order."""
    return f"{prefix}{GENERATIONS}{generation:012d}.json"


@dataclass(frozen=True)
class ManifestRead:
    manifest: Manifest
    generation: int  # the one read; 0: none written yet (the legacy manifest.json, or nothing)
    listed: tuple[int, ...]  # every generation the listing showed, in order


def _generations(store: ManifestStore, prefix: str) -> list[int]:
    found = []
    for info in store.iter_objects(prefix + GENERATIONS):
        match = _GENERATION.fullmatch(info.key[len(prefix) + len(GENERATIONS):])
        if match is not None:
            found.append(int(match["generation"]))
    return sorted(found)


def read_manifest(store: ManifestStore, prefix: str) -> ManifestRead:
    """The current manifest of the checkpoints at ``prefix``: the newest generation that is a manifest. One that
    is not (garbage, too large: the training's keys can write here) is passed over for the one before it, said in
    the log; the next commit still goes after the newest, so nothing is overwritten. The newest generation can
    vanish between the listing and the read only because a newer one made it old: then the listing is taken
    again."""
    for _ in range(_COMMIT_TRIES):
        listed = _generations(store, prefix)
        if not listed:
            legacy = _decoded(store, prefix + LEGACY_MANIFEST)
            return ManifestRead(legacy if isinstance(legacy, Manifest) else Manifest(), 0, ())
        for generation in reversed(listed):
            found = _decoded(store, generation_key(prefix, generation))
            if found is None and generation == listed[-1]:
                break  # the newest went: list again
            if isinstance(found, Manifest):
                return ManifestRead(found, listed[-1], tuple(listed))
        else:
            return ManifestRead(Manifest(), listed[-1], tuple(listed))  # none readable: start over after them
    raise TransientError("ManifestMoving", f"the manifest at {prefix} kept changing while it was read")


def _decoded(store: ManifestStore, key: str) -> Manifest | Unread | None:
    """The manifest at ``key``, None when there is none, or why what is there is not one (logged)."""
    found: Manifest | Unread | None
    try:
        data = store.get_bytes(key, limit=MANIFEST_LIMIT)
    except ObjectTooLarge as exc:
        found = too_large(key, exc.size, MANIFEST_LIMIT)
    else:
        found = None if data is None else decode_doc(key, data, Manifest, MANIFEST_LIMIT)
    if isinstance(found, Unread):
        log.warning("%s", found.describe("passed over"))
    return found


def commit(store: ManifestStore, prefix: str, update: Update) -> tuple[Manifest, list[CheckpointEntry]]:
    """Apply ``update`` (pure: the manifest -> the new one and the entries it dropped) to the current manifest and
    write the result as the next generation, create-only; applied again to whatever another writer committed
    first. Returns what was written and what it dropped (whose objects the caller may now delete)."""
    for _ in range(_COMMIT_TRIES):
        current = read_manifest(store, prefix)
        manifest, dropped = update(current.manifest)
        generation = current.generation + 1
        try:
            store.put_json(generation_key(prefix, generation), manifest.model_dump(mode="json"), create_only=True)
        except AlreadyExistsError:
            log.info("manifest generation %d at %s was written by another writer: applying the update to it",
                     generation, prefix)
            continue
        _forget(store, prefix, [g for g in current.listed if g <= generation - KEEP_GENERATIONS])
        return manifest, dropped
    raise TransientError("ManifestContended", f"another writer committed the manifest at {prefix} every time")


def _forget(store: ManifestStore, prefix: str, generations: list[int]) -> None:
    """Best effort: an old generation left behind is never read (a newer one is listed)."""
    if not generations:
        return
    try:
        store.delete([generation_key(prefix, g) for g in generations])
    except CloudError as exc:
        log.warning("could not delete old manifest generations at %s: %s", prefix, exc)


def entries_of(manifest: Manifest, job_id: str) -> tuple[Manifest, list[CheckpointEntry]]:
    """The manifest's entries that ``job_id``'s agents wrote (one without a job: an earlier release's, written at
    its own job's location), and the others."""
    mine = [c for c in manifest.checkpoints if c.job in (None, job_id)]
    others = [c for c in manifest.checkpoints if c.job not in (None, job_id)]
    return manifest.model_copy(update={"checkpoints": mine}), others


@dataclass(frozen=True)
class LocalCheckpoint:
    name: str
    step: int
    path: Path

    @property
    def is_file(self) -> bool:
        return self.path.is_file()

    def files(self) -> dict[str, Path]:
        """Relative path -> file; a file checkpoint holds itself under its own name."""
        if self.is_file:
            return {self.name: self.path}
        return {p.relative_to(self.path).as_posix(): p for p in sorted(self.path.rglob("*")) if p.is_file()}


def scan(directory: Path) -> list[LocalCheckpoint]:
    """The complete checkpoints in ``directory`` (named step-<N>, in place by atomic rename), oldest first."""
    if not directory.is_dir():
        return []
    found = []
    for entry in directory.iterdir():
        step = checkpoint_step(entry.name)
        if step is not None:
            found.append(LocalCheckpoint(entry.name, step, entry))
    return sorted(found, key=lambda c: (c.step, c.name))


def with_entry(manifest: Manifest, entry: CheckpointEntry, keep_last: int) -> tuple[Manifest, list[CheckpointEntry]]:
    """The manifest with ``entry`` added (replacing one of the same name) and trimmed to ``keep_last`` by step;
    and the entries dropped."""
    others = [c for c in manifest.checkpoints if c.name != entry.name]
    entries = sorted([*others, entry], key=lambda c: (c.step, c.time))
    kept, dropped = entries[-keep_last:], entries[:-keep_last]
    return manifest.model_copy(update={"checkpoints": kept}), dropped


def would_be_dropped(manifest: Manifest, step: int, keep_last: int) -> bool:
    """True when ``keep_last`` newer checkpoints are already listed: uploading this one would be wasted."""
    return sum(1 for c in manifest.checkpoints if c.step > step) >= keep_last
