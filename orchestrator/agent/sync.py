"""Data sync: each ``data`` entry's COS prefix mirrored into ``<data root>/<target>``, incrementally.

A small index per target (``<data root>/.cvmjob-index/<target>.json``: source, and key -> size and ETag of what
was downloaded) decides what to do: an object whose size and ETag match the index, with its file in place, is
skipped; a new or changed object is downloaded (CRC-64 verified, atomic rename; a small one in one GET, a large one
in parallel ranges: see ObjectStore.download_file); a file whose object is gone is removed. Files the agent never
put there are left alone. Objects are fetched several at a time, and bytes done/total feed the heartbeat. The
index is saved beside the downloads and names a file only once the disks have it (see _Index).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import quote

from orchestrator.contract import Outcome
from orchestrator.providers.tencent.errors import CloudError
from orchestrator.providers.tencent.storage import ObjectInfo, ObjectStore, Wanted

from .cloud import Stores
from .errors import AttemptEnded
from .paths import stays_inside, write_atomically
from .retry import retrying
from .status import StatusBoard
from .stop import StopSignal

log = logging.getLogger(__name__)

INDEX_DIR = ".cvmjob-index"
FREE_SPACE_MARGIN = 1 << 30  # keep a GiB free beyond the data itself
_PARALLEL_OBJECTS = 8  # large objects at a time, each in parallel ranges
# Objects of one GET in flight at once: enough to hide a real endpoint's latency (tens of ms a request), within the
# connections a TencentSdk keeps (COS_CONNECTIONS).
_OBJECTS_IN_FLIGHT = 64
_SAVE_INDEX_SECONDS = 5.0  # what a crash mid-sync can cost: downloads since the last save


@dataclass(frozen=True)
class DataEntry:
    bucket: str
    prefix: str  # ends with "/" (or is "" for a whole bucket)
    target: str

    @property
    def source(self) -> str:
        return f"cos://{self.bucket}/{self.prefix}"


@dataclass
class SyncPlan:
    download: list[ObjectInfo] = field(default_factory=list)
    keep: list[ObjectInfo] = field(default_factory=list)
    remove: list[str] = field(default_factory=list)  # relative paths

    @property
    def bytes_total(self) -> int:
        return sum(o.size for o in self.download) + sum(o.size for o in self.keep)


def relative_path(prefix: str, key: str) -> str:
    """The object's path under its target; ValueError for keys that would land outside it."""
    rel = key[len(prefix):]
    if not stays_inside(rel):
        raise ValueError(f"object key {key!r} cannot be placed under its target folder")
    return PurePosixPath(rel).as_posix()


def plan(prefix: str, listing: list[ObjectInfo], index: dict[str, dict[str, object]], target: Path) -> SyncPlan:
    """Pure but for stat(): what to download, keep and remove, given the listing and the index."""
    result = SyncPlan()
    present = set()
    for obj in listing:
        if obj.key.endswith("/"):
            continue  # a "folder" marker object
        rel = relative_path(prefix, obj.key)
        present.add(rel)
        known = index.get(rel)
        local = target / rel
        unchanged = known is not None and known.get("size") == obj.size and known.get("etag") == obj.etag
        if unchanged and local.is_file() and local.stat().st_size == obj.size:
            result.keep.append(obj)
        else:
            result.download.append(obj)
    result.remove = sorted(rel for rel in index if rel not in present)
    return result


class _Index:
    """One target's index. It names a file only once the file is durable: a save takes what was recorded, then
    syncs the disks (one os.sync for all the files since the last save: a reboot must not find a torn file of the
    right size and trust it), then writes. Saves run beside the downloads, never in their way."""

    def __init__(self, path: Path, source: str) -> None:
        self.path = path
        self.source = source
        doc = json.loads(path.read_text()) if path.exists() else {}
        # An index made for another source says nothing about this one.
        self.objects: dict[str, dict[str, object]] = doc.get("objects", {}) if doc.get("source") == source else {}
        self._lock = threading.Lock()  # the downloads' records
        self._saving = threading.Lock()  # one save at a time, so an older snapshot never lands after a newer one
        self._changes = 0  # records and removals so far; a save with none since the last one costs no os.sync
        self._saved = 0

    def record(self, rel: str, obj: ObjectInfo) -> None:
        with self._lock:
            self.objects[rel] = {"size": obj.size, "etag": obj.etag}
            self._changes += 1

    def forget(self, rel: str) -> None:
        with self._lock:
            self.objects.pop(rel, None)
            self._changes += 1

    def save(self) -> None:
        with self._saving:
            with self._lock:
                if self._changes == self._saved:
                    return
                changes, doc = self._changes, json.dumps({"source": self.source, "objects": self.objects}).encode()
            os.sync()  # the files recorded above were written and closed before it
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(self.path, doc)
            self._saved = changes


class _FileProgress:
    """Bytes of one object counted into the board; a retried download first takes back its partial count."""

    def __init__(self, board: StatusBoard) -> None:
        self.board = board
        self.counted = 0

    def __call__(self, nbytes: int) -> None:
        self.counted += nbytes
        self.board.add_sync_done(nbytes)

    def reset(self) -> None:
        self.board.add_sync_done(-self.counted)
        self.counted = 0


def _list(store: ObjectStore, prefix: str) -> list[ObjectInfo]:
    return list(store.iter_objects(prefix))


@dataclass(frozen=True)
class Synced:
    bytes_downloaded: int
    durable: threading.Thread  # saves the indexes once the disks have the data; the training need not wait


def sync_data(entries: list[DataEntry], root: Path, stores: Stores, board: StatusBoard, stop: StopSignal) -> Synced:
    """Sync every entry. Raises AttemptEnded(SYNC_FAILED) on failure. Returns when every file is in place and
    verified; the disks write the data back meanwhile, and the indexes that let a later attempt on this node skip
    it are saved once they have (``Synced.durable``): a crash before that costs a download, never a torn file."""
    try:
        plans = []
        for entry in entries:
            store = stores.bucket(entry.bucket)
            listing = retrying(f"list {entry.source}", functools.partial(_list, store, entry.prefix))
            index = _Index(root / INDEX_DIR / f"{quote(entry.target, safe='')}.json", entry.source)
            plans.append((entry, plan(entry.prefix, listing, index.objects, root / entry.target), index))
    except (CloudError, ValueError) as exc:
        raise AttemptEnded(Outcome.SYNC_FAILED, f"listing the data failed: {exc}") from exc
    total = sum(p.bytes_total for _, p, _ in plans)
    needed = sum(o.size for _, p, _ in plans for o in p.download)
    board.set_sync(total - needed, total)
    root.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(root).free
    if needed + FREE_SPACE_MARGIN > free:
        raise AttemptEnded(Outcome.SYNC_FAILED, f"not enough disk space in {root}: the data needs {needed} bytes "
                                                f"(+1 GiB margin), {free} are free")
    log.info("data: %d bytes in %d objects, %d bytes to download",
             total, sum(len(p.download) + len(p.keep) for _, p, _ in plans), needed)
    indexes = [index for _, _, index in plans]
    done = threading.Event()
    saver = threading.Thread(target=_save_every, args=(indexes, done), name="sync-index", daemon=True)
    saver.start()
    try:
        for entry, sync_plan, index in plans:
            target = root / entry.target
            for rel in sync_plan.remove:
                (target / rel).unlink(missing_ok=True)
                index.forget(rel)
            try:
                _download_all(entry, sync_plan.download, target, stores, board, stop, index)
            except (CloudError, OSError) as exc:  # OSError: the local disk refused a write (full, quota)
                raise AttemptEnded(Outcome.SYNC_FAILED, f"downloading {entry.source} failed: {exc}") from exc
    finally:
        done.set()  # the saver's last round saves everything recorded, a failed sync's files included
    return Synced(needed, saver)


def _save_every(indexes: list[_Index], done: threading.Event) -> None:
    while True:
        finished = done.wait(_SAVE_INDEX_SECONDS)
        for index in indexes:
            try:
                index.save()
            except OSError as exc:  # a full disk, say: the cost is a download again on this node, not the job
                log.warning("could not save the data index %s: %s", index.path, exc)
        if finished:
            return


def _download_all(entry: DataEntry, objects: list[ObjectInfo], target: Path, stores: Stores, board: StatusBoard,
                  stop: StopSignal, index: _Index) -> None:
    """The objects that come in one GET all in one event loop, many in flight (a sync of small files is requests
    and nothing else); then, on threads with the usual retries, the large ones (parallel ranges each) and any that
    failed in the loop."""
    store = stores.bucket(entry.bucket)
    counting: dict[str, _FileProgress] = {}  # the objects in flight or failed, and the bytes each has counted

    whole: list[ObjectInfo] = []
    ranged: list[ObjectInfo] = []  # too large for one GET: parallel ranges, on the threads below
    for obj in objects:
        (whole if store.fits_one_get(obj) else ranged).append(obj)

    def small() -> Iterator[Wanted]:  # taken as the loop goes: a million objects are never a million Wanted
        for obj in whole:
            counting[obj.key] = _FileProgress(board)
            yield Wanted(obj, target / relative_path(entry.prefix, obj.key), counting[obj.key])

    def place(wanted: Wanted, info: ObjectInfo) -> None:
        del counting[wanted.listed.key]
        index.record(relative_path(entry.prefix, wanted.listed.key), info)

    failed = store.download_many(small(), place, concurrency=_OBJECTS_IN_FLIGHT, stop=stop.event)
    for wanted, exc in failed:
        log.info("download %s failed (%s); trying again", wanted.listed.key, exc)
    again = [wanted.listed for wanted, _ in failed] + ranged

    def fetch(obj: ObjectInfo) -> None:
        if stop.event.is_set():
            return
        rel = relative_path(entry.prefix, obj.key)
        progress = counting.pop(obj.key, None) or _FileProgress(board)

        def attempt() -> ObjectInfo:
            progress.reset()
            return store.download_file(obj.key, target / rel, progress, listed=obj)

        index.record(rel, retrying(f"download {obj.key}", attempt))

    with ThreadPoolExecutor(max_workers=_PARALLEL_OBJECTS, thread_name_prefix="sync") as pool:
        futures = [pool.submit(fetch, obj) for obj in again]
        try:
            for future in futures:
                future.result()
        except BaseException:
            for future in futures:
                future.cancel()  # the attempt has failed: do not start the downloads still queued
            raise
    stop.check()
