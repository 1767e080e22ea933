"""An in-memory ObjectStore with the methods the agent uses, for tests that need no emulator."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from crc64ecma import update as crc64
from orchestrator.providers.tencent import errors
from orchestrator.providers.tencent.storage import ObjectInfo, ObjectTooLarge, Progress, Sending, Wanted


class MemoryStore:
    def __init__(self, bucket: str = "state-1250000000") -> None:
        self.bucket = bucket
        self.objects: dict[str, bytes] = {}
        self.puts: list[str] = []  # keys in the order they were written
        self.fail_next: list[errors.CloudError] = []  # raised by the next puts, one each

    def _info(self, key: str) -> ObjectInfo:
        data = self.objects[key]
        return ObjectInfo(key, len(data), hashlib.md5(data).hexdigest(), crc64(data))

    def head(self, key: str) -> ObjectInfo | None:
        return self._info(key) if key in self.objects else None

    def put_bytes(self, key: str, data: bytes, content_type: str = "application/octet-stream", *,
                  create_only: bool = False) -> ObjectInfo:
        if self.fail_next:
            raise self.fail_next.pop(0)
        if create_only and key in self.objects:
            raise errors.AlreadyExistsError("FileAlreadyExists", f"{key} exists")
        self.objects[key] = bytes(data)
        self.puts.append(key)
        return self._info(key)

    def put_json(self, key: str, value: Any, *, create_only: bool = False) -> ObjectInfo:
        data = json.dumps(value, sort_keys=True).encode()
        # Only when asked: tests replace put_bytes with functions of the plain signature.
        return self.put_bytes(key, data, create_only=True) if create_only else self.put_bytes(key, data)

    def get_bytes(self, key: str, limit: int | None = None) -> bytes | None:
        data = self.objects.get(key)
        if data is not None and limit is not None and len(data) > limit:
            raise ObjectTooLarge(key, len(data), limit)
        return data

    def get_json(self, key: str) -> Any:
        data = self.get_bytes(key)
        return None if data is None else json.loads(data)

    def iter_objects(self, prefix: str) -> Iterator[ObjectInfo]:
        for key in sorted(self.objects):
            if key.startswith(prefix):
                yield self._info(key)

    def delete(self, keys: list[str]) -> None:
        for key in keys:
            self.objects.pop(key, None)

    def upload_file(self, path: Path, key: str, progress: Progress | None = None) -> ObjectInfo:
        return self.put_bytes(key, path.read_bytes())

    def download_file(self, key: str, dest: Path, progress: Progress | None = None,
                      listed: ObjectInfo | None = None) -> ObjectInfo:
        if key not in self.objects:
            raise errors.NotFoundError("NoSuchKey", key)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(self.objects[key])
        if progress:
            progress(len(self.objects[key]))
        return self._info(key)

    def fits_one_get(self, listed: ObjectInfo) -> bool:
        return True

    def download_many(self, wanted: Iterable[Wanted], done: Callable[[Wanted, ObjectInfo], None], *,
                      concurrency: int, stop: threading.Event | None = None) -> list[tuple[Wanted, errors.CloudError]]:
        failed = []
        for item in wanted:
            if stop is not None and stop.is_set():
                break
            try:
                done(item, self.download_file(item.listed.key, item.dest, item.progress))
            except errors.CloudError as exc:
                failed.append((item, exc))
        return failed

    def upload_many(self, sending: Iterable[Sending], done: Callable[[Sending, ObjectInfo], None], *,
                    concurrency: int, stop: threading.Event | None = None) -> list[tuple[Sending, errors.CloudError]]:
        failed = []
        for item in sending:
            try:
                done(item, self.upload_file(item.path, item.key))
            except errors.CloudError as exc:
                failed.append((item, exc))
        return failed


class MemoryStores:
    """Stores: one MemoryStore per bucket."""

    def __init__(self) -> None:
        self.stores: dict[str, MemoryStore] = {}

    def bucket(self, name: str) -> MemoryStore:
        return self.stores.setdefault(name, MemoryStore(name))
