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
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import yarl

import crc64ecma

from . import errors
from ._sdk import TencentSdk
from .objects import ObjectInfo, Progress, info_from_headers, part_path, verify

CHUNK = 1 << 20


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

        async def worker() -> None:
            # The workers share one iterator: a million objects are never a million tasks.
            for item in wanted:
                if stop is not None and stop.is_set():
                    return
                try:
                    done(item, await _fetch(session, sdk, bucket, item))
                except errors.CloudError as exc:
                    failed.append((item, exc))

        workers = [asyncio.ensure_future(worker()) for _ in range(concurrency)]
        try:
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)


async def _fetch(session: aiohttp.ClientSession, sdk: TencentSdk, bucket: str, item: Wanted) -> ObjectInfo:
    key = item.listed.key
    url, headers = sdk.cos_get_request(bucket, key, {"If-Match": f'"{item.listed.etag}"'})
    tmp = part_path(item.dest)
    try:
        async with session.get(yarl.URL(url, encoded=True), headers=headers, proxy=sdk.cos_proxy(url),
                               allow_redirects=False) as response:
            if response.status >= 400:
                raise sdk.cos_http_error(response.status, await response.read())
            info = info_from_headers(key, dict(response.headers))
            value, written = await _stream_to(tmp, response, item.progress)
        if written != info.size:
            raise errors.TransientError("IncompleteBody", f"cos://{bucket}/{key}: got {written} of "
                                                          f"{info.size} bytes")
        verify(key, info.crc64, value)
        try:
            os.replace(tmp, item.dest)
        except OSError as exc:
            raise _LocalDiskError(exc) from exc
        return info
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        tmp.unlink(missing_ok=True)
        raise sdk.cos_network_error(exc) from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


async def _stream_to(path: Path, response: aiohttp.ClientResponse, progress: Progress | None) -> tuple[int, int]:
    """The body into ``path``: (its CRC-64, its length). Small writes into the page cache do not hold the loop up
    for long enough to be worth a thread each."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError as exc:
        raise _LocalDiskError(exc) from exc
    value, written = 0, 0
    try:
        async for chunk in response.content.iter_chunked(CHUNK):
            _write_all(fd, chunk)
            value = crc64ecma.update(chunk, value)
            written += len(chunk)
            if progress is not None:
                progress(len(chunk))
    finally:
        os.close(fd)
    return value, written


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError as exc:
        raise _LocalDiskError(exc) from exc
