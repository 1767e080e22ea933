"""The store's schema: Alembic migrations to head on open, stores of the hand-written migrations upgraded in place,
and the stores cvmjob must refuse (a newer schema, unreachable, not creatable) refused in one line, unchanged."""

from __future__ import annotations

import json
import re
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, Engine, create_engine, inspect, text

from orchestrator.plan.settings import Settings
from orchestrator.spec.models import JobSpec
from orchestrator.state import migrations
from orchestrator.state.machine import JobState
from orchestrator.state.schema import metadata
from orchestrator.state.store import NodeRecord, PoolInstance, PoolStore, Store, StoreError
from tests.postgres import fresh_database
from tests.records import new_job

HAND_WRITTEN = Path(__file__).with_name("hand_written_migrations.sql")
BASE_SPEC = {"name": "old", "region": "ap-guangzhou", "instance": {"type": "S5.MEDIUM4"}, "train": {"command": "x"}}
SEEDED_SPEC = {**BASE_SPEC, "data": [{"source": "cos://b-1250000000/d/", "target": "d", "emulator_seed": "x/"}]}
CLEAN_SPEC = {**BASE_SPEC, "data": [{"source": "cos://b-1250000000/d/", "target": "d"}]}
PLAN = {"region": "ap-guangzhou", "image_id": "img-1"}
TARGET = {"kind": "emulator", "region": "ap-guangzhou", "appid": "1250000000"}


@pytest.fixture
def raw(store_url: str) -> Iterator[Engine]:
    """A plain engine on the test's store, to look at (or tamper with) what the store wrote."""
    url = store_url if "://" in store_url else f"sqlite:///{store_url}"
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    yield engine
    engine.dispose()


def version(engine: Engine) -> tuple[str, ...]:
    with engine.connect() as conn:
        return context(conn).get_current_heads()


def context(conn: Connection) -> MigrationContext:
    return MigrationContext.configure(conn, opts={"version_table": migrations.VERSION_TABLE})


def test_a_new_store_is_at_head_with_exactly_the_tables_the_store_queries(open_store: object, raw: Engine,
                                                                          store_url: str) -> None:
    Store(store_url).close()
    Store(store_url).close()  # opening it again changes nothing
    assert version(raw) == (migrations.head(),) == ("0009",)
    with raw.connect() as conn:
        assert compare_metadata(context(conn), metadata) == []


def hand_written_steps() -> list[tuple[str, str]]:
    parts = re.split(r"^-- migration: (\S+)\n", HAND_WRITTEN.read_text(), flags=re.MULTILINE)
    return list(zip(parts[1::2], parts[2::2], strict=True))


def old_store(path: Path, applied: int) -> None:
    """A store as the hand-written migrations left it after the first ``applied`` steps, holding one job."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    for name, script in hand_written_steps()[:applied]:
        db.executescript(script)
        db.execute("INSERT INTO migrations VALUES (?, strftime('%s','now'))", (name,))
    if applied:
        spec = CLEAN_SPEC if applied >= 4 else SEEDED_SPEC
        db.execute("INSERT INTO jobs (job_id, name, state, spec_json, plan_json, cloud_json, created_at, updated_at,"
                   " deadline, lease_owner, lease_token, lease_expires)"
                   " VALUES ('job-old', 'old', 'RUNNING', ?, ?, ?, 1, 2, 3, 'ctl', 4, 50)",
                   (json.dumps(spec), json.dumps(PLAN), json.dumps(TARGET)))
        db.execute("INSERT INTO events (job_id, at, kind, detail) VALUES ('job-old', 1, 'note', 'before')")
        db.execute("INSERT INTO events (job_id, at, kind, from_state, to_state, detail)"
                   " VALUES ('job-old', 1.5, 'transition', 'BOOTING', 'RUNNING', 'the agents report')")
        db.execute("INSERT INTO nodes (job_id, attempt, node, client_token, zone, instance_type, charge_type, state)"
                   " VALUES ('job-old', 1, 0, 'tok', 'z', 't', 'SPOTPAID', 'running')")
    db.close()


@pytest.mark.parametrize("applied", [1, 2, 3, 4])
def test_a_store_of_the_hand_written_migrations_upgrades_in_place(tmp_path: Path, applied: int) -> None:
    path = tmp_path / "state.db"
    old_store(path, applied)
    store = Store(path)
    try:
        job = store.get("job-old")
        assert job is not None and job.spec == JobSpec.model_validate(CLEAN_SPEC)  # 0004's fix, applied if missing
        assert (job.state, job.source_dir, job.settings, job.lease_owner, job.lease_token) == (
            JobState.RUNNING, "", Settings(), "ctl", 4)
        assert job.entered_at == 1.5 and job.keys_expire_at is None  # 0003: from its latest transition
        assert job.cancel_checkpoint and job.fingerprint is None  # 0004, 0005
        [node] = store.nodes("job-old")
        assert node.charge_type.value == "SPOTPAID" and node.on_demand_price_per_hour is None
        assert node.cost_source is None and node.training_seconds is None  # 0006: billed before it, not known
        store.put_node(4, NodeRecord(**{**node.__dict__, "on_demand_price_per_hour": 9.0}))
        assert store.nodes("job-old")[0].on_demand_price_per_hour == 9.0
        store.note("job-old", 4, "note", "after", 60)
        assert [(e.id, e.detail) for e in store.events("job-old")] == [(1, "before"), (2, "the agents report"),
                                                                      (3, "after")]
        PoolStore(store).add(PoolInstance("ins-1", "p", "z", "t", None, 1.0))
        store.register_controller("ctl", 60, {})
        [(claimed, token)] = store.claim("other", ttl=30, now=60, limit=5)  # ctl's lease expired at 50
        assert claimed == "job-old" and token != 4
    finally:
        store.close()
    db = sqlite3.connect(path)
    try:
        assert db.execute(f"SELECT version_num FROM {migrations.VERSION_TABLE}").fetchall() == [(migrations.head(),)]
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "migrations" not in tables and {"controllers", "pool_instances"} <= tables
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        db.close()


def test_an_empty_file_of_the_old_code_becomes_a_new_store(tmp_path: Path) -> None:
    old_store(tmp_path / "state.db", applied=0)  # created, then the process died before the first migration
    store = Store(tmp_path / "state.db")
    try:
        store.create_job(new_job("job-1", "n", deadline=2), now=1)
        assert [j.job_id for j in store.list_jobs()] == ["job-1"]
    finally:
        store.close()


def test_a_store_of_a_newer_schema_is_refused_and_left_as_it_is(store_url: str, raw: Engine) -> None:
    store = Store(store_url)
    store.create_job(new_job("job-1", "n", deadline=2), now=1)
    store.close()
    with raw.begin() as conn:  # what a later cvmjob's revision 0099 would leave
        conn.execute(text(f"UPDATE {migrations.VERSION_TABLE} SET version_num = '0099'"))
        conn.execute(text("CREATE TABLE from_the_future (x INTEGER)"))
        conn.execute(text("DROP INDEX jobs_claim"))
    with raw.connect() as conn:
        before = (sorted(inspect(conn).get_table_names()), inspect(conn).get_indexes("jobs"))
    with pytest.raises(StoreError) as refused:
        Store(store_url)
    message = str(refused.value)
    assert "\n" not in message
    assert "was written by a newer cvmjob (schema 0099); upgrade cvmjob or point CVMJOB_DB elsewhere" in message
    assert version(raw) == ("0099",)
    with raw.connect() as conn:
        assert (sorted(inspect(conn).get_table_names()), inspect(conn).get_indexes("jobs")) == before
        assert conn.execute(text("SELECT job_id FROM jobs")).all() == [("job-1",)]


def test_stores_opened_for_the_first_time_at_once_are_migrated_once(store_url: str, raw: Engine) -> None:
    opened: list[Store] = []
    errors: list[BaseException] = []
    start = threading.Barrier(3)

    def open_store() -> None:
        try:
            start.wait()
            opened.append(Store(store_url))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_store) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for store in opened:
        store.close()
    assert not errors and len(opened) == 3
    assert version(raw) == (migrations.head(),)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_an_unreachable_postgresql_is_one_clear_error() -> None:
    with pytest.raises(StoreError) as refused:
        Store(f"postgresql://cvmjob:s3cret@127.0.0.1:{closed_port()}/cvmjob")
    message = str(refused.value)
    assert "\n" not in message and "s3cret" not in message
    assert message.startswith("cannot use the store postgresql://cvmjob:***@127.0.0.1:")
    assert "check that the server is up and CVMJOB_DB names it" in message


@pytest.mark.postgres
def test_a_postgresql_database_cvmjob_may_not_create_tables_in_is_one_clear_error(postgres_url: str) -> None:
    with fresh_database(postgres_url) as url, psycopg.connect(url, autocommit=True) as admin:
        admin.execute("DROP ROLE IF EXISTS cvmjob_reader")
        admin.execute("CREATE ROLE cvmjob_reader LOGIN")  # PostgreSQL 15: no CREATE on schema public
        try:
            with pytest.raises(StoreError) as refused:
                Store(url.replace("postgresql://postgres@", "postgresql://cvmjob_reader@"))
            message = str(refused.value)
            assert "\n" not in message and "permission denied for schema public" in message
            assert "cvmjob needs a database it may create tables in" in message
            assert admin.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone() == (0,)
        finally:
            admin.execute("DROP OWNED BY cvmjob_reader")
            admin.execute("DROP ROLE cvmjob_reader")


def test_a_sqlite_file_that_cannot_be_created_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "home").write_text("a file, not a folder")
    with pytest.raises(StoreError) as refused:
        Store(tmp_path / "home" / "state.db")
    message = str(refused.value)
    assert "\n" not in message and str(tmp_path / "home" / "state.db") in message
    assert "set CVMJOB_DB or CVMJOB_HOME to a place cvmjob can write" in message


@pytest.mark.parametrize(("where", "message"), [
    ("mysql://u:pw@127.0.0.1/db", "mysql://u:***@127.0.0.1/db: cvmjob keeps its state in SQLite or PostgreSQL"),
    ("not a url://", "'not a url://' is neither a path nor a sqlite:// or postgresql:// URL"),
    ("sqlite://", "sqlite://: a SQLite store is a file (sqlite:///relative/path or sqlite:////absolute/path)"),
])
def test_a_store_url_of_another_kind_is_refused(where: str, message: str) -> None:
    with pytest.raises(StoreError) as refused:
        Store(where)
    assert str(refused.value) == message


def test_a_store_of_an_earlier_release_moves_its_revision_and_shares_the_database_with_optuna(
        store_url: str, raw: Engine) -> None:
    """Releases before the sweeps kept the store's revision in alembic_version, which Optuna's RDB storage (a
    sweep's study, in the same database) uses for its own: the store moves its own out, and both open."""
    import optuna

    Store(store_url).close()
    with raw.begin() as conn:  # where an earlier release kept it
        conn.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)"))
        conn.execute(text(f"INSERT INTO alembic_version SELECT version_num FROM {migrations.VERSION_TABLE}"))
        conn.execute(text(f"DROP TABLE {migrations.VERSION_TABLE}"))
    Store(store_url).close()
    assert version(raw) == (migrations.head(),)
    with raw.connect() as conn:
        assert not inspect(conn).has_table("alembic_version")
    storage = optuna.storages.RDBStorage(raw.url.render_as_string(hide_password=False))
    try:
        optuna.create_study(study_name="s", storage=storage).optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)
        store = Store(store_url)  # Optuna's revision in alembic_version is not the store's concern
        store.close()
        assert version(raw) == (migrations.head(),)
        assert len(optuna.load_study(study_name="s", storage=storage).trials) == 1
    finally:
        storage.engine.dispose()  # its pooled connections, closed now rather than by the garbage collector


def test_the_head_read_without_alembic_is_alembics() -> None:
    # The fast path of upgrade(): a store at this revision is opened without importing Alembic.
    assert migrations._newest() == migrations.head()


def test_opening_a_store_at_head_imports_no_alembic(tmp_path: Path) -> None:
    Store(str(tmp_path / "state.db"))
    probe = ("import sys; from orchestrator.state.store import Store; Store(sys.argv[1]); "
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))")
    out = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "state.db")], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]", out


def test_a_store_at_0006_keeps_its_leases_and_takes_63_bit_tokens(store_url: str, raw: Engine) -> None:
    """Revision 0007: PostgreSQL's lease_token was an INTEGER (32 bits), too small for a random 63-bit token."""
    from alembic import command

    config = migrations._config()
    with raw.begin() as conn:
        config.attributes["connection"] = conn
        config.attributes["version_table"] = migrations.VERSION_TABLE
        command.upgrade(config, "0006")
        conn.execute(text("INSERT INTO jobs (job_id, name, state, spec_json, plan_json, cloud_json, created_at,"
                          " updated_at, deadline, lease_owner, lease_token, lease_expires)"
                          " VALUES ('job-old', 'old', 'RUNNING', :spec, :plan, :cloud, 1, 2, 3, 'ctl', 4, 50)"),
                     {"spec": json.dumps(CLEAN_SPEC), "plan": json.dumps(PLAN), "cloud": json.dumps(TARGET)})
    store = Store(store_url)
    try:
        assert version(raw) == ("0009",)
        job = store.get("job-old")
        assert job is not None and (job.lease_owner, job.lease_token) == ("ctl", 4)
        store.note("job-old", 4, "note", "ctl still holds it", 10)  # its holder's token still passes
        token = store.acquire("job-old", "other", ttl=30, now=60)
        assert token != 4
        store.note("job-old", token, "note", "taken over", 60)
        assert store.get("job-old").lease_token == token  # type: ignore[union-attr]
    finally:
        store.close()
    with raw.connect() as conn:
        assert compare_metadata(context(conn), metadata) == []
