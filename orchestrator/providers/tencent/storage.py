"""COS as an object store: small JSON documents, listings, and files moved in parallel parts.

Every transfer is verified end to end with CRC-64/ECMA-182, the checksum COS reports in
``x-cos-hash-crc64ecma`` for whole objects (multipart ones included), and downloads land by atomic rename:
a reader never sees a partial file under the final name.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_EXCEPTION, Executor, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, TypeVar

import crc64ecma

from . import errors
from ._sdk import TencentSdk, read_body
from .many import WHOLE_BODY, Sending, Wanted, fetch_many, put_many
from .objects import ChecksumMismatch, ObjectInfo, Progress, info_from_headers, part_path, verify

MiB = 1024 * 1024
SMALL_FILE = WHOLE_BODY  # files up to this size may go up many at once (upload_many), read whole
_FORBID_OVERWRITE = "x-cos-forbid-overwrite"  # PUT Object's create-only switch (doc 436/7749)

T = TypeVar("T")
R = TypeVar("R")


def file_crc64(path: Path, chunk: int = 8 * MiB) -> int:
    value = 0
    with path.open("rb") as f:
        while block := f.read(chunk):
            value = crc64ecma.update(block, value)
    return value


def _joined(pieces: list[tuple[int, int]]) -> int:
    """The CRC of consecutive pieces, each given as (its CRC, its length)."""
    value = 0
    for crc, length in pieces:
        value = crc64ecma.combine(value, crc, length)
    return value


def _all_of(pool: Executor, fn: Callable[[T], R], items: list[T]) -> list[R]:
    """``fn`` over ``items`` on ``pool``, results in order. Returns or raises only once no call runs any more (a
    range still writing into a file the caller closes would write into whatever file takes its descriptor next);
    the first failure cancels the calls not yet started."""
    futures = [pool.submit(fn, item) for item in items]
    wait(futures, return_when=FIRST_EXCEPTION)
    if any(f.done() and not f.cancelled() and f.exception() is not None for f in futures):
        for future in futures:
            future.cancel()
    wait(futures)
    return [future.result() for future in futures]  # in submission order: a failure comes before a cancelled one


class _PartReader:
    """``length`` bytes of a file from ``offset``, as a request body: read as they are sent, their CRC-64 taken on
    the way (the file is read once). A context manager that closes the file."""

    def __init__(self, path: Path, offset: int, length: int) -> None:
        self._file = path.open("rb")
        self._file.seek(offset)
        self._length = length
        self.sent = 0
        self.crc = 0

    def read(self, size: int = -1) -> bytes:
        left = self._length - self.sent
        data = self._file.read(left if size < 0 else min(size, left))
        self.sent += len(data)
        self.crc = crc64ecma.update(data, self.crc)
        return data

    def __enter__(self) -> _PartReader:
        return self

    def __exit__(self, *_: object) -> None:
        self._file.close()


class ObjectStore:
    """One bucket. The ranges of a large download and the parts of a large upload run on ``ranges`` when given:
    an executor shared by every store of a process, whose size is the requests in flight that the link wants (the
    agent sizes it to the instance's bandwidth); without it, each large transfer runs ``threads`` requests of its
    own. Either way each request streams, a MiB at a time."""

    def __init__(self, sdk: TencentSdk, bucket: str, part_size: int = 16 * MiB, threads: int = 8,
                 ranges: Executor | None = None) -> None:
        self.sdk = sdk
        self.bucket = bucket
        self.part_size = part_size
        self.threads = threads
        self.ranges = ranges

    def _each_range(self, fn: Callable[[T], R], items: list[T]) -> list[R]:
        if self.ranges is not None:
            return _all_of(self.ranges, fn, items)
        with ThreadPoolExecutor(max_workers=self.threads) as pool:
            return _all_of(pool, fn, items)

    # -- bucket ----------------------------------------------------------------------------------------
    def bucket_exists(self) -> bool:
        try:
            self.sdk.cos_call("head_bucket", Bucket=self.bucket)
        except errors.NotFoundError:
            return False
        return True

    def create_bucket(self) -> None:
        try:
            self.sdk.cos_call("create_bucket", Bucket=self.bucket)
        except errors.CloudError as exc:
            if exc.code not in ("BucketAlreadyExists", "BucketAlreadyOwnedByYou"):
                raise

    # -- small objects ---------------------------------------------------------------------------------
    def head(self, key: str) -> ObjectInfo | None:
        try:
            headers = self.sdk.cos_call("head_object", Bucket=self.bucket, Key=key)
        except errors.NotFoundError:
            return None
        return info_from_headers(key, headers)

    def put_bytes(self, key: str, data: bytes, content_type: str = "application/octet-stream", *,
                  create_only: bool = False) -> ObjectInfo:
        """``create_only``: only if ``key`` does not exist yet, else AlreadyExistsError and the object unchanged (COS's
        ``x-cos-forbid-overwrite``; it has no If-None-Match on PUT, and it ignores the header on a versioned
        bucket, where every PUT then succeeds)."""
        # put_object refuses keyword arguments it does not map to a header (cos_comm.mapped); its Metadata dict
        # is sent as headers verbatim, the one way to send this one through the SDK's own call.
        forbid = {"Metadata": {_FORBID_OVERWRITE: "true"}} if create_only else {}
        headers = self.sdk.cos_call("put_object", Bucket=self.bucket, Key=key, Body=data, ContentType=content_type,
                                    **forbid)
        info = info_from_headers(key, {**headers, "Content-Length": len(data)})
        local = crc64ecma.update(data)
        verify(key, info.crc64, local)
        return dataclasses.replace(info, crc64=local)

    def put_json(self, key: str, value: Any, *, create_only: bool = False) -> ObjectInfo:
        return self.put_bytes(key, json.dumps(value, sort_keys=True).encode(), "application/json",
                              create_only=create_only)

    def get_bytes(self, key: str, limit: int | None = None) -> bytes | None:
        """The object's bytes, None when there is none. ``limit``: an object larger raises ObjectTooLarge, its body
        read no further than ``limit`` + 1 bytes (not at all when its length says so): what a writer we do not
        trust put there must not fill the reader's memory."""
        if limit is not None:
            return self._get_capped(key, limit)
        try:
            resp = self.sdk.cos_call("get_object", Bucket=self.bucket, Key=key)
        except errors.NotFoundError:
            return None
        data = _read_all(resp["Body"].get_raw_stream())
        expected = resp.get("x-cos-hash-crc64ecma")
        verify(key, int(expected) if expected else None, crc64ecma.update(data))
        return data

    def _get_capped(self, key: str, limit: int) -> bytes | None:
        try:
            with self.sdk.cos_get(self.bucket, key, {}) as (headers, stream):
                info = info_from_headers(key, headers)
                if info.size > limit:
                    raise ObjectTooLarge(key, info.size, limit)  # leaving the block closes the connection
                chunks, got = [], 0
                while chunk := read_body(stream, min(MiB, limit + 1 - got)):
                    chunks.append(chunk)
                    got += len(chunk)
                    if got > limit:  # a body longer than its Content-Length said (or a chunked one)
                        raise ObjectTooLarge(key, None, limit)
        except errors.NotFoundError:
            return None
        data = b"".join(chunks)
        if info.size and len(data) != info.size:
            raise errors.TransientError("IncompleteBody", f"cos://{self.bucket}/{key}: got {len(data)} of "
                                                          f"{info.size} bytes")
        verify(key, info.crc64, crc64ecma.update(data))
        return data

    def get_json(self, key: str) -> Any:
        data = self.get_bytes(key)
        return None if data is None else json.loads(data)

    def iter_objects(self, prefix: str) -> Iterator[ObjectInfo]:
        marker = ""
        while True:
            resp = self.sdk.cos_call("list_objects", Bucket=self.bucket, Prefix=prefix, Marker=marker, MaxKeys=1000)
            for item in resp.get("Contents") or []:
                yield ObjectInfo(
                    key=item["Key"],
                    size=int(item.get("Size") or 0),
                    etag=str(item.get("ETag") or "").strip('"'),
                    last_modified=item.get("LastModified", ""),
                )
            if resp.get("IsTruncated") != "true":
                return
            marker = resp.get("NextMarker") or item["Key"]

    def delete(self, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):
            chunk = keys[start : start + 1000]
            self.sdk.cos_call(
                "delete_objects",
                Bucket=self.bucket,
                Delete={"Object": [{"Key": k} for k in chunk], "Quiet": "true"},
            )

    def presigned_get_url(self, key: str, expires_seconds: int) -> str:
        return self.sdk.presigned_get_url(self.bucket, key, expires_seconds)

    # -- files -----------------------------------------------------------------------------------------
    def upload_file(self, path: Path, key: str, progress: Progress | None = None) -> ObjectInfo:
        """``path`` to ``key``, verified: the returned info's ``crc64`` is the file's, checked against what COS
        computed. A large file goes as parallel parts read from disk as they are sent (memory: a block per request
        in flight, not a part), each part's CRC taken on the way, so the file is read once; COS shows the object
        only once complete."""
        size = path.stat().st_size
        if size <= self.part_size:
            data = path.read_bytes()
            info = self.put_bytes(key, data)
            if progress:
                progress(size)
            return info
        upload_id = self.sdk.cos_call("create_multipart_upload", Bucket=self.bucket, Key=key)["UploadId"]
        offsets = list(range(0, size, self.part_size))

        def send(index: int) -> tuple[dict[str, Any], tuple[int, int]]:
            length = min(self.part_size, size - offsets[index])
            with _PartReader(path, offsets[index], length) as body:
                params = {"partNumber": str(index + 1), "uploadId": upload_id}
                headers = self.sdk.cos_put(self.bucket, key, params, body, length)
            if body.sent != length:
                raise errors.TransientError("IncompleteBody", f"{path} changed while part {index + 1} was sent")
            if progress:
                progress(length)
            return {"PartNumber": index + 1, "ETag": headers["ETag"]}, (body.crc, length)

        try:
            sent = self._each_range(send, list(range(len(offsets))))
            parts = [part for part, _ in sent]
            result = self.sdk.cos_call(
                "complete_multipart_upload",
                Bucket=self.bucket,
                Key=key,
                UploadId=upload_id,
                MultipartUpload={"Part": parts},
            )
        except BaseException:
            # The upload is garbage either way; the original error is the one to raise.
            with contextlib.suppress(errors.CloudError):
                self.sdk.cos_call("abort_multipart_upload", Bucket=self.bucket, Key=key, UploadId=upload_id)
            raise
        remote = result.get("x-cos-hash-crc64ecma") or (self.head(key) or ObjectInfo(key, 0, "")).crc64
        local = _joined([piece for _, piece in sent])
        verify(key, int(remote) if remote is not None else None, local)
        return ObjectInfo(key, size, str(result.get("ETag", "")).strip('"'), local)

    def download_file(self, key: str, dest: Path, progress: Progress | None = None,
                      listed: ObjectInfo | None = None) -> ObjectInfo:
        """Fetch ``key`` into ``dest``; the file appears only once complete and verified. ``listed``: the object as
        a listing showed it (size, ETag): one that fits in a part then costs one GET and no more (a data sync of
        many small objects spent most of its time on a HEAD, a thread pool, an fsync and a second read per
        object); any other is fetched in parallel ranges, each checksummed as it streams in and the CRCs combined
        (no second read of the file). Not fsynced: a caller that must survive a power cut syncs once for many
        files (the data sync's index does), which lets the disk write back while the next ones download."""
        if listed is not None and self.fits_one_get(listed):
            try:
                return self._download_whole(listed, dest, progress)
            except errors.CloudError as exc:
                if exc.code != "PreconditionFailed":
                    raise
                # Replaced since the listing (no byte was counted): the object as it is now, by the general path.
        info = self.head(key)
        if info is None:
            raise errors.NotFoundError("NoSuchKey", f"cos://{self.bucket}/{key} does not exist")
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = part_path(dest)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        # One range writes (and counts its bytes) at a time: the file system takes the file's lock for each write
        # anyway (ext4, XFS), and ranges waiting on it in the kernel spun for it (1 GiB at 25 ranges here: 5.3-6.6 s
        # of system time, most of it rwsem_spin_on_owner; 3.4-3.6 s waiting on this one, at the same MB/s).
        writing = threading.Lock()
        try:
            ranges = [(o, min(o + self.part_size, info.size) - 1) for o in range(0, info.size, self.part_size)]

            def fetch(span: tuple[int, int]) -> tuple[int, int]:
                start, end = span
                offset, value = start, 0
                wanted = {"Range": f"bytes={start}-{end}", "If-Match": f'"{info.etag}"'}
                with self.sdk.cos_get(self.bucket, key, wanted) as (_, stream):
                    while chunk := read_body(stream, MiB):
                        with writing:
                            os.pwrite(fd, chunk, offset)
                            if progress:
                                progress(len(chunk))
                        value = crc64ecma.update(chunk, value)
                        offset += len(chunk)
                if offset != end + 1:
                    raise errors.TransientError(
                        "IncompleteBody", f"cos://{self.bucket}/{key} bytes {start}-{end}: got {offset - start}"
                    )
                return value, offset - start

            pieces = self._each_range(fetch, ranges)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        try:
            verify(key, info.crc64, _joined(pieces))
        except ChecksumMismatch:
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, dest)
        return info

    def download_many(self, wanted: Iterable[Wanted], done: Callable[[Wanted, ObjectInfo], None], *,
                      concurrency: int, stop: threading.Event | None = None) -> list[tuple[Wanted, errors.CloudError]]:
        """Fetch many objects as their listing showed them, each fitting in one GET (``fits_one_get``), in one
        event loop with ``concurrency`` requests in flight (many.py); ``done`` is called for each one in
        place. Returns those that failed, for the caller's retrying path (``download_file``)."""
        return fetch_many(self.sdk, self.bucket, wanted, done, concurrency=concurrency, stop=stop)

    def upload_many(self, sending: Iterable[Sending], done: Callable[[Sending, ObjectInfo], None], *,
                    concurrency: int, stop: threading.Event | None = None) -> list[tuple[Sending, errors.CloudError]]:
        """Put many files, each of at most ``SMALL_FILE`` bytes, in one event loop with ``concurrency`` requests in
        flight (many.py); ``done`` is called with each object as COS holds it, CRC-64 verified. Returns those that
        failed, for the caller's retrying path (``upload_file``)."""
        return put_many(self.sdk, self.bucket, sending, done, concurrency=concurrency, stop=stop)

    def fits_one_get(self, listed: ObjectInfo) -> bool:
        """Whether a listed object comes in one GET, not in parallel ranges."""
        return listed.size <= self.part_size

    def _download_whole(self, listed: ObjectInfo, dest: Path, progress: Progress | None) -> ObjectInfo:
        """One GET of the object the listing showed (If-Match its ETag), checksummed as it streams to disk."""
        key = listed.key
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = part_path(dest)
        try:
            value, written = 0, 0
            with self.sdk.cos_get(self.bucket, key, {"If-Match": f'"{listed.etag}"'}) as (headers, stream):
                info = info_from_headers(key, headers)
                with tmp.open("wb") as f:
                    while chunk := read_body(stream, MiB):
                        f.write(chunk)
                        value = crc64ecma.update(chunk, value)
                        written += len(chunk)
                        if progress:
                            progress(len(chunk))
            if written != info.size:
                raise errors.TransientError("IncompleteBody", f"cos://{self.bucket}/{key}: got {written} of "
                                                              f"{info.size} bytes")
            verify(key, info.crc64, value)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, dest)
        return info


class ObjectTooLarge(Exception):
    """An object past the size its reader takes (ObjectStore.get_bytes' ``limit``): not a cloud failure, the object
    is what is wrong. ``size``: its length when COS said it (None: it said less, and sent more)."""

    def __init__(self, key: str, size: int | None, limit: int) -> None:
        super().__init__(f"{key}: {size if size is not None else 'more'} bytes, past the {limit} bytes read")
        self.key, self.size, self.limit = key, size, limit


def _read_all(stream: Any) -> bytes:
    chunks = []
    while chunk := read_body(stream, MiB):
        chunks.append(chunk)
    return b"".join(chunks)


__all__ = ["SMALL_FILE", "ChecksumMismatch", "MiB", "ObjectInfo", "ObjectStore", "ObjectTooLarge", "Progress",
           "Sending", "Wanted", "file_crc64"]
