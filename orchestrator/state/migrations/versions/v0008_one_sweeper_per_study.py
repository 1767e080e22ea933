"""The lease of each study's one `cvmjob sweep run` (store.SweeperLeases): the study, its holder, a random fencing
token and when the lease runs out. It was a study attribute in Optuna's tables, read and then written, so two runs
started together both took a study over and told its trials twice.

Revision ID: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sweepers",
        sa.Column("study", sa.Text, primary_key=True),
        sa.Column("owner", sa.Text, nullable=False),
        sa.Column("token", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("expires", sa.Float, nullable=False),
    )
