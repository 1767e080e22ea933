"""Many controllers on one store: the replicas' table, and an index for claiming jobs by state and lease expiry.

Revision ID: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "controllers",
        sa.Column("owner", sa.Text, primary_key=True),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("beat_at", sa.Float, nullable=False),
        sa.Column("info_json", sa.Text, nullable=False, server_default="{}"),
    )
    op.create_index("jobs_claim", "jobs", ["state", "lease_expires"])
