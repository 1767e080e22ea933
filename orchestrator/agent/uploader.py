"""Uploads the complete checkpoints that appear in $CVMJOB_CHECKPOINT_DIR, newest first, then commits them.

For each: its files go to ``<checkpoints>/<name>/<path>`` (each verified by CRC-64), then the manifest is
committed with the new entry (marked with this job's id) and trimmed to ``keep_last`` (manifest.commit: a writer
racing with this one loses nothing); objects of dropped entries are deleted afterwards.
Newest first means an emergency checkpoint (the newest by construction) jumps the queue, and older pending
ones that ``keep_last`` would drop anyway are never uploaded. Locally the newest ``keep_local`` uploaded
checkpoints stay (and the one the training resumed from, which torchrun restarts read again); older ones go.

Every node runs an uploader over its own folder: trainkit writes checkpoints on global rank 0 only, so in a
multi-node attempt the node that hosts rank 0 is the one that uploads and commits.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from pathlib import Path

from orchestrator.contract import CheckpointEntry, Manifest
from orchestrator.providers.tencent.errors import CloudError
from orchestrator.providers.tencent.storage import ObjectStore

from .manifest import LocalCheckpoint, commit, read_manifest, scan, with_entry, would_be_dropped
from .retry import retrying
from .status import StatusBoard
from .uploads import upload_files

log = logging.getLogger(__name__)

_PARALLEL_FILES = 4


class CheckpointUploader:
    def __init__(self, directory: Path, store: ObjectStore, prefix: str, keep_last: int, attempt: int,
                 board: StatusBoard, *, job_id: str, keep_local: int = 2) -> None:
        self.directory = directory
        self.store = store
        self.prefix = prefix
        self.job_id = job_id  # written into each entry: whose checkpoint it is
        self.keep_last = keep_last
        self.attempt = attempt
        self.board = board
        self.keep_local = keep_local
        self.protected: str | None = None  # the checkpoint the training resumed from
        self._lock = threading.Lock()
        self._in_cos: set[str] = set()  # listed in the manifest, or uploaded by us
        self._skipped: set[str] = set()
        self._first_seen: dict[str, float] = {}
        self._emergency_since: float | None = None
        self.emergency_committed: str | None = None
        self.uploaded = 0

    def read_manifest(self) -> Manifest:
        manifest = retrying("read the checkpoint manifest", lambda: read_manifest(self.store, self.prefix)).manifest
        self._in_cos.update(c.name for c in manifest.checkpoints)
        return manifest

    def resumed_from(self, name: str, own: bool) -> None:
        """The training starts from checkpoint ``name``: kept here (torchrun's restarts read it again). Another
        job's (checkpoints.resume_from) is never uploaded as this job's: its first own checkpoint is what counts."""
        self.protected = name
        if not own:
            self._skipped.add(name)

    def request_emergency(self) -> None:
        """Checkpoints that appear from now on answer a checkpoint request (flagged ``emergency``)."""
        self._emergency_since = time.time()

    def tick(self) -> None:
        with self._lock:
            self._upload_next()

    def drain(self, deadline: float) -> bool:
        """Upload until nothing is pending or ``deadline`` (time.monotonic()) passes; True when all is done."""
        while time.monotonic() < deadline:
            try:
                with self._lock:
                    if not self._upload_next():
                        return True
            except (CloudError, OSError) as exc:
                log.warning("checkpoint upload failed (%s); trying again", exc)
                time.sleep(1.0)
        return False

    def _upload_next(self) -> bool:
        """Handle the newest pending checkpoint; False when there was none."""
        local = scan(self.directory)
        now = time.time()
        for checkpoint in local:
            self._first_seen.setdefault(checkpoint.name, now)
        pending = [c for c in local if c.name not in self._in_cos and c.name not in self._skipped]
        if not pending:
            self._prune(local)
            return False
        newest = pending[-1]
        manifest = self.read_manifest()
        if newest.name in self._in_cos:
            return True  # committed before (by an earlier run of this agent): nothing to do
        if would_be_dropped(manifest, newest.step, self.keep_last):
            log.info("checkpoint %s is older than the %d kept: not uploaded", newest.name, self.keep_last)
            self._skipped.add(newest.name)
            return True
        entry = self._upload(newest)
        manifest, dropped = retrying("commit the checkpoint manifest", lambda: commit(
            self.store, self.prefix, lambda current: with_entry(current, entry, self.keep_last)))
        self._in_cos.add(entry.name)
        self.uploaded += 1
        latest = manifest.latest()
        self.board.set_checkpoints(self.uploaded, latest.step if latest else None)
        if entry.emergency:
            self.emergency_committed = entry.name
        log.info("checkpoint %s committed (%d bytes%s)", entry.name, entry.size,
                 ", emergency" if entry.emergency else "")
        for old in dropped:
            self._delete_objects(old)
        self._prune(scan(self.directory))
        return True

    def _upload(self, checkpoint: LocalCheckpoint) -> CheckpointEntry:
        files = checkpoint.files()
        key = {rel: f"{self.prefix}{checkpoint.name}/{rel}" for rel in files}
        # Each upload verified its file against COS's CRC-64 and returns it: the file is read once.
        sent = upload_files(self.store, [(path, key[rel]) for rel, path in files.items()], _PARALLEL_FILES, "ckpt")
        infos = {rel: sent[key[rel]] for rel in files}
        assert all(info.crc64 is not None for info in infos.values()), "uploads return the CRC-64 they verified"
        since = self._emergency_since
        return CheckpointEntry(
            name=checkpoint.name,
            step=checkpoint.step,
            kind="file" if checkpoint.is_file else "directory",
            files={rel: info.crc64 for rel, info in infos.items() if info.crc64 is not None},
            size=sum(info.size for info in infos.values()),
            attempt=self.attempt,
            job=self.job_id,
            time=time.time(),
            emergency=since is not None and self._first_seen[checkpoint.name] >= since,
        )

    def _delete_objects(self, entry: CheckpointEntry) -> None:
        """Best effort: an object left behind costs a little storage, never correctness (it is unlisted)."""
        try:
            keys = [o.key for o in self.store.iter_objects(f"{self.prefix}{entry.name}/")]
            self.store.delete(keys)
        except CloudError as exc:
            log.warning("could not delete the dropped checkpoint %s: %s", entry.name, exc)

    def _prune(self, local: list[LocalCheckpoint]) -> None:
        done = [c for c in local if c.name in self._in_cos or c.name in self._skipped]
        for checkpoint in done[: max(0, len(done) - self.keep_local)]:
            if checkpoint.name == self.protected:
                continue
            if checkpoint.is_file:
                checkpoint.path.unlink(missing_ok=True)
            else:
                shutil.rmtree(checkpoint.path, ignore_errors=True)
