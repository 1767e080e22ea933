"""Whether a requested cancel wants the agents' emergency checkpoint first (`cvmjob cancel --no-checkpoint`, a
pruned sweep trial: nothing will resume it, and its instance should go at once).

Revision ID: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("cancel_checkpoint", sa.Integer, nullable=False, server_default=sa.text("1")))
