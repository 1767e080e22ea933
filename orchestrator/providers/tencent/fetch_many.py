"""Many small objects in one event loop: the hot path of a data sync of a million small files.

Threads were the wrong tool for it. Eight threads, each doing one HTTP exchange, one file and one checksum per
object, spent more of their CPU handing the GIL to one another than on the work (strace of a sync of 3,000 objects
of 110 KiB: 124 futex calls an object, 2.4 s of system time against 0.8 s for a plain sequential loop). One asyncio
loop with many requests in flight does the same work without that (benchmarks/sync_throughput.py).

Each object is fetched as the listing showed it (``If-Match`` its ETag, so a replaced object is never mixed with
the listed one), streamed into a temporary file beside its destination, checksummed (CRC-64) as it streams, and
renamed into place once its size and checksum are right: a reader never sees a partial file. An object that fails
here (COS answered an error, the connection broke, the bytes were wrong) is handed back to the caller, whose
regular path retries it; a local disk that refuses a write fails the whole call at once.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import yarl

import crc64ecma

from . import errors
from ._sdk import TencentSdk
from .objects import ObjectInfo, Progress, info_from_headers, part_path, verify

CHUNK = 1 << 20
# Bodies up to this size are read whole and written by a disk thread in one go (one hop an object); larger ones are
# written chunk by chunk as they arrive. In flight at once: concurrency x WHOLE_BODY of memory at most.
WHOLE_BODY = 1 << 20
DISK_THREADS = 4
T = TypeVar("T")


@dataclass(frozen=True)
class Wanted:
    """One object to fetch: as its listing showed it, where it goes, and what counts its bytes."""

    listed: ObjectInfo
    dest: Path
    progress: Progress | None = None


Done = Callable[[Wanted, ObjectInfo], None]


class _LocalDiskError(Exception):
    """A write or rename of the local disk failed: no retry helps (a full disk), the whole call fails with it."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(str(cause))
        self.cause = cause


def fetch_many(sdk: TencentSdk, bucket: str, wanted: Iterable[Wanted], done: Done, *, concurrency: int,
               stop: threading.Event | None = None) -> list[tuple[Wanted, errors.CloudError]]:
    """Fetch every object of ``wanted``, ``concurrency`` at a time, calling ``done`` (in this thread) for each one
    in place; returns those that failed, with why. Stops taking new objects once ``stop`` is set. Raises the
    OSError of a local disk that refused a write."""
    failed: list[tuple[Wanted, errors.CloudError]] = []
    try:
        asyncio.run(_fetch_all(sdk, bucket, iter(wanted), done, failed, concurrency, stop))
    except _LocalDiskError as exc:
        raise exc.cause from None
    return failed


async def _fetch_all(sdk: TencentSdk, bucket: str, wanted: Iterator[Wanted], done: Done,
                     failed: list[tuple[Wanted, errors.CloudError]], concurrency: int,
                     stop: threading.Event | None) -> None:
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=sdk.timeout, sock_read=sdk.timeout)
    connector = aiohttp.TCPConnector(limit=concurrency)
    # auto_decompress off: the checksum is of the bytes COS stores, whatever Content-Encoding they were put with.
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, auto_decompress=False) as session:
        with ThreadPoolExecutor(DISK_THREADS, thread_name_prefix="fetch-disk") as disk:

            async def worker() -> None:
                # The workers share one iterator: a million objects are never a million tasks.
                for item in wanted:
                    if stop is not None and stop.is_set():
                        return
                    try:
                        done(item, await _fetch(session, disk, sdk, bucket, item))
                    except errors.CloudError as exc:
                        failed.append((item, exc))

            workers = [asyncio.ensure_future(worker()) for _ in range(concurrency)]
            try:
                await asyncio.gather(*workers)
            finally:
                for task in workers:
                    task.cancel()
                await asyncio.gather(*workers, return_exceptions=True)


async def _fetch(session: aiohttp.ClientSession, disk: ThreadPoolExecutor, sdk: TencentSdk, bucket: str,
                 item: Wanted) -> ObjectInfo:
    key = item.listed.key
    url, headers = sdk.cos_get_request(bucket, key, {"If-Match": f'"{item.listed.etag}"'})
    where = f"cos://{bucket}/{key}"
    file: _TempFile | None = None
    try:
        async with session.get(yarl.URL(url, encoded=True), headers=headers, proxy=sdk.cos_proxy(url),
                               allow_redirects=False) as response:
            if response.status >= 400:
                raise sdk.cos_http_error(response.status, await response.read())
            info = info_from_headers(key, dict(response.headers))
            if info.size > WHOLE_BODY:
                file = await _in_disk(disk, _TempFile, item.dest)
                async for chunk in response.content.iter_chunked(CHUNK):
                    await _in_disk(disk, file.write, chunk)
                    if item.progress is not None:
                        item.progress(len(chunk))
            else:
                body = await response.read()
                if item.progress is not None:
                    item.progress(len(body))
                file = await _in_disk(disk, _TempFile.of, item.dest, body)
        await _in_disk(disk, file.land, where, info)
        return info
    except BaseException as exc:
        if file is not None:
            await _in_disk(disk, file.discard)
        if isinstance(exc, (aiohttp.ClientError, asyncio.TimeoutError)):
            raise sdk.cos_network_error(exc) from exc
        raise


async def _in_disk(disk: ThreadPoolExecutor, call: Callable[..., T], *args: Any) -> T:
    """``call`` on a disk thread: creating, writing and renaming files held the event loop up (a third of a
    sync's time went to ``open`` alone while another program used the disk), and the GIL is free meanwhile."""
    return await asyncio.get_running_loop().run_in_executor(disk, call, *args)


class _TempFile:
    """An object's bytes in a temporary file beside its destination, checksummed as they are written, renamed into
    place only once its size and CRC-64 are the object's; removed on any failure. Runs on the disk threads."""

    def __init__(self, dest: Path) -> None:
        self.dest = dest
        self.path = part_path(dest)
        self.crc = 0
        self.size = 0
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        except OSError as exc:
            raise _LocalDiskError(exc) from exc

    @classmethod
    def of(cls, dest: Path, body: bytes) -> _TempFile:
        file = cls(dest)
        try:
            file.write(body)
        except BaseException:
            file.discard()
            raise
        return file

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.fd, view):]
        except OSError as exc:
            raise _LocalDiskError(exc) from exc
        self.crc = crc64ecma.update(data, self.crc)
        self.size += len(data)

    def land(self, where: str, info: ObjectInfo) -> None:
        self._close()
        if self.size != info.size:
            raise errors.TransientError("IncompleteBody", f"{where}: got {self.size} of {info.size} bytes")
        verify(info.key, info.crc64, self.crc)
        try:
            os.replace(self.path, self.dest)
        except OSError as exc:
            raise _LocalDiskError(exc) from exc

    def discard(self) -> None:
        """After any failure (land's own too): nothing of the object is left."""
        self._close()
        self.path.unlink(missing_ok=True)

    def _close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
