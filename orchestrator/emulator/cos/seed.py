"""Seeding example data: a local folder copied into a bucket through the store, as PUT Bucket and PUT Object
would leave it (same bucket checks and owner, same ETag and CRC-64), for the admin route ``POST seed``.

The folder is read by the emulator, so it must be on the emulator's machine, and under one of the roots the
emulator was given at start (``serve --seed-root``): the admin key must not open every file its user can read.
Every regular file under it (symbolic links followed, as ``Path.is_file`` does, as long as they stay under a root),
in sorted order, becomes the object ``prefix + <relative posix path>``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import CosError
from . import transfer
from .buckets import check_new_bucket
from .service import MAX_KEY_BYTES
from .storage import Store


class SeedError(ValueError):
    """Input the seed cannot use; the message says what is wrong."""


def _under(path: Path, roots: tuple[Path, ...]) -> bool:
    """Whether ``path``, its links and ``..`` resolved, lies under one of ``roots`` (resolved already)."""
    real = path.resolve()
    return any(real.is_relative_to(root) for root in roots)


def _confined(path: Path, roots: tuple[Path, ...], what: str) -> None:
    if not _under(path, roots):
        allowed = ", ".join(map(str, roots)) or "no folder (it was started without --seed-root)"
        raise SeedError(
            f"{what} is outside what this emulator may read: it may seed only from folders under {allowed} (the "
            "--seed-root it was started with)"
        )


def _files(folder: Path, prefix: str, roots: tuple[Path, ...]) -> list[tuple[Path, str]]:
    if not folder.is_absolute():
        raise SeedError(f"folder must be an absolute path, not {str(folder)!r}")
    # Before anything is looked at: a folder outside says nothing of itself, not even whether it exists.
    _confined(folder, roots, f"folder {folder}")
    if not folder.exists():
        raise SeedError(f"folder {folder} does not exist")
    if not folder.is_dir():
        raise SeedError(f"folder {folder} is not a directory")
    files = [(path, prefix + path.relative_to(folder).as_posix()) for path in sorted(folder.rglob("*"))
             if path.is_file()]
    for path, _ in files:
        _confined(path, roots, f"{path} (a link to {path.resolve()})")
    for _, key in files:
        if len(key.encode()) > MAX_KEY_BYTES:
            raise SeedError(f"the object key {key!r} is longer than {MAX_KEY_BYTES} bytes")
    return files


async def seed(
    store: Store, appid: str, now: Callable[[], float], *, bucket: str, region: str, prefix: str, folder: Path,
    only_if_empty: bool, roots: tuple[Path, ...],
) -> dict[str, Any]:
    """Create ``bucket`` in ``region`` unless it exists (in whichever region), then copy the folder's files; with
    ``only_if_empty`` nothing is copied when some object's key starts with ``prefix`` already. Everything is
    checked before anything changes; ``roots``: the folders it may read under (resolved)."""
    try:
        check_new_bucket(bucket, appid)
    except CosError as err:
        raise SeedError(f"bucket {bucket!r}: {err.message}") from err
    files = _files(folder, prefix, roots)
    target = next((b for b in store.buckets() if b.name == bucket), None)
    answer: dict[str, Any] = {"bucket": bucket, "prefix": prefix, "files": 0, "bytes": 0, "skipped": False}
    if target is not None and only_if_empty and store.holds_objects(bucket, prefix):
        return {**answer, "skipped": True}
    if target is None:
        store.create_bucket(bucket, region, now())
        target = store.bucket(bucket, region)
    for source, key in files:
        # Hashing and copying block: off the event loop; the commit runs on it (storage.py's single writer).
        try:
            body = await asyncio.to_thread(transfer.ingest, source, store.new_data_path())
        except OSError as exc:  # the files before it stay seeded
            raise SeedError(f"cannot read {source}: {exc.strerror or exc}") from exc
        store.put_object(target, key, body, {}, now())
        answer["files"] += 1
        answer["bytes"] += body.size
    return answer
