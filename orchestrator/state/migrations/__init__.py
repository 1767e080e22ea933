"""The store's schema migrations: Alembic revisions in ``versions/``, run by the store on open (no alembic.ini).

A new store is upgraded to head; a store the hand-written migrations wrote is caught up (legacy.py), stamped at
0001 and upgraded; a store at a revision this code does not know was written by a newer cvmjob and is refused
before anything changes."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, inspect, text

from . import legacy

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

# Written by the first Alembic revision: the schema that the hand-written migrations left.
LEGACY_REVISION = "0001"
# The store's revision has a table of its own: Optuna's RDB storage (sweeps) shares the database and keeps its
# Alembic revision in Alembic's default table, ``alembic_version``. Releases before the sweeps kept the store's
# there too; upgrade() moves it.
VERSION_TABLE = "cvmjob_schema_version"
_SHARED_VERSION_TABLE = "alembic_version"
# Any constant both replicas agree on: two processes opening a new PostgreSQL store at once migrate one at a time.
_PG_LOCK_KEY = 0x63766D6A6F62  # "cvmjob"


class NewerSchema(Exception):
    """The store is at a revision this code does not have."""

    def __init__(self, revision: str) -> None:
        super().__init__(revision)
        self.revision = revision


def _config() -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(Path(__file__).parent))
    config.set_main_option("path_separator", "os")
    return config


@cache
def _scripts() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_config())


_DECLARED = re.compile(r'^(down_revision|revision) = (?:"(\w+)"|None)$', re.MULTILINE)


@cache
def _newest() -> str | None:
    """The head, read from the revisions' own declarations without Alembic (a tenth of a second of CPU at every
    start of every cvmjob process, for the answer "at head" nearly every time); None when they do not make one
    chain (upgrade() then asks Alembic)."""
    revisions, parents = set(), set()
    for path in (Path(__file__).parent / "versions").glob("*.py"):
        declared = dict((name, value) for name, value in _DECLARED.findall(path.read_text()))
        if "revision" in declared:
            revisions.add(declared["revision"])
            parents.add(declared.get("down_revision", ""))
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def head() -> str:
    revision = _scripts().get_current_head()
    assert revision is not None
    return revision


def at_head(conn: Connection) -> bool:
    """The store is at this code's head already (most opens): upgrade() would change nothing. A read only."""
    return _at(conn, _newest())


def upgrade(conn: Connection) -> None:
    """Bring the schema to head inside ``conn``'s transaction (the caller's: all or nothing). Raises NewerSchema,
    having changed nothing, when the store is ahead of this code."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
    if _at(conn, _newest()):
        return
    from alembic import command
    from alembic.runtime.migration import MigrationContext

    context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
    known = {script.revision for script in _scripts().walk_revisions()}
    current = context.get_current_heads() or _move_from_shared_table(conn, context, known)
    for revision in current:
        if revision not in known:
            raise NewerSchema(revision)
    if current == (head(),):
        return
    if not current and legacy.is_legacy(conn) and legacy.catch_up(conn):
        context.stamp(_scripts(), LEGACY_REVISION)
    config = _config()
    config.attributes["connection"] = conn
    config.attributes["version_table"] = VERSION_TABLE
    command.upgrade(config, "head")


def _at(conn: Connection, revision: str | None) -> bool:
    """The store is at ``revision`` (and only there)."""
    if revision is None or not inspect(conn).has_table(VERSION_TABLE):
        return False
    return [row[0] for row in conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}"))] == [revision]


def _move_from_shared_table(conn: Connection, context: MigrationContext, known: set[str]) -> tuple[str, ...]:
    """The store's revision as an earlier release left it in ``alembic_version``, moved to VERSION_TABLE (in the
    caller's transaction); the rows that are not the store's (Optuna's) stay."""
    if not inspect(conn).has_table(_SHARED_VERSION_TABLE):
        return ()
    from alembic.runtime.migration import MigrationContext

    shared = MigrationContext.configure(conn).get_current_heads()
    ours = tuple(revision for revision in shared if revision in known)
    if not ours:
        return ()
    for revision in ours:
        context.stamp(_scripts(), revision)
        conn.execute(text(f"DELETE FROM {_SHARED_VERSION_TABLE} WHERE version_num = :r"), {"r": revision})
    if len(ours) == len(shared):
        conn.execute(text(f"DROP TABLE {_SHARED_VERSION_TABLE}"))
    return ours
