"""Many small objects in one event loop, down or up: the hot path of a data sync of a million small files, and of
checkpoints and outputs of many.

Threads were the wrong tool for it. Eight threads, each doing one HTTP exchange, one file and one checksum per
object, spent more of their CPU handing the GIL to one another than on the work (strace of a sync of 3,000 objects
of 110 KiB: 124 futex calls an object, 2.4 s of system time against 0.8 s for a plain sequential loop). Here one
asyncio loop keeps many requests in flight, and the files are created, written, read and renamed on a few disk
threads (done in the loop, a third of its time went to ``open`` while another program used the disk).

Down (``fetch_many``): each object as its listing showed it (``If-Match`` its ETag, so a replaced object is never
mixed with the listed one), into a temporary file beside its destination, checksummed (CRC-64) as it is written,
renamed into place once its size and checksum are right: a reader never sees a partial file. Up (``put_many``):
each file read once, its CRC-64 checked against the one COS reports. An object that fails (COS answered an error,
the connection broke, the bytes were wrong) is handed back to the caller, whose regular path retries it; a local
disk that refuses a write fails the whole call at once.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import crc64ecma

if TYPE_CHECKING:
    import aiohttp

from . import errors
from ._sdk import TencentSdk
from .objects import ObjectInfo, Progress, info_from_headers, part_path, verify

CHUNK = 1 << 20
# Bodies up to this size move whole, in one disk-thread hop an object (downloads read them whole, uploads send
# them from memory); larger downloads are written chunk by chunk as they arrive. At most concurrency x WHOLE_BODY
# of bodies in memory at once.
WHOLE_BODY = 1 << 20
DISK_THREADS = 4
T = TypeVar("T")
Item = TypeVar("Item")


@dataclass(frozen=True)
class Wanted:
    """One object to fetch: as its listing showed it, where it goes, and what counts its bytes."""

    listed: ObjectInfo
    dest: Path
    progress: Progress | None = None


@dataclass(frozen=True)
class Sending:
    """One file to put, of at most WHOLE_BODY bytes, and its key."""

    path: Path
    key: str


class _LocalDiskError(Exception):
    """A read, write or rename of the local disk failed: no retry helps (a full disk), the whole call fails."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(str(cause))
        self.cause = cause


class _Many:
    """One call's loop: its HTTP session, its disk threads, its account."""

    def __init__(self, sdk: TencentSdk, bucket: str, session: aiohttp.ClientSession, disk: ThreadPoolExecutor) -> None:
        self.sdk, self.bucket, self.session, self.disk = sdk, bucket, session, disk

    async def on_disk(self, call: Callable[..., T], *args: Any) -> T:
        try:
            return await asyncio.get_running_loop().run_in_executor(self.disk, call, *args)
        except OSError as exc:
            raise _LocalDiskError(exc) from exc

    async def exchange(self, method: str, key: str, headers: dict[str, str], body: bytes | None,
                       answer: Callable[[aiohttp.ClientResponse], Awaitable[T]]) -> T:
        """One signed request; ``answer`` reads a successful response. COS's error answers and the network's
        failures come out as CloudErrors."""
        import aiohttp
        import yarl

        url, signed = self.sdk.cos_request(method, self.bucket, key, headers)
        try:
            async with self.session.request(method, yarl.URL(url, encoded=True), headers=signed, data=body,
                                            proxy=self.sdk.cos_proxy(url), allow_redirects=False) as response:
                if response.status >= 400:
                    raise self.sdk.cos_http_error(response.status, await response.read(), method)
                return await answer(response)
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise self.sdk.cos_network_error(exc) from exc


def _run(sdk: TencentSdk, bucket: str, items: Iterable[Item], step: Callable[[_Many, Item], Awaitable[T]],
         done: Callable[[Item, T], None], concurrency: int,
         stop: threading.Event | None) -> list[tuple[Item, errors.CloudError]]:
    failed: list[tuple[Item, errors.CloudError]] = []
    try:
        asyncio.run(_run_all(sdk, bucket, iter(items), step, done, failed, concurrency, stop))
    except _LocalDiskError as exc:
        raise exc.cause from None
    return failed


async def _run_all(sdk: TencentSdk, bucket: str, items: Iterator[Item], step: Callable[[_Many, Item], Awaitable[T]],
                   done: Callable[[Item, T], None], failed: list[tuple[Item, errors.CloudError]], concurrency: int,
                   stop: threading.Event | None) -> None:
    # Imported here: a tenth of a second at the start of every process that never moves many objects at once.
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=None, sock_connect=sdk.timeout, sock_read=sdk.timeout)
    connector = aiohttp.TCPConnector(limit=concurrency)
    # auto_decompress off: the checksum is of the bytes COS stores, whatever Content-Encoding they were put with.
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, auto_decompress=False) as session:
        with ThreadPoolExecutor(DISK_THREADS, thread_name_prefix="cos-disk") as disk:
            many = _Many(sdk, bucket, session, disk)

            async def worker() -> None:
                # The workers share one iterator: a million objects are never a million tasks.
                for item in items:
                    if stop is not None and stop.is_set():
                        return
                    try:
                        done(item, await step(many, item))
                    except errors.CloudError as exc:
                        failed.append((item, exc))

            workers = [asyncio.ensure_future(worker()) for _ in range(concurrency)]
            try:
                await asyncio.gather(*workers)
            finally:
                for task in workers:
                    task.cancel()
                await asyncio.gather(*workers, return_exceptions=True)


# -- down -------------------------------------------------------------------------------------------------------
def fetch_many(sdk: TencentSdk, bucket: str, wanted: Iterable[Wanted], done: Callable[[Wanted, ObjectInfo], None],
               *, concurrency: int, stop: threading.Event | None = None) -> list[tuple[Wanted, errors.CloudError]]:
    """Fetch every object of ``wanted``, ``concurrency`` at a time, calling ``done`` (in this thread) for each one
    in place; returns those that failed, with why. Stops taking new objects once ``stop`` is set. Raises the
    OSError of a local disk that refused a write."""
    return _run(sdk, bucket, wanted, _fetch, done, concurrency, stop)


async def _fetch(many: _Many, item: Wanted) -> ObjectInfo:
    key = item.listed.key
    file: _TempFile | None = None

    async def receive(response: aiohttp.ClientResponse) -> ObjectInfo:
        nonlocal file
        info = info_from_headers(key, dict(response.headers))
        if info.size > WHOLE_BODY:
            file = await many.on_disk(_TempFile, item.dest)
            async for chunk in response.content.iter_chunked(CHUNK):
                await many.on_disk(file.write, chunk)
                if item.progress is not None:
                    item.progress(len(chunk))
        else:
            body = await response.read()
            if item.progress is not None:
                item.progress(len(body))
            await many.on_disk(_TempFile.place, item.dest, body, where, info)
        return info

    where = f"cos://{many.bucket}/{key}"
    try:
        info = await many.exchange("GET", key, {"If-Match": f'"{item.listed.etag}"'}, None, receive)
        if file is not None:
            await many.on_disk(file.land, where, info)
        return info
    except BaseException:
        if file is not None:
            await many.on_disk(file.discard)
        raise


class _TempFile:
    """An object's bytes in a temporary file beside its destination, checksummed as they are written, renamed into
    place only once its size and CRC-64 are the object's; removed on any failure. Runs on the disk threads."""

    def __init__(self, dest: Path) -> None:
        self.dest = dest
        self.path = part_path(dest)
        self.crc = 0
        self.size = 0
        dest.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    @classmethod
    def place(cls, dest: Path, body: bytes, where: str, info: ObjectInfo) -> None:
        """A whole body in one disk-thread hop: written, checked and renamed into place, or removed. Each hop is
        a hand-over of the GIL between the loop and a disk thread, which is what the time of small objects goes to."""
        file = cls(dest)
        try:
            file.write(body)
            file.land(where, info)
        except BaseException:
            file.discard()
            raise

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]
        self.crc = crc64ecma.update(data, self.crc)
        self.size += len(data)

    def land(self, where: str, info: ObjectInfo) -> None:
        self._close()
        if self.size != info.size:
            raise errors.TransientError("IncompleteBody", f"{where}: got {self.size} of {info.size} bytes")
        verify(info.key, info.crc64, self.crc)
        os.replace(self.path, self.dest)

    def discard(self) -> None:
        """After any failure (land's own too): nothing of the object is left."""
        self._close()
        self.path.unlink(missing_ok=True)

    def _close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


# -- up ---------------------------------------------------------------------------------------------------------
def put_many(sdk: TencentSdk, bucket: str, sending: Iterable[Sending], done: Callable[[Sending, ObjectInfo], None],
             *, concurrency: int, stop: threading.Event | None = None) -> list[tuple[Sending, errors.CloudError]]:
    """Put every file of ``sending`` (each of at most WHOLE_BODY bytes), ``concurrency`` at a time, calling
    ``done`` (in this thread) with each object as COS holds it, CRC-64 verified; returns those that failed, with
    why. Stops taking new files once ``stop`` is set. Raises the OSError of a file that cannot be read."""
    return _run(sdk, bucket, sending, _put, done, concurrency, stop)


def _read(path: Path) -> tuple[bytes, int]:
    body = path.read_bytes()
    return body, crc64ecma.update(body)


async def _put(many: _Many, item: Sending) -> ObjectInfo:
    body, crc = await many.on_disk(_read, item.path)

    async def sent(response: aiohttp.ClientResponse) -> ObjectInfo:
        return info_from_headers(item.key, {**response.headers, "Content-Length": len(body)})

    info = await many.exchange("PUT", item.key, {"Content-Type": "application/octet-stream"}, body, sent)
    verify(item.key, info.crc64, crc)
    return ObjectInfo(item.key, len(body), info.etag, crc)
