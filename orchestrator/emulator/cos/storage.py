"""Buckets, objects and multipart uploads: data files on disk, metadata in SQLite. No HTTP here.

Layout under the COS root (``<state-dir>/cos``): ``cos.sqlite3`` (WAL) holds every record; ``data/<uuid>`` holds
the bytes of each uploaded body, a PUT object or one part. A body is written to a fresh file and committed to the
database once complete, so a crash leaves at worst a file no record names, swept at the next start.

An object is a sequence of segments, data files read one after another: one for a PUT, the parts for a multipart
upload, which Complete adopts as they are instead of copying gigabytes. Data files are never rewritten: an
overwrite or delete commits, then drops the old files; a file that a GET is still sending is dropped when that GET
releases it, so readers always see the whole of the object they looked up.

Every method runs on the server's event-loop thread (the single-writer rule of cloud.py); transfer.py reads and
writes the files this module hands out, in worker threads or the kernel.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..errors import CosError

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS buckets (
    name TEXT PRIMARY KEY, region TEXT NOT NULL, created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS objects (
    bucket TEXT NOT NULL, key TEXT NOT NULL, size INTEGER NOT NULL, etag TEXT NOT NULL, crc64 TEXT NOT NULL,
    modified REAL NOT NULL, headers TEXT NOT NULL, segments TEXT NOT NULL, PRIMARY KEY (bucket, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS uploads (
    upload_id TEXT PRIMARY KEY, bucket TEXT NOT NULL, key TEXT NOT NULL, initiated REAL NOT NULL,
    headers TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS uploads_by_key ON uploads (bucket, key, upload_id);
CREATE TABLE IF NOT EXISTS parts (
    upload_id TEXT NOT NULL, number INTEGER NOT NULL, size INTEGER NOT NULL, etag TEXT NOT NULL,
    crc64 TEXT NOT NULL, modified REAL NOT NULL, data TEXT NOT NULL, PRIMARY KEY (upload_id, number)
) WITHOUT ROWID;
"""


@dataclass(frozen=True)
class Bucket:
    name: str
    region: str
    created: float


@dataclass(frozen=True)
class Body:
    """A received body, written under data/ by transfer.py but not yet part of any record: its file and digests."""

    path: Path
    size: int
    etag: str  # quoted, as COS sends it: '"<md5hex>"' or '"<md5hex>-<parts>"'
    crc64: int


@dataclass(frozen=True)
class Segment:
    data: str  # a file name under data/
    size: int


@dataclass(frozen=True)
class Listed:
    """An object as listings show it."""

    key: str
    size: int
    etag: str
    modified: float


@dataclass(frozen=True)
class StoredObject(Listed):
    crc64: str  # decimal, as in x-cos-hash-crc64ecma (SQLite integers are signed 64-bit)
    headers: dict[str, str]  # Content-Type, x-cos-meta-*, ... as given at upload
    segments: tuple[Segment, ...]

    def pieces(self, first: int, last: int) -> list[tuple[str, int, int]]:
        """The (data file, offset, count) runs that hold bytes ``first..last`` (inclusive)."""
        runs = []
        start = 0
        for segment in self.segments:
            end = start + segment.size  # this segment holds start..end-1
            if end > first and start <= last:
                offset = max(first, start) - start
                runs.append((segment.data, offset, min(last + 1, end) - start - offset))
            start = end
        return runs


@dataclass(frozen=True)
class Upload:
    upload_id: str
    bucket: str
    key: str
    initiated: float
    headers: dict[str, str]


@dataclass(frozen=True)
class Part:
    number: int
    size: int
    etag: str
    crc64: int
    modified: float
    data: str


def prefix_end(prefix: str) -> str | None:
    """The least string above every string that starts with ``prefix`` (None: no bound). SQLite compares TEXT
    as UTF-8 bytes, which orders like code points: COS lists keys in that order."""
    stripped = prefix.rstrip("\U0010ffff")
    if not stripped:
        return None
    nxt = ord(stripped[-1]) + 1
    if 0xD800 <= nxt <= 0xDFFF:
        nxt = 0xE000
    return stripped[:-1] + chr(nxt)


def _range_clause(prefix: str) -> tuple[str, list[str]]:
    end = prefix_end(prefix)
    if end is None:
        return " AND key >= ?", [prefix]
    return " AND key >= ? AND key < ?", [prefix, end]


class Store:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.data_dir = root / "data"
        self._readers: dict[str, int] = {}  # data file -> GETs sending it
        self._dropped: set[str] = set()  # data files no record needs, kept until their last reader is done
        self._db = self._open()
        self._sweep()

    # -- lifecycle -------------------------------------------------------------------------------------
    def _open(self) -> sqlite3.Connection:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        path = self.root / "cos.sqlite3"
        # One connection, used only from the event-loop thread (module docstring).
        db = sqlite3.connect(path, check_same_thread=False)
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, SCHEMA_VERSION):
            db.close()
            raise RuntimeError(f"{path} has COS schema version {version}, this emulator reads {SCHEMA_VERSION}")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")  # durable across process crashes, which is what --state-dir is for
        db.executescript(_SCHEMA)
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        return db

    def _sweep(self) -> None:
        """Drop data files no record names: bodies of requests that never completed, files dropped too late."""
        referenced = {data for (data,) in self._db.execute("SELECT data FROM parts")}
        for (segments,) in self._db.execute("SELECT segments FROM objects"):
            referenced.update(segment.data for segment in _segments(segments))
        for path in self.data_dir.iterdir():
            if path.name not in referenced:
                path.unlink()

    def discard(self) -> None:
        """Close and delete everything: the next account opens a new store on the same root."""
        self._db.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def close(self) -> None:
        self._db.close()

    def new_data_path(self) -> Path:
        return self.data_dir / uuid.uuid4().hex

    def data_path(self, name: str) -> Path:
        return self.data_dir / name

    def _adopt(self, body: Body, still_wanted: Callable[[], object]) -> str:
        """A received body's data name, once ``still_wanted`` confirms (by not raising) that its bucket or upload
        survived the transfer; otherwise the body's file is removed."""
        try:
            still_wanted()
        except BaseException:
            body.path.unlink(missing_ok=True)
            raise
        return body.path.name

    def _drop(self, names: list[str]) -> None:
        for name in names:
            if name in self._readers:
                self._dropped.add(name)
            else:
                (self.data_dir / name).unlink(missing_ok=True)

    @contextmanager
    def reading(self, obj: StoredObject) -> Iterator[None]:
        """Keep the object's data files while a GET sends them, whatever commits meanwhile."""
        names = [segment.data for segment in obj.segments]
        for name in names:
            self._readers[name] = self._readers.get(name, 0) + 1
        try:
            yield
        finally:
            for name in names:
                left = self._readers.pop(name, 1) - 1
                if left > 0:
                    self._readers[name] = left
                elif name in self._dropped:
                    self._dropped.discard(name)
                    self._drop([name])

    # -- buckets ---------------------------------------------------------------------------------------
    def create_bucket(self, name: str, region: str, now: float) -> None:
        with self._db:
            inserted = self._db.execute(
                "INSERT OR IGNORE INTO buckets (name, region, created) VALUES (?, ?, ?)", (name, region, now)
            ).rowcount
        if not inserted:
            raise CosError(409, "BucketAlreadyExists", f"The requested bucket name {name} is not available.")

    def bucket(self, name: str, region: str) -> Bucket:
        row = self._db.execute("SELECT name, region, created FROM buckets WHERE name = ?", (name,)).fetchone()
        # A bucket lives in one region: other regions' endpoints do not know it.
        if row is None or row[1] != region:
            raise CosError(404, "NoSuchBucket", "The specified bucket does not exist.")
        return Bucket(*row)

    def buckets(self) -> list[Bucket]:
        return [Bucket(*row) for row in self._db.execute("SELECT name, region, created FROM buckets ORDER BY name")]

    def delete_bucket(self, name: str, region: str) -> None:
        self.bucket(name, region)
        if self._db.execute("SELECT 1 FROM objects WHERE bucket = ? LIMIT 1", (name,)).fetchone():
            raise CosError(409, "BucketNotEmpty", "The bucket you tried to delete is not empty.")
        for (upload_id,) in self._db.execute("SELECT upload_id FROM uploads WHERE bucket = ?", (name,)).fetchall():
            self.abort_upload(upload_id)
        with self._db:
            self._db.execute("DELETE FROM buckets WHERE name = ?", (name,))

    # -- objects ---------------------------------------------------------------------------------------
    def head(self, bucket: str, key: str) -> StoredObject:
        row = self._db.execute(
            "SELECT key, size, etag, modified, crc64, headers, segments FROM objects WHERE bucket = ? AND key = ?",
            (bucket, key),
        ).fetchone()
        if row is None:
            raise CosError(404, "NoSuchKey", "The specified key does not exist.")
        key, size, etag, modified, crc, headers, segments = row
        return StoredObject(key, size, etag, modified, crc, json.loads(headers), _segments(segments))

    def put_object(self, bucket: Bucket, key: str, body: Body, headers: dict[str, str], now: float) -> StoredObject:
        name = self._adopt(body, lambda: self.bucket(bucket.name, bucket.region))
        obj = StoredObject(key, body.size, body.etag, now, str(body.crc64), headers, (Segment(name, body.size),))
        with self._db:
            self._commit_object(bucket.name, obj)
        return obj

    def _commit_object(self, bucket: str, obj: StoredObject) -> None:
        """Insert or replace an object, inside the caller's transaction; the replaced one's files go."""
        old = self._db.execute(
            "SELECT segments FROM objects WHERE bucket = ? AND key = ?", (bucket, obj.key)
        ).fetchone()
        self._db.execute(
            "INSERT OR REPLACE INTO objects (bucket, key, size, etag, crc64, modified, headers, segments)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                bucket, obj.key, obj.size, obj.etag, obj.crc64, obj.modified, json.dumps(obj.headers),
                json.dumps([[s.data, s.size] for s in obj.segments]),
            ),
        )  # fmt: skip
        if old:
            self._drop([segment.data for segment in _segments(old[0])])

    def delete_object(self, bucket: str, key: str) -> None:
        row = self._db.execute("SELECT segments FROM objects WHERE bucket = ? AND key = ?", (bucket, key)).fetchone()
        if row is None:
            return
        with self._db:
            self._db.execute("DELETE FROM objects WHERE bucket = ? AND key = ?", (bucket, key))
        self._drop([segment.data for segment in _segments(row[0])])

    def objects(self, bucket: str, prefix: str, after: str) -> Iterator[Listed]:
        """Objects whose key starts with ``prefix`` and sorts after ``after``, in key order, read lazily."""
        clause, args = _range_clause(prefix)
        cursor = self._db.execute(
            f"SELECT key, size, etag, modified FROM objects WHERE bucket = ? AND key > ?{clause} ORDER BY key",
            (bucket, after, *args),
        )
        try:
            yield from (Listed(*row) for row in cursor)
        finally:
            cursor.close()

    def holds_objects(self, bucket: str, prefix: str) -> bool:
        clause, args = _range_clause(prefix)
        row = self._db.execute(f"SELECT 1 FROM objects WHERE bucket = ?{clause} LIMIT 1", (bucket, *args)).fetchone()
        return row is not None

    # -- multipart uploads -----------------------------------------------------------------------------
    def create_upload(self, bucket: str, key: str, headers: dict[str, str], now: float) -> Upload:
        # Millisecond time first: upload ids of one key sort by age, the order ListMultipartUploads promises.
        upload = Upload(f"{int(now * 1000):013d}{uuid.uuid4().hex}", bucket, key, now, headers)
        with self._db:
            self._db.execute(
                "INSERT INTO uploads (upload_id, bucket, key, initiated, headers) VALUES (?, ?, ?, ?, ?)",
                (upload.upload_id, bucket, key, now, json.dumps(headers)),
            )
        return upload

    def upload(self, bucket: str, key: str, upload_id: str) -> Upload:
        row = self._db.execute(
            "SELECT upload_id, bucket, key, initiated, headers FROM uploads"
            " WHERE upload_id = ? AND bucket = ? AND key = ?",
            (upload_id, bucket, key),
        ).fetchone()
        if row is None:
            raise CosError(404, "NoSuchUpload", "The specified upload does not exist.")
        return _upload(row)

    def uploads(self, bucket: str, prefix: str, key_marker: str, upload_id_marker: str) -> Iterator[Upload]:
        """In-progress uploads under ``prefix`` in (key, upload id) order, after the markers (doc 436/7736)."""
        clause, args = _range_clause(prefix)
        if not key_marker:
            after, after_args = "", []
        elif upload_id_marker:
            after = " AND (key > ? OR (key = ? AND upload_id > ?))"
            after_args = [key_marker, key_marker, upload_id_marker]
        else:
            after, after_args = " AND key > ?", [key_marker]
        cursor = self._db.execute(
            "SELECT upload_id, bucket, key, initiated, headers FROM uploads"
            f" WHERE bucket = ?{clause}{after} ORDER BY key, upload_id",
            (bucket, *args, *after_args),
        )
        try:
            yield from (_upload(row) for row in cursor)
        finally:
            cursor.close()

    def put_part(self, upload: Upload, number: int, body: Body, now: float) -> Part:
        name = self._adopt(body, lambda: self.upload(upload.bucket, upload.key, upload.upload_id))
        old = self._db.execute(
            "SELECT data FROM parts WHERE upload_id = ? AND number = ?", (upload.upload_id, number)
        ).fetchone()
        with self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO parts (upload_id, number, size, etag, crc64, modified, data)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (upload.upload_id, number, body.size, body.etag, str(body.crc64), now, name),
            )
        if old:
            self._drop([old[0]])
        return Part(number, body.size, body.etag, body.crc64, now, name)

    def parts(self, upload_id: str, after: int = 0, limit: int = -1) -> list[Part]:
        """Parts numbered above ``after``, in order; ``limit`` -1 means all."""
        return [
            Part(number, size, etag, int(crc), modified, data)
            for number, size, etag, crc, modified, data in self._db.execute(
                "SELECT number, size, etag, crc64, modified, data FROM parts"
                " WHERE upload_id = ? AND number > ? ORDER BY number LIMIT ?",
                (upload_id, after, limit),
            )
        ]

    def complete_upload(self, bucket: Bucket, upload: Upload, obj: StoredObject) -> None:
        """Commit the object assembled from some of the upload's parts (its segments) and forget the upload;
        the parts left out are dropped."""
        self.bucket(bucket.name, bucket.region)
        kept = {segment.data for segment in obj.segments}
        unused = [part.data for part in self.parts(upload.upload_id) if part.data not in kept]
        with self._db:
            self._commit_object(bucket.name, obj)
            self._forget_upload(upload.upload_id)
        self._drop(unused)

    def abort_upload(self, upload_id: str) -> None:
        names = [part.data for part in self.parts(upload_id)]
        with self._db:
            self._forget_upload(upload_id)
        self._drop(names)

    def _forget_upload(self, upload_id: str) -> None:
        self._db.execute("DELETE FROM parts WHERE upload_id = ?", (upload_id,))
        self._db.execute("DELETE FROM uploads WHERE upload_id = ?", (upload_id,))


def _segments(text: str) -> tuple[Segment, ...]:
    return tuple(Segment(data, size) for data, size in json.loads(text))


def _upload(row: tuple[str, str, str, float, str]) -> Upload:
    upload_id, bucket, key, initiated, headers = row
    return Upload(upload_id, bucket, key, initiated, json.loads(headers))
