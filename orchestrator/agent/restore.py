"""Restore: the manifest's latest checkpoint, downloaded into the checkpoint folder and verified against the
CRC-64 the manifest recorded. A copy already in place (a restarted agent on the same disk) is verified and used
as it is. The training finds it through CVMJOB_RESUME_FROM. Only a checkpoint of the job the manifest's location
belongs to is ever restored (``restorable``): the agent's own job's, or the job ``checkpoints.resume_from`` names
while its own job has none."""

from __future__ import annotations

import functools
import logging
import shutil
from pathlib import Path

from orchestrator.contract import CheckpointEntry, Manifest
from orchestrator.providers.tencent.storage import ChecksumMismatch, ObjectStore, file_crc64

from .manifest import entries_of
from .paths import stays_inside
from .retry import retrying

log = logging.getLogger(__name__)


def _layout(entry: CheckpointEntry, root: Path) -> dict[str, Path]:
    """Relative path -> where it lives when the checkpoint sits at ``root``."""
    if entry.kind == "file":
        return {rel: root for rel in entry.files}
    for rel in entry.files:
        if not stays_inside(rel):
            raise ValueError(f"checkpoint {entry.name}: file {rel!r} would land outside its folder")
    return {rel: root / rel for rel in entry.files}


def _intact(entry: CheckpointEntry, root: Path) -> bool:
    return all(path.is_file() and file_crc64(path) == entry.files[rel] for rel, path in _layout(entry, root).items())


def restorable(manifest: Manifest, job_id: str, where: str) -> Manifest:
    """The entries of the manifest at ``where`` that ``job_id`` wrote; any other is ignored, and said."""
    mine, others = entries_of(manifest, job_id)
    for entry in others:
        log.warning("checkpoint %s at %s was written by job %s, not %s: ignored", entry.name, where, entry.job, job_id)
    return mine


def restore_latest(manifest: Manifest, store: ObjectStore, prefix: str, directory: Path) -> Path | None:
    """The restored checkpoint's path, or None when the manifest lists none."""
    entry = manifest.latest()
    if entry is None:
        return None
    final = directory / entry.name
    if _intact(entry, final):
        log.info("checkpoint %s is already here", entry.name)
        return final
    staging = directory / f".restore-{entry.name}"
    _remove(staging)
    for rel, path in _layout(entry, staging).items():
        key = f"{prefix}{entry.name}/{rel}"
        retrying(f"download {key}", functools.partial(store.download_file, key, path))
        if file_crc64(path) != entry.files[rel]:
            raise ChecksumMismatch("ChecksumMismatch", f"{key} does not match the manifest's CRC-64")
    _remove(final)
    staging.rename(final)
    log.info("checkpoint %s restored (step %d)", entry.name, entry.step)
    return final


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
