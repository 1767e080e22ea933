"""The notifications to send (state/outbox.py): recorded with the transition they tell of, marked sent after, so a
killed controller or a replica taking over sends each one once.

Revision ID: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "notifications",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("subject", sa.Text, nullable=False),
        sa.Column("key", sa.Text, nullable=False),
        sa.Column("event", sa.Text, nullable=False),
        sa.Column("target", sa.Text, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("state", sa.Text, nullable=False, server_default="pending"),
        sa.Column("tries", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("next_at", sa.Float, nullable=False),
        sa.Column("claimed_by", sa.Text),
        sa.Column("claimed_until", sa.Float, nullable=False, server_default=sa.text("0")),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("sent_at", sa.Float),
        sa.Column("last_error", sa.Text, nullable=False, server_default=""),
        sa.UniqueConstraint("key", "target", name="notifications_once"),
        sqlite_autoincrement=True,
    )
    op.create_index("notifications_due", "notifications", ["state", "next_at"])
