"""Buckets, objects and multipart uploads: data files on disk, metadata in SQLite. No HTTP here.

Layout under the COS root (``<state-dir>/cos``): ``cos.sqlite3`` (WAL) holds every record; ``data/<uuid>`` holds
each object's and each uploaded part's bytes; ``tmp/`` holds bodies still being received. A body is written to
``tmp/``, renamed into ``data/`` and only then committed to the database, so a crash leaves at worst an
unreferenced file, swept at the next start. A data file is never rewritten: an overwrite commits a new file and
unlinks the old one, so a reader that opened the old file keeps reading the old bytes.

Every method runs on the server's event-loop thread (the single-writer rule of cloud.py); only the byte copying of
transfer.py runs in worker threads, on files this module has handed out.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import uuid
from collections.abc import Callable, Iterator
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
    modified REAL NOT NULL, headers TEXT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (bucket, key)
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
    """A received body, written to ``tmp/`` by transfer.py: its file and digests."""

    path: Path
    size: int
    etag: str  # quoted, as COS sends it: '"<md5hex>"' or '"<md5hex>-<parts>"'
    crc64: int


@dataclass(frozen=True)
class StoredObject:
    key: str
    size: int
    etag: str
    crc64: str  # decimal, as in x-cos-hash-crc64ecma (SQLite integers are signed 64-bit)
    modified: float
    headers: dict[str, str]  # Content-Type, x-cos-meta-*, ... as given at upload
    data: str


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
        self.tmp_dir = root / "tmp"
        # Uploads whose parts are being assembled: their parts must not change underneath.
        self.completing: set[str] = set()
        self._db = self._open()
        self._sweep()

    # -- lifecycle -------------------------------------------------------------------------------------
    def _open(self) -> sqlite3.Connection:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
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
        """Drop bodies of requests that never completed and data files no record points at."""
        for leftover in self.tmp_dir.iterdir():
            leftover.unlink()
        referenced = {row[0] for row in self._db.execute("SELECT data FROM objects UNION ALL SELECT data FROM parts")}
        for path in self.data_dir.iterdir():
            if path.name not in referenced:
                path.unlink()

    def reset(self) -> None:
        self._db.close()
        shutil.rmtree(self.root, ignore_errors=True)
        self.completing.clear()
        self._db = self._open()

    def close(self) -> None:
        self._db.close()

    def new_temp(self) -> Path:
        return self.tmp_dir / uuid.uuid4().hex

    def data_path(self, name: str) -> Path:
        return self.data_dir / name

    def _adopt(self, body: Body, still_wanted: Callable[[], object]) -> str:
        """Move a received body into data/ once ``still_wanted`` confirms (by not raising) that its bucket or
        upload survived the transfer; return its data name. The temporary file never outlives this call."""
        try:
            still_wanted()
            body.path.rename(self.data_dir / body.path.name)
        finally:
            body.path.unlink(missing_ok=True)
        return body.path.name

    def _discard(self, names: list[str]) -> None:
        for name in names:
            (self.data_dir / name).unlink(missing_ok=True)

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
            self.finish_upload(upload_id)
        with self._db:
            self._db.execute("DELETE FROM buckets WHERE name = ?", (name,))

    # -- objects ---------------------------------------------------------------------------------------
    def head(self, bucket: str, key: str) -> StoredObject:
        row = self._db.execute(
            "SELECT key, size, etag, crc64, modified, headers, data FROM objects WHERE bucket = ? AND key = ?",
            (bucket, key),
        ).fetchone()
        if row is None:
            raise CosError(404, "NoSuchKey", "The specified key does not exist.")
        return _object(row)

    def commit_object(self, bucket: Bucket, key: str, body: Body, headers: dict[str, str], now: float) -> StoredObject:
        name = self._adopt(body, lambda: self.bucket(bucket.name, bucket.region))
        old = self._db.execute("SELECT data FROM objects WHERE bucket = ? AND key = ?", (bucket.name, key)).fetchone()
        with self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO objects (bucket, key, size, etag, crc64, modified, headers, data)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (bucket.name, key, body.size, body.etag, str(body.crc64), now, json.dumps(headers), name),
            )
        if old:
            self._discard([old[0]])
        return StoredObject(key, body.size, body.etag, str(body.crc64), now, headers, name)

    def delete_object(self, bucket: str, key: str) -> None:
        row = self._db.execute("SELECT data FROM objects WHERE bucket = ? AND key = ?", (bucket, key)).fetchone()
        if row is None:
            return
        with self._db:
            self._db.execute("DELETE FROM objects WHERE bucket = ? AND key = ?", (bucket, key))
        self._discard([row[0]])

    def objects(self, bucket: str, prefix: str, after: str) -> Iterator[StoredObject]:
        """Objects whose key starts with ``prefix`` and sorts after ``after``, in key order, read lazily."""
        clause, args = _range_clause(prefix)
        cursor = self._db.execute(
            "SELECT key, size, etag, crc64, modified, headers, data FROM objects"
            f" WHERE bucket = ? AND key > ?{clause} ORDER BY key",
            (bucket, after, *args),
        )
        try:
            yield from (_object(row) for row in cursor)
        finally:
            cursor.close()

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

    def _open_upload(self, upload: Upload) -> None:
        """Raise unless ``upload`` may still take parts: not aborted, completed or being completed."""
        self.upload(upload.bucket, upload.key, upload.upload_id)
        if upload.upload_id in self.completing:
            raise operation_aborted()

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

    def commit_part(self, upload: Upload, number: int, body: Body, now: float) -> Part:
        name = self._adopt(body, lambda: self._open_upload(upload))
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
            self._discard([old[0]])
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

    def finish_upload(self, upload_id: str) -> None:
        """Forget an upload and delete its parts' data (after Complete assembled them, or on Abort)."""
        names = [row[0] for row in self._db.execute("SELECT data FROM parts WHERE upload_id = ?", (upload_id,))]
        with self._db:
            self._db.execute("DELETE FROM parts WHERE upload_id = ?", (upload_id,))
            self._db.execute("DELETE FROM uploads WHERE upload_id = ?", (upload_id,))
        self._discard(names)


def operation_aborted() -> CosError:
    return CosError(409, "OperationAborted", "A conflicting operation is in progress on this upload; try again.")


def _object(row: tuple[str, int, str, str, float, str, str]) -> StoredObject:
    key, size, etag, crc, modified, headers, data = row
    return StoredObject(key, size, etag, crc, modified, json.loads(headers), data)


def _upload(row: tuple[str, str, str, float, str]) -> Upload:
    upload_id, bucket, key, initiated, headers = row
    return Upload(upload_id, bucket, key, initiated, json.loads(headers))
