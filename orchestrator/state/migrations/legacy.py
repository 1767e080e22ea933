"""Stores written before Alembic. Their schema came from four hand-written steps, each recorded by name in a
``migrations`` table; all four together are revision 0001. A store that lacks the later steps gets their effects
here, so that it can be stamped at 0001 and go on with Alembic. Only SQLite files were ever written that way."""

from __future__ import annotations

from sqlalchemy import Connection, inspect, text

TABLE = "migrations"

# What each step after the first did, as it did it (0001 created the tables; a file without it holds nothing).
_LATER_STEPS: dict[str, list[str]] = {
    "0002_job_source_dir": [
        "ALTER TABLE jobs ADD COLUMN source_dir TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE jobs ADD COLUMN settings_json TEXT NOT NULL DEFAULT '{}'",
    ],
    "0003_reserved_pool": [
        "CREATE TABLE pool_instances (instance_id TEXT PRIMARY KEY, pool TEXT NOT NULL, zone TEXT NOT NULL,"
        " instance_type TEXT NOT NULL, job_id TEXT, since REAL NOT NULL)",
        "ALTER TABLE nodes ADD COLUMN on_demand_price_per_hour REAL",
    ],
    # data[].emulator_seed left the job spec: stored specs drop it so that jobs submitted before still validate.
    "0004_drop_emulator_seed": [
        "UPDATE jobs SET spec_json = ("
        " SELECT json_set(jobs.spec_json, '$.data', json_group_array(json(json_remove(d.value, '$.emulator_seed'))))"
        " FROM json_each(jobs.spec_json, '$.data') AS d"
        ") WHERE spec_json LIKE '%\"emulator_seed\"%'",
    ],
}


def is_legacy(conn: Connection) -> bool:
    return inspect(conn).has_table(TABLE)


def catch_up(conn: Connection) -> bool:
    """Apply the steps the store lacks and drop the ``migrations`` table; True when it holds cvmjob's tables
    (then it is at revision 0001), False when it is an empty file the old code created (start from nothing)."""
    applied = {name for (name,) in conn.execute(text(f"SELECT name FROM {TABLE}"))}
    holds_tables = "0001_initial" in applied
    if holds_tables:
        for name, statements in _LATER_STEPS.items():
            if name not in applied:
                for statement in statements:
                    conn.execute(text(statement))
    conn.execute(text(f"DROP TABLE {TABLE}"))
    return holds_tables
