"""Bytes in and out, streamed: never a whole object in memory, whatever its size.

In: the request body is read as it arrives, gathered into 1 MiB chunks, and each chunk is hashed (MD5 for the
ETag, CRC-64 for x-cos-hash-crc64ecma) and written by a worker thread while the event loop reads the next one
(hashlib, fastcrc and file writes release the GIL). Out: ``loop.sendfile`` hands each data file of the object to
the kernel, as aiohttp's FileResponse does, so large GETs run at page-cache speed. Injected ``slow_body`` and
``reset_body`` faults take a chunked path that can pace the bytes or stop short and reset the connection.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from aiohttp import web

import crc64ecma

from ..connection import reset_connection
from ..runtime.faults import CosFault
from .storage import Body

CHUNK = 1 << 20
# Below this a chunk is hashed and written inline: a thread hop costs more than the work (small objects).
INLINE_LIMIT = 64 << 10
# Up to this size a GET body is read at once and sent with the headers.
SMALL_BODY = 64 << 10
# Slow bodies move in small steps so the pace is even.
_PACE_STEPS_PER_SECOND = 20


class _Sink:
    """One body being received: its file and running digests. Chunks arrive in order, one at a time. As a context
    manager it closes the file, and removes it if the block fails."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file = path.open("wb")
        self.md5 = hashlib.md5()
        self.crc = 0
        self.size = 0
        self._lock = threading.Lock()  # close() must not interleave with a worker's absorb()

    def absorb(self, data: bytes | bytearray) -> None:
        with self._lock:
            if self.file.closed:  # abandoned while this chunk waited for a worker
                return
            self.md5.update(data)
            self.crc = crc64ecma.update(data, self.crc)
            self.file.write(data)
            self.size += len(data)

    def close(self) -> None:
        with self._lock:
            self.file.close()

    def __enter__(self) -> _Sink:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        self.close()
        if kind is not None:
            self.path.unlink(missing_ok=True)

    def body(self) -> Body:
        return Body(self.path, self.size, f'"{self.md5.hexdigest()}"', self.crc)


class _Pace:
    """Holds a stream to ``bytes_per_second`` (slow_body), or lets it run (None)."""

    def __init__(self, bytes_per_second: float | None) -> None:
        self.rate = bytes_per_second
        self.start = time.monotonic()

    def step(self, default: int) -> int:
        return default if self.rate is None else max(1, min(default, int(self.rate / _PACE_STEPS_PER_SECOND)))

    async def wait(self, done: int) -> None:
        if self.rate is not None:
            ahead = done / self.rate - (time.monotonic() - self.start)
            if ahead > 0:
                await asyncio.sleep(ahead)


def _pace_for(fault: CosFault | None) -> _Pace:
    return _Pace(fault.bytes_per_second if fault is not None and fault.kind == "slow_body" else None)


def _reset_after(fault: CosFault | None) -> int | None:
    return fault.after_bytes if fault is not None and fault.kind == "reset_body" else None


async def receive(request: web.Request, path: Path, fault: CosFault | None) -> Body:
    """Write the request body to ``path``; return its size and digests. ``path`` is removed on any failure."""
    loop = asyncio.get_running_loop()
    pace = _pace_for(fault)
    reset_at = _reset_after(fault)
    pending: asyncio.Future[None] | None = None
    buffer = bytearray()
    received = 0
    with _Sink(path) as sink:
        while True:
            if reset_at is not None and received >= reset_at:
                reset_connection(request)
            chunk = await request.content.read(pace.step(CHUNK))
            if not chunk:
                break
            received += len(chunk)
            buffer += chunk
            await pace.wait(received)
            if len(buffer) >= CHUNK:
                if pending is not None:
                    await pending
                pending = loop.run_in_executor(None, sink.absorb, buffer)
                buffer = bytearray()
        if pending is not None:
            await pending
        if len(buffer) > INLINE_LIMIT:
            await loop.run_in_executor(None, sink.absorb, buffer)
        else:
            sink.absorb(buffer)
    return sink.body()


def ingest(source: Path, path: Path) -> Body:
    """Copy a local file to ``path`` with the digests a PUT of its bytes gets (blocking: call it in a thread)."""
    with _Sink(path) as sink, source.open("rb") as file:
        while chunk := file.read(CHUNK):
            sink.absorb(chunk)
    return sink.body()


async def send(
    request: web.Request,
    status: int,
    headers: dict[str, str],
    pieces: Sequence[tuple[Path, int, int]],
    fault: CosFault | None,
) -> web.StreamResponse:
    """Answer with the (file, offset, count) pieces, in order, as the body."""
    count = sum(piece[2] for piece in pieces)
    if fault is None and count <= SMALL_BODY:
        # Headers and body in one write: small objects cost syscalls and wake-ups, not bytes.
        return web.Response(status=status, headers=headers, body=b"".join(_read(*piece) for piece in pieces))
    response = web.StreamResponse(status=status, headers=headers)
    response.content_length = count
    await response.prepare(request)
    pace = _pace_for(fault)
    reset_at = _reset_after(fault)
    sent = 0
    for path, offset, count in pieces:
        if reset_at is not None and sent >= reset_at:
            break
        with path.open("rb") as file:
            if pace.rate is None and reset_at is None:
                await _sendfile(request, response, file, offset, count)
            else:
                sent = await _write_chunks(response, file, offset, count, pace, sent, reset_at)
    if reset_at is not None:
        await _flush(request)
        reset_connection(request)
    await response.write_eof()
    return response


def _read(path: Path, offset: int, count: int) -> bytes:
    with path.open("rb") as file:
        return os.pread(file.fileno(), count, offset)


async def _sendfile(
    request: web.Request, response: web.StreamResponse, file: BinaryIO, offset: int, count: int
) -> None:
    transport = request.transport
    if transport is None:
        raise ConnectionResetError("client went away")
    try:
        await asyncio.get_running_loop().sendfile(transport, file, offset, count)
    except NotImplementedError:  # e.g. an event loop without sendfile support
        await _write_chunks(response, file, offset, count, _Pace(None), 0, None)


async def _write_chunks(
    response: web.StreamResponse,
    file: BinaryIO,
    offset: int,
    count: int,
    pace: _Pace,
    sent: int,
    stop: int | None,
) -> int:
    """Write ``count`` bytes of ``file`` from ``offset`` at the pace, unless the body's ``sent`` bytes reach
    ``stop`` first; return the body's bytes sent so far."""
    loop = asyncio.get_running_loop()
    end = offset + count
    while offset < end and (stop is None or sent < stop):
        size = min(pace.step(CHUNK), end - offset, CHUNK if stop is None else stop - sent)
        data = await loop.run_in_executor(None, os.pread, file.fileno(), size, offset)
        if not data:
            raise OSError(f"{file.name} ended {end - offset} bytes early")
        await response.write(data)
        offset += len(data)
        sent += len(data)
        await pace.wait(sent)
    return sent


async def _flush(request: web.Request) -> None:
    """Wait until the transport has handed what we wrote to the kernel (an abort discards its buffer)."""
    transport = request.transport
    while transport is not None and not transport.is_closing() and transport.get_write_buffer_size():
        await asyncio.sleep(0.001)
