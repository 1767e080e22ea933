"""Fencing tokens are random 63-bit numbers drawn at each taking of a lease, no longer a counter (a commit lost by
a PostgreSQL failover let a counter hand one token to two controllers): PostgreSQL's column becomes BIGINT.
SQLite's INTEGER already holds 64 bits, and its tables are left as they are (SQLite cannot alter a column's type
without copying the table).

Revision ID: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.alter_column("jobs", "lease_token", type_=sa.BigInteger(), existing_type=sa.Integer(),
                        existing_nullable=False, existing_server_default=sa.text("0"))
