"""What decide() reads, on the job's row: when the agents' short-lived keys were issued and expire, why
CreateImage was refused (the executor used to keep the first in memory and act on the second itself), and when
the job entered its state (the latest transition's time, which every round looked up among the events).

Revision ID: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("keys_issued_at", sa.Float))
    op.add_column("jobs", sa.Column("keys_expire_at", sa.Float))
    op.add_column("jobs", sa.Column("image_error", sa.Text))
    op.add_column("jobs", sa.Column("entered_at", sa.Float, nullable=False, server_default=sa.text("0")))
    op.execute(
        "UPDATE jobs SET entered_at = COALESCE((SELECT MAX(events.at) FROM events WHERE events.job_id = jobs.job_id"
        " AND events.kind = 'transition'), jobs.created_at)"
    )
