"""SQLite state under ``$CVMJOB_HOME/state.db``.

Every write to a job is *fenced*: it names the lease token its controller holds, and the write happens in the
same transaction that checks the token is still current. A controller that lost its lease (a second controller
took over, or it was presumed dead) cannot write anything (dstack's ``lock_token``). Transitions are also
compare-and-set on the current state and checked against the machine's table.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ..lifecycle.machine import JobState, check_transition
from ..providers.tencent.vocabulary import ChargeType
from .migrations import MIGRATIONS

# Test-only crash points (tests/faults/test_crash_points.py): the process SIGKILLs itself, so that a restarted
# controller has only the store and the cloud to go on. CVMJOB_CRASH_AT="RUNNING->IMAGING": right after that
# transition commits; "node:launched" or "image:CREATING": right before a node or image record in that state is
# written, i.e. after the cloud call it records and before its outcome is persisted. Inert unless set.
CRASH_AT_ENV = "CVMJOB_CRASH_AT"


def _crash_point(name: str) -> None:
    if os.environ.get(CRASH_AT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


class FencedOut(RuntimeError):
    """This controller no longer holds the job's lease: it must stop acting on the job."""


class LeaseHeld(RuntimeError):
    """Another live controller holds the job's lease."""


class StaleState(RuntimeError):
    """The job is not in the state the caller believed (another writer moved it)."""


@dataclass(frozen=True)
class JobRecord:
    job_id: str
    name: str
    state: JobState
    outcome: JobState | None
    reason: str
    spec: dict[str, Any]
    plan: dict[str, Any]
    cloud: dict[str, Any]
    attempt: int
    created_at: float
    updated_at: float
    deadline: float
    image_id: str | None
    exit_code: int | None
    cost_cny: float
    cancel_requested: bool
    keep_until: float | None
    final_step: int | None
    lease_owner: str | None
    lease_token: int
    lease_expires: float
    source_dir: str
    settings: dict[str, Any]


@dataclass(frozen=True)
class Event:
    id: int
    job_id: str
    at: float
    kind: str
    from_state: str | None
    to_state: str | None
    detail: str


@dataclass(frozen=True)
class NodeRecord:
    job_id: str
    attempt: int
    node: int
    client_token: str
    zone: str
    instance_type: str
    charge_type: ChargeType
    price_per_hour: float | None
    instance_id: str | None
    state: str  # intent | launched | running | lost | failed | gone
    launched_at: float | None = None
    running_at: float | None = None
    ended_at: float | None = None
    end_reason: str = ""
    cost_cny: float | None = None
    on_demand_price_per_hour: float | None = None  # what the same node costs on demand: spot savings


@dataclass(frozen=True)
class PoolInstance:
    instance_id: str
    pool: str
    zone: str
    instance_type: str
    job_id: str | None
    since: float


@dataclass(frozen=True)
class ImageRecord:
    image_id: str
    job_id: str
    name: str
    state: str
    created_at: float
    deleted_at: float | None


_JSON_COLUMNS = {"spec_json": "spec", "plan_json": "plan", "cloud_json": "cloud", "settings_json": "settings"}
_WRITABLE_JOB_FIELDS = {
    "outcome",
    "reason",
    "attempt",
    "image_id",
    "exit_code",
    "cost_cny",
    "cancel_requested",
    "keep_until",
    "final_step",
    "plan",
    "deadline",
}


def _job(row: sqlite3.Row) -> JobRecord:
    data = dict(row)
    for column, name in _JSON_COLUMNS.items():
        data[name] = json.loads(data.pop(column))
    data["state"] = JobState(data["state"])
    data["outcome"] = JobState(data["outcome"]) if data["outcome"] else None
    data["cancel_requested"] = bool(data["cancel_requested"])
    return JobRecord(**data)


class Store:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._local = threading.local()
        if not path.exists():
            _create_wal_database(path)
        with self._tx() as db:
            db.execute("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
            applied = {r["name"] for r in db.execute("SELECT name FROM migrations")}
            for name, sql in MIGRATIONS:
                if name not in applied:
                    for statement in _statements(sql):  # executescript would commit our transaction
                        db.execute(statement)
                    db.execute("INSERT INTO migrations VALUES (?, strftime('%s','now'))", (name,))

    def _db(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA foreign_keys=ON")
            db.execute("PRAGMA synchronous=FULL")  # a persisted intent must survive power loss
            self._local.db = db
        return db

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    # -- reads -----------------------------------------------------------------------------------------
    def get(self, job_id: str) -> JobRecord | None:
        row = self._db().execute("SELECT * FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
        return _job(row) if row else None

    def find(self, ref: str) -> list[JobRecord]:
        """Jobs whose id is ``ref``, starts with it, or whose name is ``ref`` (newest first)."""
        rows = (
            self._db()
            .execute(
                # A prefix compared as text: LIKE would read % and _ in the reference as wildcards.
                "SELECT * FROM jobs WHERE substr(job_id, 1, ?) = ? OR name = ? ORDER BY created_at DESC",
                (len(ref), ref, ref),
            )
            .fetchall()
        )
        exact = [r for r in rows if r["job_id"] == ref]
        return [_job(r) for r in (exact or rows)]

    def list_jobs(self, active_only: bool = False) -> list[JobRecord]:
        rows = self._db().execute("SELECT * FROM jobs ORDER BY created_at DESC").fetchall()
        jobs = [_job(r) for r in rows]
        return [j for j in jobs if j.state.is_active()] if active_only else jobs

    def events(self, job_id: str) -> list[Event]:
        rows = self._db().execute("SELECT * FROM events WHERE job_id = ? ORDER BY id", (job_id,)).fetchall()
        return [Event(**dict(r)) for r in rows]

    def entered_at(self, job_id: str) -> float:
        """When the job entered its current state (the latest transition)."""
        row = (
            self._db()
            .execute(
                "SELECT at FROM events WHERE job_id = ? AND kind = 'transition' ORDER BY id DESC LIMIT 1", (job_id,)
            )
            .fetchone()
        )
        return float(row["at"]) if row else 0.0

    def nodes(self, job_id: str, attempt: int | None = None) -> list[NodeRecord]:
        if attempt is None:
            rows = (
                self._db().execute("SELECT * FROM nodes WHERE job_id = ? ORDER BY attempt, node", (job_id,)).fetchall()
            )
        else:
            rows = (
                self._db()
                .execute("SELECT * FROM nodes WHERE job_id = ? AND attempt = ? ORDER BY node", (job_id, attempt))
                .fetchall()
            )
        return [NodeRecord(**{**dict(r), "charge_type": ChargeType(r["charge_type"])}) for r in rows]

    def images(self, job_id: str | None = None) -> list[ImageRecord]:
        if job_id is None:
            rows = self._db().execute("SELECT * FROM images ORDER BY created_at").fetchall()
        else:
            rows = self._db().execute("SELECT * FROM images WHERE job_id = ? ORDER BY created_at", (job_id,)).fetchall()
        return [ImageRecord(**dict(r)) for r in rows]

    # -- creation and leases ---------------------------------------------------------------------------
    def create_job(
        self,
        job_id: str,
        name: str,
        spec: dict[str, Any],
        plan: dict[str, Any],
        cloud: dict[str, Any],
        now: float,
        deadline: float,
        source_dir: str,
        settings: dict[str, Any],
    ) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO jobs (job_id, name, state, spec_json, plan_json, cloud_json, created_at, updated_at,"
                " deadline, source_dir, settings_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    job_id,
                    name,
                    JobState.PENDING.value,
                    json.dumps(spec),
                    json.dumps(plan),
                    json.dumps(cloud),
                    now,
                    now,
                    deadline,
                    source_dir,
                    json.dumps(settings),
                ),
            )
            db.execute(
                "INSERT INTO events (job_id, at, kind, to_state, detail) VALUES (?, ?, 'transition', ?, 'created')",
                (job_id, now, JobState.PENDING.value),
            )

    def acquire(self, job_id: str, owner: str, ttl: float, now: float, force: bool = False) -> int:
        """Take the job's lease; returns the new fencing token. Raises LeaseHeld while another owner's lease is
        live (``force`` takes it anyway: the operator says the other controller is gone)."""
        with self._tx() as db:
            row = db.execute(
                "SELECT lease_owner, lease_token, lease_expires FROM jobs WHERE job_id = ?", (job_id,)
            ).fetchone()
            if row is None:
                raise KeyError(job_id)
            if row["lease_owner"] not in (None, owner) and row["lease_expires"] > now and not force:
                raise LeaseHeld(
                    f"job {job_id} is driven by controller {row['lease_owner']} "
                    f"(lease valid for {row['lease_expires'] - now:.0f} s more)"
                )
            token = int(row["lease_token"]) + 1
            db.execute(
                "UPDATE jobs SET lease_owner = ?, lease_token = ?, lease_expires = ? WHERE job_id = ?",
                (owner, token, now + ttl, job_id),
            )
            return token

    def renew(self, job_id: str, token: int, ttl: float, now: float) -> None:
        with self._tx() as db:
            self._fence(db, job_id, token)
            db.execute("UPDATE jobs SET lease_expires = ? WHERE job_id = ?", (now + ttl, job_id))

    def release(self, job_id: str, token: int) -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE jobs SET lease_owner = NULL, lease_expires = 0 WHERE job_id = ? AND lease_token = ?",
                (job_id, token),
            )

    @staticmethod
    def _fence(db: sqlite3.Connection, job_id: str, token: int) -> sqlite3.Row:
        row: sqlite3.Row | None = db.execute("SELECT * FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
        if row is None:
            raise KeyError(job_id)
        if int(row["lease_token"]) != token:
            raise FencedOut(f"job {job_id}: lease token {token} is stale (current {row['lease_token']})")
        return row

    def check_lease(self, job_id: str, token: int) -> None:
        """Raise FencedOut unless ``token`` is still the job's lease: asked before every action, so that a
        controller that lost its lease stops before a cloud call, not at the write that records it."""
        self._fence(self._db(), job_id, token)

    # -- fenced writes ---------------------------------------------------------------------------------
    def transition(
        self,
        job_id: str,
        token: int,
        expected: JobState,
        target: JobState,
        reason: str,
        now: float,
        **changes: Any,
    ) -> None:
        with self._tx() as db:
            row = self._fence(db, job_id, token)
            current = JobState(row["state"])
            if current != expected:
                raise StaleState(f"job {job_id} is {current.value}, not {expected.value}")
            check_transition(current, target)
            self._update(db, job_id, now, {"state": target.value, "reason": reason, **changes})
            db.execute(
                "INSERT INTO events (job_id, at, kind, from_state, to_state, detail)"
                " VALUES (?, ?, 'transition', ?, ?, ?)",
                (job_id, now, current.value, target.value, reason),
            )
        _crash_point(f"{current.value}->{target.value}")

    def update(self, job_id: str, token: int, now: float, **changes: Any) -> None:
        with self._tx() as db:
            self._fence(db, job_id, token)
            self._update(db, job_id, now, changes)

    def request_cancel(self, job_id: str, now: float) -> None:
        """Unfenced on purpose: any process may ask; the controller holding the lease acts on it."""
        with self._tx() as db:
            db.execute("UPDATE jobs SET cancel_requested = 1, updated_at = ? WHERE job_id = ?", (now, job_id))
            db.execute(
                "INSERT INTO events (job_id, at, kind, detail) VALUES (?, ?, 'note', 'cancel requested')",
                (job_id, now),
            )

    @staticmethod
    def _update(db: sqlite3.Connection, job_id: str, now: float, changes: dict[str, Any]) -> None:
        columns: dict[str, Any] = {"updated_at": now}
        for key, value in changes.items():
            if key == "state":
                columns["state"] = value
            elif key == "plan":
                columns["plan_json"] = json.dumps(value)
            elif key in _WRITABLE_JOB_FIELDS:
                columns[key] = value.value if isinstance(value, JobState) else value
            else:
                raise ValueError(f"jobs.{key} is not writable")
        assignments = ", ".join(f"{c} = ?" for c in columns)
        db.execute(f"UPDATE jobs SET {assignments} WHERE job_id = ?", (*columns.values(), job_id))

    def note(self, job_id: str, token: int, kind: str, detail: str, now: float) -> None:
        with self._tx() as db:
            self._fence(db, job_id, token)
            db.execute("INSERT INTO events (job_id, at, kind, detail) VALUES (?, ?, ?, ?)", (job_id, now, kind, detail))

    def put_node(self, token: int, node: NodeRecord) -> None:
        _crash_point(f"node:{node.state}")
        names = [f.name for f in fields(NodeRecord)]
        with self._tx() as db:
            self._fence(db, node.job_id, token)
            db.execute(
                f"INSERT OR REPLACE INTO nodes ({', '.join(names)}) VALUES ({', '.join('?' for _ in names)})",
                tuple(getattr(node, n) for n in names),
            )

    def put_image(self, token: int, image: ImageRecord) -> None:
        _crash_point(f"image:{image.state}")
        names = [f.name for f in fields(ImageRecord)]
        with self._tx() as db:
            self._fence(db, image.job_id, token)
            db.execute(
                f"INSERT OR REPLACE INTO images ({', '.join(names)}) VALUES ({', '.join('?' for _ in names)})",
                tuple(getattr(image, n) for n in names),
            )


class PoolStore:
    """The reserved pools' claims. Not fenced by a job's lease: a claim is an atomic compare-and-set on the row."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def add(self, member: PoolInstance) -> None:
        with self._store._tx() as db:
            db.execute(
                "INSERT OR IGNORE INTO pool_instances VALUES (?, ?, ?, ?, ?, ?)",
                (member.instance_id, member.pool, member.zone, member.instance_type, member.job_id, member.since),
            )

    def remove(self, instance_id: str) -> None:
        with self._store._tx() as db:
            db.execute("DELETE FROM pool_instances WHERE instance_id = ?", (instance_id,))

    def members(self, pool: str | None = None) -> list[PoolInstance]:
        query = "SELECT * FROM pool_instances" + (" WHERE pool = ?" if pool else "") + " ORDER BY instance_id"
        rows = self._store._db().execute(query, (pool,) if pool else ()).fetchall()
        return [PoolInstance(**dict(r)) for r in rows]

    def idle(self, pool: str, placements: list[tuple[str, str]]) -> int:
        """Idle members matching any (zone, instance type)."""
        return sum(1 for m in self.members(pool) if m.job_id is None and (m.zone, m.instance_type) in placements)

    def claim(self, pool: str, placements: list[tuple[str, str]], holder: str, now: float) -> PoolInstance | None:
        """An idle member matching the first (zone, instance type) that has one, now held by ``holder`` (a job's
        node: ``<job>/a<attempt>n<node>``). Idempotent: a holder that already has a member gets it again."""
        with self._store._tx() as db:
            held = db.execute("SELECT * FROM pool_instances WHERE job_id = ? AND pool = ?", (holder, pool)).fetchone()
            if held is not None:  # a retry after a crash
                return PoolInstance(**dict(held))
            for zone, instance_type in placements:
                row = db.execute(
                    "SELECT * FROM pool_instances WHERE pool = ? AND zone = ? AND instance_type = ?"
                    " AND job_id IS NULL ORDER BY since LIMIT 1",
                    (pool, zone, instance_type),
                ).fetchone()
                if row is not None:
                    db.execute(
                        "UPDATE pool_instances SET job_id = ?, since = ? WHERE instance_id = ?",
                        (holder, now, row["instance_id"]),
                    )
                    return PoolInstance(**{**dict(row), "job_id": holder, "since": now})
            return None

    def release(self, instance_id: str, holder: str, now: float) -> None:
        with self._store._tx() as db:
            db.execute(
                "UPDATE pool_instances SET job_id = NULL, since = ? WHERE instance_id = ? AND job_id = ?",
                (now, instance_id, holder),
            )


def _create_wal_database(path: Path) -> None:
    """Create the file already in WAL mode, then move it into place atomically.

    Switching a shared file to WAL while another process opens it can leave that process writing to a WAL
    file the other has deleted (its writes are then invisible to everyone else). A database that is born in WAL
    mode never switches: the mode is persistent in its header."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.new")
    db = sqlite3.connect(tmp, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    finally:
        db.close()
    try:
        os.link(tmp, path)  # fails if another process won the race: use theirs
    except FileExistsError:
        pass
    finally:
        tmp.unlink()


def _statements(script: str) -> list[str]:
    """The script's statements, split where SQLite says a statement is complete (not at a ';' in a comment)."""
    statements, buffer = [], ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    return statements
