"""The state store: a SQLite file (``$CVMJOB_HOME/state.db``, embedded) or a PostgreSQL database (shared by a
team's controllers), through SQLAlchemy Core.

Every write to a job is *fenced*: it names the lease token its controller holds, and the write happens in the
same transaction that checks the token is still current (the job's row locked on PostgreSQL, the whole file on
SQLite). A controller that lost its lease (a second controller took over, or it was presumed dead) cannot write
anything (dstack's ``lock_token``). Each taking of a lease draws a random token, never the last one plus one: a
commit that a PostgreSQL failover lost cannot hand one token to two holders. Transitions are also compare-and-set
on the current state and checked against the machine's table. A transaction holds nothing but SQL: no cloud call,
no file, no sleep.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import signal
import sqlite3
import threading
import weakref
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError
from sqlalchemy import Connection, Engine, Row, Table, bindparam, create_engine, event, func, or_, select, update
from sqlalchemy import delete as sql_delete
from sqlalchemy import exc as sql_errors
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import URL, make_url

from ..contract import Fingerprint, RunLabels
from ..errors import EXIT_CLOUD_ERROR, CvmjobError
from ..extras import need
from ..plan.models import Plan
from ..plan.settings import Settings
from ..providers.tencent.vocabulary import ChargeType
from ..spec.models import JobSpec
from ..target.resolve import Target
from . import migrations, outbox
from .machine import JobState, NodeState, check_transition
from .outbox import NewNotification
from .schema import controllers, events, images, jobs, nodes, notifications, pool_instances, sweepers

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql

# Test-only crash points (tests/faults/test_crash_points.py): the process SIGKILLs itself, so that a restarted
# controller has only the store and the cloud to go on. CVMJOB_CRASH_AT="RUNNING->IMAGING": right after that
# transition commits; "node:launched" or "image:CREATING": right before a node or image record in that state is
# written, i.e. after the cloud call it records and before its outcome is persisted. Inert unless set.
CRASH_AT_ENV = "CVMJOB_CRASH_AT"


def _crash_point(name: str) -> None:
    if os.environ.get(CRASH_AT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


POOL_SIZE = 10  # PostgreSQL connections a store keeps open
BUSY_TIMEOUT = 30.0  # seconds a SQLite writer waits for another's lock, and a thread for a pooled connection
POOL_OVERFLOW = 50  # and opens beyond them while it is busy (a server allows 100 by default)


class StoreError(CvmjobError):
    """The store cannot be used (unreachable, not writable, or of a newer schema); the message is one line that
    says what to do."""


class StoreBusy(StoreError):
    """A lock or a pooled connection of the store was waited for longer than BUSY_TIMEOUT: transient, a later try
    may succeed (a controller steps the job again instead of dying of it)."""


class StoreUnreachable(StoreBusy):
    """The PostgreSQL server refused or dropped the connection (down, restarting, failing over): transient too; a
    controller waits for it with backoff (controller/service.py)."""


class StoreDamaged(StoreError):
    """The SQLite file is not a database or has a damaged page: nothing of it is read or written any more."""


# SQLite's primary result codes for a file it cannot read: SQLITE_CORRUPT and SQLITE_NOTADB.
_SQLITE_UNREADABLE = {11, 26}


class FencedOut(CvmjobError):
    """This controller no longer holds the job's lease: it must stop acting on the job."""

    exit_code = EXIT_CLOUD_ERROR

    def hint(self) -> str:
        return f"{self}. `cvmjob resume --force` takes over if that controller is gone"


class LeaseHeld(CvmjobError):
    """Another live controller holds the job's lease."""

    exit_code = EXIT_CLOUD_ERROR

    def hint(self) -> str:
        return f"{self}. `cvmjob resume --force` takes over if that controller is gone"


class StaleState(RuntimeError):
    """The job is not in the state the caller believed (another writer moved it)."""


@dataclass(frozen=True)
class NewJob:
    """A job as it is submitted: what ``Store.create_job`` records, born together at plan time."""

    job_id: str
    name: str
    spec: JobSpec
    plan: Plan
    target: Target
    settings: Settings
    deadline: float
    source_dir: str
    fingerprint: Fingerprint | None = None  # `run --if-changed`: the inputs at submission
    labels: RunLabels = field(default_factory=RunLabels)  # where it ran from


@dataclass(frozen=True)
class JobRecord:
    """A job as the store has it, its documents decoded (``job_from_json``, the one place)."""

    job_id: str
    name: str
    state: JobState
    outcome: JobState | None
    reason: str
    spec: JobSpec
    plan: Plan
    target: Target  # stored as "cloud"
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
    settings: Settings
    keys_issued_at: float | None = None
    keys_expire_at: float | None = None
    image_error: str | None = None
    entered_at: float = 0.0  # when it entered its state: the latest transition
    cancel_checkpoint: bool = True  # the requested cancel wants the agents' emergency checkpoint first
    fingerprint: Fingerprint | None = None  # `run --if-changed`: the inputs at submission
    labels: RunLabels = field(default_factory=RunLabels)  # where it ran from


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
    state: NodeState
    launched_at: float | None = None
    running_at: float | None = None
    ended_at: float | None = None
    end_reason: str = ""
    cost_cny: float | None = None
    on_demand_price_per_hour: float | None = None  # what the same node costs on demand: spot savings
    # Where cost_cny came from: "bill" (the cloud's bill listed the instance), "estimate" (its price for its running
    # time: the bill had no line for it yet) or "pool" (a reserved pool member: a job adds nothing to its prepaid
    # period); None: billed before store revision 0006.
    cost_source: str | None = None
    training_seconds: float | None = None  # how long its training ran, by its agent; None: not known

    def ran_seconds(self, now: float) -> float | None:
        """From RUNNING until it ended (or ``now``): the time an hourly instance is billed for; None when it never
        ran."""
        if self.running_at is None:
            return None
        return (self.ended_at or now) - self.running_at

    def priced(self, per_hour: float | None, now: float) -> float | None:
        """Its running time at ``per_hour`` CNY; None when it never ran or no price is known. An estimate: the
        bill read at the end is the truth."""
        ran = self.ran_seconds(now)
        if ran is None or per_hour is None:
            return None
        return per_hour * ran / 3600


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


@dataclass(frozen=True)
class ControllerRecord:
    """A controller replica of this store, as it registered itself."""

    owner: str
    started_at: float
    beat_at: float
    info: dict[str, Any]


@dataclass(frozen=True)
class LeaseRecord:
    """A job some controller holds a live lease on."""

    job_id: str
    name: str
    state: JobState
    owner: str
    expires_at: float


_JSON_COLUMNS = {"spec_json": "spec", "plan_json": "plan", "cloud_json": "cloud", "settings_json": "settings",
                 "labels_json": "labels"}
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
    "keys_issued_at",
    "keys_expire_at",
    "image_error",
}
_ACTIVE_STATES = [s.value for s in JobState if s.is_active()]
_WRITE = "cvmjob_write"  # execution option: this connection's transaction writes (SQLite: BEGIN IMMEDIATE)


_JOB_RECORD = TypeAdapter(JobRecord)


STORED_AS = {"target": "cloud"}  # JobRecord's fields whose stored form (a column, job.json's key) is named otherwise


def job_from_json(data: Mapping[str, Any]) -> JobRecord:
    """A job's record from its stored form (a row's columns, JSON documents parsed; a job.json's ``job``): every
    field checked, the documents decoded into their models. The stored form names the target "cloud"."""
    field_of = {stored: name for name, stored in STORED_AS.items()}
    return _JOB_RECORD.validate_python({field_of.get(k, k): v for k, v in data.items()})


def job_to_json(job: JobRecord) -> dict[str, Any]:
    """The stored form of ``job``: what ``job_from_json`` reads back."""
    data: dict[str, Any] = _JOB_RECORD.dump_python(job, mode="json")
    return {STORED_AS.get(k, k): v for k, v in data.items()}


_TARGET, _SETTINGS = TypeAdapter(Target), TypeAdapter(Settings)


# A row's frozen documents decoded, by their stored text: a job is read every round it is due, and its spec, plan,
# target and settings never change once written, so one decoding serves every reading.
@functools.lru_cache(maxsize=8192)
def _frozen(kind: str, text: str) -> Any:
    if kind == "spec":
        return JobSpec.model_validate_json(text)
    if kind == "plan":
        return Plan.model_validate_json(text)
    return _TARGET.validate_json(text) if kind == "cloud" else _SETTINGS.validate_json(text)


def _document(job_id: str, kind: str, text: str) -> Any:
    try:
        if kind == "labels":
            return RunLabels.model_validate_json(text)
        if kind == "fingerprint":
            return Fingerprint.model_validate_json(text)
        return _frozen(kind, text)
    except ValidationError as exc:  # a migration rewrites what a release changes: only a hand's edit gets here
        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(part) for part in (kind, *first["loc"]))
        raise StoreError(f"job {job_id} in the store cannot be read ({where}: {first['msg']}): its record was "
                         "changed outside cvmjob. restore the store from a backup, or delete the job's rows and let "
                         "`cvmjob gc` collect what it left in the cloud") from exc


def _job(row: Row[Any]) -> JobRecord:
    data = dict(row._mapping)
    job_id = data["job_id"]
    documents = {name: _document(job_id, name, data.pop(column)) for column, name in _JSON_COLUMNS.items()}
    fingerprint, outcome, state = data.pop("fingerprint_json"), data.pop("outcome"), data.pop("state")
    requested, checkpoint = bool(data.pop("cancel_requested")), bool(data.pop("cancel_checkpoint"))
    return JobRecord(
        **data, cancel_requested=requested, cancel_checkpoint=checkpoint, state=JobState(state),
        outcome=JobState(outcome) if outcome else None, spec=documents["spec"], plan=documents["plan"],
        target=documents["cloud"], settings=documents["settings"], labels=documents["labels"],
        fingerprint=None if fingerprint is None else _document(job_id, "fingerprint", fingerprint))


def _new_token(previous: int) -> int:
    """A fencing token for a new holding of a lease: random, not the previous one plus one. A commit that a
    failover lost (an asynchronous replica promoted, or ``synchronous_commit=off`` and a crash) leaves the previous
    token on the row; a counter would hand the lost token out again, and its first holder, still running, would pass
    the fence beside the second. Two random 63-bit tokens meet with odds of 2**-63."""
    while (token := 1 + secrets.randbelow(2**63 - 1)) == previous:
        pass
    return token


def _chunks(values: list[str], size: int = 500) -> Iterator[list[str]]:
    """IN lists of at most ``size`` (SQLite allows 32 766 bound parameters; a round stays far below either way)."""
    for start in range(0, len(values), size):
        yield values[start : start + size]


def _reason(exc: sql_errors.DBAPIError) -> str:
    """The driver's message, on one line."""
    return " ".join(str(exc.orig if exc.orig is not None else exc).split())


def _unreadable(exc: sql_errors.DBAPIError) -> bool:
    """SQLite said the file is not a database, or a page of it is damaged."""
    code = getattr(exc.orig, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in _SQLITE_UNREADABLE


def _node(row: Row[Any]) -> NodeRecord:
    data = dict(row._mapping)
    return NodeRecord(**{**data, "charge_type": ChargeType(data["charge_type"]), "state": NodeState(data["state"])})


def _wire(value: Any) -> Any:
    """A value as the store keeps it: an enum as its string (a driver may adapt an enum by its name), a flag as
    0 or 1 (PostgreSQL will not put a boolean in an integer column)."""
    if isinstance(value, JobState | NodeState | ChargeType):
        return value.value
    return int(value) if isinstance(value, bool) else value


def _url(where: Path | str) -> tuple[URL, str]:
    """The SQLAlchemy URL of ``where`` and how to name it to a user (no password): a path is a SQLite file;
    ``sqlite:///…`` and ``postgresql://…`` URLs are taken as they are, PostgreSQL through psycopg 3."""
    if isinstance(where, Path) or "://" not in where:
        path = str(Path(where).expanduser())
        return URL.create("sqlite", database=path), path
    try:
        url = make_url(where)
    except sql_errors.ArgumentError as exc:
        raise StoreError(f"{where!r} is neither a path nor a sqlite:// or postgresql:// URL") from exc
    shown = url.render_as_string(hide_password=True)
    if url.get_backend_name() in ("postgresql", "postgres"):
        need("postgres", "psycopg")
        return url.set(drivername="postgresql+psycopg"), shown
    if url.get_backend_name() != "sqlite":
        raise StoreError(f"{shown}: cvmjob keeps its state in SQLite or PostgreSQL")
    if url.database in (None, "", ":memory:"):
        raise StoreError(f"{shown}: a SQLite store is a file (sqlite:///relative/path or sqlite:////absolute/path)")
    return url, url.database


class Store:
    def __init__(self, where: Path | str) -> None:
        url, self.where = _url(where)
        if url.get_backend_name() == "sqlite":
            self._engine = _sqlite_engine(url, self.where)
        else:
            # A connection is held for one statement or one short transaction, but a controller's threads ask at
            # once: a pool larger than the default's 5 + 10. PostgreSQL forks a backend per new connection, which a
            # loaded server can take over 10 s to do; a server that is down refuses at once anyway.
            self._engine = create_engine(url, connect_args={"connect_timeout": 30}, pool_pre_ping=True,
                                         pool_size=POOL_SIZE, max_overflow=POOL_OVERFLOW, pool_timeout=BUSY_TIMEOUT)
        self._closed = weakref.finalize(self, self._engine.dispose)  # a store dropped unclosed closes its connections
        self._upserts: dict[tuple[str, tuple[str, ...]], sqlite.Insert | postgresql.Insert] = {}
        # A SQLite file is checked whole (PRAGMA quick_check) before this process first writes to it: a write that
        # misses a damaged page would still rewrite the file. Readers need no check (a read of a damaged page fails
        # by itself), and a damaged file, once seen, is never written again (_damaged).
        self._checked = self._engine.dialect.name != "sqlite"
        self._damaged: StoreDamaged | None = None
        try:
            with self._write(check=False) as conn:
                if not migrations.at_head(conn):
                    self._check(conn)
                    migrations.upgrade(conn)
        except migrations.NewerSchema as exc:
            self.close()
            raise StoreError(
                f"the store {self.where} was written by a newer cvmjob (schema {exc.revision}); "
                "upgrade cvmjob or point CVMJOB_DB elsewhere"
            ) from exc
        except sql_errors.DBAPIError as exc:  # e.g. no right to create tables in the database
            self.close()
            raise StoreError(
                f"cannot set up the store {self.where} ({_reason(exc)}): "
                "cvmjob needs a database it may create tables in; point CVMJOB_DB elsewhere"
            ) from exc
        except StoreError:
            self.close()
            raise

    def close(self) -> None:
        """Close the store's connections (dropping the store or the process exiting does the same)."""
        self._closed()

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except sql_errors.TimeoutError as exc:  # every pooled connection stayed in use for the pool's timeout
            raise StoreBusy(f"the store {self.where} is busy: no connection of this process's pool was free for "
                            f"{BUSY_TIMEOUT:.0f} s; try again") from exc
        except (sql_errors.OperationalError, sql_errors.InterfaceError) as exc:
            reason = _reason(exc)
            if self._engine.dialect.name != "sqlite":  # refused, dropped, shut down, failing over: wait for it
                raise StoreUnreachable(f"cannot use the store {self.where} ({reason}): check that the server is up "
                                       "and CVMJOB_DB names it, or point CVMJOB_DB elsewhere") from exc
            if _unreadable(exc):
                raise self._damage(reason) from exc
            if "locked" in reason:
                raise StoreBusy(f"cannot use the store {self.where} ({reason}): another process has been writing "
                                f"to it for {BUSY_TIMEOUT:.0f} s; try again") from exc
            raise StoreError(f"cannot use the store {self.where} ({reason}): "
                             "set CVMJOB_DB or CVMJOB_HOME to a file cvmjob can write") from exc
        except sql_errors.DatabaseError as exc:
            if not _unreadable(exc):
                raise
            raise self._damage(_reason(exc)) from exc

    def _damage(self, reason: str) -> StoreDamaged:
        """The one error for a SQLite file that cannot be read; from now on this store writes nothing to it."""
        self._damaged = StoreDamaged(
            f"the store {self.where} is damaged ({reason}); cvmjob leaves it as it is: restore it from a backup, or "
            f"move it aside (cvmjob then starts an empty store; `sqlite3 {self.where} .recover` may save what is "
            "still readable)"
        )
        return self._damaged

    def _check(self, conn: Connection) -> None:
        """StoreDamaged unless SQLite's quick check of the whole file passes (once per store object)."""
        if self._checked:
            return
        [(problem,)] = conn.exec_driver_sql("PRAGMA quick_check(1)").all()  # the first problem found, or "ok"
        if problem != "ok":
            raise self._damage(" ".join(str(problem).replace("*** in database main ***", "").split()))
        self._checked = True

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self._errors(), self._engine.connect() as conn:
            yield conn

    @contextmanager
    def _write(self, check: bool = True) -> Iterator[Connection]:
        """One transaction that writes: all of it commits, or (on any exception) none of it. ``check``: the
        SQLite file is checked first, once (the store's opening checks only when it migrates)."""
        if self._damaged is not None:
            raise self._damaged
        with self._errors(), self._engine.connect() as conn:
            conn.execution_options(**{_WRITE: True})
            with conn.begin():
                if check:
                    self._check(conn)
                yield conn

    def _insert(self, table: Table) -> sqlite.Insert | postgresql.Insert:
        """INSERT with ON CONFLICT clauses, in the dialect's own words."""
        if self._engine.dialect.name == "sqlite":
            return sqlite.insert(table)
        from sqlalchemy.dialects import postgresql  # its drivers' modules: only for a PostgreSQL store

        return postgresql.insert(table)

    # -- reads -----------------------------------------------------------------------------------------
    def get(self, job_id: str) -> JobRecord | None:
        with self._read() as conn:
            row = conn.execute(select(jobs).where(jobs.c.job_id == job_id)).first()
        return _job(row) if row else None

    def get_many(self, job_ids: Iterable[str]) -> dict[str, JobRecord]:
        """The jobs of those ids that exist, in one query (a controller's round reads its due jobs so)."""
        wanted = list(job_ids)
        found: dict[str, JobRecord] = {}
        for chunk in _chunks(wanted):
            with self._read() as conn:
                found.update((r.job_id, _job(r)) for r in conn.execute(select(jobs).where(jobs.c.job_id.in_(chunk))))
        return found

    def nodes_of(self, job_ids: Iterable[str]) -> dict[str, list[NodeRecord]]:
        """Every node of each job (by attempt, then node), in one query; [] for a job without any."""
        wanted = list(job_ids)
        found: dict[str, list[NodeRecord]] = {job_id: [] for job_id in wanted}
        for chunk in _chunks(wanted):
            query = select(nodes).where(nodes.c.job_id.in_(chunk)).order_by(nodes.c.job_id, nodes.c.attempt,
                                                                             nodes.c.node)
            with self._read() as conn:
                for row in conn.execute(query):
                    found[row.job_id].append(_node(row))
        return found

    def find(self, ref: str, names: bool = True) -> list[JobRecord]:
        """Jobs whose id is ``ref``, starts with it, or (``names``) whose name is ``ref`` (newest first)."""
        # A prefix compared as text: LIKE would read % and _ in the reference as wildcards.
        by_id = func.substr(jobs.c.job_id, 1, len(ref)) == ref
        query = select(jobs).where(or_(by_id, jobs.c.name == ref) if names else by_id)
        with self._read() as conn:
            rows = conn.execute(query.order_by(jobs.c.created_at.desc())).all()
        exact = [r for r in rows if r.job_id == ref]
        return [_job(r) for r in (exact or rows)]

    def named(self, name: str) -> list[JobRecord]:
        """The jobs of that name, newest first."""
        with self._read() as conn:
            return [_job(r) for r in conn.execute(select(jobs).where(jobs.c.name == name)
                                                  .order_by(jobs.c.created_at.desc()))]

    def list_jobs(self, active_only: bool = False, since: float | None = None) -> list[JobRecord]:
        """Newest first; ``since``: only the jobs created at that time or later."""
        query = select(jobs).order_by(jobs.c.created_at.desc())
        if active_only:
            query = query.where(jobs.c.state.in_(_ACTIVE_STATES))
        if since is not None:
            query = query.where(jobs.c.created_at >= since)
        with self._read() as conn:
            return [_job(r) for r in conn.execute(query)]

    def unclaimed_pending(self, now: float) -> bool:
        """Some job was submitted and no live lease holds it yet (what a controller polls for between rounds)."""
        query = select(jobs.c.job_id).where(
            jobs.c.state == JobState.PENDING.value, or_(jobs.c.lease_owner.is_(None), jobs.c.lease_expires <= now)
        ).limit(1)
        with self._read() as conn:
            return conn.execute(query).first() is not None

    def cancels_for(self, owner: str, states: Iterable[JobState]) -> list[str]:
        """The jobs ``owner`` holds whose cancel was requested while in one of ``states`` (one query a round: a
        controller acts on a `cvmjob cancel` at once, not at the job's next routine look)."""
        query = select(jobs.c.job_id).where(jobs.c.lease_owner == owner, jobs.c.cancel_requested == 1,
                                            jobs.c.state.in_([s.value for s in states]))
        with self._read() as conn:
            return list(conn.execute(query).scalars())

    def count_active(self) -> int:
        """How many jobs have not ended (a controller's fair share is a part of them)."""
        with self._read() as conn:
            return int(conn.execute(select(func.count()).select_from(jobs).where(
                jobs.c.state.in_(_ACTIVE_STATES))).scalar_one())

    def events(self, job_id: str) -> list[Event]:
        with self._read() as conn:
            rows = conn.execute(select(events).where(events.c.job_id == job_id).order_by(events.c.id)).all()
        return [Event(**r._mapping) for r in rows]

    def nodes(self, job_id: str, attempt: int | None = None) -> list[NodeRecord]:
        query = select(nodes).where(nodes.c.job_id == job_id).order_by(nodes.c.attempt, nodes.c.node)
        if attempt is not None:
            query = query.where(nodes.c.attempt == attempt)
        with self._read() as conn:
            return [_node(r) for r in conn.execute(query)]

    def images(self, job_id: str | None = None) -> list[ImageRecord]:
        query = select(images).order_by(images.c.created_at)
        if job_id is not None:
            query = query.where(images.c.job_id == job_id)
        with self._read() as conn:
            return [ImageRecord(**r._mapping) for r in conn.execute(query)]

    # -- creation and leases ---------------------------------------------------------------------------
    def create_job(self, job: NewJob, now: float, lease: tuple[str, float] | None = None) -> None:
        """``lease``: (owner, ttl) of the controller that will drive the job itself (`cvmjob run`), so that no
        other controller claims it between its submission and its first round."""
        held = {"lease_owner": lease[0], "lease_expires": now + lease[1]} if lease else {}
        with self._write() as conn:
            conn.execute(
                jobs.insert().values(
                    **held,
                    job_id=job.job_id,
                    name=job.name,
                    state=JobState.PENDING.value,
                    spec_json=json.dumps(job.spec.model_dump(mode="json")),
                    plan_json=json.dumps(job.plan.model_dump(mode="json")),
                    cloud_json=json.dumps(job.target.to_json()),
                    created_at=now,
                    updated_at=now,
                    entered_at=now,
                    deadline=job.deadline,
                    source_dir=job.source_dir,
                    fingerprint_json=None if job.fingerprint is None else job.fingerprint.model_dump_json(),
                    labels_json=job.labels.model_dump_json(),
                    settings_json=json.dumps(asdict(job.settings)),
                )
            )
            conn.execute(
                events.insert().values(
                    job_id=job.job_id, at=now, kind="transition", to_state=JobState.PENDING.value, detail="created"
                )
            )

    def acquire(self, job_id: str, owner: str, ttl: float, now: float, force: bool = False) -> int:
        """Take the job's lease; returns the new fencing token. Raises LeaseHeld while another owner's lease is
        live (``force`` takes it anyway: the operator says the other controller is gone)."""
        with self._write() as conn:
            row = conn.execute(
                select(jobs.c.lease_owner, jobs.c.lease_token, jobs.c.lease_expires)
                .where(jobs.c.job_id == job_id)
                .with_for_update()
            ).first()
            if row is None:
                raise KeyError(job_id)
            if row.lease_owner not in (None, owner) and row.lease_expires > now and not force:
                raise LeaseHeld(
                    f"job {job_id} is driven by controller {row.lease_owner} "
                    f"(lease valid for {row.lease_expires - now:.0f} s more)"
                )
            token = _new_token(int(row.lease_token))
            conn.execute(
                update(jobs)
                .where(jobs.c.job_id == job_id)
                .values(lease_owner=owner, lease_token=token, lease_expires=now + ttl)
            )
            return token

    def claim(
        self, owner: str, ttl: float, now: float, limit: int, *, held: Collection[str] = ()
    ) -> list[tuple[str, int]]:
        """Take the leases of up to ``limit`` non-terminal jobs (oldest first) whose lease is free, expired or
        already ``owner``'s; returns (job id, new token) for each: the caller's own jobs come back with a new token
        too, which replaces the one it held. ``held``: jobs the caller is driving, left out (their tokens stay as
        they are, and they take no room in ``limit``). Two controllers claiming at once never get the same job:
        rows another claim has locked are skipped (PostgreSQL), or claims take turns (SQLite)."""
        query = select(jobs.c.job_id, jobs.c.lease_token).where(
            jobs.c.state.in_(_ACTIVE_STATES),
            or_(jobs.c.lease_owner.is_(None), jobs.c.lease_expires <= now, jobs.c.lease_owner == owner),
        )
        if held:
            query = query.where(jobs.c.job_id.not_in(list(held)))
        with self._write() as conn:
            rows = conn.execute(
                query.order_by(jobs.c.created_at, jobs.c.job_id).limit(limit).with_for_update(skip_locked=True)
            ).all()
            claimed = [(r.job_id, _new_token(int(r.lease_token))) for r in rows]
            if claimed:
                conn.execute(
                    update(jobs)
                    .where(jobs.c.job_id == bindparam("claimed_id"))
                    .values(lease_owner=owner, lease_token=bindparam("claimed_token"), lease_expires=now + ttl),
                    [{"claimed_id": job_id, "claimed_token": token} for job_id, token in claimed],
                )
            return claimed

    def renew(self, job_id: str, token: int, ttl: float, now: float) -> None:
        with self._write() as conn:
            self._fence(conn, job_id, token)
            conn.execute(update(jobs).where(jobs.c.job_id == job_id).values(lease_expires=now + ttl))

    def renew_all(self, owner: str, tokens: Mapping[str, int], ttl: float, now: float) -> set[str]:
        """Extend, in one transaction, every lease in ``tokens`` (job id: token) that is still ``owner``'s with that
        token; returns the ids of the others (taken over, released or gone): their controller must drop them."""
        if not tokens:
            return set()
        with self._write() as conn:
            rows = conn.execute(
                select(jobs.c.job_id, jobs.c.lease_owner, jobs.c.lease_token)
                .where(jobs.c.job_id.in_(list(tokens)))
                .with_for_update()
            ).all()
            ours = [r.job_id for r in rows if r.lease_owner == owner and int(r.lease_token) == tokens[r.job_id]]
            if ours:
                conn.execute(update(jobs).where(jobs.c.job_id.in_(ours)).values(lease_expires=now + ttl))
        return set(tokens) - set(ours)

    def release(self, job_id: str, token: int) -> None:
        with self._write() as conn:
            conn.execute(
                update(jobs)
                .where(jobs.c.job_id == job_id, jobs.c.lease_token == token)
                .values(lease_owner=None, lease_expires=0)
            )

    def leases(self, now: float) -> list[LeaseRecord]:
        """The live leases, by owner, oldest job first."""
        query = (
            select(jobs.c.job_id, jobs.c.name, jobs.c.state, jobs.c.lease_owner, jobs.c.lease_expires)
            .where(jobs.c.lease_owner.is_not(None), jobs.c.lease_expires > now)
            .order_by(jobs.c.lease_owner, jobs.c.created_at, jobs.c.job_id)
        )
        with self._read() as conn:
            rows = conn.execute(query).all()
        return [LeaseRecord(r.job_id, r.name, JobState(r.state), r.lease_owner, r.lease_expires) for r in rows]

    @staticmethod
    def _fence(conn: Connection, job_id: str, token: int, lock: bool = True) -> Row[Any]:
        """The job's row, if ``token`` is its lease (locked for the rest of the transaction, unless ``lock`` is
        False); FencedOut if not."""
        query = select(jobs).where(jobs.c.job_id == job_id)
        row = conn.execute(query.with_for_update() if lock else query).first()
        if row is None:
            raise KeyError(job_id)
        if int(row.lease_token) != token:
            raise FencedOut(f"job {job_id}: lease token {token} is stale (current {row.lease_token})")
        return row

    def check_lease(self, job_id: str, token: int) -> None:
        """Raise FencedOut unless ``token`` is still the job's lease: asked before every action, so that a
        controller that lost its lease stops before a cloud call, not at the write that records it."""
        with self._read() as conn:
            self._fence(conn, job_id, token, lock=False)

    # -- controllers -----------------------------------------------------------------------------------
    def register_controller(self, owner: str, now: float, info: dict[str, Any]) -> None:
        """Record a replica as started now (again, if it was registered: a restart under the same name)."""
        values = {"owner": owner, "started_at": now, "beat_at": now, "info_json": json.dumps(info)}
        insert = self._insert(controllers).values(values)
        with self._write() as conn:
            conn.execute(
                insert.on_conflict_do_update(
                    index_elements=[controllers.c.owner],
                    set_={k: insert.excluded[k] for k in values if k != "owner"},
                )
            )

    def beat_controller(self, owner: str, now: float) -> bool:
        """The replica is alive at ``now``; False when it is not registered (it was removed: register again)."""
        with self._write() as conn:
            result = conn.execute(update(controllers).where(controllers.c.owner == owner).values(beat_at=now))
        return bool(result.rowcount)

    def remove_controller(self, owner: str) -> None:
        with self._write() as conn:
            conn.execute(sql_delete(controllers).where(controllers.c.owner == owner))

    def live_controllers(self, now: float, ttl: float) -> list[ControllerRecord]:
        """The replicas whose last beat is less than ``ttl`` old, first started first."""
        query = (
            select(controllers)
            .where(controllers.c.beat_at > now - ttl)
            .order_by(controllers.c.started_at, controllers.c.owner)
        )
        with self._read() as conn:
            rows = conn.execute(query).all()
        return [ControllerRecord(r.owner, r.started_at, r.beat_at, json.loads(r.info_json)) for r in rows]

    # -- fenced writes ---------------------------------------------------------------------------------
    def transition(
        self,
        job_id: str,
        token: int,
        expected: JobState,
        target: JobState,
        reason: str,
        now: float,
        notices: Collection[NewNotification] = (),
        **changes: Any,
    ) -> None:
        """``notices``: the notifications of this transition, recorded with it (state/outbox.py)."""
        with self._write() as conn:
            row = self._fence(conn, job_id, token)
            current = JobState(row.state)
            if current != expected:
                raise StaleState(f"job {job_id} is {current.value}, not {expected.value}")
            check_transition(current, target)
            self._update(conn, job_id, now, {"state": target.value, "reason": reason, "entered_at": now, **changes})
            conn.execute(
                events.insert().values(
                    job_id=job_id,
                    at=now,
                    kind="transition",
                    from_state=current.value,
                    to_state=target.value,
                    detail=reason,
                )
            )
            outbox.record(conn, self._insert(notifications), notices, now)
        _crash_point(f"{current.value}->{target.value}")

    def update(self, job_id: str, token: int, now: float, **changes: Any) -> None:
        with self._write() as conn:
            self._fence(conn, job_id, token)
            self._update(conn, job_id, now, changes)

    def request_cancel(self, job_id: str, now: float, checkpoint: bool = True) -> None:
        """Unfenced on purpose: any process may ask; the controller holding the lease acts on it. A cancel without
        the checkpoint wins over one with it, whichever came first."""
        values: dict[str, Any] = {"cancel_requested": 1, "updated_at": now}
        if not checkpoint:
            values["cancel_checkpoint"] = 0
        with self._write() as conn:
            conn.execute(update(jobs).where(jobs.c.job_id == job_id).values(**values))
            conn.execute(events.insert().values(job_id=job_id, at=now, kind="note", detail="cancel requested"
                                                + ("" if checkpoint else " (no checkpoint)")))

    @staticmethod
    def _update(conn: Connection, job_id: str, now: float, changes: dict[str, Any]) -> None:
        columns: dict[str, Any] = {"updated_at": now}
        for key, value in changes.items():
            if key in ("state", "entered_at"):  # transition() only
                columns[key] = value
            elif key == "plan":
                columns["plan_json"] = json.dumps(Plan.model_dump(value, mode="json"))
            elif key in _WRITABLE_JOB_FIELDS:
                columns[key] = _wire(value)
            else:
                raise ValueError(f"jobs.{key} is not writable")
        conn.execute(update(jobs).where(jobs.c.job_id == job_id).values(columns))

    def note(self, job_id: str, token: int, kind: str, detail: str, now: float) -> None:
        with self._write() as conn:
            self._fence(conn, job_id, token)
            conn.execute(events.insert().values(job_id=job_id, at=now, kind=kind, detail=detail))

    def put_node(self, token: int, node: NodeRecord) -> None:
        _crash_point(f"node:{node.state.value}")
        self._put(token, node.job_id, nodes, _record_values(node))

    def put_image(self, token: int, image: ImageRecord) -> None:
        _crash_point(f"image:{image.state}")
        self._put(token, image.job_id, images, _record_values(image))

    def _put(self, token: int, job_id: str, table: Table, values: dict[str, Any]) -> None:
        """Insert the record, or replace the one with its key."""
        with self._write() as conn:
            self._fence(conn, job_id, token)
            conn.execute(self._upsert(table, tuple(values)), values)

    def _upsert(self, table: Table, columns: tuple[str, ...]) -> sqlite.Insert | postgresql.Insert:
        """The statement, built once per table and columns: building ``excluded`` (a proxy of every column) for
        each node written was a tenth of a busy controller's store time."""
        where = (table.name, columns)
        statement = self._upserts.get(where)
        if statement is None:
            keys = [c.name for c in table.primary_key.columns]
            insert = self._insert(table)
            statement = insert.on_conflict_do_update(
                index_elements=keys, set_={k: insert.excluded[k] for k in columns if k not in keys}
            )
            self._upserts[where] = statement
        return statement


def _record_values(record: NodeRecord | ImageRecord | PoolInstance) -> dict[str, Any]:
    return {f.name: _wire(getattr(record, f.name)) for f in fields(record)}


class PoolStore:
    """The reserved pools' claims. Not fenced by a job's lease: a claim is an atomic compare-and-set on the row."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def add(self, member: PoolInstance) -> None:
        with self._store._write() as conn:
            conn.execute(self._store._insert(pool_instances).values(_record_values(member)).on_conflict_do_nothing())

    def remove(self, instance_id: str) -> None:
        with self._store._write() as conn:
            conn.execute(sql_delete(pool_instances).where(pool_instances.c.instance_id == instance_id))

    def members(self, pool: str | None = None) -> list[PoolInstance]:
        query = select(pool_instances).order_by(pool_instances.c.instance_id)
        if pool:
            query = query.where(pool_instances.c.pool == pool)
        with self._store._read() as conn:
            return [PoolInstance(**r._mapping) for r in conn.execute(query)]

    def idle(self, pool: str, placements: list[tuple[str, str]]) -> int:
        """Idle members matching any (zone, instance type)."""
        return sum(1 for m in self.members(pool) if m.job_id is None and (m.zone, m.instance_type) in placements)

    def claim(self, pool: str, placements: list[tuple[str, str]], holder: str, now: float) -> PoolInstance | None:
        """An idle member matching the first (zone, instance type) that has one, now held by ``holder`` (a job's
        node: ``<job>/a<attempt>n<node>``). Idempotent: a holder that already has a member gets it again."""
        members = pool_instances.c
        with self._store._write() as conn:
            held = conn.execute(select(pool_instances).where(members.job_id == holder, members.pool == pool)).first()
            if held is not None:  # a retry after a crash
                return PoolInstance(**held._mapping)
            for zone, instance_type in placements:
                row = conn.execute(
                    select(pool_instances)
                    .where(
                        members.pool == pool,
                        members.zone == zone,
                        members.instance_type == instance_type,
                        members.job_id.is_(None),
                    )
                    .order_by(members.since)
                    .limit(1)
                    .with_for_update(skip_locked=True)  # a member another claim is taking is not idle
                ).first()
                if row is not None:
                    conn.execute(
                        update(pool_instances)
                        .where(members.instance_id == row.instance_id)
                        .values(job_id=holder, since=now)
                    )
                    return PoolInstance(**{**row._mapping, "job_id": holder, "since": now})
            return None

    def release(self, instance_id: str, holder: str, now: float) -> None:
        with self._store._write() as conn:
            conn.execute(
                update(pool_instances)
                .where(pool_instances.c.instance_id == instance_id, pool_instances.c.job_id == holder)
                .values(job_id=None, since=now)
            )


class SweeperLeases:
    """Each study's one `cvmjob sweep run`: a compare-and-set lease with a random fencing token, as a job's. The
    holder renews it every round and before it tells the study anything; a run that finds its token replaced stops
    (FencedOut) instead of telling trials another run drives."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def acquire(self, study: str, owner: str, ttl: float, now: float,
                gone: Callable[[str], bool] = lambda holder: False) -> int:
        """Take the study's lease; the new token. LeaseHeld while another owner's lease is live, unless ``gone``
        says its holder is (asked of the row this transaction holds: no other run can take it in between)."""
        with self._store._write() as conn:
            row = conn.execute(select(sweepers).where(sweepers.c.study == study).with_for_update()).first()
            if row is not None and row.owner != owner and row.expires > now and not gone(row.owner):
                raise LeaseHeld(f"the study {study} is driven by another `cvmjob sweep run` ({row.owner}; its lease "
                                f"runs {row.expires - now:.0f} s more)")
            token = _new_token(int(row.token) if row is not None else 0)
            values = {"owner": owner, "token": token, "expires": now + ttl}
            if row is None:
                # Two first takers race on the insert: the loser's primary-key conflict leaves the winner's row.
                inserted = conn.execute(self._store._insert(sweepers).values(study=study, **values)
                                        .on_conflict_do_nothing())
                if inserted.rowcount == 0:
                    raise LeaseHeld(f"the study {study} was just taken by another `cvmjob sweep run`")
            else:
                conn.execute(update(sweepers).where(sweepers.c.study == study).values(values))
            return token

    def renew(self, study: str, token: int, ttl: float, now: float) -> None:
        """Extend the lease ``token`` holds; FencedOut when another run took the study over."""
        with self._store._write() as conn:
            renewed = conn.execute(update(sweepers).where(sweepers.c.study == study, sweepers.c.token == token)
                                   .values(expires=now + ttl))
            if renewed.rowcount != 1:
                raise FencedOut(f"another `cvmjob sweep run` took the study {study} over")

    def release(self, study: str, token: int) -> None:
        with self._store._write() as conn:
            conn.execute(sql_delete(sweepers).where(sweepers.c.study == study, sweepers.c.token == token))


def _sqlite_engine(url: URL, path: str) -> Engine:
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        if not Path(path).exists():
            _create_wal_database(Path(path))
    except (OSError, sqlite3.Error) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise StoreError(
            f"cannot create the store {path} ({reason}): set CVMJOB_DB or CVMJOB_HOME to a place cvmjob can write"
        ) from exc
    # The busy timeout: wait for the writer, then fail.
    engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT}, pool_timeout=BUSY_TIMEOUT)

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection: sqlite3.Connection, _record: object) -> None:
        dbapi_connection.isolation_level = None  # transactions begin in _begin below, not in the driver
        dbapi_connection.execute("PRAGMA foreign_keys=ON")
        dbapi_connection.execute("PRAGMA synchronous=FULL")  # a persisted intent must survive power loss

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        # A writer takes the write lock first: a transaction that read under a shared lock and then wants to write
        # can fail at once with SQLITE_BUSY (the busy timeout cannot help it), and the claim's read-then-update
        # must be atomic. Readers in WAL mode take no lock a writer waits for.
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(_WRITE) else "BEGIN")

    return engine


def _create_wal_database(path: Path) -> None:
    """Create the file already in WAL mode, then move it into place atomically.

    Switching a shared file to WAL while another process opens it can leave that process writing to a WAL
    file the other has deleted (its writes are then invisible to everyone else). A database that is born in WAL
    mode never switches: the mode is persistent in its header."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.new")
    # Readable by its owner only: it holds every job's spec, train.env values included (often tokens). SQLite gives
    # its -wal and -shm files the database's permissions.
    os.close(os.open(tmp, os.O_CREAT | os.O_WRONLY, 0o600))
    os.chmod(tmp, 0o600)  # a leftover of a killed process of the same pid kept its own mode
    db = sqlite3.connect(tmp, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
    finally:
        db.close()
    try:
        os.link(tmp, path)  # fails if another process won the race: use theirs
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
