"""What decide() needs to know that only the executor saw: when the agents' short-lived keys were issued and
expire, and why CreateImage was refused (the executor used to keep the first in memory and act on the second).

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
